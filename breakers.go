package breakwater

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
	"github.com/breakwater-go/breakwater/internal/window"
)

// Breakers is a registry of circuit breakers, one per key, created lazily on
// first use and bounded in number (see [WithBreakerLimits]). It is safe for
// concurrent use. Reads never create a breaker: a key never used reads as
// closed.
type Breakers struct {
	cfg     breakerConfig
	start   time.Time
	virtual *int64 // nanoseconds since start, when a simulation runs the clock; nil: the real clock
	m       *keyed.Map[*Breaker]

	listeners atomic.Pointer[[]func(Transition)]
	evMu      sync.Mutex
	evQueue   []Transition
	flushing  bool
}

// NewBreakers returns a registry configured by opts, or an error describing
// every invalid option.
func NewBreakers(opts ...BreakerOption) (*Breakers, error) {
	cfg := breakerConfig{
		policy:         defaultPolicy,
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
		bs.m = keyed.New(cfg.maxKeys, cfg.idleTTL, bs.newBreaker, (*Breaker).weigh)
		bs.joinCluster()
	}
	return bs, nil
}

// now is monotonic nanoseconds since the registry was made.
func (bs *Breakers) now() int64 {
	if bs.virtual != nil {
		return *bs.virtual
	}
	return int64(time.Since(bs.start))
}

func (bs *Breakers) wall(n int64) time.Time { return bs.start.Add(time.Duration(n)) }

// Mode reports the registry's mode.
func (bs *Breakers) Mode() BreakerMode { return bs.cfg.mode }

// Policy reports the registry's counting policy, with an automatic window
// resolved.
func (bs *Breakers) Policy() Policy { return bs.cfg.policy }

// Get returns the breaker for key, creating it if needed. It returns nil
// when the registry is disabled; a nil *Breaker admits everything. A closed
// breaker can be evicted once it goes unused (see [WithBreakerLimits]):
// keep the key, not the *Breaker, and call Get again, or use the registry's
// methods, which keep the breaker while they use it.
func (bs *Breakers) Get(key string) *Breaker {
	if bs == nil || bs.m == nil {
		return nil
	}
	return bs.m.Get(key)
}

// acquire returns key's breaker pinned in the registry (see
// [keyed.Map.Acquire]), and the pin to release; both nil when the registry
// is disabled.
func (bs *Breakers) acquire(key string) (*Breaker, *keyed.Entry[*Breaker]) {
	if bs == nil || bs.m == nil {
		return nil, nil
	}
	e := bs.m.Acquire(key)
	return e.Value, e
}

// Lookup returns the breaker for key without creating it.
func (bs *Breakers) Lookup(key string) (*Breaker, bool) {
	if bs == nil || bs.m == nil {
		return nil, false
	}
	return bs.m.Lookup(key)
}

// Len reports how many breakers the registry holds.
func (bs *Breakers) Len() int {
	if bs == nil || bs.m == nil {
		return 0
	}
	return bs.m.Len()
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
	out := make([]BreakerSnapshot, 0, bs.Len())
	bs.each(func(b *Breaker) { out = append(out, b.Snapshot()) })
	return out
}

func (bs *Breakers) each(fn func(*Breaker)) {
	if bs == nil || bs.m == nil {
		return
	}
	bs.m.Each(func(_ string, b *Breaker) { fn(b) })
}

// Trip forces key's breaker open for d (the open timeout when d <= 0).
func (bs *Breakers) Trip(key string, d time.Duration) {
	b, pin := bs.acquire(key)
	b.Trip(d)
	pin.Release()
}

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
func (bs *Breakers) Melt(key string, c Category) {
	b, pin := bs.acquire(key)
	b.Melt(c)
	pin.Release()
}

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

// openError is the rejection an open breaker of key shares until until.
func (bs *Breakers) openError(key string, until time.Time) *Error {
	return &Error{Key: key, Mechanism: MechBreaker, Until: until, sentinel: ErrCircuitOpen, shared: true}
}

func (bs *Breakers) newBreaker(key string) *Breaker {
	b := &Breaker{
		key:      key,
		bs:       bs,
		busyErr:  &Error{Key: key, Mechanism: MechBreaker, sentinel: ErrHalfOpenBusy, shared: true},
		faultErr: &Error{Key: key, Mechanism: MechBreaker, sentinel: ErrCircuitOpen, shared: true, Injected: true},
		probes:   make([]probeLease, bs.cfg.maxProbes),
		since:    bs.now(),
	}
	switch p := bs.cfg.policy; p.kind {
	case policyWindow:
		if p.ratio > 0 {
			b.share = window.NewShare(p.within)
		} else {
			b.window = window.NewFailures(p.tolerate, p.within)
		}
	case policyFailureRate:
		b.rate = window.NewRate(p.within)
	}
	return b
}

// BreakerStage asks bs for key(req)'s breaker before every request and
// reports each outcome as classified by cl (nil means [Classify]). Inside a
// [RetryStage] a failing attempt that will be retried is not charged: the
// retry stage charges the breaker once if the call gives up. A nil key is
// [HostKey].
func BreakerStage(bs *Breakers, key KeyFunc, cl Classifier) Stage {
	if key == nil {
		key = HostKey
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			k, err := keyOf(key, req)
			if err != nil {
				if hasBody(req) {
					_ = req.Body.Close()
				}
				return nil, err
			}
			b, pin := bs.acquire(k) // kept in the registry until the outcome is recorded
			defer pin.Release()
			permit, err := b.Allow()
			if err != nil {
				if hasBody(req) {
					_ = req.Body.Close()
				}
				return nil, err
			}
			resp, err := next.RoundTrip(req)
			if err != nil {
				resp = nil
			}
			o := classifySafely(cl, resp, err)
			if m, ok := req.Context().Value(meltKey{}).(*meltSlot); ok && bs.cfg.judge(o.Category) == failure && !permit.Probe() {
				m.defer_(permit, o)
			} else {
				permit.Record(o)
			}
			if resp == nil {
				permit.Release()
				return nil, err
			}
			track(req.Context(), resp, releaser{permit: permit})
			return resp, nil
		})
	}
}
