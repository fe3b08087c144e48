package breakwater_test

import (
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A Window policy counts every failure inside its window, whenever it comes:
// on a registry older than the window, and after the breaker closed again.
func TestWindowCountsAfterQuietTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tolerate := range []int{0, 2} {
			bs := newBreakers(t, bw.WithPolicy(bw.Window(tolerate, 10*time.Second)), bw.WithHalfOpen(1, 1),
				bw.WithOpenTimeout(time.Second, time.Second), bw.WithOpenJitter(0))
			for round := range 3 { // a fresh window, then one cleared by a close, twice
				time.Sleep(time.Minute) // quiet for longer than the window
				for i := 0; i <= tolerate; i++ {
					if s := stateOf(bs, "k"); s != bw.StateClosed {
						t.Fatalf("tolerate %d, round %d: %s after %d failures", tolerate, round, s, i)
					}
					failOnce(t, bs, "k")
				}
				if s := stateOf(bs, "k"); s != bw.StateOpen {
					t.Fatalf("tolerate %d, round %d: %s after %d failures in a row, want open", tolerate, round, s, tolerate+1)
				}
				time.Sleep(time.Second)
				p, err := bs.Get("k").Allow()
				if err != nil {
					t.Fatal(err)
				}
				p.Done(ok) // the probe closes it
			}
		}
	})
}

// A FailureRate policy's window slides: an outcome counts until exactly
// within after it.
func TestFailureRateWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const within = 10 * time.Second
		bs := newBreakers(t, bw.WithPolicy(bw.FailureRate(0.9, 100, within)))
		time.Sleep(time.Minute)
		for range 5 {
			failOnce(t, bs, "k")
		}
		failures := func() int { return bs.Get("k").Snapshot().Failures }
		time.Sleep(within - time.Nanosecond)
		if n := failures(); n != 5 {
			t.Fatalf("1ns before the window passed: %d failures, want 5", n)
		}
		time.Sleep(time.Nanosecond)
		if n := failures(); n != 0 {
			t.Fatalf("once the window passed: %d failures, want 0", n)
		}
	})
}

// A Window policy without a ratio slides to the nanosecond: a failure at t
// counts at now while t > now-within, wherever t falls.
func TestWindowSlidesExactly(t *testing.T) {
	const within = 10 * time.Second
	for _, offset := range []time.Duration{0, 300 * time.Millisecond, 999 * time.Millisecond} {
		for _, gap := range []time.Duration{within - time.Nanosecond, within} {
			synctest.Test(t, func(t *testing.T) {
				bs := newBreakers(t, bw.WithPolicy(bw.Window(1, within)))
				time.Sleep(offset)
				failOnce(t, bs, "k")
				time.Sleep(gap)
				failOnce(t, bs, "k")
				want := bw.StateOpen
				if gap >= within {
					want = bw.StateClosed
				}
				if s := stateOf(bs, "k"); s != want {
					t.Fatalf("failures %s apart, the first at +%s: %s, want %s", gap, offset, s, want)
				}
			})
		}
	}
}
