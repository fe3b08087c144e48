package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/breakwater-go/breakwater/internal/sat"
)

// WithTimeoutStatus sets the status [HandlerTimeout] answers with, a 4xx or
// 5xx; 504 suits a handler that mostly waits on an upstream. It configures
// [HandlerTimeout]. Default: 503.
func WithTimeoutStatus(code int) Option {
	return option(func(s *settings) {
		if c := s.forInbound("WithTimeoutStatus", "HandlerTimeout"); c != nil {
			c.status = code
		}
	})
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
// d must be > 0; opts are [WithTimeoutStatus], [WithObserver],
// [WithDenyHandler] and [WithExempt]. The middleware is safe for
// concurrent use and keeps no per-request state.
func HandlerTimeout(d time.Duration, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := inboundConfig{status: inboundStatus(MechTimeout)}
	s := inboundSettings("HandlerTimeout", &c)
	s.applyOptions(opts)
	errs := s.errs
	if d <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: handler timeout must be > 0, got %s", d))
	}
	if c.status < 400 || c.status > 599 {
		errs = append(errs, fmt.Errorf("breakwater: timeout status must be a 4xx or 5xx, got %d", c.status))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ht := &handlerTimeout{in: newInbound(c, MechTimeout, c.status), d: d}
	return ht.wrap, nil
}

// handlerTimeout is a HandlerTimeout's state.
type handlerTimeout struct {
	in inbound
	d  time.Duration
}

// wrap is the middleware.
func (t *handlerTimeout) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.in.exempt != nil && t.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		// The context is made lazily (see deadlineCtx): a handler that
		// never waits on it costs no timer.
		ctx := &deadlineCtx{parent: r.Context(), origin: &stageEpoch, why: http.ErrHandlerTimeout}
		ctx.dl = sat.Add(int64(time.Since(stageEpoch)), int64(t.d))
		defer ctx.cancel()
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
