package breakwater

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/hints"
	"github.com/breakwater-go/breakwater/internal/keyed"
	"github.com/breakwater-go/breakwater/internal/sat"
)

type pauseConfig struct {
	maxPause time.Duration
	maxWait  time.Duration
	waitSet  bool // maxWait was set; else up to maxPause
	maxKeys  int
	idleTTL  time.Duration
	bus      ClusterBus
	pacing   bool // pause on a spent quota in rate limit fields
}

// newPauseConfig returns the pause gates' defaults.
func newPauseConfig() pauseConfig {
	return pauseConfig{maxPause: defaultMaxRetryAfter, maxKeys: defaultMaxKeys, idleTTL: defaultIdleTTL, pacing: true}
}

// WithRateLimitHeaders, when on, paces calls on the rate limit fields of
// every response (RateLimit and RateLimit-Policy, RateLimit-Remaining and
// RateLimit-Reset, X-RateLimit-Remaining and X-RateLimit-Reset): when the
// upstream says the quota is spent until T, the key is paused until T,
// under the same cap as a Retry-After ([WithMaxRetryAfter]), so that the
// next call waits instead of being answered 429. It configures the pause
// gate of [NewTransport] and [RetryStage] and [NewPauseGates]. Default: on.
func WithRateLimitHeaders(on bool) Option {
	return option(func(s *settings) {
		if c := s.forPause("WithRateLimitHeaders"); c != nil {
			c.pacing = on
		}
	})
}

// PauseGates holds the calls to a key while its upstream asked them to
// wait, in two ways, each as scoped as what the server said:
//
//   - a pause: a 429 with a hint (Retry-After, or the reset of the rate
//     limit fields, see [Classify]), or a spent quota announced in rate
//     limit fields (see [WithRateLimitHeaders]), pauses the key until the hint
//     ends, clamped to the maximum pause, since RFC 6585 asks the client to
//     wait "before making a new request";
//   - an overload hold: a 503 with a hint asks only for that request's
//     retry to wait (RFC 9110), and the gate holds the key only when such
//     answers are the majority of its recent answers (at least 2 within a
//     second, outnumbering the others: a host that still answers most
//     requests keeps its traffic), letting one probe through every 175 ms
//     until one is answered otherwise.
//
// Held calls wait when their deadline allows it, and fail at once with an
// [*Error] matching [ErrPaused] otherwise, instead of collecting more 429s
// and 503s. When
// the hold ends, one probe goes first; once it is answered, the held calls
// leave in the order they arrived, spaced one and a half times as far
// apart as they arrived, never all at once, while new calls go straight
// through.
//
// A key that serves some requests and refuses more just after a pause
// ended (a strict rate limiter) is also paced: its requests go no faster
// than a rate learned from its answers, as TCP learns a window: one per
// hint at first, doubling with each success until a 429, then just under
// the last rate that was answered, climbing slowly past it and cut by a
// tenth at each 429 (see pacer.go); a key without a 429 for 30 s is no
// longer paced. A paced call waits for its slot within its deadline, and
// fails at once with [ErrPaused] when the slot comes after it.
//
// A pause is only ever extended: a later, shorter hint or a success never
// shortens it; only [PauseGates.Resume] does. Checking a key costs one
// atomic load, and no clock read, while no key is held. PauseGates is safe
// for concurrent use; a nil *PauseGates never pauses.
//
// The registry is bounded ([WithKeyLimits]): gates not paused and not used
// for idleTTL are evicted, and a full registry makes room for a new key by
// evicting a gate that is not paused; while every gate is paused the
// registry grows up to twice maxKeys. Past that, a new key's pause takes
// the place of the gate whose pause (or hold) ends soonest, so that a 429
// always pauses its key: the calls of the key it displaced are no longer
// held. A paused gate is evicted for nothing else.
type PauseGates struct {
	cfg   pauseConfig
	start time.Time
	// latest bounds (registry nanoseconds) when any gate may still hold,
	// probe, release or count anything, or is 0 once that has passed:
	// while it is 0, no key is held.
	latest  atomic.Int64
	m       *keyed.Map[*pauseGate]
	virtual *int64 // nanoseconds since start, when a simulation runs the clock; nil: the real clock
}

