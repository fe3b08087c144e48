package breakwater

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// Scenario is an upstream's behaviour, and the traffic sent to it, for
// [Transport.Simulate].
type Scenario struct {
	// AttemptTime is how long each attempt takes to be answered. Default 0.
	AttemptTime time.Duration
	// HealthyFor is how long the upstream answers well before its outage
	// begins. Default 0: it fails from the start.
	HealthyFor time.Duration
	// FailFor is how long the outage lasts; 0 means it never recovers.
	FailFor time.Duration
	// Failure is how an attempt fails during the outage: [ServerError]
	// (a 500; the zero value, Success, means this too), [Timeout] (the
	// upstream hangs until the attempt or call timeout ends the attempt,
	// forever when neither is set), [NetworkError] (a refused
	// connection) or [Throttled] (a 429 carrying RetryAfter).
	Failure Category
	// RetryAfter is the hint a Throttled failure carries. Default 1 s.
	RetryAfter time.Duration
	// Limit, when > 0 with a Throttled failure, makes the outage a strict
	// rate limiter's (as nginx's limit_req without a burst): during it,
	// the upstream serves one request every 1/Limit seconds and answers
	// each other one with a 429 carrying RetryAfter.
	Limit float64
	// FailureRate, when in (0, 1), makes each attempt during the outage
	// fail with that probability instead (seeded by Seed).
	FailureRate float64
	// Seed seeds every random draw the simulation makes: FailureRate's
	// and the breaker's fault injection ([WithFaultInjection]). The same
	// transport configuration, scenario and seed give the same result and
	// the same events; another seed may give others. Default 0, a seed
	// like any other.
	Seed uint64
	// Callers is how many callers send calls at once, each one call after
	// another with Think between them. Default 1, no think time (a call
	// refused at once is then followed by the next 1 ms later).
	Callers int
	Think   time.Duration
	// Duration, when set, runs the simulation for that much virtual time,
	// whatever the breaker does. Unset, no call starts once the breaker
	// opened (the calls under way finish) or after MaxCalls calls.
	Duration time.Duration
	// MaxCalls bounds the calls made. Default 100 without a Duration,
	// unbounded with one.
	MaxCalls int
	// Observe, when set, receives every event of the simulated calls as an
	// [Observer] would (calls, attempts, retries, rejections, pause waits,
	// breaker transitions), with the virtual time since the simulation
	// began. A timeline recorder's Record method fits.
	Observe func(at time.Duration, e Event)
}

// SimResult is what [Transport.Simulate] found.
type SimResult struct {
	// OpensAfter is the number of the call (in the order calls started)
	// whose outcome opened the breaker, or 0 when it never opened;
	// OpenedAt is when, in virtual time.
	OpensAfter int
	OpenedAt   time.Duration
	// Calls were started and Attempts reached the upstream.
	Calls, Attempts int
	// Succeeded, Failed and Rejected count the calls that ended by how
	// they ended (Rejected: breakwater's own refusal, the upstream not
	// answering); Unfinished were still running when the simulation
	// ended.
	Succeeded, Failed, Rejected, Unfinished int
	// Elapsed is the virtual time simulated, and WorstCall the longest
	// call that ended.
	Elapsed   time.Duration
	WorstCall time.Duration
}

// Simulate runs calls against an imagined upstream in virtual time, through
// the transport's own circuit breaker (a private registry with the same
// configuration on a virtual clock, its open durations without their
// jitter), its own charging of the breaker, its retry budget and its
// pause gate, and the transport's retry plan with every wait at its
// longest. It reports when the breaker opens and what the calls cost,
// and, through Scenario.Observe, every event on the way. It takes no real
// time and touches no state of the transport.
//
// It models the callers of the scenario making GET requests, and the
// rate the pause gate learns from 429s (a strict limiter, Scenario.Limit,
// is met by it); it does not model rate limits, bulkheads, a [WithRetryIf]
// function (the outcome's category decides what is retried), rate limit
// headers, the randomness of backoff and open-duration jitter, or how a
// pause gate spreads the calls it releases (in the simulation they all go
// when the pause ends).
//
// It is deterministic: its only random draws (a FailureRate, fault
// injection) come from Scenario.Seed, and a [Backoff] without a MaxDelay
// method is estimated once, when the transport is built.
func (t *Transport) Simulate(s Scenario) SimResult {
	sim := newSimulation(t, s)
	sim.run()
	return sim.res
}

