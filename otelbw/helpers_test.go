package otelbw_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// sdk is an Observer on the SDK's in-memory reader, with a tracer whose
// ended spans a recorder keeps.
type sdk struct {
	obs    *otelbw.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tracer trace.Tracer
}

func newSDK(t testing.TB, opts ...otelbw.Option) *sdk {
	t.Helper()
	s := &sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s.tracer = tp.Tracer("test")
	obs, err := otelbw.New(append([]otelbw.Option{otelbw.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.obs = obs
	return s
}

// collect reads every metric of the observer's scope.
func (s *sdk) collect(t testing.TB) []metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == otelbw.ScopeName {
			out = append(out, sm.Metrics...)
		}
	}
	return out
}

// series is a collection as flat samples: `name{a="x",b="y"}` for sums and
// gauges, with _count, _sum and _bucket{…,bucket="i"} samples for
// histograms (bucket i counts the values in (bound[i-1], bound[i]]).
type series map[string]float64

func (s *sdk) series(t testing.TB) series {
	t.Helper()
	out := series{}
	for _, m := range s.collect(t) {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				out[m.Name+attrString(p.Attributes)] += float64(p.Value)
			}
		case metricdata.Sum[float64]:
			for _, p := range d.DataPoints {
				out[m.Name+attrString(p.Attributes)] += p.Value
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				out[m.Name+attrString(p.Attributes)] = float64(p.Value)
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				out[m.Name+attrString(p.Attributes)] = p.Value
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				out[m.Name+"_count"+attrString(p.Attributes)] = float64(p.Count)
				out[m.Name+"_sum"+attrString(p.Attributes)] = p.Sum
				for i, n := range p.BucketCounts {
					out[m.Name+"_bucket"+attrString(p.Attributes, attribute.Int("bucket", i))] = float64(n)
				}
			}
		default:
			t.Fatalf("%s: unexpected aggregation %T", m.Name, m.Data)
		}
	}
	return out
}

func attrString(set attribute.Set, extra ...attribute.KeyValue) string {
	kvs := append(set.ToSlice(), extra...)
	if len(kvs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, fmt.Sprintf("%s=%q", kv.Key, kv.Value.String()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// sum adds the samples of name whose attributes include every key="value"
// pair in match.
func (s series) sum(name string, match ...string) float64 {
	var total float64
	for id, v := range s {
		n, attrs, _ := strings.Cut(id, "{")
		if n != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			ok = ok && strings.Contains(","+attrs, ","+match[i]+"="+`"`+match[i+1]+`"`)
		}
		if ok {
			total += v
		}
	}
	return total
}

// values returns the distinct values of attribute key across the samples
// of name.
func (s series) values(name, key string) map[string]bool {
	out := map[string]bool{}
	for id := range s {
		n, attrs, _ := strings.Cut(id, "{")
		if n != name {
			continue
		}
		for _, p := range strings.Split(strings.TrimSuffix(attrs, "}"), ",") {
			if v, ok := strings.CutPrefix(p, key+`="`); ok {
				out[strings.TrimSuffix(v, `"`)] = true
			}
		}
	}
	return out
}

// spanEvents returns the events of every ended span, in order.
func (s *sdk) spanEvents() []sdktrace.Event {
	var out []sdktrace.Event
	for _, sp := range s.spans.Ended() {
		out = append(out, sp.Events()...)
	}
	return out
}

// attr returns the value of key among kvs.
func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func newTransport(t testing.TB, base http.RoundTripper, opts ...bw.Option) *bw.Transport {
	t.Helper()
	tr, err := bw.NewTransport(append([]bw.Option{bw.WithBase(base)}, opts...)...)
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	return tr
}

// call sends a GET for url through rt, drains and closes the body, and
// returns the status (0 on error) and the error.
func call(ctx context.Context, rt http.RoundTripper, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// cannedOK is an in-memory base transport that answers 200 with an empty
// body.
type cannedOK struct{}

func (cannedOK) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}
