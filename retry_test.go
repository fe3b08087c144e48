package breakwater_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Run("delta seconds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t,
				breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"2"}}}, breakwatertest.Step{})
			tr := newTransport(t, u.Transport())
			if r := get(tr); r.status != 200 {
				t.Fatalf("%+v", r)
			}
			reqs := u.Requests()
			if gap := reqs[1].At.Sub(reqs[0].At); gap < 2*time.Second {
				t.Fatalf("retried after %s, the server asked for 2s", gap)
			}
		})
	})
	t.Run("date with a skewed server clock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
				if n > 1 {
					return breakwatertest.Step{}
				}
				server := time.Now().Add(-time.Hour) // the server's clock is an hour behind
				return breakwatertest.Step{Status: 503, Header: http.Header{
					"Date":        {server.UTC().Format(http.TimeFormat)},
					"Retry-After": {server.Add(3 * time.Second).UTC().Format(http.TimeFormat)},
				}}
			})
			tr := newTransport(t, u.Transport())
			if r := get(tr); r.status != 200 {
				t.Fatalf("%+v", r)
			}
			reqs := u.Requests()
			if gap := reqs[1].At.Sub(reqs[0].At); gap < 3*time.Second {
				t.Fatalf("retried after %s, the server asked for 3s", gap)
			}
		})
	})
	t.Run("too long is returned at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"3600"}}})
			tr := newTransport(t, u.Transport())
			start := time.Now()
			r := get(tr)
			if r.status != 503 || u.Count() != 1 || time.Since(start) != 0 {
				t.Fatalf("got %d after %d attempts and %s; want the 503 at once", r.status, u.Count(), time.Since(start))
			}
		})
	})
	t.Run("does not fit the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"20"}}})
			tr := newTransport(t, u.Transport(), bw.WithCallTimeout(10*time.Second))
			if r := get(tr); r.status != 429 || u.Count() != 1 {
				t.Fatalf("got %d after %d attempts; want the 429 after one", r.status, u.Count())
			}
		})
	})
}

// onlyReader hides a reader's other methods, so http.NewRequest cannot set
// GetBody.
type onlyReader struct{ io.Reader }

func TestIdempotency(t *testing.T) {
	post := func(body io.Reader, header ...string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/charges", body)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	t.Run("POST not retried after a 503", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
			if r := do(newTransport(t, u.Transport()), post(strings.NewReader("x"))); r.status != 503 || u.Count() != 1 {
				t.Fatalf("got %d after %d requests", r.status, u.Count())
			}
		})
	})
	t.Run("POST not retried after a connection reset", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{ResetBeforeHeaders: true}, breakwatertest.Step{})
			r := do(newTransport(t, u.Transport()), post(strings.NewReader("x")))
			if r.err == nil || u.Count() != 1 {
				t.Fatalf("got %v after %d requests, want the error after one", r.err, u.Count())
			}
		})
	})
	t.Run("POST retried when never sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
			base := u.Transport().Clone()
			var dials atomic.Int32
			pipeDial := base.DialContext
			base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if dials.Add(1) == 1 {
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused", Addr: addr}}
				}
				return pipeDial(ctx, network, addr)
			}
			r := do(newTransport(t, base), post(strings.NewReader("x")))
			if r.status != 200 || u.Count() != 1 || dials.Load() != 2 {
				t.Fatalf("got %+v after %d dials", r, dials.Load())
			}
		})
	})
	t.Run("POST with Idempotency-Key replays the same body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{Status: 500}, breakwatertest.Step{})
			body := bytes.Repeat([]byte("charge;"), 1000)
			r := do(newTransport(t, u.Transport()), post(bytes.NewReader(body), "Idempotency-Key", "k-42"))
			if r.status != 200 || u.Count() != 3 {
				t.Fatalf("got %d after %d requests", r.status, u.Count())
			}
			for _, got := range u.Requests() {
				if got.Header.Get("Idempotency-Key") != "k-42" || !bytes.Equal(got.Body, body) {
					t.Fatalf("attempt %d: key %q, %d body bytes", got.N, got.Header.Get("Idempotency-Key"), len(got.Body))
				}
			}
		})
	})
	t.Run("a body without GetBody is sent once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
			req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/doc", onlyReader{strings.NewReader("v1")})
			if r := do(newTransport(t, u.Transport()), req); r.status != 503 || u.Count() != 1 {
				t.Fatalf("got %d after %d requests", r.status, u.Count())
			}
		})
	})
	t.Run("bounded buffering makes it replayable", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
			req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/doc", onlyReader{strings.NewReader("v1")})
			r := do(newTransport(t, u.Transport(), bw.WithBodyBuffering(1024)), req)
			if r.status != 200 || u.Count() != 2 || string(u.Requests()[1].Body) != "v1" {
				t.Fatalf("got %d after %d requests", r.status, u.Count())
			}
		})
	})
}

