package breakwater

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// The headers breakwater services speak to each other in (see
// [WithPropagation] and [CallerHeaders]).
const (
	// headerTimeout is the time the attempt has left, in whole
	// milliseconds: relative, so that the two clocks need not agree.
	headerTimeout = "Breakwater-Timeout-Ms"
	// headerAttempt is the attempt's number and the most the call makes,
	// an RFC 8941 integer with a parameter: "2;max=3".
	headerAttempt = "Breakwater-Attempt"
	// headerPushback, on an answer, tells the caller what to do; "none":
	// do not retry, the server already retried the failure it reports;
	// "elsewhere": not here, this replica is shedding or its route is
	// broken, another may serve it.
	headerPushback    = "Breakwater-Pushback"
	pushbackNone      = "none"
	pushbackElsewhere = "elsewhere"
)

// WithPropagation, when on, makes the Transport speak to the breakwater
// services it calls, and listen to them:
//
//   - Each attempt carries Breakwater-Timeout-Ms, the whole milliseconds it
//     has left (its attempt timeout or the call's deadline, whichever comes
//     first), and Breakwater-Attempt, its number and the call's most
//     attempts ("2;max=3"). A server behind [CallerHeaders] bounds its work
//     by the first and tells its handlers the second.
//   - An answer with Breakwater-Pushback: none is not retried: the server
//     retried the failure it reports already. It counts for the breaker as
//     its status does.
//   - One tier retries. A call made while serving a request that
//     [CallerHeaders] read from a breakwater caller that may retry it makes
//     at most two attempts, and one only when that request is itself a
//     retry; when such a call fails after an attempt was sent (an error, or
//     a 5xx answer; not a refusal of this Transport's own, an open breaker
//     say, which the caller's retry may find gone), a 5xx answer to the
//     request carries Breakwater-Pushback: none, and the caller does not
//     retry it. In a chain of services, the tier next to the failure
//     retries once and no tier above it does: the failing service sees at
//     most two requests per call of the first, where three tiers of three
//     attempts would send it up to 27. A caller that makes one attempt per
//     call (max=1) leaves this tier its own attempts.
//
// The headers are names of breakwater's own, so that no proxy or server
// reads them as its own protocol's (Envoy's x-envoy-* headers and gRPC's
// grpc-timeout are those of their stacks). They are sent to every upstream
// the Transport calls, and cost each attempt a copy of its header map; keep
// propagation off for upstreams outside your fleet. It configures
// [NewTransport]. Default: off.
func WithPropagation(on bool) Option {
	return transportOption("WithPropagation", false, func(c *config) { c.propagate = on })
}

// propagate returns req, as attempt n of at most most sends it under ctx,
// carrying the propagation headers; orig is the caller's request, which is
// never changed.
func propagate(req, orig *http.Request, ctx context.Context, n, most int) *http.Request {
	if req == orig {
		req = req.WithContext(ctx)
	}
	h := req.Header.Clone()
	if h == nil {
		h = make(http.Header, 2)
	}
	if dl, ok := ctx.Deadline(); ok {
		h[headerTimeout] = []string{strconv.FormatInt(max(time.Until(dl).Milliseconds(), 0), 10)}
	} else {
		delete(h, headerTimeout) // a caller's header passed on is not this attempt's
	}
	h[headerAttempt] = []string{strconv.Itoa(n) + ";max=" + strconv.Itoa(most)}
	if v := criticalityHeader(criticalityOf(ctx)); v != "" {
		h[headerCriticality] = []string{v}
	} else {
		delete(h, headerCriticality)
	}
	req.Header = h
	return req
}

// caller is what a trusted breakwater caller said of a request, kept in
// its context by CallerHeaders.
type caller struct {
	attempt, max int // 0, 0: it did not say
	// failed: a propagating Transport's call made while serving the request
	// failed after the retries this tier allows.
	failed atomic.Bool
}

type callerKey struct{}

func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// attempts returns the attempts a call serving c's request may make, the
// Transport allowing configured.
func (c *caller) attempts(configured int) int {
	switch {
	case c.max <= 1:
		return configured // the caller does not retry: this tier does
	case c.attempt >= 2:
		return 1 // serving a retry: the caller retries, not this tier
	default:
		return min(configured, 2)
	}
}

// CallerAttempt returns the attempt number and the most attempts of its
// call that a breakwater caller ([WithPropagation]) sent with the request
// whose context is ctx, as [CallerHeaders] read them: (1, 3) for the first
// of up to three attempts. It returns (0, 0) when the request carried none,
// or came from a peer CallerHeaders does not trust. A handler may do less
// for a retry, or log it.
func CallerAttempt(ctx context.Context) (n, max int) {
	if c := callerOf(ctx); c != nil {
		return c.attempt, c.max
	}
	return 0, 0
}
