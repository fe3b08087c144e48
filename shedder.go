package breakwater

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Default Retry-After range of a Shedder's rejections.
const (
	defaultShedRetryAfterMin = time.Second
	defaultShedRetryAfterMax = 2 * time.Second
)

// WithShedRetryAfter sets the range a [Shedder] draws each rejection's
// Retry-After from, uniformly in whole seconds (min and max are rounded up
// to seconds; min at least 1 s). The spread keeps rejected clients from
// coming back all at once. It configures [Shedder]. Default: 1 to 2 s.
func WithShedRetryAfter(min, max time.Duration) Option {
	return option(func(s *settings) {
		if c := s.forInbound("WithShedRetryAfter", "Shedder"); c != nil {
			c.retryMin, c.retryMax = min, max
		}
	})
}

// Shedder sheds load: it admits at most a bulkhead's limit of requests
// into the next handler at once, lets others wait in arrival order for up
// to the bulkheads' [WithMaxWait] (5 s by default; 0 sheds at once), as
// many as their [WithMaxQueue] allows, and answers the rest 503 with a
// jittered Retry-After (1 to 2 s by default) without calling the handler. With [WithAdaptiveLimit]
// on the bulkheads the limit follows the handler's latency and its
// overload signals: a handler timeout or a 503 is a drop, a client that
// went away or a breakwater rejection teaches nothing.
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
// The bulkheads are bs, which sets the limit, the queue and an adaptive
// limit, and which other code may share (requests admitted through other
// paths count against the same limit) or read; bs must not be nil. All
// requests share one bulkhead, unless [WithKeyFunc] groups them (by route,
// say). Other opts are [WithShedRetryAfter], [WithObserver],
// [WithDenyHandler] and [WithExempt].
//
// # Slow clients
//
// A slot is held for as long as the handler runs, and a handler that reads
// the request body or writes a large answer runs at the pace of its
// client: a client that trickles its body, or does not read what it is
// sent, holds a slot for as long as the server lets it. A few such
// clients, as many as the limit, hold every slot, and every other request
// is shed. [HandlerTimeout] does not help: cancelling the request's
// context does not end a body read or a write that is blocked on the
// client. Bound them on the server: set the http.Server's ReadTimeout
// (ReadHeaderTimeout bounds the headers only, read before the Shedder
// runs) and WriteTimeout, or set read and write deadlines per handler
// with http.ResponseController. When the Shedder has an observer
// ([WithObserver]) and its first request's server (the request context's
// http.ServerContextKey) has no ReadTimeout or no WriteTimeout, it reports
// an [EventWarning] saying so, once; a [LogObserver] logs it at Warn.
//
// The middleware is safe for concurrent use. Admitting and releasing a
// request costs a few atomic operations and no allocation (plus a small
// wrapper when the connection can be hijacked or an observer needs the
// status).
func Shedder(bs *Bulkheads, opts ...Option) (func(http.Handler) http.Handler, error) {
	c := inboundConfig{retryMin: defaultShedRetryAfterMin, retryMax: defaultShedRetryAfterMax}
	s := inboundSettings("Shedder", &c)
	s.applyOptions(opts)
	errs := s.errs
	if bs == nil {
		errs = append(errs, errors.New("breakwater: Shedder needs a Bulkheads registry"))
	}
	lo, hi := retryAfterSeconds(c.retryMin), retryAfterSeconds(c.retryMax)
	if c.retryMin <= 0 || c.retryMax < c.retryMin {
		errs = append(errs, fmt.Errorf("breakwater: shed Retry-After range needs 0 < min <= max, got %s and %s", c.retryMin, c.retryMax))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sh := &shedder{
		in:       newInbound(c, MechShed, 0),
		bs:       bs,
		key:      c.key,
		retryMin: lo,
		retryMax: hi,
		adaptive: bs.cfg.adaptive != nil,
	}
	return sh.wrap, nil
}

// shedder is a Shedder's state.
type shedder struct {
	in                 inbound
	bs                 *Bulkheads
	key                KeyFunc // nil: one bulkhead for every request
	retryMin, retryMax int64   // seconds
	adaptive           bool
	checked            atomic.Bool // the server's timeouts were looked at
}

// checkServer reports, once, an EventWarning when r's server lets slow
// clients hold slots without bound (see the Shedder's documentation).
func (sh *shedder) checkServer(r *http.Request) {
	if !sh.checked.CompareAndSwap(false, true) {
		return
	}
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return
	}
	var missing []string
	if srv.ReadTimeout <= 0 {
		missing = append(missing, "ReadTimeout")
	}
	if srv.WriteTimeout <= 0 {
		missing = append(missing, "WriteTimeout")
	}
	if len(missing) == 0 {
		return
	}
	err := fmt.Errorf("breakwater: Shedder behind an http.Server without %s: a client that trickles its request body or does not read its answer holds a slot for as long as it likes, "+
		"and as many such clients as the limit make the Shedder shed every other request (HandlerTimeout does not end a blocked read or write); "+
		"set the server's %[1]s, or deadlines per handler with http.ResponseController", strings.Join(missing, " and "))
	notify(sh.in.obs, r.Context(), &Event{Kind: EventWarning, Mechanism: MechShed, Err: err})
}

// acquire takes a slot of r's bulkhead.
func (sh *shedder) acquire(r *http.Request) (Slot, error) {
	key := ""
	if sh.key != nil {
		key = sh.key(r)
	}
	return sh.bs.acquire(r.Context(), key, time.Time{})
}

// retryAfter draws a rejection's Retry-After.
func (sh *shedder) retryAfter() time.Duration {
	s := sh.retryMin
	if n := sh.retryMax - sh.retryMin; n > 0 {
		s += rand.Int64N(n + 1)
	}
	return time.Duration(s) * time.Second
}

// wrap is the middleware.
func (sh *shedder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sh.in.obs != nil && !sh.checked.Load() {
			sh.checkServer(r)
		}
		if sh.in.exempt != nil && sh.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		s := sh.in.begin(w, sh.adaptive || canHijack(w))
		if s.rw != nil {
			sh.serveTracked(next, r, &s)
			return
		}
		slot, err := sh.acquire(r)
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
func (sh *shedder) serveTracked(next http.Handler, r *http.Request, s *served) {
	rw := s.rw
	slot, err := sh.acquire(r)
	if err != nil {
		sh.refused(rw, r, s, err)
		return
	}
	held := rw.holdSlot(slot) // a hijack gives it back
	kept := held == nil       // no room in rw: kept here until the handler returns
	if kept {
		held = &slot
	}
	panicked := true
	defer func() {
		if panicked {
			held.Ignore()
			sh.in.finish(r, s, true)
		}
		if !kept {
			rw.dropSlot()
		}
	}()
	next.ServeHTTP(rw, r)
	panicked = false
	status, cat := inboundOutcome(r, rw, false)
	held.judge(Outcome{Category: cat, Status: status})
	held.release()
	sh.in.finish(r, s, false)
}

// refused answers a request that got no slot: 503 when the bulkhead
// refused it, nothing when its client went away while it waited.
func (sh *shedder) refused(w http.ResponseWriter, r *http.Request, s *served, err error) {
	if errors.Is(err, ErrConcurrencyLimit) {
		sh.in.reject(w, r, Rejection{Mechanism: MechShed, Status: sh.in.status, RetryAfter: sh.retryAfter(), Err: err})
	}
	sh.in.finish(r, s, false)
}