type pauseGate struct {
	key   string
	until atomic.Int64 // the pause's end, registry nanoseconds; 0 or past: none
	busy  atomic.Int64 // until when the gate holds, probes, releases or counts
	// begun counts the holds begun: a pause begun or extended, an overload
	// hold begun. A call that passed the gate and then waited for
	// something else passes it again when begun moved meanwhile.
	begun atomic.Uint64
	mu    sync.Mutex
	wake  chan struct{} // closed when the gate changes; nil while nobody waits
	// Guarded by mu:
	ep       episode   // the calls held and their release (pausehold.go)
	episodes uint64    // episodes so far, for their ids
	over     *overload // the 503 admission (overloadhold.go); nil when idle
	pace     *pacer    // the rate 429s taught (pacer.go); nil when not paced
	okAt     int64     // when the latest success came, while the gate held state
}

// paceLocked lets a request about to go at now through the key's pacer:
// it takes the slot and returns now when the slot is due, and otherwise
// returns when the next one will be. pg.mu must be held.
func (pg *pauseGate) paceLocked(g *PauseGates, now int64) int64 {
	p := pg.pace
	if p == nil {
		return now
	}
	if p.stale(now) {
		pg.pace = nil
		return now
	}
	if at := p.next(now); at > now {
		return at
	}
	p.take(now)
	g.busyUntil(pg, sat.Add(now, int64(paceForget)))
	return now
}

// paced lets a request to key through its pacer, as waitSlow does: it
// returns the gates' clock when the request may go now (its slot taken),
// or when the next slot will be.
func (g *PauseGates) paced(key string) int64 {
	if g == nil {
		return math.MinInt64
	}
	now := g.now()
	pg, ok := g.gate(key)
	if !ok {
		return now
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.paceLocked(g, now)
}

// throttle pauses key for a 429's hint d and, when the key's last pause
// (which ended at ended) did not suffice (it ended less than a hint ago,
// and a success came since: the upstream serves some and refuses more),
// or the key is paced
// already, teaches its pacer that the key was sent more than its upstream
// admits. A lone 429 only pauses.
func (g *PauseGates) throttle(key string, d time.Duration, ended int64) {
	e := g.m.Acquire(key)
	defer e.Release()
	pg := e.Value
	now := g.now()
	g.Pause(key, d)
	pg.mu.Lock()
	switch {
	case pg.pace != nil && !pg.pace.stale(now):
		pg.pace.throttled(now)
	case ended != 0 && ended <= now && now-ended < int64(d) && pg.okAt >= ended:
		// The pause ended, the upstream served a request and refused
		// the next: it admits some rate, which pacing finds.
		pg.pace = newPacer(now, d)
	default:
		pg.mu.Unlock()
		return
	}
	g.busyUntil(pg, sat.Add(now, int64(paceForget)))
	pg.mu.Unlock()
}

// paceSucceeded raises key's learned rate, if it has one, for a success.
func (g *PauseGates) paceSucceeded(key string) {
	pg, ok := g.gate(key)
	if !ok {
		return
	}
	pg.mu.Lock()
	now := g.now()
	pg.okAt = now
	if pg.pace != nil && pg.pace.succeeded(now) {
		pg.changedLocked() // the calls waiting for a slot look again
	}
	pg.mu.Unlock()
}

// NewPauseGates returns a set of pause gates configured by opts
// ([WithMaxRetryAfter], [WithMaxWait], [WithRateLimitHeaders],
// [WithKeyLimits], [WithClusterBus]), or an error describing every invalid
// option.
func NewPauseGates(opts ...Option) (*PauseGates, error) {
	c := newPauseConfig()
	s := settings{to: "NewPauseGates", pause: &c}
	s.applyOptions(opts)
	if len(s.errs) > 0 {
		_, err := buildPauseGates(c)
		return nil, errors.Join(append(s.errs, err)...)
	}
	return buildPauseGates(c)
}

// buildPauseGates returns the gates of c, or an error describing every
// invalid value.
func buildPauseGates(c pauseConfig) (*PauseGates, error) {
	var errs []error
	if c.maxPause <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: max pause must be > 0, got %s", c.maxPause))
	}
	if c.waitSet && c.maxWait < 0 {
		errs = append(errs, fmt.Errorf("breakwater: pause wait must be >= 0, got %s", c.maxWait))
	}
	if c.maxKeys < 1 || c.maxKeys > keyed.MaxKeys || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: pause gate keys need maxKeys in [1, %d] and idleTTL > 0, got %d and %s", keyed.MaxKeys, c.maxKeys, c.idleTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !c.waitSet {
		c.maxWait = c.maxPause
	}
	g := &PauseGates{cfg: c, start: time.Now()}
	g.m = keyed.New(c.maxKeys, c.idleTTL, func(key string) *pauseGate { return &pauseGate{key: key} }, g.weigh)
	g.m.Displace(g.rank)
	if c.bus != nil {
		c.bus.Subscribe(g.applyRemote)
	}
	return g, nil
}

