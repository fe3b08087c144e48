package breakwater_test

// Partial outages: upstreams that fail partly (a flap, one bad backend of
// several, a quota, a hang) must never get less out of the default
// Transport than a bare http.Client gets, and a total outage must stay as
// cheap as before. Each test logs its figures (go test -v -run
// TestPartialOutage).

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// openCounter counts a registry's openings.
type openCounter struct{ n atomic.Int32 }

func (o *openCounter) option() bw.Option {
	return bw.WithBreaker(bw.OnTransition(func(tr bw.Transition) {
		if tr.To == bw.StateOpen {
			o.n.Add(1)
		}
	}))
}

// seeded returns a concurrency-safe source of uniform numbers in [0, 1).
func seeded(seed uint64) func() float64 {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
}

// Every first attempt fails with a 503 carrying a 64 KiB body; every retry
// succeeds.
func TestPartialOutageRetriedFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			if n%2 == 1 {
				return breakwatertest.Step{Status: 503, BodySize: 64 << 10}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport())
		ok := 0
		for range 100 {
			if r := get(tr); r.status == 200 {
				ok++
			}
		}
		t.Logf("retried first attempts: %d/100 calls ok, %d upstream requests", ok, u.Count())
		if ok != 100 {
			t.Fatalf("%d/100 calls succeeded", ok)
		}
	})
}

// A hard-down upstream stays as cheap as before the breaker became
// volume-aware: few requests per call, and once open, calls fail at once.
func TestPartialOutageHardDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport())
		var fast, opened atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 25 {
					open := tr.Breakers().State(upstreamKey) == bw.StateOpen
					start := time.Now()
					r := get(tr)
					if open && errors.Is(r.err, bw.ErrCircuitOpen) {
						opened.Add(1)
						if time.Since(start) < time.Millisecond {
							fast.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		perCall := float64(u.Count()) / 200
		t.Logf("hard down: %d upstream requests for 200 calls (%.2f per call), %d calls made while open, %d of them failed in under 1ms",
			u.Count(), perCall, opened.Load(), fast.Load())
		if perCall > 0.3 {
			t.Errorf("%.2f upstream requests per call, want at most 0.3", perCall)
		}
		if opened.Load() == 0 || fast.Load() != opened.Load() {
			t.Errorf("%d calls made while open, %d of them failed fast", opened.Load(), fast.Load())
		}
	})
}

// When an open breaker lets calls through again, they arrive as offered.
func TestPartialOutageNoHerdAfterBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			if time.Since(start) < 2*time.Second {
				return breakwatertest.Step{Status: 500}
			}
			return breakwatertest.Step{Delay: 5 * time.Millisecond}
		})
		var opens openCounter
		tr := newTransport(t, u.Transport(), opens.option())
		load(tr, 50, 10*time.Second, 0)
		var late []time.Time
		for _, at := range arrivals(u) {
			if at.Sub(start) >= 2*time.Second {
				late = append(late, at)
			}
		}
		n := maxInWindow(late, 50*time.Millisecond)
		t.Logf("breaker recovery at 50 calls/s: %d openings, at most %d arrivals in any 50 ms once the upstream is back (offered 2.5)", opens.n.Load(), n)
		if opens.n.Load() == 0 || n > 5 {
			t.Fatalf("%d openings; %d arrivals within 50 ms at recovery", opens.n.Load(), n)
		}
	})
}

// A hang is learned when our attempt timeout cuts the first attempt and
// the caller's deadline the second.
func TestPartialOutageHangWithShortCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(200*time.Millisecond))
		calls := 0
		for calls < 30 && tr.Breakers().State(upstreamKey) == bw.StateClosed {
			calls++
			ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
			send(ctx, tr, "upstream.test")
			cancel()
		}
		s, _ := tr.Breakers().Snapshot(upstreamKey)
		t.Logf("hang, 200 ms attempts, 350 ms callers: breaker %s after %d calls and %d upstream requests", s.StateName, calls, u.Count())
		if s.State != bw.StateOpen || calls > 12 {
			t.Fatalf("breaker %s after %d calls, want open within 12", s.StateName, calls)
		}
	})
}

// Callers that give up before the upstream could answer never open the
// breaker: their own cancellation, or a deadline shorter than the
// upstream's normal latency.
func TestPartialOutageImpatientCallersAreNeutral(t *testing.T) {
	t.Run("deadline shorter than the normal latency", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 500 * time.Millisecond})
			var opens openCounter
			tr := newTransport(t, u.Transport(), opens.option())
			load(tr, 20, 5*time.Second, 300*time.Millisecond)
			if s, _ := tr.Breakers().Snapshot(upstreamKey); opens.n.Load() != 0 || s.Failures != 0 {
				t.Fatalf("300 ms callers of a 500 ms upstream: %d openings, %+v", opens.n.Load(), s)
			}
		})
	})
	t.Run("slow upstream seen answering", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 1500 * time.Millisecond})
			var opens openCounter
			tr := newTransport(t, u.Transport(), opens.option())
			for range 3 { // patient callers see it answer in 1.5 s
				if r, _ := send(context.Background(), tr, "upstream.test"); r.status != 200 {
					t.Fatalf("%+v", r)
				}
			}
			load(tr, 20, 5*time.Second, 1200*time.Millisecond)
			if s, _ := tr.Breakers().Snapshot(upstreamKey); opens.n.Load() != 0 || s.Failures != 0 {
				t.Fatalf("1.2 s callers of a 1.5 s upstream: %d openings, %+v", opens.n.Load(), s)
			}
		})
	})
	t.Run("cancellation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
			tr := newTransport(t, u.Transport())
			for range 30 {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(3*time.Second, cancel)
				if r, _ := send(ctx, tr, "upstream.test"); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("%+v", r)
				}
			}
			if s, _ := tr.Breakers().Snapshot(upstreamKey); s.State != bw.StateClosed || s.Failures != 0 {
				t.Fatalf("callers cancelling a hung call: %+v", s)
			}
		})
	})
}
