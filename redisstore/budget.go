package redisstore

import (
	"context"
	"time"
)

// A timer of its own for every admission's budget costs a caller alone
// about 3 % of a loopback round trip: arming it wakes the scheduler. So
// admissions share their budgets' ends: those begun within a budget grain
// of each other (an eighth of the budget, at most a millisecond) run under
// one context, which ends at the budget of the first of them. An
// admission's budget may so end up to a grain early, never late.
const maxBudgetGrain = int64(time.Millisecond)

// sharedBudget is the end of the budgets of the admissions that share it:
// a context that ends with ErrBudget at at (Store nanoseconds). Nothing
// cancels it but its own timer.
type sharedBudget struct {
	at       int64
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
}

// budgetGrain is how early a shared budget may end an admission.
func budgetGrain(budget time.Duration) int64 { return min(int64(budget)/8, maxBudgetGrain) }

// admission returns the context an admission begun under ctx runs under,
// and what ends it. It ends at the Store's budget (see maxBudgetGrain) or
// at ctx's deadline, whichever is sooner, and carries ctx's values for the
// client's hooks. It does not end when ctx is cancelled: the round trip is
// a budget long at most, and the caller's own deadline still bounds it.
func (s *Store) admission(ctx context.Context) (context.Context, context.CancelFunc) {
	end := s.now() + int64(s.cfg.budget)
	b := s.shared.Load()
	if b == nil || b.at > end || end-b.at >= s.grain {
		b = &sharedBudget{at: end, deadline: s.start.Add(time.Duration(end))}
		b.ctx, b.cancel = context.WithDeadlineCause(context.Background(), b.deadline, ErrBudget)
		s.shared.Store(b)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(b.deadline) {
		return context.WithDeadlineCause(ctx, b.deadline, ErrBudget)
	}
	return &budgetCtx{Context: b.ctx, values: ctx}, func() {}
}

// budgetCtx is an admission's context under a shared budget: the shared
// context's deadline, Done, Err and cause, and its caller's values.
type budgetCtx struct {
	context.Context                 // the shared budget's
	values          context.Context // the caller's
}

// Value returns the caller's value for key, except for the key by which
// the context package finds a context's cancellation and cause: that is
// the shared budget's, so that context.Cause reports ErrBudget and a
// context made from this one ends with the budget.
func (c *budgetCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}