func (g *PauseGates) now() int64 {
	if g.virtual != nil {
		return *g.virtual
	}
	return int64(time.Since(g.start))
}

func (g *PauseGates) wall(n int64) time.Time { return g.start.Add(time.Duration(n)) }

// weigh tells the registry that a gate paused, or holding, probing,
// releasing or counting something, must not be evicted, and that any other
// is as good as new (see [keyed.Map]).
func (g *PauseGates) weigh(pg *pauseGate, _ time.Time) keyed.Keep {
	t := g.now() // the gates' clock, which a simulation may run
	if pg.until.Load() > t || pg.busy.Load() > t {
		return keyed.Hard
	}
	return keyed.None
}

// rank orders gates for a registry at its hard cap (see [keyed.Map.Displace]):
// the gate whose pause, hold or probe lease ends soonest is displaced first.
func (g *PauseGates) rank(pg *pauseGate, _ time.Time) int64 {
	return max(pg.until.Load(), pg.busy.Load())
}

// busyUntil records that pg holds, probes, releases or counts something
// until t, so that the fast path looks at the gates until then.
func (g *PauseGates) busyUntil(pg *pauseGate, t int64) {
	for _, a := range [...]*atomic.Int64{&pg.busy, &g.latest} {
		for {
			l := a.Load()
			if l >= t || a.CompareAndSwap(l, t) {
				break
			}
		}
	}
}

// gate returns key's gate without creating it. A key without one is not
// paused.
func (g *PauseGates) gate(key string) (*pauseGate, bool) {
	return g.m.Lookup(key)
}

// Pause pauses key for d from now, clamped to the maximum pause, unless it
// is already paused for longer. It returns when the key's pause ends (the
// zero time when d <= 0 or g is nil). Calls released from an earlier hold
// that have not gone yet are held again, in their order.
func (g *PauseGates) Pause(key string, d time.Duration) time.Time {
	return g.pause(key, d, g != nil && g.cfg.bus != nil)
}

// pause is Pause, publishing an extended pause to the cluster bus when
// publish is set.
func (g *PauseGates) pause(key string, d time.Duration, publish bool) time.Time {
	if g == nil || d <= 0 {
		return time.Time{}
	}
	until := sat.Add(g.now(), int64(min(d, g.cfg.maxPause)))
	e := g.m.Acquire(key) // pinned until paused: a paused gate is never evicted
	defer e.Release()
	pg := e.Value
	pg.mu.Lock()
	if old := pg.until.Load(); old >= until {
		pg.mu.Unlock()
		return g.wall(old)
	}
	pg.until.Store(until)
	pg.begun.Add(1)
	pg.holdLocked()
	g.busyUntil(pg, sat.Add(until, int64(pauseProbeLease))) // and the probe after it
	pg.changedLocked()
	pg.mu.Unlock()
	if publish {
		g.cfg.bus.Publish(ClusterEvent{Key: key, For: time.Duration(until - g.now()), Mechanism: MechPause})
	}
	return g.wall(until)
}

