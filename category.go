package breakwater

// Category is the outcome class of one attempt. Every stage (retry, breaker,
// pause gate, metrics) reads the same category. The zero value is [Success].
//
//	category       produced by                                  retried  breaker
//	success        1xx–3xx                                      –        success
//	client_error   4xx not listed below                         no       success
//	auth_error     401, 403, 407                                no       success (counting is opt-in)
//	throttled      429; 503 carrying Retry-After                yes*     neutral; feeds the pause gate
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
