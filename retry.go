package breakwater

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// Defaults of the retry stage.
const (
	DefaultMaxAttempts       = 3
	DefaultBackoffBase       = 100 * time.Millisecond
	DefaultBackoffMax        = 5 * time.Second
	DefaultRetryBudgetRatio  = 0.2
	DefaultRetryBudgetFloor  = 3 // retries per second allowed beyond the ratio
	DefaultRetryBudgetWindow = 10 * time.Second
	retryAfterJitter         = 0.1 // positive jitter added to a server's hint
)

// A Backoff chooses the wait before retry n: n is 1 for the wait after the
// first attempt, and prev is the wait it chose for n-1 (0 when n is 1).
// Implementations must be safe for concurrent use. A Backoff whose waits
// are random may also implement [BoundedBackoff], so that
// [Transport.Explain], [Transport.Simulate] and the automatic breaker
// window use its largest waits instead of estimating them.
type Backoff interface {
	Delay(n int, prev time.Duration) time.Duration
}

// BoundedBackoff is a [Backoff] that knows the largest wait it may choose.
type BoundedBackoff interface {
	Backoff
	MaxDelay(n int, prev time.Duration) time.Duration
}

// BackoffFunc adapts a function to [Backoff].
type BackoffFunc func(n int, prev time.Duration) time.Duration

// Delay calls f(n, prev).
func (f BackoffFunc) Delay(n int, prev time.Duration) time.Duration { return f(n, prev) }

// ExponentialJitter is exponential backoff with full jitter, the default:
// a uniformly random wait in [0, min(limit, base·2^(n-1))].
func ExponentialJitter(base, limit time.Duration) BoundedBackoff {
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

// Exponential waits base·2^(n-1), capped at limit, without jitter.
func Exponential(base, limit time.Duration) Backoff { return exponential{base, limit} }

type exponential struct{ base, limit time.Duration }

func (e exponential) Delay(n int, _ time.Duration) time.Duration {
	d := e.base
	for i := 1; i < n && d < e.limit; i++ {
		d *= 2
	}
	return min(d, e.limit)
}

// Constant always waits d.
func Constant(d time.Duration) Backoff {
	return BackoffFunc(func(int, time.Duration) time.Duration { return d })
}

// Linear waits base + (n-1)·step, capped at limit.
func Linear(base, step, limit time.Duration) Backoff {
	return BackoffFunc(func(n int, _ time.Duration) time.Duration {
		return min(base+time.Duration(n-1)*step, limit)
	})
}

// DecorrelatedJitter waits a random time in [base, 3·prev] capped at limit
// (prev taken as base for the first retry), which spreads competing clients
// apart while still growing.
func DecorrelatedJitter(base, limit time.Duration) BoundedBackoff {
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

// backoffFunc is the internal form of a backoff, with the response that is
// about to be retried (for go-retryablehttp's Backoff functions).
type backoffFunc func(n int, prev time.Duration, resp *http.Response) time.Duration

// RetryError is returned when a call that made more than one attempt ends
// with an error: the last attempt's error, or the rejection that ended the
// call part-way through. It unwraps to that error and matches
// [ErrRetryBudget] when the retry budget stopped the call.
type RetryError struct {
	Key      string
	Attempts int
	// Category is the classification of the last error.
	Category Category
	// Budget reports that the key's retry budget refused another attempt.
	Budget bool
	Err    error
}

func (e *RetryError) Error() string {
	s := fmt.Sprintf("breakwater: giving up on %s after %d attempt(s)", e.Key, e.Attempts)
	if e.Budget {
		s += " (retry budget exhausted)"
	}
	return s + ": " + e.Err.Error()
}

func (e *RetryError) Unwrap() error { return e.Err }

// Is matches [ErrRetryBudget] when the budget ended the call.
func (e *RetryError) Is(target error) bool { return e.Budget && target == ErrRetryBudget }

// idempotent reports whether req may be sent more than once: its method is
// one RFC 9110 defines as idempotent, or it carries an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return len(req.Header["Idempotency-Key"]) > 0 || len(req.Header["X-Idempotency-Key"]) > 0
}

func hasBody(req *http.Request) bool { return req.Body != nil && req.Body != http.NoBody }

// retryBudget limits retries per key to ratio × calls plus floor per second
// over a sliding window, so an outage cannot multiply the load on an
// upstream by the attempt count.
type retryBudget struct {
	w       rateWindow // calls and retries
	ratio   float64
	reserve float64 // floor × window seconds
}

func newRetryBudget(ratio, floor float64, window time.Duration) *retryBudget {
	return &retryBudget{w: newRateWindow(window), ratio: ratio, reserve: floor * window.Seconds()}
}

func (b *retryBudget) deposit(now int64) { b.w.add(now, 1, 0) }

// withdraw takes one retry from the budget, or reports false.
func (b *retryBudget) withdraw(now int64) bool {
	calls, retries := b.w.sum(now)
	if float64(retries+1) > b.ratio*float64(calls)+b.reserve {
		return false
	}
	b.w.add(now, 0, 1)
	return true
}

// sleep waits d or until ctx ends, reporting whether the whole wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ctxError is what a call returns when its context ended: the caller's own
// error unchanged, or a *TimeoutError for our call timeout.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if c := timeoutCause(ctx); c != nil {
		return &TimeoutError{Cause: c, Err: err}
	}
	if c := context.Cause(ctx); c != nil && !errors.Is(c, err) {
		return c
	}
	return err
}