// Observe feeds one attempt's outcome o for key to the gates, with its
// response's header h (nil when there was no response). A 429 (a
// [Throttled] outcome with a hint, other than a 503) pauses the key for
// the hint. A 503 with a hint, and every other answer (an outcome with a
// Status), feed the key's overload admission while it has seen a 503 with
// a hint in the last second; an answer that asks for nothing is also what
// ends a probe's wait after a pause. With [WithRateLimitHeaders] (the
// default), a quota that h announces as spent pauses the key until its
// reset.
func (g *PauseGates) Observe(key string, o Outcome, h http.Header) {
	if g == nil {
		return
	}
	var ended int64 // the end of the key's pause before this answer
	if o.Category == Throttled && o.HasRetryAfter && o.Status != http.StatusServiceUnavailable {
		if pg, ok := g.gate(key); ok {
			ended = pg.until.Load()
		}
	}
	if g.cfg.pacing && h != nil {
		g.observeHeaders(key, h)
	}
	switch {
	case o.Category == Throttled && o.HasRetryAfter && o.Status == http.StatusServiceUnavailable:
		g.answer(key, true, o.RetryAfter)
	case o.Category == Throttled && o.HasRetryAfter:
		g.throttle(key, o.RetryAfter, ended)
	case o.Status != 0 && g.latest.Load() != 0:
		g.answer(key, false, 0)
		if o.Category == Success {
			g.paceSucceeded(key)
		}
	}
}

