package breakwater

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
	"github.com/breakwater-go/breakwater/internal/sat"
)

// Transport is an [http.RoundTripper] that runs every call through the
// default chain, outermost first:
//
//  1. call timeout: one deadline over the whole call, retries and waits
//     included (default 30 s);
//  2. retry: the attempt loop (default 3 attempts in total);
//  3. circuit breaker, asked before every attempt (and again after a pause
//     the attempt waited out, without holding a half-open probe lease
//     meanwhile);
//  4. rate limit and server-directed pause gate, a token per attempt;
//  5. concurrency limit, a slot per attempt, none held while backing off;
//  6. attempt timeout: one attempt, headers and body (default 10 s, or
//     the call timeout when that is shorter);
//  7. the base transport (a clone of [http.DefaultTransport] when nil).
//
// With [WithFailover], each attempt first chooses an endpoint, and stages 3
// to 5 are kept per endpoint; with [WithHedging], the retry loop may run an
// attempt and its hedges at once, each through stages 3 to 7.
//
// Both timeouts, the concurrency slot and a half-open probe lease last until
// the response body is closed or read to EOF, not until RoundTrip returns;
// so does the call for its observers ([EventCallEnd]).
//
// A Transport honours the [http.RoundTripper] contract: it is safe for
// concurrent use, never modifies the caller's request (each attempt after
// the first is a shallow copy with a fresh body from GetBody), closes the
// request body exactly once, and returns a response only with a nil error.
// A response the caller does not get (one that is retried) is drained, up to
// 64 KiB and for at most 20 ms, and closed; a body that stalls costs its
// connection, not the call's time. Every wait (backoff, Retry-After, the
// pause gate, limits) ends at the call's deadline. A 101 Switching
// Protocols answering a request that did not ask to upgrade is not a
// response: its connection is closed and the attempt fails with a
// [NetworkError], retried like a reset.
//
// A call that ends without a success returns what its last attempt
// returned, as a bare [http.Client] would: when the attempts run out on
// 503s, the last 503 with a nil error; check resp.StatusCode as you would
// without breakwater. A retry that the breaker or a limit refuses ends the
// call with that refusal. An error is the upstream's own after one attempt,
// else an [*Error] with the attempts made; a refusal or a timeout of
// breakwater's is an [*Error] matching one sentinel, and every timeout
// matches [context.DeadlineExceeded] (see "Errors" in the package
// documentation for which timeout it names).
//
// Build a Transport with [NewTransport]; the zero value is not usable.
type Transport struct {
	cfg      config
	base     http.RoundTripper
	breakers *Breakers
	keys     *keyed.Map[*upstream] // retry budgets and answer times
	limits   limits                // pause gate, rate limit, bulkhead (admission.go)
	start    time.Time
	share    *deadlineShare // attempts' shared deadline contexts (deadlineshare.go)
	stage    bool           // a RetryStage: an inner BreakerStage defers failures to it
	obs      Observer       // nil when nothing observes
	eps      *endpointSet   // nil without failover (failover.go)
	// maxRetryAfter is the default classifier's, when no classifier was
	// given (0 otherwise): it is then called directly, without the
	// recover a user's classifier needs.
	maxRetryAfter time.Duration
	// hostKeyed: the key is HostKey's, which cannot panic, called without
	// the recover a user's KeyFunc needs; httpKey then keeps its key for
	// the first plain-http host called.
	hostKeyed bool
	httpKey   *atomic.Pointer[hostKey]
}

// hostKey is HostKey's key for a plain-http host.
type hostKey struct{ host, key string }

// hostKey returns HostKey(req) without building the key of the first
// plain-http host the Transport called (HostKey allocates for http, not
// for https): a Transport that calls one such host, as most do, keeps its
// key. It is never replaced, so that calls alternating between hosts cost
// no more than HostKey.
func (t *Transport) hostKey(req *http.Request) string {
	u := req.URL
	if u.Scheme != "http" {
		return HostKey(req)
	}
	if k := t.httpKey.Load(); k != nil {
		if k.host == u.Host {
			return k.key
		}
		return HostKey(req)
	}
	key := HostKey(req)
	t.httpKey.CompareAndSwap(nil, &hostKey{host: u.Host, key: key})
	return key
}

