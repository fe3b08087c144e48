package otelbw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/otelbw"
	"go.opentelemetry.io/otel/trace"
)

// TestResendCountOnAttemptSpans puts a span-starting transport (as
// otelhttp.NewTransport) over ResendCount under a breakwater Transport: a
// call that succeeds on its third attempt has three client spans, children
// of the caller's, the second and third carrying http.request.resend_count
// 1 and 2, the first none, as the HTTP semantic conventions ask.
func TestResendCountOnAttemptSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{Status: 502}, breakwatertest.Step{})
		base := spanning{tracer: s.tracer, name: "attempt", next: otelbw.ResendCount(u.Transport())}
		tr := newTransport(t, base, bw.WithObserver(s.obs))
		ctx, span := s.tracer.Start(context.Background(), "caller")
		if status, err := call(ctx, tr, "http://upstream.test/"); status != 200 || err != nil {
			t.Fatalf("call: %d %v", status, err)
		}
		span.End()
		caller := ended(s.spans, "caller")[0]
		attempts := ended(s.spans, "attempt")
		if len(attempts) != 3 {
			t.Fatalf("%d attempt spans, want 3", len(attempts))
		}
		for i, a := range attempts {
			if a.Parent().SpanID() != caller.SpanContext().SpanID() || a.SpanKind() != trace.SpanKindClient {
				t.Errorf("attempt %d: parent %v kind %v, want a client span under the caller's", i+1, a.Parent().SpanID(), a.SpanKind())
			}
			v, ok := attr(a.Attributes(), "http.request.resend_count")
			switch {
			case i == 0 && ok:
				t.Errorf("the first attempt has http.request.resend_count %v", v.AsInt64())
			case i > 0 && (!ok || v.AsInt64() != int64(i)):
				t.Errorf("attempt %d: http.request.resend_count %v (present %v), want %d", i+1, v.AsInt64(), ok, i)
			}
		}
		if ev := caller.Events(); len(ev) != 2 || ev[0].Name != "breakwater.retry" || ev[1].Name != "breakwater.retry" {
			t.Errorf("caller span events %v, want two retries", ev)
		}
	})
}

type idleCloser struct {
	http.RoundTripper
	closed int
}

func (c *idleCloser) CloseIdleConnections() { c.closed++ }

// TestResendCountLeavesOtherRequestsAlone sends a request no breakwater
// Transport made, inside a recording span, through ResendCount over the
// default transport (nil): it goes through unmarked. CloseIdleConnections
// reaches the transport beneath.
func TestResendCountLeavesOtherRequestsAlone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	s := newSDK(t)
	rt := spanning{tracer: s.tracer, name: "plain", next: otelbw.ResendCount(nil)}
	if status, err := call(context.Background(), rt, srv.URL); status != 200 || err != nil {
		t.Fatalf("call: %d %v", status, err)
	}
	if kvs := ended(s.spans, "plain")[0].Attributes(); len(kvs) != 0 {
		t.Fatalf("attributes %v on a plain request's span", kvs)
	}

	ic := &idleCloser{RoundTripper: cannedOK{}}
	otelbw.ResendCount(ic).(interface{ CloseIdleConnections() }).CloseIdleConnections()
	tr := newTransport(t, otelbw.ResendCount(ic))
	(&http.Client{Transport: tr}).CloseIdleConnections()
	if ic.closed != 2 {
		t.Fatalf("CloseIdleConnections reached the transport beneath %d times, want 2", ic.closed)
	}
}
