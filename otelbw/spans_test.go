package otelbw_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanning starts a client span around each request it sends through next,
// as otelhttp.NewTransport does (the span ends when RoundTrip returns
// rather than with the body, which changes nothing here).
type spanning struct {
	tracer trace.Tracer
	name   string
	next   http.RoundTripper
}

func (s spanning) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := s.tracer.Start(req.Context(), s.name, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	return s.next.RoundTrip(req.WithContext(ctx))
}

// ended returns the ended spans named name.
func ended(sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range sr.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

func num(t *testing.T, kvs []attribute.KeyValue, key string) float64 {
	t.Helper()
	v, ok := attr(kvs, key)
	if !ok {
		t.Fatalf("no %s among %v", key, kvs)
	}
	if v.Type() == attribute.INT64 {
		return float64(v.AsInt64())
	}
	return v.AsFloat64()
}

func str(t *testing.T, kvs []attribute.KeyValue, key string) string {
	t.Helper()
	v, ok := attr(kvs, key)
	if !ok {
		t.Fatalf("no %s among %v", key, kvs)
	}
	return v.AsString()
}

// TestRetryEventsOnTheCallerSpan retries twice (a 503, a hang cut by the
// attempt timeout, then a 200) within the caller's span: the span gets one breakwater.retry
// event per retry, saying which attempt failed, why and how long the call
// waits.
func TestRetryEventsOnTheCallerSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{Hang: true}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithObserver(s.obs), bw.WithBackoff(bw.Constant(300*time.Millisecond)),
			bw.WithAttemptTimeout(time.Second))
		ctx, span := s.tracer.Start(context.Background(), "caller")
		if status, err := call(ctx, tr, "http://upstream.test/"); status != 200 || err != nil {
			t.Fatalf("call: %d %v", status, err)
		}
		span.End()
		spans := ended(s.spans, "caller")
		if len(spans) != 1 {
			t.Fatalf("%d caller spans", len(spans))
		}
		ev := spans[0].Events()
		if len(ev) != 2 {
			t.Fatalf("%d events, want 2 retries: %v", len(ev), ev)
		}
		for i, want := range []struct {
			category string
			status   float64
		}{{"server_error", 503}, {"timeout", 0}} {
			e := ev[i]
			if e.Name != "breakwater.retry" || num(t, e.Attributes, "breakwater.attempt") != float64(i+1) ||
				str(t, e.Attributes, "breakwater.category") != want.category || num(t, e.Attributes, "breakwater.delay") != 0.3 ||
				str(t, e.Attributes, "breakwater.key") != "http://upstream.test" {
				t.Errorf("event %d: %s %v", i, e.Name, e.Attributes)
			}
			if st, ok := attr(e.Attributes, "http.response.status_code"); ok != (want.status != 0) || (ok && float64(st.AsInt64()) != want.status) {
				t.Errorf("event %d: status %v (present %v), want %v", i, st.AsInt64(), ok, want.status)
			}
		}
		if d := ev[1].Time.Sub(ev[0].Time); d < 300*time.Millisecond {
			t.Errorf("the events are %v apart, less than the backoff", d)
		}
	})
}

// TestEventsOnTheSpanAroundTheTransport wraps the breakwater Transport in a
// span-starting transport, as otelhttp.NewTransport(tr) does: the events go
// on that span, a child of the caller's, and not on the caller's.
func TestEventsOnTheSpanAroundTheTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 502}, breakwatertest.Step{})
		tr := newTransport(t, u.Transport(), bw.WithObserver(s.obs))
		client := spanning{tracer: s.tracer, name: "HTTP GET", next: tr}
		ctx, span := s.tracer.Start(context.Background(), "caller")
		if status, err := call(ctx, client, "http://upstream.test/"); status != 200 || err != nil {
			t.Fatalf("call: %d %v", status, err)
		}
		span.End()
		outer, caller := ended(s.spans, "HTTP GET"), ended(s.spans, "caller")
		if len(outer) != 1 || len(caller) != 1 {
			t.Fatalf("%d client spans and %d caller spans", len(outer), len(caller))
		}
		if outer[0].Parent().SpanID() != caller[0].SpanContext().SpanID() {
			t.Error("the client span is not the caller's child")
		}
		if ev := outer[0].Events(); len(ev) != 1 || ev[0].Name != "breakwater.retry" {
			t.Errorf("client span events %v, want one retry", ev)
		}
		if ev := caller[0].Events(); len(ev) != 0 {
			t.Errorf("caller span events %v, want none", ev)
		}
	})
}

