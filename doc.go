// Package breakwater makes HTTP calls survive bad days, on both sides of a
// service.
//
// Outbound, [Transport] is an [http.RoundTripper] for any [http.Client] that
// runs each call through a call timeout, a retry loop, a per-host circuit
// breaker, rate and concurrency limits and a per-attempt timeout. Every stage
// reads the same classification of an attempt (see [Category]), so a 429 with
// Retry-After pauses the host instead of tripping its breaker, a caller's own
// cancellation never counts against the upstream, and a POST is retried only
// when it provably never reached the server.
//
// Inbound, [ClientRateLimit], [RouteBreaker], [Shedder] and [HandlerTimeout]
// are middleware whose Middleware method is a func(http.Handler)
// http.Handler: it mounts on chi with r.Use or r.With and wraps any net/http
// handler.
//
// # Outcome categories
//
// A [Classifier] maps one attempt's (*http.Response, error) to an [Outcome].
// The default, [Classify], follows the table in the [Category] documentation.
//
// # Circuit breakers
//
// [Breakers] holds one [Breaker] per key (by default the request's host and
// port, see [HostKey]). A breaker counts failing calls with a [Policy] (a sliding
// window, consecutive failures or a failure rate), opens, waits an open
// duration that grows on each consecutive reopen, and then lets a bounded
// number of probes through before closing again. The default policy is
// volume-aware: it opens on the 11th failing call within its window (the
// 5th that timed out) once at least half of the calls made since the first
// of them failed, so that a failure rate that retries absorb never opens
// it while a total outage opens it as fast as a plain count would (see
// [WithPolicy] and [Policy.WithRatio]).
//
// # Charging the breaker
//
// A [Transport] charges each call to its breaker at most once, as what its
// own attempts showed:
//
//   - An answer the breaker counts as a success (2xx, 3xx, a 4xx other
//     than 408 and 429) is recorded at once, and the call is charged
//     nothing for the failures that came before it: it recovered.
//   - A failure (a 5xx without Retry-After, 408, 504, our attempt timeout,
//     a network error) on which the call gives up is charged at once. A
//     failure that a retry follows stays pending, and is charged when the
//     call ends without a later answer: once, with the last failure's
//     category.
//   - Neutral outcomes are never charged and never erase a pending
//     failure: a 429, a 503 with Retry-After (the pause gate's business),
//     501 and 505, and the caller's own cancellation.
//   - An attempt that the caller's deadline cut is a hang, charged as a
//     timeout, when it had waited at least twice as long as the key's
//     slowest answer of the last minute or two, and at least a second; a
//     shorter one is the caller's impatience, and neutral. An explicit
//     cancellation is always neutral.
//   - When a local limit (the pause gate, a rate limit, a bulkhead) or the
//     retry budget refuses the retry, when the request body cannot be
//     replayed, and when the caller cancels or the call timeout passes
//     during the backoff, the call ends and its pending failure is charged.
//   - When the breaker itself refuses the retry (it opened meanwhile) the
//     pending failure is dropped: the call is not charged, as in
//     ExternalService.
//   - A half-open probe's outcome is recorded at once, and with
//     [WithMeltPerAttempt] every failing attempt is.
//   - With [WithHedging], an attempt that fails while a hedge of it (or the
//     attempt it hedges) still runs is a failure a retry follows: pending.
//     An attempt cancelled because another answered first is neutral.
//
// The retry budget ([WithRetryBudget]) allows retries up to 20 % of calls
// plus 3 per second per key, and gives back a retry that succeeds: it caps
// the retries that did not help, so it binds in a storm and not in a flap.
//
// # Rate limits, pauses and bulkheads
//
// [RateLimiters] keeps a token bucket per key (on golang.org/x/time/rate)
// that waits for a token within the caller's deadline or refuses at once;
// [PauseGates] holds a key while its upstream asked it to wait (a 429's
// Retry-After or a spent quota in RateLimit fields; 503s with Retry-After
// only when they answer most of its attempts), and releases the calls it
// held one probe first, then spread out; [Bulkheads]
// bound the requests in flight per key, with an optional FIFO queue and an
// adaptive limit ([AIMD], [Gradient]). A [Transport] runs them for every
// attempt, after the breaker admits it; each is also usable on its own, as
// inbound middleware does.
//
// # Hedging and failover
//
// [WithHedging] sends a copy of a slow attempt of a call that may be
// repeated and takes whichever answers first; [WithFailover] spreads a
// Transport's calls over several endpoints of one logical upstream, with
// per-endpoint state, health tiers and outlier ejection. Both live inside
// the retry loop: hedges and the attempts sent to each endpoint are
// attempts like any other, admitted by the same stages and counted by the
// same budgets.
//
// # Inbound middleware
//
// Mount them outermost first in this order: [ClientRateLimit] turns an
// abusive client away before it costs anything; [RouteBreaker] fails fast
// on a route whose handler keeps failing, without taking a slot;
// [Shedder] bounds the requests in progress, with a short queue; and
// [HandlerTimeout] bounds each handler, its timeouts counting against the
// route breaker and an adaptive limit. Rejections are RFC 9457
// application/problem+json responses with Retry-After (see [WriteProblem]
// and [WithDenyHandler]). Clients are keyed by [RemoteAddrKey] (IPv6 by
// /64), [ForwardedForKey] behind trusted proxies, [HeaderKey], or any
// [KeyFunc]; routes by [RouteKey], the chi route pattern.
//
// Every inbound middleware is a value built by a constructor that checks
// its configuration and returns an error for a bad one (New…(essential
// arguments, options…) (*T, error)); its Middleware method has the shape
// func(http.Handler) http.Handler, so it mounts on chi with
// r.Use(t.Middleware) or r.With(t.Middleware) and wraps any net/http
// handler. The values, not bare functions, are the API because they own
// state a program needs to reach after mounting: breakers to trip or reset,
// snapshots for a status page, and Close for the per-client store. Nothing
// is validated or can fail per request.
//
// Stacked breakwater middleware share one wrapped ResponseWriter and report
// one [EventRequest] per request (from the outermost middleware that has an
// observer); each rejection is also reported as an [EventReject] by the
// middleware that made it. A middleware of another library that wraps the
// ResponseWriter between two of them hides the outer wrapper: the inner one
// then wraps again and, if it has an observer, reports the request too.
//
// # Observing and explaining
//
// An [Observer] given with [WithObserver] or [WithInboundObserver] receives
// every call, attempt, retry, rejection, wait and breaker transition as an
// [Event]; [WithLogger] logs them through log/slog, the prom subpackage
// exports them to Prometheus, and the otelbw module to OpenTelemetry, as
// metrics and span events (a base transport reads which attempt it is
// running with [AttemptFromContext]). [Transport.Snapshot] and
// [SnapshotHandler] show the state of every breaker, bucket, pause and
// bulkhead, with the plain-words findings of an [Insights] observer; the
// status subpackage serves them as a live page for operators.
// [Transport.Explain] describes a configuration in words, and
// [Transport.Simulate] runs it, with the transport's own breaker, against
// an imagined outage in virtual time; the timeline subpackage draws either
// real or simulated traffic as SVG. A [Config] holds a configuration as
// JSON, the schema the breakwater command (cmd/breakwater) explains,
// simulates and checks in CI.
//
// # Composing stages
//
// [NewTransport] builds the recommended order in one piece. [Chain] composes
// [CallTimeout], [RetryStage], [BreakerStage], [AttemptTimeout] and stages
// of your own in any order, first listed outermost; a breaker stage inside
// a retry stage is still charged once per call that gives up.
package breakwater
