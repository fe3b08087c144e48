// Package prom exports breakwater's events as Prometheus metrics.
//
// [New] builds a [Collector] and registers it on the [prometheus.Registerer]
// you pass; nothing is registered anywhere at import time. The Collector is
// a breakwater Observer: hand it to every transport and middleware it
// should watch.
//
//	reg := prometheus.NewRegistry()
//	metrics, err := prom.New(reg)
//	if err != nil { … }
//	tr, err := breakwater.NewTransport(breakwater.WithObserver(metrics))
//	…
//	metrics.Watch(tr) // the gauges read from its state (learned rates, probes)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// This is the only breakwater package that imports client_golang.
//
// # Metrics
//
// Outbound, from a Transport's events:
//
//	breakwater_calls_total{key,category}                      counter    calls that ended, by outcome category
//	breakwater_attempts_total{key,category}                   counter    attempts that reached the base transport
//	breakwater_retries_total{key,category}                    counter    retries decided, by the failed attempt's category
//	breakwater_retry_budget_exhausted_total{key}              counter    retries refused by the retry budget
//	breakwater_rejections_total{key,mechanism}                counter    work refused by a mechanism (breaker, rate_limit, …)
//	breakwater_wait_seconds{key,mechanism}                    histogram  time spent waiting for a mechanism
//	breakwater_attempt_duration_seconds{key,category}         histogram  attempt duration, to response headers or error
//	breakwater_call_duration_seconds{key,category}            histogram  call duration, retries, waits and the response body included
//	breakwater_in_flight{key}                                 gauge      calls started, not yet ended (a call that returns a response ends with its body)
//	breakwater_breaker_state{key}                             gauge      0 closed, 1 half-open, 2 open
//	breakwater_breaker_open_seconds{key}                      gauge      seconds since the breaker last left closed; 0 when closed
//	breakwater_breaker_transitions_total{key,from,to,reason}  counter    breaker state changes
//	breakwater_hedges_total{key}                              counter    hedges sent (WithHedging)
//	breakwater_hedge_wins_total{key}                          counter    calls a hedge answered
//	breakwater_endpoint_attempts_total{key,endpoint,category} counter    attempts per failover endpoint (WithFailover)
//	breakwater_endpoint_ejected{key,endpoint}                 gauge      1 while outlier detection has the endpoint out
//	breakwater_endpoint_ejections_total{key,endpoint,reason}  counter    ejections: failures, outlier, probe_failed
//
// From the state of the components given to [Collector.Watch], read at each
// collection (no event carries it):
//
//	breakwater_pace_rate{key}                                 gauge      requests/s a paced key may send: the rate its 429s taught
//	breakwater_breaker_probes{key}                            gauge      probes a half-open breaker lets through at once; 0 unless half-open
//
// Inbound, from the middleware's request events (Route is the chi route
// pattern):
//
//	breakwater_inbound_requests_total{route,method,status_class,category}  counter
//	breakwater_inbound_request_duration_seconds{route}                     histogram
//
// A fleet of breakwater services (see the root package's WithPropagation
// and CallerHeaders):
//
//	breakwater_inbound_sheds_total{route,criticality,reason}  counter  a Shedder's refusals: reason caller_deadline (the caller's deadline could not be met) or capacity
//	breakwater_inbound_pushback_total{route,value}            counter  answers with Breakwater-Pushback: elsewhere (a shed or route breaker's 503), none (a 5xx after the handler's own call failed)
//	breakwater_retries_skipped_total{key,reason}              counter  retries not made: pushback (the server asked), or a safety rule
//	breakwater_hedges_skipped_total{key,reason}               counter  calls not hedged, by safety rule
//
// A shed is also counted in breakwater_rejections_total{mechanism="shed"};
// the pushback counter counts the answers of requests an observing
// middleware reported (an EventRequest).
//
// The series of a key appear with its first event; a (key, category) or
// (key, mechanism) series appears with its first observation. The retry
// budget, in-flight, state and open-seconds series of a key a Transport
// called exist from its first call, so that they read 0 rather than
// nothing; a key seen only through a breaker's transitions (a route
// breaker's, or a [breakwater.Breakers] registry's) has state and open
// seconds and no retry budget or in-flight series, and a key seen only
// through inbound middleware's rejections (a client rate limit's, a
// shedder's) has none of the four: it has no such mechanism.
//
// # Labels and their bounds
//
// Every label has a bounded set of values:
//
//   - key: the transport's key (host[:port] by default), passed through
//     [WithKeyLabel] when set, made valid UTF-8 and cut to [MaxLabelLen]
//     bytes; an empty key is [NoneLabel]. After [WithMaxKeys] distinct values
//     (default 100) every new one is reported as [OtherLabel], so key has at
//     most max+1 values.
//   - route: the chi route pattern of an inbound request (never the raw
//     path), cleaned the same way, [NoneLabel] when empty, capped by
//     [WithMaxRoutes] (default 100) with the same overflow to [OtherLabel].
//   - category: the names of [breakwater.Category] ("success",
//     "server_error", …), "unknown" for anything else.
//   - mechanism: the names of [breakwater.Mechanism] ("breaker",
//     "rate_limit", "pause", "concurrency", "retry_budget", "shed",
//     "timeout", "route_breaker"), [OtherLabel] for anything else.
//   - from, to: "closed", "half_open", "open".
//   - reason: the names of [breakwater.Reason], [OtherLabel] for anything else;
//     a shed's: "caller_deadline" or "capacity".
//   - criticality: "sheddable", "default", "critical".
//   - value: a Breakwater-Pushback value, "elsewhere" or "none".
//   - endpoint: a failover endpoint's base URL, as configured (a bounded
//     set), cleaned like key; after 64 per key, [OtherLabel].
//   - method: GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE
//     (matched case-insensitively), [OtherLabel] for anything else.
//   - status_class: "1xx" to "5xx", [OtherLabel] outside 100–599.
//
// The collector remembers the label of up to max(4096, 4×cap) raw keys (and
// routes), so that an event of a known key costs one map lookup. Events of
// further raw keys are mapped again each time (the [WithKeyLabel] function
// runs again): still correct and bounded, only slower.
//
// # Breaker state
//
// The state gauge follows the transition events. An open breaker turns
// half-open lazily, on its next admission; until then the gauge reads 1
// (half-open) once the open duration chosen at opening has elapsed, as
// [breakwater.Breaker.State] does. breakwater_breaker_open_seconds is
// computed at scrape time: how long the breaker has been away from closed,
// across reopenings, since its last close. It keeps growing while a breaker
// flaps between open and half-open, which is what an alert on a long outage
// wants (each single opening lasts at most the maximum open timeout).
//
// When several breakers share a key label (through [WithKeyLabel], the
// overflow label, or several transports on one Collector), the gauge shows
// the worst of them (open over half-open over closed) and open seconds count
// from when the first of them left closed until all are closed again.
//
// # Counting invariant
//
// Each outbound call makes one try, plus one per retry decided and one per
// hedge sent. A try is either an attempt, counted in
// breakwater_attempts_total, or a refusal before anything is sent, counted
// in breakwater_rejections_total under any outbound mechanism but
// retry_budget ("breaker", "rate_limit", "pause", "concurrency", or
// "other"); a retry_budget rejection refuses a retry after an attempt, not
// a try, and a hedge that admission would have made wait is simply not
// sent. So, for every key of a transport, summed over categories and
// mechanisms:
//
//	calls_total + retries_total + hedges_total = attempts_total + rejections_total{mechanism!="retry_budget"}
//
// One kind of call breaks the equality, by one each: a call whose context
// ends while it waits before a retry decided that retry but never tried
// it. It ends with the category "canceled" (as do calls canceled during an
// attempt, which keep the equality).
//
// Rejected calls make no attempt: a call refused by an open breaker adds 1
// to calls_total{category="rejected"} and to
// rejections_total{mechanism="breaker"}, and nothing to attempts_total.
//
// # Performance
//
// The collector keeps its own atomic counters per key label, resolved once
// and found through one map lookup, and builds the Prometheus metrics when
// scraped: observing an event costs a few atomic additions and allocates
// nothing. A call counter and its duration histogram's count are one
// number, as are the retry-budget counter and the retry_budget rejections,
// so they always agree. Histogram sums are kept in whole nanoseconds.
//
// With the default buckets, each key or route label holds about 6 KiB of
// counters, whatever the traffic; the caps bound the total.
package prom
