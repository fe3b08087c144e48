package breakwater_test

// Deadlines are absolute: waits, drains and sleeps all run on the call's
// deadline.

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
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
			var re *bw.Error
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
			if took > 30*time.Second+50*time.Millisecond { // the default call timeout
				t.Errorf("the call ended after %s, past its 30s timeout", took)
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

// An attempt whose call deadline passed while it waited for admission is
// not made, and not counted: here a bulkhead slot frees at the very
// instant the waiting call's timeout ends (which of the two the bulkhead
// sees first varies, so the test tries a few times).
func TestAttemptAdmittedAtTheDeadlineIsNotCounted(t *testing.T) {
	for range 20 {
		testAttemptAdmittedAtTheDeadline(t)
	}
}

func testAttemptAdmittedAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: time.Second})
		var made atomic.Int32
		obs := bw.ObserverFunc(func(_ context.Context, e bw.Event) {
			if e.Kind == bw.EventCallEnd && e.Err != nil {
				made.Store(int32(e.Attempts))
			}
		})
		tr := newTransport(t, u.Transport(), bw.WithObserver(obs),
			bw.WithConcurrencyLimit(1, bw.WithMaxQueue(1), bw.WithMaxWait(time.Hour)))
		done := make(chan result)
		go func() { done <- get(tr) }() // holds the slot for 1 s
		synctest.Wait()
		ctx := bw.WithRequestPolicy(context.Background(), bw.RequestPolicy{CallTimeout: time.Second})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
		r := do(tr, req)
		if first := <-done; first.status != 200 {
			t.Fatalf("first call: %+v", first)
		}
		if !errors.Is(r.err, bw.ErrCallTimeout) && !errors.Is(r.err, bw.ErrConcurrencyLimit) {
			t.Fatalf("second call: %+v, want the call timeout or the bulkhead's refusal", r)
		}
		if u.Count() != 1 || made.Load() != 0 {
			t.Fatalf("the upstream saw %d requests; the call reported %d attempts, want 1 and 0", u.Count(), made.Load())
		}
	})
}
