package prom_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
)

// cannedOK is an in-memory base transport that answers 200 with an empty
// body and allocates nothing itself beyond the response it must return.
type cannedOK struct{}

func (cannedOK) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// BenchmarkTransport measures what the collector adds to the default
// Transport over an in-memory base: none has no observer, noop an observer
// that does nothing (the transport's own cost of reporting events), and
// collector a registered Collector.
func BenchmarkTransport(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	c, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		obs  bw.Observer
	}{
		{"none", nil},
		{"noop", bw.ObserverFunc(func(context.Context, bw.Event) {})},
		{"collector", c},
	}
	run := func(b *testing.B, rt http.RoundTripper) {
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
	for _, tc := range cases {
		tr, err := bw.NewTransport(bw.WithBase(cannedOK{}), bw.WithObserver(tc.obs))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) { run(b, tr) })
	}
}

// BenchmarkObserve measures the collector alone on the events of one
// successful call.
func BenchmarkObserve(b *testing.B) {
	c, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	events := []bw.Event{
		{Kind: bw.EventCallStart, Key: "api.example.com", Method: "GET"},
		{Kind: bw.EventAttempt, Key: "api.example.com", Method: "GET", Attempt: 1, Status: 200, Duration: 3e6},
		{Kind: bw.EventCallEnd, Key: "api.example.com", Method: "GET", Attempts: 1, Status: 200, Duration: 3e6},
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for _, e := range events {
				c.Observe(ctx, e)
			}
		}
	})
}

func BenchmarkObserveSerial(b *testing.B) {
	c, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	events := []bw.Event{
		{Kind: bw.EventCallStart, Key: "api.example.com", Method: "GET"},
		{Kind: bw.EventAttempt, Key: "api.example.com", Method: "GET", Attempt: 1, Status: 200, Duration: 3e6},
		{Kind: bw.EventCallEnd, Key: "api.example.com", Method: "GET", Attempts: 1, Status: 200, Duration: 3e6},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range events {
			c.Observe(ctx, e)
		}
	}
}
