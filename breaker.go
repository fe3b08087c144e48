package breakwater

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/breakwater-go/breakwater/internal/keyed"
	"github.com/breakwater-go/breakwater/internal/sat"
	"github.com/breakwater-go/breakwater/internal/window"
)

// Breaker is one key's circuit breaker. Its methods are safe for concurrent
// use, and a nil *Breaker (a disabled registry) admits everything and
// ignores every report.
//
// The closed state admits and records with atomic operations only; state
// changes take a per-breaker lock, and listeners run after it is released.
// Open → half-open happens lazily, on the first admission or read after the
// open duration. No goroutine waits per breaker: an opening sets a timer
// whose function runs once, briefly, near its end, so that until then an
// open breaker rejects without reading the clock.
type Breaker struct {
	key string
	bs  *Breakers

	// sg packs generation<<2 | state; every transition bumps the generation.
	sg        atomic.Uint64
	openUntil atomic.Int64 // registry nanoseconds
	// due says the open duration may be about to end: cleared as the
	// breaker opens and set by a timer shortly before openUntil (see
	// armDue), so that an open breaker rejects without reading the clock
	// until then.
	due           atomic.Bool
	consec        atomic.Int64
	lastFail      atomic.Int64 // registry nanoseconds of the latest failure counted closed; 0 none
	shadowRejects atomic.Int64
	openErr       atomic.Pointer[Error]
	busyErr       *Error
	faultErr      *Error

	mu       sync.Mutex
	window   window.Failures
	share    *window.Share // a Window with a ratio
	rate     window.Rate
	opens    int
	openedAt int64
	openedOn int   // the failures the latest opening on failures counted
	outageAt int64 // when the first of the current run of openings was
	// dueFire is when the current opening's timer is to set due;
	// dueAt when the earliest timer still pending fires, 0 when none is.
	dueFire, dueAt int64
	probes         []probeLease
	wake           chan struct{} // closed when a probe ends or the state changes; nil while nobody waits
	leaseSeq       uint64
	probeOK        int
	needOK         int
	lastCat        Category
	lastAt         int64
	hasLast        bool
	since          int64  // when the breaker entered its state
	reason         Reason // why; empty before the first transition
}

type probeLease struct {
	seq      uint64 // 0: free
	deadline int64
}

func pack(gen uint64, s State) uint64 { return gen<<2 | uint64(s) }

func unpack(v uint64) (uint64, State) { return v >> 2, State(v & 3) }

// weigh tells the registry what evicting the breaker would lose (see
// [keyed.Map]): an open or half-open breaker must not be lost (nor may the
// observers that follow its transitions miss its closing); a closed one
// that counted a failure lately holds state worth keeping; a closed one
// with no recent failure is as good as a new one.
func (b *Breaker) weigh(time.Time) keyed.Keep {
	if _, s := unpack(b.sg.Load()); s != StateClosed {
		return keyed.Hard
	}
	t := b.bs.now() // the registry's clock, which a simulation may run
	if b.consec.Load() > 0 {
		return keyed.Soft
	}
	if f := b.lastFail.Load(); f != 0 && t-f < int64(max(b.bs.cfg.policy.within, defaultWindowWithin)) {
		return keyed.Soft
	}
	return keyed.None
}

// A Permit is one admission by a breaker. Report the attempt's outcome with
// [Permit.Done] when it is over (its response body closed): it counts the
// outcome and gives back a half-open probe's lease. Outcomes reported after
// the breaker changed state (a stale generation) change nothing. The zero
// Permit ignores everything.
type Permit struct {
	b     *Breaker
	gen   uint64
	lease uint64 // probe lease sequence; 0 when not a probe
	slot  int32
}

// probe reports whether the permit holds a half-open probe lease.
func (p Permit) probe() bool { return p.lease != 0 }

