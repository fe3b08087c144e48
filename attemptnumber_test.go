package breakwater_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// numbering is a base transport that records the attempt number each
// request's context carries and answers 503 until the last attempt.
type numbering struct {
	mu   sync.Mutex
	seen []int
	ok   int // the attempt that succeeds
}

func (n *numbering) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	a := bw.AttemptFromContext(req.Context())
	n.mu.Lock()
	n.seen = append(n.seen, a)
	n.mu.Unlock()
	status := http.StatusServiceUnavailable
	if a == n.ok {
		status = http.StatusOK
	}
	return &http.Response{StatusCode: status, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// TestAttemptFromContextNumbersAttempts checks what a base transport reads
// with AttemptFromContext: 1, 2, 3 across a call's attempts, with and
// without timeouts and for a replayed body, and 1 for any other context.
func TestAttemptFromContextNumbersAttempts(t *testing.T) {
	if n := bw.AttemptFromContext(context.Background()); n != 1 {
		t.Fatalf("a context no Transport made: %d, want 1", n)
	}
	cases := []struct {
		name string
		opts []bw.Option
		req  func() *http.Request
	}{
		{"GET", nil, func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
			return req
		}},
		{"no timeouts", []bw.Option{bw.WithCallTimeout(0), bw.WithAttemptTimeout(0)}, func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
			return req
		}},
		{"replayed body", nil, func() *http.Request {
			req, _ := http.NewRequest(http.MethodPut, "http://upstream.test/", bytes.NewReader([]byte("payload")))
			return req
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &numbering{ok: 3}
				tr := newTransport(t, base, append(tc.opts, bw.WithBackoff(bw.Constant(time.Millisecond)), bw.WithoutRetryBudget())...)
				if r := do(tr, tc.req()); r.err != nil || r.status != 200 {
					t.Fatalf("call: %d %v", r.status, r.err)
				}
				if !slices.Equal(base.seen, []int{1, 2, 3}) {
					t.Fatalf("attempt numbers %v, want [1 2 3]", base.seen)
				}
			})
		})
	}
}
