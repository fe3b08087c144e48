package breakwater_test

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// TestRequestPolicyKeepsWhatItDoesNotSet: a RequestPolicy overrides the
// fields it sets and keeps the Transport's for the zero ones.
func TestRequestPolicyKeepsWhatItDoesNotSet(t *testing.T) {
	opts := []bw.Option{bw.WithCallTimeout(10 * time.Second), bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(3)}
	send := func(t *testing.T, tr *bw.Transport, p bw.RequestPolicy) (result, time.Duration) {
		req, _ := http.NewRequestWithContext(bw.WithRequestPolicy(t.Context(), p), http.MethodGet, breakwatertest.PipeURL+"/", nil)
		start := time.Now()
		r := do(tr, req)
		return r, time.Since(start)
	}
	t.Run("a call timeout alone keeps the attempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
			tr := newTransport(t, u.Transport(), opts...)
			if r, _ := send(t, tr, bw.RequestPolicy{CallTimeout: 5 * time.Second}); r.status != 503 || u.Count() != 3 {
				t.Fatalf("%+v after %d attempts, want the last 503 after 3", r, u.Count())
			}
		})
	})
	t.Run("attempts alone keep the attempt timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 2 * time.Second})
			tr := newTransport(t, u.Transport(), opts...)
			r, took := send(t, tr, bw.RequestPolicy{MaxAttempts: 1})
			if !errors.Is(r.err, bw.ErrAttemptTimeout) || took != time.Second {
				t.Fatalf("%+v after %s, want ErrAttemptTimeout after 1s", r, took)
			}
		})
	})
	t.Run("an attempt timeout is used", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 2 * time.Second})
			tr := newTransport(t, u.Transport(), opts...)
			r, took := send(t, tr, bw.RequestPolicy{MaxAttempts: 1, AttemptTimeout: 100 * time.Millisecond})
			if !errors.Is(r.err, bw.ErrAttemptTimeout) || took != 100*time.Millisecond {
				t.Fatalf("%+v after %s, want ErrAttemptTimeout after 100ms", r, took)
			}
		})
	})
}
