package breakwater

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

// TestRejectionTable walks the table of rejections: each row's error, made
// by the mechanism itself, matches its sentinel and the coarser error
// beneath, is classified and observed as the row says, is answered by the
// inbound middleware with the row's mechanism, status and problem detail,
// and has its line in the sentinels' documentation.
func TestRejectionTable(t *testing.T) {
	doc := sentinelDoc(t)
	for _, r := range rejections {
		t.Run(strings.TrimPrefix(r.err.Error(), "breakwater: "), func(t *testing.T) {
			make, ok := outboundMakers[r.err]
			if r.mech != "" && !ok {
				t.Fatalf("no outbound maker for the row of %v", r.err)
			}
			if ok {
				err := make(t)
				if !errors.Is(err, r.err) || r.parent != nil && !errors.Is(err, r.parent) {
					t.Errorf("%v does not match %v and %v", err, r.err, r.parent)
				}
				if got := Classify(nil, err).Category; got != r.cat {
					t.Errorf("Classify(%v) = %s, want %s", err, got, r.cat)
				}
				var e *Error
				if !errors.As(err, &e) || e.Mechanism != r.mech {
					t.Errorf("%v: *Error %+v, want mechanism %q", err, e, r.mech)
				}
				if want := map[Category]Mechanism{Rejected: r.mech}[r.cat]; mechanismOf(err) != want {
					t.Errorf("mechanismOf(%v) = %q, want %q", err, mechanismOf(err), want)
				}
				if d, ok := RetryAfter(err); ok && d <= 0 {
					t.Errorf("RetryAfter(%v) = %s, true", err, d)
				}
				var ne net.Error
				if isTimeout := r.cat == Timeout; !errors.As(err, &ne) || ne.Timeout() != isTimeout || os.IsTimeout(urlError(err)) != isTimeout {
					t.Errorf("%v: a net.Error whose Timeout is %v? (os.IsTimeout %v)", err, isTimeout, os.IsTimeout(urlError(err)))
				}
			}
			if r.inbound != "" {
				serve, ok := inboundMakers[r.err]
				if !ok {
					t.Fatalf("no inbound maker for the row of %v", r.err)
				}
				rej, rec := serve(t)
				if rej.Mechanism != r.inbound || rej.Status != r.status || !errors.Is(rej.Err, r.err) {
					t.Errorf("inbound rejection %+v, want %s, %d, %v", rej, r.inbound, r.status, r.err)
				}
				var body problemDetails
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != r.status || body.Detail != r.detail || body.Detail == "" {
					t.Errorf("problem %d %s (%v), want %d with %q", rec.Code, rec.Body, err, r.status, r.detail)
				}
			}
			for _, m := range []Mechanism{r.mech, r.inbound} {
				if m != "" && !slices.Contains(Mechanisms(), m) {
					t.Errorf("Mechanisms() lacks %q", m)
				}
			}
			line := doc[sentinelName(r.err)]
			for _, want := range []string{string(r.mech), string(r.inbound), r.cat.String(), errName(r.parent)} {
				if !slices.Contains(line, want) && !(want == "" && slices.Contains(line, "–")) {
					t.Errorf("the documentation's line %q lacks %q", line, want)
				}
			}
		})
	}
	if len(doc) != len(rejections) {
		t.Errorf("the documentation's table has %d rows, the code's %d", len(doc), len(rejections))
	}
}

