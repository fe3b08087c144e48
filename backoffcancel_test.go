package breakwater_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A call whose context is canceled while it waits to retry returns the
// cancellation as it is, with its cause if it gave one, and not as a
// timeout.
func TestContextEndingDuringBackoff(t *testing.T) {
	errGoingAway := errors.New("shutting down")
	for _, c := range []struct {
		name string
		end  func(ctx context.Context) (context.Context, func())
		want error
	}{
		{name: "canceled", end: func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, want: context.Canceled},
		{name: "canceled with a cause", end: func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			time.AfterFunc(time.Second, func() { cancel(errGoingAway) })
			return ctx, func() { cancel(nil) }
		}, want: errGoingAway},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
				opts := []bw.Option{bw.WithBackoff(bw.Constant(time.Hour)), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0)}
				rt := newTransport(t, u.Transport(), opts...)
				ctx, stop := c.end(context.Background())
				defer stop()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
				start := time.Now()
				r := do(rt, req)
				if !errors.Is(r.err, c.want) || time.Since(start) != time.Second {
					t.Fatalf("%v after %s, want %v after 1s", r.err, time.Since(start), c.want)
				}
				if ne := net.Error(nil); errors.As(r.err, &ne) && ne.Timeout() {
					t.Fatalf("%v: reported as a timeout", r.err)
				}
			})
		})
	}
}
