package breakwater_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// countingCloser counts Close calls on the bodies it wraps.
type countingCloser struct {
	io.ReadCloser
	mu     *sync.Mutex
	closed *int
}

func (c countingCloser) Close() error {
	c.mu.Lock()
	*c.closed++
	c.mu.Unlock()
	return c.ReadCloser.Close()
}

// A retried response whose body stalls is given up on after the drain time
// and closed, with or without an attempt timeout, and the retry goes on.
func TestDiscardedSlowBodyIsClosed(t *testing.T) {
	for _, attemptTimeout := range []time.Duration{0, time.Minute} {
		t.Run(attemptTimeout.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t,
					breakwatertest.Step{Status: 503, BodySize: 100 << 10, SlowBody: time.Hour, ChunkSize: 1},
					breakwatertest.Step{})
				var mu sync.Mutex
				var closed, responses int
				base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
					resp, err := u.Transport().RoundTrip(req)
					if err == nil {
						mu.Lock()
						responses++
						mu.Unlock()
						resp.Body = countingCloser{resp.Body, &mu, &closed}
					}
					return resp, err
				})
				tr := newTransport(t, base, bw.WithAttemptTimeout(attemptTimeout), bw.WithCallTimeout(0),
					bw.WithBackoff(bw.Constant(time.Second)))
				start := time.Now()
				if r := get(tr); r.err != nil || r.status != 200 {
					t.Fatalf("%+v", r)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Fatalf("took %s: the stalled body held the retry", took)
				}
				mu.Lock()
				defer mu.Unlock()
				if responses != 2 || closed != 2 {
					t.Fatalf("%d responses, %d closed; want both closed", responses, closed)
				}
			})
		})
	}
}
