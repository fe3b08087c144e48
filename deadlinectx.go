package breakwater

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is the context of one attempt (or of a timeout stage's call,
// or of a request under HandlerTimeout): its parent bounded by a deadline
// with a cause, as context.WithDeadlineCause(parent, deadline, cause) is,
// or only cancellable, as context.WithCancel(parent) is, but made lazily.
// Until something asks for its Done channel or a value its parent does
// not hold, it is a parent and a deadline, with no timer, no channel and
// no allocation of its own: Deadline needs neither, and Err compares the
// deadline with the clock. The first such question (net/http's client
// asks at once; an in-memory base transport or a handler that never waits
// may never ask) makes the real context with context.WithDeadlineCause,
// and every method answers from it from then on, so the context package's
// parent-child links, causes and AfterFunc work unchanged. Its methods
// are safe for concurrent use.
//
// With share set, the real context is the shared one of its deadline and
// cause (see deadlineShare), and c keeps its own Err: cancel ends c at
// once (Err is Canceled, Done a closed channel from then on, and contexts
// made from c after it end at once), while a Done channel asked for
// before the cancel closes at the deadline, as the context package
// allows ("the close of the Done channel may happen asynchronously").
// Values come from the parent, never from the shared context.
type deadlineCtx struct {
	parent context.Context
	origin *time.Time // what dl counts from; carries a monotonic reading
	dl     int64      // the deadline, nanoseconds after origin; 0: none of its own
	// The real context, once made: ctx and stop are written under mu
	// before ctxMade is set in state, and read without it once it is seen.
	mu     sync.Mutex
	ctx    context.Context
	stop   context.CancelFunc
	state  atomic.Uint32   // ctxMade | ctxCanceled
	why    error           // what ends c at its deadline
	share  *deadlineShare  // the real context is shared; dl is a shared deadline
	shared *sharedDeadline // the one in use, once made
}

// Bits of deadlineCtx.state.
const (
	ctxMade     = 1 << iota // the real context is made
	ctxCanceled             // cancel was called
	ctxExpired              // shared: the deadline had passed when cancel was called
)

// closedChan is the Done channel of a shared-deadline context that cancel
// ended before its deadline.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// stageEpoch is the origin of the timeout stages' deadlines.
var stageEpoch = time.Now()

// init makes c a context of parent that ends at dl with
// ErrAttemptTimeout as its cause when attempt, else ErrCallTimeout.
func (c *deadlineCtx) init(parent context.Context, origin *time.Time, dl int64, attempt bool) {
	c.parent, c.origin, c.dl, c.why = parent, origin, dl, deadlineCause(attempt)
}

// cause is what ends c at its deadline.
func (c *deadlineCtx) cause() error { return c.why }

// attempt reports whether c is an attempt's context.
func (c *deadlineCtx) attempt() bool { return c.why == ErrAttemptTimeout }

// deadlineCause is what ends a context at an attempt timeout's deadline
// when attempt, else at a call timeout's.
func deadlineCause(attempt bool) error {
	if attempt {
		return ErrAttemptTimeout
	}
	return ErrCallTimeout
}

func (c *deadlineCtx) deadline() time.Time { return c.origin.Add(time.Duration(c.dl)) }

// Deadline returns the earlier of the parent's deadline and c's.
func (c *deadlineCtx) Deadline() (time.Time, bool) {
	d, ok := c.parent.Deadline()
	if c.dl == 0 {
		return d, ok
	}
	if dl := c.deadline(); !ok || dl.Before(d) {
		return dl, true
	}
	return d, true
}

func (c *deadlineCtx) Done() <-chan struct{} {
	if c.share != nil && c.state.Load()&(ctxCanceled|ctxExpired) == ctxCanceled {
		return closedChan
	}
	return c.make().Done()
}

// Value returns the parent's value for key, and a key the parent does not
// know is asked of the real context: the context package finds the
// cancellation it links children to that way. Without a shared deadline,
// once something ended c, made its real context or its deadline passed,
// every key is asked of the real one, so that context.Cause finds c's own
// cause even if it asks for the value before Err, as some Go releases'
// does; before that, the parent's cancellation (what the parent answers
// for the context package's key) holds c's cause, since nothing else
// could have ended c. With a shared deadline, a key the parent does not
// know is asked of the shared context until cancel ends c before its
// deadline.
func (c *deadlineCtx) Value(key any) any {
	if c.share == nil && (c.state.Load() != 0 || c.dl != 0 && int64(time.Since(*c.origin)) >= c.dl) {
		return c.make().Value(key)
	}
	if v := c.parent.Value(key); v != nil {
		return v
	}
	if c.state.Load()&(ctxCanceled|ctxExpired) == ctxCanceled {
		return nil
	}
	return c.make().Value(key)
}

// timeoutCause returns the cause of c, whose deadline is shared, when its
// deadline ended it, else nil: the shared context's own cause may not be
// set yet when c's clock says the deadline has passed.
func (c *deadlineCtx) timeoutCause() error {
	if c.Err() == context.DeadlineExceeded {
		return c.cause()
	}
	return nil
}

// Err reports, without making the real context while nothing ended it,
// what context.WithDeadlineCause's would: the parent's end, the deadline,
// or the cancellation.
func (c *deadlineCtx) Err() error {
	s := c.state.Load()
	if c.share != nil {
		switch {
		case s&ctxExpired != 0:
			return context.DeadlineExceeded
		case s&ctxCanceled != 0:
			return context.Canceled
		case int64(time.Since(*c.origin)) >= c.dl:
			return context.DeadlineExceeded
		}
		return nil // the parent is never cancelled
	}
	if s&ctxMade != 0 {
		return c.ctx.Err()
	}
	if s&ctxCanceled != 0 || c.parent.Err() != nil || c.dl != 0 && int64(time.Since(*c.origin)) >= c.dl {
		return c.make().Err()
	}
	return nil
}

// make returns the real context, making it on the first call; first calls
// at once make it once, under mu. It lives in c itself: making it
// allocates only what the context package does.
func (c *deadlineCtx) make() context.Context {
	if c.state.Load()&ctxMade != 0 {
		return c.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&ctxMade == 0 {
		if c.share != nil {
			c.shared = c.share.use(c.origin, c.dl, c.attempt())
			c.ctx = c.shared.ctx
			if c.state.Or(ctxMade)&ctxCanceled != 0 {
				c.share.done(c.shared) // cancelled before it was made
			}
			return c.ctx
		}
		if c.dl == 0 {
			c.ctx, c.stop = context.WithCancel(c.parent)
		} else {
			c.ctx, c.stop = context.WithDeadlineCause(c.parent, c.deadline(), c.cause())
		}
		if c.state.Or(ctxMade)&ctxCanceled != 0 {
			c.stop() // cancelled before it was made
		}
	}
	return c.ctx
}

// cancel ends c, as the CancelFunc of context.WithDeadlineCause does. Of
// a cancel and the making of the real context, whichever sets its bit in
// state second sees the other's and stops the real context.
func (c *deadlineCtx) cancel() {
	if c.share != nil {
		// Whether the deadline came first matters once something could
		// have seen it come: once the real context is made.
		if c.state.Load()&(ctxMade|ctxCanceled) == ctxMade && int64(time.Since(*c.origin)) >= c.dl {
			c.state.Or(ctxExpired)
		}
		if c.state.Or(ctxCanceled)&(ctxMade|ctxCanceled) == ctxMade {
			c.share.done(c.shared)
		}
		return
	}
	if c.state.Or(ctxCanceled)&ctxMade != 0 {
		c.stop()
	}
}

// timeLeft returns the time from now to the earlier of ctx's deadline and
// dl (the zero time: none), and whether either exists.
func timeLeft(ctx context.Context, dl, now time.Time) (time.Duration, bool) {
	if d, ok := ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
		dl = d
	}
	if dl.IsZero() {
		return 0, false
	}
	return dl.Sub(now), true
}
