package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Inbound middleware.
//
// Every inbound middleware is a value built by a constructor that checks
// its configuration and returns an error for a bad one (New…(essential
// arguments, options…) (*T, error)); its Middleware method has the shape
// func(http.Handler) http.Handler, so it mounts on chi with
// r.Use(t.Middleware) or r.With(t.Middleware) and wraps any net/http
// handler. The values, not bare functions, are the API because they own
// state a program needs to reach after mounting: breakers to trip or reset,
// snapshots for a status page, and Close for the per-client store. Nothing
// is validated or can fail per request.
//
// Stacked breakwater middleware share one wrapped ResponseWriter and report
// one [EventRequest] per request (from the outermost middleware that has an
// observer); each rejection is also reported as an [EventReject] by the
// middleware that made it.

// A MiddlewareOption configures any inbound middleware: it is a
// [TimeoutOption] and a [RouteBreakerOption].
type MiddlewareOption interface {
	TimeoutOption
	RouteBreakerOption
}

// A TimeoutOption configures [NewHandlerTimeout].
type TimeoutOption interface{ applyTimeout(*timeoutConfig) }

// A RouteBreakerOption configures [NewRouteBreaker].
type RouteBreakerOption interface{ applyRouteBreaker(*routeBreakerConfig) }

// inboundConfig is what every inbound middleware shares.
type inboundConfig struct {
	name string
	deny DenyHandler
	obs  Observer
}

type inboundOption func(*inboundConfig)

func (f inboundOption) applyTimeout(c *timeoutConfig)           { f(&c.inboundConfig) }
func (f inboundOption) applyRouteBreaker(c *routeBreakerConfig) { f(&c.inboundConfig) }

// WithDenyHandler replaces the default response to a rejected request
// ([WriteProblem]: an RFC 9457 application/problem+json body). A nil h
// keeps the default.
func WithDenyHandler(h DenyHandler) MiddlewareOption {
	return inboundOption(func(c *inboundConfig) { c.deny = h })
}

// WithInboundObserver makes the middleware report to o: an [EventRequest]
// when it finishes serving a request (Route, Method, Status, Category,
// Duration), unless an outer breakwater middleware reports it, and an
// [EventReject] (Mechanism, Key, Route, Method, Status, Err) for each
// request it rejects. A nil o (the default) reports nothing and costs
// nothing.
func WithInboundObserver(o Observer) MiddlewareOption {
	return inboundOption(func(c *inboundConfig) { c.obs = o })
}

// WithName names the middleware in its [Snapshot].
func WithName(name string) MiddlewareOption {
	return inboundOption(func(c *inboundConfig) { c.name = name })
}

// inbound is the runtime part every middleware shares.
type inbound struct {
	inboundConfig
	mech    Mechanism
	status  int    // rejection status
	problem []byte // default rejection body
}

func newInbound(c inboundConfig, mech Mechanism, status int) inbound {
	return inbound{inboundConfig: c, mech: mech, status: status, problem: problemBody(status, mech)}
}

// served is one request's bookkeeping.
type served struct {
	rw     *responseWriter // nil when nothing needs to see the response
	report bool            // this middleware reports the EventRequest
	start  time.Time
}

// begin decides whether the request's writer must be wrapped (need: the
// middleware reads the response itself) and whether this middleware
// reports the request.
func (in *inbound) begin(w http.ResponseWriter, need bool) served {
	rw, wrapped := w.(*responseWriter)
	s := served{report: in.obs != nil && !(wrapped && rw.observed)}
	switch {
	case wrapped:
		s.rw = rw
	case need || s.report:
		s.rw = &responseWriter{w: w}
	}
	if s.report {
		s.rw.observed = true
		s.start = time.Now()
	}
	return s
}

// finish reports the request if this middleware reports it.
func (in *inbound) finish(r *http.Request, s *served, panicked bool) {
	if !s.report {
		return
	}
	status, cat := inboundOutcome(r, s.rw, panicked)
	notify(in.obs, r.Context(), Event{
		Kind:     EventRequest,
		Method:   r.Method,
		Route:    RouteKey(r),
		Status:   status,
		Category: cat,
		Duration: time.Since(s.start),
	})
}

// reject answers r with rej: it marks the response as a rejection, sets
// Retry-After, reports an EventReject and runs the deny handler.
func (in *inbound) reject(w http.ResponseWriter, r *http.Request, rej Rejection) {
	if rw, ok := w.(*responseWriter); ok {
		rw.rejectedBy = rej.Mechanism
	}
	if rej.RetryAfter > 0 {
		setRetryAfter(w.Header(), rej.RetryAfter)
	}
	if in.obs != nil {
		notify(in.obs, r.Context(), Event{
			Kind:      EventReject,
			Key:       rej.Key,
			Method:    r.Method,
			Route:     RouteKey(r),
			Status:    rej.Status,
			Mechanism: rej.Mechanism,
			Err:       rej.Err,
		})
	}
	if in.deny != nil {
		in.deny(w, r, rej)
		return
	}
	if rej.Status == in.status && rej.Mechanism == in.mech {
		writeProblemBody(w, rej.Status, in.problem)
		return
	}
	WriteProblem(w, r, rej)
}

