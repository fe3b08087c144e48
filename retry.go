package breakwater

import (
	"context"
	"errors"
	"fmt"
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
