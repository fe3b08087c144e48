package otelbw

import (
	"context"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/labels"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Span event names.
const (
	SpanEventRetry     = "breakwater.retry"
	SpanEventRejection = "breakwater.rejection"
	SpanEventWait      = "breakwater.wait"
	SpanEventHedge     = "breakwater.hedge"
	SpanEventAnswer    = "breakwater.answer"
)

// addSpanEvent records e as an event of the span in ctx when that span is
// recording (the caller's span, or the one otelhttp starts around a
// Transport it wraps). Each event kind that explains a call's time or its
// end maps to one span event here; the package documentation says why the
// other kinds have none.
func addSpanEvent(ctx context.Context, e breakwater.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	name, kvs := spanEvent(e)
	if name != "" {
		span.AddEvent(name, trace.WithAttributes(kvs...))
	}
}

// spanEvent returns the name and attributes of e's span event, or "" for
// an event kind that has none.
func spanEvent(e breakwater.Event) (string, []attribute.KeyValue) {
	key := keyAttr.String(e.Key)
	switch e.Kind {
	case breakwater.EventRetry:
		// Why (the failed attempt's category and status) and how long the
		// call waits before the next attempt.
		kvs := []attribute.KeyValue{key, attemptAttr.Int(e.Attempt), categoryAttr.String(labels.Categories[labels.CategoryIndex(e.Category)]),
			delayAttr.Float64(seconds(e.Delay))}
		if e.Status != 0 {
			kvs = append(kvs, semconv.HTTPResponseStatusCode(e.Status))
		}
		return SpanEventRetry, withEndpoint(kvs, e.Endpoint)
	case breakwater.EventReject:
		kvs := []attribute.KeyValue{key, mechanismAttr.String(labels.Mechanisms[labels.MechanismIndex(e.Mechanism)])}
		if e.Attempt > 0 {
			kvs = append(kvs, attemptAttr.Int(e.Attempt))
		}
		if e.Delay > 0 {
			kvs = append(kvs, retryAfterKey.Float64(e.Delay.Seconds()))
		}
		if e.Err != nil {
			kvs = append(kvs, errorAttr.String(e.Err.Error()))
		}
		return SpanEventRejection, withEndpoint(kvs, e.Endpoint)
	case breakwater.EventWait:
		return SpanEventWait, withEndpoint([]attribute.KeyValue{key, mechanismAttr.String(labels.Mechanisms[labels.MechanismIndex(e.Mechanism)]),
			delayAttr.Float64(seconds(e.Duration))}, e.Endpoint)
	case breakwater.EventHedge:
		// Which attempt the hedge is, and how long after the first attempt
		// of its round it was sent.
		return SpanEventHedge, withEndpoint([]attribute.KeyValue{key, attemptAttr.Int(e.Attempt), delayAttr.Float64(seconds(e.Delay))}, e.Endpoint)
	case breakwater.EventCallEnd:
		if !hedged(&e) {
			return "", nil
		}
		// The attempt whose response a hedged call returned: a hedge, or
		// the attempt the hedges were sent for.
		return SpanEventAnswer, withEndpoint([]attribute.KeyValue{key, attemptAttr.Int(e.Attempt), hedgeAttr.Bool(e.Hedge)}, e.Endpoint)
	}
	return "", nil
}

// hedged reports whether e ends a call that returned a response and sent
// at least one hedge: such a call made Attempts − Retries − 1 hedges.
func hedged(e *breakwater.Event) bool {
	return e.Kind == breakwater.EventCallEnd && e.Attempt > 0 && (e.Hedge || e.Attempts > e.Retries+1)
}

// withEndpoint adds the failover endpoint to kvs, when there is one.
func withEndpoint(kvs []attribute.KeyValue, endpoint string) []attribute.KeyValue {
	if endpoint == "" {
		return kvs
	}
	return append(kvs, endpointAttr.String(endpoint))
}
