package breakwater

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/breakwater-go/breakwater/internal/hints"
)

// Outcome is the classification of one attempt.
type Outcome struct {
	// Category is the attempt's class.
	Category Category
	// Status is the response's status code, or 0 when there was no response.
	Status int
	// RetryAfter is the server's hint (Retry-After, or on a 429
	// RateLimit-Reset, X-RateLimit-Reset or the structured RateLimit
	// field), measured against the response's Date
	// header when it has one. Valid when HasRetryAfter is true; a date in
	// the past is a hint of zero.
	RetryAfter time.Duration
	// HasRetryAfter reports whether the response carried a usable hint.
	HasRetryAfter bool
	// RetryAfterTooLong reports that the hint exceeds the classifier's
	// maximum: the retry stage returns the response at once instead of
	// sleeping, and the pause gate clamps the pause.
	RetryAfterTooLong bool
	// NotSent reports that the request provably never reached the server
	// (connection refused, DNS failure, connection setup), so even a
	// non-idempotent request may be retried.
	NotSent bool
}

// A Classifier maps one attempt's result to an [Outcome]. resp is non-nil
// exactly when err is nil. A Classifier must be safe for concurrent use and
// must not read or close resp.Body.
type Classifier func(resp *http.Response, err error) Outcome

// defaultMaxRetryAfter is the longest hint the default classifier honours.
const defaultMaxRetryAfter = 2 * time.Minute

// Classify is the default [Classifier], with 2 minutes as the longest
// acceptable hint (a [Transport] uses its [WithMaxRetryAfter] value). It never reads or closes resp.Body and never
// panics, even when err's own methods do. When err is non-nil it decides alone, whatever resp is.
//
// A response is classified by status code:
//
//	1xx, 2xx, 3xx                 Success
//	401, 403, 407                 AuthError
//	408, 504                      Timeout
//	429                           Throttled
//	503 with a usable hint        Throttled
//	501, 505                      Unsupported
//	500, 502, 503, other 5xx      ServerError
//	other 4xx                     ClientError
//	anything below 100 or >= 600  ServerError (the upstream broke the protocol)
//
// The Retry-After field is read only for 408, 429 and 5xx, as RFC 9110
// section 10.2.3 defines it: delta-seconds (ASCII digits, spaces and tabs
// around them ignored) or an HTTP-date in any of the three forms
// [http.ParseTime] accepts, measured against the response's own Date field
// when that parses (so that a server whose clock is off still gets the
// wait it meant), else against the local clock; a date in the past is a
// hint of zero. Only the first field line counts; negative, fractional,
// empty and malformed values, and hints longer than 100 years, are no hint.
// On a 429 without a usable one, RateLimit-Reset and then
// X-RateLimit-Reset are read as well (delta-seconds, or a Unix timestamp in
// seconds when the number is above 1e9), and then the structured RateLimit
// field that breakwater's own [ClientRateLimit] sends (a policy with no
// requests remaining resets after its t, as [WithRateLimitHeaders] reads it).
// A usable hint sets [Outcome.HasRetryAfter] and
// [Outcome.RetryAfter], and [Outcome.RetryAfterTooLong] when it exceeds the
// maximum. Classify does not allocate for a response without a hint or with
// a delta-seconds one.
//
// An error is classified, in this order, with [errors.Is] and [errors.As]
// (so wrappers such as *url.Error are seen through) and, only where net/http
// exports no type, by its text:
//
//   - one of breakwater's timeouts ([ErrAttemptTimeout], [ErrCallTimeout],
//     [http.ErrHandlerTimeout]): Timeout; one of its rejections
//     ([ErrCircuitOpen], [ErrHalfOpenBusy], [ErrPaused], [ErrRateLimited],
//     [ErrConcurrencyLimit], [ErrRetryBudget]): Rejected, as the table of
//     rejections in the sentinels' documentation says;
//   - [context.Canceled], or [context.DeadlineExceeded] itself: Canceled,
//     since a context that ended without one of our causes is the caller's.
//     Errors that merely match context.DeadlineExceeded through an Is method,
//     as net/http's response header timeout and http.Client.Timeout errors
//     do, are timeouts of the upstream call and fall to the Timeout rule
//     below. Inside a RoundTripper, though, http.Client.Timeout shows up as
//     the request context's plain deadline, and so as Canceled;
//   - connection setup failures, which provably never reached the server:
//     NetworkError with [Outcome.NotSent]. These are DNS errors, dial and
//     proxy-connect errors (timeouts included), connection refused, TLS
//     handshake and certificate errors, handshake alerts from the server
//     (such as a rejected client certificate), [http.ErrSchemeMismatch], the
//     TLS handshake timeout, and HTTP/2 streams the server refused
//     (REFUSED_STREAM) or left unprocessed before a GOAWAY;
//   - any other error with a Timeout() bool method that reports true, such
//     as a response header timeout: Timeout;
//   - everything else, including connection resets, broken pipes, unexpected
//     EOF and HTTP/2 stream errors: NetworkError, with NotSent false. A
//     transport error nobody recognizes is still a failure to talk to the
//     upstream.
//
// Both resp and err nil breaks the [http.RoundTripper] contract and is a
// NetworkError.
//
// Only the error tells our timeouts from the caller's, and transports do
// not all keep a context's cause: net/http's HTTP/1 transport returns
// [context.Cause], its HTTP/2 transport returns ctx.Err(), a plain
// context.DeadlineExceeded. breakwater's stages make such an error match the
// cause of the context they own before classifying it; a custom stage that
// ends an attempt with a cause should do the same.
func Classify(resp *http.Response, err error) Outcome {
	return classify(resp, err, defaultMaxRetryAfter)
}

