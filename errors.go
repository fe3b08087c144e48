package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Sentinel errors for errors.Is. Every refusal and every timeout that
// breakwater makes matches one of them, and comes as an [*Error] that
// carries the details. The table of rejections says which part of
// breakwater makes each, and what [Classify] makes of it:
//
//	sentinel                also matches              mechanism     inbound              category
//	ErrAttemptTimeout       context.DeadlineExceeded  timeout       –                    timeout
//	ErrCallTimeout          context.DeadlineExceeded  timeout       –                    timeout
//	http.ErrHandlerTimeout  –                         –             timeout (503)        timeout
//	ErrCircuitOpen          –                         breaker       route_breaker (503)  rejected
//	ErrHalfOpenBusy         ErrCircuitOpen            breaker       route_breaker (503)  rejected
//	ErrPaused               –                         pause         –                    rejected
//	ErrRateLimited          –                         rate_limit    rate_limit (429)     rejected
//	ErrConcurrencyLimit     –                         concurrency   shed (503)           rejected
//	ErrRetryBudget          –                         retry_budget  –                    rejected
//
// Every breaker rejection matches ErrCircuitOpen, a half-open breaker's
// also ErrHalfOpenBusy; every timeout of breakwater's matches
// context.DeadlineExceeded, as the standard library's own do. The inbound
// column is the mechanism of the middleware that answers the same
// rejection itself, with the status shown and a problem details body
// (see [Rejection]); the handler timeout's status is configurable.
var (
	// ErrCircuitOpen: the key's breaker is open (or half-open with its
	// probes busy, or a fault was injected); the upstream was not called.
	ErrCircuitOpen = errors.New("breakwater: circuit open")
	// ErrHalfOpenBusy: the breaker is half-open and all probe slots are
	// taken. It also matches ErrCircuitOpen.
	ErrHalfOpenBusy = errors.New("breakwater: circuit half-open, probe slots busy")
	// ErrPaused: the upstream asked the key to wait (a 429's Retry-After,
	// a spent quota, or 503s with Retry-After answering most of its recent
	// attempts) and the wait outlasts the caller's deadline.
	ErrPaused = errors.New("breakwater: paused by upstream")
	// ErrRateLimited: a token would not be available before the deadline.
	ErrRateLimited = errors.New("breakwater: rate limited")
	// ErrConcurrencyLimit: all in-flight slots are taken and the wait queue is
	// full or the wait would outlast the deadline.
	ErrConcurrencyLimit = errors.New("breakwater: concurrency limit reached")
	// ErrRetryBudget: the key's retry budget is spent; the call was not
	// retried. When an attempt timeout ended the attempt the budget
	// allowed no retry after, the error is ErrAttemptTimeout's alone.
	ErrRetryBudget = errors.New("breakwater: retry budget exhausted")
	// ErrAttemptTimeout: the attempt timeout ended an attempt, and the call
	// stopped with time left for another (its attempts, the retry budget
	// or its request body did not allow one). It is also the cause of an
	// attempt's context that hit the attempt timeout.
	ErrAttemptTimeout = errors.New("breakwater: attempt timeout")
	// ErrCallTimeout: the call timeout ended the call, or left no room
	// for the next attempt after an attempt timed out. It is also the
	// cause of a call's context that hit the call timeout.
	ErrCallTimeout = errors.New("breakwater: call timeout")
)

// ErrCallerDeadline is the cause ([context.Cause]) of a request context
// that [CallerHeaders] ended at the deadline its caller sent: the caller
// has given up on the answer. It is also the error beneath a bulkhead's
// refusal ([ErrConcurrencyLimit]; a [Shedder]'s, a Transport's
// concurrency limit) of a request serving a breakwater caller that it
// could not serve before the caller's deadline: its turn in the queue
// would come too late, or its slot came with too little time left for
// the work. errors.Is(e.Err, ErrCallerDeadline) tells such an
// [EventReject] from a refusal for want of room.
var ErrCallerDeadline = errors.New("breakwater: the caller's deadline passed")

// rejection is one row of the table of rejections in the sentinels'
// documentation: what [Classify], the observers, problem details and the
// docs all read.
type rejection struct {
	err     error // the sentinel
	parent  error // a coarser error it also matches; nil: none
	mech    Mechanism
	inbound Mechanism // the middleware's mechanism, when one answers it
	status  int       // and the status it answers with
	cat     Category
	// detail is the problem details' text when inbound middleware answer
	// the rejection; empty for rejections only a Transport makes.
	detail string
}

