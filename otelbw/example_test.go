package otelbw_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A call that succeeds on its second attempt, as the metrics and the
// caller's span show it. The SDK's in-memory reader and span recorder stand
// in for an exporter.
func ExampleNew() {
	var n atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer upstream.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	obs, err := otelbw.New(otelbw.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	tr, err := bw.NewTransport(bw.WithObserver(obs), bw.WithBase(upstream.Client().Transport))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	ctx, span := tp.Tracer("example").Start(context.Background(), "checkout")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	span.End()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	// The instruments that count by outcome category.
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				if c, ok := p.Attributes.Value("breakwater.category"); ok {
					lines = append(lines, fmt.Sprintf("%s: count %d [%s]", m.Name, p.Count, c.String()))
				}
			}
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				if c, ok := p.Attributes.Value("breakwater.category"); ok {
					lines = append(lines, fmt.Sprintf("%s: %d [%s]", m.Name, p.Value, c.String()))
				}
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	for _, e := range spans.Ended()[0].Events() {
		fmt.Print("span event ", e.Name, ":")
		for _, kv := range e.Attributes {
			if kv.Key != "breakwater.delay" && kv.Key != "breakwater.key" {
				fmt.Print(" ", kv.Key, "=", kv.Value.String())
			}
		}
		fmt.Println()
	}
	// Output:
	// breakwater.attempt.duration: count 1 [server_error]
	// breakwater.attempt.duration: count 1 [success]
	// breakwater.call.duration: count 1 [success]
	// breakwater.retries: 1 [server_error]
	// span event breakwater.retry: breakwater.attempt=1 breakwater.category=server_error http.response.status_code=503
}
