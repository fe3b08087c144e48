package otelbw_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// benchObservers returns the observers the benchmarks compare: none, one
// that does nothing (the transport's own cost of reporting events), the
// Observer on the no-op meter provider and on the SDK's (with an in-memory
// reader), and the prom package's collector.
func benchObservers(b *testing.B) (names []string, obs []bw.Observer) {
	b.Helper()
	onNoop, err := otelbw.New(otelbw.WithMeterProvider(noop.NewMeterProvider()))
	if err != nil {
		b.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	onSDK, err := otelbw.New(otelbw.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	pc, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	return []string{"none", "noop", "otel-noop", "otel-sdk", "prom"},
		[]bw.Observer{nil, bw.ObserverFunc(func(context.Context, bw.Event) {}), onNoop, onSDK, pc}
}

// BenchmarkTransport measures the default Transport over an in-memory base
// with each of benchObservers' observers, serially and in parallel.
func BenchmarkTransport(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	names, obs := benchObservers(b)
	for i, o := range obs {
		tr, err := bw.NewTransport(bw.WithBase(cannedOK{}), bw.WithObserver(o))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(names[i], func(b *testing.B) {
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					resp, err := tr.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, _ := tr.RoundTrip(req)
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			})
		})
	}
}

// oneCall is the events of one successful call.
var oneCall = []bw.Event{
	{Kind: bw.EventCallStart, Key: "api.example.com", Method: "GET"},
	{Kind: bw.EventAttempt, Key: "api.example.com", Method: "GET", Attempt: 1, Status: 200, Duration: 3e6},
	{Kind: bw.EventCallEnd, Key: "api.example.com", Method: "GET", Attempts: 1, Status: 200, Duration: 3e6},
}

// BenchmarkObserve measures the Observer alone on the events of one
// successful call, on the no-op meter provider and on the SDK's.
func BenchmarkObserve(b *testing.B) {
	names, obs := benchObservers(b)
	ctx := context.Background()
	for i, o := range obs {
		if o == nil {
			continue
		}
		b.Run(names[i], func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					for _, e := range oneCall {
						o.Observe(ctx, e)
					}
				}
			})
		})
	}
}

// BenchmarkObserverOverhead measures what each observer adds per call on a
// busy or shared machine, as the prom package's BenchmarkCollectorOverhead
// does: it alternates batches of calls through one transport per observer
// over the in-memory base, timing each batch, so that all see the same
// load, and reports the time per call of each and its difference with no
// observer (X-none) and with the do-nothing one (X-noop). On Linux it also
// reports the same from the CPU time of the benchmark's thread
// (cpu-ns/call-…), which other processes taking the CPU do not inflate.
// BenchmarkTransport reports the allocations.
func BenchmarkObserverOverhead(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	names, obs := benchObservers(b)
	var trs []http.RoundTripper
	for _, o := range obs {
		tr, err := bw.NewTransport(bw.WithBase(cannedOK{}), bw.WithObserver(o))
		if err != nil {
			b.Fatal(err)
		}
		trs = append(trs, tr)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, hasCPU := threadCPU()
	const batch = 32
	spent := make([]time.Duration, len(trs))
	cpu := make([]time.Duration, len(trs))
	calls, round := 0, 0
	for b.Loop() {
		for k := range trs {
			k = (k + round) % len(trs) // rotate the order between rounds
			start := time.Now()
			cpuStart, _ := threadCPU()
			for range batch {
				resp, err := trs[k].RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			cpuEnd, _ := threadCPU()
			spent[k] += time.Since(start)
			cpu[k] += cpuEnd - cpuStart
		}
		calls += batch
		round++
	}
	report := func(unit string, d []time.Duration) {
		perCall := func(k int) float64 { return float64(d[k].Nanoseconds()) / float64(calls) }
		for k, name := range names {
			b.ReportMetric(perCall(k), unit+"/call-"+name)
			if k > 0 {
				b.ReportMetric(perCall(k)-perCall(0), unit+"/call-"+name+"-none")
			}
			if k > 1 {
				b.ReportMetric(perCall(k)-perCall(1), unit+"/call-"+name+"-noop")
			}
		}
	}
	report("ns", spent)
	if hasCPU {
		report("cpu-ns", cpu)
	}
}

// TestObservingAllocatesNothing checks the allocation claims of the package
// documentation: once a key is known, observing a call (and a retry, a
// rejection and a wait, outside any recording span) allocates nothing on
// the no-op meter provider or the SDK's, and a transport with the Observer
// on the no-op provider allocates no more per call than one without.
func TestObservingAllocatesNothing(t *testing.T) {
	events := append([]bw.Event{
		{Kind: bw.EventRetry, Key: "api.example.com", Attempt: 1, Category: bw.ServerError, Status: 503, Delay: time.Second},
		{Kind: bw.EventReject, Key: "api.example.com", Mechanism: bw.MechBreaker, Err: bw.ErrCircuitOpen},
		{Kind: bw.EventWait, Key: "api.example.com", Mechanism: bw.MechRateLimit, Duration: time.Millisecond},
		{Kind: bw.EventRequest, Route: "/items/{id}", Method: "GET", Status: 200, Duration: time.Millisecond},
		{Kind: bw.EventHedge, Key: "api.example.com", Attempt: 2, Delay: time.Millisecond, Hedge: true, Endpoint: "https://b.example.com"},
		{Kind: bw.EventAttempt, Key: "api.example.com", Attempt: 2, Category: bw.Success, Status: 200, Hedge: true, Endpoint: "https://b.example.com"},
		{Kind: bw.EventCallEnd, Key: "api.example.com", Attempt: 2, Attempts: 2, Category: bw.Success, Status: 200, Hedge: true, Endpoint: "https://b.example.com"},
		{Kind: bw.EventHealth, Key: "api.example.com", Endpoint: "https://a.example.com", Health: bw.HealthEjected, Reason: bw.ReasonOutlier},
		{Kind: bw.EventHealth, Key: "api.example.com", Endpoint: "https://a.example.com", Health: bw.HealthHealthy, Reason: bw.ReasonProbesSucceeded},
	}, oneCall...)
	onNoop, err := otelbw.New(otelbw.WithMeterProvider(noop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	onSDK, err := otelbw.New(otelbw.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, o := range map[string]*otelbw.Observer{"no-op provider": onNoop, "SDK": onSDK} {
		if n := testing.AllocsPerRun(100, func() {
			for _, e := range events {
				o.Observe(ctx, e)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per round of events, want 0", name, n)
		}
	}

	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
	perCall := func(o bw.Observer) float64 {
		tr, err := bw.NewTransport(bw.WithBase(cannedOK{}), bw.WithObserver(o))
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(100, func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	if without, with := perCall(nil), perCall(onNoop); with != without {
		t.Errorf("a call allocates %v times with the Observer on the no-op provider, %v without", with, without)
	}
}
