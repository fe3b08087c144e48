package breakwater_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A budget of ratio 0 and a floor of 0.1/s over 10 s holds exactly one
// retry: the first failing call gets it, the next gets none.
func TestRetryBudgetHoldsItsAllowanceExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		tr := newTransport(t, u.Transport(), bw.WithRetryBudget(0, 0.1, 10*time.Second), bw.WithMaxAttempts(3),
			bw.WithBackoff(bw.Constant(0)))
		for i, want := range []int{2, 1, 1} {
			before := u.Count()
			if r := get(tr); r.status != 503 {
				t.Fatalf("call %d: %+v", i+1, r)
			}
			if n := u.Count() - before; n != want {
				t.Fatalf("call %d made %d attempts, want %d", i+1, n, want)
			}
		}
	})
}

// A retry that succeeds is given back while the budget's window still
// counts it (9 of its 10 buckets: 9 s of a 10 s window), and not after.
func TestRetryBudgetRefund(t *testing.T) {
	for _, c := range []struct {
		wait     time.Duration
		refunded bool
	}{
		{time.Second, true},
		{9*time.Second - time.Nanosecond, true},
		{9 * time.Second, false},
	} {
		t.Run(c.wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
					if n%2 == 1 {
						return breakwatertest.Step{Status: 503}
					}
					return breakwatertest.Step{}
				})
				tr := newTransport(t, u.Transport(), bw.WithRetryBudget(0, 0.1, 10*time.Second),
					bw.WithBackoff(bw.Constant(c.wait)), bw.WithCallTimeout(0))
				time.Sleep(time.Minute) // the budget's clock is well past its start
				if r := get(tr); r.status != 200 {
					t.Fatalf("first call: %+v, want its retry's 200", r)
				}
				want := 503 // the budget's one retry is spent
				if c.refunded {
					want = 200
				}
				if r := get(tr); r.status != want {
					t.Fatalf("second call after a retry that helped %s later: %d, want %d", c.wait, r.status, want)
				}
			})
		})
	}
}

// Calls allowed a single attempt add nothing to the retry budget: after
// ten of them, a budget of ratio 0.5 and no floor holds no retry for the
// next call (its own half a retry is not one).
func TestRetryBudgetCountsOnlyCallsThatMayRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		tr := newTransport(t, u.Transport(), bw.WithRetryBudget(0.5, 0, 10*time.Second), bw.WithMaxAttempts(3),
			bw.WithBackoff(bw.Constant(0)))
		once := bw.WithRequestPolicy(context.Background(), bw.RequestPolicy{MaxAttempts: 1})
		for range 10 {
			req, _ := http.NewRequestWithContext(once, http.MethodGet, breakwatertest.PipeURL+"/", nil)
			if r := do(tr, req); r.status != 503 {
				t.Fatalf("a call of one attempt: %+v", r)
			}
		}
		before := u.Count()
		if r := get(tr); r.status != 503 || u.Count()-before != 1 {
			t.Fatalf("%+v after %d attempts, want the 503 after 1", r, u.Count()-before)
		}
	})
}