// closeCounter counts Close calls on a request body.
type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

func TestRequestBodyClosedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithPolicy(bw.Consecutive(1)))
		tr.Breakers().Get(upstreamKey).Trip(time.Minute)
		body := &closeCounter{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/", body)
		if r := do(tr, req); !errors.Is(r.err, bw.ErrCircuitOpen) {
			t.Fatalf("%v", r.err)
		}
		if n := body.closes.Load(); n != 1 {
			t.Fatalf("a rejected request's body was closed %d times", n)
		}
	})
}

// A caller that cancels during the backoff ends the call at once. The
// cancellation itself is neutral, but the call still showed the failure it
// was backing off from, and is charged for that once.
func TestCallerCancelDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
		tr := newTransport(t, u.Transport(), bw.WithBackoff(bw.Constant(10*time.Second)),
			bw.WithPolicy(bw.Consecutive(2)))
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
		start := time.Now()
		r := do(tr, req)
		if !errors.Is(r.err, context.Canceled) || time.Since(start) != time.Second {
			t.Fatalf("got %v after %s, want context.Canceled after 1s", r.err, time.Since(start))
		}
		if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.State != bw.StateClosed || s.Failures != 1 || u.Count() != 1 {
			t.Fatalf("after one 503 and a cancellation: %+v and %d requests, want one failure charged and no retry", s, u.Count())
		}
	})
}

// Each call is charged to the breaker at most once, as what its own
// attempts showed.
func TestChargedOnceAsTheAttemptsShowed(t *testing.T) {
	tooLong := breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"3600"}}}
	for _, tc := range []struct {
		name     string
		steps    []breakwatertest.Step
		failures int
	}{
		{"three failures", []breakwatertest.Step{{Status: 500}, {Status: 502}, {Status: 503}}, 1},
		{"a failure, then a success", []breakwatertest.Step{{Status: 500}, {}}, 0},
		{"a failure, then a 429 returned as it is", []breakwatertest.Step{{Status: 500}, tooLong}, 1},
		{"a 429 alone", []breakwatertest.Step{tooLong}, 0},
		{"a failure, then a 404", []breakwatertest.Step{{Status: 500}, {Status: 404}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, tc.steps...)
				tr := newTransport(t, u.Transport(), bw.WithPolicy(bw.Consecutive(100)))
				get(tr)
				if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.Failures != tc.failures {
					t.Fatalf("%d failures charged after %d requests, want %d", s.Failures, u.Count(), tc.failures)
				}
			})
		})
	}
}

func TestRetryBudgetBoundsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		tr := newTransport(t, u.Transport(), bw.WithoutBreaker())
		start := time.Now()
		for range 200 {
			if r := get(tr); r.status != 500 {
				t.Fatalf("%+v", r)
			}
		}
		elapsed := time.Since(start)
		// 20 % of the calls, plus the floor of 3 per second over every
		// window the run touched.
		floor := 3 * (elapsed + 10*time.Second).Seconds() // the default floor and window
		limit := 200*1.2 + floor
		t.Logf("%d upstream requests for 200 calls in %s (limit %.0f)", u.Count(), elapsed, limit)
		if float64(u.Count()) > limit {
			t.Fatalf("%d upstream requests for 200 calls, budget allows %.0f", u.Count(), limit)
		}
	})
}

// countingTransport counts the requests it forwards.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// net/http replays an idempotent request on a new connection when a reused
// one breaks before any response byte. That retry happens inside the base
// transport: the server sees one more request than breakwater made
// attempts, and breakwater's counts cannot include it.
func TestNetHTTPHiddenReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{}, breakwatertest.Step{ResetBeforeHeaders: true}, breakwatertest.Step{})
		base := &countingTransport{next: u.Transport()}
		tr := newTransport(t, base)
		for i := range 2 {
			if r := get(tr); r.status != 200 {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		if base.n.Load() != 2 || u.Count() != 3 {
			t.Fatalf("breakwater made %d attempts, the upstream saw %d requests; want 2 and 3", base.n.Load(), u.Count())
		}
	})
}

// A call whose retry a local limit refuses still charges the breaker for
// the failure it got: a saturated limit must not hide a failing upstream.
func TestLocalRefusalOfARetryChargesTheFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		rs, err := bw.NewRateLimiters(rate.Every(time.Hour), 1, bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		tr := newTransport(t, u.Transport(), bw.WithoutRetryBudget(), bw.WithRateLimiters(rs), bw.WithPolicy(bw.Consecutive(2)))
		for i := 1; i <= 2; i++ {
			rs.Reset(upstreamKey) // one token: the first attempt gets it, the retry does not
			r := get(tr)
			if !errors.Is(r.err, bw.ErrRateLimited) || u.Count() != i {
				t.Fatalf("call %d: %+v after %d requests", i, r, u.Count())
			}
		}
		if s := tr.Breakers().Get(upstreamKey).State(); s != bw.StateOpen {
			t.Fatalf("two failing calls whose retries were refused left the breaker %s, want open", s)
		}
	})
}

