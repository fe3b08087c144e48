package breakwater

import (
	"context"
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
	parent   context.Context
	origin   *time.Time // what dl counts from; carries a monotonic reading
	dl       int64      // the deadline, nanoseconds after origin; 0: none of its own
	cause    error
	real     atomic.Pointer[realCtx]
	canceled atomic.Bool // cancel was called
}

type realCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
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
	if r := c.real.Load(); r != nil {
		return r.ctx.Err()
	}
	if c.canceled.Load() || c.parent.Err() != nil || c.dl != 0 && int64(time.Since(*c.origin)) >= c.dl {
		return c.make().Err()
	}
	return nil
}

// make returns the real context, making it on the first call. Two first
// calls at once both make one; the one that loses cancels its own.
func (c *deadlineCtx) make() context.Context {
	if r := c.real.Load(); r != nil {
		return r.ctx
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if c.dl == 0 {
		ctx, cancel = context.WithCancel(c.parent)
	} else {
		ctx, cancel = context.WithDeadlineCause(c.parent, c.deadline(), c.cause)
	}
	if !c.real.CompareAndSwap(nil, &realCtx{ctx: ctx, cancel: cancel}) {
		cancel()
		return c.real.Load().ctx
	}
	if c.canceled.Load() {
		cancel()
	}
	return ctx
}

// cancel ends c, as the CancelFunc of context.WithDeadlineCause does.
// Either cancel sees the real context or make sees canceled set (both
// are sequentially consistent atomics), so a context made concurrently
// with a cancellation ends too.
func (c *deadlineCtx) cancel() {
	c.canceled.Store(true)
	if r := c.real.Load(); r != nil {
		r.cancel()
	}
}