// Allow admits one attempt or rejects it with an [*Error] matching
// [ErrCircuitOpen] (open, or a fault injected), and also [ErrHalfOpenBusy]
// when half-open with every probe slot taken. In
// shadow mode it admits everything and counts what it would have rejected.
func (b *Breaker) Allow() (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	gen, s := unpack(b.sg.Load())
	switch s {
	case StateClosed:
		if r := b.bs.cfg.faultRate; r > 0 && rand.Float64() < r {
			return Permit{}, b.faultErr
		}
		return Permit{b: b, gen: gen}, nil
	case StateOpen:
		if !b.due.Load() || b.bs.now() < b.openUntil.Load() {
			return b.reject(b.openErr.Load())
		}
		b.openElapsed(gen)
	}
	return b.admitProbe()
}

func (b *Breaker) reject(err *Error) (Permit, error) {
	if b.bs.cfg.mode == modeShadow {
		b.shadowRejects.Add(1)
		return Permit{}, nil
	}
	return Permit{}, err
}

// openElapsed moves an open breaker of generation gen to half-open.
func (b *Breaker) openElapsed(gen uint64) {
	b.mu.Lock()
	g, s := unpack(b.sg.Load())
	if g != gen || s != StateOpen || b.bs.now() < b.openUntil.Load() {
		b.mu.Unlock()
		return
	}
	b.toHalfOpenLocked(ReasonOpenElapsed)
	b.since = b.openUntil.Load() // half-open since the open time elapsed, not since asked
	b.mu.Unlock()
	b.bs.flush()
}

func (b *Breaker) admitProbe() (Permit, error) {
	b.mu.Lock()
	gen, s := unpack(b.sg.Load())
	switch s {
	case StateClosed:
		b.mu.Unlock()
		return Permit{b: b, gen: gen}, nil
	case StateOpen:
		b.mu.Unlock()
		return b.reject(b.openErr.Load())
	}
	now := b.bs.now()
	free := -1
	for i := range b.probes {
		l := &b.probes[i]
		if l.seq != 0 && now >= l.deadline {
			l.seq = 0 // reclaimed: its outcome never arrived
		}
		if l.seq == 0 && free < 0 {
			free = i
		}
	}
	if free < 0 && len(b.probes) < b.allowance() {
		b.probes = append(b.probes, probeLease{})
		free = len(b.probes) - 1
	}
	if free < 0 {
		b.mu.Unlock()
		return b.reject(b.busyErr)
	}
	b.leaseSeq++
	b.probes[free] = probeLease{seq: b.leaseSeq, deadline: now + int64(b.bs.cfg.probeTimeout)}
	p := Permit{b: b, gen: gen, lease: b.leaseSeq, slot: int32(free)}
	b.mu.Unlock()
	return p, nil
}

// maxRampProbes bounds the probes a half-open breaker's ramp lets through
// at once.
const maxRampProbes = 1024

// allowance is how many probes a half-open breaker lets through at once:
// its configured probes, doubled for each probe that succeeded, as TCP's
// slow start doubles its window per round of acknowledgements, so that
// the traffic admitted grows with what the upstream answers. b.mu must be
// held.
func (b *Breaker) allowance() int {
	n := b.bs.cfg.maxProbes
	return min(n<<min(b.probeOK, 10), max(n, maxRampProbes))
}

// halfOpenHold bounds how long a call that finds every probe slot taken
// waits for a probe's answer: a quarter of the time its deadline leaves,
// and at most maxHalfOpenHold. A probe answered within it lets the call
// through (or refuses it, when the probe failed) instead of refusing a
// call the recovered upstream would have served.
const maxHalfOpenHold = time.Second

