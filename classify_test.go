package breakwater_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-go/breakwater"
)

// now is the local clock of the Retry-After tests.
var now = time.Date(2025, time.January, 2, 3, 4, 5, 0, time.UTC)

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

func response(status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody}
}

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status int
		want   breakwater.Category
		// withHint is the category when the response carries Retry-After: 5.
		withHint breakwater.Category
		// readsHint reports whether the status reads Retry-After at all.
		readsHint bool
	}{
		{100, breakwater.Success, breakwater.Success, false},
		{101, breakwater.Success, breakwater.Success, false},
		{200, breakwater.Success, breakwater.Success, false},
		{204, breakwater.Success, breakwater.Success, false},
		{301, breakwater.Success, breakwater.Success, false},
		{304, breakwater.Success, breakwater.Success, false},
		{399, breakwater.Success, breakwater.Success, false},
		{400, breakwater.ClientError, breakwater.ClientError, false},
		{401, breakwater.AuthError, breakwater.AuthError, false},
		{403, breakwater.AuthError, breakwater.AuthError, false},
		{404, breakwater.ClientError, breakwater.ClientError, false},
		{407, breakwater.AuthError, breakwater.AuthError, false},
		{408, breakwater.Timeout, breakwater.Timeout, true},
		{409, breakwater.ClientError, breakwater.ClientError, false},
		{422, breakwater.ClientError, breakwater.ClientError, false},
		{429, breakwater.Throttled, breakwater.Throttled, true},
		{499, breakwater.ClientError, breakwater.ClientError, false},
		{500, breakwater.ServerError, breakwater.ServerError, true},
		{501, breakwater.Unsupported, breakwater.Unsupported, true},
		{502, breakwater.ServerError, breakwater.ServerError, true},
		{503, breakwater.ServerError, breakwater.Throttled, true},
		{504, breakwater.Timeout, breakwater.Timeout, true},
		{505, breakwater.Unsupported, breakwater.Unsupported, true},
		{511, breakwater.ServerError, breakwater.ServerError, true},
		{599, breakwater.ServerError, breakwater.ServerError, true},
		// Outside the protocol's range: the upstream misbehaved.
		{0, breakwater.ServerError, breakwater.ServerError, false},
		{99, breakwater.ServerError, breakwater.ServerError, false},
		{600, breakwater.ServerError, breakwater.ServerError, false},
		{-1, breakwater.ServerError, breakwater.ServerError, false},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Run("no_hint", func(t *testing.T) {
				got := breakwater.Classify(response(tt.status), nil)
				want := breakwater.Outcome{Category: tt.want, Status: tt.status}
				if got != want {
					t.Errorf("Classify = %+v, want %+v", got, want)
				}
			})
			t.Run("retry_after", func(t *testing.T) {
				got := breakwater.Classify(response(tt.status, "Retry-After", "5"), nil)
				want := breakwater.Outcome{Category: tt.withHint, Status: tt.status}
				if tt.readsHint {
					want.HasRetryAfter, want.RetryAfter = true, 5*time.Second
				}
				if got != want {
					t.Errorf("Classify = %+v, want %+v", got, want)
				}
			})
			t.Run("garbage_retry_after", func(t *testing.T) {
				got := breakwater.Classify(response(tt.status, "Retry-After", "soon"), nil)
				want := breakwater.Outcome{Category: tt.want, Status: tt.status}
				if got != want {
					t.Errorf("Classify = %+v, want %+v", got, want)
				}
			})
		})
	}
}

