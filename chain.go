package breakwater

import (
	"net/http"
	"sync"
)

// A Stage wraps a RoundTripper in one resilience mechanism.
type Stage func(http.RoundTripper) http.RoundTripper

// Chain composes stages over base in the order given, the first listed
// outermost, as chi composes middleware: Chain(base, CallTimeout(d),
// Retry(…), BreakerStage(…)) runs the call timeout around the retry loop
// around the breaker. A nil base is a clone of [http.DefaultTransport].
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

// RetryStage is the retry loop alone, configured with the retry options of
// [NewTransport] (attempts, backoff, budget, RetryIf, idempotency, body
// buffering, melting, key, classifier); the timeout and breaker options are
// ignored: compose [CallTimeout], [AttemptTimeout] and [BreakerStage]
// around and inside it instead. It returns an error for invalid options.
func RetryStage(opts ...Option) (Stage, error) {
	opts = append(opts[:len(opts):len(opts)], WithCallTimeout(0), WithAttemptTimeout(0), WithBreaker(WithBreakerMode(ModeDisabled)))
	proto, err := NewTransport(opts...)
	if err != nil {
		return nil, err
	}
	return func(next http.RoundTripper) http.RoundTripper {
		t := *proto
		t.base = next
		t.stage = true
		return &t
	}, nil
}

// BreakerStage asks bs for key(req)'s breaker before every request and
// reports each outcome as classified by cl (nil means [Classify]). Inside a
// [RetryStage] a failing attempt that will be retried is not charged: the
// retry stage charges the breaker once if the call gives up. A nil key is
// [HostKey].
func BreakerStage(bs *Breakers, key KeyFunc, cl Classifier) Stage {
	if key == nil {
		key = HostKey
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			permit, err := bs.Get(key(req)).Allow()
			if err != nil {
				if hasBody(req) {
					_ = req.Body.Close()
				}
				return nil, err
			}
			resp, err := next.RoundTrip(req)
			if err != nil {
				resp = nil
			}
			o := classifySafely(cl, resp, err)
			if m, ok := req.Context().Value(meltKey{}).(*meltSlot); ok && bs.cfg.judge(o.Category) == failure && !permit.Probe() {
				m.defer_(permit, o)
			} else {
				permit.Record(o)
			}
			if resp == nil {
				permit.Release()
				return nil, err
			}
			track(req.Context(), resp, releaser{permit: permit})
			return resp, nil
		})
	}
}

// meltSlot carries a failing attempt's permit from a BreakerStage out to
// the enclosing RetryStage, which charges it only if the call gives up.
type meltSlot struct {
	mu      sync.Mutex
	pending Permit
	outcome Outcome // as the breaker stage's classifier saw it
	has     bool
}

type meltKey struct{}

func (m *meltSlot) defer_(p Permit, o Outcome) {
	m.mu.Lock()
	m.pending, m.outcome, m.has = p, o, true
	m.mu.Unlock()
}

// take returns the deferred permit of the last attempt and its outcome, if
// any.
func (m *meltSlot) take() (Permit, Outcome, bool) {
	if m == nil {
		return Permit{}, Outcome{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, o, ok := m.pending, m.outcome, m.has
	m.pending, m.outcome, m.has = Permit{}, Outcome{}, false
	return p, o, ok
}
