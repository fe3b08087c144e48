package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunPrintsSpansAndMetrics runs the program: the stdout exporters print
// the attempt spans with their resend counts, the calls' retry events and
// breakwater's metrics.
func TestRunPrintsSpansAndMetrics(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-calls", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"Name": "GET attempt 1"`, `"Name": "GET attempt 3"`, `"Key": "http.request.resend_count"`,
		`"Name": "breakwater.retry"`, `"Name": "breakwater.retries"`, `"Name": "breakwater.call.duration"`,
		`"Name": "http.client.request.duration"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %s", want)
		}
	}
}

// TestOtelhttpAroundAndUnderBreakwater checks the wiring of newClient with
// the real otelhttp: each call has one client span with a
// breakwater.retry event per retry; each attempt has its own client span,
// the call's child, carrying http.request.resend_count from the second on,
// and is the parent the upstream sees in traceparent; the HTTP client
// metrics count requests sent, not calls.
func TestOtelhttpAroundAndUnderBreakwater(t *testing.T) {
	var mu sync.Mutex
	var parents []string // the parent span id each request carried
	var n int
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if tp := strings.Split(r.Header.Get("Traceparent"), "-"); len(tp) == 4 {
			parents = append(parents, tp[2])
		}
		if n++; n%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer upstream.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	client, err := newClient(tp, mp)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}

	var call sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, sp := range sr.Ended() {
		switch {
		case sp.Name() == "HTTP GET":
			call = sp
		case strings.HasPrefix(sp.Name(), "GET attempt "):
			attempts = append(attempts, sp)
		}
	}
	if call == nil || len(attempts) != 3 {
		t.Fatalf("spans: call %v, %d attempts; want one call and 3 attempts", call != nil, len(attempts))
	}
	if call.SpanKind() != trace.SpanKindClient {
		t.Errorf("the call's span is %v", call.SpanKind())
	}
	if ev := call.Events(); len(ev) != 2 || ev[0].Name != "breakwater.retry" || ev[1].Name != "breakwater.retry" {
		t.Errorf("the call's span has events %v, want two breakwater.retry", ev)
	}
	for i, a := range attempts {
		if want := "GET attempt " + string(rune('1'+i)); a.Name() != want {
			t.Errorf("attempt span %d is named %q, want %q", i, a.Name(), want)
		}
		if a.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("%s is not the call's child", a.Name())
		}
		rc, ok := value(a.Attributes(), "http.request.resend_count")
		if (i == 0) == ok || (ok && rc.AsInt64() != int64(i)) {
			t.Errorf("%s: http.request.resend_count %v (present %v), want %d", a.Name(), rc.AsInt64(), ok, i)
		}
		if mu.Lock(); i >= len(parents) || parents[i] != a.SpanContext().SpanID().String() {
			t.Errorf("request %d carried parent %v, want its attempt span %s", i+1, parents, a.SpanContext().SpanID())
		}
		mu.Unlock()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					counts[m.Name] += p.Count
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					counts[m.Name] += uint64(p.Value)
				}
			}
		}
	}
	for name, want := range map[string]uint64{
		"http.client.request.duration": 3, "breakwater.attempt.duration": 3, "breakwater.call.duration": 1, "breakwater.retries": 2,
	} {
		if counts[name] != want {
			t.Errorf("%s counts %d, want %d", name, counts[name], want)
		}
	}
}

func value(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestHedgeEventsOnOtelhttpSpan: with otelhttp around a hedging breakwater
// Transport, the call's span gets the hedge when it is sent and, the body
// read to its end, the attempt that answered.
func TestHedgeEventsOnOtelhttpSpan(t *testing.T) {
	var n atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // the first attempt hangs until the hedge wins
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	obs, err := otelbw.New(otelbw.WithMeterProvider(noop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := breakwater.NewTransport(breakwater.WithObserver(obs), breakwater.WithBase(base),
		breakwater.WithHedging(breakwater.Hedging{Delay: 20 * time.Millisecond, Budget: 1}))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: otelhttp.NewTransport(tr, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(noop.NewMeterProvider()))}
	resp, err := client.Get(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the call's", len(spans))
	}
	var got []string
	for _, e := range spans[0].Events() {
		a, _ := value(e.Attributes, "breakwater.attempt")
		got = append(got, fmt.Sprintf("%s %d", e.Name, a.AsInt64()))
	}
	if g := strings.Join(got, ", "); g != "breakwater.hedge 2, breakwater.answer 2" {
		t.Errorf("span events: %s; want the hedge sent and the answer it gave", g)
	}
}