// simulation is one run of Simulate.
type simulation struct {
	t       *Transport
	s       Scenario
	now     int64 // virtual nanoseconds since the start
	bs      *Breakers
	breaker *Breaker
	gates   *PauseGates
	budget  *retryBudget
	rng     *rand.Rand
	faults  float64 // the breaker's fault injection rate, drawn from rng
	callers []*simCaller
	res     SimResult
	opening *simCall // the call being charged, to credit an opening to
	served  int64    // when the strict limiter last served a request; -1: never
}

const simKey = "upstream.sim"

// simForever stands for "never" in virtual time.
const simForever = math.MaxInt64

type simState uint8

const (
	simIdle    simState = iota // between calls
	simAdmit                   // about to ask for an attempt's admission
	simPaused                  // waiting for a pause to end
	simAnswer                  // an attempt is in flight
	simStopped                 // makes no more calls
)

type simCaller struct {
	next  int64 // when it acts next
	state simState
	call  *simCall
}

// simCall is one simulated call. c carries what the Transport's own
// charging reads.
type simCall struct {
	n          int
	c          call
	start      int64
	deadline   int64 // 0: none
	permit     Permit
	o          Outcome
	err        error
	attemptAt  int64
	waitingFor int64 // when the current pause wait began
}

func newSimulation(t *Transport, s Scenario) *simulation {
	if s.Callers <= 0 {
		s.Callers = 1
	}
	if s.MaxCalls <= 0 {
		s.MaxCalls = 100
		if s.Duration > 0 {
			s.MaxCalls = math.MaxInt
		}
	}
	if s.Failure == Success {
		s.Failure = ServerError
	}
	if s.RetryAfter <= 0 {
		s.RetryAfter = time.Second
	}
	sim := &simulation{t: t, s: s, served: -1}
	sim.rng = rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	sim.bs = t.breakers.simulated(&sim.now)
	sim.faults = t.breakers.cfg.faultRate
	sim.bs.addListener(sim.transition)
	sim.breaker = sim.bs.Get(simKey)
	if t.limits.gates != nil {
		sim.gates = t.limits.gates.simulated(&sim.now)
	}
	if t.cfg.budget {
		sim.budget = newRetryBudget(t.cfg.budgetRatio, t.cfg.budgetFloor, t.cfg.budgetWindow)
	}
	for range s.Callers {
		sim.callers = append(sim.callers, &simCaller{})
	}
	return sim
}

// simulated returns a private registry with bs's configuration on the
// virtual clock now: no listeners, no cluster, no open-duration jitter,
// and no fault injection of its own (the simulation injects the faults,
// from its seed).
func (bs *Breakers) simulated(now *int64) *Breakers {
	cfg := bs.cfg
	cfg.listeners, cfg.bus, cfg.jitter, cfg.faultRate = nil, nil, 0, 0
	sim := &Breakers{cfg: cfg, start: time.Now(), virtual: now}
	var ls []func(Transition)
	sim.listeners.Store(&ls)
	if cfg.mode != modeDisabled {
		sim.m = keyed.New(cfg.maxKeys, cfg.idleTTL, sim.newBreaker, (*Breaker).weigh)
	}
	return sim
}

// simulated returns private pause gates with g's configuration on the
// virtual clock now, shared with no cluster.
func (g *PauseGates) simulated(now *int64) *PauseGates {
	cfg := g.cfg
	cfg.bus = nil
	sim := &PauseGates{cfg: cfg, start: time.Now(), virtual: now}
	sim.m = keyed.New(cfg.maxKeys, cfg.idleTTL, func(key string) *pauseGate { return &pauseGate{key: key} }, sim.weigh)
	sim.m.Displace(sim.rank)
	return sim
}

func (sim *simulation) emit(e Event) {
	if sim.s.Observe != nil {
		e.Key, e.Method = simKey, http.MethodGet
		sim.s.Observe(time.Duration(sim.now), e)
	}
}

