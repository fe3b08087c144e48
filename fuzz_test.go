package breakwater_test

import (
	"bufio"
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Fuzz targets over what an upstream, a configuration or a callback can do.
// Each runs its seed corpus (testdata/fuzz/<name>) as a test on every go
// test; .ci/run fuzzes each briefly and scripts/fuzz.sh for minutes.

// FuzzUpstreamResponse: whatever bytes an upstream sends back (1xx floods,
// unsolicited 101s, garbage, truncated messages, hostile Retry-After and
// RateLimit fields), a call ends with a response or an error, never a panic,
// within its call timeout, and holds nothing afterwards.
func FuzzUpstreamResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), uint8(3))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"), uint8(1))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\n\r\n"), uint8(1))
	f.Add([]byte(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 50)+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), uint8(2))
	f.Add([]byte("HTTP/1.1 429 Too Many\r\nRetry-After: 99999999999999999999\r\nContent-Length: 0\r\n\r\n"), uint8(3))
	f.Add([]byte("HTTP/1.1 503 Busy\r\nRetry-After: Fri, 31 Dec 9999 23:59:59 GMT\r\nContent-Length: 0\r\n\r\n"), uint8(3))
	f.Add([]byte("HTTP/1.1 429 Too Many\r\nRateLimit: \"default\";r=0;t=99999999999\r\nContent-Length: 0\r\n\r\n"), uint8(3))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ntruncated"), uint8(2))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"), uint8(2))
	f.Add([]byte("garbage\r\n\r\n"), uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, attempts uint8) {
		synctest.Test(t, func(t *testing.T) {
			base := rawTransport(func(c net.Conn, br *bufio.Reader) {
				if _, ok := readRequest(br); !ok {
					return
				}
				if _, err := c.Write(raw); err == nil {
					c.SetReadDeadline(time.Now().Add(time.Second)) // then stall, then hang up
					io.Copy(io.Discard, c)
				}
			})
			defer base.CloseIdleConnections()
			const callTimeout = 3 * time.Second
			tr, err := bw.NewTransport(bw.WithBase(base), bw.WithMaxAttempts(1+int(attempts%4)),
				bw.WithCallTimeout(callTimeout), bw.WithAttemptTimeout(time.Second),
				bw.WithConcurrencyLimit(1), bw.WithRateLimitHeaders(true))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
			start := time.Now()
			resp, err := tr.RoundTrip(req)
			if err == nil {
				if resp.StatusCode == http.StatusSwitchingProtocols {
					t.Fatalf("an unsolicited 101 came back as a response")
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if d := time.Since(start); d > callTimeout+deadlineSlack {
				t.Fatalf("the call took %s", d)
			}
			if n := slotsHeld(tr, "http://upstream.test"); n != 0 {
				t.Fatalf("%d slots held after the call", n)
			}
		})
	})
}

// FuzzTransportOptions: any numbers given to the options either build a
// Transport that can run a call, or are refused with an error; never a
// panic, a hang or an out-of-memory crash.
func FuzzTransportOptions(f *testing.F) {
	// attempts, call, attempt, backoff (ns), ratio, floor, budget window (ns),
	// tolerate, within (ns), open base, open max (ns), jitter, pause wait (ns),
	// max Retry-After (ns), keys.
	f.Add(3, int64(30e9), int64(10e9), int64(100e6), 0.2, 3.0, int64(10e9), 10, int64(0), int64(5e9), int64(60e9), 0.1, int64(-1), int64(0), 10_000)
	f.Add(math.MaxInt, int64(30e9), int64(10e9), int64(100e6), 0.2, 3.0, int64(10e9), 10, int64(0), int64(5e9), int64(60e9), 0.1, int64(-1), int64(0), 10_000)
	f.Add(3, int64(30e9), int64(10e9), int64(100e6), 0.2, 3.0, int64(10e9), math.MaxInt, int64(0), int64(5e9), int64(60e9), 0.1, int64(-1), int64(0), 10_000)
	f.Add(3, int64(30e9), int64(10e9), int64(100e6), 0.2, 3.0, int64(10e9), 1<<40, int64(0), int64(5e9), int64(60e9), 0.1, int64(-1), int64(0), 10_000)
	f.Add(3, int64(30e9), int64(10e9), int64(100e6), math.NaN(), math.NaN(), int64(10e9), 10, int64(0), int64(5e9), int64(60e9), 0.1, int64(-1), int64(0), 10_000)
	f.Add(3, int64(30e9), int64(10e9), int64(100e6), 0.2, 3.0, int64(10e9), 10, int64(0), int64(1<<61), int64(math.MaxInt64), 0.1, int64(-5), int64(math.MaxInt64), 10_000)
	f.Add(100, int64(0), int64(0), int64(math.MaxInt64/2), 0.2, 3.0, int64(10e9), 10, int64(math.MaxInt64), int64(5e9), int64(60e9), 0.1, int64(-1), int64(0), 1)
	f.Fuzz(func(t *testing.T, attempts int, call, attempt, backoff int64, ratio, floor float64, budgetWindow int64,
		tolerate int, within, openBase, openMax int64, jitter float64, pauseWait, maxRetryAfter int64, keys int) {
		d := func(n int64) time.Duration { return time.Duration(n) }
		opts := []bw.Option{
			bw.WithBase(bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: req}, nil
			})),
			bw.WithMaxAttempts(attempts), bw.WithCallTimeout(d(call)), bw.WithAttemptTimeout(d(attempt)),
			bw.WithBackoff(bw.Constant(d(backoff))), bw.WithRetryBudget(ratio, floor, d(budgetWindow)),
			bw.WithPolicy(bw.Window(tolerate, d(within))), bw.WithOpenTimeout(d(openBase), d(openMax)), bw.WithOpenJitter(jitter),
			bw.WithMaxRetryAfter(d(maxRetryAfter)), bw.WithKeyLimits(keys, time.Minute),
		}
		if pauseWait >= 0 || pauseWait < -10 {
			opts = append(opts, bw.WithMaxWait(d(pauseWait)))
		}
		tr, err := bw.NewTransport(opts...)
		if err != nil {
			return
		}
		_ = tr.Explain()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.test/", nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	})
}

