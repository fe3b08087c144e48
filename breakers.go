package breakwater

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
	"github.com/breakwater-go/breakwater/internal/sat"
	"github.com/breakwater-go/breakwater/internal/window"
)

// Breakers is a registry of circuit breakers, one per key, created lazily on
// first use. It is safe for concurrent use. Reads never create a breaker: a
// key never used reads as closed.
//
// The registry is bounded ([WithKeyLimits]): at most maxKeys breakers, and
// breakers unused for idleTTL are evicted unless open or half-open. A full
// registry makes room for a new key at once by evicting a breaker not used
// lately, one with no recent failure rather than one counting failures; an
// open or half-open breaker and one in use by a call are never evicted.
// While every breaker is such, the registry grows up to twice maxKeys, and
// past that a new key gets a breaker of its own that the registry does not
// keep (it admits, and forgets what it counts). A key never shares another
// key's breaker.
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

// NewBreakers returns a registry configured by opts (the breaker options,
// [WithKeyLimits], [WithObserver] and [WithClusterBus]), or an error
// describing every invalid option.
func NewBreakers(opts ...Option) (*Breakers, error) {
	cfg := newBreakerConfig()
	s := settings{to: "NewBreakers", breaker: &cfg}
	s.applyOptions(opts)
	cfg.errs = append(cfg.errs, s.errs...)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newBreakers(cfg), nil
}

// newBreakers returns the registry of a valid configuration.
func newBreakers(cfg breakerConfig) *Breakers {
	cfg.errs = nil
	if cfg.policy.kind == policyWindow && cfg.policy.within == 0 {
		cfg.policy.within = defaultWindowWithin
		cfg.autoWithin = true
	}
	bs := &Breakers{cfg: cfg, start: time.Now()}
	ls := cfg.listeners
	bs.listeners.Store(&ls)
	if cfg.mode != modeDisabled {
		bs.m = keyed.New(cfg.maxKeys, cfg.idleTTL, bs.newBreaker, (*Breaker).weigh)
		bs.joinCluster()
	}
	return bs
}

// now is monotonic nanoseconds since the registry was made.
func (bs *Breakers) now() int64 {
	if bs.virtual != nil {
		return *bs.virtual
	}
	return int64(time.Since(bs.start))
}

func (bs *Breakers) wall(n int64) time.Time { return bs.start.Add(time.Duration(n)) }

// Get returns the breaker for key, creating it if needed; nil when the
// breaker is switched off (a Transport built with [WithoutBreaker]), and a
// nil *Breaker admits everything. Get marks the breaker used, so the
// registry keeps it while it is acted on at once (bs.Get(key).Trip(d));
// call Get again each time rather than keeping the *Breaker, which the
// registry may evict once it is closed and idle.
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

// Lookup returns the breaker for key without creating it or marking it
// used, and whether there was one: reading a key's state (a nil *Breaker
// reads as closed) costs the registry nothing.
func (bs *Breakers) Lookup(key string) (*Breaker, bool) {
	if bs == nil || bs.m == nil {
		return nil, false
	}
	return bs.m.Lookup(key)
}

// len reports how many breakers the registry holds.
func (bs *Breakers) len() int {
	if bs == nil || bs.m == nil {
		return 0
	}
	return bs.m.Len()
}

// Snapshot returns the state of every breaker in the registry; a
// *Breakers is a source for the status page.
func (bs *Breakers) Snapshot() Snapshot {
	return Snapshot{At: time.Now(), Breakers: bs.snapshots()}
}

// snapshots returns the state of every breaker in the registry.
func (bs *Breakers) snapshots() []BreakerSnapshot {
	if bs == nil {
		return nil
	}
	out := make([]BreakerSnapshot, 0, bs.len())
	bs.each(func(b *Breaker) { out = append(out, b.Snapshot()) })
	return out
}

func (bs *Breakers) each(fn func(*Breaker)) {
	if bs == nil || bs.m == nil {
		return
	}
	bs.m.Each(func(_ string, b *Breaker) { fn(b) })
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

// joinCluster publishes the registry's own openings and resets and applies
// the other replicas' ones.
func (bs *Breakers) joinCluster() {
	bus := bs.cfg.bus
	if bus == nil {
		return
	}
	bs.addListener(func(t Transition) {
		switch {
		case t.To == StateOpen && (t.Reason == ReasonFailures || t.Reason == ReasonProbeFailed):
			bus.Publish(ClusterEvent{Key: t.Key, For: t.OpenFor, Mechanism: MechBreaker})
		case t.To == StateOpen && t.Reason == ReasonTrip:
			bus.Publish(ClusterEvent{Key: t.Key, For: t.OpenFor, Manual: true, Mechanism: MechBreaker})
		case t.To == StateClosed && t.Reason == ReasonReset:
			bus.Publish(ClusterEvent{Key: t.Key, Manual: true, Mechanism: MechBreaker})
		}
	})
	bus.Subscribe(bs.applyRemote)
}

// applyRemote applies another replica's trip or reset, and drops any
// other event.
func (bs *Breakers) applyRemote(e ClusterEvent) {
	if e.Mechanism != MechBreaker {
		return
	}
	if e.For <= 0 {
		if b, ok := bs.Lookup(e.Key); ok && b.State() != StateClosed {
			b.reset(ReasonCluster)
		}
		return
	}
	b, pin := bs.acquire(e.Key) // kept in the registry until opened
	defer pin.Release()
	j := bs.cfg.jitter
	if j < defaultOpenJitter {
		j = defaultOpenJitter
	}
	d := time.Duration(sat.Add(int64(e.For), int64(sat.Frac(e.For, rand.Float64()*j))))
	b.forceOpen(d, ReasonCluster, func(now int64) bool {
		// Already open for at least as long: nothing to do (a trip seen
		// again by a periodic read, or one this replica had too).
		_, s := unpack(b.sg.Load())
		return s != StateOpen || b.openUntil.Load() < sat.Add(now, int64(e.For))
	})
}
