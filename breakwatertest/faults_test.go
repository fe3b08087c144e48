package breakwatertest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-go/breakwater/breakwatertest"
)

// okTransport answers 200 "ok" to every request, closing its body, and
// counts the calls.
type okTransport struct{ calls atomic.Int64 }

func (o *okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	o.calls.Add(1)
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r,
	}, nil
}

var errInjected = errors.New("injected failure")

func TestFaultTransportProbabilityZero(t *testing.T) {
	next := &okTransport{}
	ft := breakwatertest.NewFaultTransport(next, 1,
		breakwatertest.Fault{Probability: 0, Status: 503},
		breakwatertest.Fault{Probability: 0, Err: errInjected},
	)
	for range 1000 {
		if r := get(t, ft, "http://x.test/"); r.status != 200 {
			t.Fatalf("status %d, want 200", r.status)
		}
	}
	if ft.Injected() != 0 || next.calls.Load() != 1000 {
		t.Errorf("Injected() = %d, next called %d times; want 0 and 1000", ft.Injected(), next.calls.Load())
	}
}

func TestFaultTransportSyntheticResponse(t *testing.T) {
	next := &okTransport{}
	ft := breakwatertest.NewFaultTransport(next, 1, breakwatertest.Fault{
		Probability: 1,
		Status:      503,
		Header:      http.Header{"Retry-After": {"2"}},
	})
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodGet, "http://x.test/", nil)
		resp, err := ft.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Status != "503 Service Unavailable" ||
			resp.Proto != "HTTP/1.1" || resp.ProtoMajor != 1 || resp.ProtoMinor != 1 ||
			resp.Request != req || resp.Header.Get("Retry-After") != "2" ||
			string(body) != "Service Unavailable\n" || resp.ContentLength != int64(len(body)) {
			t.Errorf("response %d = %+v, body %q", i, resp, body)
		}
		resp.Header.Set("Retry-After", "changed") // must not leak into the next response
	}
	if ft.Injected() != 3 || next.calls.Load() != 0 {
		t.Errorf("Injected() = %d, next called %d times; want 3 and 0", ft.Injected(), next.calls.Load())
	}

	for _, tt := range []struct {
		method string
		status int
	}{{http.MethodHead, 500}, {http.MethodGet, 204}, {http.MethodGet, 304}} {
		ft := breakwatertest.NewFaultTransport(next, 1, breakwatertest.Fault{Probability: 1, Status: tt.status})
		req, _ := http.NewRequest(tt.method, "http://x.test/", nil)
		resp, err := ft.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Body != http.NoBody || resp.ContentLength != 0 {
			t.Errorf("%s %d: Body %v, ContentLength %d; want http.NoBody, 0", tt.method, tt.status, resp.Body, resp.ContentLength)
		}
	}
}

func TestFaultTransportError(t *testing.T) {
	ft := breakwatertest.NewFaultTransport(&okTransport{}, 1, breakwatertest.Fault{Probability: 1, Err: errInjected})
	_, err := (&http.Client{Transport: ft}).Get("http://x.test/")
	if !errors.Is(err, errInjected) {
		t.Errorf("err = %v, want errInjected", err)
	}
}

func TestFaultTransportIsDeterministic(t *testing.T) {
	run := func(seed uint64) (string, int) {
		ft := breakwatertest.NewFaultTransport(&okTransport{}, seed,
			breakwatertest.Fault{Probability: 0.3, Status: 503},
			breakwatertest.Fault{Probability: 0.2, Err: errInjected},
		)
		var b strings.Builder
		for range 500 {
			r := do(context.Background(), ft, http.MethodGet, "http://x.test/", nil)
			switch {
			case errors.Is(r.err, errInjected):
				b.WriteByte('E')
			case r.status == 503:
				b.WriteByte('5')
			default:
				b.WriteByte('.')
			}
		}
		return b.String(), ft.Injected()
	}
	a, injected := run(42)
	if again, _ := run(42); again != a {
		t.Errorf("seed 42 gave two different sequences:\n%s\n%s", a, again)
	}
	if other, _ := run(43); other == a {
		t.Error("seeds 42 and 43 gave the same sequence")
	}
	// The shares follow the probabilities (the draw is fixed by the seed,
	// so these bounds cannot flake).
	s5, sE := strings.Count(a, "5"), strings.Count(a, "E")
	if s5 < 110 || s5 > 190 || sE < 65 || sE > 135 || injected != s5+sE {
		t.Errorf("500 requests: %d 503s, %d errors, Injected() = %d; want about 150 and 100", s5, sE, injected)
	}
}

func TestFaultTransportClosesRequestBody(t *testing.T) {
	tests := []struct {
		name   string
		fault  breakwatertest.Fault
		cancel bool // cancel the request during the fault's latency
	}{
		{name: "status", fault: breakwatertest.Fault{Probability: 1, Status: 500}},
		{name: "error", fault: breakwatertest.Fault{Probability: 1, Err: errInjected}},
		{name: "latency then status", fault: breakwatertest.Fault{Probability: 1, Latency: time.Second, Status: 500}},
		{name: "latency canceled", fault: breakwatertest.Fault{Probability: 1, Latency: time.Hour}, cancel: true},
		{name: "latency then next", fault: breakwatertest.Fault{Probability: 1, Latency: time.Second}},
		{name: "no fault", fault: breakwatertest.Fault{Probability: 0, Status: 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ft := breakwatertest.NewFaultTransport(&okTransport{}, 7, tt.fault)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				body := newTrackedBody("payload")
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x.test/", body)
				if tt.cancel {
					go func() {
						synctest.Wait()
						cancel()
					}()
				}
				resp, err := ft.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				if tt.cancel && !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
				if n := body.closed(); n != 1 {
					t.Errorf("request body closed %d times, want 1", n)
				}
			})
		})
	}
}

func TestFaultTransportLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Body: []byte("hi")})
		ft := breakwatertest.NewFaultTransport(u.Transport(), 1, breakwatertest.Fault{Probability: 1, Latency: 3 * time.Second})

		start := time.Now()
		if r := get(t, ft, u.URL); r.body != "hi" || time.Since(start) != 3*time.Second {
			t.Errorf("got %q after %v, want %q after 3s", r.body, time.Since(start), "hi")
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		r := do(ctx, ft, http.MethodGet, u.URL, nil)
		if !errors.Is(r.err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("err = %v after %v, want context.DeadlineExceeded after 1s", r.err, time.Since(start))
		}
		if u.Count() != 1 || ft.Injected() != 2 {
			t.Errorf("upstream Count() = %d, Injected() = %d; want 1 and 2", u.Count(), ft.Injected())
		}
	})
}

func TestFaultTransportNilNextUsesDefaultTransport(t *testing.T) {
	u := breakwatertest.NewUpstream(t, breakwatertest.Step{Status: 202})
	ft := breakwatertest.NewFaultTransport(nil, 1, breakwatertest.Fault{Probability: 0, Status: 500})
	if r := get(t, ft, u.URL); r.status != 202 || u.Count() != 1 {
		t.Errorf("status %d, upstream Count() %d; want 202 and 1", r.status, u.Count())
	}
	// u.Close closes http.DefaultTransport's idle connections too.
}

func TestFaultTransportConcurrentUse(t *testing.T) {
	next := &okTransport{}
	ft := breakwatertest.NewFaultTransport(next, 3,
		breakwatertest.Fault{Probability: 0.25, Status: 429},
		breakwatertest.Fault{Probability: 0.25, Err: errInjected},
	)
	var wg sync.WaitGroup
	var faults atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 200 {
				r := do(context.Background(), ft, http.MethodGet, "http://x.test/", nil)
				if r.err != nil || r.status == 429 {
					faults.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := int64(ft.Injected()); got != faults.Load() || got+next.calls.Load() != 1600 {
		t.Errorf("Injected() = %d, faults seen %d, passed on %d; want Injected = seen, sum 1600",
			got, faults.Load(), next.calls.Load())
	}
}

func TestNewFaultTransportRejectsBadFaults(t *testing.T) {
	tests := []struct {
		name   string
		faults []breakwatertest.Fault
		want   string
	}{
		{"negative probability", []breakwatertest.Fault{{Probability: -0.1, Status: 500}}, "outside [0, 1]"},
		{"probability above 1", []breakwatertest.Fault{{Probability: 1.5, Status: 500}}, "outside [0, 1]"},
		{"NaN probability", []breakwatertest.Fault{{Probability: math.NaN(), Status: 500}}, "outside [0, 1]"},
		{"sum above 1", []breakwatertest.Fault{{Probability: 0.6, Status: 500}, {Probability: 0.5, Status: 503}}, "sum to"},
		{"status too low", []breakwatertest.Fault{{Probability: 1, Status: 101}}, "outside 200-599"},
		{"status too high", []breakwatertest.Fault{{Probability: 1, Status: 600}}, "outside 200-599"},
		{"status and error", []breakwatertest.Fault{{Probability: 1, Status: 500, Err: errInjected}}, "both"},
		{"does nothing", []breakwatertest.Fault{{Probability: 1}}, "none of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.HasPrefix(msg, "breakwatertest: ") || !strings.Contains(msg, tt.want) {
					t.Errorf("panic %q, want one containing %q", msg, tt.want)
				}
			}()
			breakwatertest.NewFaultTransport(nil, 1, tt.faults...)
		})
	}

	// Probabilities that sum to 1 up to rounding are accepted.
	breakwatertest.NewFaultTransport(nil, 1,
		breakwatertest.Fault{Probability: 0.1, Status: 500},
		breakwatertest.Fault{Probability: 0.2, Status: 502},
		breakwatertest.Fault{Probability: 0.7, Status: 503},
	)
}

func TestFaultTransportDoesNotModifyRequest(t *testing.T) {
	var seen []string
	next := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.Header.Get("X-A"))
		return (&okTransport{}).RoundTrip(r)
	})
	ft := breakwatertest.NewFaultTransport(next, 1, breakwatertest.Fault{Probability: 0.5, Status: 500})
	req, _ := http.NewRequest(http.MethodGet, "http://x.test/", nil)
	req.Header.Set("X-A", "1")
	before := req.Header.Clone()
	for range 20 {
		resp, err := ft.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if !slices.Equal(req.Header["X-A"], before["X-A"]) || len(req.Header) != len(before) {
		t.Errorf("request header changed to %v", req.Header)
	}
	for _, v := range seen {
		if v != "1" {
			t.Errorf("next saw X-A %q, want 1", v)
		}
	}
}

// trackedBody is a request body that counts its Close calls.
type trackedBody struct {
	io.Reader
	mu     sync.Mutex
	closes int
}

func newTrackedBody(s string) *trackedBody { return &trackedBody{Reader: strings.NewReader(s)} }

func (b *trackedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes++
	return nil
}

func (b *trackedBody) closed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
