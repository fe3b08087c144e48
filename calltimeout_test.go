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

// Without an attempt timeout, the call timeout still bounds the attempt:
// a hanging upstream costs the call timeout, no more.
func TestCallTimeoutBoundsAnAttemptWithoutItsOwnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithCallTimeout(2*time.Second), bw.WithAttemptTimeout(0))
		start := time.Now()
		r := get(tr)
		if !errors.Is(r.err, bw.ErrCallTimeout) || time.Since(start) != 2*time.Second {
			t.Fatalf("%+v after %s, want ErrCallTimeout after 2s", r, time.Since(start))
		}
	})
}

// Without a call timeout, an attempt keeps its default timeout of 10 s: a
// hanging upstream costs each attempt 10 s, not forever.
func TestAttemptTimeoutStaysWithoutACallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithCallTimeout(0), bw.WithMaxAttempts(1))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
		start := time.Now()
		r := do(tr, req)
		if !errors.Is(r.err, bw.ErrAttemptTimeout) || time.Since(start) != 10*time.Second {
			t.Fatalf("%+v after %s, want ErrAttemptTimeout after 10s", r, time.Since(start))
		}
	})
}

// A timeout stage of 0 or less passes requests through untouched.
func TestTimeoutStageOfZeroPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: time.Hour})
		for _, d := range []time.Duration{0, -time.Second} {
			rt := bw.Chain(u.Transport(), bw.CallTimeout(d), bw.AttemptTimeout(d))
			if r := get(rt); r.err != nil || r.status != 200 {
				t.Fatalf("timeout stages of %s: %+v, want the upstream's 200 after its hour", d, r)
			}
		}
	})
}