// transition reports the simulated breaker's transitions and credits the
// first opening to the call being charged.
func (sim *simulation) transition(tr Transition) {
	if tr.To == StateOpen && tr.From == StateClosed && sim.res.OpensAfter == 0 && sim.opening != nil {
		sim.res.OpensAfter, sim.res.OpenedAt = sim.opening.n, time.Duration(sim.now)
	}
	sim.emit(Event{Kind: EventTransition, Transition: &tr})
}

// run steps the callers in time order until the scenario's end.
func (sim *simulation) run() {
	for {
		var next *simCaller
		for _, c := range sim.callers {
			if c.state != simStopped && (next == nil || c.next < next.next) {
				next = c
			}
		}
		switch {
		case next == nil || next.next == simForever:
			sim.finish()
			return
		case next.next < 0: // waits so long that virtual time ran past its end
			sim.finish()
			return
		case sim.s.Duration > 0 && next.next >= int64(sim.s.Duration):
			sim.now = int64(sim.s.Duration)
			sim.finish()
			return
		}
		sim.now = next.next
		sim.step(next)
	}
}

func (sim *simulation) finish() {
	sim.res.Elapsed = time.Duration(sim.now)
	for _, c := range sim.callers {
		if c.call != nil {
			sim.res.Unfinished++
		}
	}
}

func (sim *simulation) step(c *simCaller) {
	switch c.state {
	case simIdle:
		// Without a Duration, the calls under way when the breaker opens
		// finish, and no other starts.
		if sim.res.Calls >= sim.s.MaxCalls || sim.s.Duration == 0 && sim.res.OpensAfter != 0 {
			c.state = simStopped
			return
		}
		sim.startCall(c)
	case simAdmit:
		sim.admit(c)
	case simPaused:
		sim.emit(Event{Kind: EventWait, Attempt: c.call.c.attempts, Mechanism: MechPause, Duration: time.Duration(sim.now - c.call.waitingFor)})
		sim.allow(c) // the breaker asked again after the pause, as the Transport does
	case simAnswer:
		sim.answered(c)
	}
}

func (sim *simulation) startCall(c *simCaller) {
	sim.res.Calls++
	sc := &simCall{n: sim.res.Calls, start: sim.now}
	sc.c = call{t: sim.t, req: simRequest, ctx: context.Background(), key: simKey, breaker: sim.breaker, pol: RequestPolicy{MaxAttempts: sim.t.cfg.maxAttempts}, planned: true}
	if d := sim.t.cfg.callTimeout; d > 0 {
		sc.deadline = sim.now + int64(d)
		sc.c.dl = sc.deadline
	}
	if sim.budget != nil && sim.t.cfg.maxAttempts > 1 {
		sim.budget.deposit(sim.now)
		sc.c.budget = sim.budget
	}
	c.call, c.state = sc, simAdmit
	sim.emit(Event{Kind: EventCallStart})
}

// admit asks the breaker to admit the next attempt, then the pause gate,
// in the Transport's order.
func (sim *simulation) admit(c *simCaller) {
	c.call.c.attempts++
	sim.allow(c)
}

// allow asks the breaker for the attempt, then runs the pause gate; an
// attempt that waited out a pause asks again.
func (sim *simulation) allow(c *simCaller) {
	call := c.call
	if err := sim.injectFault(call.c.breaker); err != nil {
		sim.refused(c, err, 0)
		return
	}
	permit, err := call.c.breaker.Allow()
	if err != nil {
		var left time.Duration
		if b := call.c.breaker; b != nil && b.openUntil.Load() > sim.now {
			left = time.Duration(b.openUntil.Load() - sim.now)
		}
		sim.refused(c, err, left)
		return
	}
	call.permit = permit
	sim.pass(c)
}

// injectFault is the fault injection of Breaker.Allow with the
// simulation's seeded draws: a closed breaker rejects an admission with the
// injected fault's error at the configured rate.
func (sim *simulation) injectFault(b *Breaker) error {
	if sim.faults <= 0 || b == nil {
		return nil
	}
	if _, s := unpack(b.sg.Load()); s != StateClosed || sim.rng.Float64() >= sim.faults {
		return nil
	}
	return b.faultErr
}