// FuzzDurations: a breaker tripped, opened or reopened, and a key paused,
// for any duration from an hour up to math.MaxInt64, stays so: nothing
// wraps round to the past.
func FuzzDurations(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(5e9), int64(60e9), uint8(3))
	f.Add(int64(time.Second), int64(1<<61), int64(math.MaxInt64), uint8(70))
	f.Add(int64(math.MaxInt64-1), int64(math.MaxInt64), int64(math.MaxInt64), uint8(2))
	f.Fuzz(func(t *testing.T, dur, base, maxOpen int64, reopens uint8) {
		// At least an hour, so that none of it passes while the test runs.
		dur, base = max(dur, int64(time.Hour)), max(base, int64(time.Hour))
		bs, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(1)), bw.WithHalfOpen(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		bs.Get("k").Trip(time.Duration(dur))
		if s := bs.Get("k").State(); s != bw.StateOpen {
			t.Fatalf("Trip(%d) left the breaker %s", dur, s)
		}
		g, err := bw.NewPauseGates(bw.WithMaxRetryAfter(time.Duration(dur)))
		if err != nil {
			t.Fatal(err)
		}
		g.Pause("k", time.Duration(dur))
		if pauseLeft(g, "k") <= 0 {
			t.Fatalf("Pause(%d) with max pause %d paused nothing", dur, dur)
		}
		rb, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(1)), bw.WithHalfOpen(1, 2),
			bw.WithOpenTimeout(time.Duration(base), time.Duration(maxOpen)))
		if err != nil {
			return
		}
		rb.Get("k").RecordFailure(bw.ServerError)
		for i := range int(reopens % 80) {
			if s := rb.Get("k").State(); s != bw.StateOpen {
				t.Fatalf("open timeouts %d..%d: after %d reopenings the breaker is %s", base, maxOpen, i, s)
			}
			rb.Get("k").RecordSuccess()
			rb.Get("k").RecordFailure(bw.ServerError)
		}
	})
}

// FuzzCallbacks: whichever of the user's callbacks panic, a call ends with a
// response or an error, never a panic, and closes the request body exactly
// once.
func FuzzCallbacks(f *testing.F) {
	f.Add(uint8(1), uint8(0), false) // KeyFunc
	f.Add(uint8(2), uint8(1), true)  // classifier
	f.Add(uint8(4), uint8(2), true)  // RetryIf
	f.Add(uint8(8), uint8(3), false) // observer
	f.Add(uint8(16), uint8(0), true) // backoff
	f.Add(uint8(31), uint8(2), true) // all of them
	f.Fuzz(func(t *testing.T, panics, status uint8, withBody bool) {
		boom := func(bit uint8) {
			if panics&bit != 0 {
				panic("boom")
			}
		}
		code := []int{200, 500, 503, 429}[status%4]
		tr, err := bw.NewTransport(
			bw.WithBase(bw.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				if req.Body != nil {
					io.Copy(io.Discard, req.Body)
					req.Body.Close()
				}
				return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			})),
			bw.WithKeyFunc(func(r *http.Request) string { boom(1); return bw.HostKey(r) }),
			bw.WithClassifier(func(resp *http.Response, err error) bw.Outcome { boom(2); return bw.Classify(resp, err) }),
			bw.WithRetryIf(func(context.Context, *http.Response, error) (bool, error) { boom(4); return true, nil }),
			bw.WithObserver(bw.ObserverFunc(func(context.Context, bw.Event) { boom(8) })),
			bw.WithBackoff(requestTimeBackoff(func() { boom(16) })),
		)
		if err != nil {
			t.Fatalf("NewTransport: %v", err)
		}
		body := &closeCounter{Reader: strings.NewReader("payload")}
		req, _ := http.NewRequest(http.MethodPut, "http://upstream.test/", nil)
		if withBody {
			req.Body = body
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("RoundTrip panicked with callbacks %05b panicking: %v", panics, r)
				}
			}()
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}()
		if n := body.closes.Load(); withBody && n != 1 {
			t.Fatalf("the request body was closed %d times", n)
		}
	})
}