var _ http.RoundTripper = (*Transport)(nil)

// keyOf runs fn on req; a KeyFunc that panics is an error, never a panic
// out of RoundTrip.
func keyOf(fn KeyFunc, req *http.Request) (key string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("breakwater: the KeyFunc panicked: %v", r)
		}
	}()
	return fn(req), nil
}

// NewTransport builds a Transport over the default chain, configured by
// opts, or returns an error describing every invalid option at once (see
// [Option], and the table of options in the package documentation). With
// no options it times a call out after 30 s and an attempt after 10 s,
// makes up to 3 attempts, opens a key's breaker on its 11th failing call
// within the window once half of its calls fail, and pauses a key its
// upstream asked to wait.
//
// A call that ends without a success returns its last attempt's result:
// the response with a nil error when the upstream answered (the third of
// three 503s, or a 503 after which no retry fitted before the deadline),
// or the attempt's error, wrapped in an [*Error] that counts the attempts.
// A retry that the breaker or a limit refuses ends the call with that
// refusal.
func NewTransport(opts ...Option) (*Transport, error) {
	cfg := newConfig()
	s := settings{to: "NewTransport", transport: &cfg, breaker: &cfg.breaker, pause: &cfg.pause}
	s.applyOptions(opts)
	return newTransport(cfg, s.errs)
}

// newTransport builds a Transport of cfg, whose options reported errs.
func newTransport(cfg config, errs []error) (*Transport, error) {
	if !cfg.attemptSet && cfg.callTimeout > 0 {
		// An unset attempt timeout follows a shorter call timeout.
		cfg.attemptTimeout = min(cfg.attemptTimeout, cfg.callTimeout)
	}
	cfgErr := cfg.validate(errs)
	t := &Transport{cfg: cfg, base: cfg.base, start: time.Now()}
	if t.base == nil {
		t.base = http.DefaultTransport.(*http.Transport).Clone()
	}
	if cfg.classifier == nil {
		t.maxRetryAfter = orDefault(cfg.maxRetryAfter, defaultMaxRetryAfter)
		t.cfg.classifier = func(resp *http.Response, err error) Outcome { return classify(resp, err, t.maxRetryAfter) }
	}
	t.share = new(deadlineShare)
	if cfg.key == nil {
		t.cfg.key, t.hostKeyed = HostKey, true
		t.httpKey = new(atomic.Pointer[hostKey])
	}
	// Every invalid option is reported at once: the breaker and limit
	// options are checked even when the retry options are invalid.
	var bErr, lErr error
	t.breakers = cfg.breakers
	if t.breakers == nil {
		bc := cfg.ownBreakerConfig()
		if cfgErr != nil {
			bErr = bc.validate() // sizing needs a valid retry plan
		} else {
			t.breakers, bErr = newSizedBreakers(cfg, bc)
		}
	}
	t.limits, lErr = cfg.buildLimits()
	if err := errors.Join(cfgErr, bErr, lErr); err != nil {
		return nil, err
	}
	if cfg.insights {
		cfg.observers = append(cfg.observers, newInsights())
		t.cfg.observers = cfg.observers
	}
	// The transport's observers see its own breakers' transitions; a shared
	// registry reports to the observers it was given, so that sharing it
	// never counts a transition twice.
	if t.obs = observers(cfg.observers...); t.obs != nil && cfg.breakers == nil {
		t.breakers.addListener(transitionReporter(t.obs))
	}
	t.limits.obs = t.obs
	t.warn(t.cfg.hazards(t.base)...)
	t.keys = keyed.New(cfg.maxKeys, cfg.idleTTL, func(string) *upstream {
		u := &upstream{}
		if cfg.budget {
			u.budget = newRetryBudget(cfg.budgetRatio, cfg.budgetFloor, cfg.budgetWindow)
		}
		return u
	}, func(u *upstream, now time.Time) keyed.Keep { return u.weigh(int64(now.Sub(t.start))) })
	if cfg.failover != nil {
		t.eps = t.newEndpoints(*cfg.failover)
	}
	return t, nil
}

