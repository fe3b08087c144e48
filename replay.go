package breakwater

import "net/http"

// Whether a request may be sent again: what retries, hedges and failover
// ask before they repeat one.

// idempotent reports whether req may be sent more than once: its method is
// one RFC 9110 defines as idempotent, or it carries an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return len(req.Header["Idempotency-Key"]) > 0 || len(req.Header["X-Idempotency-Key"]) > 0
}

// hasBody reports whether req carries a body to send.
func hasBody(req *http.Request) bool { return req.Body != nil && req.Body != http.NoBody }

// replayable reports whether req may be sent more than once: an
// idempotent method, an idempotency key, or the caller's say-so
// (byPolicy), and a body, if any, that can be replayed. A retry's say-so
// is the request's policy or [WithRetryNonIdempotent]; a hedge's only the
// request's own policy, since a hedge repeats a request that may well
// succeed.
func replayable(req *http.Request, byPolicy bool) bool {
	if !(byPolicy || idempotent(req)) {
		return false
	}
	return !hasBody(req) || req.GetBody != nil
}
