package breakwater

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

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
		in:       newInbound(c.inboundConfig, MechShed, 0),
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
		sh.in.reject(w, r, Rejection{Mechanism: MechShed, Status: sh.in.status, RetryAfter: sh.retryAfter(), Err: err})
	}
	sh.in.finish(r, s, false)
}