// outbound makes each row's error with the mechanism a Transport or a
// registry runs.
var outboundMakers = map[error]func(t *testing.T) error{
	ErrAttemptTimeout: func(t *testing.T) error {
		return hangingCall(t, WithAttemptTimeout(time.Second), WithMaxAttempts(1))
	},
	ErrCallTimeout: func(t *testing.T) error {
		return hangingCall(t, WithCallTimeout(time.Second), WithAttemptTimeout(0))
	},
	ErrCircuitOpen: func(t *testing.T) error {
		bs := mustBreakers(t)
		bs.Get("k").Trip(time.Minute)
		_, err := bs.Get("k").Allow()
		return err
	},
	ErrHalfOpenBusy: func(t *testing.T) error {
		var err error
		synctest.Test(t, func(t *testing.T) {
			bs := mustBreakers(t, WithOpenJitter(0))
			b := bs.Get("k")
			b.Trip(time.Second)
			time.Sleep(time.Second)
			if _, err := b.Allow(); err != nil {
				t.Fatalf("the probe: %v", err)
			}
			_, err = b.Allow()
		})
		return err
	},
	ErrPaused: func(t *testing.T) error {
		g, err := NewPauseGates()
		if err != nil {
			t.Fatal(err)
		}
		g.Pause("k", time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return g.Wait(ctx, "k")
	},
	ErrRateLimited: func(t *testing.T) error {
		rs, err := NewRateLimiters(1, 1, WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		rs.Take("k")
		return rs.Wait(context.Background(), "k")
	},
	ErrConcurrencyLimit: func(t *testing.T) error {
		bs, err := NewBulkheads(1, WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		s, err := bs.Acquire(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		_, err = bs.Acquire(context.Background(), "k")
		return err
	},
	ErrRetryBudget: func(t *testing.T) error {
		reset := RoundTripperFunc(func(*http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		})
		tr, err := NewTransport(WithBase(reset), WithRetryBudget(0, 0, time.Second), WithBackoff(Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://upstream.test/", nil))
		return err
	},
}

// inbound serves a request that an inbound middleware rejects with each
// row's error, and returns the rejection and the default response.
var inboundMakers = map[error]func(t *testing.T) (Rejection, *httptest.ResponseRecorder){
	http.ErrHandlerTimeout: func(t *testing.T) (Rejection, *httptest.ResponseRecorder) {
		return rejectedBy(t, func(opt Option) func(http.Handler) http.Handler {
			return mustMiddleware(t)(HandlerTimeout(time.Nanosecond, opt))
		}, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	},
	ErrCircuitOpen: func(t *testing.T) (Rejection, *httptest.ResponseRecorder) {
		return routeBreakerRejection(t, func(bs *Breakers) { bs.Get("route").Trip(time.Minute) })
	},
	ErrHalfOpenBusy: func(t *testing.T) (Rejection, *httptest.ResponseRecorder) {
		return routeBreakerRejection(t, func(bs *Breakers) {
			b := bs.Get("route")
			b.Trip(time.Nanosecond)
			time.Sleep(time.Millisecond)
			if _, err := b.Allow(); err != nil {
				t.Fatalf("the probe: %v", err)
			}
		})
	},
	ErrRateLimited: func(t *testing.T) (Rejection, *httptest.ResponseRecorder) {
		rs, err := NewRateLimiters(1, 1)
		if err != nil {
			t.Fatal(err)
		}
		rs.Take("k")
		return rejectedBy(t, func(opt Option) func(http.Handler) http.Handler {
			return mustMiddleware(t)(ClientRateLimit(rs, func(*http.Request) string { return "k" }, opt))
		}, nil)
	},
	ErrConcurrencyLimit: func(t *testing.T) (Rejection, *httptest.ResponseRecorder) {
		bh, err := NewBulkheads(1, WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := bh.Acquire(context.Background(), "")
		defer s.Release()
		return rejectedBy(t, func(opt Option) func(http.Handler) http.Handler {
			return mustMiddleware(t)(Shedder(bh, opt))
		}, nil)
	},
}

func routeBreakerRejection(t *testing.T, prepare func(*Breakers)) (Rejection, *httptest.ResponseRecorder) {
	bs := mustBreakers(t)
	prepare(bs)
	return rejectedBy(t, func(opt Option) func(http.Handler) http.Handler {
		return mustMiddleware(t)(RouteBreaker(bs, opt, WithKeyFunc(func(*http.Request) string { return "route" })))
	}, nil)
}

// rejectedBy serves one request through the middleware that mount builds
// with a deny handler recording the rejection, and one through the default
// deny handler, and returns the rejection and the default response.
func rejectedBy(t *testing.T, mount func(Option) func(http.Handler) http.Handler, h http.HandlerFunc) (Rejection, *httptest.ResponseRecorder) {
	t.Helper()
	if h == nil {
		h = func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }
	}
	var got Rejection
	record := mount(WithDenyHandler(func(w http.ResponseWriter, r *http.Request, rej Rejection) {
		got = rej
		WriteProblem(w, r, rej)
	}))
	record(h).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	rec := httptest.NewRecorder()
	mount(nil)(h).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	return got, rec
}

// mustMiddleware returns a function that fails t on a middleware
// constructor's error.
func mustMiddleware(t *testing.T) func(func(http.Handler) http.Handler, error) func(http.Handler) http.Handler {
	return func(mw func(http.Handler) http.Handler, err error) func(http.Handler) http.Handler {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return mw
	}
}

func mustBreakers(t *testing.T, opts ...Option) *Breakers {
	t.Helper()
	bs, err := NewBreakers(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// hangingCall is the error of a call to an upstream that never answers.
func hangingCall(t *testing.T, opts ...Option) error {
	var err error
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr, terr := NewTransport(append([]Option{WithBase(u.Transport())}, opts...)...)
		if terr != nil {
			t.Fatal(terr)
		}
		_, err = tr.RoundTrip(httptest.NewRequest(http.MethodGet, breakwatertest.PipeURL, nil))
	})
	return err
}

// urlError wraps err as http.Client does.
func urlError(err error) error { return &url.Error{Op: "Get", URL: breakwatertest.PipeURL, Err: err} }

// sentinelDoc reads the table in the sentinels' documentation: the words
// of each row, by the sentinel's name.
func sentinelDoc(t *testing.T) map[string][]string {
	src, err := os.ReadFile("errors.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(src), "\n") {
		fields := strings.Fields(strings.TrimPrefix(line, "//\t"))
		if strings.HasPrefix(line, "//\t") && len(fields) > 0 && fields[0] != "sentinel" {
			for i, f := range fields {
				fields[i] = strings.Trim(f, "()")
			}
			rows[fields[0]] = fields
		}
	}
	return rows
}

// sentinelName is the Go name of a sentinel of the table.
func sentinelName(err error) string {
	if err == http.ErrHandlerTimeout {
		return "http.ErrHandlerTimeout"
	}
	return errName(err)
}

// errName names err in the documentation's table ("" for nil).
func errName(err error) string {
	switch err {
	case nil:
		return ""
	case context.DeadlineExceeded:
		return "context.DeadlineExceeded"
	}
	for _, n := range []struct {
		name string
		err  error
	}{
		{"ErrAttemptTimeout", ErrAttemptTimeout}, {"ErrCallTimeout", ErrCallTimeout}, {"ErrCircuitOpen", ErrCircuitOpen},
		{"ErrHalfOpenBusy", ErrHalfOpenBusy}, {"ErrPaused", ErrPaused}, {"ErrRateLimited", ErrRateLimited},
		{"ErrConcurrencyLimit", ErrConcurrencyLimit}, {"ErrRetryBudget", ErrRetryBudget},
	} {
		if n.err == err {
			return n.name
		}
	}
	return err.Error()
}
