package otelbw

import (
	"net/http"

	"github.com/breakwater-go/breakwater"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ResendCount returns an [http.RoundTripper] that marks each retry of a
// breakwater call on the span in its request's context, then sends the
// request through next (nil is [http.DefaultTransport]). Put it under
// otelhttp's transport, itself the base of a breakwater Transport, and every
// attempt gets its own client span, the retries carrying
// http.request.resend_count (the attempt number less one, read with
// [breakwater.AttemptFromContext]) as the HTTP semantic conventions ask:
//
//	tr, err := breakwater.NewTransport(breakwater.WithBase(
//		otelhttp.NewTransport(otelbw.ResendCount(nil))))
//
// A first attempt, a request no breakwater Transport sent and a span that is
// not recording are left as they are. The request is passed on unchanged.
// The returned RoundTripper is safe for concurrent use, and forwards
// CloseIdleConnections to next.
func ResendCount(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return resendCount{next: next}
}

type resendCount struct{ next http.RoundTripper }

func (rc resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if n := breakwater.AttemptFromContext(ctx); n > 1 {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(semconv.HTTPRequestResendCount(n - 1))
		}
	}
	return rc.next.RoundTrip(req)
}

// CloseIdleConnections closes next's idle connections, if it has a
// CloseIdleConnections method.
func (rc resendCount) CloseIdleConnections() {
	if c, ok := rc.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