// Hazards a Transport warns of as it is built ([EventWarning]).
const (
	// ReasonRetriesDoNotFit: the call timeout is no longer than the
	// first wait between attempts (its longest, for a jittered backoff),
	// so that no retry fits in a call, however many attempts it may make
	// (Mechanism [MechTimeout]). It is a warning, not an error: a
	// [RequestPolicy] may give calls a longer CallTimeout, a jittered
	// wait may be drawn shorter, and failover retries a throttled attempt
	// on another endpoint at once. [Transport.Explain] says how many
	// attempts fit.
	ReasonRetriesDoNotFit Reason = "retries_do_not_fit"
	// ReasonStackedTransport: the base RoundTripper is another breakwater
	// Transport or [RetryStage] (directly, or under wrappers with an
	// Unwrap() http.RoundTripper method): each attempt of the outer one is
	// a whole call of the inner one, so attempts multiply and both count
	// the upstream's failures. It is a warning, not an error, for the
	// stacks that mean it (an inner Transport per endpoint, with
	// WithMaxAttempts(1)).
	ReasonStackedTransport Reason = "stacked_transport"
)

// hazards returns the warnings a Transport of c over base gives.
func (c *config) hazards(base http.RoundTripper) []Event {
	var out []Event
	if fit, waits := c.attemptsFit(); fit == 1 && c.maxAttempts > 1 {
		first := formatDuration(waits)
		if !c.backoffExact {
			first = "up to " + first + ", jittered"
		}
		out = append(out, Event{Kind: EventWarning, Mechanism: MechTimeout, Reason: ReasonRetriesDoNotFit, Err: fmt.Errorf(
			"breakwater: the call timeout %s is no longer than the first wait between attempts (%s): no retry fits in a call, which makes 1 of its %d attempts; lengthen the call timeout, shorten the backoff or give WithMaxAttempts(1)",
			formatDuration(c.callTimeout), first, c.maxAttempts)})
	}
	if in := innerTransport(base); in != nil {
		out = append(out, stackedWarning(c.maxAttempts, in))
	}
	return out
}

// stackedWarning is the warning of a retry loop of maxAttempts over in.
func stackedWarning(maxAttempts int, in *Transport) Event {
	return Event{Kind: EventWarning, Reason: ReasonStackedTransport, Err: fmt.Errorf(
		"breakwater: the base is another breakwater Transport: each of up to %d attempts here is a whole call of up to %d attempts there (up to %d per call), and both count the upstream's failures; use one Transport, or give the inner one WithMaxAttempts(1)",
		maxAttempts, in.cfg.maxAttempts, maxAttempts*in.cfg.maxAttempts)}
}

