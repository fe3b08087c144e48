package breakwater

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// BreakerMode selects what a breaker does with its verdicts.
type BreakerMode uint8

const (
	// ModeEnforce is the default: an open breaker rejects attempts.
	ModeEnforce BreakerMode = iota
	// ModeShadow runs the state machine and counts what it would have
	// rejected ([BreakerSnapshot.ShadowRejections]), but rejects nothing.
	ModeShadow
	// ModeDisabled installs no breaker: no state is kept, nothing is
	// rejected and every control method is a no-op.
	ModeDisabled
)

// Defaults of a breaker.
const (
	DefaultOpenTimeout    = 5 * time.Second
	DefaultMaxOpenTimeout = 60 * time.Second
	DefaultOpenJitter     = 0.10
	DefaultHalfOpenProbes = 1
	DefaultProbeSuccesses = 2
	DefaultProbeTimeout   = 10 * time.Second
	DefaultBreakerIdleTTL = 10 * time.Minute
)

// A BreakerOption configures [NewBreakers].
type BreakerOption interface{ applyBreaker(*breakerConfig) }

type breakerOptionFunc func(*breakerConfig)

func (f breakerOptionFunc) applyBreaker(c *breakerConfig) { f(c) }

type breakerConfig struct {
	policy         Policy
	openTimeout    time.Duration
	maxOpenTimeout time.Duration
	jitter         float64
	maxProbes      int
	successes      int
	probeTimeout   time.Duration
	countAuth      bool
	countThrottled bool
	mode           BreakerMode
	faultRate      float64
	maxKeys        int
	idleTTL        time.Duration
	listeners      []func(Transition)
	autoWithin     bool // the Window's within was left to be sized
}

// WithPolicy sets the counting policy. Default: Window(10, auto).
func WithPolicy(p Policy) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.policy = p })
}

// WithOpenTimeout sets the first open duration and the cap that consecutive
// reopens double it up to. Defaults: 5 s and 60 s.
func WithOpenTimeout(base, max time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.openTimeout, c.maxOpenTimeout = base, max })
}

// WithOpenJitter sets the positive jitter added to each open duration as a
// fraction of it: 0.1 (the default) adds up to 10 %. 0 disables jitter.
func WithOpenJitter(fraction float64) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.jitter = fraction })
}

// WithHalfOpen sets how many probes may be in flight while half-open and how
// many successful probes close the breaker. Defaults: 1 and 2.
func WithHalfOpen(maxProbes, successes int) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.maxProbes, c.successes = maxProbes, successes })
}

// WithProbeTimeout sets how long a half-open probe lease may be held before
// it is reclaimed (a probe whose outcome never arrives). A [Transport] sets
// it to its attempt timeout. Default: 10 s.
func WithProbeTimeout(d time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.probeTimeout = d })
}

// WithCountAuthErrors makes [AuthError] outcomes count as failures
// (401, 403 and 407 are successes by default: the upstream answered).
func WithCountAuthErrors(on bool) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.countAuth = on })
}

// WithCountThrottled makes [Throttled] outcomes count as failures. A breaker
// opened by a throttled outcome that carried a Retry-After hint stays open
// for the hint (capped by the maximum open timeout) and closes after a
// single successful probe.
func WithCountThrottled(on bool) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.countThrottled = on })
}

// WithBreakerMode selects [ModeEnforce] (default), [ModeShadow] or
// [ModeDisabled].
func WithBreakerMode(m BreakerMode) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.mode = m })
}

// WithFaultInjection makes closed breakers reject the given fraction
// (0 < rate <= 1) of admissions with [ErrCircuitOpen], without calling the
// upstream: a way to rehearse an outage. It contradicts [ModeDisabled]; the
// combination is a construction error.
func WithFaultInjection(rate float64) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.faultRate = rate })
}

// WithBreakerLimits bounds the registry: at most maxKeys breakers, and
// closed breakers unused for idleTTL are evicted. Open and half-open
// breakers are never evicted; when the registry is full of them, new keys
// share one overflow breaker. Defaults: 10 000 keys, 10 minutes.
func WithBreakerLimits(maxKeys int, idleTTL time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.maxKeys, c.idleTTL = maxKeys, idleTTL })
}

// OnTransition adds a listener called once for every state change, in the
// order the changes happened, outside every lock. A listener that panics is
// recovered and ignored.
func OnTransition(fn func(Transition)) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if fn != nil {
			c.listeners = append(c.listeners, fn)
		}
	})
}

