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

func TestTimeoutStages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		rt := bw.Chain(u.Transport(), bw.CallTimeout(3*time.Second))
		start := time.Now()
		r := get(rt)
		var te *bw.Error
		if !errors.Is(r.err, bw.ErrCallTimeout) || !errors.As(r.err, &te) || !te.Timeout() || time.Since(start) != 3*time.Second {
			t.Fatalf("%v after %s, want ErrCallTimeout after 3s", r.err, time.Since(start))
		}
	})
}

// TestTimeoutStagesKeepTheInnerName: when an inner timeout stage ended the
// request and the outer one's deadline has passed too by the time the
// error comes up (a base that answers its cancellation late), the error
// keeps the name of the timeout that ended the request.
func TestTimeoutStagesKeepTheInnerName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			time.Sleep(time.Second) // past the outer deadline
			return nil, req.Context().Err()
		})
		rt := bw.Chain(late, bw.CallTimeout(time.Second), bw.AttemptTimeout(500*time.Millisecond))
		r := get(rt)
		if !errors.Is(r.err, bw.ErrAttemptTimeout) || errors.Is(r.err, bw.ErrCallTimeout) {
			t.Fatalf("%v: want the attempt timeout's error alone", r.err)
		}
	})
}

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
