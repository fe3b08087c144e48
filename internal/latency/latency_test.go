package latency

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBucketsTileTheRange(t *testing.T) {
	var prevHi int64
	for i := range nBuckets {
		lo, hi := bounds(i)
		if lo != prevHi {
			t.Fatalf("bucket %d starts at %d, the previous one ended at %d", i, lo, prevHi)
		}
		if hi <= lo {
			t.Fatalf("bucket %d is empty: [%d, %d)", i, lo, hi)
		}
		for _, d := range []int64{lo, (lo + hi) / 2, hi - 1} {
			if got := bucket(d); got != i {
				t.Fatalf("bucket(%d) = %d, want %d (bounds [%d, %d))", d, got, i, lo, hi)
			}
		}
		if i > 0 && i < nBuckets-1 {
			if w := float64(hi-lo) / float64(lo); w > 0.25+1e-9 {
				t.Fatalf("bucket %d is %.0f%% wide, more than a quarter of its lower bound", i, w*100)
			}
		}
		prevHi = hi
	}
	if bucket(-5) != 0 || bucket(1<<62) != nBuckets-1 {
		t.Fatal("out-of-range durations do not land in the end buckets")
	}
}

// TestQuantileAccuracy compares the tracker's quantiles with the exact ones
// of the same samples: within the 25 % a bucket spans, and close to it
// where samples spread evenly.
func TestQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := New(10 * time.Second)
	var all []time.Duration
	for range 20000 {
		// 95 %: 5 ms ± 1 ms; 5 %: 200 ms ± 20 ms.
		d := 4*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Millisecond)))
		if rng.Float64() < 0.05 {
			d = 180*time.Millisecond + time.Duration(rng.Int64N(int64(40*time.Millisecond)))
		}
		all = append(all, d)
		tr.Record(int64(time.Second), d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := all[int(q*float64(len(all)))]
		got, ok := tr.Quantile(int64(time.Second), q, 1)
		if !ok {
			t.Fatalf("q%.2f: no answer", q)
		}
		if err := float64(got-want) / float64(want); err > 0.1 || err < -0.1 {
			t.Errorf("q%.2f = %s, exact %s (%.1f%% off)", q, got, want, err*100)
		}
	}
}

func TestQuantileNeedsMinCount(t *testing.T) {
	tr := New(time.Second)
	for range 19 {
		tr.Record(0, time.Millisecond)
	}
	if _, ok := tr.Quantile(0, 0.9, 20); ok {
		t.Fatal("answered with 19 durations, 20 required")
	}
	tr.Record(0, time.Millisecond)
	if _, ok := tr.Quantile(0, 0.9, 20); !ok {
		t.Fatal("no answer with 20 durations")
	}
	if n := tr.Count(0); n != 20 {
		t.Fatalf("Count = %d, want 20", n)
	}
	if _, ok := New(time.Second).Quantile(0, 0.5, 0); ok {
		t.Fatal("an empty tracker answered")
	}
}

// TestWindowsRotate: a query sees the current and the previous window, so
// durations older than two window lengths are forgotten and the tracker
// follows a change of latency.
func TestWindowsRotate(t *testing.T) {
	const w = int64(time.Second)
	tr := New(time.Second)
	for range 100 {
		tr.Record(0, 100*time.Millisecond)
	}
	if got, _ := tr.Quantile(w+w/2, 0.5, 1); got < 80*time.Millisecond {
		t.Fatalf("p50 in the next window = %s, want the previous window's 100ms", got)
	}
	for range 100 {
		tr.Record(2*w, time.Millisecond)
	}
	got, ok := tr.Quantile(2*w, 0.5, 1)
	if !ok || got > 2*time.Millisecond {
		t.Fatalf("p50 two windows later = %s (%v), want about 1ms: the old durations should be gone", got, ok)
	}
	if n := tr.Count(2 * w); n != 100 {
		t.Fatalf("Count = %d, want 100", n)
	}
	if n := tr.Count(4 * w); n != 0 {
		t.Fatalf("Count four windows on = %d, want 0", n)
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	tr := New(time.Second)
	var now int64
	allocs := testing.AllocsPerRun(1000, func() {
		now += int64(time.Millisecond)
		tr.Record(now, 5*time.Millisecond)
		tr.Quantile(now, 0.9, 1)
	})
	if allocs != 0 {
		t.Fatalf("Record and Quantile allocate %.1f times per run", allocs)
	}
}

func TestConcurrentRecord(t *testing.T) {
	tr := New(10 * time.Millisecond)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				tr.Record(int64(time.Since(start)), time.Duration(g*1000+i)*time.Microsecond)
				if i%100 == 0 {
					tr.Quantile(int64(time.Since(start)), 0.95, 1)
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkRecord(b *testing.B) {
	tr := New(10 * time.Second)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += 1000
			tr.Record(now, 5*time.Millisecond)
		}
	})
}

func BenchmarkQuantile(b *testing.B) {
	tr := New(10 * time.Second)
	for i := range 1000 {
		tr.Record(0, time.Duration(i)*time.Microsecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.Quantile(0, 0.9, 1)
	}
}
