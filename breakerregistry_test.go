package breakwater_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A registry holds one breaker per key used, none for keys only read, and
// fewer once idle ones are evicted.
func TestBreakersLen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Minute
		bs := newBreakers(t, bw.WithKeyLimits(100, ttl))
		if n := len(bs.Snapshot().Breakers); n != 0 {
			t.Fatalf("new registry: Len %d", n)
		}
		for i := range 5 {
			bs.Get(fmt.Sprint("k", i))
			bs.Get(fmt.Sprint("k", i)) // again: the same breaker
		}
		bs.Lookup("never-used")
		if n := len(bs.Snapshot().Breakers); n != 5 {
			t.Fatalf("5 keys used: Len %d", n)
		}
		time.Sleep(3 * ttl)
		bs.Get("fresh")
		time.Sleep(3 * ttl)
		bs.Get("fresher")
		if n := len(bs.Snapshot().Breakers); n > 2 {
			t.Fatalf("after the idle keys expired: Len %d, want at most 2", n)
		}

		tr, err := bw.NewTransport(bw.WithoutBreaker())
		if err != nil {
			t.Fatal(err)
		}
		disabled := tr.Breakers()
		disabled.Get("k")
		if n := len(disabled.Snapshot().Breakers); n != 0 {
			t.Fatalf("a transport without breakers holds %d", n)
		}
	})
}

// Idle breakers leave the registry after the idle TTL; a breaker used within
// the TTL stays however many other keys come and go meanwhile.
func TestBreakersIdleEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Minute
		bs := newBreakers(t, bw.WithKeyLimits(1000, ttl))
		kept, idle := bs.Get("kept"), bs.Get("idle")
		// Many new keys in quick succession evict nothing.
		for i := range 300 {
			bs.Get(fmt.Sprint("burst", i))
			if i%50 == 0 {
				time.Sleep(time.Second)
			}
		}
		for _, k := range []string{"kept", "idle", "burst0", "burst299"} {
			if _, ok := bs.Lookup(k); !ok {
				t.Fatalf("%s evicted within the idle TTL", k)
			}
		}
		// Past the TTL, keys not used go at the next insertion; "kept" is
		// used all along.
		start := time.Now()
		for i := range 5 {
			time.Sleep(ttl / 2)
			if b := bs.Get("kept"); b != kept {
				t.Fatal("a breaker in use was replaced")
			}
			bs.Get(fmt.Sprint("later", i))
		}
		for _, k := range []string{"idle", "burst0", "burst299"} {
			if _, ok := bs.Lookup(k); ok {
				t.Fatalf("%s, idle for %s with an idle TTL of %s, is still there", k, time.Since(start), ttl)
			}
		}
		if b, ok := bs.Lookup("kept"); !ok || b != kept {
			t.Fatal("the breaker in use was evicted")
		}
		// An evicted key starts afresh.
		if b := bs.Get("idle"); b == idle {
			t.Fatal("Get returned the evicted breaker")
		}
	})
}

// A sweep that evicts idle breakers while callers start using them again
// must leave each key with one breaker, the one the callers got: a trip made
// through it is what every later reader of the key sees.
func TestBreakersSweepRacingUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		// The window is a few nanoseconds a key: thousands of keys, met from
		// both ends, give it a chance to show.
		const users, keys = 2, 5000
		rounds := 200
		if testing.Short() || raceEnabled {
			rounds = 20
		}
		bs := newBreakers(t, bw.WithKeyLimits(1_000_000, ttl))
		key := func(i int) string { return fmt.Sprint("k", i) }
		for round := range rounds {
			for i := range keys {
				bs.Get(key(i))
			}
			// Two sweeps: the first marks the keys unused, the second,
			// racing the users below, evicts each unless they got it first.
			time.Sleep(ttl + time.Nanosecond)
			bs.Get(fmt.Sprint("churn", round, "a"))
			time.Sleep(ttl + time.Nanosecond)
			var wg sync.WaitGroup
			got := make([][]*bw.Breaker, users)
			wg.Go(func() { bs.Get(fmt.Sprint("churn", round, "b")) })
			for u := range users {
				got[u] = make([]*bw.Breaker, keys)
				wg.Go(func() {
					for j := range keys {
						i := j
						if u%2 == 1 { // meet the sweep from the other end
							i = keys - 1 - j
						}
						got[u][i] = bs.Get(key(i))
					}
				})
			}
			wg.Wait()
			for i := range keys {
				now, ok := bs.Lookup(key(i))
				for u := range users {
					if !ok || got[u][i] != now {
						t.Fatalf("round %d: user %d got a breaker for %s that the registry no longer holds", round, u, key(i))
					}
				}
			}
			b, _ := bs.Lookup(key(round))
			b.Trip(time.Hour)
			if s := stateOf(bs, key(round)); s != bw.StateOpen {
				t.Fatalf("round %d: tripped, %s reads %s", round, key(round), s)
			}
			b.Reset()
		}
	})
}

// A closed breaker that counted a failure within its policy's window holds
// state worth keeping: a new key evicts a clean breaker rather than it.
// Once the window has passed since the failure, it is as good as new, and
// the hand evicts whichever it meets first: the failing one here.
func TestBreakersKeepRecentFailuresOverCleanOnes(t *testing.T) {
	for _, c := range []struct {
		name    string
		after   time.Duration
		evicted string
	}{
		{"failure just now", 0, "clean"},
		{"failure a window less 1ns ago", 10*time.Second - time.Nanosecond, "clean"},
		{"failure a window ago", 10 * time.Second, "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bs := newBreakers(t, bw.WithKeyLimits(2, time.Hour), bw.WithPolicy(bw.Window(5, 10*time.Second)))
				done := func(key string, cat bw.Category) {
					p, err := bs.Get(key).Allow()
					if err != nil {
						t.Fatal(err)
					}
					p.Done(bw.Outcome{Category: cat})
				}
				time.Sleep(time.Second) // the registry's clock past 0, its "no failure"
				// Each key used twice, so that the hand gives both a second
				// chance alike; "failed" first, so that the hand meets it first.
				done("failed", bw.ServerError)
				done("failed", bw.Success)
				done("clean", bw.Success)
				done("clean", bw.Success)
				time.Sleep(c.after)
				bs.Get("new")
				for _, k := range []string{"clean", "failed"} {
					if _, ok := bs.Lookup(k); ok == (k == c.evicted) {
						t.Errorf("%s there: %v, want %s evicted", k, ok, c.evicted)
					}
				}
			})
		})
	}
}
