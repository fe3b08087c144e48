// Command example wires breakwater into OpenTelemetry: otelhttp makes a
// span for each call and, under breakwater, one for each attempt; otelbw
// adds breakwater's metrics and the retry events of each call; the stdout
// exporters print both.
//
//	go run . -calls 2
//
// A local upstream answers 503 twice, then 200, so that every call retries
// twice. The output is one JSON document per span, then the metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// newClient returns an http.Client whose calls go through breakwater, with
// spans and metrics on tp and mp:
//
//   - the outer otelhttp transport makes the call's span, on which otelbw
//     records the retries, rejections and waits; its HTTP metrics are off
//     (a no-op meter provider), since the inner one measures each request
//     sent;
//   - breakwater's Transport retries, with otelbw as its observer;
//   - the inner otelhttp transport, breakwater's base, makes one client
//     span per attempt, named with its number, propagates it to the
//     upstream and records the HTTP client metrics of each request sent;
//   - otelbw.ResendCount beneath it sets http.request.resend_count on the
//     attempts after the first.
func newClient(tp trace.TracerProvider, mp metric.MeterProvider) (*http.Client, error) {
	obs, err := otelbw.New(otelbw.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	attempts := otelhttp.NewTransport(otelbw.ResendCount(http.DefaultTransport),
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(mp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return fmt.Sprintf("%s attempt %d", r.Method, breakwater.AttemptFromContext(r.Context()))
		}))
	tr, err := breakwater.NewTransport(breakwater.WithObserver(obs), breakwater.WithBase(attempts))
	if err != nil {
		return nil, err
	}
	calls := otelhttp.NewTransport(tr,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()))
	return &http.Client{Transport: calls}, nil
}

// flaky is an upstream that answers 503 to two requests out of three.
func flaky() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	calls := fs.Int("calls", 2, "calls to make")
	if err := fs.Parse(args); err != nil {
		return err
	}

	spans, err := stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(stdout), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	// Shutting the meter provider down exports the metrics once.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)))

	upstream := flaky()
	defer upstream.Close()
	client, err := newClient(tp, mp)
	if err != nil {
		return err
	}
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	for i := range *calls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("call %d: %w", i+1, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close() // ends the call's span and its last attempt's
	}

	return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
}
