package breakwater

import (
	"context"
	"net/http"
	"time"
)

// RequestPolicy overrides a [Transport]'s settings for one request; attach
// it to the request's context with [WithRequestPolicy]. Zero fields keep the
// transport's settings.
type RequestPolicy struct {
	// MaxAttempts overrides the attempts per call; 1 disables retries,
	// and more than 1000 counts as 1000.
	MaxAttempts int
	// CallTimeout and AttemptTimeout override the timeouts; a negative
	// value disables that timeout for this request.
	CallTimeout, AttemptTimeout time.Duration
	// Idempotent declares the request safe to repeat whatever its method,
	// as an Idempotency-Key header would: it is retried, and hedged
	// ([WithHedging]).
	Idempotent bool
}

type policyKey struct{}

// WithRequestPolicy returns a context that makes a [Transport] apply p to
// requests made with it.
func WithRequestPolicy(ctx context.Context, p RequestPolicy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// policy resolves the settings of one request. Its Idempotent is the
// request's own declaration or [WithRetryNonIdempotent]'s; declared
// reports the request's own, which alone makes a request of any method
// hedgeable.
func (t *Transport) policy(req *http.Request) (p RequestPolicy, declared bool) {
	p = RequestPolicy{MaxAttempts: t.cfg.maxAttempts, CallTimeout: t.cfg.callTimeout, AttemptTimeout: t.cfg.attemptTimeout, Idempotent: t.cfg.retryNonIdempotent}
	o, ok := req.Context().Value(policyKey{}).(RequestPolicy)
	if !ok {
		return p, false
	}
	if o.MaxAttempts > 0 {
		p.MaxAttempts = min(o.MaxAttempts, maxAttemptsLimit)
	}
	if o.CallTimeout != 0 {
		p.CallTimeout = max(0, o.CallTimeout)
	}
	if o.AttemptTimeout != 0 {
		p.AttemptTimeout = max(0, o.AttemptTimeout)
	}
	p.Idempotent = p.Idempotent || o.Idempotent
	return p, o.Idempotent
}
