package breakwater_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

const upstreamKey = "http://upstream.test"

func newTransport(t *testing.T, base http.RoundTripper, opts ...bw.Option) *bw.Transport {
	t.Helper()
	tr, err := bw.NewTransport(append([]bw.Option{bw.WithBase(base)}, opts...)...)
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	return tr
}

type result struct {
	status int
	body   string
	err    error
}

// do sends one request through rt, reading and closing the body.
func do(rt http.RoundTripper, req *http.Request) result {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return result{err: err}
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return result{status: resp.StatusCode, body: string(b), err: err}
}

func get(rt http.RoundTripper) result {
	req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
	return do(rt, req)
}

func TestMeltsOncePerExhaustedCall(t *testing.T) {
	for _, attempts := range []int{5, 2} {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
			tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(attempts), bw.WithoutRetryBudget(),
				bw.WithPolicy(bw.Window(10, 0)))
			for i := 1; i <= 11; i++ {
				before := u.Count()
				r := get(tr)
				if r.err != nil || r.status != 500 {
					t.Fatalf("call %d: %v %d, want the 500 itself", i, r.err, r.status)
				}
				if n := u.Count() - before; n != attempts {
					t.Fatalf("call %d made %d attempts, want %d", i, n, attempts)
				}
				want := bw.StateClosed
				if i == 11 {
					want = bw.StateOpen
				}
				if s := tr.Breakers().Get(upstreamKey).State(); s != want {
					t.Fatalf("after call %d the breaker is %s, want %s", i, s, want)
				}
			}
			before := u.Count()
			if r := get(tr); !errors.Is(r.err, bw.ErrCircuitOpen) {
				t.Fatalf("call 12: %v, want ErrCircuitOpen", r.err)
			}
			if u.Count() != before {
				t.Fatal("call 12 reached the upstream")
			}
		})
	}
}

func TestMeltPerAttemptOpensDuringThirdCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 500})
		// A long opening: the retry's backoff must not outlast it and
		// reach a half-open breaker's probe.
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(5), bw.WithoutRetryBudget(), bw.WithChargePerAttempt(true),
			bw.WithPolicy(bw.Window(10, 0)), bw.WithOpenTimeout(time.Minute, time.Minute))
		for i := 1; i <= 2; i++ {
			if r := get(tr); r.status != 500 {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		if s := tr.Breakers().Get(upstreamKey).State(); s != bw.StateClosed {
			t.Fatalf("open after 10 failing attempts, tolerate 10")
		}
		r := get(tr)
		var re *bw.Error
		if !errors.Is(r.err, bw.ErrCircuitOpen) || !errors.As(r.err, &re) || re.Attempts != 1 {
			t.Fatalf("call 3: %v, want ErrCircuitOpen after its one attempt", r.err)
		}
		if u.Count() != 11 {
			t.Fatalf("upstream saw %d requests, want 11", u.Count())
		}
	})
}

func TestRecoveredCallChargesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 502}, breakwatertest.Step{Status: 503}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport())
		if r := get(tr); r.status != 200 {
			t.Fatalf("%+v", r)
		}
		if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.Failures != 0 {
			t.Fatalf("a recovered call charged the breaker: %+v", s)
		}
		if u.Count() != 3 {
			t.Fatalf("%d attempts, want 3", u.Count())
		}
	})
}

func TestAttemptTimeout(t *testing.T) {
	t.Run("a hanging attempt is retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true}, breakwatertest.Step{})
			tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(2*time.Second))
			if r := get(tr); r.status != 200 || u.Count() != 2 {
				t.Fatalf("got %+v after %d attempts", r, u.Count())
			}
		})
	})
	t.Run("and counted as a timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
			tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(2*time.Second), bw.WithMaxAttempts(1),
				bw.WithPolicy(bw.Consecutive(2)))
			r := get(tr)
			if !errors.Is(r.err, bw.ErrAttemptTimeout) {
				t.Fatalf("%v, want ErrAttemptTimeout", r.err)
			}
			if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.Failures != 1 || s.LastFailure != "timeout" {
				t.Fatalf("snapshot %+v, want one timeout", s)
			}
		})
	})
}

