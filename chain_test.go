package breakwater_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/hashicorp/go-retryablehttp"
)

// A Chain in the default order keeps the measured contract: the breaker is
// charged once per call that gives up, so tolerate 10 opens on call 11.
func TestChainMeltsOncePerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		bs := newBreakers(t, bw.WithPolicy(bw.Window(10, time.Minute)))
		retry, err := bw.RetryStage(bw.WithMaxAttempts(5), bw.WithoutRetryBudget())
		if err != nil {
			t.Fatal(err)
		}
		rt := bw.Chain(u.Transport(), bw.CallTimeout(30*time.Second), retry, bw.BreakerStage(bs, nil, nil), bw.AttemptTimeout(time.Second))
		for i := 1; i <= 11; i++ {
			if r := get(rt); r.status != 500 {
				t.Fatalf("call %d: %+v", i, r)
			}
			if open := bs.Get(upstreamKey).State() == bw.StateOpen; open != (i == 11) {
				t.Fatalf("after call %d open = %v", i, open)
			}
		}
		if u.Count() != 55 {
			t.Fatalf("%d requests, want 55", u.Count())
		}
		if r := get(rt); !errors.Is(r.err, bw.ErrCircuitOpen) || u.Count() != 55 {
			t.Fatalf("call 12: %v", r.err)
		}
	})
}

// Outside the retry stage, a breaker sees whole calls: it is charged once
// per call whatever happened inside.
func TestChainBreakerOutsideRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500}, breakwatertest.Step{Status: 500}, breakwatertest.Step{})
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)))
		retry, _ := bw.RetryStage(bw.WithoutRetryBudget())
		rt := bw.Chain(u.Transport(), bw.BreakerStage(bs, nil, nil), retry)
		if r := get(rt); r.status != 200 || bs.Get(upstreamKey).State() != bw.StateClosed {
			t.Fatalf("%+v, breaker %s", r, bs.Get(upstreamKey).State())
		}
	})
}

// go-retryablehttp's policies plug in unchanged, and breakwater's safety
// rules still hold around them: a POST without a key is not retried even
// though DefaultRetryPolicy would.
func TestRetryablehttpPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t,
			breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"2"}}},
			breakwatertest.Step{Status: 500}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(),
			bw.WithRetryIf(retryablehttp.DefaultRetryPolicy),
			bw.WithBackoff(bw.BackoffFunc(func(n int, _ time.Duration) time.Duration {
				return retryablehttp.DefaultBackoff(100*time.Millisecond, time.Second, n-1, nil)
			})))
		if r := get(tr); r.status != 200 || u.Count() != 3 {
			t.Fatalf("%+v after %d requests", r, u.Count())
		}
		reqs := u.Requests()
		if gap := reqs[1].At.Sub(reqs[0].At); gap < 2*time.Second {
			t.Fatalf("retried %s after a Retry-After of 2s", gap)
		}
		req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/", strings.NewReader("x"))
		if r := do(tr, req); r.status != 200 || u.Count() != 4 {
			t.Fatalf("POST: %+v after %d requests", r, u.Count())
		}
	})
	t.Run("RetryIf retries what the categories would not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 404}, breakwatertest.Step{})
			tr := newTransport(t, u.Transport(), bw.WithBackoff(bw.Constant(0)),
				bw.WithRetryIf(func(_ context.Context, resp *http.Response, _ error) (bool, error) {
					return resp != nil && resp.StatusCode == 404, nil // not there yet: eventually consistent
				}))
			if r := get(tr); r.status != 200 || u.Count() != 2 {
				t.Fatalf("%+v after %d requests, want the 200 after 2", r, u.Count())
			}
		})
	})
	t.Run("an error from RetryIf ends the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
			stop := errors.New("stop here")
			tr := newTransport(t, u.Transport(), bw.WithRetryIf(func(context.Context, *http.Response, error) (bool, error) {
				return false, stop
			}))
			if r := get(tr); !errors.Is(r.err, stop) || u.Count() != 1 {
				t.Fatalf("%+v after %d requests", r, u.Count())
			}
		})
	})
	t.Run("a panicking RetryIf means no retry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
			tr := newTransport(t, u.Transport(), bw.WithRetryIf(func(context.Context, *http.Response, error) (bool, error) {
				panic("broken policy")
			}))
			if r := get(tr); r.status != 500 || u.Count() != 1 {
				t.Fatalf("%+v after %d requests", r, u.Count())
			}
		})
	})
}

func TestRequestPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		tr := newTransport(t, u.Transport())
		ctx := bw.WithRequestPolicy(t.Context(), bw.RequestPolicy{MaxAttempts: 1})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
		if r := do(tr, req); r.status != 503 || u.Count() != 1 {
			t.Fatalf("no-retry policy: %+v after %d requests", r, u.Count())
		}
		ctx = bw.WithRequestPolicy(t.Context(), bw.RequestPolicy{Idempotent: true, MaxAttempts: 2})
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, breakwatertest.PipeURL+"/", strings.NewReader("x"))
		if r := do(tr, req); r.status != 503 || u.Count() != 3 {
			t.Fatalf("idempotent POST: %+v after %d requests", r, u.Count())
		}
	})
}

// A breaker stage's half-open probe gives its place back when its response
// body ends: the next probe runs, and the second success closes the
// breaker.
func TestBreakerStageReleasesAProbeWithItsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Body: []byte("one")}, breakwatertest.Step{Body: []byte("two")})
		bs := newBreakers(t, bw.WithOpenJitter(0), bw.WithHalfOpen(1, 2))
		rt := bw.Chain(u.Transport(), bw.BreakerStage(bs, nil, nil))
		bs.Get(upstreamKey).Trip(time.Second)
		time.Sleep(time.Second)
		for i := 1; i <= 2; i++ {
			if r := get(rt); r.err != nil || r.status != 200 {
				t.Fatalf("probe %d: %+v", i, r)
			}
		}
		if s := bs.Get(upstreamKey).State(); s != bw.StateClosed {
			t.Errorf("after two good probes the breaker is %s", s)
		}
	})
}

// A breaker stage that holds nothing past its call (a closed breaker's
// permit) hands the base's response body over as it is.
func TestBreakerStageLeavesAnUnheldBodyAlone(t *testing.T) {
	body := io.NopCloser(strings.NewReader("ok"))
	base := bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: body, Request: req}, nil
	})
	rt := bw.Chain(base, bw.BreakerStage(newBreakers(t), nil, nil))
	req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Body != body {
		t.Errorf("the body of a call that holds nothing is wrapped (%T)", resp.Body)
	}
}
