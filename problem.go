package breakwater

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// WriteProblem is the default deny handler (see [WithDenyHandler]): it
// answers rej.Status with an RFC 9457 problem details body
// (application/problem+json) whose type is about:blank, whose title is the
// status text and whose detail names the mechanism, and with
// Cache-Control: no-store. A custom deny handler may call it after doing
// its own work.
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