// readSlowly reads body in 64 KiB chunks, pausing between them.
func readSlowly(body io.Reader, pause time.Duration) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := body.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		time.Sleep(pause)
	}
}

func TestBodyOutlivesRoundTrip(t *testing.T) {
	const size = 10 << 20
	t.Run("a slow reader within the timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: size})
			tr := newTransport(t, u.Transport())
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/big", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := readSlowly(resp.Body, 30*time.Millisecond) // 160 chunks: about 5 s
			if err != nil {
				t.Fatalf("reading a good body failed: %v", err)
			}
			if !bytes.Equal(got, breakwatertest.Pattern(size)) {
				t.Fatalf("read %d bytes, want the %d sent", len(got), size)
			}
		})
	})
	t.Run("past the attempt timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: size})
			tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(2*time.Second))
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/big", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, err = readSlowly(resp.Body, 30*time.Millisecond)
			if !errors.Is(err, bw.ErrAttemptTimeout) {
				t.Fatalf("read past the attempt timeout: %v, want ErrAttemptTimeout", err)
			}
		})
	})
}

func TestDiscardedResponsesKeepTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, _ *http.Request) breakwatertest.Step {
			if n%2 == 1 {
				return breakwatertest.Step{Status: 503, BodySize: 8 << 10}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithoutRetryBudget())
		for i := range 50 {
			if r := get(tr); r.status != 200 {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		conns := map[int]bool{}
		for _, r := range u.Requests() {
			conns[r.ConnID] = true
		}
		if len(u.Requests()) != 100 || len(conns) != 1 {
			t.Fatalf("%d requests over %d connections, want 100 over 1", len(u.Requests()), len(conns))
		}
	})
}

