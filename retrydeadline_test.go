package breakwater_test

// Deadlines are absolute: waits, drains and sleeps all run on the call's
// deadline.

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A discarded response whose body stalls costs the retry at most 50 ms:
// the connection is closed rather than waited on.
func TestStalledDiscardedBodyIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t,
			breakwatertest.Step{Status: 503, BodySize: 10 << 10, SlowBody: 10 * time.Second},
			breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithBackoff(bw.Constant(100*time.Millisecond)))
		start := time.Now()
		r := get(tr)
		took := time.Since(start)
		t.Logf("stalled discarded body: the retry's call took %s (backoff 100ms)", took)
		if r.status != 200 || took > 150*time.Millisecond {
			t.Fatalf("%+v after %s, want 200 within the 100 ms backoff + 50 ms", r, took)
		}
	})
}

// Deadlines are absolute: no call outlives its call timeout, whatever the
// upstream sends, and an attempt that never started is not counted.
func TestCallTimeoutIsAbsolute(t *testing.T) {
	t.Run("stalled bodies", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503, BodySize: 10 << 10, SlowBody: 10 * time.Second})
			tr := newTransport(t, u.Transport(), bw.WithCallTimeout(2*time.Second), bw.WithAttemptTimeout(1900*time.Millisecond),
				bw.WithBackoff(bw.Constant(time.Second)))
			start := time.Now()
			resp, err := tr.RoundTrip(mustGet(t))
			took := time.Since(start)
			if resp != nil {
				resp.Body.Close()
			}
			var re *bw.RetryError
			t.Logf("call 2 s, attempts 1.9 s, backoff 1 s, stalled bodies: ended after %s with %v; upstream saw %d requests", took, err, u.Count())
			if took > 2050*time.Millisecond {
				t.Errorf("the call ended after %s, past its 2 s timeout", took)
			}
			if errors.As(err, &re) && re.Attempts != u.Count() {
				t.Errorf("the error counts %d attempts, the upstream saw %d requests", re.Attempts, u.Count())
			}
		})
	})
	t.Run("long Retry-After and a stalled body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t,
				breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"25"}}, BodySize: 10 << 10, SlowBody: 10 * time.Second},
				breakwatertest.Step{})
			tr := newTransport(t, u.Transport())
			start := time.Now()
			resp, err := tr.RoundTrip(mustGet(t))
			took := time.Since(start)
			if resp != nil {
				resp.Body.Close()
			}
			t.Logf("Retry-After 25 s, stalled body, 30 s call timeout: ended after %s (%v)", took, err)
			if took > bw.DefaultCallTimeout+50*time.Millisecond {
				t.Errorf("the call ended after %s, past its %s timeout", took, bw.DefaultCallTimeout)
			}
		})
	})
}

func mustGet(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