// innerTransport returns the Transport (or RetryStage) rt is, or wraps
// under RoundTrippers with an Unwrap() http.RoundTripper method; nil when
// there is none.
func innerTransport(rt http.RoundTripper) *Transport {
	for range 32 { // a bound on wrappers that unwrap to themselves
		switch v := rt.(type) {
		case *Transport:
			return v
		case interface{ Unwrap() http.RoundTripper }:
			rt = v.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// warn reports each of ws to the Transport's observers.
func (t *Transport) warn(ws ...Event) {
	if t.obs == nil {
		return
	}
	for i := range ws {
		notify(t.obs, context.Background(), &ws[i])
	}
}

// ownBreakerConfig is the configuration of the Transport's own breakers:
// its breaker options over the defaults, with its key bounds, a probe
// lease as long as an attempt and its cluster bus.
func (c *config) ownBreakerConfig() breakerConfig {
	bc := c.breaker
	bc.maxKeys, bc.idleTTL = c.maxKeys, c.idleTTL
	if !bc.probeSet {
		bc.probeTimeout = orDefault(c.attemptTimeout, defaultProbeTimeout)
	}
	if c.noBreaker || c.stage {
		bc.mode = modeDisabled
	}
	if c.bus != nil {
		bc.bus = c.bus
	}
	return bc
}

// orDefault returns d, or def when d <= 0.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// validate checks the configuration, adding to errs, the errors its
// options reported.
func (c *config) validate(errs []error) error {
	errs = append(errs,
		contradiction("breaker", c.breakerSet, nonEmpty(c.breakers != nil, "WithBreakers"), nonEmpty(c.noBreaker, "WithoutBreaker")),
		contradiction("pause gate", c.pauseSet, nonEmpty(c.gates != nil, "WithPauseGates"), nonEmpty(c.noPause, "WithoutPauseGate")),
		contradiction("retry budget", nonEmptyList(c.budgetSet, "WithRetryBudget"), "", nonEmpty(!c.budget, "WithoutRetryBudget")),
		contradiction("rate limit", nonEmptyList(c.limits.rateSet, "WithRateLimit"), nonEmpty(c.limits.rate != nil, "WithRateLimiters"), ""),
		contradiction("concurrency limit", nonEmptyList(c.limits.bulkSet, "WithConcurrencyLimit"), nonEmpty(c.limits.bulk != nil, "WithBulkheads"), ""),
	)
	if c.hedging != nil && c.maxAttempts < 2 {
		errs = append(errs, fmt.Errorf("breakwater: hedging needs at least 2 attempts per call (hedges are attempts), got %d", c.maxAttempts))
	}
	if c.callTimeout < 0 || c.attemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("breakwater: timeouts must be >= 0, got call %s and attempt %s", c.callTimeout, c.attemptTimeout))
	}
	if c.callTimeout > 0 && c.attemptTimeout > c.callTimeout {
		errs = append(errs, fmt.Errorf("breakwater: attempt timeout %s exceeds the call timeout %s", c.attemptTimeout, c.callTimeout))
	}
	if c.maxAttempts < 1 || c.maxAttempts > maxAttemptsLimit {
		errs = append(errs, fmt.Errorf("breakwater: max attempts must be in [1, %d], got %d", maxAttemptsLimit, c.maxAttempts))
	} else if err := c.checkPlan(); err != nil {
		errs = append(errs, err)
	}
	if c.bufferBodies < 0 || c.bufferBodies == math.MaxInt64 {
		errs = append(errs, fmt.Errorf("breakwater: body buffering limit must be in [0, %d], got %d", int64(math.MaxInt64-1), c.bufferBodies))
	}
	if c.budget && !(finite(c.budgetRatio) && c.budgetRatio >= 0 && finite(c.budgetFloor) && c.budgetFloor >= 0 &&
		c.budgetWindow > 0 && c.budgetFloor*c.budgetWindow.Seconds() < maxBudgetReserve) {
		errs = append(errs, fmt.Errorf("breakwater: retry budget needs a finite ratio >= 0, a finite floor >= 0 and a window > 0, got %v, %v, %s", c.budgetRatio, c.budgetFloor, c.budgetWindow))
	}
	if c.maxRetryAfter < 0 || c.slowCall < 0 {
		errs = append(errs, errors.New("breakwater: max Retry-After and slow-call threshold must be >= 0"))
	}
	if c.maxKeys < 1 || c.maxKeys > keyed.MaxKeys || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: key limits need maxKeys in [1, %d] and idleTTL > 0, got %d and %s", keyed.MaxKeys, c.maxKeys, c.idleTTL))
	}
	return errors.Join(errs...)
}

// nonEmpty returns name when set, else "".
func nonEmpty(set bool, name string) string {
	if set {
		return name
	}
	return ""
}

// nonEmptyList returns name as a list when set, else nil.
func nonEmptyList(set bool, name string) []string {
	if set {
		return []string{name}
	}
	return nil
}

// maxAttemptsLimit is the most attempts per call [WithMaxAttempts] and
// [RequestPolicy] accept.
const maxAttemptsLimit = 1000

// maxBudgetReserve bounds a retry budget's floor × window, in retries.
const maxBudgetReserve = 1e12

