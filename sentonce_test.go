package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// of returns the events of kind k that o kept.
func (o *eventLog) of(k bw.EventKind) []bw.Event {
	var out []bw.Event
	for _, e := range o.events() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// A request that a safety rule keeps from a retry its outcome called for
// says so: in an event, in the error (or the call's report, when the call
// returns a response), and Explain says which requests are sent once.
func TestSafetyRulesSayWhy(t *testing.T) {
	post := func(body io.Reader) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, breakwatertest.PipeURL+"/charges", body)
		return req
	}
	put := func(body string) *http.Request {
		req, _ := http.NewRequest(http.MethodPut, breakwatertest.PipeURL+"/doc", onlyReader{strings.NewReader(body)})
		return req
	}
	for _, tc := range []struct {
		name  string
		req   func() *http.Request
		opts  []bw.Option
		step  breakwatertest.Step
		rule  bw.Reason
		words string // what the error says
	}{
		{"a POST answered 503", func() *http.Request { return post(strings.NewReader("x")) }, nil,
			breakwatertest.Step{Status: 503}, bw.ReasonNotIdempotent, ""},
		{"a POST whose connection reset", func() *http.Request { return post(strings.NewReader("x")) }, nil,
			breakwatertest.Step{ResetBeforeHeaders: true}, bw.ReasonNotIdempotent, "not idempotent and the request has no Idempotency-Key"},
		{"a body without GetBody", func() *http.Request { return put("v1") }, nil,
			breakwatertest.Step{Status: 503}, bw.ReasonBodyNotReplayable, ""},
		{"a body without GetBody that resets", func() *http.Request { return put("v1") }, nil,
			breakwatertest.Step{ResetBeforeHeaders: true}, bw.ReasonBodyNotReplayable, "no GetBody, and WithBodyBuffering is off"},
		{"a body over the buffering limit", func() *http.Request { return put("too long") }, []bw.Option{bw.WithBodyBuffering(4)},
			breakwatertest.Step{Status: 503}, bw.ReasonBodyTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, tc.step, breakwatertest.Step{})
				var log eventLog
				tr := newTransport(t, u.Transport(), append(tc.opts, bw.WithObserver(&log))...)
				var rep bw.CallReport
				req := tc.req()
				r := do(tr, req.WithContext(bw.WithCallReport(req.Context(), &rep)))
				if u.Count() != 1 {
					t.Fatalf("%d requests, want 1", u.Count())
				}
				if rep.NotRetried != tc.rule {
					t.Errorf("report: NotRetried %q, want %q", rep.NotRetried, tc.rule)
				}
				skipped := log.of(bw.EventRetrySkipped)
				if len(skipped) != 1 || skipped[0].Reason != tc.rule || skipped[0].Attempt != 1 || skipped[0].Key != upstreamKey {
					t.Errorf("retry_skipped events %+v, want one for attempt 1 with reason %q", skipped, tc.rule)
				}
				if tc.words == "" {
					if r.status != 503 {
						t.Fatalf("got %+v, want the 503", r)
					}
					return
				}
				var e *bw.Error
				if !errors.As(r.err, &e) || e.NotRetried != tc.rule || e.Attempts != 1 || e.Key != upstreamKey {
					t.Fatalf("error %#v, want an *Error with NotRetried %q", r.err, tc.rule)
				}
				if !strings.Contains(e.Error(), "(not retried: ") || !strings.Contains(e.Error(), tc.words) {
					t.Errorf("message %q does not say why", e.Error())
				}
			})
		})
	}
	t.Run("nothing to say when a retry was made or none was due", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503}, breakwatertest.Step{Status: 400})
			var log eventLog
			tr := newTransport(t, u.Transport(), bw.WithObserver(&log))
			var rep bw.CallReport
			req, _ := http.NewRequestWithContext(bw.WithCallReport(context.Background(), &rep), http.MethodPost, breakwatertest.PipeURL+"/charges", strings.NewReader("x"))
			req.Header.Set("Idempotency-Key", "k")
			if r := do(tr, req); r.status != 400 || u.Count() != 2 {
				t.Fatalf("got %+v after %d requests", r, u.Count())
			}
			if rep != (bw.CallReport{}) || len(log.of(bw.EventRetrySkipped)) != 0 {
				t.Fatalf("report %+v, events %+v", rep, log.of(bw.EventRetrySkipped))
			}
		})
	})
}