// rejections is the table. Timeouts come first: a call that a timeout
// ended, whatever else refused it afterwards, timed out.
var rejections = [...]rejection{
	{ErrAttemptTimeout, context.DeadlineExceeded, MechTimeout, "", 0, Timeout, ""},
	{ErrCallTimeout, context.DeadlineExceeded, MechTimeout, "", 0, Timeout, ""},
	{http.ErrHandlerTimeout, nil, "", MechTimeout, http.StatusServiceUnavailable, Timeout,
		"The server did not finish handling the request in time."},
	{ErrCircuitOpen, nil, MechBreaker, MechRouteBreaker, http.StatusServiceUnavailable, Rejected,
		"This route is failing and refuses requests for now. Retry after the delay in the Retry-After header."},
	{ErrHalfOpenBusy, ErrCircuitOpen, MechBreaker, MechRouteBreaker, http.StatusServiceUnavailable, Rejected,
		"This route is failing and refuses requests for now. Retry after the delay in the Retry-After header."},
	{ErrPaused, nil, MechPause, "", 0, Rejected, ""},
	{ErrRateLimited, nil, MechRateLimit, MechRateLimit, http.StatusTooManyRequests, Rejected,
		"Too many requests from this client. Retry after the delay in the Retry-After header."},
	{ErrConcurrencyLimit, nil, MechConcurrency, MechShed, http.StatusServiceUnavailable, Rejected,
		"The server is at capacity. Retry after the delay in the Retry-After header."},
	{ErrRetryBudget, nil, MechRetryBudget, "", 0, Rejected, ""},
}

// rowOf returns sentinel's row of the table, or nil.
func rowOf(sentinel error) *rejection {
	for i := range rejections {
		if rejections[i].err == sentinel {
			return &rejections[i]
		}
	}
	return nil
}

// rowOfMechanism returns the first row of the table of mechanism m, or nil.
func rowOfMechanism(m Mechanism) *rejection {
	for i := range rejections {
		if rejections[i].mech == m {
			return &rejections[i]
		}
	}
	return nil
}

// matchRow returns the first row of the table whose sentinel err matches,
// or nil. It reads err's chain once per row; a rejection matches early.
func matchRow(err error) *rejection {
	if err == nil {
		return nil
	}
	for i := range rejections {
		if errors.Is(err, rejections[i].err) {
			return &rejections[i]
		}
	}
	return nil
}

// mechanismOf names the mechanism behind one of our rejections, or "" for
// any other error (a timeout included: it is not a refusal).
func mechanismOf(err error) Mechanism {
	if r := matchRow(err); r != nil && r.cat == Rejected {
		return r.mech
	}
	return ""
}

// inboundStatus is the status an inbound middleware of mechanism m answers
// its rejections with.
func inboundStatus(m Mechanism) int {
	for _, r := range rejections {
		if r.inbound == m {
			return r.status
		}
	}
	return http.StatusServiceUnavailable
}

// problemDetail is the problem details' text for a rejection by m, an
// inbound middleware's mechanism.
func problemDetail(m Mechanism) string {
	for _, r := range rejections {
		if r.inbound == m {
			return r.detail
		}
	}
	return ""
}

// Error is the error of a call that breakwater refused, that one of its
// timeouts ended, that gave up after retrying, or that a safety rule kept
// from retrying (NotRetried). It matches its sentinel
// with errors.Is (see the table above: a half-open rejection matches
// [ErrHalfOpenBusy] and [ErrCircuitOpen], a timeout its own sentinel and
// [context.DeadlineExceeded]), unwraps to the error beneath it, and is a
// [net.Error] whose Timeout reports whether a timeout, ours or the
// transport's, ended the call, after any number of retries.
//
// A [Transport] returns an *Error for every error of a call that made
// more than one attempt, for each of its own refusals and timeouts, and
// for every error that a safety rule kept from being retried; the error of
// a single attempt that failed on its own (a connection refused, say) and
// that nothing kept from a retry (its attempts ran out) is returned
// unwrapped. The values a breaker returns for
// its rejections are shared and must not be modified. An Error made by
// hand (a test's stand-in for a refusal) matches the first sentinel of
// its Mechanism in the table.
type Error struct {
	// Key is the key of the upstream (outbound) or client or route
	// (inbound) the call was counted under; empty for a timeout of a stage
	// used on its own.
	Key string
	// Mechanism names what refused or ended the call: one of the
	// mechanisms of the table above, or "" when the call gave up after
	// retrying on the upstream's own failures.
	Mechanism Mechanism
	// Attempts is the number of the call's attempts that reached the
	// upstream (0 when it was refused before any).
	Attempts int
	// Until is when the mechanism stops refusing: the end of an open
	// breaker's open time, of a pause, the time of the next token; zero
	// when it does not know (see [RetryAfter]).
	Until time.Time
	// Err is the error beneath: the transport's error for a timeout, the
	// last attempt's error after retries; nil for a refusal.
	Err error
	// Injected marks a breaker rejection made by fault injection (see
	// [WithFaultInjection]): a rehearsal, not an outage.
	Injected bool
	// NotRetried names the safety rule that kept the call from retrying
	// the attempt whose error it returns, although its outcome called for
	// a retry: [ReasonNotIdempotent] (a POST without an Idempotency-Key
	// that may have reached the server), [ReasonBodyNotReplayable] or
	// [ReasonBodyTooLarge], and the message ends with "(not retried: …)";
	// empty otherwise. A call that returns a response has no error:
	// [CallReport] says the same of it.
	NotRetried Reason

	sentinel error // the table row's; nil after retries on another error
	shared   bool  // a breaker's value: copy before setting Attempts
	// A concurrency refusal's details, for the message.
	limit, inFlight int
	waited          time.Duration
}

