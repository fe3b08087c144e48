package breakwater

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// An attempt's deadline context costs net/http a context, a timer, a
// channel and a map of children of its own, more than the rest of the
// chain together over a loopback connection. When the caller's context
// can never be cancelled (its Done is nil: context.Background, or values
// over it, as http.Client.Get's is) and the attempt has at least
// shareMin left, the attempt's context shares one real context with every
// attempt of the Transport that ends in the same shareGrain with the same
// cause: its deadline is rounded down to a multiple of shareGrain from
// the Transport's start, so the attempt may end up to shareGrain early,
// never late, and the rounding is at most 1/100 of its time. The shared
// context is the context package's, with its timer, its cause and its
// children; net/http links its own request context to it as to any
// other. Each attempt keeps its own Err (see deadlineCtx).
const (
	shareGrain = int64(time.Millisecond)
	shareMin   = 100 * shareGrain
)

// deadlineShare is a Transport's table of shared deadline contexts, by
// deadline and cause. A slot holds the latest context made for the
// deadlines it serves. A context no attempt uses any more, once its slot
// has moved on, is retired, and ended at the next making of a context
// (a shareGrain or more later on a busy Transport), so that live contexts
// are about those of the attempts in flight: net/http ends its own
// request context after the response body, in its own goroutine, and a
// context ended at the attempt's own end could cut that short.
type deadlineShare struct {
	slots   [64]atomic.Pointer[sharedDeadline]
	mu      sync.Mutex
	retired []*sharedDeadline // unused: ended at the making after next
	ending  []*sharedDeadline // retired before the last making: ended at the next
}

// sharedDeadline is one shared context: it ends at at (nanoseconds after
// its Transport's start, a multiple of shareGrain) with ErrAttemptTimeout
// or ErrCallTimeout as its cause.
type sharedDeadline struct {
	at       int64
	attempt  bool
	ctx      context.Context
	cancel   context.CancelFunc
	users    atomic.Int64 // attempts using it; -1: retired, never used again
	replaced atomic.Bool  // its slot holds another
}

// shared reports the deadline an attempt sent at now (Transport
// nanoseconds) with deadline dl may share, 0 when it may not.
func shared(now, dl int64) int64 {
	if dl-now < shareMin {
		return 0
	}
	return dl - dl%shareGrain
}

// use returns the shared context that ends at at (a deadline shared
// returned) with ErrAttemptTimeout when attempt, else ErrCallTimeout,
// origin being the Transport's start, counted as used until its done.
func (s *deadlineShare) use(origin *time.Time, at int64, attempt bool) *sharedDeadline {
	i := uint64(at / shareGrain << 1)
	if attempt {
		i |= 1
	}
	slot := &s.slots[i%uint64(len(s.slots))]
	if d := slot.Load(); d != nil && d.at == at && d.attempt == attempt && d.acquire() {
		return d
	}
	cause := ErrCallTimeout
	if attempt {
		cause = ErrAttemptTimeout
	}
	d := &sharedDeadline{at: at, attempt: attempt}
	d.ctx, d.cancel = context.WithDeadlineCause(context.Background(), origin.Add(time.Duration(at)), cause)
	d.users.Store(1)
	s.endRetired()
	if old := slot.Swap(d); old != nil {
		old.replaced.Store(true)
		s.retire(old)
	}
	return d
}

// acquire counts one more user of d, unless it is retired.
func (d *sharedDeadline) acquire() bool {
	for {
		n := d.users.Load()
		if n < 0 {
			return false
		}
		if d.users.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// done counts one user of d less; the last retires it once replaced.
func (s *deadlineShare) done(d *sharedDeadline) {
	if d.users.Add(-1) == 0 && d.replaced.Load() {
		s.retire(d)
	}
}

// retire marks d, unused and replaced, to be ended; of the two that may
// see it so (its last user, and the making that replaced it), one does.
func (s *deadlineShare) retire(d *sharedDeadline) {
	if !d.users.CompareAndSwap(0, -1) {
		return
	}
	s.mu.Lock()
	s.retired = append(s.retired, d)
	s.mu.Unlock()
}

// endRetired ends the contexts retired before the last making and keeps
// those retired since for the next.
func (s *deadlineShare) endRetired() {
	s.mu.Lock()
	ending := s.ending
	s.ending, s.retired = s.retired, nil
	s.mu.Unlock()
	for i, d := range ending {
		d.cancel()
		ending[i] = nil
	}
}