// A POST through a hedging transport is not hedged, and says so.
func TestHedgeSkippedSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Delay: 50 * time.Millisecond})
		var log eventLog
		tr := newTransport(t, u.Transport(), bw.WithObserver(&log), bw.WithHedging(bw.Hedging{Delay: 10 * time.Millisecond}), bw.WithRetryNonIdempotent(true))
		var rep bw.CallReport
		req, _ := http.NewRequestWithContext(bw.WithCallReport(context.Background(), &rep), http.MethodPost, breakwatertest.PipeURL+"/charges", strings.NewReader("x"))
		if r := do(tr, req); r.status != 200 || u.Count() != 1 {
			t.Fatalf("got %+v after %d requests", r, u.Count())
		}
		if rep.NotHedged != bw.ReasonNotIdempotent || rep.NotRetried != "" {
			t.Errorf("report %+v, want NotHedged %q", rep, bw.ReasonNotIdempotent)
		}
		skipped := log.of(bw.EventHedgeSkipped)
		if len(skipped) != 1 || skipped[0].Reason != bw.ReasonNotIdempotent || skipped[0].Method != http.MethodPost {
			t.Errorf("hedge_skipped events %+v", skipped)
		}
		if got := log.events()[1].Kind; got != bw.EventHedgeSkipped {
			t.Errorf("the second event is %s, want hedge_skipped right after call_start", got)
		}
	})
}

// Explain says which requests are sent once, and why.
func TestExplainSaysWhatIsSentOnce(t *testing.T) {
	for _, tc := range []struct {
		opts       []bw.Option
		want, lack []string
	}{
		{nil, []string{
			"sent once        a POST, PATCH or other method without an Idempotency-Key, unless provably unsent: not idempotent",
			"sent once        a body without GetBody: not replayable (WithBodyBuffering is off)",
		}, nil},
		{[]bw.Option{bw.WithBodyBuffering(1 << 20), bw.WithRetryNonIdempotent(true)}, []string{
			"sent once        a body without GetBody longer than 1048576 bytes: not replayable (the WithBodyBuffering limit)",
		}, []string{"without an Idempotency-Key, unless"}},
		{[]bw.Option{bw.WithMaxAttempts(1)}, nil, []string{"sent once"}},
		{[]bw.Option{bw.WithHedging(bw.Hedging{}), bw.WithRetryNonIdempotent(true)}, []string{
			"not hedged       a POST, PATCH or other method without an Idempotency-Key or RequestPolicy.Idempotent (WithRetryNonIdempotent does not count); a body without GetBody",
		}, nil},
	} {
		tr, err := bw.NewTransport(tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		out := tr.Explain()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("Explain lacks %q:\n%s", w, out)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(out, l) {
				t.Errorf("Explain says %q:\n%s", l, out)
			}
		}
	}
}

// LogObserver logs the retries and hedges a safety rule skipped at Debug,
// and a warning's reason.
func TestLogObserverSaysWhatWasSkipped(t *testing.T) {
	var buf strings.Builder
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	o := bw.LogObserver(l, 0)
	ctx := context.Background()
	o.Observe(ctx, bw.Event{Kind: bw.EventRetrySkipped, Key: "svc", Attempt: 1, Category: bw.ServerError, Status: 503, Reason: bw.ReasonNotIdempotent})
	o.Observe(ctx, bw.Event{Kind: bw.EventHedgeSkipped, Key: "svc", Reason: bw.ReasonBodyNotReplayable})
	o.Observe(ctx, bw.Event{Kind: bw.EventWarning, Mechanism: bw.MechTimeout, Reason: bw.ReasonRetriesDoNotFit, Err: errors.New("no retry fits")})
	want := "level=DEBUG msg=\"breakwater: not retried\" key=svc attempt=1 category=server_error status=503 reason=not_idempotent\n" +
		"level=DEBUG msg=\"breakwater: not hedged\" key=svc reason=body_not_replayable\n" +
		"level=WARN msg=\"breakwater: warning\" mechanism=timeout reason=retries_do_not_fit warning=\"no retry fits\"\n"
	if buf.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", buf.String(), want)
	}
}

// A POST without an Idempotency-Key is sent once: the call's report says
// why its 503 was not retried.
func ExampleWithCallReport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	tr, _ := bw.NewTransport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var report bw.CallReport
	ctx := bw.WithCallReport(context.Background(), &report)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":100}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, report.NotRetried)
	// Output: 503 not_idempotent
}