// pass runs the pause gate for an admitted attempt: a pause the call can
// wait out is waited out, without the breaker's probe lease, a longer one
// refuses the attempt.
func (sim *simulation) pass(c *simCaller) {
	call := c.call
	if rem := sim.gates.remainingFor(simKey); rem > 0 {
		call.permit.release()
		left := time.Duration(call.deadline - sim.now)
		if rem > sim.gates.cfg.maxWait || call.deadline != 0 && rem >= left {
			until := sim.gates.wall(sim.now + int64(rem))
			sim.refused(c, rejected(ErrPaused, simKey, until), rem)
			return
		}
		call.waitingFor = sim.now
		c.state, c.next = simPaused, sim.now+int64(rem)
		return
	}
	if at := sim.gates.paced(simKey); at > sim.now { // the key's learned rate: wait for its slot
		if call.deadline != 0 && at >= call.deadline {
			sim.refused(c, rejected(ErrPaused, simKey, sim.gates.wall(at)), time.Duration(at-sim.now))
			return
		}
		call.waitingFor = sim.now
		c.state, c.next = simPaused, at
		return
	}
	sim.attempt(c)
}

// attempt sends the attempt to the imagined upstream.
func (sim *simulation) attempt(c *simCaller) {
	call := c.call
	call.c.made++
	sim.res.Attempts++
	call.attemptAt = sim.now
	o, dur, err := sim.answer()
	// The attempt's deadline: the attempt timeout or the call's, sooner.
	limit, cause := int64(simForever), ErrAttemptTimeout
	if d := sim.t.cfg.attemptTimeout; d > 0 {
		limit = sim.now + int64(d)
	}
	if call.deadline != 0 && call.deadline < limit {
		limit, cause = call.deadline, ErrCallTimeout
	}
	if dur == simForever || sim.now+dur > limit {
		if limit == simForever {
			c.state, c.next = simAnswer, simForever // hangs for good
			return
		}
		dur = limit - sim.now
		o, err = Outcome{Category: Timeout}, timedOut(cause, cause)
	}
	if sc := sim.t.cfg.slowCall; sc > 0 && o.Category == Success && time.Duration(dur) > sc {
		o.Category = Slow
	}
	call.o, call.err = o, err
	c.state, c.next = simAnswer, sim.now+dur
}

// answer is the upstream's answer to an attempt sent now: its outcome,
// how long it takes (simForever for a hang) and the error it makes.
func (sim *simulation) answer() (Outcome, int64, error) {
	s := &sim.s
	at := time.Duration(sim.now)
	failing := at >= s.HealthyFor && (s.FailFor <= 0 || at < s.HealthyFor+s.FailFor)
	if failing && s.FailureRate > 0 && s.FailureRate < 1 {
		failing = sim.rng.Float64() < s.FailureRate
	}
	dur := int64(s.AttemptTime)
	if failing && s.Failure == Throttled && s.Limit > 0 && (sim.served < 0 || sim.now-sim.served >= int64(float64(time.Second)/s.Limit)) {
		sim.served, failing = sim.now, false // the strict limiter serves this one
	}
	if !failing {
		return Outcome{Category: Success, Status: http.StatusOK}, dur, nil
	}
	switch s.Failure {
	case Timeout:
		return Outcome{Category: Timeout}, simForever, nil
	case NetworkError:
		return Outcome{Category: NetworkError}, dur, errSimRefused
	case Throttled:
		o := Outcome{Category: Throttled, Status: http.StatusTooManyRequests, RetryAfter: s.RetryAfter, HasRetryAfter: true}
		if m := sim.t.cfg.maxRetryAfter; s.RetryAfter > orDefault(m, defaultMaxRetryAfter) {
			o.RetryAfterTooLong = true
		}
		return o, dur, nil
	case ServerError:
		return Outcome{Category: ServerError, Status: http.StatusInternalServerError}, dur, nil
	}
	return Outcome{Category: s.Failure}, dur, nil
}