// WithBreakerObserver reports the registry's transitions to o as
// [EventTransition] events (with context.Background). A [Transport] that
// owns its registry does this for its own observers already.
func WithBreakerObserver(o Observer) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if o != nil {
			c.listeners = append(c.listeners, transitionReporter(o))
		}
	})
}

func (c *breakerConfig) validate() error {
	if err := c.policy.validate(); err != nil {
		return err
	}
	var errs []error
	if c.openTimeout <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: open timeout must be > 0, got %s", c.openTimeout))
	}
	if c.maxOpenTimeout < c.openTimeout {
		errs = append(errs, fmt.Errorf("breakwater: max open timeout %s is below the open timeout %s", c.maxOpenTimeout, c.openTimeout))
	}
	if !(c.jitter >= 0 && c.jitter <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: open jitter must be in [0, 1], got %v", c.jitter))
	}
	if c.maxProbes < 1 || c.successes < 1 {
		errs = append(errs, fmt.Errorf("breakwater: half-open needs >= 1 probe and >= 1 success, got %d and %d", c.maxProbes, c.successes))
	}
	if c.probeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: probe timeout must be > 0, got %s", c.probeTimeout))
	}
	if !(c.faultRate >= 0 && c.faultRate <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: fault injection rate must be in [0, 1], got %v", c.faultRate))
	}
	if c.faultRate > 0 && c.mode == ModeDisabled {
		errs = append(errs, errors.New("breakwater: fault injection and a disabled breaker contradict each other"))
	}
	if c.mode > ModeDisabled {
		errs = append(errs, fmt.Errorf("breakwater: unknown breaker mode %d", c.mode))
	}
	if c.maxKeys < 1 || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: breaker limits need maxKeys >= 1 and idleTTL > 0, got %d and %s", c.maxKeys, c.idleTTL))
	}
	return errors.Join(errs...)
}

// verdict of one outcome for a breaker.
type verdict uint8

const (
	neutral verdict = iota
	success
	failure
)

func (c *breakerConfig) judge(cat Category) verdict {
	switch cat {
	case Success, ClientError:
		return success
	case AuthError:
		if c.countAuth {
			return failure
		}
		return success
	case Throttled:
		if c.countThrottled {
			return failure
		}
		return neutral
	}
	if cat.Failure() {
		return failure
	}
	return neutral
}

// Breakers is a registry of circuit breakers, one per key, created lazily on
// first use and bounded in number (see [WithBreakerLimits]). It is safe for
// concurrent use. Reads never create a breaker: a key never used reads as
// closed.
type Breakers struct {
	cfg   breakerConfig
	start time.Time
	m     *keyedMap[*Breaker]

	listeners atomic.Pointer[[]func(Transition)]
	evMu      sync.Mutex
	evQueue   []Transition
	flushing  bool
}

