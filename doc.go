// Package breakwater makes HTTP calls survive bad days, on both sides of a
// service.
//
// Outbound, [Transport] is an [http.RoundTripper] for any [http.Client] that
// runs each call through a call timeout, a retry loop, a per-host circuit
// breaker, a pause gate, rate and concurrency limits and a per-attempt
// timeout. Every stage reads the same classification of an attempt (see
// [Category]), so a 429 with Retry-After pauses the host instead of
// tripping its breaker, a caller's own cancellation never counts against
// the upstream, and a POST is retried only when it provably never reached
// the server.
//
// Inbound, [ClientRateLimit], [RouteBreaker], [Shedder] and
// [HandlerTimeout] return middleware, func(http.Handler) http.Handler: it
// mounts on chi with r.Use or r.With and wraps any net/http handler.
//
// # Options
//
// Every constructor takes [Option] values and returns an error that joins
// every invalid one, never a panic and never a surprise at request time.
// An option given to a constructor it does not apply to is such an error,
// which names both. Four rules name the options:
//
//   - Configure a stage with the options of the constructor that builds it.
//     The breaker options ([WithPolicy], [WithOpenTimeout], ...) configure
//     the breakers of [NewTransport] or [NewBreakers]; the limits that are
//     off by default are added with their own options nested:
//     WithRateLimit(limit, burst, WithMaxWait(0)).
//   - Share a stage's state by giving its registry, with the option named
//     after the registry's type: [WithBreakers], [WithPauseGates],
//     [WithRateLimiters], [WithBulkheads]; [WithClusterBus] shares with
//     other replicas.
//   - Switch a stage off with Without… when it keeps state and is on by
//     default ([WithoutBreaker], [WithoutPauseGate],
//     [WithoutRetryBudget], [WithoutCongestionLimit]); with zero when it is a number (a timeout of 0,
//     WithMaxAttempts(1)). A stage configured, shared or switched off in
//     two of these ways is a construction error.
//   - A switch takes a bool: WithShadowMode(true). One option does one job
//     wherever it applies: [WithKeyLimits] bounds every registry's keys,
//     [WithMaxWait] every wait, [WithObserver] every observer.
//
// An option given twice to one constructor is a construction error that
// names it: one of the two would be dropped without a word. Only the
// options that add are repeatable, [WithObserver] and [WithCountAsFailure];
// options given after a [Config] override the fields it sets. What may be
// meant is not an error but a warning, an [EventWarning] to a Transport's
// observers while it is built: a call timeout no longer than the first
// wait between attempts ([ReasonRetriesDoNotFit]; [Transport.Explain] says
// how many attempts fit), a base that is another Transport
// ([ReasonStackedTransport]).
//
// The options by concern, where they apply (T: [NewTransport], R:
// [RetryStage], B: [NewBreakers], P: [NewPauseGates], L: [WithRateLimit]
// and [NewRateLimiters], C: [WithConcurrencyLimit] and [NewBulkheads], M:
// the inbound middleware), and their defaults:
//
//	timeouts
//	  WithCallTimeout(d)               T               30s; 0: none
//	  WithAttemptTimeout(d)            T               10s, or the call timeout when shorter; 0: none
//	retries
//	  WithMaxAttempts(n)               T R             3; 1: no retries
//	  WithBackoff(b)                   T R             ExponentialJitter(100ms, 5s); Retry-After on top; a 502's first retry at once
//	  WithRetryIf(fn)                  T R             retry what Category.Retryable says
//	  WithRetryNonIdempotent(on)       T R             off: POST and PATCH only when provably not sent
//	  WithBodyBuffering(max)           T R             0: a body without GetBody is sent once
//	  WithRetryBudget(r, f, w)         T R             0.2 of calls + 3/s per key, over 10s; the floor lost after 5 failures in a row
//	  WithoutRetryBudget()             T R
//	  WithMaxRetryAfter(d)             T R P           2m: the longest hint honoured, and pause
//	between breakwater services
//	  WithPropagation(on)              T               off: no deadline, attempt or pushback headers
//	classification
//	  WithClassifier(c)                T R             Classify
//	  WithSlowCallThreshold(d)         T R             off
//	circuit breaker
//	  WithPolicy(p)                    T B             Window(10, auto).WithRatio(0.5), 5 for a timeout
//	  WithOpenTimeout(base, max)       T B             100ms, then 1/32 of the outage's age, up to 60s
//	  WithOpenJitter(f)                T B             0.1
//	  WithHalfOpen(probes, successes)  T B             1 (doubling per success) and 2
//	  WithProbeTimeout(d)              T B             the attempt timeout; 10s for NewBreakers
//	  WithCountAsFailure(cats...)      T B             none: 401/403/407 succeed, 429 is neutral
//	  WithChargePerAttempt(on)         T R             off: charged once per call that gives up
//	  WithShadowMode(on)               T B             off
//	  WithFaultInjection(rate)         T B             0
//	  WithBreakers(bs)                 T               the transport's own
//	  WithoutBreaker()                 T
//	pause gate
//	  WithRateLimitHeaders(on)         T R P           on: paced on RateLimit and X-RateLimit-* fields
//	  WithMaxWait(d)                   T R P           until the call's deadline
//	  WithPauseGates(g)                T R             the transport's own
//	  WithoutPauseGate()               T R
//	limits
//	  WithoutCongestionLimit()         T R             on: in flight bounded while latency says requests queue
//	  WithRateLimit(limit, burst, o…)  T               none
//	  WithRateLimiters(rl)             T               none
//	  WithConcurrencyLimit(n, o…)      T               none
//	  WithBulkheads(bs)                T               none
//	  WithMaxWait(d)                   L C             5s, within the call's deadline; 0: refuse at once
//	  WithMaxQueue(n)                  C               0: no bound but the wait
//	  WithQueueTarget(target, int)     C               off; 5ms, 100ms: a standing queue's waits bounded (not Critical's)
//	  WithAdaptiveLimit(a)             C               a fixed limit
//	  WithSharedLimiter(s)             L               this replica's own
//	hedging and failover
//	  WithHedging(h)                   T               none
//	  WithFailover(f)                  T               none
//	keys and state
//	  WithKeyFunc(fn)                  T R M           HostKey; RouteKey for RouteBreaker; one group for Shedder
//	  WithKeyLimits(n, idle)           T R B P L C     10 000 keys, evicted after 10m idle
//	  WithClusterBus(bus)              T R B P         this replica's own
//	observing
//	  WithObserver(o)                  T R B M         none; given twice, both observe
//	  WithInsights(on)                 T R             off
//	transport
//	  WithBase(rt)                     T               a clone of http.DefaultTransport
//	inbound middleware
//	  WithDenyHandler(fn)              M               WriteProblem: RFC 9457 problem details
//	  WithExempt(fn)                   M               none
//	  WithRateLimitPolicyName(name)    ClientRateLimit "default"
//	  WithXRateLimitHeaders(on)        ClientRateLimit off
//	  WithShedRetryAfter(min, max)     Shedder         1s to 2s
//	  WithTimeoutStatus(code)          HandlerTimeout  503
//
// [WithRequestPolicy] sets the attempts and the timeouts of one call
// through its context. A [Config] holds the same configuration as JSON,
// for files that CI checks with the breakwater command (cmd/breakwater).
//
// # Outcome categories
//
// A [Classifier] maps one attempt's (*http.Response, error) to an [Outcome].
// The default, [Classify], follows the table in the [Category] documentation.
//
// # Circuit breakers
//
// [Breakers] holds one [Breaker] per key (by default the request's host and
// port, see [HostKey]). A breaker counts failing calls with a [Policy] (a
// sliding window, consecutive failures or a failure rate), opens, waits an
// open duration that grows on each consecutive reopen, and then lets a
// bounded number of probes through before closing again. The default
// policy is volume-aware: it opens on the 11th failing call within its
// window (the 5th that timed out) once at least half of the calls made
// since the first of them failed, so that a failure rate that retries
// absorb never opens it while a total outage opens it as fast as a plain
// count would (see [WithPolicy] and [Policy.WithRatio]).
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
//     501 and 505, and the caller's own cancellation. The congestion limit
//     learns from every answer's latency and the pause gate from 429s and
//     503s with a hint, whatever the breaker is charged.
//   - An attempt that the caller's deadline cut is a hang, charged as a
//     timeout, when it had waited at least twice as long as the key's
//     slowest answer of the last minute or two, and at least a second; a
//     shorter one is the caller's impatience, and neutral. An explicit
//     cancellation is always neutral.
//   - A refusal by a local limit is never charged itself: it is no answer
//     of the upstream. When a local limit (the pause gate, a rate limit, a
//     bulkhead, the congestion limit) or the
//     retry budget refuses the retry, when the request body cannot be
//     replayed, and when the caller cancels or the call timeout passes
//     during the backoff, the call ends and its pending failure is charged.
//   - When the breaker itself refuses the retry (it opened meanwhile) the
//     pending failure is dropped: the call is not charged twice for one
//     outage.
//   - A half-open probe's outcome is recorded at once, and with
//     WithChargePerAttempt(true) every failing attempt is.
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
// [RateLimiters] keeps a token bucket per key; [PauseGates] holds a key
// while its upstream asked it to wait (a 429's Retry-After or a spent
// quota in RateLimit fields; 503s with Retry-After only when they answer
// most of its attempts), and releases the calls it held one probe first,
// then spread out; [Bulkheads] bound the requests in flight per key, with
// an adaptive limit if asked ([AIMD], [Gradient]). Each waits for its turn
// by default, in arrival order, within the call's deadline and up to its
// [WithMaxWait], and refuses with an [*Error] when the wait would be
// longer. A [Transport] runs them for every attempt, after the breaker
// admits it (an attempt that waits out a pause gives its half-open probe
// lease back meanwhile, and the breaker is asked again after it), and
// checks the gate again after an attempt waited for a token or a slot: no
// attempt reaches a key inside its pause, whatever it waited for; each
// registry is also usable on its own, as inbound middleware does.
//
// Before all of them, a Transport bounds each key's attempts in flight
// while, and only while, their latency says requests queue at the
// upstream: the congestion limit, on by default ([WithoutCongestionLimit]
// switches it off). It engages when the median and the low quantile of a
// window of 32 answers are both more than 4 times their usual values, two
// windows in a row, with at least 20 attempts in flight; the limit then
// follows a gradient (it shrinks as the median rises, at most halving per
// window, never below 20, and grows by √limit per window without
// queueing) and ends as soon as under half of it is used. A slow answer
// here and there moves no median; a latency that rose while this process
// had few attempts in flight is taken as the new usual, since limiting
// them would not bring it down. An attempt over the limit is refused at
// once with an [*Error] matching [ErrConcurrencyLimit] (Rejected: not
// retried, not charged to the breaker), instead of joining a queue where
// it would wait past its caller's deadline while the upstream works on
// requests nobody waits for; with [WithFailover], it goes to another
// endpoint whose limit has room.
//
// # Errors
//
// A call that ends without a success returns what its last attempt
// returned, as a bare [http.Client] would: a response (a 503 when the
// attempts ran out, a 429 whose Retry-After was too long) with a nil
// error, or an error. Check resp.StatusCode as you would without
// breakwater. A retry that the breaker or a limit refuses ends the call
// with that refusal. The error of a call that failed is the upstream's own after
// one attempt, else an [*Error] with the attempts made that wraps the last
// attempt's error; a refusal or a timeout of breakwater's is an [*Error]
// that matches one sentinel (see [ErrCircuitOpen] for the table). Through
// the *url.Error that [http.Client.Do] wraps it in, errors.Is and
// errors.As see:
//
//   - errors.Is(err, context.DeadlineExceeded), and os.IsTimeout(err),
//     for every timeout, after any number of retries: [ErrCallTimeout]
//     when the call timeout ended the call or left no room for another
//     attempt, [ErrAttemptTimeout] when the attempt timeout ended the last
//     attempt and the call stopped with time left (its attempts, the retry
//     budget or its body allowed no other), the caller's own
//     context.DeadlineExceeded when the caller's deadline came first;
//   - errors.Is(err, ErrCircuitOpen) for every breaker rejection (a
//     half-open breaker's also matches [ErrHalfOpenBusy]), and
//     errors.Is(err, ErrRateLimited), ErrConcurrencyLimit, ErrPaused or
//     ErrRetryBudget for the other refusals;
//   - [RetryAfter](err) for when a refused call may be made again, never
//     0 with true;
//   - errors.As(err, &e) with e an *[Error] for the key, the mechanism,
//     the attempts made, and the safety rule that kept the call from a
//     retry its outcome called for ([Error].NotRetried).
//
// No safety rule is silent. A request that is not idempotent (a POST
// without an Idempotency-Key, [ReasonNotIdempotent]) or whose body cannot
// be replayed ([ReasonBodyNotReplayable], [ReasonBodyTooLarge]) is sent
// once: a retry its outcome called for is an [EventRetrySkipped] naming
// the rule, the error's NotRetried, or, for a call that returns a
// response, the [CallReport] attached with [WithCallReport]; a call that
// hedging skips for the same rules is an [EventHedgeSkipped] and the
// report's NotHedged. [Transport.Explain] lists which requests are sent
// once, and why.
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
// [Shedder] bounds the requests in progress; and [HandlerTimeout] bounds
// each handler, its timeouts counting against the route breaker and an
// adaptive limit. Rejections are RFC 9457 application/problem+json
// responses with Retry-After (see [WriteProblem] and [WithDenyHandler]).
// Clients are keyed by [RemoteAddrKey] (IPv6 by /64), [ForwardedForKey]
// behind trusted proxies, [HeaderKey], or any [KeyFunc]; routes by
// [RouteKey], the chi route pattern.
//
// Each constructor checks its configuration and returns the middleware or
// an error; nothing is validated or can fail per request. The state a
// program reaches after mounting lives in the registry the middleware is
// given: the [Breakers] of a RouteBreaker to trip or reset routes, the
// [RateLimiters] of a ClientRateLimit, the [Bulkheads] of a Shedder, each
// with a Snapshot for a status page.
//
// Between breakwater services, [CallerHeaders], mounted first, reads what a
// trusted caller's propagating Transport ([WithPropagation]) sends: the
// time its attempt has left becomes the request's deadline, so that a
// Shedder refuses at once what its queue would hold past it and the
// handler's own calls work within it; the attempt number reaches handlers
// through [CallerAttempt] and keeps the retries to one tier, the one next
// to the failure, whose failed answer tells the caller not to retry; a
// request's [Criticality] travels with it and orders every queue it meets.
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
// An [Observer] given with [WithObserver] receives every call, attempt,
// retry, rejection, wait and breaker transition as an [Event];
// [LogObserver] logs them through log/slog, the prom subpackage exports
// them to Prometheus, and the otelbw module to OpenTelemetry, as metrics
// and span events (a base transport reads which attempt it is running with
// [AttemptFromContext]). [Transport.Snapshot] and the registries' Snapshot
// methods show the state of every breaker, bucket, pause and bulkhead,
// with the plain-words findings of [WithInsights]; the status subpackage
// serves them as a live page for operators. [Transport.Explain] describes
// a configuration in words, and [Transport.Simulate] runs it, with the
// transport's own breaker, against an imagined outage in virtual time; the
// timeline subpackage draws either real or simulated traffic as SVG.
//
// # Composing stages
//
// [NewTransport] builds the recommended order in one piece. [Chain] composes
// [CallTimeout], [RetryStage], [BreakerStage], [AttemptTimeout] and stages
// of your own in any order, first listed outermost; a breaker stage inside
// a retry stage is still charged once per call that gives up.
//
// # Glossary
//
//   - call: one RoundTrip, all its attempts, waits and body included.
//   - attempt: one request sent to the base transport; a retry or a
//     hedge is another attempt of the same call.
//   - key: what state is kept under, an upstream host outbound, a client
//     or a route inbound (see [KeyFunc]).
//   - closed, open, half-open: a breaker that admits calls, one that
//     refuses them for its open duration, and one that lets a few probes
//     through to find out whether the upstream is back ([State]).
//   - probe: an attempt a half-open breaker admits; its outcome closes the
//     breaker or opens it again, for longer.
//   - trip: open a breaker by hand ([Breaker.Trip]) or, on another replica,
//     by a message on the cluster bus.
//   - charge: record a failure against a breaker; a call is charged at
//     most once (see "Charging the breaker").
//   - neutral: an outcome that counts neither for nor against the
//     upstream: a 429, a 503 with Retry-After, the caller's cancellation.
//   - shadow mode: a breaker that counts and reports what it would refuse,
//     and refuses nothing.
//   - pause: the time an upstream asked a key to wait (Retry-After, a
//     spent quota); hold: the calls a pause gate keeps until it ends.
//   - pacing: spreading calls over a quota the upstream announced in
//     RateLimit fields, before it refuses them.
//   - token bucket: a rate limit of limit tokens per second and a burst
//     of burst tokens, one token per attempt (kept as one timestamp per
//     key, the generic cell rate algorithm).
//   - bulkhead, slot: a bound on the requests in flight per key, and one
//     admission by it, held until the response body is closed.
//   - shed: refuse a request because the server is at capacity.
//   - retry budget: the retries allowed per key, a share of the calls.
//   - hedge: a copy of a slow attempt sent before it failed.
//   - endpoint, tier, ejection: one of several base URLs of an upstream
//     ([WithFailover]), its health, and its removal for a while.
package breakwater
