package breakwater_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// cannedOK is an in-memory base transport that answers 200 with a short
// body and allocates nothing itself beyond the response it must return.
type cannedOK struct{}

func (cannedOK) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// BenchmarkTransport measures the chain's overhead per call over an
// in-memory base: bare is the base alone.
func BenchmarkTransport(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	cases := []struct {
		name string
		opts []bw.Option
	}{
		{"default", nil},
		{"no_timeouts", []bw.Option{bw.WithCallTimeout(0), bw.WithAttemptTimeout(0)}},
		{"retry_only", []bw.Option{bw.WithCallTimeout(0), bw.WithAttemptTimeout(0), bw.WithoutBreaker()}},
		// A hedge could follow every call, none is needed: the cost of
		// racing the attempt against the hedge delay.
		{"hedging", []bw.Option{bw.WithHedging(bw.Hedging{Delay: time.Second, Budget: 1})}},
		{"failover", []bw.Option{bw.WithFailover(bw.Failover{Endpoints: []string{"https://a.example", "https://b.example", "https://c.example"}})}},
	}
	run := func(b *testing.B, rt http.RoundTripper) {
		b.ReportAllocs()
		b.Run("serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, _ := rt.RoundTrip(req)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
	b.Run("bare", func(b *testing.B) { run(b, cannedOK{}) })
	for _, tc := range cases {
		tr, err := bw.NewTransport(append([]bw.Option{bw.WithBase(cannedOK{})}, tc.opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) { run(b, tr) })
	}
}

// TestDefaultChainAllocations: a successful call through the default chain
// (both timeouts on) makes at most 2 allocations, the base's response
// included: the attempt's context, the request copy that carries it and
// the body wrapper are one. Without timeouts and without an observer the
// chain adds none.
func TestDefaultChainAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	for _, tc := range []struct {
		name string
		max  float64
		opts []bw.Option
	}{
		{"default", 2, nil},
		{"no timeouts", 1, []bw.Option{bw.WithCallTimeout(0), bw.WithAttemptTimeout(0)}},
		{"default, observed", 2, []bw.Option{bw.WithObserver(bw.ObserverFunc(func(context.Context, bw.Event) {}))}},
		{"no timeouts, observed", 1, []bw.Option{bw.WithCallTimeout(0), bw.WithAttemptTimeout(0), bw.WithObserver(bw.ObserverFunc(func(context.Context, bw.Event) {}))}},
		{"default, plain http", 2, nil}, // its key is built once
	} {
		tr, err := bw.NewTransport(append([]bw.Option{bw.WithBase(cannedOK{})}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		req := req
		if tc.name == "default, plain http" {
			req, _ = http.NewRequest(http.MethodGet, "http://api.example.com/v1/items", nil)
		}
		n := testing.AllocsPerRun(1000, func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
		if n > tc.max {
			t.Errorf("%s: %v allocations per call, want at most %v", tc.name, n, tc.max)
		}
	}
}