// TestBreakerAndPauseEvents checks the events that explain a call's end or
// its wait: a breaker rejection (with how long the breaker stays open and
// the error), a wait for a pause a 429 started, and a rejection by that
// pause for a call whose deadline comes first.
func TestBreakerAndPauseEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"2"}}})
		tr := newTransport(t, u.Transport(), bw.WithObserver(s.obs), bw.WithMaxAttempts(1),
			bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenJitter(0), bw.WithOpenTimeout(5*time.Second, time.Minute))
		run := func(name string, timeout time.Duration) (int, error) {
			ctx, span := s.tracer.Start(context.Background(), name)
			defer span.End()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return call(ctx, tr, "http://upstream.test/")
		}
		if status, err := run("throttled", 10*time.Second); status != 429 || err != nil {
			t.Fatalf("throttled call: %d %v", status, err)
		}
		if _, err := run("impatient", 500*time.Millisecond); !errors.Is(err, bw.ErrPaused) {
			t.Fatalf("impatient call: %v, want ErrPaused", err)
		}
		u.SetFunc(breakwatertest.Sequence(breakwatertest.Step{Status: 500}))
		if status, err := run("waiting", 10*time.Second); status != 500 || err != nil {
			t.Fatalf("waiting call: %d %v", status, err)
		}
		if _, err := run("rejected", 10*time.Second); !errors.Is(err, bw.ErrCircuitOpen) {
			t.Fatalf("rejected call: %v, want ErrCircuitOpen (the 500 opened the breaker)", err)
		}

		only := func(name string) sdktrace.Event {
			t.Helper()
			spans := ended(s.spans, name)
			if len(spans) != 1 || len(spans[0].Events()) != 1 {
				t.Fatalf("%s: %d spans, events %v; want one event", name, len(spans), spans[0].Events())
			}
			return spans[0].Events()[0]
		}
		if ev := ended(s.spans, "throttled")[0].Events(); len(ev) != 0 {
			t.Errorf("throttled: events %v, want none (one attempt, no retry)", ev)
		}
		e := only("impatient")
		if e.Name != "breakwater.rejection" || str(t, e.Attributes, "breakwater.mechanism") != "pause" ||
			num(t, e.Attributes, "breakwater.attempt") != 1 || !strings.Contains(str(t, e.Attributes, "breakwater.error"), "pause") {
			t.Errorf("impatient: %s %v", e.Name, e.Attributes)
		}
		if ra := num(t, e.Attributes, "breakwater.retry_after"); ra <= 0 || ra > 2 {
			t.Errorf("impatient: retry after %v s, want the pause's rest, in (0, 2]", ra)
		}
		e = only("waiting")
		if e.Name != "breakwater.wait" || str(t, e.Attributes, "breakwater.mechanism") != "pause" {
			t.Errorf("waiting: %s %v", e.Name, e.Attributes)
		}
		if d := num(t, e.Attributes, "breakwater.delay"); d < 1 || d > 3 {
			t.Errorf("waiting: waited %v s for a 2 s pause already half over", d)
		}
		e = only("rejected")
		if e.Name != "breakwater.rejection" || str(t, e.Attributes, "breakwater.mechanism") != "breaker" ||
			!strings.Contains(str(t, e.Attributes, "breakwater.error"), "circuit open") {
			t.Errorf("rejected: %s %v", e.Name, e.Attributes)
		}
		if ra := num(t, e.Attributes, "breakwater.retry_after"); math.Abs(ra-5) > 0.01 {
			t.Errorf("rejected: retry after %v s, want the 5 s open duration", ra)
		}
	})
}

// TestInboundRejectionOnTheServerSpan checks that a shed request's
// rejection lands on the span of the request (the server span otelhttp's
// handler starts).
func TestInboundRejectionOnTheServerSpan(t *testing.T) {
	s := newSDK(t)
	bh, err := bw.NewBulkheads(1)
	if err != nil {
		t.Fatal(err)
	}
	shed, err := bw.Shedder(bh, bw.WithObserver(s.obs))
	if err != nil {
		t.Fatal(err)
	}
	release, entered := make(chan struct{}), make(chan struct{})
	h := shed(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/busy", nil))
	}()
	<-entered
	ctx, span := s.tracer.Start(context.Background(), "GET /busy", trace.WithSpanKind(trace.SpanKindServer))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/busy", nil))
	span.End()
	close(release)
	<-done
	ev := ended(s.spans, "GET /busy")[0].Events()
	if len(ev) != 1 || ev[0].Name != "breakwater.rejection" || str(t, ev[0].Attributes, "breakwater.mechanism") != "shed" {
		t.Fatalf("server span events %v, want one shed rejection", ev)
	}
}