// answer records an answer for key: an overload one (503 with a hint d)
// or one that asks for nothing.
func (g *PauseGates) answer(key string, over bool, d time.Duration) {
	var pg *pauseGate
	if over {
		e := g.m.Acquire(key) // pinned until it holds: a holding gate is never evicted
		defer e.Release()
		pg = e.Value
	} else if p, ok := g.gate(key); ok {
		pg = p
	} else {
		return
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	now := g.now()
	if pg.over == nil && over {
		pg.over = newOverload(now)
	}
	if o := pg.over; o != nil {
		began, ended := o.answer(now, over, sat.Add(now, int64(min(d, g.cfg.maxPause))))
		switch {
		case began:
			pg.begun.Add(1)
			pg.holdLocked()
			pg.changedLocked()
		case ended:
			pg.releaseLocked(g, now, o.lastProbe, true)
		}
		switch {
		case o.stale(now):
			pg.over = nil
		case o.held:
			g.busyUntil(pg, o.askUntil())
		default:
			g.busyUntil(pg, max(o.until, o.last+int64(overloadWindow)))
		}
	}
	if !over && pg.ep.probeAt != 0 && pg.until.Load() <= now && (pg.over == nil || !pg.over.held) {
		pg.releaseLocked(g, now, pg.ep.probeAt, false) // the probe after a pause was answered
	}
}

// observeHeaders pauses key until the quota reset that h announces as
// spent, if any (see hints.QuotaReset). It is how a client paces itself on
// RateLimit and X-RateLimit-* response fields instead of collecting 429s.
func (g *PauseGates) observeHeaders(key string, h http.Header) {
	if len(h[hints.RateLimitField]) == 0 && len(h[hints.RateLimitRemainingField]) == 0 && len(h[hints.XRateLimitRemainingField]) == 0 {
		return
	}
	if d, ok := hints.QuotaReset(h, time.Now()); ok {
		g.Pause(key, d)
	}
}

// Resume ends key's pause (and overload hold) now and releases the calls
// waiting for it, spread out as after a pause, without a probe; with
// [WithClusterBus] the pause ends on every replica.
func (g *PauseGates) Resume(key string) {
	if g == nil {
		return
	}
	g.resume(key)
	if g.cfg.bus != nil {
		g.cfg.bus.Publish(ClusterEvent{Key: key, Manual: true, Mechanism: MechPause})
	}
}

func (g *PauseGates) resume(key string) {
	pg, ok := g.m.Lookup(key)
	if !ok {
		return
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.until.Store(0)
	if pg.over != nil {
		pg.over.held = false
		pg.over.w.Clear()
	}
	now := g.now()
	pg.releaseLocked(g, now, math.MinInt64/2, false)
	pg.changedLocked()
}

// changedLocked wakes the calls waiting on the gate so that they look
// again. pg.mu must be held.
func (pg *pauseGate) changedLocked() {
	if pg.wake != nil {
		close(pg.wake)
		pg.wake = nil
	}
}

// waitChanLocked returns the channel the next change closes. pg.mu must be
// held.
func (pg *pauseGate) waitChanLocked() <-chan struct{} {
	if pg.wake == nil {
		pg.wake = make(chan struct{})
	}
	return pg.wake
}

// begun returns how many holds key's gate has begun (see pauseGate.begun);
// 0 when it has no gate.
func (g *PauseGates) begun(key string) uint64 {
	if pg, ok := g.gate(key); ok {
		return pg.begun.Load()
	}
	return 0
}

// remainingFor reports how long key stays paused, or held by its overload
// admission (until the latest 503's hint ends); zero when it is neither.
func (g *PauseGates) remainingFor(key string) time.Duration {
	if g == nil {
		return 0
	}
	now, ok := g.holding()
	if !ok {
		return 0
	}
	pg, ok := g.gate(key)
	if !ok {
		return 0
	}
	return time.Duration(max(0, pg.heldUntil(now)-now))
}

// holding reports whether any gate may still hold something (see latest),
// and the clock reading it told that by. It reads no clock while latest is
// 0, and forgets latest once it has passed.
func (g *PauseGates) holding() (now int64, ok bool) {
	l := g.latest.Load()
	if l == 0 {
		return 0, false
	}
	if now = g.now(); now >= l {
		g.latest.CompareAndSwap(l, 0)
		return now, false
	}
	return now, true
}

// heldUntil is when the key's pause, or its overload hold's latest hint,
// ends; in the past when it is neither paused nor held.
func (pg *pauseGate) heldUntil(now int64) int64 {
	until := pg.until.Load()
	pg.mu.Lock()
	if o := pg.over; o != nil && o.held {
		until = max(until, o.until, now+1)
	}
	pg.mu.Unlock()
	return until
}

// Wait returns at once when key is not held. While it is, Wait waits for
// its turn, when the hold's remaining time is at most the longest wait
// ([WithMaxWait]) and shorter than the time left before ctx's deadline,
// and otherwise fails at once with an [*Error] that matches
// [ErrPaused] and carries the remaining time; a hold extended while
// waiting is checked again the same way. Its turn comes when the pause
// ends and a probe was answered, and then in order of arrival, spread out
// (see [PauseGates]). If ctx ends while waiting, Wait returns ctx.Err().
func (g *PauseGates) Wait(ctx context.Context, key string) error {
	if g == nil {
		return nil
	}
	_, err := g.wait(ctx, key, time.Time{}, false)
	return err
}

// wait is Wait with an extra deadline dl (zero: none), for a call that
// held marks as the retry of a throttled one; probe reports that the call
// is the probe after a pause, which must report a probe that never got an
// answer (probeLost). g is not nil. Its fast path is a single atomic load.
func (g *PauseGates) wait(ctx context.Context, key string, dl time.Time, held bool) (probe bool, err error) {
	if l := g.latest.Load(); l != 0 {
		return g.waitSlow(ctx, key, dl, l, held)
	}
	return false, nil
}

// The phases of a learned rate, as [PauseSnapshot.PacePhase] names them.
const (
	PaceSlowStart = "slow_start"
	PaceCeiling   = "ceiling"
)

func (g *PauseGates) snapshot(pg *pauseGate) PauseSnapshot {
	s := PauseSnapshot{Key: pg.key}
	now, ok := g.holding()
	if !ok { // nothing held, or an overload hold whose probes went unanswered lapsed
		return s
	}
	if u := pg.heldUntil(now); u > now {
		s.Paused, s.Until, s.Remaining = true, g.wall(u), time.Duration(u-now)
		s.RemainingSeconds = s.Remaining.Seconds()
	}
	pg.mu.Lock()
	if p := pg.pace; p != nil && !p.stale(now) {
		s.Paced, s.PaceRate, s.PaceCeiling, s.PacePhase = true, p.rate, p.ceiling, PaceSlowStart
		if p.ceiling > 0 {
			s.PacePhase = PaceCeiling
		}
	}
	pg.mu.Unlock()
	return s
}

// Snapshot returns the state of every gate in the registry; a *PauseGates
// is a source for the status page.
func (g *PauseGates) Snapshot() Snapshot {
	return Snapshot{At: time.Now(), Pauses: g.snapshots()}
}

// snapshots returns the state of every gate in the registry.
func (g *PauseGates) snapshots() []PauseSnapshot {
	if g == nil {
		return nil
	}
	var out []PauseSnapshot
	g.m.Each(func(_ string, pg *pauseGate) { out = append(out, g.snapshot(pg)) })
	return out
}

// applyRemote applies another replica's pause or resume, and drops any
// other event.
func (g *PauseGates) applyRemote(e ClusterEvent) {
	switch {
	case e.Mechanism != MechPause:
		return
	case e.For > 0:
		g.pause(e.Key, e.For, false)
	default:
		g.resume(e.Key)
	}
}
