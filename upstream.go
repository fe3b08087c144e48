package breakwater

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// upstream is what a Transport learns about one key besides its breaker
// and limits: the retry budget, and how long its answers have recently
// taken, which tells a hang from a caller that gave up too early.
type upstream struct {
	budget  *retryBudget // nil without a retry budget
	answers answerTimes
	cong    congestion                 // the congestion limit (congestion.go)
	hedge   atomic.Pointer[hedgeState] // made by the key's first hedgeable call (hedge.go)
	// breaker is the key's entry in the Transport's breaker registry, as
	// its last call found it: a call pins it again instead of looking the
	// key up twice (see Transport.breakerOf).
	breaker atomic.Pointer[keyed.Entry[*Breaker]]
}

// Hangs. An attempt that the caller's own deadline cut is a hang, and
// counts as a [Timeout], when it had been waiting at least hangFactor times
// as long as the slowest answer the key gave in the last one to two
// answerPeriods, and at least hangFloor. Shorter, it is the caller's
// impatience and stays neutral, as an explicit cancellation always does.
const (
	hangFloor    = time.Second
	hangFactor   = 2
	answerPeriod = int64(time.Minute)
)

// answerTimes keeps the slowest answer of the current period and of the
// previous one. Updates are lock-free and cost two atomic loads unless an
// answer is the slowest yet.
type answerTimes struct {
	period atomic.Int64 // current period number
	cur    atomic.Int64 // slowest answer of the current period, nanoseconds
	prev   atomic.Int64 // of the previous period
}

// observe records an answer that took d, at now (Transport nanoseconds).
func (a *answerTimes) observe(now int64, d time.Duration) {
	p := now / answerPeriod
	if old := a.period.Load(); old != p && a.period.CompareAndSwap(old, p) {
		last := a.cur.Swap(0)
		if p != old+1 {
			last = 0
		}
		a.prev.Store(last)
	}
	for {
		c := a.cur.Load()
		if int64(d) <= c || a.cur.CompareAndSwap(c, int64(d)) {
			return
		}
	}
}

// weigh tells the registry that an upstream that answered in the last
// one to two periods holds the times hangs are judged by, worth keeping;
// its retry budget alone only grants more when lost (see [keyed.Map]).
func (u *upstream) weigh(now int64) keyed.Keep {
	if u.answers.slowest(now) > 0 {
		return keyed.Soft
	}
	return keyed.None
}

// slowest returns the slowest answer of the last one to two periods.
func (a *answerTimes) slowest(now int64) time.Duration {
	switch p := now / answerPeriod; a.period.Load() {
	case p:
		return time.Duration(max(a.cur.Load(), a.prev.Load()))
	case p - 1:
		return time.Duration(a.cur.Load())
	}
	return 0
}

// hung reports whether an attempt that waited d without an answer, and
// ended because ctx (the caller's context) ended, is a hang of the
// upstream rather than the caller giving up: ctx passed its deadline (an
// explicit cancellation never is a hang) after the attempt waited longer
// than the upstream's answers take.
func (u *upstream) hung(ctx context.Context, now int64, d time.Duration) bool {
	return ctx.Err() == context.DeadlineExceeded && d >= max(hangFloor, hangFactor*u.answers.slowest(now))
}