// TestNoEventsWithoutARecordingSpan observes retries in a context with no
// span and in one whose span is not sampled: nothing is recorded, and the
// metrics still are.
func TestNoEventsWithoutARecordingSpan(t *testing.T) {
	s := newSDK(t)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "unsampled")
	retry := bw.Event{Kind: bw.EventRetry, Key: "k", Attempt: 1, Category: bw.ServerError, Status: 503, Delay: time.Second}
	s.obs.Observe(ctx, retry)
	s.obs.Observe(context.Background(), retry)
	span.End()
	if n := len(sr.Ended()) + len(s.spans.Ended()); n != 0 {
		t.Fatalf("%d spans recorded", n)
	}
	if v := s.series(t).sum("breakwater.retries"); v != 2 {
		t.Fatalf("retries %v, want 2", v)
	}
}

// TestHedgeEventsOnTheCallerSpan: a hedged call's span gets a
// breakwater.hedge event when the hedge is sent (its attempt number and
// delay) and a breakwater.answer event naming the attempt whose response
// the call returned; a call that sent no hedge gets neither.
func TestHedgeEventsOnTheCallerSpan(t *testing.T) {
	hang := breakwatertest.Step{Hang: true}
	for _, tc := range []struct {
		name  string
		steps []breakwatertest.Step
		want  string
	}{
		{"the hedge answers", []breakwatertest.Step{hang, {}}, "breakwater.hedge attempt=2 delay=0.01; breakwater.answer attempt=2 hedge=true"},
		{"the first attempt answers", []breakwatertest.Step{{Delay: 15 * time.Millisecond}, hang}, "breakwater.hedge attempt=2 delay=0.01; breakwater.answer attempt=1 hedge=false"},
		{"no hedge needed", []breakwatertest.Step{{Delay: 5 * time.Millisecond}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSDK(t)
				u := breakwatertest.NewPipeUpstream(t, tc.steps...)
				tr := newTransport(t, u.Transport(), bw.WithObserver(s.obs),
					bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond, Budget: 1}))
				ctx, span := s.tracer.Start(context.Background(), "caller")
				if status, err := call(ctx, tr, "http://upstream.test/"); status != 200 || err != nil {
					t.Fatalf("call: %d, %v", status, err)
				}
				span.End()
				synctest.Wait()
				var got []string
				for _, e := range ended(s.spans, "caller")[0].Events() {
					line := e.Name
					for _, k := range []string{"breakwater.attempt", "breakwater.delay", "breakwater.hedge"} {
						if v, ok := attr(e.Attributes, k); ok {
							line += " " + strings.TrimPrefix(k, "breakwater.") + "=" + v.String()
						}
					}
					if str(t, e.Attributes, "breakwater.key") != "http://upstream.test" {
						t.Errorf("%s: key %v", e.Name, e.Attributes)
					}
					got = append(got, line)
				}
				if g := strings.Join(got, "; "); g != tc.want {
					t.Errorf("span events %q, want %q", g, tc.want)
				}
			})
		})
	}
}

// TestSpanEventsCarryTheEndpoint: with failover, every span event names
// the endpoint of its attempt; without, none has the attribute.
func TestSpanEventsCarryTheEndpoint(t *testing.T) {
	for _, ep := range []string{"http://a.test", ""} {
		s := newSDK(t)
		ctx, span := s.tracer.Start(context.Background(), "caller")
		for _, e := range []bw.Event{
			{Kind: bw.EventRetry, Key: "svc", Attempt: 1, Category: bw.ServerError, Status: 500, Delay: time.Millisecond, Endpoint: ep},
			{Kind: bw.EventReject, Key: "svc", Attempt: 2, Mechanism: bw.MechBreaker, Err: bw.ErrCircuitOpen, Endpoint: ep},
			{Kind: bw.EventWait, Key: "svc", Mechanism: bw.MechRateLimit, Duration: time.Millisecond, Endpoint: ep},
			{Kind: bw.EventHedge, Key: "svc", Attempt: 3, Delay: time.Millisecond, Hedge: true, Endpoint: ep},
			{Kind: bw.EventCallEnd, Key: "svc", Attempt: 3, Attempts: 3, Retries: 1, Hedge: true, Endpoint: ep},
		} {
			s.obs.Observe(ctx, e)
		}
		span.End()
		events := ended(s.spans, "caller")[0].Events()
		if len(events) != 5 {
			t.Fatalf("%d span events, want 5", len(events))
		}
		for _, e := range events {
			got, ok := attr(e.Attributes, "breakwater.endpoint")
			if ep == "" && ok || ep != "" && got.AsString() != ep {
				t.Errorf("endpoint %q: %s has %v", ep, e.Name, e.Attributes)
			}
		}
	}
}
