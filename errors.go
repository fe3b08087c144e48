package breakwater

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors for errors.Is. Every rejection that breakwater itself makes
// matches exactly one of them; the struct errors below carry the details.
var (
	// ErrCircuitOpen: the key's breaker is open; the upstream was not called.
	ErrCircuitOpen = errors.New("breakwater: circuit open")
	// ErrHalfOpenBusy: the breaker is half-open and all probe slots are taken.
	ErrHalfOpenBusy = errors.New("breakwater: circuit half-open, probe slots busy")
	// ErrPaused: the upstream asked the key to wait (a 429's Retry-After,
	// a spent quota, or 503s with Retry-After answering most of its recent
	// attempts) and the wait outlasts the caller's deadline.
	ErrPaused = errors.New("breakwater: paused by upstream")
	// ErrRateLimited: a token would not be available before the deadline.
	ErrRateLimited = errors.New("breakwater: rate limited")
	// ErrConcurrencyLimit: all in-flight slots are taken and the wait queue is
	// full or the wait would outlast the deadline.
	ErrConcurrencyLimit = errors.New("breakwater: concurrency limit reached")
	// ErrRetryBudget: the key's retry budget is spent; the call was not retried.
	ErrRetryBudget = errors.New("breakwater: retry budget exhausted")
	// ErrAttemptTimeout is the cause of an attempt context that hit the
	// attempt timeout.
	ErrAttemptTimeout = errors.New("breakwater: attempt timeout")
	// ErrCallTimeout is the cause of a call context that hit the call timeout.
	ErrCallTimeout = errors.New("breakwater: call timeout")
)

// BreakerError is the error returned when a breaker rejects an attempt. It
// matches [ErrCircuitOpen] or [ErrHalfOpenBusy] with errors.Is. The values a
// breaker returns are shared and must not be modified.
type BreakerError struct {
	Key   string
	State State
	// OpenUntil is when an open breaker lets probes through again; zero
	// when half-open.
	OpenUntil time.Time
	// Injected marks a rejection made by fault injection.
	Injected bool
}

func (e *BreakerError) Error() string {
	switch {
	case e.Injected:
		return fmt.Sprintf("breakwater: circuit open for %q (fault injected)", e.Key)
	case e.State == StateOpen:
		return fmt.Sprintf("breakwater: circuit open for %q (%s remaining)", e.Key, e.RetryAfter().Round(time.Millisecond))
	}
	return fmt.Sprintf("breakwater: circuit half-open for %q, probe slots busy", e.Key)
}

// Is reports whether target is the sentinel for this rejection.
func (e *BreakerError) Is(target error) bool {
	if e.State == StateOpen {
		return target == ErrCircuitOpen
	}
	return target == ErrHalfOpenBusy
}

// RetryAfter is how long the breaker stays open from now (zero when
// half-open): what a server should put in its own Retry-After.
func (e *BreakerError) RetryAfter() time.Duration {
	if e.OpenUntil.IsZero() {
		return 0
	}
	return max(0, time.Until(e.OpenUntil))
}

// RetryAfter reports how long the caller should wait before trying again,
// when err (or an error it wraps) is one of breakwater's rejections that
// knows: an open breaker, a pause, a rate limit. A server can answer a
// downstream rejection with its own 503 and Retry-After in one line.
func RetryAfter(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter(), true
	}
	return 0, false
}

// PauseError is returned when a key is held at the upstream's request (a
// 429 with a hint, a spent quota announced in rate limit headers, or 503s
// with a Retry-After hint answering most of its recent attempts; see
// [PauseGates]) and the wait outlasts what the call may wait. It matches
// [ErrPaused] with errors.Is.
type PauseError struct {
	Key string
	// Remaining is how long the pause still had to run when the call was
	// refused.
	Remaining time.Duration
	// Until is when the pause ends.
	Until time.Time
}

func (e *PauseError) Error() string {
	return fmt.Sprintf("breakwater: %q paused by upstream (%s remaining)", e.Key, e.Remaining.Round(time.Millisecond))
}

// Is reports whether target is [ErrPaused].
func (e *PauseError) Is(target error) bool { return target == ErrPaused }

// RetryAfter is the pause's remaining time when the call was refused: what
// a server should put in its own Retry-After.
func (e *PauseError) RetryAfter() time.Duration { return e.Remaining }

// RateLimitError is returned when a rate limiter refuses a request: in
// reject mode when no token is available, in wait mode when the wait for
// one does not fit the deadline or the limiter's longest wait. It matches
// [ErrRateLimited] with errors.Is.
type RateLimitError struct {
	Key string
	// Wait is how long the request would have had to wait for its token.
	Wait time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("breakwater: rate limited on %q (next token in %s)", e.Key, e.Wait.Round(time.Millisecond))
}

// Is reports whether target is [ErrRateLimited].
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// RetryAfter is the wait the request would have needed.
func (e *RateLimitError) RetryAfter() time.Duration { return e.Wait }

// ConcurrencyError is returned when a bulkhead refuses a request: all its
// slots are taken and its wait queue is full or disabled, or the request
// waited as long as it could. It matches [ErrConcurrencyLimit] with
// errors.Is.
type ConcurrencyError struct {
	Key string
	// Limit is the bulkhead's limit and InFlight the slots held when the
	// request was refused.
	Limit, InFlight int
	// Waited is how long the request waited in the queue; zero when it was
	// refused at once.
	Waited time.Duration
}

func (e *ConcurrencyError) Error() string {
	s := fmt.Sprintf("breakwater: concurrency limit reached on %q (%d in flight, limit %d)", e.Key, e.InFlight, e.Limit)
	if e.Waited > 0 {
		s += fmt.Sprintf(" after waiting %s", e.Waited.Round(time.Millisecond))
	}
	return s
}

// Is reports whether target is [ErrConcurrencyLimit].
func (e *ConcurrencyError) Is(target error) bool { return target == ErrConcurrencyLimit }
