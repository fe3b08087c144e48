package window

import (
	"math"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const s = int64(time.Second)

// TestFailuresExact: up to 32 failures each one's time is kept, and a
// failure at t counts while t > now-within.
func TestFailuresExact(t *testing.T) {
	w := NewFailures(3, 10*time.Second)
	for i, at := range []int64{0, 1 * s, 2 * s} {
		if n := w.Add(at, 10*s); n != i+1 {
			t.Fatalf("failure %d: count %d", i+1, n)
		}
	}
	if n := w.Live(10*s-1, 10*s); n != 3 {
		t.Errorf("just before the first leaves: %d, want 3", n)
	}
	if n := w.Live(10*s, 10*s); n != 2 {
		t.Errorf("when the first leaves: %d, want 2", n)
	}
	if n := w.Add(11*s, 10*s); n != 2 {
		t.Errorf("a new failure after the second left: %d, want 2", n)
	}
	w.Clear()
	if n := w.Live(11*s, 10*s); n != 0 {
		t.Errorf("after Clear: %d", n)
	}
}

// TestFailuresBucketed: a large tolerate keeps 33 slots, and a failure
// counts for within to within·(1+1/32).
func TestFailuresBucketed(t *testing.T) {
	within := 32 * s
	w := NewFailures(1000, time.Duration(within))
	if len(w.slots) != exact+1 {
		t.Fatalf("%d slots, want %d", len(w.slots), exact+1)
	}
	for i := range 500 {
		w.Add(int64(i)*s/10, within) // 10 per second for 50 s
	}
	now := 50 * s
	got := w.Live(now, within)
	// Failures after now-within count, and those of the bucket that
	// straddles it: between 320 and 330 of them.
	if got < 320 || got > 330 {
		t.Errorf("%d failures counted, want 320 to 330", got)
	}
}

func TestRate(t *testing.T) {
	r := NewRate(10 * time.Second)
	r.Add(0, 2, 1)
	r.Add(5*s, 3, 0)
	if c, f := r.Sum(9 * s); c != 5 || f != 1 {
		t.Errorf("Sum = %d, %d; want 5, 1", c, f)
	}
	if c, f := r.Sum(10 * s); c != 3 || f != 0 {
		t.Errorf("after the first bucket left: %d, %d; want 3, 0", c, f)
	}
	if !r.Holds(9*s-1, 0) || r.Holds(9*s, 0) {
		t.Errorf("Holds: an addition at 0 is counted until 9 s, with a bucket to spare")
	}
}

// TestRateConcurrent adds from many goroutines at once; run with -race.
func TestRateConcurrent(t *testing.T) {
	r := NewRate(time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				r.Add(0, 1, 1)
			}
		}()
	}
	wg.Wait()
	if c, f := r.Sum(0); c != 8000 || f != 8000 {
		t.Errorf("Sum = %d, %d; want 8000, 8000", c, f)
	}
}

func TestShare(t *testing.T) {
	w := NewShare(10 * time.Second)
	if w.Success() {
		t.Error("a success counted with no failure in the window")
	}
	if f, c := w.Add(0); f != 1 || c != 1 {
		t.Errorf("first failure: %d of %d", f, c)
	}
	for range 3 {
		w.Success()
	}
	if f, c := w.Add(s); f != 2 || c != 5 {
		t.Errorf("second failure: %d of %d calls, want 2 of 5", f, c)
	}
	// Both failures leave the window: nothing is counted, and Quiet stops
	// counting successes.
	if f, c := w.Live(11 * s); f != 0 || c != 0 {
		t.Errorf("after the window: %d of %d", f, c)
	}
	w.Quiet(11 * s)
	if w.tracking.Load() {
		t.Error("still counting successes after Quiet with no failure left")
	}
	w.Add(12 * s)
	w.Clear()
	if f, _ := w.Live(12 * s); f != 0 || w.tracking.Load() {
		t.Error("Clear left counts")
	}
}

func TestLowerBound(t *testing.T) {
	for _, tc := range []struct {
		fails, calls int64
		want         float64
	}{
		{11, 11, 0.74}, {5, 5, 0.57}, {0, 10, 0}, {500, 1000, 0.47},
		{1, 1, 0.21}, {5, 10, 0.24}, {1, 100, 0.0018},
	} {
		if got := LowerBound(tc.fails, tc.calls); !(math.Abs(got-tc.want) <= 0.01) { // NaN fails too
			t.Errorf("LowerBound(%d, %d) = %.3f, want %.2f", tc.fails, tc.calls, got, tc.want)
		}
	}
	if LowerBound(1, 0) != 0 {
		t.Error("LowerBound of no calls")
	}
}

// TestRateRecyclingLosesNothing adds from many goroutines at once to a bucket
// that holds an older epoch: the addition that recycles it and those racing
// it all count, and the old epoch's counts are gone.
func TestRateRecyclingLosesNothing(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 50
	}
	for range rounds {
		r := NewRate(time.Second)
		r.Add(0, 5, 5)
		now := int64(time.Second) // the same bucket, Buckets epochs later
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 20 {
					r.Add(now, 1, 1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if c, f := r.Sum(now); c != 160 || f != 160 {
			t.Fatalf("Sum = %d, %d; want 160, 160", c, f)
		}
	}
}
