package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// budgets ends the budgets of the admissions that send themselves, at
// most maxDirect at once, with one timer for all of them rather than one
// each: an admission registers its context in a slot, and the timer,
// armed for the earliest end among them, cancels with ErrBudget those
// whose budget has run out, then rearms for the next. While admissions
// follow one another the timer fires about once a budget, not once an
// admission; when none is in flight it stops. The client honours
// deadlines on this path, so its reads and writes end at the context's
// deadline by themselves; the timer ends the waits that go-redis makes on
// the context's Done (for a pooled connection, for a dial).
type budgets struct {
	budget time.Duration
	start  time.Time
	slots  [maxDirect]atomic.Pointer[budgetCtx]
	at     atomic.Int64 // when the timer fires, ns since start; 0: not armed
	mu     sync.Mutex   // orders arming against firing
	timer  *time.Timer
}

// A budgetCtx is one admission's context: the caller's, cancelled with
// ErrBudget when the budget runs out, its deadline the earlier of the
// budget's end and the caller's own.
type budgetCtx struct {
	context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time
	end      int64 // the budget's end, ns since budgets.start
	slot     int
}

func (c *budgetCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func newBudgets(budget time.Duration) *budgets {
	w := &budgets{budget: budget, start: time.Now()}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

// begin returns the context of an admission under parent, or nil when
// every slot is taken (the caller then makes its own timer). Each begin
// that returns a context must be followed by one done.
func (w *budgets) begin(parent context.Context) *budgetCtx {
	ctx, cancel := context.WithCancelCause(parent)
	now := time.Now()
	c := &budgetCtx{Context: ctx, cancel: cancel, deadline: now.Add(w.budget), end: int64(now.Sub(w.start) + w.budget), slot: -1}
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d // the caller's own context ends it then
	}
	for i := range w.slots {
		if w.slots[i].CompareAndSwap(nil, c) {
			c.slot = i
			break
		}
	}
	if c.slot < 0 {
		cancel(nil)
		return nil
	}
	// The slot is taken before at is read: a firing that resets at to 0
	// before this read scans the slots after it, and sees this one.
	if at := w.at.Load(); at == 0 || c.end < at {
		w.arm(c.end)
	}
	return c
}

// done frees c's slot and releases its context.
func (w *budgets) done(c *budgetCtx) {
	w.slots[c.slot].Store(nil)
	c.cancel(nil)
}

// arm makes the timer fire by end at the latest.
func (w *budgets) arm(end int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if at := w.at.Load(); at == 0 || end < at {
		w.at.Store(end)
		w.timer.Reset(time.Duration(end) - time.Since(w.start))
	}
}

// fire cancels the admissions whose budget has run out and rearms the
// timer for the earliest end among the others, if any.
func (w *budgets) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at.Store(0)
	now := int64(time.Since(w.start))
	var next int64
	for i := range w.slots {
		c := w.slots[i].Load()
		switch {
		case c == nil:
		case c.end <= now:
			c.cancel(ErrBudget)
		case next == 0 || c.end < next:
			next = c.end
		}
	}
	if next != 0 {
		w.at.Store(next)
		w.timer.Reset(time.Duration(next - now))
	}
}

// stop stops the timer unless an admission is in flight (its last firing
// then finds none to rearm for).
func (w *budgets) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.slots {
		if w.slots[i].Load() != nil {
			return
		}
	}
	w.timer.Stop()
	w.at.Store(0)
}
