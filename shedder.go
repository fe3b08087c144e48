package breakwater

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
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
func (sh *shedder) refused(w http.ResponseWriter, r *http.Request, s *served, err error) {
	if errors.Is(err, ErrConcurrencyLimit) {
		sh.in.reject(w, r, Rejection{Mechanism: MechShed, Status: sh.in.status, RetryAfter: sh.retryAfter(), Err: err})
	}
	sh.in.finish(r, s, false)
}
