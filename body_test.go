package breakwater_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A response without a body (HEAD, 204, 304, Content-Length 0, or a base
// transport's nil Body or http.NoBody) gives back what its attempt held as
// soon as RoundTrip returns: nobody closes such a body, so it must not keep
// its concurrency slot, its half-open probe lease or its timeout.
func TestBodilessResponsesHoldNothing(t *testing.T) {
	type bodiless struct {
		method string
		step   breakwatertest.Step
		body   func(req *http.Request) *http.Response // instead of the upstream
	}
	cases := map[string]bodiless{
		"HEAD":             {method: http.MethodHead},
		"204":              {step: breakwatertest.Step{Status: 204}},
		"304":              {step: breakwatertest.Step{Status: 304}},
		"Content-Length 0": {step: breakwatertest.Step{Body: []byte{}}},
		"nil Body": {body: func(req *http.Request) *http.Response {
			return &http.Response{StatusCode: 200, Request: req}
		}},
		"http.NoBody": {body: func(req *http.Request) *http.Response {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}
		}},
	}
	// setup returns a base transport answering with c, and the context of
	// the latest attempt it saw.
	setup := func(t *testing.T, c bodiless) (http.RoundTripper, func() context.Context, *http.Request) {
		u := breakwatertest.NewPipeUpstream(t, c.step)
		var last context.Context
		base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			last = req.Context()
			if c.body != nil {
				return c.body(req), nil
			}
			return u.Transport().RoundTrip(req)
		})
		method := c.method
		if method == "" {
			method = http.MethodGet
		}
		req, _ := http.NewRequest(method, breakwatertest.PipeURL+"/", nil)
		return base, func() context.Context { return last }, req
	}

	for name, c := range cases {
		t.Run(name+"/slot and timeout", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base, attemptCtx, req := setup(t, c)
				tr := newTransport(t, base, bw.WithConcurrencyLimit(1), bw.WithAttemptTimeout(time.Second))
				for i := 1; i <= 3; i++ {
					// The body is never closed; with a limit of 1 and no queue,
					// a slot still held would refuse the next call.
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
					if err := attemptCtx().Err(); err == nil {
						t.Fatalf("call %d (%d): the attempt's timeout still runs after RoundTrip returned", i, resp.StatusCode)
					}
				}
			})
		})
		t.Run(name+"/probe lease", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base, _, req := setup(t, c)
				tr := newTransport(t, base, bw.WithHalfOpen(1, 2))
				tr.Breakers().Get(upstreamKey).Trip(time.Second)
				time.Sleep(time.Second)
				for i := 1; i <= 2; i++ {
					if _, err := tr.RoundTrip(req); err != nil { // the body is never closed
						t.Fatalf("probe %d: %v", i, err)
					}
				}
				if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
					t.Fatalf("after two successful probes the breaker is %s, want closed", s)
				}
			})
		})
	}

	// For contrast: a response with a body holds its slot until the body is
	// closed, which is why bodiless ones must not.
	t.Run("a body holds its slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
			tr := newTransport(t, u.Transport(), bw.WithConcurrencyLimit(1))
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.RoundTrip(req); !errors.Is(err, bw.ErrConcurrencyLimit) {
				t.Fatalf("second call while the first body is open: %v, want ErrConcurrencyLimit", err)
			}
			resp.Body.Close()
			if r := do(tr, req); r.err != nil {
				t.Fatalf("after closing the body: %v", r.err)
			}
		})
	})
}

// A response holds its half-open probe lease until its body ends, even
// without any timeout, and gives it back then. The first probe's answer
// (a 501) counts neither way, so the ramp lets no second probe through
// while its body is open: the call waits for the lease and is refused.
func TestProbeLeaseEndsWithTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 501}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0),
			bw.WithHalfOpen(1, 2))
		tr.Breakers().Get(upstreamKey).Trip(time.Second)
		time.Sleep(time.Second)
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.RoundTrip(req); !errors.Is(err, bw.ErrHalfOpenBusy) {
			t.Fatalf("a second probe while the first body is open: %v, want ErrHalfOpenBusy", err)
		}
		resp.Body.Close()
		for i := range 2 {
			if r := do(tr, req); r.err != nil {
				t.Fatalf("probe %d once the first body is closed: %v", i+2, r.err)
			}
		}
		if s := stateOf(tr.Breakers(), upstreamKey); s != bw.StateClosed {
			t.Fatalf("after two successful probes: %s", s)
		}
	})
}

// A body read past the attempt timeout fails with the attempt timeout.
func TestBodyPastTheAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: 4096, SlowBody: time.Second, ChunkSize: 1024})
		tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(2*time.Second), bw.WithCallTimeout(time.Minute))
		r := get(tr)
		if !errors.Is(r.err, bw.ErrAttemptTimeout) {
			t.Fatalf("%+v, want the body to fail with ErrAttemptTimeout", r)
		}
	})
}

// An attempt's context lives as long as its response body and ends with it:
// the attempt timeout's timer does not outlive a body that was closed.
func TestAttemptContextEndsWithTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		var attemptCtx context.Context
		base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			attemptCtx = req.Context()
			return u.Transport().RoundTrip(req)
		})
		tr := newTransport(t, base, bw.WithAttemptTimeout(time.Minute), bw.WithCallTimeout(0))
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := attemptCtx.Err(); err != nil {
			t.Fatalf("the attempt ended before its body was read: %v", err)
		}
		resp.Body.Close()
		if attemptCtx.Err() == nil {
			t.Fatal("the attempt's context outlives its closed body")
		}
	})
}

// WithBodyBuffering(n) makes a body of up to n bytes replayable, byte for
// byte, and leaves a longer one unreplayable (sent once, not retried).
func TestBodyBufferingLimit(t *testing.T) {
	const limit = 4
	for _, body := range []string{"abc", "abcd", "abcde"} {
		t.Run(body, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
				tr := newTransport(t, u.Transport(), bw.WithBodyBuffering(limit))
				// onlyReader hides the reader's type: no GetBody, so only
				// buffering can make the body replayable.
				req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/", onlyReader{strings.NewReader(body)})
				r := do(tr, req)
				want, attempts := 200, 2
				if len(body) > limit {
					want, attempts = 503, 1
				}
				if r.err != nil || r.status != want || u.Count() != attempts {
					t.Fatalf("%d bytes: %+v after %d requests, want %d after %d", len(body), r, u.Count(), want, attempts)
				}
				for _, got := range u.Requests() {
					if string(got.Body) != body {
						t.Fatalf("the upstream got %q, want %q", got.Body, body)
					}
				}
			})
		})
	}
}

// Without WithBodyBuffering nothing is buffered: a body without GetBody,
// even an empty one, is sent once and not retried.
func TestNoBodyBufferingByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport())
		req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/", onlyReader{strings.NewReader("")})
		if r := do(tr, req); r.err != nil || r.status != 503 || u.Count() != 1 {
			t.Fatalf("%+v after %d requests, want the 503 after 1", r, u.Count())
		}
	})
}

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
