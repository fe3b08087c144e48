package breakwater_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// failOnce admits one attempt on key's breaker and records a failure.
func failOnce(t *testing.T, bs *bw.Breakers, key string) {
	t.Helper()
	p, err := bs.Get(key).Allow()
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	p.Done(fail)
}

// remaining is how long key's breaker stays open from now.
func remaining(t *testing.T, bs *bw.Breakers, key string) time.Duration {
	t.Helper()
	s := bs.Get(key).Snapshot()
	if s.State != bw.StateOpen {
		t.Fatalf("%s is %s, want open", key, s.State)
	}
	return s.Remaining
}

// Open durations are jittered downwards: never longer than the cadence
// promises, never shorter than the jitter allows, and not all alike, so
// that clients that opened together do not probe together.
func TestOpenDurationJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, jitter = 4 * time.Second, 0.5
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(base, time.Minute), bw.WithOpenJitter(jitter))
		lo, hi := time.Duration(1<<62), time.Duration(0)
		least := base - time.Duration(jitter*float64(base))
		for i := range 40 {
			k := fmt.Sprint("k", i)
			failOnce(t, bs, k)
			d := remaining(t, bs, k)
			if d > base || d < least {
				t.Fatalf("%s opened for %s, want %s to %s", k, d, least, base)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		// 40 draws all in the highest quarter of the jitter has a chance
		// of 0.25^40.
		if lo > base-time.Duration(jitter*float64(base)/4) || hi == lo {
			t.Fatalf("40 openings lasted %s to %s: no jitter", lo, hi)
		}
	})
}

// Trip with a duration of 0 or less opens for the open timeout, with no
// jitter; a positive duration is used as it is.
func TestTripDuration(t *testing.T) {
	const openTimeout = 7 * time.Second
	for _, c := range []struct {
		d, want time.Duration
	}{
		{0, openTimeout},
		{-time.Second, openTimeout},
		{3 * time.Second, 3 * time.Second},
		{time.Hour, time.Hour},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bs := newBreakers(t, bw.WithOpenTimeout(openTimeout, time.Minute), bw.WithOpenJitter(1))
				b := bs.Get("k")
				b.Trip(c.d)
				if d := remaining(t, bs, "k"); d != c.want {
					t.Fatalf("Trip(%s) opened for %s, want %s", c.d, d, c.want)
				}
				time.Sleep(c.want - time.Nanosecond)
				if _, err := b.Allow(); !errors.Is(err, bw.ErrCircuitOpen) {
					t.Fatalf("1ns before the end: %v, want ErrCircuitOpen", err)
				}
				time.Sleep(time.Nanosecond)
				if s := b.State(); s != bw.StateHalfOpen {
					t.Fatalf("at the end: %s, want half-open", s)
				}
			})
		})
	}
}

// A breaker that counts throttling and opens on a throttled outcome stays
// open for the server's hint, capped by the maximum open timeout; without a
// usable hint (none, or 0) it opens for the open timeout.
func TestThrottledOpenDuration(t *testing.T) {
	const openTimeout, maxOpen = 5 * time.Second, time.Minute
	throttled := func(hint time.Duration, has bool) bw.Outcome {
		return bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: hint, HasRetryAfter: has}
	}
	for _, c := range []struct {
		name string
		o    bw.Outcome
		want time.Duration
	}{
		{"no hint", throttled(0, false), openTimeout},
		{"a hint of 0", throttled(0, true), openTimeout},
		{"a hint of 3s", throttled(3*time.Second, true), 3 * time.Second},
		{"a hint past the maximum", throttled(10*time.Minute, true), maxOpen},
		{"a server error's hint is not used", bw.Outcome{Category: bw.ServerError, Status: 503, RetryAfter: 3 * time.Second, HasRetryAfter: true}, openTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithCountAsFailure(bw.Throttled),
					bw.WithOpenTimeout(openTimeout, maxOpen), bw.WithOpenJitter(0))
				p, err := bs.Get("k").Allow()
				if err != nil {
					t.Fatal(err)
				}
				p.Done(c.o)
				if d := remaining(t, bs, "k"); d != c.want {
					t.Fatalf("opened for %s, want %s", d, c.want)
				}
			})
		})
	}
}