// NewBreakers returns a registry configured by opts, or an error describing
// every invalid option.
func NewBreakers(opts ...BreakerOption) (*Breakers, error) {
	cfg := breakerConfig{
		policy:         Window(10, 0),
		openTimeout:    DefaultOpenTimeout,
		maxOpenTimeout: DefaultMaxOpenTimeout,
		jitter:         DefaultOpenJitter,
		maxProbes:      DefaultHalfOpenProbes,
		successes:      DefaultProbeSuccesses,
		probeTimeout:   DefaultProbeTimeout,
		maxKeys:        DefaultMaxBreakers,
		idleTTL:        DefaultBreakerIdleTTL,
	}
	for _, o := range opts {
		if o != nil {
			o.applyBreaker(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.policy.kind == policyWindow && cfg.policy.within == 0 {
		cfg.policy.within = DefaultWindowWithin
		cfg.autoWithin = true
	}
	bs := &Breakers{cfg: cfg, start: time.Now()}
	ls := cfg.listeners
	bs.listeners.Store(&ls)
	if cfg.mode != ModeDisabled {
		bs.m = newKeyedMap(cfg.maxKeys, cfg.idleTTL, bs.newBreaker, (*Breaker).evictable)
	}
	return bs, nil
}

// now is monotonic nanoseconds since the registry was made.
func (bs *Breakers) now() int64 { return int64(time.Since(bs.start)) }

func (bs *Breakers) wall(n int64) time.Time { return bs.start.Add(time.Duration(n)) }

// Mode reports the registry's mode.
func (bs *Breakers) Mode() BreakerMode { return bs.cfg.mode }

// Policy reports the registry's counting policy, with an automatic window
// resolved.
func (bs *Breakers) Policy() Policy { return bs.cfg.policy }

// Get returns the breaker for key, creating it if needed. It returns nil
// when the registry is disabled; a nil *Breaker admits everything.
func (bs *Breakers) Get(key string) *Breaker {
	if bs == nil || bs.m == nil {
		return nil
	}
	return bs.m.get(key)
}

// Lookup returns the breaker for key without creating it.
func (bs *Breakers) Lookup(key string) (*Breaker, bool) {
	if bs == nil || bs.m == nil {
		return nil, false
	}
	return bs.m.lookup(key)
}

// Len reports how many breakers the registry holds.
func (bs *Breakers) Len() int {
	if bs == nil || bs.m == nil {
		return 0
	}
	return bs.m.len()
}

// Allow asks key's breaker to admit one attempt. See [Breaker.Allow].
func (bs *Breakers) Allow(key string) (Permit, error) { return bs.Get(key).Allow() }

// State reports key's state; a key never used is closed.
func (bs *Breakers) State(key string) State {
	b, _ := bs.Lookup(key)
	return b.State()
}

// Snapshot returns key's state, or false when no breaker exists for key.
func (bs *Breakers) Snapshot(key string) (BreakerSnapshot, bool) {
	b, ok := bs.Lookup(key)
	if !ok {
		return BreakerSnapshot{}, false
	}
	return b.Snapshot(), true
}

// Snapshots returns the state of every breaker in the registry.
func (bs *Breakers) Snapshots() []BreakerSnapshot {
	if bs == nil {
		return nil
	}
	var out []BreakerSnapshot
	bs.each(func(b *Breaker) { out = append(out, b.Snapshot()) })
	return out
}

func (bs *Breakers) each(fn func(*Breaker)) {
	if bs == nil || bs.m == nil {
		return
	}
	bs.m.each(func(_ string, b *Breaker) { fn(b) })
}

// Trip forces key's breaker open for d (the open timeout when d <= 0).
func (bs *Breakers) Trip(key string, d time.Duration) { bs.Get(key).Trip(d) }

// Reset closes key's breaker and forgets its failures.
func (bs *Breakers) Reset(key string) {
	if b, ok := bs.Lookup(key); ok {
		b.Reset()
	}
}

// ResetAll closes every breaker in the registry.
func (bs *Breakers) ResetAll() { bs.each((*Breaker).Reset) }

// Melt records an out-of-band failure of category c against key's breaker;
// it counts exactly like a failing call.
func (bs *Breakers) Melt(key string, c Category) { bs.Get(key).Melt(c) }

// RecordSuccess records an out-of-band success (a health probe's recovery
// signal) against key's breaker. See [Breaker.RecordSuccess].
func (bs *Breakers) RecordSuccess(key string) {
	if b, ok := bs.Lookup(key); ok {
		b.RecordSuccess()
	}
}

// Available reports whether every named key's breaker is closed.
func (bs *Breakers) Available(keys ...string) bool {
	for _, k := range keys {
		if bs.State(k) != StateClosed {
			return false
		}
	}
	return true
}

// Blown reports whether any named key's breaker is open.
func (bs *Breakers) Blown(keys ...string) bool {
	for _, k := range keys {
		if bs.State(k) == StateOpen {
			return true
		}
	}
	return false
}

// addListener adds a transition listener after construction (a Transport
// sharing the registry forwards transitions to its observers).
func (bs *Breakers) addListener(fn func(Transition)) {
	bs.evMu.Lock()
	defer bs.evMu.Unlock()
	ls := append(append([]func(Transition){}, *bs.listeners.Load()...), fn)
	bs.listeners.Store(&ls)
}

func (bs *Breakers) emit(t Transition) {
	bs.evMu.Lock()
	bs.evQueue = append(bs.evQueue, t)
	bs.evMu.Unlock()
}

// flush delivers queued transitions in order. Only one goroutine delivers at
// a time; a transition queued meanwhile (also by a listener) is delivered by
// the goroutine already delivering.
func (bs *Breakers) flush() {
	if len(*bs.listeners.Load()) == 0 {
		return
	}
	bs.evMu.Lock()
	if bs.flushing {
		bs.evMu.Unlock()
		return
	}
	bs.flushing = true
	for len(bs.evQueue) > 0 {
		t := bs.evQueue[0]
		bs.evQueue = bs.evQueue[1:]
		bs.evMu.Unlock()
		for _, fn := range *bs.listeners.Load() {
			callListener(fn, t)
		}
		bs.evMu.Lock()
	}
	bs.evQueue = nil
	bs.flushing = false
	bs.evMu.Unlock()
}

func callListener(fn func(Transition), t Transition) {
	defer func() { _ = recover() }()
	fn(t)
}

// Breaker is one key's circuit breaker. Its methods are safe for concurrent
// use, and a nil *Breaker (a disabled registry) admits everything and
// ignores every report.
//
// The closed state admits and records with atomic operations only; state
// changes take a per-breaker lock, and listeners run after it is released.
// Open → half-open happens lazily, on the first admission or read after the
// open duration; no goroutine runs per breaker.
type Breaker struct {
	key string
	bs  *Breakers

	// sg packs generation<<2 | state; every transition bumps the generation.
	sg            atomic.Uint64
	openUntil     atomic.Int64 // registry nanoseconds
	consec        atomic.Int64
	shadowRejects atomic.Int64
	openErr       atomic.Pointer[BreakerError]
	busyErr       *BreakerError
	faultErr      *BreakerError

	mu       sync.Mutex
	window   failureWindow
	rate     rateWindow
	opens    int
	openedAt int64
	probes   []probeLease
	leaseSeq uint64
	probeOK  int
	needOK   int
	lastCat  Category
	lastAt   int64
	hasLast  bool
}

type probeLease struct {
	seq      uint64 // 0: free
	deadline int64
}

func (bs *Breakers) newBreaker(key string) *Breaker {
	b := &Breaker{
		key:      key,
		bs:       bs,
		busyErr:  &BreakerError{Key: key, State: StateHalfOpen},
		faultErr: &BreakerError{Key: key, State: StateOpen, Injected: true},
		probes:   make([]probeLease, bs.cfg.maxProbes),
	}
	switch p := bs.cfg.policy; p.kind {
	case policyWindow:
		b.window = failureWindow{times: make([]int64, p.tolerate+1)}
	case policyFailureRate:
		b.rate = newRateWindow(p.within)
	}
	return b
}

func pack(gen uint64, s State) uint64 { return gen<<2 | uint64(s) }

func unpack(v uint64) (uint64, State) { return v >> 2, State(v & 3) }

// Key returns the breaker's key.
func (b *Breaker) Key() string {
	if b == nil {
		return ""
	}
	return b.key
}

func (b *Breaker) evictable() bool {
	_, s := unpack(b.sg.Load())
	return s == StateClosed
}

// A Permit is one admission by a breaker. Report the attempt's outcome with
// [Permit.Record] and give back a half-open probe lease with
// [Permit.Release] when the attempt is over (its response body closed);
// [Permit.Done] does both. Outcomes reported after the breaker changed state
// (a stale generation) change nothing. The zero Permit ignores everything.
type Permit struct {
	b     *Breaker
	gen   uint64
	lease uint64 // probe lease sequence; 0 when not a probe
	slot  int32
}

// Probe reports whether the permit holds a half-open probe lease.
func (p Permit) Probe() bool { return p.lease != 0 }

// Allow admits one attempt or rejects it with a *[BreakerError] matching
// [ErrCircuitOpen] (open, or a fault injected) or [ErrHalfOpenBusy]. In
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
		if b.bs.now() < b.openUntil.Load() {
			return b.reject(b.openErr.Load())
		}
		b.openElapsed(gen)
	}
	return b.admitProbe()
}

func (b *Breaker) reject(err *BreakerError) (Permit, error) {
	if b.bs.cfg.mode == ModeShadow {
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

// Record reports the outcome of the permit's attempt: successes and failures
// as the breaker's options judge o.Category, neutral outcomes ignored. It
// does not release a probe lease; see [Permit.Release].
func (p Permit) Record(o Outcome) {
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

// Release gives back the permit's probe lease, if it holds one. It is safe
// to call more than once.
func (p Permit) Release() {
	if p.lease == 0 {
		return
	}
	b := p.b
	b.mu.Lock()
	if l := &b.probes[p.slot]; l.seq == p.lease {
		l.seq = 0
	}
	b.mu.Unlock()
}

// Done records o and releases the permit.
func (p Permit) Done(o Outcome) {
	p.Record(o)
	p.Release()
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
		case policyConsecutive:
			if b.consec.Load() != 0 {
				b.consec.Store(0)
			}
		case policyFailureRate:
			b.rate.add(b.bs.now(), 1, 0)
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
		b.rate.add(now, 1, 1)
		calls, fails := b.rate.sum(now)
		return int(fails), calls >= int64(p.minCalls) && float64(fails) >= p.ratio*float64(calls)
	}
	n := b.window.add(now, int64(p.within))
	return n, n > p.tolerate
}

func (b *Breaker) clearCounts() {
	b.consec.Store(0)
	b.window.clear()
	b.rate.clear()
}

// openFor is the next open duration before jitter. b.mu must be held.
func (b *Breaker) openFor(o Outcome) time.Duration {
	cfg := &b.bs.cfg
	if o.Category == Throttled && o.HasRetryAfter && o.RetryAfter > 0 {
		return min(o.RetryAfter, cfg.maxOpenTimeout)
	}
	d := cfg.openTimeout
	for i := 0; i < b.opens && d < cfg.maxOpenTimeout; i++ {
		d *= 2
	}
	return min(d, cfg.maxOpenTimeout)
}

func (b *Breaker) toOpenLocked(now int64, reason Reason, o Outcome, failures int) {
	d := b.openFor(o)
	if j := b.bs.cfg.jitter; j > 0 {
		d += time.Duration(rand.Float64() * j * float64(d))
	}
	b.needOK = b.bs.cfg.successes
	if o.Category == Throttled {
		b.needOK = 1
	}
	b.opens++
	b.openedAt = now
	b.openUntil.Store(now + int64(d))
	b.openErr.Store(&BreakerError{Key: b.key, State: StateOpen, OpenUntil: b.bs.wall(now + int64(d))})
	b.clearCounts()
	t := b.transitionLocked(StateOpen, reason)
	t.Category, t.Failures, t.OpenFor, t.Opens = o.Category, failures, d, b.opens
	b.queue(t)
}

func (b *Breaker) toHalfOpenLocked(reason Reason) {
	clear(b.probes)
	b.probeOK = 0
	b.queue(b.transitionLocked(StateHalfOpen, reason))
}

func (b *Breaker) toClosedLocked(reason Reason) {
	b.opens = 0
	b.probeOK = 0
	clear(b.probes)
	b.clearCounts()
	b.queue(b.transitionLocked(StateClosed, reason))
}

// transitionLocked bumps the generation and sets the state. b.mu must be held.
func (b *Breaker) transitionLocked(to State, reason Reason) Transition {
	gen, from := unpack(b.sg.Load())
	gen++
	b.sg.Store(pack(gen, to))
	now := b.bs.now()
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
	b.mu.Lock()
	now := b.bs.now()
	b.needOK = b.bs.cfg.successes
	b.openedAt = now
	b.openUntil.Store(now + int64(d))
	b.openErr.Store(&BreakerError{Key: b.key, State: StateOpen, OpenUntil: b.bs.wall(now + int64(d))})
	b.clearCounts()
	t := b.transitionLocked(StateOpen, ReasonTrip)
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
	b.mu.Lock()
	b.toClosedLocked(ReasonReset)
	b.mu.Unlock()
	b.bs.flush()
}

// Melt records an out-of-band failure of category c (a failure category
// such as [ServerError] unless the options count others). It counts exactly
// like a failing call: closed, it adds to the policy's count; half-open, it
// reopens; open, it changes nothing.
func (b *Breaker) Melt(c Category) {
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

// BreakerSnapshot is a point-in-time view of one breaker.
type BreakerSnapshot struct {
	Key   string `json:"key"`
	State State  `json:"-"`
	// StateName is State's String form, for JSON.
	StateName string `json:"state"`
	// Failures is the policy's current failure count (closed state).
	Failures int `json:"failures"`
	// Opens counts consecutive openings without a close.
	Opens int `json:"opens"`
	// OpenUntil and Remaining are set while open.
	OpenUntil        time.Time     `json:"open_until,omitzero"`
	Remaining        time.Duration `json:"-"`
	RemainingSeconds float64       `json:"remaining_seconds,omitempty"`
	// LastFailure is the category of the most recent failure, if any.
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	// ProbesInFlight and ProbeSuccesses describe the half-open state.
	ProbesInFlight int `json:"probes_in_flight"`
	ProbeSuccesses int `json:"probe_successes"`
	// ShadowRejections counts admissions a shadow-mode breaker would have
	// rejected.
	ShadowRejections int64  `json:"shadow_rejections,omitempty"`
	Generation       uint64 `json:"generation"`
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
	}
	switch p := b.bs.cfg.policy; p.kind {
	case policyConsecutive:
		snap.Failures = int(b.consec.Load())
	case policyFailureRate:
		_, f := b.rate.sum(now)
		snap.Failures = int(f)
	default:
		snap.Failures = b.window.live(now, int64(p.within))
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
