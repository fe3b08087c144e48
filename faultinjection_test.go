package breakwater_test

import (
	"errors"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// WithFaultInjection(r) rejects about r of the admissions of a closed
// breaker, no more, and the rejections neither reach the upstream nor open
// the breaker.
func TestFaultInjectionRate(t *testing.T) {
	const calls = 4000
	for _, rate := range []float64{0.25, 0.5} {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1),
			bw.WithFaultInjection(rate), bw.WithPolicy(bw.Consecutive(1)))
		injected := 0
		for range calls {
			r := get(tr)
			var be *bw.Error
			switch {
			case r.err == nil && r.status == 200:
			case errors.Is(r.err, bw.ErrCircuitOpen) && errors.As(r.err, &be) && be.Injected:
				injected++
			default:
				t.Fatalf("rate %v: %+v", rate, r)
			}
		}
		// The count is binomial: 4000 × 0.25 has a standard deviation of 27,
		// so ±0.05 is more than 7 of them.
		if got := float64(injected) / calls; got < rate-0.05 || got > rate+0.05 {
			t.Errorf("rate %v rejected %.3f of the calls", rate, got)
		}
		if u.Count() != calls-injected {
			t.Errorf("rate %v: %d calls reached the upstream, want the %d not rejected", rate, u.Count(), calls-injected)
		}
		if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
			t.Errorf("rate %v: injected faults left the breaker %s", rate, s)
		}
	}
}
