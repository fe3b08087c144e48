package breakwater

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
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
// The recommended order, outermost first, is ClientRateLimit, RouteBreaker,
// Shedder, HandlerTimeout (see the package documentation).
//
// Stacked breakwater middleware share one wrapped ResponseWriter and report
// one [EventRequest] per request (from the outermost middleware that has an
// observer); each rejection is also reported as an [EventReject] by the
// middleware that made it. A middleware of another library that wraps the
// ResponseWriter between two of them hides the outer wrapper: the inner one
// then wraps again and, if it has an observer, reports the request too.

// A MiddlewareOption configures any inbound middleware: it is a
// [TimeoutOption], a [RouteBreakerOption], a [ShedOption] and a
// [ClientRateLimitOption].
type MiddlewareOption interface {
	TimeoutOption
	RouteBreakerOption
	ShedOption
	ClientRateLimitOption
}

// A TimeoutOption configures [NewHandlerTimeout].
type TimeoutOption interface{ applyTimeout(*timeoutConfig) }

// A RouteBreakerOption configures [NewRouteBreaker].
type RouteBreakerOption interface{ applyRouteBreaker(*routeBreakerConfig) }

// inboundConfig is what every inbound middleware shares.
type inboundConfig struct {
	name   string
	deny   DenyHandler
	obs    Observer
	exempt func(*http.Request) bool
}

type inboundOption func(*inboundConfig)

func (f inboundOption) applyTimeout(c *timeoutConfig)                 { f(&c.inboundConfig) }
func (f inboundOption) applyRouteBreaker(c *routeBreakerConfig)       { f(&c.inboundConfig) }
func (f inboundOption) applyShed(c *shedConfig)                       { f(&c.inboundConfig) }
func (f inboundOption) applyClientRateLimit(c *clientRateLimitConfig) { f(&c.inboundConfig) }

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

