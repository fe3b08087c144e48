package breakwater

import (
	"net/http"
	"time"
)

// Category is the outcome class of one attempt. Every stage (retry, breaker,
// pause gate, metrics) reads the same category. The zero value is [Success].
//
//	category       produced by                                  retried  breaker
//	success        1xx–3xx                                      –        success
//	client_error   4xx not listed below                         no       success
//	auth_error     401, 403, 407                                no       success (counting is opt-in)
//	throttled      429; 503 carrying Retry-After                yes*     neutral; pauses the key
//	server_error   500, 502, 503 without Retry-After, other 5xx yes      failure
//	unsupported    501, 505                                     no       neutral
//	timeout        408, 504, an attempt timeout of ours         yes      failure
//	network_error  dial, DNS, TLS, reset, unexpected EOF        yes      failure
//	canceled       the caller's context ended                   no       neutral
//	rejected       breakwater's own refusals                    never    neutral
//	slow           a success slower than the slow-call limit    no       failure
//
// * not before the server's hint.
type Category uint8

// The outcome categories. Their String forms are stable lower-case names used
// as metric label values and log fields.
const (
	Success Category = iota
	ClientError
	AuthError
	Throttled
	ServerError
	Unsupported
	Timeout
	NetworkError
	Canceled
	Rejected
	Slow
	numCategories
)

var categoryNames = [numCategories]string{
	Success:      "success",
	ClientError:  "client_error",
	AuthError:    "auth_error",
	Throttled:    "throttled",
	ServerError:  "server_error",
	Unsupported:  "unsupported",
	Timeout:      "timeout",
	NetworkError: "network_error",
	Canceled:     "canceled",
	Rejected:     "rejected",
	Slow:         "slow",
}

// String returns the category's stable lower-case name, or "unknown".
func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	return "unknown"
}

// Categories returns every category in declaration order.
func Categories() []Category {
	cs := make([]Category, numCategories)
	for i := range cs {
		cs[i] = Category(i)
	}
	return cs
}

// Retryable reports whether the retry stage may try again after an attempt
// of this category (subject to idempotency, budget and deadline).
func (c Category) Retryable() bool {
	switch c {
	case Throttled, ServerError, Timeout, NetworkError:
		return true
	}
	return false
}

// Failure reports whether a breaker counts this category as a failure by
// default. [AuthError] and [Throttled] can be made to count with breaker
// options.
func (c Category) Failure() bool {
	switch c {
	case ServerError, Timeout, NetworkError, Slow:
		return true
	}
	return false
}

// Neutral reports whether a breaker treats this category as neither success
// nor failure by default.
func (c Category) Neutral() bool {
	switch c {
	case Throttled, Unsupported, Canceled, Rejected:
		return true
	}
	return false
}

// Outcome is the classification of one attempt.
type Outcome struct {
	// Category is the attempt's class.
	Category Category
	// Status is the response's status code, or 0 when there was no response.
	Status int
	// RetryAfter is the server's hint (Retry-After, or RateLimit-Reset /
	// X-RateLimit-Reset on a 429), measured against the response's Date
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
