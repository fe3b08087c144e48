package breakwater_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// simulate drives a bulkhead with workers against a simulated upstream
// whose latency for a request depends on the number in flight when it
// starts, and samples the limit every 100 ms from `from` to `to`.
func simulate(b keyBulkhead, workers int, latency func(inFlight int) time.Duration, d, from time.Duration) (samples []int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				s, err := b.Acquire(ctx)
				if err != nil {
					continue
				}
				time.Sleep(latency(b.InFlight()))
				s.Release()
			}
		})
	}
	time.Sleep(from)
	for ctx.Err() == nil {
		samples = append(samples, b.Limit())
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	return samples
}

// settled reports whether the limit never exceeded hi and spent at least
// 90 % of the samples within [lo, hi]: a Gradient limit dips for about a
// second when it probes the no-load latency.
func settled(samples []int, lo, hi int) bool {
	in := 0
	for _, v := range samples {
		if v >= lo && v <= hi {
			in++
		}
	}
	return len(samples) > 0 && slices.Max(samples) <= hi && in*10 >= 9*len(samples)
}

func describe(samples []int) string {
	s := slices.Sorted(slices.Values(samples))
	return fmt.Sprintf("min %d, median %d, max %d over %d samples", s[0], s[len(s)/2], s[len(s)-1], len(s))
}

func TestGradientSettlesAtTheKneeAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 10, bw.WithMaxQueue(1000), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.Gradient{Max: 200}))
		noise := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		jitter := func(d time.Duration) time.Duration { // ±10 %
			mu.Lock()
			defer mu.Unlock()
			return time.Duration(float64(d) * (0.9 + 0.2*noise.Float64()))
		}
		// Up to 20 requests at once the upstream answers in 50 ms; each
		// one beyond 20 adds 10 % to every request's latency. The limit
		// settles where about √limit requests queue: near 22.6.
		knee := func(c int) time.Duration {
			return jitter(time.Duration(float64(50*time.Millisecond) * (1 + 0.1*float64(max(0, c-20)))))
		}
		if s := simulate(b, 60, knee, 40*time.Second, 10*time.Second); !settled(s, 16, 24) {
			t.Fatalf("steep knee at 20: the limit was at %s, want within 20 %% of 20", describe(s))
		}
		// The latency drops (the upstream scaled out): the limit grows
		// until the workers, not the limit, bound the concurrency.
		flat := func(int) time.Duration { return jitter(50 * time.Millisecond) }
		if s := simulate(b, 60, flat, 20*time.Second, 10*time.Second); !settled(s, 60, 200) {
			t.Fatalf("after the latency dropped the limit was at %s, want it to recover above 60", describe(s))
		}
		// An upstream that serves 20 at once and queues the rest (latency
		// proportional to concurrency beyond 20) keeps about √limit
		// requests queued: the limit settles near 25.
		linear := func(c int) time.Duration {
			return jitter(time.Duration(float64(50*time.Millisecond) * max(1, float64(c)/20)))
		}
		if s := simulate(b, 60, linear, 60*time.Second, 30*time.Second); !settled(s, 22, 27) {
			t.Fatalf("queueing knee at 20: the limit was at %s, want about 25", describe(s))
		}
		// The upstream became slower for good (base latency × 1.5, knee
		// still 20): the probe re-measures the no-load latency, and the
		// limit settles near the knee again instead of staying low.
		slower := func(c int) time.Duration {
			return jitter(time.Duration(float64(75*time.Millisecond) * (1 + 0.1*float64(max(0, c-20)))))
		}
		if s := simulate(b, 60, slower, 4*time.Minute, 3*time.Minute); !settled(s, 16, 24) {
			t.Fatalf("slower upstream: the limit was at %s, want it back within 20 %% of 20", describe(s))
		}
	})
}

func TestAIMD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 10, bw.WithMaxQueue(1000), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.AIMD{Max: 50, Timeout: 100 * time.Millisecond}))
		// Beyond 20 in flight the upstream takes 200 ms: over the AIMD
		// timeout, a drop.
		knee := func(c int) time.Duration {
			if c > 20 {
				return 200 * time.Millisecond
			}
			return 20 * time.Millisecond
		}
		if s := simulate(b, 60, knee, 30*time.Second, 10*time.Second); !settled(s, 16, 22) || slices.Min(s) < 16 {
			t.Fatalf("AIMD around a knee at 20: the limit was at %s, want a sawtooth between 16 and 22", describe(s))
		}
		fast := func(int) time.Duration { return 20 * time.Millisecond }
		if s := simulate(b, 60, fast, 20*time.Second, 15*time.Second); slices.Min(s) != 50 || slices.Max(s) != 50 {
			t.Fatalf("AIMD without drops: the limit was at %s, want its max 50", describe(s))
		}
		slow := func(int) time.Duration { return 200 * time.Millisecond }
		if s := simulate(b, 60, slow, 60*time.Second, 50*time.Second); slices.Min(s) != 1 || slices.Max(s) != 1 {
			t.Fatalf("AIMD with every request dropped: the limit was at %s, want its min 1", describe(s))
		}
	})
}