// allowWait is Allow for a call that may wait until dl (zero: no
// deadline) while the breaker is half-open with every probe slot taken:
// it waits for a probe to end, within halfOpenHold, and asks again. An
// open breaker still refuses at once.
func (b *Breaker) allowWait(ctx context.Context, dl time.Time) (Permit, error) {
	p, err := b.Allow()
	if err == nil || err != b.busyErr {
		return p, err
	}
	hold := maxHalfOpenHold
	if !dl.IsZero() {
		hold = min(hold, time.Until(dl)/4)
	}
	if hold <= 0 {
		return p, err
	}
	timer := time.NewTimer(hold)
	defer timer.Stop()
	for {
		b.mu.Lock()
		_, s := unpack(b.sg.Load())
		var wake <-chan struct{}
		if s == StateHalfOpen {
			if b.wake == nil {
				b.wake = make(chan struct{})
			}
			wake = b.wake
		}
		b.mu.Unlock()
		if wake != nil {
			select {
			case <-wake:
			case <-timer.C:
				return Permit{}, b.busyErr
			case <-ctx.Done():
				return Permit{}, b.busyErr
			}
		}
		if p, err = b.Allow(); err != b.busyErr {
			return p, err
		}
	}
}

// changedLocked wakes the calls waiting for a probe slot. b.mu must be
// held.
func (b *Breaker) changedLocked() {
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// record reports the outcome of the permit's attempt: successes and
// failures as the breaker's options judge o.Category, neutral outcomes
// ignored. It does not release a probe lease; see release.
func (p Permit) record(o Outcome) {
	b := p.b
	if b == nil {
		return
	}
	switch b.bs.cfg.judge(o.Category) {
	case success:
		b.succeed(p.gen, false)
	case failure:
		b.fail(p.gen, o, false)
	}
}

// release gives back the permit's probe lease, if it holds one. It is safe
// to call more than once.
func (p Permit) release() {
	if p.lease == 0 {
		return
	}
	b := p.b
	b.mu.Lock()
	if int(p.slot) < len(b.probes) {
		if l := &b.probes[p.slot]; l.seq == p.lease {
			l.seq = 0
			b.changedLocked()
		}
	}
	b.mu.Unlock()
}

// Done reports the outcome of the permit's attempt, successes and failures
// as the breaker's options judge o.Category (neutral outcomes are
// ignored), and gives back a half-open probe's lease. Call it once, when
// the attempt is over.
func (p Permit) Done(o Outcome) {
	p.record(o)
	p.release()
}

// succeed records a success admitted under generation gen; oob marks an
// out-of-band recovery signal, which also counts while open.
func (b *Breaker) succeed(gen uint64, oob bool) {
	g, s := unpack(b.sg.Load())
	if g != gen {
		return
	}
	if s == StateClosed {
		switch b.bs.cfg.policy.kind {
		case policyWindow:
			if b.share != nil && b.share.Success() {
				b.mu.Lock()
				b.share.Quiet(b.bs.now())
				b.mu.Unlock()
			}
		case policyConsecutive:
			if b.consec.Load() != 0 {
				b.consec.Store(0)
			}
		case policyFailureRate:
			now := b.bs.now()
			b.rate.Add(now, 1, 0)
			if calls, fails := b.rate.Sum(now); b.bs.cfg.policy.rateTrips(calls, fails) {
				b.tripOnRate(gen) // this success completed the minimum volume
			}
		}
		return
	}
	b.mu.Lock()
	g, s = unpack(b.sg.Load())
	if g != gen {
		b.mu.Unlock()
		return
	}
	switch s {
	case StateOpen:
		if !oob {
			b.mu.Unlock()
			return
		}
		b.toHalfOpenLocked(ReasonRecovery)
		fallthrough
	case StateHalfOpen:
		b.probeOK++
		b.changedLocked() // the ramp lets more through
		if b.probeOK >= b.needOK {
			reason := ReasonProbesSucceeded
			if oob {
				reason = ReasonRecovery
			}
			b.toClosedLocked(reason)
		}
	}
	b.mu.Unlock()
	b.bs.flush()
}

// fail records a failure admitted under generation gen.
func (b *Breaker) fail(gen uint64, o Outcome, oob bool) {
	b.mu.Lock()
	g, s := unpack(b.sg.Load())
	if g != gen && !oob {
		b.mu.Unlock()
		return
	}
	now := b.bs.now()
	b.lastCat, b.lastAt, b.hasLast = o.Category, now, true
	switch s {
	case StateClosed:
		b.lastFail.Store(max(now, 1))
		if n, open := b.count(now, o.Category); open {
			b.toOpenLocked(now, ReasonFailures, o, n)
		}
	case StateHalfOpen:
		b.toOpenLocked(now, ReasonProbeFailed, o, 0)
	}
	b.mu.Unlock()
	b.bs.flush()
}

// count adds a failure to the policy's state and reports the count and
// whether the breaker must open. b.mu must be held.
func (b *Breaker) count(now int64, c Category) (int, bool) {
	p := &b.bs.cfg.policy
	switch p.kind {
	case policyConsecutive:
		n := int(b.consec.Add(1))
		threshold := p.threshold
		if t := p.byCategory[c]; t > 0 {
			threshold = t
		}
		return n, n >= threshold
	case policyFailureRate:
		b.rate.Add(now, 1, 1)
		calls, fails := b.rate.Sum(now)
		return int(fails), p.rateTrips(calls, fails)
	}
	threshold := p.tolerate + 1
	if t := p.byCategory[c]; t > 0 {
		threshold = t
	}
	if b.share != nil {
		fails, calls := b.share.Add(now)
		return int(fails), fails >= int64(threshold) && window.LowerBound(fails, calls) >= p.ratio
	}
	n := b.window.Add(now, int64(p.within))
	return n, n >= threshold
}

// tripOnRate opens a closed FailureRate breaker of generation gen whose
// window, re-read under the lock, is over the threshold.
func (b *Breaker) tripOnRate(gen uint64) {
	b.mu.Lock()
	now := b.bs.now()
	calls, fails := b.rate.Sum(now)
	if g, s := unpack(b.sg.Load()); g == gen && s == StateClosed && b.bs.cfg.policy.rateTrips(calls, fails) {
		b.toOpenLocked(now, ReasonFailures, Outcome{Category: b.lastCat}, int(fails))
	}
	b.mu.Unlock()
	b.bs.flush()
}

func (b *Breaker) clearCounts() {
	b.consec.Store(0)
	b.window.Clear()
	if b.share != nil {
		b.share.Clear()
	}
	b.rate.Clear()
}

// openFor is the next open duration at now, before jitter, and whether it
// is a server's hint (jitter then only delays it). b.mu must be held.
func (b *Breaker) openFor(now int64, o Outcome) (d time.Duration, hint bool) {
	cfg := &b.bs.cfg
	if o.Category == Throttled && o.HasRetryAfter && o.RetryAfter > 0 {
		return min(o.RetryAfter, cfg.maxOpenTimeout), true
	}
	var age int64
	if b.opens > 0 {
		age = now - b.outageAt
	}
	return probeEvery(time.Duration(age), cfg.openTimeout, cfg.maxOpenTimeout), false
}

func (b *Breaker) toOpenLocked(now int64, reason Reason, o Outcome, failures int) {
	d, hint := b.openFor(now, o)
	if j := b.bs.cfg.jitter; j > 0 {
		// A hint is never cut short; a probe never comes later than
		// the cadence promises.
		if f := sat.Frac(d, rand.Float64()*j); hint {
			d = time.Duration(sat.Add(int64(d), int64(f)))
		} else {
			d -= f
		}
	}
	b.needOK = b.bs.cfg.successes
	if o.Category == Throttled {
		b.needOK = 1
	}
	if b.opens == 0 {
		b.outageAt = now
	}
	if failures > 0 || b.opens == 0 {
		b.openedOn = failures // a failed probe's reopening keeps the count
	}
	b.opens++
	b.openedAt = now
	until := sat.Add(now, int64(d))
	b.openUntil.Store(until)
	b.armDue(now, until)
	b.openErr.Store(b.bs.openError(b.key, b.bs.wall(until)))
	b.clearCounts()
	t := b.transitionLocked(StateOpen, reason)
	t.Category, t.Failures, t.OpenFor, t.Opens = o.Category, failures, d, b.opens
	b.queue(t)
}

// dueLead is how long before an opening's end (at most a sixteenth of
// the opening) its timer sets due: from then on admission reads the clock,
// so the open state ends exactly at openUntil, and a timer that fires a
// little late holds no probe back.
const dueLead = 10 * time.Millisecond

// armDue clears due for an opening that ends at until, before the
// opening is published, and makes sure a timer sets it shortly before
// then (see dueLead). b.mu must be held. A breaker keeps at most the
// timers whose firing comes before every other's: an opening that ends
// later than a pending timer fires leaves it to that timer (see
// dueFired), one that ends sooner gets a timer of its own. Timers are
// never stopped or reset, which from outside the synctest bubble that
// made one is fatal. A simulation's virtual clock runs no timers: due
// stays set and admission reads the clock.
func (b *Breaker) armDue(now, until int64) {
	if b.bs.virtual != nil {
		b.due.Store(true)
		return
	}
	b.due.Store(false)
	d := until - now
	b.dueFire = until - min(d/16, int64(dueLead))
	if b.dueAt == 0 || b.dueFire < b.dueAt {
		b.armLocked(now)
	}
}

// armLocked starts a timer that fires at dueFire. b.mu must be held. The
// timer holds b weakly: a breaker its registry evicted (after a reset
// ended a long opening) is freed at once, not when the timer fires.
func (b *Breaker) armLocked(now int64) {
	fire := b.dueFire
	b.dueAt = fire
	wb := weak.Make(b)
	time.AfterFunc(time.Duration(fire-now), func() {
		if b := wb.Value(); b != nil {
			b.dueFired(fire)
		}
	})
}

// dueFired runs when the timer set for fire fires: it sets due once the
// current opening's dueFire is reached, or else, when no earlier timer is
// pending, starts one for it.
func (b *Breaker) dueFired(fire int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dueAt == fire {
		b.dueAt = 0
	}
	now := b.bs.now()
	switch {
	case now >= b.dueFire:
		b.due.Store(true)
	case b.dueAt == 0:
		b.armLocked(now)
	}
}

func (b *Breaker) toHalfOpenLocked(reason Reason) {
	b.probes = b.probes[:b.bs.cfg.maxProbes]
	clear(b.probes)
	b.probeOK = 0
	b.queue(b.transitionLocked(StateHalfOpen, reason))
}

func (b *Breaker) toClosedLocked(reason Reason) {
	b.opens = 0
	b.probeOK = 0
	b.probes = b.probes[:b.bs.cfg.maxProbes]
	clear(b.probes)
	b.clearCounts()
	b.queue(b.transitionLocked(StateClosed, reason))
}

// transitionLocked bumps the generation and sets the state. b.mu must be held.
func (b *Breaker) transitionLocked(to State, reason Reason) Transition {
	gen, from := unpack(b.sg.Load())
	gen++
	b.sg.Store(pack(gen, to))
	b.changedLocked()
	now := b.bs.now()
	b.since, b.reason = now, reason
	return Transition{Key: b.key, From: from, To: to, Reason: reason, At: b.bs.wall(now), Generation: gen, Opens: b.opens}
}

func (b *Breaker) queue(t Transition) {
	if len(*b.bs.listeners.Load()) > 0 {
		b.bs.emit(t)
	}
}

// State reports the breaker's state; an open breaker whose open duration
// has elapsed reads as half-open (and becomes half-open).
func (b *Breaker) State() State {
	if b == nil {
		return StateClosed
	}
	gen, s := unpack(b.sg.Load())
	if s == StateOpen && b.bs.now() >= b.openUntil.Load() {
		b.openElapsed(gen)
		_, s = unpack(b.sg.Load())
	}
	return s
}

// Trip forces the breaker open for d (the open timeout when d <= 0),
// whatever its state; admissions get [ErrCircuitOpen] until then.
func (b *Breaker) Trip(d time.Duration) {
	if b == nil {
		return
	}
	if d <= 0 {
		d = b.bs.cfg.openTimeout
	}
	b.forceOpen(d, ReasonTrip, func(int64) bool { return true })
}

// forceOpen opens the breaker for d with reason when ok, called under the
// breaker's lock with the current time, agrees.
func (b *Breaker) forceOpen(d time.Duration, reason Reason, ok func(now int64) bool) {
	b.mu.Lock()
	now := b.bs.now()
	if !ok(now) {
		b.mu.Unlock()
		return
	}
	b.needOK = b.bs.cfg.successes
	b.openedAt, b.openedOn = now, 0
	until := sat.Add(now, int64(d))
	b.openUntil.Store(until)
	b.armDue(now, until)
	b.openErr.Store(b.bs.openError(b.key, b.bs.wall(until)))
	b.clearCounts()
	t := b.transitionLocked(StateOpen, reason)
	t.OpenFor = d
	b.queue(t)
	b.mu.Unlock()
	b.bs.flush()
}

// Reset closes the breaker and forgets its failures and reopen history.
// Outcomes of attempts admitted before the reset change nothing.
func (b *Breaker) Reset() {
	if b == nil {
		return
	}
	b.reset(ReasonReset)
}

func (b *Breaker) reset(reason Reason) {
	b.mu.Lock()
	b.toClosedLocked(reason)
	b.mu.Unlock()
	b.bs.flush()
}

// RecordFailure records an out-of-band failure of category c (a failure category
// such as [ServerError] unless the options count others). It counts exactly
// like a failing call: closed, it adds to the policy's count; half-open, it
// reopens; open, it changes nothing.
func (b *Breaker) RecordFailure(c Category) {
	if b == nil || b.bs.cfg.judge(c) != failure {
		return
	}
	b.State() // settle a lapsed open state first
	b.fail(0, Outcome{Category: c}, true)
}

// RecordSuccess records an out-of-band success, such as a health probe's.
// Closed, it counts like a successful call. Half-open, it counts as a
// successful probe. Open, it moves the breaker to half-open with this
// success counted (closing it at once when one success suffices).
func (b *Breaker) RecordSuccess() {
	if b == nil {
		return
	}
	gen, _ := unpack(b.sg.Load())
	b.succeed(gen, true)
}

// Snapshot returns the breaker's current state.
func (b *Breaker) Snapshot() BreakerSnapshot {
	if b == nil {
		return BreakerSnapshot{State: StateClosed, StateName: StateClosed.String()}
	}
	b.State() // settle a lapsed open state first
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.bs.now()
	gen, s := unpack(b.sg.Load())
	snap := BreakerSnapshot{
		Key:              b.key,
		State:            s,
		StateName:        s.String(),
		Opens:            b.opens,
		ProbeSuccesses:   b.probeOK,
		ShadowRejections: b.shadowRejects.Load(),
		Generation:       gen,
		Since:            b.bs.wall(b.since),
		Reason:           b.reason,
	}
	switch p := b.bs.cfg.policy; p.kind {
	case policyConsecutive:
		snap.Failures, snap.Threshold = int(b.consec.Load()), p.threshold
	case policyFailureRate:
		calls, f := b.rate.Sum(now)
		snap.Failures = int(f)
		snap.Threshold = max(1, int(math.Ceil(p.ratio*float64(max(calls, int64(p.minCalls))))))
	default:
		if b.share != nil {
			f, _ := b.share.Live(now)
			snap.Failures = int(f)
		} else {
			snap.Failures = b.window.Live(now, int64(p.within))
		}
		snap.Threshold = p.tolerate + 1
	}
	if s != StateClosed {
		snap.OpenedOn = b.openedOn
	}
	if s == StateHalfOpen {
		snap.ProbesAllowed = b.allowance()
	}
	if s == StateOpen {
		until := b.openUntil.Load()
		snap.OpenUntil = b.bs.wall(until)
		snap.Remaining = max(0, time.Duration(until-now))
		snap.RemainingSeconds = snap.Remaining.Seconds()
	}
	for _, l := range b.probes {
		if l.seq != 0 && now < l.deadline {
			snap.ProbesInFlight++
		}
	}
	if b.hasLast {
		snap.LastFailure = b.lastCat.String()
		snap.LastFailureAt = b.bs.wall(b.lastAt)
	}
	return snap
}
