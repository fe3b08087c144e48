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

// TestHalfOpenProbeIsNotHeldThroughAPause: a half-open breaker whose
// upstream starts answering 429 must not lend its probe slot to a call that
// then waits out the pause. Calls that arrive during the pause wait at the
// pause gate without a probe lease; after it, one of them probes, the
// breaker closes on its success and the others go through. (Before, the
// first of them took the lease and waited with it, and every other call was
// refused at once as "half-open busy".)
func TestHalfOpenProbeIsNotHeldThroughAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			switch since := time.Since(start); {
			case n == 1:
				return breakwatertest.Step{Status: 500} // opens the breaker
			case since < 2*time.Second:
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1),
			bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(time.Second, time.Second), bw.WithOpenJitter(0), bw.WithHalfOpen(1, 1))
		if r, _ := send(context.Background(), tr, "a.test"); r.status != 500 {
			t.Fatalf("first call: %+v, want 500", r)
		}
		if s := tr.Breakers().Get("http://a.test").State(); s != bw.StateOpen {
			t.Fatalf("breaker %s after the 500, want open", s)
		}
		time.Sleep(time.Second) // open timeout over: the next call probes
		if r, _ := send(context.Background(), tr, "a.test"); r.status != 429 {
			t.Fatalf("probe: %+v, want 429", r)
		}
		if s := tr.Breakers().Get("http://a.test").State(); s != bw.StateHalfOpen {
			t.Fatalf("breaker %s after a 429 probe, want still half-open", s)
		}

		var wg sync.WaitGroup
		var mu sync.Mutex
		var ok, busy int
		var other []error
		for range 10 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				r, _ := send(ctx, tr, "a.test")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.err == nil && r.status == 200:
					ok++
				case errors.Is(r.err, bw.ErrHalfOpenBusy):
					busy++
				default:
					other = append(other, r.err)
				}
			})
			time.Sleep(10 * time.Millisecond) // during the 1 s pause
		}
		wg.Wait()
		if busy != 0 || ok != 10 || len(other) != 0 {
			t.Errorf("calls made during the pause: %d ok, %d refused as half-open busy, others %v; want all 10 ok", ok, busy, other)
		}
		if s := tr.Breakers().Get("http://a.test").State(); s != bw.StateClosed {
			t.Errorf("breaker %s after the pause, want closed by the probe that followed it", s)
		}
	})
}

// TestOpenBreakerRefusesBeforeThePause: a call to a key whose breaker is
// open fails at once, even while a pause would have made it wait.
func TestOpenBreakerRefusesBeforeThePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr := newTransport(t, u.Transport())
		tr.PauseGates().Pause("http://a.test", 3*time.Second)
		tr.Breakers().Get("http://a.test").Trip(time.Minute)
		r, took := send(context.Background(), tr, "a.test")
		if !errors.Is(r.err, bw.ErrCircuitOpen) || took != 0 {
			t.Fatalf("%+v after %s, want ErrCircuitOpen at once", r, took)
		}
		if n := u.Count(); n != 0 {
			t.Fatalf("upstream saw %d requests, want 0", n)
		}
	})
}