// rejected returns the *Error of a refusal by sentinel's mechanism.
func rejected(sentinel error, key string, until time.Time) *Error {
	return &Error{Key: key, Mechanism: rowOf(sentinel).mech, Until: until, sentinel: sentinel}
}

// timedOut returns the *Error of a timeout with cause ErrAttemptTimeout or
// ErrCallTimeout over err, the transport's error.
func timedOut(cause, err error) *Error {
	return &Error{Mechanism: MechTimeout, Err: err, sentinel: cause}
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Attempts > 1 {
		fmt.Fprintf(&b, "breakwater: giving up on %q after %d attempts: ", e.Key, e.Attempts)
	}
	e.describe(&b)
	if e.NotRetried != "" {
		b.WriteString(" (not retried: " + notRetriedText(e.NotRetried) + ")")
	}
	return b.String()
}

// Safety rules: the reasons a request is sent once, though its outcome
// called for a retry ([EventRetrySkipped], [Error].NotRetried,
// [CallReport].NotRetried), or is not hedged ([EventHedgeSkipped],
// [CallReport].NotHedged).
const (
	// ReasonNotIdempotent: the method is not idempotent (POST, PATCH,
	// CONNECT, …) and the request carries no Idempotency-Key or
	// X-Idempotency-Key header; nor did [WithRetryNonIdempotent] or the
	// request's [RequestPolicy].Idempotent declare it safe to repeat (only
	// the policy counts for a hedge). Such a request is retried only when
	// its attempt provably never reached the server.
	ReasonNotIdempotent Reason = "not_idempotent"
	// ReasonBodyNotReplayable: the request has a body and no GetBody to
	// send it again, and [WithBodyBuffering] is off.
	ReasonBodyNotReplayable Reason = "body_not_replayable"
	// ReasonBodyTooLarge: the request has a body and no GetBody, and the
	// body is longer than the [WithBodyBuffering] limit (or could not be
	// read), so it was sent unbuffered.
	ReasonBodyTooLarge Reason = "body_too_large"
	// ReasonPushback: a breakwater server asked not to be retried
	// ([WithPropagation]): Breakwater-Pushback: none (it retried the
	// failure it reports already), or elsewhere with no other endpoint to
	// go to (with [WithFailover], the retry goes to another at once).
	ReasonPushback Reason = "pushback"
)

// notRetriedText says in words why a safety rule kept a call from
// retrying.
func notRetriedText(r Reason) string {
	switch r {
	case ReasonNotIdempotent:
		return "the method is not idempotent and the request has no Idempotency-Key"
	case ReasonBodyNotReplayable:
		return "the body cannot be replayed: no GetBody, and WithBodyBuffering is off"
	case ReasonBodyTooLarge:
		return "the body cannot be replayed: no GetBody, and it exceeds the WithBodyBuffering limit"
	case ReasonPushback:
		return "the server asked not to be retried (Breakwater-Pushback)"
	}
	return string(r)
}

