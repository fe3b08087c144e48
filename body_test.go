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
