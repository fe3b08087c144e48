package breakwater

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

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
// rejections by breakwater middleware, 4xx responses, and failures the
// client caused: failures while the client was gone (its own
// cancellation), failures after reading the request body failed (an
// aborted upload, a read deadline passed), and timeouts of a handler that
// spent at least half its time waiting for the request body (a slow
// upload). Otherwise a handler timeout of an inner or outer
// [HandlerTimeout], and a handler that returned without answering after
// its deadline, count as timeouts.
//
// A panicking handler is recorded as a failure and the panic goes on
// unchanged to the server (or an outer recoverer).
//
// The breakers live in bs, which sets the counting policy, open durations,
// half-open probes and bounds, and through which a program trips or resets
// routes and reads their state; a nil bs is NewBreakers() with its
// defaults (open on the 11th failure within 10 s, or the 5th timeout, once
// failures are at least half of the requests since the first of them; open
// 100 ms, then a 32nd of the outage's age up to 60 s; 1 probe, doubling
// with each success, and 2 successes to close). opts are
// [WithKeyFunc] (default [RouteKey], the chi route pattern or
// [http.Request.Pattern]), [WithObserver], [WithDenyHandler] and
// [WithExempt]. The middleware is safe for concurrent use.
func RouteBreaker(bs *Breakers, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := inboundConfig{key: RouteKey}
	s := inboundSettings("RouteBreaker", &c)
	s.applyOptions(opts)
	if bs == nil {
		var err error
		if bs, err = NewBreakers(); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(s.errs...); err != nil {
		return nil, err
	}
	rb := &routeBreaker{in: newInbound(c, MechRouteBreaker, 0), bs: bs, key: c.key}
	return rb.wrap, nil
}

// routeBreaker is a RouteBreaker's state.
type routeBreaker struct {
	in  inbound
	bs  *Breakers
	key KeyFunc
}

// wrap is the middleware.
func (rb *routeBreaker) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rb.in.exempt != nil && rb.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		key := rb.key(r)
		s := rb.in.begin(w, true)
		b, pin := rb.bs.acquire(key) // kept in the registry until the outcome is recorded
		defer pin.Release()
		permit, err := b.Allow()
		if err != nil {
			rej := Rejection{Mechanism: MechRouteBreaker, Status: rb.in.status, Key: key, Err: err, RetryAfter: time.Second}
			if d, ok := RetryAfter(err); ok {
				rej.RetryAfter = d
			}
			rb.in.reject(s.rw, r, rej)
			rb.in.finish(r, &s, false)
			return
		}
		var body *clientBody
		var start time.Time // judge reads it only with a body: no clock read without
		if r.Body != nil && r.Body != http.NoBody {
			body = &clientBody{rc: r.Body}
			r2 := *r
			r2.Body = body
			r = &r2
			start = time.Now()
		}
		panicked := true
		defer func() {
			if panicked {
				_, cat := inboundOutcome(r, s.rw, true)
				permit.Done(Outcome{Category: body.judge(cat, start), Status: s.rw.status})
				rb.in.finish(r, &s, true)
			}
		}()
		next.ServeHTTP(s.rw, r)
		panicked = false
		status, cat := inboundOutcome(r, s.rw, false)
		permit.Done(Outcome{Category: body.judge(cat, start), Status: status})
		rb.in.finish(r, &s, false)
	})
}

// clientBody wraps a request body to tell the failures its client caused:
// a read that failed (an aborted upload, a read deadline passed) and the
// time the handler spent waiting for the client's bytes.
type clientBody struct {
	rc     io.ReadCloser
	waited atomic.Int64 // nanoseconds inside Read
	failed atomic.Bool  // a Read failed with other than io.EOF
}

func (b *clientBody) Read(p []byte) (int, error) {
	t := time.Now()
	n, err := b.rc.Read(p)
	b.waited.Add(int64(time.Since(t)))
	if err != nil && err != io.EOF {
		b.failed.Store(true)
	}
	return n, err
}

func (b *clientBody) Close() error { return b.rc.Close() }

// judge returns cat, or Canceled (neutral) when the failure is the
// client's: reading its body failed, or a timeout came while the handler
// spent at least half its time, since start, waiting for the body. A nil
// b (no body) changes nothing.
func (b *clientBody) judge(cat Category, start time.Time) Category {
	if b == nil || !cat.Failure() {
		return cat
	}
	if b.failed.Load() || cat == Timeout && 2*time.Duration(b.waited.Load()) >= time.Since(start) {
		return Canceled
	}
	return cat
}
