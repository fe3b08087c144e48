package breakwater

import (
	"context"
	"net/http"
	"time"
)

// inbound is the runtime part every middleware shares.
type inbound struct {
	inboundConfig
	mech    Mechanism
	status  int    // rejection status
	problem []byte // default rejection body
}

// newInbound is the runtime part of a middleware rejecting with mech, at
// status or, when status is 0, at the status of the table of rejections.
func newInbound(c inboundConfig, mech Mechanism, status int) inbound {
	if status == 0 {
		status = inboundStatus(mech)
	}
	return inbound{inboundConfig: c, mech: mech, status: status, problem: problemBody(status, mech)}
}

// served is one request's bookkeeping.
type served struct {
	rw     *responseWriter // nil when nothing needs to see the response
	report bool            // this middleware reports the EventRequest
	start  time.Time
}

// begin decides whether the request's writer must be wrapped (need: the
// middleware reads the response itself) and whether this middleware
// reports the request.
func (in *inbound) begin(w http.ResponseWriter, need bool) served {
	rw, wrapped := w.(*responseWriter)
	s := served{report: in.obs != nil && !(wrapped && rw.observed)}
	switch {
	case wrapped:
		s.rw = rw
	case need || s.report:
		s.rw = &responseWriter{w: w}
	}
	if s.report {
		s.rw.observed = true
		s.start = time.Now()
	}
	return s
}

// writer is what the next handler gets.
func (s *served) writer(w http.ResponseWriter) http.ResponseWriter {
	if s.rw != nil {
		return s.rw
	}
	return w
}

// finish reports the request if this middleware reports it.
func (in *inbound) finish(r *http.Request, s *served, panicked bool) {
	if !s.report {
		return
	}
	status, cat := inboundOutcome(r, s.rw, panicked)
	var reason Reason
	if pushedBack(s.rw) {
		reason = ReasonPushback // the answer told its caller where to retry, or not to
	}
	notify(in.obs, r.Context(), &Event{
		Kind:        EventRequest,
		Method:      r.Method,
		Route:       RouteKey(r),
		Status:      status,
		Category:    cat,
		Duration:    time.Since(s.start),
		Reason:      reason,
		Criticality: criticalityOf(r.Context()),
	})
}

// reject answers r with rej: it marks the response as a rejection, sets
// Retry-After, reports an EventReject and runs the deny handler.
func (in *inbound) reject(w http.ResponseWriter, r *http.Request, rej Rejection) {
	if rw, ok := w.(*responseWriter); ok {
		rw.rejectedBy = rej.Mechanism
	}
	if rej.RetryAfter > 0 {
		setRetryAfter(w.Header(), rej.RetryAfter)
	}
	if (rej.Mechanism == MechShed || rej.Mechanism == MechRouteBreaker) && callerOf(r.Context()) != nil {
		w.Header().Set(headerPushback, pushbackElsewhere) // this replica is full or its route broken
	}
	if in.obs != nil {
		route := RouteKey(r)
		notify(in.obs, r.Context(), &Event{
			Kind:        EventReject,
			Key:         route, // bounded: never a client's address
			Method:      r.Method,
			Route:       route,
			Status:      rej.Status,
			Delay:       rej.RetryAfter,
			Mechanism:   rej.Mechanism,
			Err:         rej.Err,
			Criticality: criticalityOf(r.Context()),
		})
	}
	if in.deny != nil {
		in.deny(w, r, rej)
		return
	}
	if rej.Status == in.status && rej.Mechanism == in.mech {
		writeProblemBody(w, rej.Status, in.problem)
		return
	}
	WriteProblem(w, r, rej)
}

// pushedBack reports whether the answer rw recorded carried
// Breakwater-Pushback, as reject and responseWriter.WriteHeader set it,
// without asking for the header map (net/http copies it when asked after
// the handler wrote): a shed or a route breaker's rejection of a
// breakwater caller's request, or a 5xx after a call serving it failed.
func pushedBack(rw *responseWriter) bool {
	if rw == nil || rw.caller == nil {
		return false
	}
	switch rw.rejectedBy {
	case MechShed, MechRouteBreaker:
		return true
	case "":
		return rw.status >= 500 && rw.caller.failed.Load()
	}
	return false
}

// inboundOutcome classifies how a request ended, as the breakers and the
// observers see it: a rejection by a breakwater middleware is Rejected (a
// handler timeout is Timeout); a handler that ran out of its deadline
// without answering is Timeout; a failure while the client was gone is
// Canceled; otherwise the written status is classified like a response
// ([Classify]), a 503 with Retry-After being Throttled. rw may be nil when
// nothing was wrapped (the request was rejected before the handler ran).
func inboundOutcome(r *http.Request, rw *responseWriter, panicked bool) (int, Category) {
	if rw == nil {
		return 0, Rejected
	}
	switch rw.rejectedBy {
	case "":
	case MechTimeout:
		return rw.status, Timeout
	default:
		return rw.status, Rejected
	}
	ctxErr := r.Context().Err()
	if panicked {
		switch ctxErr {
		case context.Canceled:
			return rw.status, Canceled
		case context.DeadlineExceeded:
			return rw.status, Timeout
		}
		return rw.status, ServerError
	}
	if rw.hijacked {
		return rw.status, Success
	}
	if !rw.wrote {
		switch ctxErr {
		case context.Canceled:
			return 0, Canceled
		case context.DeadlineExceeded:
			return 0, Timeout
		}
		return http.StatusOK, Success // net/http's default
	}
	// net/http copies the header map of a response whose Header is asked
	// for after its handler wrote: a response the status alone classifies
	// is classified without asking.
	resp := http.Response{StatusCode: rw.status}
	cat := classifyResponse(&resp, defaultMaxRetryAfter).Category
	switch cat {
	case Success, AuthError, ClientError:
	default: // a Retry-After may say more
		resp.Header = rw.Header()
		cat = classifyResponse(&resp, defaultMaxRetryAfter).Category
	}
	if cat.Failure() {
		switch ctxErr {
		case context.Canceled:
			cat = Canceled
		case context.DeadlineExceeded:
			cat = Timeout
		}
	}
	return rw.status, cat
}