// checkPlan computes the retry plan once, so that a Backoff that panics or
// waits whose sum overflows are construction errors, and keeps it for
// every later reader of the plan.
func (c *config) checkPlan() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("breakwater: the backoff panicked: %v", r)
		}
	}()
	var total int64
	c.planned = nil
	plan := c.plan()
	for _, d := range plan {
		if total = sat.Add(total, int64(max(0, d))); total == math.MaxInt64 {
			return fmt.Errorf("breakwater: the waits of %d attempts add up to more than %s", c.maxAttempts, time.Duration(math.MaxInt64))
		}
	}
	c.planned = plan
	return nil
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// CloseIdleConnections closes the base transport's idle connections, if it
// has a CloseIdleConnections method; [http.Client.CloseIdleConnections]
// calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Breakers returns the transport's breaker registry, for control and reads.
func (t *Transport) Breakers() *Breakers { return t.breakers }

// PauseGates returns the transport's pause gates, for control (Pause,
// Resume) and reads; nil without a pause gate. A transport's rate and
// concurrency limits are controlled through registries shared with
// [WithRateLimiters] and [WithBulkheads].
func (t *Transport) PauseGates() *PauseGates { return t.limits.gates }

func (t *Transport) now() int64 { return int64(time.Since(t.start)) }

// call is one RoundTrip's state.
type call struct {
	t        *Transport
	req      *http.Request
	ctx      context.Context // the caller's context
	start    int64           // when the call began, t.now()
	dl       int64           // the call timeout's deadline, t.now(); 0 without one
	key      string
	breaker  *Breaker
	up       *upstream
	budget   *retryBudget // up.budget, when the call may retry
	pol      RequestPolicy
	attempts int // admissions asked for, this one included
	made     int // attempts that reached the base transport
	prevWait time.Duration
	retried  int64 // when the budget granted the latest retry, t.now(); 0: none
	// throttled marks the retry of an attempt that was throttled: a pause
	// gate that releases the calls it held puts it in their line.
	throttled bool
	gateProbe bool      // the round's attempt is the pause gate's probe
	sent      bool      // the caller's body was handed to the base transport
	melt      *meltSlot // set in a RetryStage
	// pending is the failure the call's attempts showed that a retry
	// followed: charged to the breaker when the call ends without a later
	// answer (see charge).
	pending    Permit
	pendingO   Outcome
	hasPending bool
	outOfTime  bool  // the call timeout left no room for another attempt
	ended      int64 // when the latest attempt ended, if observed
	// name is the call's key, for events and errors: key itself, except
	// with failover, where key follows each attempt's endpoint.
	name string
	// hedge is the key's hedging state when the call may be hedged.
	hedge *hedgeState
	// tried has bit i set for the endpoints the call's attempts went to;
	// repeatable says whether a failed attempt may be repeated elsewhere.
	tried      uint64
	repeatable bool
	ep         *endpoint // the endpoint of the attempt being admitted
	deposited  bool      // the call was counted in its retry budget
	rounds     int       // rounds of the retry loop: 1 + the retries decided
	// planned marks a simulated call (Simulate): each wait is the retry
	// plan's longest, a hint is taken without jitter, RetryIf is not
	// asked (there is no response), and an answer with a status counts as
	// one with a body to drain.
	planned bool
	// notRetried and notHedged name the safety rules that kept the call
	// from retrying an attempt or from being hedged; "" when none did.
	notRetried, notHedged Reason
}

