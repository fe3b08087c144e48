package breakwater_test

import (
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	bw "github.com/breakwater-go/breakwater"
)

// admitsAt checks that b rejects until d from now and admits a probe at d,
// which it returns: an open breaker's end is exact, however its openings
// came one after another.
func admitsAt(t *testing.T, b *bw.Breaker, d time.Duration) bw.Permit {
	t.Helper()
	time.Sleep(d - time.Nanosecond)
	if _, err := b.Allow(); !errors.Is(err, bw.ErrCircuitOpen) {
		t.Fatalf("1 ns before the opening's end: %v, want ErrCircuitOpen", err)
	}
	time.Sleep(time.Nanosecond)
	p, err := b.Allow()
	if err != nil {
		t.Fatalf("at the opening's end: %v, want a probe", err)
	}
	return p
}

func TestOpenEndsExactly(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(b *bw.Breaker) time.Duration // opens b, returns when it ends
	}{
		{"once", func(b *bw.Breaker) time.Duration { b.Trip(3 * time.Second); return 3 * time.Second }},
		// A shorter opening than the one before, whose timer is still
		// pending, ends at its own end, not the earlier opening's.
		{"shortened", func(b *bw.Breaker) time.Duration {
			b.Trip(time.Hour)
			b.Reset()
			b.Trip(2 * time.Second)
			return 2 * time.Second
		}},
		// A longer opening than the one before, tripped while that one
		// runs, ends at its own end: the earlier timer hands over to it.
		{"extended", func(b *bw.Breaker) time.Duration {
			b.Trip(time.Second)
			time.Sleep(500 * time.Millisecond)
			b.Trip(time.Hour)
			return time.Hour
		}},
		// Openings that alternate: each ends at its own end.
		{"long, short, long", func(b *bw.Breaker) time.Duration {
			b.Trip(time.Hour)
			b.Reset()
			b.Trip(time.Second)
			b.Reset()
			b.Trip(time.Minute)
			return time.Minute
		}},
		// An opening shorter than the timer's lead.
		{"brief", func(b *bw.Breaker) time.Duration { b.Trip(time.Millisecond); return time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bs := newBreakers(t, bw.WithOpenJitter(0))
				b := bs.Get("k")
				admitsAt(t, b, tc.open(b)).Done(ok)
				// And again, after a reset.
				b.Reset()
				admitsAt(t, b, tc.open(b)).Done(ok)
			})
		})
	}
}

// A breaker opened by failures ends its opening exactly too, and so do
// the ones failed probes start.
func TestOpenEndsExactlyAfterFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(4*time.Second, time.Minute), bw.WithOpenJitter(0))
		failOnce(t, bs, "k")
		b := bs.Get("k")
		admitsAt(t, b, 4*time.Second).Done(fail) // reopens, for the open timeout while the outage is young
		admitsAt(t, b, 4*time.Second).Done(fail)
		admitsAt(t, b, 4*time.Second).Done(ok)
	})
}

// A breaker whose long opening was reset, and which nothing else holds any
// more (evicted, or its registry dropped), is freed at once: the timer that
// ends the opening holds it only weakly.
func TestPendingOpenEndKeepsNoBreaker(t *testing.T) {
	wb := trippedAndDropped(t)
	for range 3 {
		runtime.GC()
	}
	if wb.Value() != nil {
		t.Fatal("a pending open-end timer keeps a dropped breaker")
	}
}

// trippedAndDropped opens a breaker for a day, resets it and drops its
// registry, returning the breaker weakly.
func trippedAndDropped(t *testing.T) weak.Pointer[bw.Breaker] {
	b := newBreakers(t).Get("k")
	b.Trip(24 * time.Hour)
	b.Reset()
	return weak.Make(b)
}