// When returns a Classifier that reports category c when match reports true
// for an attempt and base's outcome otherwise. Either way the rest of base's
// outcome (Status, the Retry-After hint, NotSent) is kept. A nil base means
// [Classify]. A match that panics counts as no match, and a base that panics
// falls back to [Classify]. match must be safe for concurrent use and must
// not read or close resp.Body.
//
// When panics if match is nil or c is not a valid [Category].
func When(base Classifier, match func(*http.Response, error) bool, c Category) Classifier {
	if match == nil {
		panic("breakwater: When needs a non-nil match function")
	}
	if c >= numCategories {
		panic("breakwater: When called with an invalid Category")
	}
	return func(resp *http.Response, err error) Outcome {
		o := classifySafely(base, resp, err)
		if matchSafely(match, resp, err) {
			o.Category = c
		}
		return o
	}
}

// matchSafely calls match and turns a panic into no match.
func matchSafely(match func(*http.Response, error) bool, resp *http.Response, err error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return match(resp, err)
}

// classifySafely calls c and falls back to [Classify] when c is nil, panics
// or returns an invalid category. Stages classify through it so that a
// broken user classifier never crashes a request.
func classifySafely(c Classifier, resp *http.Response, err error) (o Outcome) {
	if c == nil {
		return Classify(resp, err)
	}
	defer func() {
		if recover() != nil {
			o = Classify(resp, err)
		}
	}()
	o = c(resp, err)
	if o.Category >= numCategories {
		o = Classify(resp, err)
	}
	return o
}

func classify(resp *http.Response, err error, maxRetryAfter time.Duration) Outcome {
	if err != nil {
		return classifyError(err)
	}
	if resp == nil {
		return Outcome{Category: NetworkError}
	}
	return classifyResponse(resp, maxRetryAfter)
}

func classifyResponse(resp *http.Response, maxRetryAfter time.Duration) Outcome {
	s := resp.StatusCode
	o := Outcome{Status: s}
	switch {
	case s >= 100 && s < 400:
		o.Category = Success
		return o
	case s == http.StatusUnauthorized, s == http.StatusForbidden, s == http.StatusProxyAuthRequired:
		o.Category = AuthError
		return o
	case s == http.StatusRequestTimeout, s == http.StatusGatewayTimeout:
		o.Category = Timeout
	case s == http.StatusTooManyRequests:
		o.Category = Throttled
	case s >= 400 && s < 500:
		o.Category = ClientError
		return o
	case s == http.StatusNotImplemented, s == http.StatusHTTPVersionNotSupported:
		o.Category = Unsupported
	case s >= 500 && s < 600:
		o.Category = ServerError
	default:
		o.Category = ServerError
		return o
	}

	now := time.Now()
	d, ok := hints.RetryAfter(resp.Header, now)
	if !ok && s == http.StatusTooManyRequests {
		d, ok = hints.RateLimitReset(resp.Header, now)
		if lines := resp.Header[hints.RateLimitField]; !ok && len(lines) > 0 {
			d, ok = hints.StructuredQuota(lines, resp.Header[hints.RateLimitPolicyField])
		}
	}
	if !ok {
		return o
	}
	if s == http.StatusServiceUnavailable {
		o.Category = Throttled
	}
	o.RetryAfter = d
	o.HasRetryAfter = true
	o.RetryAfterTooLong = d > maxRetryAfter
	return o
}

