package breakwater_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A backoff that waits nothing retries at once, and the call returns the
// answer of the attempt that succeeded.
func TestRetryWithoutWaiting(t *testing.T) {
	for name, b := range map[string]bw.Backoff{
		"Constant(0)":                 bw.Constant(0),
		"a BackoffFunc returning 0":   bw.BackoffFunc(func(int, time.Duration) time.Duration { return 0 }),
		"a negative wait":             bw.Constant(-time.Second),
		"full jitter with no range":   bw.ExponentialJitter(0, time.Second),
		"decorrelated with no range":  bw.DecorrelatedJitter(0, 0),
		"linear from 0 without steps": bw.Linear(0, 0, time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{Status: 502},
					breakwatertest.Step{Body: []byte("third")})
				tr := newTransport(t, u.Transport(), bw.WithBackoff(b), bw.WithMaxAttempts(3))
				start := time.Now()
				r := get(tr)
				if r.err != nil || r.status != 200 || r.body != "third" {
					t.Fatalf("%+v, want the third attempt's 200", r)
				}
				if u.Count() != 3 || time.Since(start) != 0 {
					t.Fatalf("%d requests in %s, want 3 at once", u.Count(), time.Since(start))
				}
			})
		})
	}
}

// A retry is made only when its wait ends before the deadline: when the
// time left is exactly the wait, the call returns the last answer at once
// instead of sleeping until the deadline. (A response to discard needs a
// little more time than the wait, to be drained; a failed attempt needs none,
// which puts the boundary exactly at the wait.)
func TestRetryWaitAgainstTheDeadline(t *testing.T) {
	const left, drain = 2 * time.Second, 20 * time.Millisecond
	for _, c := range []struct {
		name     string
		first    breakwatertest.Step
		wait     time.Duration
		deadline string // "call timeout", "context", or both with one "first"
		retried  bool
	}{
		{"error, wait equals the call timeout left", reset, left, "call timeout", false},
		{"error, wait equals the context's time left", reset, left, "context", false},
		{"error, wait longer than the time left", reset, left + time.Nanosecond, "call timeout", false},
		{"error, wait just shorter than the call timeout left", reset, left - time.Nanosecond, "call timeout", true},
		{"error, wait just shorter than the context's time left", reset, left - time.Nanosecond, "context", true},
		{"error, wait equals the call timeout left, the context's later", reset, left, "call timeout first", false},
		{"error, wait equals the context's time left, the call timeout later", reset, left, "context first", false},
		{"error, wait just shorter than the call timeout left, the context's later", reset, left - time.Nanosecond, "call timeout first", true},
		{"503, wait equals the call timeout left", unavailable, left, "call timeout", false},
		{"503, wait equals the context's time left", unavailable, left, "context", false},
		// The 503 is drained for up to 20 ms (Transport's doc) before the wait.
		{"503, wait and drain equal the time left", unavailable, left - drain, "call timeout", false},
		{"503, wait and drain just shorter than the time left", unavailable, left - drain - time.Nanosecond, "call timeout", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, c.first, breakwatertest.Step{})
				opts := []bw.Option{bw.WithBackoff(bw.Constant(c.wait)), bw.WithAttemptTimeout(time.Second)}
				ctx := context.Background()
				callTimeout, ctxTimeout := time.Duration(0), time.Duration(0)
				switch c.deadline {
				case "call timeout":
					callTimeout = left
				case "context":
					ctxTimeout = left
				case "call timeout first":
					callTimeout, ctxTimeout = left, left+time.Hour
				case "context first":
					callTimeout, ctxTimeout = left+time.Hour, left
				}
				opts = append(opts, bw.WithCallTimeout(callTimeout))
				if ctxTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, ctxTimeout)
					defer cancel()
				}
				tr := newTransport(t, u.Transport(), opts...)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
				start := time.Now()
				r := do(tr, req)
				took := time.Since(start)
				switch {
				case c.retried && (r.err != nil || r.status != 200 || took != c.wait):
					t.Fatalf("%+v after %s, want the retry's 200 after %s", r, took, c.wait)
				case c.retried:
				case took != 0 || errors.Is(r.err, context.DeadlineExceeded) || u.Count() != 1:
					t.Fatalf("%+v after %s and %d requests, want the first answer at once", r, took, u.Count())
				case c.first.Status == 503 && r.status != 503:
					t.Fatalf("%+v, want the 503", r)
				case c.first.ResetBeforeHeaders && r.err == nil:
					t.Fatalf("%+v, want the first attempt's error", r)
				}
			})
		})
	}
}

var (
	reset       = breakwatertest.Step{ResetBeforeHeaders: true}
	unavailable = breakwatertest.Step{Status: 503}
)