// describe writes what refused or ended the call.
func (e *Error) describe(b *strings.Builder) {
	left := func() time.Duration { return max(0, time.Until(e.Until)).Round(time.Millisecond) }
	on := func(prep string) string {
		if e.Key == "" {
			return ""
		}
		return fmt.Sprintf(" %s %q", prep, e.Key)
	}
	switch e.sentinel {
	case ErrCircuitOpen:
		if e.Injected {
			fmt.Fprintf(b, "breakwater: circuit open%s (fault injected)", on("for"))
		} else {
			fmt.Fprintf(b, "breakwater: circuit open%s (%s remaining)", on("for"), left())
		}
	case ErrHalfOpenBusy:
		fmt.Fprintf(b, "breakwater: circuit half-open%s, probe slots busy", on("for"))
	case ErrPaused:
		fmt.Fprintf(b, "breakwater: paused by upstream%s (%s remaining)", on("on"), left())
	case ErrRateLimited:
		fmt.Fprintf(b, "breakwater: rate limited%s (next token in %s)", on("on"), left())
	case ErrConcurrencyLimit:
		fmt.Fprintf(b, "breakwater: concurrency limit reached%s (%d in flight, limit %d)", on("on"), e.inFlight, e.limit)
		if e.waited > 0 {
			fmt.Fprintf(b, " after waiting %s", e.waited.Round(time.Millisecond))
		}
		if e.Err == ErrCallerDeadline {
			b.WriteString(": the caller's deadline cannot be met")
		}
	case ErrRetryBudget:
		fmt.Fprintf(b, "breakwater: retry budget exhausted%s", on("on"))
		if e.Err != nil {
			b.WriteString(": " + e.Err.Error())
		}
	case nil: // the upstream's own failure, after retries
		if e.Err != nil {
			b.WriteString(e.Err.Error())
		}
	default: // a timeout: the transport's error names it, or is wrapped in it
		switch {
		case e.Err == nil:
			b.WriteString(e.sentinel.Error())
		case errors.Is(e.Err, e.sentinel):
			b.WriteString(e.Err.Error())
		default:
			b.WriteString(e.sentinel.Error() + ": " + e.Err.Error())
		}
	}
}

// Is reports whether target is e's sentinel or the coarser error that
// sentinel also matches (see the table above).
func (e *Error) Is(target error) bool {
	var r *rejection
	if e.sentinel != nil {
		r = rowOf(e.sentinel)
	} else if e.Mechanism != "" {
		r = rowOfMechanism(e.Mechanism)
	}
	return r != nil && target != nil && (target == r.err || target == r.parent)
}

// Unwrap returns the error beneath, if any.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether a timeout ended the call: one of breakwater's,
// or one that the error beneath reports (a response header timeout, the
// caller's deadline).
func (e *Error) Timeout() bool {
	return e.Mechanism == MechTimeout || e.Err != nil && anyInChain(e.Err, isTimeout)
}

// Temporary reports the same as Timeout; it makes *Error a [net.Error].
func (e *Error) Temporary() bool { return e.Timeout() }

// withAttempts returns e counted for a call under key that made n
// attempts: e itself, or a copy of a value a breaker shares.
func (e *Error) withAttempts(key string, n int) *Error {
	if e.Attempts == n && (e.Key != "" || key == "") {
		return e
	}
	if e.shared {
		c := *e
		c.shared = false
		e = &c
	}
	if e.Key == "" {
		e.Key = key
	}
	e.Attempts = n
	return e
}

// RetryAfter reports how long the caller should wait before trying again,
// when err (or an error it wraps) is a breakwater [*Error] that knows: an
// open breaker, a pause, a rate limit. ok is false when err carries no
// hint or its time has passed, so d is positive whenever ok is true. A
// server can answer a downstream rejection with its own 503 and
// Retry-After in one line.
func RetryAfter(err error) (d time.Duration, ok bool) {
	var e *Error
	if !errors.As(err, &e) || e.Until.IsZero() {
		return 0, false
	}
	if d = time.Until(e.Until); d <= 0 {
		return 0, false
	}
	return d, true
}

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
	// header, already set when a deny handler ([WithDenyHandler]) runs,
	// carries it in whole seconds, rounded up and at least 1.
	RetryAfter time.Duration
	// Key is the key the mechanism rejected: the client key of a rate
	// limit, the route key of a route breaker; empty otherwise.
	Key string
	// Err matches the rejection's sentinel with errors.Is:
	// [ErrConcurrencyLimit], [ErrRateLimited], [ErrCircuitOpen] or
	// [ErrHalfOpenBusy], or [http.ErrHandlerTimeout].
	Err error
}

// Mechanisms returns every mechanism, for metric label sets.
func Mechanisms() []Mechanism {
	var out []Mechanism
	for _, r := range rejections {
		for _, m := range [...]Mechanism{r.mech, r.inbound} {
			if m != "" && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// isTimeout reports whether err has a Timeout() bool method that reports true.
func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// anyInChain reports whether f holds for err or anything err wraps, walking
// the tree as errors.Is does. errors.As is not enough for timeouts: it stops
// at the first match, and *url.Error has a Timeout method that looks only one
// level down.
func anyInChain(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if anyInChain(e, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
