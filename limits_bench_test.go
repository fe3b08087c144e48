package breakwater_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"golang.org/x/time/rate"
)

// serialAndParallel runs op in a serial loop and under b.RunParallel.
func serialAndParallel(b *testing.B, op func()) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op()
			}
		})
	})
}

// BenchmarkRateLimitAdmission measures admitting one request when a token
// is available, with x/time/rate's own Limiter.Allow as the reference in
// the same run. The bucket is large enough never to run dry.
func BenchmarkRateLimitAdmission(b *testing.B) {
	const limit, burst = rate.Limit(1e12), 1 << 30
	ctx := context.Background()
	ref := rate.NewLimiter(limit, burst)
	b.Run("x_time_rate_Allow", func(b *testing.B) { serialAndParallel(b, func() { ref.Allow() }) })

	rs, _ := bw.NewRateLimiters(limit, burst)
	b.Run("RateLimiters_Take", func(b *testing.B) { serialAndParallel(b, func() { rs.Take("api.example.com") }) })
	b.Run("RateLimiters_Wait", func(b *testing.B) { serialAndParallel(b, func() { _ = rs.Wait(ctx, "api.example.com") }) })
}

// BenchmarkPauseGateCheck measures the pause gate on a key that is not
// paused: the check every attempt of a Transport pays by default.
func BenchmarkPauseGateCheck(b *testing.B) {
	ctx := context.Background()
	g, _ := bw.NewPauseGates()
	b.Run("none_paused/Wait", func(b *testing.B) { serialAndParallel(b, func() { _ = g.Wait(ctx, "api.example.com") }) })
	b.Run("none_paused/Remaining", func(b *testing.B) { serialAndParallel(b, func() { pauseLeft(g, "api.example.com") }) })

	// Another key is paused: the check reads the clock and looks the key
	// up.
	other, _ := bw.NewPauseGates()
	other.Pause("elsewhere.example.com", time.Hour)
	b.Run("other_paused/Wait", func(b *testing.B) { serialAndParallel(b, func() { _ = other.Wait(ctx, "api.example.com") }) })
}

// BenchmarkBulkheadAcquireRelease measures taking and giving back a slot
// when one is free.
func BenchmarkBulkheadAcquireRelease(b *testing.B) {
	ctx := context.Background()
	bs, _ := bw.NewBulkheads(1 << 20)
	b.Run("Bulkheads", func(b *testing.B) {
		serialAndParallel(b, func() {
			s, _ := bs.Acquire(ctx, "api.example.com")
			s.Release()
		})
	})
	ad, _ := bw.NewBulkheads(1<<10, bw.WithAdaptiveLimit(bw.Gradient{}))
	b.Run("Bulkheads_Gradient", func(b *testing.B) {
		serialAndParallel(b, func() {
			s, _ := ad.Acquire(ctx, "api.example.com")
			s.Release()
		})
	})
}

// cannedBody answers 200 with a one-byte body, so that the response is
// tracked until its body ends.
type cannedBody struct{}

type oneByte struct{ done bool }

func (b *oneByte) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	b.done = true
	p[0] = 'x'
	return 1, nil
}

func (b *oneByte) Close() error { return nil }

func (cannedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: &oneByte{}, ContentLength: 1, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// BenchmarkTransportLimits measures the chain's overhead per call with the
// limits configured, over in-memory bases: cannedOK (no body, as in
// BenchmarkTransport) and cannedBody (a body tracked until EOF).
func BenchmarkTransportLimits(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	for _, tc := range []struct {
		name string
		base http.RoundTripper
		opts []bw.Option
	}{
		{"without_pause_gate", cannedOK{}, []bw.Option{bw.WithoutPauseGate()}},
		{"default_pause_gate", cannedOK{}, nil},
		{"rate_limit", cannedOK{}, []bw.Option{bw.WithRateLimit(1e12, 1<<30)}},
		{"concurrency_limit", cannedOK{}, []bw.Option{bw.WithConcurrencyLimit(1 << 20)}},
		{"all", cannedOK{}, []bw.Option{bw.WithRateLimit(1e12, 1<<30), bw.WithConcurrencyLimit(1 << 20), bw.WithRateLimitHeaders(true)}},
		{"body/default_pause_gate", cannedBody{}, nil},
		{"body/concurrency_limit", cannedBody{}, []bw.Option{bw.WithConcurrencyLimit(1 << 20)}},
	} {
		tr, err := bw.NewTransport(append([]bw.Option{bw.WithBase(tc.base)}, tc.opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			serialAndParallel(b, func() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					panic(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		})
	}
}