// answered ends an attempt as the Transport's retry loop does: the pause
// gate sees its outcome, the retry decision, the events, the breaker's
// charge, then the next attempt after the wait or the end of the call.
func (sim *simulation) answered(c *simCaller) {
	call := c.call
	o := call.o
	if sim.gates != nil {
		sim.gates.Observe(simKey, o, nil)
	}
	if sim.budget != nil {
		sim.budget.answered(o.Category)
	}
	wait, retry, budget := sim.decide(call, o)
	sim.emit(Event{Kind: EventAttempt, Attempt: call.c.attempts, Category: o.Category, Status: o.Status, Duration: time.Duration(sim.now - call.attemptAt), Err: call.err})
	switch {
	case retry:
		sim.emit(Event{Kind: EventRetry, Attempt: call.c.attempts, Category: o.Category, Status: o.Status, Delay: wait})
	case budget:
		sim.emit(Event{Kind: EventReject, Attempt: call.c.attempts, Mechanism: MechRetryBudget, Err: ErrRetryBudget})
	}
	sim.charge(call, attemptResult{o: o, permit: call.permit, err: call.err}, retry)
	call.permit.release()
	if !retry {
		sim.settle(call)
		if call.c.retried != 0 && helped(o.Category) {
			sim.budget.refund(sim.now, call.c.retried)
		}
		err := call.err
		if err != nil {
			err = call.c.fail(err, budget)
		}
		sim.end(c, o, err)
		return
	}
	call.c.prevWait = wait
	c.state, c.next = simAdmit, sim.now+int64(wait)
}

// refused ends a call whose attempt breakwater itself refused, for left
// more (0: unknown).
func (sim *simulation) refused(c *simCaller, err error, left time.Duration) {
	call := c.call
	o := Outcome{Category: Rejected}
	sim.emit(Event{Kind: EventReject, Attempt: call.c.attempts, Mechanism: mechanismOf(err), Delay: left, Err: err})
	sim.charge(call, attemptResult{o: o, err: err}, false)
	sim.settle(call)
	sim.end(c, o, call.c.fail(err, false))
}

// charge is the Transport's own charging of the breaker.
func (sim *simulation) charge(call *simCall, a attemptResult, retry bool) {
	sim.opening = call
	sim.t.charge(&call.c, &a, retry)
	sim.opening = nil
}

// settle charges what the call left pending, as the Transport does when a
// call ends.
func (sim *simulation) settle(call *simCall) {
	sim.opening = call
	call.c.settle()
	sim.opening = nil
}

// decide is the Transport's own retry decision (Transport.decide) on the
// virtual clock, for a call marked planned: each wait the retry plan's
// longest.
func (sim *simulation) decide(call *simCall, o Outcome) (wait time.Duration, retry, budget bool) {
	wait, retry, budget, _ = sim.t.decide(&call.c, &attemptResult{o: o, err: call.err}, sim.now)
	return wait, retry, budget
}

// simRequest is what a simulated call sends: a GET, which may be retried.
var simRequest = &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "http", Host: simKey}, Header: http.Header{}}

// end ends the caller's call and schedules its next one.
func (sim *simulation) end(c *simCaller, o Outcome, err error) {
	call := c.call
	switch {
	case o.Category == Rejected:
		sim.res.Rejected++
	case err != nil || o.Category.Failure():
		sim.res.Failed++
	default:
		sim.res.Succeeded++
	}
	sim.res.WorstCall = max(sim.res.WorstCall, time.Duration(sim.now-call.start))
	sim.emit(Event{Kind: EventCallEnd, Attempts: call.c.made, Category: o.Category, Status: o.Status, Duration: time.Duration(sim.now - call.start), Err: err})
	next := sim.now + int64(sim.s.Think)
	if next == call.start {
		// A call that took no virtual time (refused at once) is followed
		// by the next one a moment later, so that virtual time advances.
		next += int64(simRefusedGap)
	}
	c.call, c.state, c.next = nil, simIdle, next
}

// simRefusedGap is how long a caller without think time waits after a call
// that took no time at all before it makes the next one.
const simRefusedGap = time.Millisecond

// errSimRefused is the error of a simulated refused connection.
var errSimRefused = &simNetError{}

type simNetError struct{}

func (*simNetError) Error() string   { return "dial tcp: connection refused (simulated)" }
func (*simNetError) Timeout() bool   { return false }
func (*simNetError) Temporary() bool { return false }
