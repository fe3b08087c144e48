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

// An adaptive limit's bounds are inclusive: Min and Max may equal the
// initial limit, Max the largest limit there is (2^30), a Gradient's
// Smoothing 1 and its LongWindow 1; one past any of them is refused.
func TestAdaptiveLimitBoundsInclusive(t *testing.T) {
	for _, a := range []bw.AdaptiveLimit{
		bw.AIMD{Min: 4}, bw.AIMD{Max: 1 << 30}, bw.Gradient{Min: 4, Max: 4}, bw.Gradient{Max: 1 << 30},
		bw.Gradient{Smoothing: 1}, bw.Gradient{LongWindow: 1},
	} {
		if _, err := bw.NewBulkheads(4, bw.WithAdaptiveLimit(a)); err != nil {
			t.Errorf("%+v on a limit of 4: %v", a, err)
		}
	}
	for _, a := range []bw.AdaptiveLimit{
		bw.AIMD{Min: 5}, bw.AIMD{Max: 1<<30 + 1}, bw.Gradient{Max: 3}, bw.Gradient{Smoothing: 1.01}, bw.Gradient{LongWindow: -1},
	} {
		if _, err := bw.NewBulkheads(4, bw.WithAdaptiveLimit(a)); err == nil {
			t.Errorf("%+v on a limit of 4 accepted", a)
		}
	}
}

// Without a Max, an adaptive limit that sees no drop grows to ten times
// its initial limit, and no further.
func TestAdaptiveLimitDefaultMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 4, bw.WithMaxQueue(1000), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.AIMD{}))
		fast := func(int) time.Duration { return 20 * time.Millisecond }
		if s := simulate(b, 60, fast, 20*time.Second, 15*time.Second); slices.Min(s) != 40 || slices.Max(s) != 40 {
			t.Fatalf("AIMD without drops from 4: the limit was at %s, want 40", describe(s))
		}
	})
}

// drive runs workers that each take a slot of b, hold it for latency and
// end it with done (Release or Drop), for d; it returns b's limit then.
func drive(b keyBulkhead, workers int, latency, d time.Duration, drop bool) int {
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
				time.Sleep(latency)
				if drop {
					s.Drop()
				} else {
					s.Release()
				}
			}
		})
	}
	wg.Wait()
	return b.Limit()
}

// An AIMD limit grows after a window in which at least half of it was in
// use, exactly half included, and a slot held exactly Timeout is no drop.
func TestAIMDBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		half := newBulkhead(t, 10, bw.WithMaxQueue(100), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.AIMD{}))
		if l := drive(half, 5, 10*time.Millisecond, 10*time.Second, false); l != 11 {
			t.Errorf("5 in flight of 10: limit %d, want 11 (grown once, then less than half in use)", l)
		}
		timed := newBulkhead(t, 10, bw.WithMaxQueue(100), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.AIMD{Max: 20, Timeout: 100 * time.Millisecond}))
		if l := drive(timed, 10, 100*time.Millisecond, 30*time.Second, false); l != 20 {
			t.Errorf("slots held exactly the timeout: limit %d, want its max 20", l)
		}
	})
}

// A Gradient limit, like AIMD, learns from a window in which exactly half
// of it was in use: at a steady latency it grows once (by its queue of 1,
// unsmoothed), then finds less than half in use and stays.
func TestGradientGrowsAtExactlyHalf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := func(float64) float64 { return 1 }
		b := newBulkhead(t, 10, bw.WithMaxQueue(100), bw.WithMaxWait(time.Hour),
			bw.WithAdaptiveLimit(bw.Gradient{Smoothing: 1, QueueSize: one, ProbeInterval: time.Hour}))
		if l := drive(b, 5, 10*time.Millisecond, 10*time.Second, false); l != 11 {
			t.Errorf("5 in flight of 10 at a steady latency: limit %d, want 11 (grown once)", l)
		}
	})
}

// A Gradient limit whose every slot reports a drop has no latency to learn
// from: it shrinks, never grows.
func TestGradientAllDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 20, bw.WithMaxQueue(100), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.Gradient{}))
		if l := drive(b, 20, 10*time.Millisecond, 10*time.Second, true); l >= 20 {
			t.Errorf("every slot dropped: limit %d, want below 20", l)
		}
	})
}

// A Gradient limit probes only after a window that showed queueing: at a
// steady latency it climbs to its Max and stays there, minute after
// minute.
func TestGradientProbesOnlyAfterQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 20, bw.WithMaxQueue(1000), bw.WithMaxWait(time.Hour), bw.WithAdaptiveLimit(bw.Gradient{Max: 40}))
		steady := func(int) time.Duration { return 20 * time.Millisecond }
		if s := simulate(b, 60, steady, 3*time.Minute, 10*time.Second); slices.Min(s) != 40 {
			t.Fatalf("steady latency: the limit was at %s, want 40 throughout", describe(s))
		}
	})
}

// The long-term latency follows windows up to 10 % slower than itself:
// an upstream that became a little slower for good is the new normal, and
// the limit grows back after a slight dip, without a probe (none is due
// before the ProbeInterval of an hour).
func TestGradientLearnsASlightlySlowerUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := func(float64) float64 { return 1 }
		b := newBulkhead(t, 20, bw.WithMaxQueue(1000), bw.WithMaxWait(time.Hour),
			bw.WithAdaptiveLimit(bw.Gradient{Max: 40, LongWindow: 10, ProbeInterval: time.Hour, QueueSize: one}))
		fast := func(int) time.Duration { return 50 * time.Millisecond }
		if s := simulate(b, 60, fast, 30*time.Second, 20*time.Second); slices.Min(s) != 40 {
			t.Fatalf("at 50 ms: the limit was at %s, want 40", describe(s))
		}
		slower := func(int) time.Duration { return 54 * time.Millisecond }
		s := simulate(b, 60, slower, time.Minute, 0)
		if slices.Min(s) < 30 || slices.Min(s[len(s)-100:]) != 40 {
			t.Fatalf("at 54 ms for good: the limit was at %s, want at least 30, and back at 40 for the last 10 s", describe(s))
		}
	})
}