func TestClassifyHints(t *testing.T) {
	date := httpDate(time.Now())
	tests := []struct {
		name string
		c    breakwater.Classifier
		resp *http.Response
		want breakwater.Outcome
	}{
		{
			name: "429_too_long",
			c:    breakwater.Classify,
			resp: response(429, "Retry-After", "121"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 121 * time.Second, HasRetryAfter: true, RetryAfterTooLong: true},
		},
		{
			name: "429_at_max",
			c:    breakwater.Classify,
			resp: response(429, "Retry-After", "120"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 120 * time.Second, HasRetryAfter: true},
		},
		{
			name: "503_date_against_own_date_header",
			c:    breakwater.Classify,
			resp: response(503, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "Retry-After", "Thu, 02 Jan 2025 03:04:35 GMT"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 503, RetryAfter: 30 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_ratelimit_reset",
			c:    breakwater.Classify,
			resp: response(429, "RateLimit-Reset", "7"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 7 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_x_ratelimit_reset_delta",
			c:    breakwater.Classify,
			resp: response(429, "X-RateLimit-Reset", "9"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 9 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_x_ratelimit_reset_epoch",
			c:    breakwater.Classify,
			resp: response(429, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()+42, 10)),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 42 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_x_ratelimit_reset_epoch_past",
			c:    breakwater.Classify,
			resp: response(429, "Date", date, "X-RateLimit-Reset", "1700000000"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 0, HasRetryAfter: true},
		},
		{
			name: "429_retry_after_wins",
			c:    breakwater.Classify,
			resp: response(429, "Retry-After", "3", "RateLimit-Reset", "7", "X-RateLimit-Reset", "9"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 3 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_garbage_retry_after_falls_back",
			c:    breakwater.Classify,
			resp: response(429, "Retry-After", "later", "RateLimit-Reset", "7"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 7 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_garbage_ratelimit_reset_falls_back",
			c:    breakwater.Classify,
			resp: response(429, "RateLimit-Reset", "1.5", "X-RateLimit-Reset", "9"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 9 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_ratelimit_reset_too_long",
			c:    breakwater.Classify,
			resp: response(429, "RateLimit-Reset", "3600"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: time.Hour, HasRetryAfter: true, RetryAfterTooLong: true},
		},
		{
			// 1e9 itself is still delta-seconds; only a number above it is a
			// Unix time (which would be 2001, a wait of zero).
			name: "429_ratelimit_reset_at_the_epoch_threshold",
			c:    breakwater.Classify,
			resp: response(429, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "RateLimit-Reset", "1000000000"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 1e9 * time.Second, HasRetryAfter: true, RetryAfterTooLong: true},
		},
		{
			name: "429_x_ratelimit_reset_above_the_epoch_threshold",
			c:    breakwater.Classify,
			resp: response(429, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "X-RateLimit-Reset", "1000000001"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 0, HasRetryAfter: true},
		},
		{
			// The largest value read, 100 years in seconds, is above the
			// epoch threshold: a Unix time in 2069.
			name: "429_ratelimit_reset_at_the_bound",
			c:    breakwater.Classify,
			resp: response(429, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "RateLimit-Reset", "3153600000"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: time.Unix(3153600000, 0).Sub(now), HasRetryAfter: true, RetryAfterTooLong: true},
		},
		{
			name: "429_ratelimit_reset_past_the_bound_falls_back",
			c:    breakwater.Classify,
			resp: response(429, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "RateLimit-Reset", "3153600001", "X-RateLimit-Reset", "9"),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 9 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_structured_ratelimit_field",
			c:    breakwater.Classify,
			resp: response(429, "RateLimit", `"default";r=0;t=2`, "RateLimit-Policy", `"default";q=10;w=60`),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 2 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_structured_ratelimit_policy_window",
			c:    breakwater.Classify,
			resp: response(429, "RateLimit", `"default";r=0`, "RateLimit-Policy", `"default";q=10;w=5`),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: 5 * time.Second, HasRetryAfter: true},
		},
		{
			name: "429_retry_after_first",
			c:    breakwater.Classify,
			resp: response(429, "Retry-After", "1", "RateLimit", `"default";r=0;t=2`),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429, RetryAfter: time.Second, HasRetryAfter: true},
		},
		{
			name: "429_quota_left_is_no_hint",
			c:    breakwater.Classify,
			resp: response(429, "RateLimit", `"default";r=3;t=2`),
			want: breakwater.Outcome{Category: breakwater.Throttled, Status: 429},
		},
		{
			name: "503_ignores_ratelimit_field",
			c:    breakwater.Classify,
			resp: response(503, "RateLimit", `"default";r=0;t=2`),
			want: breakwater.Outcome{Category: breakwater.ServerError, Status: 503},
		},
		{
			name: "503_ignores_ratelimit_reset",
			c:    breakwater.Classify,
			resp: response(503, "RateLimit-Reset", "7"),
			want: breakwater.Outcome{Category: breakwater.ServerError, Status: 503},
		},
		{
			name: "nil_header",
			c:    breakwater.Classify,
			resp: &http.Response{StatusCode: 503},
			want: breakwater.Outcome{Category: breakwater.ServerError, Status: 503},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c(tt.resp, nil); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassifyAllocs(t *testing.T) {
	for _, resp := range []*http.Response{
		response(200),
		response(404),
		response(503, "Retry-After", "30"),
		response(429, "RateLimit-Reset", "30"),
		response(429),
	} {
		allocs := testing.AllocsPerRun(100, func() { breakwater.Classify(resp, nil) })
		if allocs != 0 {
			t.Errorf("Classify(%d %v) allocates %v times, want 0", resp.StatusCode, resp.Header, allocs)
		}
	}
}

// errTimeoutish is a timeout error with a Timeout method, like the ones
// net/http and net return.
type errTimeoutish struct{}

func (errTimeoutish) Error() string   { return "i/o timeout" }
func (errTimeoutish) Timeout() bool   { return true }
func (errTimeoutish) Temporary() bool { return true }

// breakerRejections returns the errors of an open breaker and of a
// half-open one whose only probe slot is taken.
func breakerRejections(t *testing.T) (open, busy error) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		bs, err := breakwater.NewBreakers(breakwater.WithOpenTimeout(time.Nanosecond, time.Nanosecond), breakwater.WithOpenJitter(0))
		if err != nil {
			t.Fatal(err)
		}
		bs.Get("open").Trip(time.Hour)
		_, open = bs.Get("open").Allow()
		bs.Get("busy").Trip(time.Nanosecond)
		time.Sleep(time.Millisecond) // virtual: the open time is over
		if _, err := bs.Get("busy").Allow(); err != nil {
			t.Fatal(err)
		}
		_, busy = bs.Get("busy").Allow()
	})
	if !errors.Is(open, breakwater.ErrCircuitOpen) || !errors.Is(busy, breakwater.ErrHalfOpenBusy) {
		t.Fatalf("breaker errors %v and %v", open, busy)
	}
	return open, busy
}

func urlErr(err error) error { return &url.Error{Op: "Get", URL: "http://example.test/", Err: err} }

func TestClassifyError(t *testing.T) {
	network := breakwater.Outcome{Category: breakwater.NetworkError}
	notSent := breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true}
	timeout := breakwater.Outcome{Category: breakwater.Timeout}
	rejected := breakwater.Outcome{Category: breakwater.Rejected}
	canceled := breakwater.Outcome{Category: breakwater.Canceled}
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	read := func(err error) error { return &net.OpError{Op: "read", Net: "tcp", Err: err} }
	open, busy := breakerRejections(t)

	tests := []struct {
		name string
		err  error
		want breakwater.Outcome
	}{
		{"attempt_timeout", breakwater.ErrAttemptTimeout, timeout},
		{"attempt_timeout_wrapped", urlErr(fmt.Errorf("attempt 2: %w", breakwater.ErrAttemptTimeout)), timeout},
		{"call_timeout", urlErr(breakwater.ErrCallTimeout), timeout},
		{"our_timeout_beats_deadline", errors.Join(context.DeadlineExceeded, breakwater.ErrAttemptTimeout), timeout},
		{"circuit_open", breakwater.ErrCircuitOpen, rejected},
		{"breaker_error_open", open, rejected},
		{"breaker_error_half_open", urlErr(busy), rejected},
		{"half_open_busy", breakwater.ErrHalfOpenBusy, rejected},
		{"paused", fmt.Errorf("wrapped: %w", breakwater.ErrPaused), rejected},
		{"rate_limited", breakwater.ErrRateLimited, rejected},
		{"concurrency_limit", breakwater.ErrConcurrencyLimit, rejected},
		{"retry_budget", breakwater.ErrRetryBudget, rejected},
		{"rejection_beats_context", errors.Join(context.DeadlineExceeded, breakwater.ErrPaused), rejected},
		{"canceled", context.Canceled, canceled},
		{"canceled_wrapped", urlErr(context.Canceled), canceled},
		{"deadline_exceeded", urlErr(context.DeadlineExceeded), canceled},
		{"dns_canceled", &net.DNSError{Err: "operation was canceled", UnwrapErr: context.Canceled}, canceled},
		{"dns", urlErr(dial(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true})), notSent},
		{"dns_timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, notSent},
		{"dial", urlErr(dial(errors.New("no route to host"))), notSent},
		{"dial_timeout", urlErr(dial(errTimeoutish{})), notSent},
		{"proxyconnect", urlErr(&net.OpError{Op: "proxyconnect", Net: "tcp", Err: io.EOF}), notSent},
		{"tls_remote_handshake_alert", urlErr(&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}), notSent},
		{"tls_remote_certificate_required", &net.OpError{Op: "remote error", Err: tls.AlertError(116)}, notSent},
		{"tls_remote_other_alert", urlErr(&net.OpError{Op: "remote error", Err: errors.New("tls: bad record MAC")}), network},
		{"tls_remote_nil", &net.OpError{Op: "remote error"}, network},
		{"error_method_panics", urlErr(&net.OpError{Op: "read"}), network},
		{"refused_bare", syscall.ECONNREFUSED, notSent},
		{"refused_syscall_error", urlErr(os.NewSyscallError("connect", syscall.ECONNREFUSED)), notSent},
		{"scheme_mismatch", urlErr(http.ErrSchemeMismatch), notSent},
		{"cert_verification", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), notSent},
		{"unknown_authority", x509.UnknownAuthorityError{}, notSent},
		{"hostname", fmt.Errorf("tls: %w", x509.HostnameError{Host: "example.test"}), notSent},
		{"cert_invalid", x509.CertificateInvalidError{Reason: x509.Expired}, notSent},
		{"system_roots", x509.SystemRootsError{}, notSent},
		{"record_header", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), notSent},
		{"alert", fmt.Errorf("handshake: %w", tls.AlertError(42)), notSent},
		{"ech_rejected", &tls.ECHRejectionError{}, notSent},
		{"tls_handshake_timeout", urlErr(&timeoutMsg{"net/http: TLS handshake timeout"}), notSent},
		{"h2_refused_stream", urlErr(errors.New("stream error: stream ID 3; REFUSED_STREAM")), notSent},
		{"h2_refused_stream_not_retried", errors.New("http2: Transport: cannot retry err [stream error: stream ID 1; REFUSED_STREAM] after Request.Body was written; define Request.GetBody to avoid this error"), notSent},
		{"h2_graceful_goaway", errors.New("http2: Transport received Server's graceful shutdown GOAWAY"), notSent},
		{"h2_goaway_first_stream", errors.New("http2: Transport received GOAWAY from server ErrCode:PROTOCOL_ERROR"), notSent},
		{"h2_no_conn", errors.New("http2: client conn could not be established"), notSent},
		{"h2_goaway_closed", urlErr(errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=5, ErrCode=NO_ERROR, debug=""`)), network},
		{"h2_stream_error", errors.New("stream error: stream ID 5; INTERNAL_ERROR; received from peer"), network},
		{"reset", urlErr(read(os.NewSyscallError("read", syscall.ECONNRESET))), network},
		{"broken_pipe", urlErr(&net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}), network},
		{"unexpected_eof", urlErr(io.ErrUnexpectedEOF), network},
		{"eof", urlErr(io.EOF), network},
		{"connection_broken", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.ErrUnexpectedEOF), network},
		{"response_header_timeout", urlErr(&timeoutMsg{"net/http: timeout awaiting response headers"}), timeout},
		{"timeout_matching_deadline_exceeded", urlErr(httpTimeout{}), timeout},
		{"deadline_exceeded_beside_timeout", errors.Join(httpTimeout{}, context.DeadlineExceeded), canceled},
		{"read_timeout", urlErr(read(os.ErrDeadlineExceeded)), timeout},
		{"timeout_below_plain_wrapper", urlErr(fmt.Errorf("reading: %w", errTimeoutish{})), timeout},
		{"timeout_in_join", errors.Join(errors.New("x"), errTimeoutish{}), timeout},
		{"timeout_false", &timeoutMsg{"not really"}, network},
		{"unknown", errors.New("something odd"), network},
		{"unknown_url", urlErr(errors.New(`unsupported protocol scheme "ftp"`)), network},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := breakwater.Classify(nil, tt.err); got != tt.want {
				t.Errorf("Classify(nil, %v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}

	t.Run("error_wins_over_response", func(t *testing.T) {
		got := breakwater.Classify(response(200), context.Canceled)
		if want := canceled; got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("nil_nil", func(t *testing.T) {
		if got := breakwater.Classify(nil, nil); got != network {
			t.Errorf("got %+v, want %+v", got, network)
		}
	})
}

// httpTimeout mimics net/http's timeoutError, which matches
// context.DeadlineExceeded with errors.Is.
type httpTimeout struct{}

func (httpTimeout) Error() string        { return "net/http: timeout awaiting response headers" }
func (httpTimeout) Timeout() bool        { return true }
func (httpTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// timeoutMsg mimics net/http's unexported timeout errors.
type timeoutMsg struct{ msg string }

func (e *timeoutMsg) Error() string   { return e.msg }
func (e *timeoutMsg) Timeout() bool   { return e.msg != "not really" }
func (e *timeoutMsg) Temporary() bool { return true }

func TestWhen(t *testing.T) {
	is423 := func(resp *http.Response, err error) bool { return resp != nil && resp.StatusCode == 423 }
	c := breakwater.When(nil, is423, breakwater.Throttled)

	t.Run("match", func(t *testing.T) {
		got := c(response(423), nil)
		want := breakwater.Outcome{Category: breakwater.Throttled, Status: 423}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("no_match", func(t *testing.T) {
		got := c(response(404), nil)
		want := breakwater.Outcome{Category: breakwater.ClientError, Status: 404}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("keeps_the_rest", func(t *testing.T) {
		tooLong := func(resp *http.Response, err error) breakwater.Outcome {
			o := breakwater.Classify(resp, err)
			o.RetryAfterTooLong = true
			return o
		}
		c := breakwater.When(tooLong, func(resp *http.Response, _ error) bool {
			return resp != nil && resp.StatusCode == 503
		}, breakwater.Unsupported)
		got := c(response(503, "Retry-After", "5"), nil)
		want := breakwater.Outcome{Category: breakwater.Unsupported, Status: 503, RetryAfter: 5 * time.Second, HasRetryAfter: true, RetryAfterTooLong: true}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		got = breakwater.When(nil, func(*http.Response, error) bool { return true }, breakwater.Canceled)(nil, syscall.ECONNREFUSED)
		want = breakwater.Outcome{Category: breakwater.Canceled, NotSent: true}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("panicking_match_is_no_match", func(t *testing.T) {
		c := breakwater.When(nil, func(resp *http.Response, err error) bool {
			return resp.StatusCode == 500 // resp is nil for errors
		}, breakwater.Unsupported)
		got := c(nil, io.ErrUnexpectedEOF)
		want := breakwater.Outcome{Category: breakwater.NetworkError}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		var nilPanic func(*http.Response, error) bool = func(*http.Response, error) bool { panic(nil) }
		got = breakwater.When(nil, nilPanic, breakwater.Unsupported)(response(500), nil)
		want = breakwater.Outcome{Category: breakwater.ServerError, Status: 500}
		if got != want {
			t.Errorf("panic(nil): got %+v, want %+v", got, want)
		}
	})
	t.Run("panicking_base_falls_back", func(t *testing.T) {
		base := func(*http.Response, error) breakwater.Outcome { panic("base") }
		got := breakwater.When(base, is423, breakwater.Throttled)(response(500), nil)
		want := breakwater.Outcome{Category: breakwater.ServerError, Status: 500}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("nested", func(t *testing.T) {
		c := breakwater.When(c, func(resp *http.Response, _ error) bool {
			return resp != nil && resp.StatusCode == 404
		}, breakwater.ServerError)
		for status, want := range map[int]breakwater.Category{423: breakwater.Throttled, 404: breakwater.ServerError, 400: breakwater.ClientError} {
			if got := c(response(status), nil).Category; got != want {
				t.Errorf("%d: got %v, want %v", status, got, want)
			}
		}
	})
	t.Run("constructor_panics", func(t *testing.T) {
		for name, f := range map[string]func(){
			"nil_match":        func() { breakwater.When(nil, nil, breakwater.Throttled) },
			"invalid_category": func() { breakwater.When(nil, is423, breakwater.Category(200)) },
			// The first value past the last category is as invalid as any.
			"first_invalid_category": func() { breakwater.When(nil, is423, breakwater.Category(len(breakwater.Categories()))) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: When did not panic", name)
					}
				}()
				f()
			}()
		}
	})
}

func FuzzClassify(f *testing.F) {
	seeds := []struct {
		status                    int
		retryAfter, date, rl, xrl string
	}{
		{200, "", "", "", ""},
		{503, "2", "", "", ""},
		{503, "  7 ", "", "", ""},
		{503, "-5", "", "", ""},
		{503, "1.5", "", "", ""},
		{429, "abc", "", "", ""},
		{429, "", "", "7", ""},
		{429, "", "Thu, 02 Jan 2025 03:04:05 GMT", "", "1735787087"},
		{429, "", "", "", "99999999999999999999"},
		{408, "99999999999999999999", "", "", ""},
		{504, "Thu, 02 Jan 2025 03:04:15 GMT", "Thu, 02 Jan 2025 03:04:05 GMT", "", ""},
		{500, "Thursday, 02-Jan-25 03:04:15 GMT", "", "", ""},
		{502, "Thu Jan  2 03:04:15 2025", "", "", ""},
		{100, "1", "", "", ""}, {204, "", "", "", ""}, {301, "", "", "", ""}, {304, "", "", "", ""},
		{400, "", "", "", ""}, {401, "", "", "", ""}, {403, "", "", "", ""}, {404, "", "", "", ""},
		{407, "", "", "", ""}, {409, "", "", "", ""}, {422, "", "", "", ""}, {499, "", "", "", ""},
		{501, "3", "", "", ""}, {505, "", "", "", ""}, {511, "", "", "", ""}, {599, "", "", "", ""},
		{0, "", "", "", ""}, {-1, "1", "", "", ""}, {600, "1", "", "", ""}, {1 << 40, "", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.status, s.retryAfter, s.date, s.rl, s.xrl, "")
	}
	for _, msg := range []string{
		"stream error: stream ID 3; REFUSED_STREAM",
		"http2: server sent GOAWAY and closed the connection",
		"net/http: TLS handshake timeout",
		"read: connection reset by peer",
	} {
		f.Add(200, "", "", "", "", msg)
	}
	f.Fuzz(func(t *testing.T, status int, retryAfter, date, rl, xrl, errMsg string) {
		if errMsg != "" {
			err := fmt.Errorf("round trip: %w", errors.New(errMsg))
			o := breakwater.Classify(nil, err)
			if o.Category.String() == "unknown" || o.Status != 0 || o.HasRetryAfter {
				t.Errorf("Classify(nil, %q) = %+v", errMsg, o)
			}
			if o.Category != breakwater.NetworkError {
				t.Errorf("Classify(nil, %q) = %v; an unknown error is a network error", errMsg, o.Category)
			}
		}
		h := http.Header{}
		for k, v := range map[string]string{"Retry-After": retryAfter, "Date": date, "RateLimit-Reset": rl, "X-RateLimit-Reset": xrl} {
			if v != "" {
				h.Set(k, v)
			}
		}
		resp := &http.Response{StatusCode: status, Header: h}
		o := breakwater.Classify(resp, nil)
		if o.Category.String() == "unknown" {
			t.Fatalf("Classify(%d) = invalid category %d", status, o.Category)
		}
		if o.Status != status {
			t.Errorf("Status = %d, want %d", o.Status, status)
		}
		if o.RetryAfter < 0 || (!o.HasRetryAfter && (o.RetryAfter != 0 || o.RetryAfterTooLong)) {
			t.Errorf("inconsistent hint in %+v", o)
		}
		if o.NotSent {
			t.Errorf("NotSent set on a response: %+v", o)
		}
		reads := status == 408 || status == 429 || (status >= 500 && status < 600)
		if !reads && o.HasRetryAfter {
			t.Errorf("status %d read a hint: %+v", status, o)
		}
	})
}

// privateTransport returns a private transport whose connections are closed
// when the test ends, so that goleak sees no persistConn goroutines.
func privateTransport(t *testing.T) *http.Transport {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// hangingServer starts an HTTP/1 server whose handler announces each
// request on arrived and then blocks until the request's context ends.
func hangingServer(t *testing.T) (srv *httptest.Server, arrived <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 1)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ch <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		// Abort without a response, so that a late answer can never race
		// the transport's cancellation.
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func roundTrip(ctx context.Context, t *testing.T, rt http.RoundTripper, target string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return (&http.Client{Transport: rt}).Do(req)
}

func wantOutcome(t *testing.T, err error, want breakwater.Outcome) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one classified as %+v", want)
	}
	if got := breakwater.Classify(nil, err); got != want {
		t.Errorf("Classify(%v) [%T] = %+v, want %+v", err, err, got, want)
	}
}

func TestClassifyRealErrors(t *testing.T) {
	t.Run("dial_refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = roundTrip(t.Context(), t, privateTransport(t), "http://"+addr+"/")
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true})
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("error %v is not ECONNREFUSED", err)
		}
	})

	t.Run("reset_mid_body", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		gotHeaders := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
			<-gotHeaders
			// Close with linger 0: the kernel sends RST instead of FIN.
			c.(*net.TCPConn).SetLinger(0)
		}()
		defer func() { <-done }()

		resp, err := roundTrip(t.Context(), t, privateTransport(t), "http://"+ln.Addr().String()+"/")
		close(gotHeaders)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if got := breakwater.Classify(resp, nil); got.Category != breakwater.Success {
			t.Errorf("headers classified as %+v", got)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("body read error: %v (reset: %v)", err, errors.Is(err, syscall.ECONNRESET))
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError})
	})

	t.Run("reset_before_headers", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
		}()
		defer func() { <-done }()
		_, err = roundTrip(t.Context(), t, privateTransport(t), "http://"+ln.Addr().String()+"/")
		t.Logf("round-trip error: %v", err)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError})
	})

	t.Run("dns_nxdomain", func(t *testing.T) {
		dns := startNXDomainServer(t)
		_, err := roundTrip(t.Context(), t, resolvingTransport(t, dns), "http://nonexistent.invalid/")
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true})
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("error %v is not a not-found *net.DNSError", err)
		}
	})

	t.Run("dns_resolver_unreachable", func(t *testing.T) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := pc.LocalAddr().String()
		pc.Close()
		_, err = roundTrip(t.Context(), t, resolvingTransport(t, closed), "http://nonexistent.invalid/")
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true})
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) {
			t.Errorf("error %v is not a *net.DNSError", err)
		}
	})

	t.Run("tls_unknown_authority", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Config.ErrorLog = discardLog()
		srv.StartTLS()
		defer srv.Close()
		_, err := roundTrip(t.Context(), t, privateTransport(t), srv.URL)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true})
		var verifyErr *tls.CertificateVerificationError
		if !errors.As(err, &verifyErr) {
			t.Errorf("error %v is not a *tls.CertificateVerificationError", err)
		}
	})

	t.Run("tls_client_certificate_required", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
		srv.Config.ErrorLog = discardLog()
		srv.StartTLS()
		defer srv.Close()
		tr := srv.Client().Transport.(*http.Transport)
		defer tr.CloseIdleConnections()
		_, err := roundTrip(t.Context(), t, tr, srv.URL)
		t.Logf("round-trip error: %v", err)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true})
	})

	t.Run("https_to_http_server", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Config.ErrorLog = discardLog()
		srv.Start()
		defer srv.Close()
		_, err := roundTrip(t.Context(), t, privateTransport(t), "https://"+srv.Listener.Addr().String()+"/")
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.NetworkError, NotSent: true})
		if !errors.Is(err, http.ErrSchemeMismatch) {
			t.Errorf("error %v is not http.ErrSchemeMismatch", err)
		}
	})

	t.Run("response_header_timeout", func(t *testing.T) {
		srv, _ := hangingServer(t)
		tr := privateTransport(t)
		tr.ResponseHeaderTimeout = 10 * time.Millisecond
		_, err := roundTrip(t.Context(), t, tr, srv.URL)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.Timeout})
	})

	t.Run("client_timeout", func(t *testing.T) {
		srv, _ := hangingServer(t)
		c := &http.Client{Transport: privateTransport(t), Timeout: 10 * time.Millisecond}
		_, err := c.Get(srv.URL)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.Timeout})
	})

	t.Run("caller_cancel", func(t *testing.T) {
		srv, arrived := hangingServer(t)
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-arrived
			cancel()
		}()
		_, err := roundTrip(ctx, t, privateTransport(t), srv.URL)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.Canceled})
	})

	t.Run("caller_deadline", func(t *testing.T) {
		srv, _ := hangingServer(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		_, err := roundTrip(ctx, t, privateTransport(t), srv.URL)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.Canceled})
	})

	// net/http's HTTP/1 transport returns context.Cause: the attempt
	// timeout's cause reaches the classifier without help.
	t.Run("attempt_timeout_http1", func(t *testing.T) {
		srv, _ := hangingServer(t)
		ctx, cancel := context.WithTimeoutCause(t.Context(), 10*time.Millisecond, breakwater.ErrAttemptTimeout)
		defer cancel()
		_, err := roundTrip(ctx, t, privateTransport(t), srv.URL)
		t.Logf("HTTP/1 round-trip error: %v", err)
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.Timeout})
	})

	t.Run("call_timeout_unaccepted_connection", func(t *testing.T) {
		// A listener that never accepts: the TCP handshake completes in the
		// kernel's backlog, and the HTTP/1 request then waits for headers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ctx, cancel := context.WithTimeoutCause(t.Context(), 10*time.Millisecond, breakwater.ErrCallTimeout)
		defer cancel()
		_, err = roundTrip(ctx, t, privateTransport(t), "http://"+ln.Addr().String()+"/")
		wantOutcome(t, err, breakwater.Outcome{Category: breakwater.Timeout})
	})
}

// resolvingTransport returns a transport that resolves names with the Go
// resolver against the DNS server at addr (over UDP) only.
func resolvingTransport(t *testing.T, addr string) *http.Transport {
	t.Helper()
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
	tr := privateTransport(t)
	tr.DialContext = (&net.Dialer{Resolver: r}).DialContext
	return tr
}

// startNXDomainServer starts a DNS server on a loopback UDP socket that
// answers every query with NXDOMAIN, as any resolver does for .invalid names
// (RFC 6761). The Go resolver sends .invalid queries to the network like any
// other name, so the test brings its own server.
func startNXDomainServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := nxdomain(buf[:n]); resp != nil {
				pc.WriteTo(resp, addr)
			}
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
	return pc.LocalAddr().String()
}

// nxdomain builds the NXDOMAIN answer to a one-question DNS query, or returns
// nil for anything else.
func nxdomain(q []byte) []byte {
	if len(q) < 12 || q[4] != 0 || q[5] != 1 {
		return nil
	}
	i := 12
	for i < len(q) && q[i] != 0 {
		if q[i]&0xc0 != 0 {
			return nil
		}
		i += int(q[i]) + 1
	}
	end := i + 1 + 4 // the root label, QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	resp := append([]byte(nil), q[:end]...)
	resp[2] = 0x80 | q[2]&0x79 // QR, the query's opcode and RD
	resp[3] = 0x80 | 3         // RA, RCODE 3 (NXDOMAIN)
	clear(resp[6:12])          // no answer, authority or additional records
	return resp
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

var sink breakwater.Outcome

func BenchmarkClassify(b *testing.B) {
	for _, bc := range []struct {
		name string
		resp *http.Response
	}{
		{"200", response(200, "Content-Type", "application/json", "Date", "Thu, 02 Jan 2025 03:04:05 GMT")},
		{"503_retry_after", response(503, "Content-Type", "text/plain", "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "Retry-After", "30")},
		{"503_retry_after_date", response(503, "Date", "Thu, 02 Jan 2025 03:04:05 GMT", "Retry-After", "Thu, 02 Jan 2025 03:04:35 GMT")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				var o breakwater.Outcome
				for b.Loop() {
					o = breakwater.Classify(bc.resp, nil)
				}
				sink = o
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					var o breakwater.Outcome
					for pb.Next() {
						o = breakwater.Classify(bc.resp, nil)
					}
					_ = o
				})
			})
		})
	}
}

// Every category has its own stable name, which metrics and logs use as a
// label; any other value, from the first past the last category on, is
// "unknown".
func TestCategoryString(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range breakwater.Categories() {
		s := c.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("Category(%d).String() = %q: want a name of its own", c, s)
		}
		seen[s] = true
	}
	for _, c := range []breakwater.Category{breakwater.Category(len(breakwater.Categories())), 200, 255} {
		if got := c.String(); got != "unknown" {
			t.Errorf("Category(%d).String() = %q, want \"unknown\"", c, got)
		}
	}
}
