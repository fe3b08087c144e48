package breakwater

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Rejection describes a request that an inbound middleware answered itself
// instead of calling the next handler (or, for the handler timeout, after
// the handler returned without writing anything).
type Rejection struct {
	// Mechanism is the middleware that rejected: [MechShed],
	// [MechRateLimit], [MechTimeout] or [MechRouteBreaker].
	Mechanism Mechanism
	// Status is the status the default response uses: 503, 429 or the
	// configured timeout status.
	Status int
	// RetryAfter is when the client may retry, exactly; zero when the
	// mechanism gives no hint (the handler timeout). The Retry-After
	// header, already set when a [DenyHandler] runs, carries it in whole
	// seconds, rounded up and at least 1.
	RetryAfter time.Duration
	// Key is the key the mechanism rejected: the client key of a rate
	// limit, the route key of a route breaker; empty otherwise.
	Key string
	// Err matches the rejection's sentinel with errors.Is:
	// [ErrConcurrencyLimit], [ErrRateLimited], [ErrCircuitOpen] or
	// [ErrHalfOpenBusy], or [http.ErrHandlerTimeout].
	Err error
}

// A DenyHandler writes the response to a rejected request. When it runs,
// the rejecting middleware has already set the Retry-After header (when
// rej.RetryAfter > 0) and, for a rate limit, the RateLimit fields; the
// DenyHandler writes the status (normally rej.Status) and a body. It runs on
// the request's goroutine and must not retain w or r.
type DenyHandler func(w http.ResponseWriter, r *http.Request, rej Rejection)

// WriteProblem is the default [DenyHandler]: it answers rej.Status with an
// RFC 9457 problem details body (application/problem+json) whose type is
// about:blank, whose title is the status text and whose detail names the
// mechanism, and with Cache-Control: no-store. A custom DenyHandler may
// call it after doing its own work (logging, metrics).
func WriteProblem(w http.ResponseWriter, r *http.Request, rej Rejection) {
	writeProblemBody(w, rej.Status, problemBody(rej.Status, rej.Mechanism))
}

// writeProblemBody writes a prepared problem body.
func writeProblemBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Encoding") // a compressing middleware's header; the body is plain
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// problemDetails is the RFC 9457 document breakwater writes.
type problemDetails struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// problemBody renders the problem document of a rejection. Middleware
// render theirs once, at construction.
func problemBody(status int, m Mechanism) []byte {
	title := http.StatusText(status)
	if title == "" {
		title = "Status " + strconv.Itoa(status)
	}
	b, _ := json.Marshal(problemDetails{Type: "about:blank", Title: title, Status: status, Detail: problemDetail(m)})
	return append(b, '\n')
}

// retryAfterSeconds is d in whole seconds for a Retry-After header: rounded
// up and at least 1, so that a client that waits that long finds the
// resource available.
func retryAfterSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// smallInts holds the decimal forms of 0..smallIntsN-1, so the common
// header values are never formatted per request.
const smallIntsN = 1024

var smallInts = func() (s [smallIntsN]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

// itoa formats n without allocating when it is small.
func itoa(n int64) string {
	if n >= 0 && n < smallIntsN {
		return smallInts[n]
	}
	return strconv.FormatInt(n, 10)
}

// setRetryAfter sets the Retry-After header from d (see retryAfterSeconds).
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", itoa(retryAfterSeconds(d)))
}