// RoundTrip runs one call through the chain. See [Transport].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		if hasBody(req) {
			_ = req.Body.Close()
		}
		return nil, errors.New("breakwater: nil Request.URL")
	}
	var key string
	if t.hostKeyed {
		key = t.hostKey(req)
	} else {
		var err error
		if key, err = keyOf(t.cfg.key, req); err != nil {
			if hasBody(req) {
				_ = req.Body.Close()
			}
			return nil, err
		}
	}
	var c call // set field by field: a literal would be built aside and copied
	c.t, c.req, c.ctx, c.key, c.name = t, req, req.Context(), key, key
	var declared bool // the request's own policy declares it idempotent
	c.pol, declared = t.policy(req)
	var served *caller // the request a call serving a breakwater caller's serves
	if t.cfg.propagate {
		if served = callerOf(c.ctx); served != nil {
			c.pol.MaxAttempts = served.attempts(c.pol.MaxAttempts)
		}
	}
	c.start = t.now()
	if isUpgrade(req) { // the connection outlives the call: no timeouts
		c.pol.CallTimeout, c.pol.AttemptTimeout = 0, 0
	}
	if c.pol.CallTimeout > 0 {
		c.dl = c.start + int64(c.pol.CallTimeout)
	}
	if t.eps == nil {
		c.up = t.keys.Get(c.key)
		var pin *keyed.Entry[*Breaker]
		c.breaker, pin = t.breakerOf(c.up, c.key) // kept in the registry until the call is charged
		defer pin.Release()
		if c.up.budget != nil && c.pol.MaxAttempts > 1 {
			c.budget = c.up.budget
			c.budget.deposit(c.start)
		}
	}
	if t.cfg.bufferBodies > 0 && hasBody(req) && req.GetBody == nil {
		c.req = bufferBody(req, t.cfg.bufferBodies)
	}
	if t.cfg.hedging != nil || t.eps != nil {
		c.repeatable = replayable(c.req, c.pol.Idempotent)
		if t.cfg.hedging != nil && c.pol.MaxAttempts > 1 {
			if rule := t.notRepeatable(c.req, declared); rule == "" {
				c.hedge = t.keys.Get(c.name).hedging()
				c.hedge.deposit(c.start)
			} else {
				c.notHedged = rule
				if r := c.report(); r != nil {
					r.NotHedged = rule
				}
			}
		}
	}
	if t.stage {
		c.melt = &meltSlot{}
		c.ctx = context.WithValue(c.ctx, meltKey{}, c.melt)
		c.req = c.req.WithContext(c.ctx)
	}
	if served != nil {
		resp, err := t.run(&c)
		if c.made > 0 && (err != nil || resp.StatusCode >= 500) {
			served.failed.Store(true) // the upstream failed what was sent, not a refusal here
		}
		return resp, err
	}
	return t.run(&c)
}

// breakerOf returns key's breaker, pinned in the registry until the
// entry's Release, up being key's upstream state: the entry up keeps is
// pinned again, and only when it has been evicted since (or there is none
// yet) is the registry searched, and the entry it returns kept in up.
func (t *Transport) breakerOf(up *upstream, key string) (*Breaker, *keyed.Entry[*Breaker]) {
	if e := up.breaker.Load(); e != nil && e.Pin() {
		return e.Value, e
	}
	b, e := t.breakers.acquire(key)
	if e != nil {
		up.breaker.Store(e)
	}
	return b, e
}

// deadline returns the call timeout's deadline, or the zero time without
// one.
func (c *call) deadline() time.Time {
	if c.dl == 0 {
		return time.Time{}
	}
	return c.t.start.Add(time.Duration(c.dl))
}

// endpoint names the endpoint of the attempt being admitted ("" without
// failover).
func (c *call) endpoint() string {
	if c.ep == nil {
		return ""
	}
	return c.ep.name
}

// emit sends e, completed with the call's key and method, to the observers.
func (t *Transport) emit(c *call, e *Event) {
	e.Key, e.Method = c.name, c.req.Method
	notify(t.obs, c.ctx, e)
}

// observeAttempt reports one attempt and what followed it.
func (t *Transport) observeAttempt(c *call, a *attemptResult, retry bool, wait time.Duration, budget bool) {
	if a.o.Category == Rejected && a.err != nil {
		if m := mechanismOf(a.err); m != "" { // else the body could not be replayed: no attempt
			left, _ := RetryAfter(a.err)
			t.emit(c, &Event{Kind: EventReject, Attempt: a.n, Mechanism: m, Delay: left, Err: a.err, Hedge: a.hedge, Endpoint: a.endpointName()})
		}
		return
	}
	c.ended = a.end
	ep := a.endpointName()
	t.emit(c, &Event{Kind: EventAttempt, Attempt: a.n, Category: a.o.Category, Status: a.o.Status, Duration: time.Duration(c.ended - a.start), Err: a.err, Hedge: a.hedge, Endpoint: ep})
	switch {
	case retry:
		t.emit(c, &Event{Kind: EventRetry, Attempt: a.n, Category: a.o.Category, Status: a.o.Status, Delay: wait, Endpoint: ep})
	case c.notRetried != "":
		t.emit(c, &Event{Kind: EventRetrySkipped, Attempt: a.n, Category: a.o.Category, Status: a.o.Status, Endpoint: ep, Reason: c.notRetried})
	case budget:
		t.emit(c, &Event{Kind: EventReject, Attempt: a.n, Mechanism: MechRetryBudget, Err: ErrRetryBudget, Endpoint: ep})
	}
}

