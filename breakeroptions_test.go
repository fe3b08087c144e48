package breakwater_test

import (
	"errors"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// Every bound of the breaker options, on both sides: the last value
// rejected and the first accepted.
func TestBreakerOptionBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  bw.Option
		ok   bool
	}{
		{"open timeout 0", bw.WithOpenTimeout(0, time.Minute), false},
		{"open timeout 1ns", bw.WithOpenTimeout(time.Nanosecond, time.Minute), true},
		{"max open timeout below the open timeout", bw.WithOpenTimeout(time.Second, time.Second-time.Nanosecond), false},
		{"max open timeout equal to the open timeout", bw.WithOpenTimeout(time.Second, time.Second), true},
		{"jitter below 0", bw.WithOpenJitter(-1e-9), false},
		{"jitter 0", bw.WithOpenJitter(0), true},
		{"jitter 1", bw.WithOpenJitter(1), true},
		{"jitter above 1", bw.WithOpenJitter(1 + 1e-9), false},
		{"0 probes", bw.WithHalfOpen(0, 1), false},
		{"0 successes", bw.WithHalfOpen(1, 0), false},
		{"1 probe, 1 success", bw.WithHalfOpen(1, 1), true},
		{"1024 probes, 2^30 successes", bw.WithHalfOpen(1024, 1<<30), true},
		{"1025 probes", bw.WithHalfOpen(1025, 1), false},
		{"2^30+1 successes", bw.WithHalfOpen(1, 1<<30+1), false},
		{"probe timeout 0", bw.WithProbeTimeout(0), false},
		{"probe timeout 1ns", bw.WithProbeTimeout(time.Nanosecond), true},
		{"fault rate below 0", bw.WithFaultInjection(-1e-9), false},
		{"fault rate 0", bw.WithFaultInjection(0), true},
		{"fault rate 1", bw.WithFaultInjection(1), true},
		{"fault rate above 1", bw.WithFaultInjection(1 + 1e-9), false},
		{"0 keys", bw.WithKeyLimits(0, time.Minute), false},
		{"1 key", bw.WithKeyLimits(1, time.Minute), true},
		{"2^28 keys", bw.WithKeyLimits(1<<28, time.Minute), true},
		{"2^28+1 keys", bw.WithKeyLimits(1<<28+1, time.Minute), false},
		{"idle TTL 0", bw.WithKeyLimits(10, 0), false},
		{"idle TTL 1ns", bw.WithKeyLimits(10, time.Nanosecond), true},
	} {
		_, err := bw.NewBreakers(c.opt)
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}
	// A breaker switched off and configured is a contradiction, whatever
	// the value.
	for _, rate := range []float64{0, 1e-9} {
		if _, err := bw.NewTransport(bw.WithoutBreaker(), bw.WithFaultInjection(rate)); err == nil {
			t.Errorf("switched off with fault injection %v: no error", rate)
		}
	}
}

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
