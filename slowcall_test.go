package breakwater_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// stateOf reads key's breaker without creating it.
func stateOf(bs *bw.Breakers, key string) bw.State {
	b, _ := bs.Lookup(key)
	return b.State()
}

// attemptCategories records the category of every attempt a Transport
// reports.
type attemptCategories struct {
	mu   sync.Mutex
	cats []bw.Category
}

func (a *attemptCategories) Observe(_ context.Context, e bw.Event) {
	if e.Kind == bw.EventAttempt {
		a.mu.Lock()
		a.cats = append(a.cats, e.Category)
		a.mu.Unlock()
	}
}

func (a *attemptCategories) count(c bw.Category) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, got := range a.cats {
		if got == c {
			n++
		}
	}
	return n
}

func TestSlowCallThreshold(t *testing.T) {
	const threshold = time.Second
	// observed runs each case without and with an observer: a Transport
	// measures a call's start differently when it reports events.
	observed := func(t *testing.T, f func(t *testing.T, opts ...bw.Option)) {
		for _, name := range []string{"unobserved", "observed"} {
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var opts []bw.Option
					if name == "observed" {
						opts = append(opts, bw.WithObserver(&attemptCategories{}))
					}
					f(t, opts...)
				})
			})
		}
	}

	t.Run("slow successes open the breaker and are still returned", func(t *testing.T) {
		observed(t, func(t *testing.T, opts ...bw.Option) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 2 * threshold})
			tr := newTransport(t, u.Transport(), append(opts, bw.WithSlowCallThreshold(threshold),
				bw.WithPolicy(bw.Consecutive(2)))...)
			for i := 1; i <= 2; i++ {
				if r := get(tr); r.err != nil || r.status != 200 {
					t.Fatalf("slow call %d: %+v, want the 200", i, r)
				}
				if u.Count() != i {
					t.Fatalf("slow call %d made %d requests in all: a slow call is not retried", i, u.Count())
				}
			}
			if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateOpen {
				t.Fatalf("after two slow calls the breaker is %s, want open", s)
			}
			if r := get(tr); !errors.Is(r.err, bw.ErrCircuitOpen) {
				t.Fatalf("third call: %+v, want ErrCircuitOpen", r)
			}
		})
	})

	t.Run("a call exactly at the threshold is not slow", func(t *testing.T) {
		observed(t, func(t *testing.T, opts ...bw.Option) {
			delay := threshold
			u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
				return breakwatertest.Step{Delay: delay}
			})
			tr := newTransport(t, u.Transport(), append(opts, bw.WithSlowCallThreshold(threshold),
				bw.WithPolicy(bw.Consecutive(1)))...)
			if r := get(tr); r.status != 200 || stateOf(tr.Breakers(), upstreamKey) != bw.StateClosed {
				t.Fatalf("a call of %s: %+v, breaker %s; want 200 and closed", delay, r, stateOf(tr.Breakers(), upstreamKey))
			}
			delay = threshold + time.Nanosecond
			if r := get(tr); r.status != 200 || stateOf(tr.Breakers(), upstreamKey) != bw.StateOpen {
				t.Fatalf("a call of %s: %+v, breaker %s; want 200 and open", delay, r, stateOf(tr.Breakers(), upstreamKey))
			}
		})
	})

	t.Run("fast calls on a long-lived transport are not slow", func(t *testing.T) {
		observed(t, func(t *testing.T, opts ...bw.Option) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
			tr := newTransport(t, u.Transport(), append(opts, bw.WithSlowCallThreshold(threshold),
				bw.WithPolicy(bw.Consecutive(1)))...)
			for range 3 {
				time.Sleep(time.Hour) // the transport's age is no call's latency
				if r := get(tr); r.status != 200 {
					t.Fatalf("%+v", r)
				}
			}
			if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
				t.Fatalf("fast calls left the breaker %s", s)
			}
		})
	})

	t.Run("a slow client error is not slow", func(t *testing.T) {
		observed(t, func(t *testing.T, opts ...bw.Option) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 404, Delay: 2 * threshold})
			tr := newTransport(t, u.Transport(), append(opts, bw.WithSlowCallThreshold(threshold),
				bw.WithPolicy(bw.Consecutive(1)))...)
			if r := get(tr); r.status != 404 {
				t.Fatalf("%+v", r)
			}
			if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
				t.Fatalf("a slow 404 left the breaker %s; only successes become slow", s)
			}
		})
	})

	t.Run("a retry's latency is its own", func(t *testing.T) {
		observed(t, func(t *testing.T, opts ...bw.Option) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
			tr := newTransport(t, u.Transport(), append(opts, bw.WithSlowCallThreshold(threshold),
				bw.WithBackoff(bw.Constant(2*threshold)), bw.WithPolicy(bw.Consecutive(1)))...)
			time.Sleep(time.Minute) // calls start after the transport does
			if r := get(tr); r.status != 200 || u.Count() != 2 {
				t.Fatalf("%+v after %d requests", r, u.Count())
			}
			if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
				t.Fatalf("a fast retry after a 2s backoff left the breaker %s", s)
			}
		})
	})

	t.Run("waiting for admission is not latency", func(t *testing.T) {
		for name, limit := range map[string]bw.Option{
			"rate limit":        bw.WithRateLimit(0.5, 1, bw.WithMaxWait(time.Minute)), // a token every 2s,
			"concurrency limit": bw.WithConcurrencyLimit(1, bw.WithMaxQueue(1), bw.WithMaxWait(time.Minute)),
		} {
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					obs := &attemptCategories{}
					u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
						if n == 1 {
							return breakwatertest.Step{Delay: 2 * threshold, Status: 404} // holds the slot, spends the token
						}
						return breakwatertest.Step{}
					})
					tr := newTransport(t, u.Transport(), limit, bw.WithObserver(obs), bw.WithSlowCallThreshold(threshold),
						bw.WithPolicy(bw.Consecutive(1)))
					time.Sleep(time.Minute) // calls start after the transport does
					first := make(chan result)
					go func() { first <- get(tr) }()
					synctest.Wait() // the first call is at the upstream
					start := time.Now()
					if r := get(tr); r.status != 200 {
						t.Fatalf("second call: %+v", r)
					}
					if waited := time.Since(start); waited < threshold {
						t.Fatalf("the second call waited %s; the test needs a wait longer than the threshold", waited)
					}
					<-first
					if obs.count(bw.Success) != 1 || obs.count(bw.Slow) != 0 {
						t.Fatalf("attempts reported %v, want the second one a success", obs.cats)
					}
					if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
						t.Fatalf("a fast attempt after waiting for admission left the breaker %s", s)
					}
				})
			})
		}
	})
}
