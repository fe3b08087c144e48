package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestClassifySafely(t *testing.T) {
	resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"5"}}}
	def := Classify(resp, nil)
	tests := []struct {
		name string
		c    Classifier
		want Outcome
	}{
		{"nil", nil, def},
		{"panics", func(*http.Response, error) Outcome { panic("boom") }, def},
		{"panics_nil", func(*http.Response, error) Outcome { panic(nil) }, def},
		{"panics_error", func(r *http.Response, _ error) Outcome { _ = r.Header["X-Missing"][3]; return Outcome{} }, def},
		{"invalid_category", func(*http.Response, error) Outcome { return Outcome{Category: numCategories} }, def},
		{"custom", func(*http.Response, error) Outcome { return Outcome{Category: Slow, Status: 1} }, Outcome{Category: Slow, Status: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifySafely(tt.c, resp, nil); got != tt.want {
				t.Errorf("classifySafely = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMarkTimeout(t *testing.T) {
	live := context.Background()
	canceled, cancel := context.WithCancel(live)
	cancel()
	ours, cancelOurs := context.WithCancelCause(live)
	cancelOurs(ErrAttemptTimeout)
	plainDeadline, cancelPlain := context.WithDeadline(live, time.Unix(1, 0))
	defer cancelPlain()
	ourDeadline, cancelDeadline := context.WithDeadlineCause(live, time.Unix(1, 0), ErrCallTimeout)
	defer cancelDeadline()
	other := errors.New("other")

	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want Category
		same bool // the error comes back unchanged
	}{
		{"nil_error", ourDeadline, nil, Success, true},
		{"live_context", live, context.DeadlineExceeded, Canceled, true},
		{"caller_canceled", canceled, context.Canceled, Canceled, true},
		{"caller_deadline", plainDeadline, context.DeadlineExceeded, Canceled, true},
		{"our_deadline", ourDeadline, context.DeadlineExceeded, Timeout, false},
		{"our_deadline_wrapped", ourDeadline, fmt.Errorf("get: %w", context.DeadlineExceeded), Timeout, false},
		{"our_cancel", ours, context.Canceled, Timeout, false},
		{"cause_already_there", ourDeadline, ErrCallTimeout, Timeout, false},
		{"any_error_after_our_deadline", ourDeadline, other, Timeout, false},
		{"not_a_context_error", live, other, NetworkError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := markTimeout(tt.ctx, tt.err)
			if tt.same && got != tt.err {
				t.Errorf("markTimeout = %v, want the error unchanged", got)
			}
			if tt.err == nil {
				return
			}
			if o := Classify(nil, got); o.Category != tt.want {
				t.Errorf("Classify(markTimeout(%v)) = %v, want %v", tt.err, o.Category, tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("%v no longer matches %v", got, tt.err)
			}
		})
	}
	t.Run("message", func(t *testing.T) {
		got := markTimeout(ourDeadline, context.DeadlineExceeded).Error()
		if want := "breakwater: call timeout: context deadline exceeded"; got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	})
}

// TestAttemptTimeoutCause pins what net/http returns when a context made
// with context.WithTimeoutCause(ctx, d, ErrAttemptTimeout) ends during a
// round trip, and that classification after markTimeout is Timeout
// either way. At Go 1.26 the HTTP/1 transport returns context.Cause(ctx),
// while the HTTP/2 transport returns ctx.Err(), context.DeadlineExceeded,
// which on its own would read as the caller's deadline.
func TestAttemptTimeoutCause(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "http1"
		if h2 {
			name = "http2"
		}
		t.Run(name, func(t *testing.T) {
			protos := make(chan int, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case protos <- r.ProtoMajor:
				default:
				}
				<-r.Context().Done()
				// Abort without a response: over TLS the client sends close_notify
				// before it closes the socket, and a response written in between
				// would win the race against the transport's cancellation.
				panic(http.ErrAbortHandler)
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			client := srv.Client()
			defer client.CloseIdleConnections()

			ctx, cancel := context.WithTimeoutCause(t.Context(), 10*time.Millisecond, ErrAttemptTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Transport.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got %s, want an error", resp.Status)
			}
			select {
			case major := <-protos:
				if want := map[bool]int{false: 1, true: 2}[h2]; major != want {
					t.Fatalf("request arrived over HTTP/%d, want HTTP/%d", major, want)
				}
			default: // the deadline came before the request reached the handler
			}
			raw := Classify(nil, err).Category
			t.Logf("%s: RoundTrip error %q (%T): raw classification %v", name, err, err, raw)
			if !h2 && raw != Timeout {
				t.Errorf("HTTP/1 no longer returns context.Cause: raw classification %v, want %v", raw, Timeout)
			}
			if got := Classify(nil, markTimeout(ctx, err)).Category; got != Timeout {
				t.Errorf("Classify(markTimeout(%v)) = %v, want %v", err, got, Timeout)
			}
		})
	}
}

// TestClassifyMaxHint: the classification of a Transport with another
// longest hint differs from Classify's in RetryAfterTooLong alone.
func TestClassifyMaxHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      time.Duration
		header   http.Header
		want     time.Duration
		wantLong bool
	}{
		{"too long is still throttled", 5 * time.Second, http.Header{"Retry-After": {"10"}}, 10 * time.Second, true},
		{"at the max", 2 * time.Minute, http.Header{"Retry-After": {"120"}}, 120 * time.Second, false},
		{"over the max", 2 * time.Minute, http.Header{"Retry-After": {"121"}}, 121 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 503, Header: tc.header}
			o := classify(resp, nil, tc.max)
			if o.Category != Throttled || o.Status != 503 || !o.HasRetryAfter || o.RetryAfter != tc.want || o.RetryAfterTooLong != tc.wantLong {
				t.Errorf("classify = %+v, want %s, too long %v", o, tc.want, tc.wantLong)
			}
			if d := Classify(resp, nil); d.Category != o.Category || d.RetryAfter != o.RetryAfter {
				t.Errorf("Classify = %+v: only RetryAfterTooLong may differ from %+v", d, o)
			}
		})
	}
	tr, err := NewTransport(WithMaxRetryAfter(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if o := tr.cfg.classifier(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"10"}}}, nil); !o.RetryAfterTooLong {
		t.Errorf("the classifier of a Transport with WithMaxRetryAfter(5s): %+v", o)
	}
}

// Findings are bounded whatever the number of keys.
func TestInsightsBounded(t *testing.T) {
	in := newInsights()
	for k := range 300 {
		key := fmt.Sprintf("host-%d", k)
		for range 5 {
			in.Observe(t.Context(), Event{Kind: EventReject, Key: key, Mechanism: MechRetryBudget})
		}
	}
	if n := len(in.findings(nil)); n != 100 {
		t.Fatalf("%d findings, want 100", n)
	}
}
