package prom_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

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

// oneCall is the events of one successful call.
var oneCall = []bw.Event{
	{Kind: bw.EventCallStart, Key: "api.example.com", Method: "GET"},
	{Kind: bw.EventAttempt, Key: "api.example.com", Method: "GET", Attempt: 1, Status: 200, Duration: 3e6},
	{Kind: bw.EventCallEnd, Key: "api.example.com", Method: "GET", Attempts: 1, Status: 200, Duration: 3e6},
}

// BenchmarkObserve measures the collector alone on the events of one
// successful call.
func BenchmarkObserve(b *testing.B) {
	c, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for _, e := range oneCall {
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
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range oneCall {
			c.Observe(ctx, e)
		}
	}
}

// BenchmarkCollectorOverhead measures what the collector adds per call on
// a busy or shared machine: it alternates batches of calls through three
// transports over the in-memory base (no observer, a no-op observer, the
// collector), timing each batch, so that all three see the same load. It
// reports the time per call of each and the differences: noop-none is the
// transport's own cost of reporting events, collector-none the whole cost
// of attaching the collector. BenchmarkTransport reports the allocations.
func BenchmarkCollectorOverhead(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	c, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"none", "noop", "collector"}
	var trs []http.RoundTripper
	for _, obs := range []bw.Observer{nil, bw.ObserverFunc(func(context.Context, bw.Event) {}), c} {
		tr, err := bw.NewTransport(bw.WithBase(cannedOK{}), bw.WithObserver(obs))
		if err != nil {
			b.Fatal(err)
		}
		trs = append(trs, tr)
	}
	const batch = 32
	var spent [3]time.Duration
	calls, round := 0, 0
	for b.Loop() {
		for k := range trs {
			k = (k + round) % len(trs) // rotate the order between rounds
			start := time.Now()
			for range batch {
				resp, err := trs[k].RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			spent[k] += time.Since(start)
		}
		calls += batch
		round++
	}
	perCall := func(k int) float64 { return float64(spent[k].Nanoseconds()) / float64(calls) }
	for k, name := range names {
		b.ReportMetric(perCall(k), "ns/call-"+name)
	}
	b.ReportMetric(perCall(1)-perCall(0), "ns/call-noop-none")
	b.ReportMetric(perCall(2)-perCall(0), "ns/call-collector-none")
	b.ReportMetric(perCall(2)-perCall(1), "ns/call-collector-noop")
}