func classifyError(err error) (o Outcome) {
	// err's own methods (Error, Is, Unwrap, Timeout) may panic: a
	// *net.OpError with a nil Err does in Error. Such an error is still a
	// failure to talk to the upstream.
	defer func() {
		if recover() != nil {
			o = Outcome{Category: NetworkError}
		}
	}()
	if r := matchRow(err); r != nil {
		return Outcome{Category: r.cat}
	}
	switch {
	case errors.Is(err, context.Canceled), anyInChain(err, isDeadlineExceeded):
		return Outcome{Category: Canceled}
	case notSent(err):
		return Outcome{Category: NetworkError, NotSent: true}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Outcome{Category: NetworkError}
	case anyInChain(err, isTimeout):
		return Outcome{Category: Timeout}
	}
	return Outcome{Category: NetworkError}
}

// notSent reports whether err shows that the request never reached the
// server: the connection was never set up, or the server provably did not
// process it.
func notSent(err error) bool {
	var (
		dnsErr       *net.DNSError
		opErr        *net.OpError
		verifyErr    *tls.CertificateVerificationError
		recordErr    tls.RecordHeaderError
		alertErr     tls.AlertError
		echErr       *tls.ECHRejectionError
		authorityErr x509.UnknownAuthorityError
		hostErr      x509.HostnameError
		invalidErr   x509.CertificateInvalidError
		rootsErr     x509.SystemRootsError
	)
	switch {
	case errors.As(err, &dnsErr),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, http.ErrSchemeMismatch),
		errors.As(err, &verifyErr), errors.As(err, &recordErr),
		errors.As(err, &alertErr), errors.As(err, &echErr),
		errors.As(err, &authorityErr), errors.As(err, &hostErr),
		errors.As(err, &invalidErr), errors.As(err, &rootsErr):
		return true
	case errors.As(err, &opErr):
		switch opErr.Op {
		case "dial", "proxyconnect":
			// Connecting to the server or to the proxy in front of it.
			return true
		case "remote error":
			// crypto/tls reports an alert from the server this way, with the
			// alert as an unexported type. Only alerts that end a handshake
			// prove that no handler saw the request; with TLS 1.3 a
			// rejected client certificate arrives after the client has
			// written its request, but the server never read it.
			if opErr.Err != nil {
				text := opErr.Err.Error()
				for _, a := range handshakeAlerts {
					if text == a.Error() {
						return true
					}
				}
			}
		}
	}
	// net/http gives nothing typed for these: the TLS handshake timeout is an
	// unexported type, and the HTTP/2 transport bundled into net/http keeps
	// its error types unexported (golang.org/x/net/http2, used directly,
	// produces the same messages). Message text is all there is.
	msg := err.Error()
	for _, m := range notSentMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// handshakeAlerts are the TLS alerts (RFC 8446 section 6.2) that a server
// sends only while negotiating or authenticating a connection, before it
// reads any application data.
var handshakeAlerts = [...]tls.AlertError{
	40,  // handshake_failure
	42,  // bad_certificate
	43,  // unsupported_certificate
	44,  // certificate_revoked
	45,  // certificate_expired
	46,  // certificate_unknown
	48,  // unknown_ca
	49,  // access_denied
	70,  // protocol_version
	71,  // insufficient_security
	86,  // inappropriate_fallback
	110, // unsupported_extension
	112, // unrecognized_name
	113, // bad_certificate_status_response
	116, // certificate_required
	120, // no_application_protocol
	121, // ech_required
}

// notSentMessages are error texts of net/http (and golang.org/x/net/http2)
// that prove the request was not processed.
var notSentMessages = [...]string{
	// tlsHandshakeTimeoutError: the connection was never set up.
	"net/http: TLS handshake timeout",
	// A stream reset with REFUSED_STREAM: RFC 9113 section 8.7 guarantees
	// that the server did no processing.
	"REFUSED_STREAM",
	// A GOAWAY whose last stream ID is below ours: RFC 9113 section 6.8 says
	// such streams were not processed. The transport reports them with these
	// two texts; "server sent GOAWAY and closed the connection" is different
	// (the stream may have been processed) and stays a plain NetworkError.
	"http2: Transport received Server's graceful shutdown GOAWAY",
	"http2: Transport received GOAWAY from server",
	// No connection to send the request on.
	"http2: client conn could not be established",
	"http2: client conn not usable",
}

// isDeadlineExceeded reports whether err is context.DeadlineExceeded itself.
// errors.Is is too broad here: net/http's own timeouts (the response header
// timeout, http.Client.Timeout) have an Is method that matches
// context.DeadlineExceeded, and they are timeouts of the upstream call, not
// the caller's context ending.
func isDeadlineExceeded(err error) bool { return err == context.DeadlineExceeded }
