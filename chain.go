package breakwater

import (
	"net/http"
)

// A Stage wraps a RoundTripper in one resilience mechanism.
type Stage func(http.RoundTripper) http.RoundTripper

// Chain composes stages over base in the order given, the first listed
// outermost, as chi composes middleware: Chain(base, CallTimeout(d), retry,
// BreakerStage(…)), with retry made by [RetryStage], runs the call timeout
// around the retry loop around the breaker. A nil base is a clone of
// [http.DefaultTransport].
//
// [NewTransport] builds the recommended order in one piece and costs less
// per call; Chain is for other orders and for mixing in stages of your own.
// When a [RetryStage] encloses a [BreakerStage], the breaker is still
// charged once per call that gives up, as in a Transport.
func Chain(base http.RoundTripper, stages ...Stage) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	rt := base
	for i := len(stages) - 1; i >= 0; i-- {
		if stages[i] != nil {
			rt = stages[i](rt)
		}
	}
	return rt
}

// RoundTripperFunc adapts a function to [http.RoundTripper].
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f(req).
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