// end reports the end of a call that returns an error (a call that
// returns a response ends with its body: see callEnd). The last attempt's
// end (when it was just observed) is the call's end.
func (t *Transport) end(c *call, o Outcome, err error) {
	if t.obs != nil {
		now := c.ended
		if now == 0 || o.Category == Canceled {
			now = t.now()
		}
		t.emit(c, &Event{Kind: EventCallEnd, Attempts: c.made, Retries: max(c.rounds-1, 0), Category: o.Category, Status: o.Status, Duration: time.Duration(now - c.start), Err: err})
	}
}

// callEnd reports the end of an observed call that returned a response
// ([EventCallEnd]) when the response body ends: for in-flight counts and
// call durations, the call lasts until then.
type callEnd struct {
	t       *Transport // nil when not observed
	key     string
	req     *http.Request // for its method and its context, the call's
	start   int64
	made    int32
	retries int32
	status  int32
	cat     Category
	hedge   bool
	attempt int16 // the attempt that answered: at most 1000 (MaxAttempts), in the padding
}

// observeEnd fills e, the room for the call's end that an observed
// Transport's response carries (see newHold), with the end of c and a's
// outcome.
func (t *Transport) observeEnd(c *call, a *attemptResult, e *callEnd) {
	*e = callEnd{t: t, key: c.name, req: c.req, start: c.start, made: int32(c.made), retries: int32(max(c.rounds-1, 0)),
		status: int32(a.o.Status), cat: a.o.Category, hedge: a.hedge, attempt: int16(a.n)}
}

// report sends the call's end at now (Transport nanoseconds; 0: read the
// clock), once; ep is the endpoint that answered (failover), or nil.
func (e *callEnd) report(now int64, ep *endpoint) {
	if e == nil || e.t == nil {
		return
	}
	t := e.t
	e.t = nil
	if now == 0 {
		now = t.now()
	}
	var name string
	if ep != nil {
		name = ep.name
	}
	notify(t.obs, e.req.Context(), &Event{Kind: EventCallEnd, Key: e.key, Method: e.req.Method, Attempts: int(e.made), Retries: int(e.retries), Category: e.cat, Status: int(e.status),
		Duration: time.Duration(now - e.start), Attempt: int(e.attempt), Hedge: e.hedge, Endpoint: name})
}

// classify classifies an attempt's result with the transport's classifier.
func (t *Transport) classify(resp *http.Response, err error) Outcome {
	if t.maxRetryAfter > 0 {
		if err == nil && resp != nil && resp.StatusCode >= 100 && resp.StatusCode < 400 {
			return Outcome{Category: Success, Status: resp.StatusCode} // classifyResponse's first case, inline
		}
		return classify(resp, err, t.maxRetryAfter)
	}
	return classifySafely(t.cfg.classifier, resp, err)
}

// newSizedBreakers builds the transport's breakers of bc, sizing an
// automatic Window from the retry plan: twice the time tolerate failing
// calls take, at least 10 s. An explicit window too narrow to hold the
// failures of two consecutive calls of one caller is an error: such a
// breaker could only ever open under concurrent traffic.
func newSizedBreakers(c config, bc breakerConfig) (*Breakers, error) {
	if err := bc.validate(); err != nil {
		return nil, err
	}
	p := &bc.policy
	if p.kind == policyWindow && bc.mode != modeDisabled {
		plan := c.worstPlan()
		switch {
		case p.within == 0:
			p.within = max(defaultWindowWithin, sat.Mul(plan, 2*int64(max(1, p.tolerate))))
		case !c.chargePerAttempt && p.tolerate > 0 && p.within <= plan:
			return nil, fmt.Errorf("breakwater: breaker window %s is narrower than one failing call's retry waits (up to %s): one caller's failing calls could never open it; widen it or leave it automatic (Window(%d, 0))", p.within, plan, p.tolerate)
		}
	}
	return newBreakers(bc), nil
}