// A first window with a drop shrinks a Gradient limit by 2 % (a gradient
// of 0.9, smoothed): the first probe is a ProbeInterval away, not due at
// once.
func TestGradientFirstWindowWithADrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 100, bw.WithAdaptiveLimit(bw.Gradient{}))
		slots := make([]bw.Slot, 100)
		for i := range slots {
			s, err := b.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			slots[i] = s
		}
		time.Sleep(10 * time.Millisecond)
		slots[0].Drop()
		for _, s := range slots[1:] {
			s.Release()
		}
		if l := b.Limit(); l != 98 {
			t.Fatalf("after a window of 100 with one drop: limit %d, want 98", l)
		}
	})
}

// A Gradient limit's probe is due ProbeInterval after its first window, to
// the nanosecond: a window ending then that shows queueing drops the limit
// to QueueSize(limit).
func TestGradientProbeDueAfterProbeInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 100, bw.WithAdaptiveLimit(bw.Gradient{ProbeInterval: time.Minute}))
		holdWindow(t, b, 100, 10*time.Millisecond, 0) // long: 10 ms; the limit grows to 102
		if l := b.Limit(); l != 102 {
			t.Fatalf("after the first window: limit %d, want 102", l)
		}
		time.Sleep(time.Minute - 20*time.Millisecond)
		holdWindow(t, b, 102, 20*time.Millisecond, 0) // twice as slow, ending a minute after the first
		if l := b.Limit(); l != 9 {
			t.Fatalf("after a slow window when the probe is due: limit %d, want √93 = 9", l)
		}
	})
}

// A window with too little load to learn from leaves a Gradient limit's
// probe due: the first window that shows queueing after it probes.
func TestGradientLowLoadKeepsTheProbeDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 100, bw.WithAdaptiveLimit(bw.Gradient{ProbeInterval: time.Minute}))
		holdWindow(t, b, 100, 10*time.Millisecond, 0) // long: 10 ms; the limit grows to 102; a probe is due in a minute
		time.Sleep(time.Minute)
		for range 10 { // 102 samples, at most 10 in flight: no load to learn from
			holdWindow(t, b, 10, 10*time.Millisecond, 0)
		}
		holdWindow(t, b, 2, 10*time.Millisecond, 0)
		if l := b.Limit(); l != 102 {
			t.Fatalf("after a window at low load: limit %d, want 102", l)
		}
		holdWindow(t, b, 102, 20*time.Millisecond, 0) // twice as slow: the probe, due since the low-load window
		if l := b.Limit(); l != 9 {
			t.Fatalf("after a slow window with the probe due: limit %d, want √93 = 9", l)
		}
	})
}

// A Gradient limit at its Min measures its long-term latency afresh: an
// upstream that became slower while the limit could shrink no further is
// the new normal, and the limit grows again from there.
func TestGradientAtMinRelearnsTheLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := func(float64) float64 { return 1 }
		b := newBulkhead(t, 10, bw.WithAdaptiveLimit(bw.Gradient{Min: 10, Smoothing: 1, QueueSize: one, ProbeInterval: time.Hour}))
		holdWindow(t, b, 10, 10*time.Millisecond, 1) // long: 10 ms; the drop keeps the limit at its Min
		if l := b.Limit(); l != 10 {
			t.Fatalf("after a window with a drop: limit %d, want its Min 10", l)
		}
		holdWindow(t, b, 10, 20*time.Millisecond, 0) // twice as slow, at Min: long becomes 20 ms
		if l := b.Limit(); l != 11 {
			t.Fatalf("after a slower window at Min: limit %d, want 11 (grown by its queue of 1)", l)
		}
	})
}

// A window up to 10 % slower than the long-term latency, 10 % included,
// teaches it: with a LongWindow of 1 the long-term latency becomes the
// window's, and the limit grows on.
func TestGradientLearnsAWindowTenPercentSlower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := func(float64) float64 { return 1 }
		b := newBulkhead(t, 10, bw.WithAdaptiveLimit(bw.Gradient{LongWindow: 1, Smoothing: 1, QueueSize: one, ProbeInterval: time.Hour}))
		holdWindow(t, b, 10, 10*time.Millisecond, 0) // long: 10 ms
		if l := b.Limit(); l != 11 {
			t.Fatalf("after the first window: limit %d, want 11", l)
		}
		holdWindow(t, b, 11, 11*time.Millisecond, 0) // exactly 10 % slower
		if l := b.Limit(); l != 12 {
			t.Fatalf("after a window 10 %% slower: limit %d, want 12 (the latency learnt, grown by 1)", l)
		}
	})
}

// holdWindow takes n slots of b, holds them for hold and gives them back,
// the first drops of them as drops.
func holdWindow(t *testing.T, b keyBulkhead, n int, hold time.Duration, drops int) {
	t.Helper()
	slots := make([]bw.Slot, n)
	for i := range slots {
		s, err := b.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		slots[i] = s
	}
	time.Sleep(hold)
	for i, s := range slots {
		if i < drops {
			s.Drop()
		} else {
			s.Release()
		}
	}
}
