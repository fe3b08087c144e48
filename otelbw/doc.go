// Package otelbw exports breakwater's events to OpenTelemetry: metrics with
// the same meaning as the prom package's, and events on the spans of the
// calls they explain.
//
// It uses the OpenTelemetry API alone (go.opentelemetry.io/otel, its metric
// and trace packages and a semconv package), never the SDK: the application
// chooses and installs an SDK, or none. [New] builds an [Observer], a
// breakwater Observer, on the global meter provider unless
// [WithMeterProvider] names another:
//
//	obs, err := otelbw.New()
//	if err != nil { … }
//	tr, err := breakwater.NewTransport(
//		breakwater.WithObserver(obs),
//		breakwater.WithBase(otelhttp.NewTransport(otelbw.ResendCount(nil))),
//	)
//	client := &http.Client{Transport: otelhttp.NewTransport(tr)}
//
// The package is named otelbw, after the contrib modules' otel<library>
// (otelhttp, otelgrpc), so that it imports beside go.opentelemetry.io/otel
// without an alias on either, and reads as what it is at the call site.
//
// # Metrics
//
// Outbound, from a Transport's events (units per the OpenTelemetry
// conventions; "calls" and "attempts" are the counts of their duration
// histograms, as the HTTP conventions count requests):
//
//	breakwater.call.duration            histogram      s             key, category   calls that ended (with their response body), by outcome category
//	breakwater.attempt.duration         histogram      s             key, category   attempts that reached the base transport
//	breakwater.retries                  counter        {retry}       key, category   retries decided, by the failed attempt's category
//	breakwater.rejections               counter        {rejection}   key, mechanism  work refused by a mechanism (breaker, rate_limit, …)
//	breakwater.wait.duration            histogram      s             key, mechanism  time spent waiting for a mechanism
//	breakwater.call.active              updowncounter  {call}        key             calls started, not yet ended (a response's call ends with its body)
//	breakwater.breaker.status           updowncounter  1             key, state      1 for the state the breaker is in, 0 for the others
//	breakwater.breaker.open_time        gauge          s             key             time since the breaker last left closed; 0 when closed
//	breakwater.breaker.transitions      counter        {transition}  key, from, to, reason  breaker state changes
//	breakwater.hedges                   counter        {hedge}       key             hedges sent (WithHedging), counted as they are sent
//	breakwater.hedge.wins               counter        {call}        key             calls a hedge answered
//	breakwater.endpoint.attempts        counter        {attempt}     key, endpoint, category  attempts per failover endpoint (WithFailover)
//	breakwater.endpoint.ejected         updowncounter  {endpoint}    key, endpoint   1 while outlier detection keeps the endpoint out, 0 otherwise
//	breakwater.endpoint.ejections       counter        {ejection}    key, endpoint, endpoint.reason  ejections: failures, outlier, probe_failed
//
// From the state of the components given to [Observer.Watch], read at each
// collection (no event carries it):
//
//	breakwater.pace.rate                gauge          {request}/s   key             requests/s a paced key may send: the rate its 429s taught
//	breakwater.breaker.probes           gauge          {probe}       key             probes a half-open breaker lets through at once; 0 unless half-open
//
// Inbound, from the middleware's request events:
//
//	breakwater.inbound.requests          counter    {request}  http.route, http.request.method, http.response.status_code, category
//	breakwater.inbound.request.duration  histogram  s          http.route
//
// A fleet of breakwater services (the root package's WithPropagation and
// CallerHeaders), as the prom package's fleet counters:
//
//	breakwater.inbound.sheds     counter  {request}   http.route, criticality, shed.reason  a Shedder's refusals: caller_deadline or capacity; criticality sheddable, default, critical
//	breakwater.inbound.pushback  counter  {response}  http.route, pushback                  answers with Breakwater-Pushback: elsewhere or none
//	breakwater.retries.skipped   counter  {retry}     key, skip.reason                      retries not made: pushback (the server asked), or a safety rule
//	breakwater.hedges.skipped    counter  {call}      key, skip.reason                      calls not hedged, by safety rule
//
// The Prometheus collector's breakwater_retry_budget_exhausted_total is
// breakwater.rejections with mechanism retry_budget here; its
// breakwater_calls_total and breakwater_attempts_total are the counts of the
// two duration histograms. Otherwise each instrument is the Prometheus
// metric of the same meaning, so that both report the same numbers for the
// same run, and the prom package's counting invariant holds here too:
//
//	calls + retries + hedges = attempts + rejections{mechanism != retry_budget}
//
// (but for calls canceled while waiting before a retry, one each).
//
// The histograms advise the prom package's bounds, 5 ms to 30 s; a view in
// the SDK can change them. The breaker gauges are read when the SDK
// collects, for every key seen: an open breaker whose open duration has
// elapsed reads half-open, as [breakwater.Breaker.State] does, and when
// several breakers share a key value the worst state shows. The meter is
// named [ScopeName] and its schema URL is that of the semantic conventions
// the attributes follow.
//
// # Attributes and their bounds
//
// Every attribute has a bounded set of values, those of the prom package's
// labels:
//
//   - breakwater.key: the transport's key (host[:port] by default), passed
//     through [WithKeyValue] when set, made valid UTF-8 and cut to 128 bytes;
//     an empty key is "none". After [WithMaxKeys] distinct values (default
//     100) every new one is reported as "other".
//   - http.route: the chi route pattern of an inbound request (never the
//     raw path), cleaned the same way, capped by [WithMaxRoutes] (default
//     100) with the same overflow to "other".
//   - breakwater.category: the names of [breakwater.Category] ("success",
//     "server_error", …), "unknown" for anything else.
//   - breakwater.mechanism: the names of [breakwater.Mechanism], "other"
//     for anything else.
//   - breakwater.breaker.state, .from and .to: "closed", "half_open",
//     "open" ("unknown" for anything else); breakwater.breaker.reason: the
//     names of [breakwater.Reason], "other" for anything else.
//   - http.request.method: the nine methods of RFC 9110 and RFC 5789,
//     "_OTHER" for anything else, as the HTTP conventions bound it.
//   - http.response.status_code: the status, absent outside 100–599.
//   - breakwater.endpoint: a failover endpoint's base URL, as configured (a
//     bounded set), cleaned like the key; after 64 per key value, "other".
//   - breakwater.endpoint.reason: why an endpoint was ejected: "failures",
//     "outlier", "probe_failed", "other" for anything else.
//
// The SDK's own cardinality limit (2000 attribute sets per instrument by
// default) stays above what the outbound instruments can reach with the
// default caps, but for breakwater.endpoint.attempts when more than a few
// keys fail over between many endpoints; beyond it the SDK folds new sets
// into its overflow series.
//
// # Span events
//
// Events that explain where a call's time went are added to the span in the
// event's context when it is recording: the caller's span, or the one
// otelhttp starts when it wraps the breakwater Transport (inbound, the
// server span of the request). Their attributes:
//
//	breakwater.retry      breakwater.key, breakwater.attempt (the attempt that failed), breakwater.category,
//	                      http.response.status_code (when there was one), breakwater.delay (seconds before the next attempt)
//	breakwater.rejection  breakwater.key, breakwater.mechanism, breakwater.attempt (outbound),
//	                      breakwater.retry_after (seconds, when the rejection knows), breakwater.error (its message)
//	breakwater.wait       breakwater.key, breakwater.mechanism (rate_limit, pause, concurrency), breakwater.delay (seconds waited)
//	breakwater.hedge      breakwater.key, breakwater.attempt (the hedge's), breakwater.delay (seconds after the first
//	                      attempt of its round), when the hedge is sent
//	breakwater.answer     breakwater.key, breakwater.attempt (the one whose response the call returned), breakwater.hedge
//	                      (whether that attempt was a hedge), when a call that sent hedges ends with a response
//
// With failover, each also carries breakwater.endpoint: the endpoint of
// the attempt that failed, was refused, waited, was sent or answered.
//
// The answer comes when the call ends, which for a response is when its
// body is read to its end or closed: a span that has ended by then does
// not record it (otelhttp ends its span before closing the body, so the
// answer shows on its span when the body is read to EOF first).
//
// A breaker rejection is a breakwater.rejection with mechanism "breaker", a
// pause that held a call a breakwater.wait with mechanism "pause" (or a
// rejection when the pause outlasts the call's deadline). The other kinds of
// breakwater event have no span event: a call's start and end are its span's
// own (but for the answer of a hedged call), each attempt can have a span of
// its own (below), breaker transitions and endpoint ejections belong to no
// call (they are reported with context.Background and counted by the
// breaker and endpoint instruments), and an inbound request is its server
// span. Each kind that has a span event maps to it in one place.
//
// # Spans per attempt
//
// A breakwater Transport makes no spans of its own. Give it otelhttp's
// transport as its base, over [ResendCount], and each attempt gets its own
// client span, a child of the call's, the retries carrying
// http.request.resend_count.
//
// # Performance
//
// Observing an event of a known key costs one map lookup and at most one
// measurement (two for an attempt at a failover endpoint, or the end of a
// call a hedge answered), with attribute sets made once per key value: a
// successful call is two measurements (its attempt's and its own duration)
// and two atomic additions (calls in flight are counted by the observer
// and read when the SDK collects). It allocates nothing with the no-op meter
// provider or the SDK's. A span event costs nothing unless the span
// records. BenchmarkTransport and BenchmarkObserverOverhead measure the
// Observer on the no-op provider and on the SDK's against a transport with
// no observer and with the prom package's collector.
package otelbw
