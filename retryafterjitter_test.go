package breakwater_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A retry after a server's hint waits the hint plus up to 10 % of it, with
// jitter, so that the clients the server paused do not return together.
func TestRetryAfterHintIsJittered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			if n%2 == 1 {
				return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"10"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithBackoff(bw.Constant(0)), bw.WithCallTimeout(time.Minute),
			bw.WithoutPauseGate(), bw.WithoutRetryBudget())
		const hint = 10 * time.Second
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 20 {
			before := u.Count()
			if r := get(tr); r.status != 200 {
				t.Fatalf("%+v", r)
			}
			reqs := u.Requests()[before:]
			gap := reqs[1].At.Sub(reqs[0].At)
			if gap < hint || gap > hint+hint/10 {
				t.Fatalf("retried %s after a Retry-After of 10s, want 10s to 11s", gap)
			}
			lo, hi = min(lo, gap), max(hi, gap)
		}
		if hi-lo < hint/100 { // 20 draws within 0.1 s of each other: a chance of about 20·0.1^19
			t.Fatalf("20 retries waited %s to %s: no jitter", lo, hi)
		}
	})
}