// The bounds of the options are inclusive: 1000 attempts and 2^28 keys
// are accepted, one more refused; a retry budget and an idle TTL must be
// longer than 0, and the budget's floor × window under 10^12; a breaker
// window that tolerates failures must be wider than a failing call's waits.
func TestTransportOptionBounds(t *testing.T) {
	waits := []bw.Option{bw.WithMaxAttempts(5), bw.WithBackoff(bw.Constant(time.Second))} // 4 s of waits per failing call
	for name, opts := range map[string][]bw.Option{
		"1000 attempts":                      {bw.WithMaxAttempts(1000)},
		"2^28 keys":                          {bw.WithKeyLimits(1<<28, time.Minute)},
		"1 key":                              {bw.WithKeyLimits(1, time.Minute)},
		"a 1 ns idle TTL":                    {bw.WithKeyLimits(10, time.Nanosecond)},
		"a budget reserve just under 10^12":  {bw.WithRetryBudget(0.1, 1e12-1, time.Second)},
		"a window just wider than the waits": append(waits, bw.WithPolicy(bw.Window(3, 4*time.Second+1))),
		"a window of 0 tolerated failures":   append(waits, bw.WithPolicy(bw.Window(0, time.Second))),
	} {
		if _, err := bw.NewTransport(opts...); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, opts := range map[string][]bw.Option{
		"1001 attempts":                         {bw.WithMaxAttempts(1001)},
		"a budget without window":               {bw.WithRetryBudget(0.1, 1, 0)},
		"2^28 + 1 keys":                         {bw.WithKeyLimits(1<<28+1, time.Minute)},
		"no idle TTL":                           {bw.WithKeyLimits(10, 0)},
		"a budget reserve of 10^12":             {bw.WithRetryBudget(0.1, 1e12, time.Second)},
		"a reserve of 10^13 over a long window": {bw.WithRetryBudget(0.1, 1e6, 1e7*time.Second)},
		"a window as wide as the waits":         append(waits, bw.WithPolicy(bw.Window(3, 4*time.Second))),
	} {
		if _, err := bw.NewTransport(opts...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestTransportOptionErrors(t *testing.T) {
	for name, opts := range map[string][]bw.Option{
		"attempt > call":   {bw.WithCallTimeout(time.Second), bw.WithAttemptTimeout(2 * time.Second)},
		"zero attempts":    {bw.WithMaxAttempts(0)},
		"negative timeout": {bw.WithCallTimeout(-1)},
		"nil backoff":      {bw.WithBackoff(nil)},
		"bad budget":       {bw.WithRetryBudget(-1, 0, time.Second)},
		"bad breaker":      {bw.WithPolicy(bw.Consecutive(0))},
		"narrow window":    {bw.WithMaxAttempts(5), bw.WithBackoff(bw.Constant(time.Second)), bw.WithPolicy(bw.Window(3, 2*time.Second))},
	} {
		if _, err := bw.NewTransport(opts...); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// WithClassifier's classifier decides, in place of the default one: a 200
// it calls a server error is retried.
func TestClassifierDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Header: http.Header{"X-Error": {"1"}}}, breakwatertest.Step{})
		cl := func(resp *http.Response, err error) bw.Outcome {
			if resp != nil && resp.Header.Get("X-Error") != "" {
				return bw.Outcome{Category: bw.ServerError, Status: resp.StatusCode}
			}
			return bw.Classify(resp, err)
		}
		tr := newTransport(t, u.Transport(), bw.WithClassifier(cl), bw.WithBackoff(bw.Constant(0)))
		if r := get(tr); r.err != nil || r.status != 200 || u.Count() != 2 {
			t.Fatalf("%+v after %d requests, want the second 200 after 2", r, u.Count())
		}
	})
}

// A base RoundTripper that breaks its contract, returning neither a
// response nor an error, fails the attempt with an error (a network
// error, as net/http's client reports it), never a panic.
func TestBaseWithoutAnswer(t *testing.T) {
	base := bw.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	bs, err := bw.NewBreakers()
	if err != nil {
		t.Fatal(err)
	}
	retry, err := bw.RetryStage(bw.WithBackoff(bw.Constant(0)))
	if err != nil {
		t.Fatal(err)
	}
	for name, rt := range map[string]http.RoundTripper{
		"transport":       newTransport(t, base, bw.WithBackoff(bw.Constant(0))),
		"attempt timeout": bw.Chain(base, bw.AttemptTimeout(time.Second)),
		"breaker stage":   bw.Chain(base, bw.BreakerStage(bs, nil, nil)),
		"retry stage":     bw.Chain(base, retry),
	} {
		var r result
		mustNotPanic(t, name, func() { r = get(rt) })
		if r.err == nil || !strings.Contains(r.err.Error(), "nil response") {
			t.Errorf("%s: %+v, want an error for the nil response", name, r)
		}
	}
}

// A status below 100, which no HTTP server sends but a base RoundTripper
// might, is a server error: retried, and returned when the attempts run out.
func TestStatusBelow100IsAServerError(t *testing.T) {
	n := 0
	base := bw.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
		n++
		return &http.Response{StatusCode: 99, Body: http.NoBody, Header: http.Header{}}, nil
	})
	tr := newTransport(t, base, bw.WithBackoff(bw.Constant(0)), bw.WithMaxAttempts(3), bw.WithoutRetryBudget())
	if r := get(tr); r.err != nil || r.status != 99 || n != 3 {
		t.Fatalf("%+v after %d attempts, want the 99 after 3", r, n)
	}
}

// Observers see a 400 as the client's error, a 399 as a success.
func TestAttemptCategoriesAtThe400Boundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 399}, breakwatertest.Step{Status: 400})
		rec := &recorder{}
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1), bw.WithObserver(rec))
		get(tr)
		get(tr)
		if got, want := rec.kinds(), "call_start attempt(1,success) call_end(1,success) call_start attempt(1,client_error) call_end(1,client_error)"; got != want {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
	})
}

// rawTransport is an http.Transport whose every connection is an in-memory
// pipe served by serve, which reads requests and writes whatever bytes it
// likes. Inside a synctest bubble its time is virtual.
func rawTransport(serve func(c net.Conn, br *bufio.Reader)) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, s := net.Pipe()
			go func() {
				defer s.Close()
				serve(s, bufio.NewReader(s))
			}()
			return c, nil
		},
	}
}

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, bool) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, false
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err == nil
}
