package breakwater

import (
	"math/rand/v2"
	"time"
)

// A Backoff chooses the wait before retry n: n is 1 for the wait after the
// first attempt, and prev is the wait it chose for n-1 (0 when n is 1).
// Implementations must be safe for concurrent use. A Backoff whose waits
// are random may also have a method MaxDelay(n int, prev time.Duration)
// time.Duration that returns the largest wait Delay may choose, so that
// [Transport.Explain], [Transport.Simulate] and the automatic breaker
// window use its largest waits instead of estimating them by drawing.
type Backoff interface {
	Delay(n int, prev time.Duration) time.Duration
}

// boundedBackoff is a [Backoff] that knows the largest wait it may choose.
type boundedBackoff interface {
	Backoff
	MaxDelay(n int, prev time.Duration) time.Duration
}

// BackoffFunc adapts a function to [Backoff].
type BackoffFunc func(n int, prev time.Duration) time.Duration

// Delay calls f(n, prev).
func (f BackoffFunc) Delay(n int, prev time.Duration) time.Duration { return f(n, prev) }

// ExponentialJitter is exponential backoff with full jitter, the default:
// a uniformly random wait in [0, min(limit, base·2^(n-1))].
func ExponentialJitter(base, limit time.Duration) Backoff {
	return fullJitter{exponential{base, limit}}
}

type fullJitter struct{ exponential }

func (j fullJitter) Delay(n int, prev time.Duration) time.Duration {
	if d := j.exponential.Delay(n, prev); d > 0 {
		return rand.N(d + 1)
	}
	return 0
}

func (j fullJitter) MaxDelay(n int, prev time.Duration) time.Duration {
	return j.exponential.Delay(n, prev)
}

type exponential struct{ base, limit time.Duration }

func (e exponential) Delay(n int, _ time.Duration) time.Duration {
	d := e.base
	for i := 1; i < n && d < e.limit; i++ {
		d *= 2
	}
	return min(d, e.limit)
}

// Constant always waits d.
func Constant(d time.Duration) Backoff { return constant(d) }

type constant time.Duration

func (d constant) Delay(int, time.Duration) time.Duration { return time.Duration(d) }

// Linear waits base + (n-1)·step, capped at limit.
func Linear(base, step, limit time.Duration) Backoff { return linear{base, step, limit} }

type linear struct{ base, step, limit time.Duration }

func (l linear) Delay(n int, _ time.Duration) time.Duration {
	return min(l.base+time.Duration(n-1)*l.step, l.limit)
}

// DecorrelatedJitter waits a random time in [base, 3·prev] capped at limit
// (prev taken as base for the first retry), which spreads competing clients
// apart while still growing.
func DecorrelatedJitter(base, limit time.Duration) Backoff {
	return decorrelated{base, limit}
}

type decorrelated struct{ base, limit time.Duration }

func (d decorrelated) Delay(_ int, prev time.Duration) time.Duration {
	hi := d.MaxDelay(0, prev)
	if hi <= d.base {
		return hi
	}
	return d.base + rand.N(hi-d.base+1)
}

func (d decorrelated) MaxDelay(_ int, prev time.Duration) time.Duration {
	return min(3*max(prev, d.base), d.limit)
}

// backoffSafely calls b, reporting false when it panics.
func backoffSafely(b Backoff, n int, prev time.Duration) (d time.Duration, ok bool) {
	defer func() {
		if recover() != nil {
			d, ok = 0, false
		}
	}()
	return b.Delay(n, prev), true
}
