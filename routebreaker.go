package breakwater

import (
	"errors"
	"net/http"
	"time"
)

// A RouteBreakerOption configures [NewRouteBreaker].
type RouteBreakerOption interface{ applyRouteBreaker(*routeBreakerConfig) }

type routeBreakerConfig struct {
	inboundConfig
	key KeyFunc
}

type routeBreakerOptionFunc func(*routeBreakerConfig)

func (f routeBreakerOptionFunc) applyRouteBreaker(c *routeBreakerConfig) { f(c) }

// WithRouteKey sets how [RouteBreaker] names a request's route. Default:
// [RouteKey] (the chi route pattern, or [http.Request.Pattern]). A key
// function must return few distinct keys (routes, not paths).
func WithRouteKey(fn KeyFunc) RouteBreakerOption {
	return routeBreakerOptionFunc(func(c *routeBreakerConfig) { c.key = fn })
}

// RouteBreaker fails fast on a route whose handler is failing, typically
// because a dependency is down: it keeps one circuit breaker per route in a
// [Breakers] registry, counts the handler's 5xx responses and panics as
// failures (408 and 504 as timeouts; 501 and 505 neutral, like any
// response [Classify] reads), and while a route's breaker is open answers
// 503 with a Retry-After of the remaining open time (rounded up to whole
// seconds) without calling the handler. Half-open, it lets the registry's
// probes through and answers the rest 503 with Retry-After: 1.
//
// What does not count: a 503 carrying Retry-After (the handler is shedding
// load on purpose, or a breakwater middleware inside rejected it), other
// rejections by breakwater middleware, 4xx responses, and failures while
// the client was gone (its own cancellation). A handler timeout of an
// inner or outer [HandlerTimeout], and a handler that returned without
// answering after its deadline, count as timeouts.
//
// A panicking handler is recorded as a failure and the panic goes on
// unchanged to the server (or an outer recoverer). A RouteBreaker is safe
// for concurrent use.
type RouteBreaker struct {
	in  inbound
	bs  *Breakers
	key KeyFunc
}

// NewRouteBreaker returns a route breaker whose breakers live in bs, which
// sets the counting policy, open durations, half-open probes and bounds; a
// nil bs is NewBreakers() with its defaults (open on the 11th failure
// within 10 s, or the 5th timeout, once failures are at least half of the
// requests since the first of them; open 5 s doubling to 60 s, 1 probe and
// 2 successes to close). bs may be shared with other code that trips or resets routes.
func NewRouteBreaker(bs *Breakers, opts ...RouteBreakerOption) (*RouteBreaker, error) {
	c := routeBreakerConfig{key: RouteKey}
	for _, o := range opts {
		if o != nil {
			o.applyRouteBreaker(&c)
		}
	}
	if c.key == nil {
		return nil, errors.New("breakwater: route breaker needs a route KeyFunc")
	}
	if bs == nil {
		var err error
		if bs, err = NewBreakers(); err != nil {
			return nil, err
		}
	}
	return &RouteBreaker{in: newInbound(c.inboundConfig, MechRouteBreaker, http.StatusServiceUnavailable), bs: bs, key: c.key}, nil
}

// Breakers returns the registry, for manual control (Trip, Reset) and
// state reads.
func (rb *RouteBreaker) Breakers() *Breakers { return rb.bs }

// Snapshot returns the state of every route's breaker.
func (rb *RouteBreaker) Snapshot() Snapshot {
	return Snapshot{Name: rb.in.name, At: time.Now(), Breakers: rb.bs.Snapshots()}
}

// Middleware wraps next.
func (rb *RouteBreaker) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rb.in.exempt != nil && rb.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		key := rb.key(r)
		s := rb.in.begin(w, true)
		permit, err := rb.bs.Allow(key)
		if err != nil {
			rej := Rejection{Mechanism: MechRouteBreaker, Status: http.StatusServiceUnavailable, Key: key, Err: err, RetryAfter: time.Second}
			var be *BreakerError
			if errors.As(err, &be) && be.State == StateOpen {
				rej.RetryAfter = max(be.RetryAfter(), time.Nanosecond)
			}
			rb.in.reject(s.rw, r, rej)
			rb.in.finish(r, &s, false)
			return
		}
		panicked := true
		defer func() {
			if panicked {
				_, cat := inboundOutcome(r, s.rw, true)
				permit.Done(Outcome{Category: cat, Status: s.rw.status})
				rb.in.finish(r, &s, true)
			}
		}()
		next.ServeHTTP(s.rw, r)
		panicked = false
		status, cat := inboundOutcome(r, s.rw, false)
		permit.Done(Outcome{Category: cat, Status: status})
		rb.in.finish(r, &s, false)
	})
}
