package breakwater

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is the context of one attempt (or of a timeout stage's call):
// its parent bounded by a deadline with a cause, as
// context.WithDeadlineCause(parent, deadline, cause) is, or only
// cancellable, as context.WithCancel(parent) is, but made lazily.
// Until something asks for its Done channel or one of its values, it is a
// parent and a deadline, with no timer, no channel and no allocation of its
// own: Deadline needs neither, and Err compares the deadline with the
// clock. The first such question (net/http asks at once, an in-memory base
// transport may never ask) makes the real context with
// context.WithDeadlineCause, and every method answers from it from then
// on, so the context package's parent-child links, causes and AfterFunc
// work unchanged. Its methods are safe for concurrent use.
type deadlineCtx struct {
	parent context.Context
	origin *time.Time // what dl counts from; carries a monotonic reading
	dl     int64      // the deadline, nanoseconds after origin; 0: none of its own
	cause  error
	// The real context, once made: ctx and stop are written under mu
	// before made is set, and read without it once made is seen.
	mu       sync.Mutex
	ctx      context.Context
	stop     context.CancelFunc
	made     atomic.Bool
	canceled atomic.Bool // cancel was called
}

// stageEpoch is the origin of the timeout stages' deadlines.
var stageEpoch = time.Now()

func (c *deadlineCtx) init(parent context.Context, origin *time.Time, dl int64, cause error) {
	c.parent, c.origin, c.dl, c.cause = parent, origin, dl, cause
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

func (c *deadlineCtx) Done() <-chan struct{} { return c.make().Done() }

func (c *deadlineCtx) Value(key any) any { return c.make().Value(key) }

// Err reports, without making the real context while nothing ended it,
// what context.WithDeadlineCause's would: the parent's end, the deadline,
// or the cancellation.
func (c *deadlineCtx) Err() error {
	if c.made.Load() {
		return c.ctx.Err()
	}
	if c.canceled.Load() || c.parent.Err() != nil || c.dl != 0 && int64(time.Since(*c.origin)) >= c.dl {
		return c.make().Err()
	}
	return nil
}

// make returns the real context, making it on the first call; first calls
// at once make it once, under mu. It lives in c itself: making it
// allocates only what the context package does.
func (c *deadlineCtx) make() context.Context {
	if c.made.Load() {
		return c.ctx
	}
	c.mu.Lock()
	if !c.made.Load() {
		if c.dl == 0 {
			c.ctx, c.stop = context.WithCancel(c.parent)
		} else {
			c.ctx, c.stop = context.WithDeadlineCause(c.parent, c.deadline(), c.cause)
		}
		c.made.Store(true)
	}
	c.mu.Unlock()
	if c.canceled.Load() {
		c.stop()
	}
	return c.ctx
}

// cancel ends c, as the CancelFunc of context.WithDeadlineCause does.
// Either cancel sees made set or make, which sets it before it looks,
// sees canceled set (both are sequentially consistent atomics), so a
// context made concurrently with a cancellation ends too.
func (c *deadlineCtx) cancel() {
	c.canceled.Store(true)
	if c.made.Load() {
		c.stop()
	}
}