// inboundOutcome classifies how a request ended, as the breakers and the
// observers see it: a rejection by a breakwater middleware is Rejected (a
// handler timeout is Timeout); a handler that ran out of its deadline
// without answering is Timeout; a failure while the client was gone is
// Canceled; otherwise the written status is classified like a response
// ([Classify]), a 503 with Retry-After being Throttled. rw may be nil when
// nothing was wrapped (the request was rejected before the handler ran).
func inboundOutcome(r *http.Request, rw *responseWriter, panicked bool) (int, Category) {
	if rw == nil {
		return 0, Rejected
	}
	switch rw.rejectedBy {
	case "":
	case MechTimeout:
		return rw.status, Timeout
	default:
		return rw.status, Rejected
	}
	ctxErr := r.Context().Err()
	if panicked {
		switch ctxErr {
		case context.Canceled:
			return rw.status, Canceled
		case context.DeadlineExceeded:
			return rw.status, Timeout
		}
		return rw.status, ServerError
	}
	if rw.hijacked {
		return rw.status, Success
	}
	if !rw.wrote {
		switch ctxErr {
		case context.Canceled:
			return 0, Canceled
		case context.DeadlineExceeded:
			return 0, Timeout
		}
		return http.StatusOK, Success // net/http's default
	}
	resp := http.Response{StatusCode: rw.status, Header: rw.Header()}
	cat := classifyResponse(&resp, DefaultMaxRetryAfter).Category
	if cat.Failure() {
		switch ctxErr {
		case context.Canceled:
			cat = Canceled
		case context.DeadlineExceeded:
			cat = Timeout
		}
	}
	return rw.status, cat
}

// DefaultTimeoutStatus is the status [HandlerTimeout] answers with.
const DefaultTimeoutStatus = http.StatusServiceUnavailable

type timeoutConfig struct {
	inboundConfig
	status int
}

type timeoutOptionFunc func(*timeoutConfig)

func (f timeoutOptionFunc) applyTimeout(c *timeoutConfig) { f(c) }

// WithTimeoutStatus sets the status [HandlerTimeout] answers with, a 4xx or
// 5xx; default 503. 504 suits a handler that mostly waits on an upstream.
func WithTimeoutStatus(code int) TimeoutOption {
	return timeoutOptionFunc(func(c *timeoutConfig) { c.status = code })
}

// HandlerTimeout bounds how long a handler works on a request: the request
// that reaches the handler carries a context whose deadline is d away (or
// the existing deadline, if earlier), with [http.ErrHandlerTimeout] as its
// cause. If the deadline passed and the handler returns having written
// nothing, HandlerTimeout answers with the timeout status (503 by default)
// through the deny handler. A handler that wrote anything (a header, a
// byte, a flush) keeps its response, and a hijacked connection is left
// alone: HandlerTimeout never writes after the handler did, so the server
// never logs "superfluous response.WriteHeader call".
//
// Why it waits for the handler instead of answering at the deadline:
// HandlerTimeout runs the handler on the request's own goroutine and
// decides after it returns, the way chi's Timeout does (fixed so that it
// never writes over a response). The alternative, [http.TimeoutHandler]'s,
// runs the handler on another goroutine, buffers its whole response, and
// answers from a timer while the handler keeps running, discarding its late
// writes. That answers sooner, but costs a goroutine and a buffered copy of
// every response, and breaks what a handler may do with its writer:
// streaming, Flush, Hijack, sendfile. A handler that honours its context
// (database calls, outbound requests, [Transport]) returns promptly at the
// deadline anyway; one that ignores it is bounded by the server's
// WriteTimeout, or should be wrapped in http.TimeoutHandler.
//
// A HandlerTimeout is safe for concurrent use and keeps no per-request
// state.
type HandlerTimeout struct {
	in inbound
	d  time.Duration
}

// NewHandlerTimeout returns a handler timeout of d, which must be > 0.
func NewHandlerTimeout(d time.Duration, opts ...TimeoutOption) (*HandlerTimeout, error) {
	c := timeoutConfig{status: DefaultTimeoutStatus}
	for _, o := range opts {
		if o != nil {
			o.applyTimeout(&c)
		}
	}
	var errs []error
	if d <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: handler timeout must be > 0, got %s", d))
	}
	if c.status < 400 || c.status > 599 {
		errs = append(errs, fmt.Errorf("breakwater: timeout status must be a 4xx or 5xx, got %d", c.status))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &HandlerTimeout{in: newInbound(c.inboundConfig, MechTimeout, c.status), d: d}, nil
}

// Timeout returns the configured duration.
func (t *HandlerTimeout) Timeout() time.Duration { return t.d }

// Middleware wraps next.
func (t *HandlerTimeout) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeoutCause(r.Context(), t.d, http.ErrHandlerTimeout)
		defer cancel()
		s := t.in.begin(w, true)
		panicked := true
		defer func() {
			if panicked {
				t.in.finish(r, &s, true)
			}
		}()
		next.ServeHTTP(s.rw, r.WithContext(ctx))
		panicked = false
		rw := s.rw
		if !rw.wrote && !rw.hijacked && ctx.Err() == context.DeadlineExceeded &&
			context.Cause(ctx) == http.ErrHandlerTimeout && r.Context().Err() == nil {
			t.in.reject(rw, r, Rejection{Mechanism: MechTimeout, Status: t.in.status, Err: http.ErrHandlerTimeout})
		}
		t.in.finish(r, &s, false)
	})
}

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
// within 10 s, open 5 s doubling to 60 s, 1 probe and 2 successes to
// close). bs may be shared with other code that trips or resets routes.
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

var (
	_ Snapshotter = (*RouteBreaker)(nil)
)
