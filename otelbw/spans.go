package otelbw

import (
	"context"

	"github.com/breakwater-go/breakwater"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Span event names.
const (
	SpanEventRetry     = "breakwater.retry"
	SpanEventRejection = "breakwater.rejection"
	SpanEventWait      = "breakwater.wait"
)

// addSpanEvent records e as an event of the span in ctx when that span is
// recording (the caller's span, or the one otelhttp starts around a
// Transport it wraps). Each event kind that explains a call's time or its
// end maps to one span event here; a new kind (a hedge, say) is one more
// case.
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
		kvs := []attribute.KeyValue{key, attemptAttr.Int(e.Attempt), categoryAttr.String(categoryNames[categoryIndex(e.Category)]),
			delayAttr.Float64(seconds(e.Delay))}
		if e.Status != 0 {
			kvs = append(kvs, semconv.HTTPResponseStatusCode(e.Status))
		}
		return SpanEventRetry, kvs
	case breakwater.EventReject:
		kvs := []attribute.KeyValue{key, mechanismAttr.String(mechanismNames[mechanismIndex(e.Mechanism)])}
		if e.Attempt > 0 {
			kvs = append(kvs, attemptAttr.Int(e.Attempt))
		}
		if e.Delay > 0 {
			kvs = append(kvs, retryAfterKey.Float64(e.Delay.Seconds()))
		}
		if e.Err != nil {
			kvs = append(kvs, errorAttr.String(e.Err.Error()))
		}
		return SpanEventRejection, kvs
	case breakwater.EventWait:
		return SpanEventWait, []attribute.KeyValue{key, mechanismAttr.String(mechanismNames[mechanismIndex(e.Mechanism)]),
			delayAttr.Float64(seconds(e.Duration))}
	}
	return "", nil
}
