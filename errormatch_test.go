package breakwater_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// TestTimeoutsMatchAfterRetries checks the checks Go callers write for a
// timeout, on the error http.Client returns, after one attempt and after
// several.
func TestTimeoutsMatchAfterRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []bw.Option
		sentinel error
		attempts int
	}{
		{"one attempt", []bw.Option{bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(1)}, bw.ErrAttemptTimeout, 1},
		{"attempt timeouts, retried", []bw.Option{bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(3)}, bw.ErrAttemptTimeout, 3},
		{"call timeout after retries", []bw.Option{bw.WithCallTimeout(2500 * time.Millisecond), bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(5)}, bw.ErrCallTimeout, 3},
		{"a short call timeout alone", []bw.Option{bw.WithCallTimeout(2 * time.Second)}, bw.ErrCallTimeout, 1},
		// The last attempt's timeout ends with the call's: the call ran out of time.
		{"call timeout at the last attempt's end", []bw.Option{bw.WithCallTimeout(2010 * time.Millisecond), bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(2)}, bw.ErrCallTimeout, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
				tr := newTransport(t, u.Transport(), append([]bw.Option{bw.WithBackoff(bw.Constant(10 * time.Millisecond))}, tc.opts...)...)
				_, err := (&http.Client{Transport: tr}).Get(breakwatertest.PipeURL)
				var ne net.Error
				var e *bw.Error
				switch {
				case !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
				case !errors.As(err, &ne) || !ne.Timeout():
					t.Errorf("%v is not a net.Error whose Timeout is true", err)
				case !os.IsTimeout(err):
					t.Errorf("os.IsTimeout(%v) = false", err)
				case !errors.Is(err, tc.sentinel):
					t.Errorf("errors.Is(%v, %v) = false", err, tc.sentinel)
				case !errors.As(err, &e) || e.Attempts != tc.attempts || e.Mechanism != bw.MechTimeout:
					t.Errorf("%v: %+v, want %d attempts", err, e, tc.attempts)
				}
				if u.Count() != tc.attempts {
					t.Errorf("upstream saw %d requests, want %d", u.Count(), tc.attempts)
				}
			})
		})
	}
}

// TestWhichTimeoutIsDeterministic runs a setup whose last attempt ends by
// the attempt timeout just before the call timeout: whether the jittered
// wait before another attempt would fit is chance, which timeout the error
// names is not.
func TestWhichTimeoutIsDeterministic(t *testing.T) {
	for i := range 40 {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
			tr := newTransport(t, u.Transport(), bw.WithCallTimeout(2*time.Second), bw.WithAttemptTimeout(1950*time.Millisecond),
				bw.WithBackoff(bw.ExponentialJitter(100*time.Millisecond, time.Second)))
			start := time.Now()
			_, err := tr.RoundTrip(mustGet(t))
			if !errors.Is(err, bw.ErrCallTimeout) || errors.Is(err, bw.ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run %d: %v after %s (%d requests), want the call timeout alone", i, err, time.Since(start), u.Count())
			}
		})
	}
}

// TestRetryAfterIsNeverZero checks that RetryAfter reports a hint only
// while it lasts.
func TestRetryAfterIsNeverZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithOpenJitter(0), bw.WithHalfOpen(1, 1))
		b := bs.Get("k")
		b.Trip(time.Second)
		_, open := b.Allow()
		if d, ok := bw.RetryAfter(open); !ok || d != time.Second {
			t.Fatalf("open: RetryAfter = %s, %v; want 1s, true", d, ok)
		}
		time.Sleep(time.Second)
		if d, ok := bw.RetryAfter(open); ok || d != 0 {
			t.Errorf("open time over: RetryAfter = %s, %v; want 0, false", d, ok)
		}
		if _, err := b.Allow(); err != nil {
			t.Fatalf("probe: %v", err)
		}
		_, busy := b.Allow()
		if d, ok := bw.RetryAfter(busy); !errors.Is(busy, bw.ErrHalfOpenBusy) || !errors.Is(busy, bw.ErrCircuitOpen) || ok || d != 0 {
			t.Errorf("half-open: %v, RetryAfter = %s, %v; want ErrHalfOpenBusy under ErrCircuitOpen, no hint", busy, d, ok)
		}
		if d, ok := bw.RetryAfter(errors.New("other")); ok || d != 0 {
			t.Errorf("another error: RetryAfter = %s, %v", d, ok)
		}
	})
}

// An error of the upstream's comes back as it is after one attempt, as a
// bare http.Client would return it, and inside an *Error counting the
// attempts after several.
func TestUpstreamErrorAfterOneAttemptAndAfterSeveral(t *testing.T) {
	boom := errors.New("boom")
	base := bw.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, boom })
	for _, attempts := range []int{1, 3} {
		tr := newTransport(t, base, bw.WithMaxAttempts(attempts), bw.WithBackoff(bw.Constant(0)), bw.WithoutRetryBudget())
		r := get(tr)
		var e *bw.Error
		switch {
		case attempts == 1 && r.err != boom:
			t.Errorf("after 1 attempt: %v, want the upstream's error itself", r.err)
		case attempts > 1 && (!errors.Is(r.err, boom) || !errors.As(r.err, &e) || e.Attempts != attempts):
			t.Errorf("after %d attempts: %v (%+v), want an *Error of %d attempts wrapping the upstream's", attempts, r.err, e, attempts)
		}
	}
}

// TestAttemptTimeoutTheBudgetEnded: the attempt timeout ends an attempt
// and the retry budget refuses the retry, with time left on the call. The
// error is the attempt timeout's alone, as the table of rejections puts
// timeouts first: ErrAttemptTimeout, mechanism timeout, and no
// ErrRetryBudget.
func TestAttemptTimeoutTheBudgetEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(3),
			bw.WithRetryBudget(0, 0, time.Minute))
		_, err := (&http.Client{Transport: tr}).Get(breakwatertest.PipeURL)
		var e *bw.Error
		switch {
		case !errors.Is(err, bw.ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%v: want ErrAttemptTimeout and context.DeadlineExceeded", err)
		case errors.Is(err, bw.ErrRetryBudget) || errors.Is(err, bw.ErrCallTimeout):
			t.Errorf("%v matches ErrRetryBudget or ErrCallTimeout: want the attempt timeout alone", err)
		case !errors.As(err, &e) || e.Mechanism != bw.MechTimeout || e.Attempts != 1:
			t.Errorf("%v: %+v, want mechanism timeout after 1 attempt", err, e)
		}
		if u.Count() != 1 {
			t.Errorf("upstream saw %d requests, want 1", u.Count())
		}
	})
}