// While the calls a pause held leave one by one, the retry of a call that
// was itself throttled takes its place at the end of their line; the retry
// of a call that failed otherwise goes at once.
func TestRetryOfAThrottledCallJoinsTheHeldLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var paused, throttled, failed atomic.Bool
		u := breakwatertest.NewPipeUpstreamFunc(t, func(_ int, r *http.Request) breakwatertest.Step {
			switch {
			case r.URL.Path == "/pause" && paused.CompareAndSwap(false, true):
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
			case r.URL.Path == "/throttled" && throttled.CompareAndSwap(false, true):
				return breakwatertest.Step{Status: 429}
			case r.URL.Path == "/failed" && failed.CompareAndSwap(false, true):
				return breakwatertest.Step{Status: 503}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport())
		call := func(path string) {
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+path, nil)
			if r := do(tr, req); r.err != nil || r.status != 200 {
				t.Errorf("%s: %d %v", path, r.status, r.err)
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { call("/pause") })
		time.Sleep(10 * time.Millisecond)
		for range 8 { // held by the pause, one every 100 ms
			wg.Go(func() { call("/held") })
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // the release has begun
		wg.Go(func() { call("/throttled") })
		wg.Go(func() { call("/failed") })
		wg.Wait()

		var lastHeld, throttledRetry, failedRetry time.Time
		for _, r := range u.Requests() {
			switch r.Path {
			case "/held":
				if r.At.After(lastHeld) {
					lastHeld = r.At
				}
			case "/throttled":
				throttledRetry = r.At
			case "/failed":
				failedRetry = r.At
			}
		}
		if !throttledRetry.After(lastHeld) {
			t.Errorf("a throttled call's retry went %s before the last held call", lastHeld.Sub(throttledRetry))
		}
		if !failedRetry.Before(lastHeld) {
			t.Errorf("a failed call's retry waited %s after the last held call", failedRetry.Sub(lastHeld))
		}
	})
}

// An Error matches ErrRetryBudget exactly when the budget ended the call,
// matches what it wraps, and nothing else; one made by hand matches the
// sentinel of its mechanism.
func TestGivingUpErrorMatches(t *testing.T) {
	budget := &bw.Error{Key: "k", Mechanism: bw.MechRetryBudget, Attempts: 2, Err: io.ErrUnexpectedEOF}
	plain := &bw.Error{Key: "k", Attempts: 3, Err: io.ErrUnexpectedEOF}
	open := &bw.Error{Key: "k", Mechanism: bw.MechBreaker}
	for _, c := range []struct {
		err    error
		target error
		want   bool
	}{
		{budget, bw.ErrRetryBudget, true},
		{budget, io.ErrUnexpectedEOF, true},
		{budget, bw.ErrCircuitOpen, false},
		{budget, bw.ErrCallTimeout, false},
		{plain, bw.ErrRetryBudget, false},
		{plain, io.ErrUnexpectedEOF, true},
		{plain, bw.ErrCircuitOpen, false},
		{open, bw.ErrCircuitOpen, true},
		{open, bw.ErrHalfOpenBusy, false},
		{open, nil, false},
	} {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, c.target, got, c.want)
		}
	}
}

// A retry after a server's hint waits the hint plus up to 10 % of it, with
// jitter, so that the clients the server paused do not return together.
func TestRetryAfterHintIsJittered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			if n%2 == 1 {
				return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"10"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithBackoff(bw.Constant(0)), bw.WithCallTimeout(time.Minute),
			bw.WithoutPauseGate(), bw.WithoutRetryBudget())
		const hint = 10 * time.Second
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 20 {
			before := u.Count()
			if r := get(tr); r.status != 200 {
				t.Fatalf("%+v", r)
			}
			reqs := u.Requests()[before:]
			gap := reqs[1].At.Sub(reqs[0].At)
			if gap < hint || gap > hint+hint/10 {
				t.Fatalf("retried %s after a Retry-After of 10s, want 10s to 11s", gap)
			}
			lo, hi = min(lo, gap), max(hi, gap)
		}
		if hi-lo < hint/100 { // 20 draws within 0.1 s of each other: a chance of about 20·0.1^19
			t.Fatalf("20 retries waited %s to %s: no jitter", lo, hi)
		}
	})
}