// WithExempt exempts the requests for which fn returns true: they go
// straight to the next handler, untouched and unreported (health checks,
// readiness probes, an operator's endpoints). fn runs on every request
// before anything else and must be fast and safe for concurrent use. A nil
// fn (the default) exempts nothing.
func WithExempt(fn func(r *http.Request) bool) MiddlewareOption {
	return inboundOption(func(c *inboundConfig) { c.exempt = fn })
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

// writer is what the next handler gets.
func (s *served) writer(w http.ResponseWriter) http.ResponseWriter {
	if s.rw != nil {
		return s.rw
	}
	return w
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
		route := RouteKey(r)
		notify(in.obs, r.Context(), Event{
			Kind:      EventReject,
			Key:       route, // bounded: never a client's address
			Method:    r.Method,
			Route:     route,
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
		if t.in.exempt != nil && t.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
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

// A ShedOption configures [NewShedder].
type ShedOption interface{ applyShed(*shedConfig) }

type shedConfig struct {
	inboundConfig
	retryMin, retryMax time.Duration
}

type shedOptionFunc func(*shedConfig)

func (f shedOptionFunc) applyShed(c *shedConfig) { f(c) }

// Default Retry-After range of a [Shedder]'s rejections.
const (
	DefaultShedRetryAfterMin = time.Second
	DefaultShedRetryAfterMax = 2 * time.Second
)

// WithShedRetryAfter sets the range a [Shedder] draws each rejection's
// Retry-After from, uniformly in whole seconds (min and max are rounded up
// to seconds; min at least 1 s). The spread keeps rejected clients from
// coming back all at once. Default: 1 to 2 s.
func WithShedRetryAfter(min, max time.Duration) ShedOption {
	return shedOptionFunc(func(c *shedConfig) { c.retryMin, c.retryMax = min, max })
}

// Shedder sheds load: it admits at most a [Bulkhead]'s limit of requests
// into the next handler at once, lets a bounded number wait in arrival
// order for a bounded time (the bulkhead's [WithBulkheadQueue]), and
// answers the rest 503 with a jittered Retry-After (1 to 2 s by default)
// without calling the handler. With [WithAdaptiveLimit] on the bulkhead
// the limit follows the handler's latency and its overload signals: a
// handler timeout or a 503 is a drop, a client that went away or a
// breakwater rejection teaches nothing.
//
// A request holds its slot until the handler returns, panics or hijacks
// the connection (a hijacked connection, a WebSocket say, no longer counts
// as a request in flight). A request whose client disconnects while it
// waits leaves the queue at once, and nothing is written to it; a handler
// that honours its context returns when its client disconnects, freeing
// the slot. Slots are not freed while a handler still runs: the limit
// bounds the work in progress, and a handler that ignores its context is
// still working.
//
// A Shedder is safe for concurrent use. Admitting and releasing a request
// costs a few atomic operations and no allocation (plus a small wrapper
// when the connection can be hijacked or an observer needs the status).
type Shedder struct {
	in                 inbound
	bh                 *Bulkhead
	retryMin, retryMax int64 // seconds
	adaptive           bool
}

// NewShedder returns a load shedder on bh, which sets the limit, the queue
// and an adaptive limit; bh must not be nil. bh may be shared with other
// code that reads it (InFlight, Snapshot); requests admitted through other
// paths count against the same limit.
func NewShedder(bh *Bulkhead, opts ...ShedOption) (*Shedder, error) {
	c := shedConfig{retryMin: DefaultShedRetryAfterMin, retryMax: DefaultShedRetryAfterMax}
	for _, o := range opts {
		if o != nil {
			o.applyShed(&c)
		}
	}
	var errs []error
	if bh == nil {
		errs = append(errs, errors.New("breakwater: NewShedder needs a Bulkhead"))
	}
	lo, hi := retryAfterSeconds(c.retryMin), retryAfterSeconds(c.retryMax)
	if c.retryMin <= 0 || c.retryMax < c.retryMin {
		errs = append(errs, fmt.Errorf("breakwater: shed Retry-After range needs 0 < min <= max, got %s and %s", c.retryMin, c.retryMax))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Shedder{
		in:       newInbound(c.inboundConfig, MechShed, http.StatusServiceUnavailable),
		bh:       bh,
		retryMin: lo,
		retryMax: hi,
		adaptive: bh.cfg.adaptive != nil,
	}, nil
}

// Bulkhead returns the shedder's bulkhead.
func (sh *Shedder) Bulkhead() *Bulkhead { return sh.bh }

// Snapshot returns the state of the shedder's bulkhead.
func (sh *Shedder) Snapshot() Snapshot {
	return Snapshot{Name: sh.in.name, At: time.Now(), Bulkheads: []BulkheadSnapshot{sh.bh.Snapshot()}}
}

// retryAfter draws a rejection's Retry-After.
func (sh *Shedder) retryAfter() time.Duration {
	s := sh.retryMin
	if n := sh.retryMax - sh.retryMin; n > 0 {
		s += rand.Int64N(n + 1)
	}
	return time.Duration(s) * time.Second
}

// Middleware wraps next.
func (sh *Shedder) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sh.in.exempt != nil && sh.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		s := sh.in.begin(w, sh.adaptive || canHijack(w))
		if s.rw != nil {
			sh.serveTracked(next, r, &s)
			return
		}
		slot, err := sh.bh.Acquire(r.Context())
		if err != nil {
			sh.refused(w, r, &s, err)
			return
		}
		defer slot.Release()
		next.ServeHTTP(w, r)
	})
}

// serveTracked serves a request whose writer is wrapped: the slot is also
// freed by a hijack, and an adaptive limit learns the outcome.
func (sh *Shedder) serveTracked(next http.Handler, r *http.Request, s *served) {
	rw := s.rw
	slot, err := sh.bh.Acquire(r.Context())
	if err != nil {
		sh.refused(rw, r, s, err)
		return
	}
	hooked := rw.addHijackHook(slot.Ignore)
	panicked := true
	defer func() {
		if hooked {
			rw.removeHijackHook()
		}
		if panicked {
			slot.Ignore()
			sh.in.finish(r, s, true)
		}
	}()
	next.ServeHTTP(rw, r)
	panicked = false
	status, cat := inboundOutcome(r, rw, false)
	slot.judge(Outcome{Category: cat, Status: status})
	slot.release()
	sh.in.finish(r, s, false)
}

// refused answers a request that got no slot: 503 when the bulkhead
// refused it, nothing when its client went away while it waited.
func (sh *Shedder) refused(w http.ResponseWriter, r *http.Request, s *served, err error) {
	if errors.Is(err, ErrConcurrencyLimit) {
		sh.in.reject(w, r, Rejection{Mechanism: MechShed, Status: http.StatusServiceUnavailable, RetryAfter: sh.retryAfter(), Err: err})
	}
	sh.in.finish(r, s, false)
}

// A ClientRateLimitOption configures [NewClientRateLimit].
type ClientRateLimitOption interface {
	applyClientRateLimit(*clientRateLimitConfig)
}

type clientRateLimitConfig struct {
	inboundConfig
	policy   string
	xHeaders bool
}

type clientRateLimitOptionFunc func(*clientRateLimitConfig)

func (f clientRateLimitOptionFunc) applyClientRateLimit(c *clientRateLimitConfig) { f(c) }

// DefaultRateLimitPolicy is the policy name in a [ClientRateLimit]'s
// RateLimit-Policy and RateLimit fields.
const DefaultRateLimitPolicy = "default"

// WithRateLimitPolicyName sets the policy name in the RateLimit-Policy and
// RateLimit fields; several limits on one route need different names.
// It must be 1 to 64 printable ASCII characters other than '"' and '\'.
// Default: "default".
func WithRateLimitPolicyName(name string) ClientRateLimitOption {
	return clientRateLimitOptionFunc(func(c *clientRateLimitConfig) { c.policy = name })
}

// WithXRateLimitHeaders adds the older, unstandardised X-RateLimit-Limit
// (the burst), X-RateLimit-Remaining and X-RateLimit-Reset (the Unix time,
// in seconds, at which the bucket is full again) fields to every response,
// for clients that read those. Default: off.
func WithXRateLimitHeaders(on bool) ClientRateLimitOption {
	return clientRateLimitOptionFunc(func(c *clientRateLimitConfig) { c.xHeaders = on })
}

// maxKeyLen bounds the keys a ClientRateLimit stores; longer keys (a
// client-chosen header value) are stored as a hash.
const maxKeyLen = 128

// rateTableMax bounds the precomputed RateLimit field values.
const rateTableMax = 2048

// ClientRateLimit limits each client (or whatever its [KeyFunc] names) to
// a token bucket of a [RateLimiters] registry: a request takes a token or
// is answered 429 Too Many Requests with a Retry-After of the time until
// the client's next token, rounded up to whole seconds and never 0, without
// calling the handler. It never waits for a token (the registry's wait
// setting does not apply).
//
// Every response it sees, admitted or not, carries the IETF RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers): RateLimit-Policy
// describes the bucket as a quota of burst requests per window of
// burst/limit seconds (rounded up), `"default";q=10;w=1` for 10/s with
// a burst of 10; RateLimit gives the client's remaining whole tokens and
// the seconds until its bucket is full again, `"default";r=3;t=1`.
// [WithXRateLimitHeaders] adds the X-RateLimit-* fields.
//
// Per-key state lives in the registry and is bounded by it
// ([WithRateLimitKeys]: a hard cap on keys, eviction of idle full buckets,
// a shared overflow bucket when full); keys longer than 128 bytes are
// stored as a 64-bit hash, so a client cannot grow memory through a long
// header value. A request whose key is "" uses the bucket of "", shared by
// every such request.
//
// A ClientRateLimit is safe for concurrent use. An admitted request costs a
// map lookup, a token bucket update and, for buckets whose header values
// fit a precomputed table (burst+1 times window+1 up to 2048), no
// allocation.
type ClientRateLimit struct {
	in       inbound
	rl       *RateLimiters
	key      KeyFunc
	xHeaders bool
	seed     maphash.Seed

	policyName string
	window     int64    // seconds
	policyHdr  []string // the RateLimit-Policy value, shared, never modified
	limitHdr   []string // X-RateLimit-Limit
	table      [][]string
}

// NewClientRateLimit returns a rate limit on the buckets of rl, keyed by
// key (for example [RemoteAddrKey], or [ForwardedForKey] behind a proxy).
// rl must not be nil (an [Unlimited] registry is nil: mount nothing
// instead) and key is required: every call site states what it limits by.
func NewClientRateLimit(rl *RateLimiters, key KeyFunc, opts ...ClientRateLimitOption) (*ClientRateLimit, error) {
	c := clientRateLimitConfig{policy: DefaultRateLimitPolicy}
	for _, o := range opts {
		if o != nil {
			o.applyClientRateLimit(&c)
		}
	}
	var errs []error
	if rl == nil {
		errs = append(errs, errors.New("breakwater: NewClientRateLimit needs a RateLimiters registry"))
	}
	if key == nil {
		errs = append(errs, errors.New("breakwater: NewClientRateLimit needs a KeyFunc"))
	}
	if !validPolicyName(c.policy) {
		errs = append(errs, fmt.Errorf("breakwater: invalid rate limit policy name %q", c.policy))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	crl := &ClientRateLimit{
		in:         newInbound(c.inboundConfig, MechRateLimit, http.StatusTooManyRequests),
		rl:         rl,
		key:        key,
		xHeaders:   c.xHeaders,
		seed:       maphash.MakeSeed(),
		policyName: c.policy,
	}
	burst := rl.Burst()
	crl.window = max(1, int64(math.Ceil(float64(burst)/float64(rl.Limit()))))
	crl.policyHdr = []string{`"` + c.policy + `";q=` + strconv.Itoa(burst) + ";w=" + strconv.FormatInt(crl.window, 10)}
	crl.limitHdr = []string{strconv.Itoa(burst)}
	if n := (int64(burst) + 1) * (crl.window + 1); n <= rateTableMax {
		crl.table = make([][]string, n)
		for r := range int64(burst) + 1 {
			for t := range crl.window + 1 {
				crl.table[r*(crl.window+1)+t] = []string{crl.rateValue(r, t)}
			}
		}
	}
	return crl, nil
}

func validPolicyName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// rateValue formats a RateLimit field value.
func (crl *ClientRateLimit) rateValue(remaining, reset int64) string {
	var b [96]byte
	out := append(b[:0], '"')
	out = append(out, crl.policyName...)
	out = append(out, `";r=`...)
	out = strconv.AppendInt(out, remaining, 10)
	out = append(out, ";t="...)
	out = strconv.AppendInt(out, reset, 10)
	return string(out)
}

// Registry returns the rate limit's registry.
func (crl *ClientRateLimit) Registry() *RateLimiters { return crl.rl }

// Snapshot returns the state of every bucket in the registry.
func (crl *ClientRateLimit) Snapshot() Snapshot {
	return Snapshot{Name: crl.in.name, At: time.Now(), RateLimiters: crl.rl.Snapshots()}
}

// Close releases what the rate limit holds in the background. Today that
// is nothing: idle buckets are evicted as new keys arrive, by the request
// that inserts them, and no goroutine runs. Close exists so that owners
// can defer it now and stay correct should background work appear; it is
// safe to call more than once, and the middleware keeps working after it.
func (crl *ClientRateLimit) Close() error { return nil }

// storeKey bounds a key's length.
func (crl *ClientRateLimit) storeKey(k string) string {
	if len(k) <= maxKeyLen {
		return k
	}
	return "#" + strconv.FormatUint(maphash.String(crl.seed, k), 16)
}

// setHeaders writes the RateLimit fields of st. The one-element value
// slices of the precomputed table are shared by every response: net/http
// only reads header values, and Set, Add and Del replace or copy them.
func (crl *ClientRateLimit) setHeaders(h http.Header, st RateStatus) {
	r := int64(st.Remaining)
	t := min(retryAfterCeil(st.Reset), crl.window)
	h["Ratelimit-Policy"] = crl.policyHdr
	if i := r*(crl.window+1) + t; crl.table != nil && r <= int64(st.Burst) && i < int64(len(crl.table)) {
		h["Ratelimit"] = crl.table[i]
	} else {
		h["Ratelimit"] = []string{crl.rateValue(r, t)}
	}
	if crl.xHeaders {
		h["X-Ratelimit-Limit"] = crl.limitHdr
		h["X-Ratelimit-Remaining"] = []string{itoa(r)}
		h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(time.Now().Add(st.Reset).Add(time.Second-1).Unix(), 10)}
	}
}

// retryAfterCeil is d in whole seconds, rounded up (0 for d <= 0).
func retryAfterCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return retryAfterSeconds(d)
}

// Middleware wraps next.
func (crl *ClientRateLimit) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if crl.in.exempt != nil && crl.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		s := crl.in.begin(w, false)
		key := crl.storeKey(crl.key(r))
		st := crl.rl.Take(key)
		crl.setHeaders(w.Header(), st)
		if !st.Allowed {
			crl.in.reject(s.writer(w), r, Rejection{
				Mechanism:  MechRateLimit,
				Status:     http.StatusTooManyRequests,
				RetryAfter: max(st.RetryAfter, time.Nanosecond),
				Key:        key,
				Err:        &RateLimitError{Key: key, Wait: st.RetryAfter},
			})
			crl.in.finish(r, &s, false)
			return
		}
		if !s.report {
			next.ServeHTTP(w, r)
			return
		}
		panicked := true
		defer func() {
			if panicked {
				crl.in.finish(r, &s, true)
			}
		}()
		next.ServeHTTP(s.rw, r)
		panicked = false
		crl.in.finish(r, &s, false)
	})
}

var (
	_ Snapshotter = (*RouteBreaker)(nil)
	_ Snapshotter = (*Shedder)(nil)
	_ Snapshotter = (*ClientRateLimit)(nil)
)
