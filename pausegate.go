package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A PauseOption configures [NewPauseGates] and [WithPauseGate].
type PauseOption interface{ applyPause(*pauseConfig) }

type pauseOptionFunc func(*pauseConfig)

func (f pauseOptionFunc) applyPause(c *pauseConfig) { f(c) }

type pauseConfig struct {
	maxPause time.Duration
	maxWait  time.Duration // < 0: up to maxPause
	maxKeys  int
	idleTTL  time.Duration
	bus      ClusterBus
}

// WithMaxPause caps every pause: a longer hint pauses the key for d.
// Default: [DefaultMaxRetryAfter]; a [Transport] uses its
// [WithMaxRetryAfter] value.
func WithMaxPause(d time.Duration) PauseOption {
	return pauseOptionFunc(func(c *pauseConfig) { c.maxPause = d })
}

// WithPauseWait sets the longest a call waits for a pause to end; 0 makes
// calls to a paused key fail at once. Default: as long as the longest
// pause, so that only the call's deadline decides.
func WithPauseWait(d time.Duration) PauseOption {
	return pauseOptionFunc(func(c *pauseConfig) { c.maxWait = d })
}

// WithPauseKeys bounds a [PauseGates] registry: at most maxKeys gates, and
// gates not paused and not used for idleTTL are evicted. When the registry
// is full, new keys share one overflow gate. Defaults: [DefaultMaxKeys]
// and [DefaultKeyIdleTTL]; a [Transport] uses its [WithKeyLimits] values.
func WithPauseKeys(maxKeys int, idleTTL time.Duration) PauseOption {
	return pauseOptionFunc(func(c *pauseConfig) { c.maxKeys, c.idleTTL = maxKeys, idleTTL })
}

// PauseGates holds the server-directed pauses of a set of keys. When an
// upstream answers 429, or 503 with a Retry-After hint, or announces that
// the client's quota is spent (see [ParseQuotaReset]), the key is paused
// until the hint ends, clamped to the maximum pause. Calls to a paused key
// wait for the pause to end when their deadline allows it and fail at once
// with a *[PauseError] otherwise, instead of collecting more 429s.
//
// A pause is only ever extended: a later, shorter hint or a success never
// shortens it; only [PauseGates.Resume] does. Checking a key costs one
// atomic load, and no clock read, while no key is paused. PauseGates is
// safe for concurrent use; a nil *PauseGates never pauses.
type PauseGates struct {
	cfg   pauseConfig
	start time.Time
	// latest is the end (registry nanoseconds) of the latest pause ever
	// set, or 0 once it has passed: while it is 0 no key is paused.
	latest atomic.Int64
	m      *keyedMap[*pauseGate]
}

type pauseGate struct {
	key   string
	until atomic.Int64 // registry nanoseconds; 0 or past: not paused
	mu    sync.Mutex
	wake  chan struct{} // closed when until changes; nil while nobody waits
}

// NewPauseGates returns a set of pause gates, or an error describing every
// invalid option.
func NewPauseGates(opts ...PauseOption) (*PauseGates, error) {
	return newPauseGates(nil, opts)
}

func newPauseGates(defaults, opts []PauseOption) (*PauseGates, error) {
	c := pauseConfig{maxPause: DefaultMaxRetryAfter, maxWait: -1, maxKeys: DefaultMaxKeys, idleTTL: DefaultKeyIdleTTL}
	for _, o := range defaults {
		o.applyPause(&c)
	}
	for _, o := range opts {
		if o != nil {
			o.applyPause(&c)
		}
	}
	var errs []error
	if c.maxPause <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: max pause must be > 0, got %s", c.maxPause))
	}
	if c.maxKeys < 1 || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: pause gate keys need maxKeys >= 1 and idleTTL > 0, got %d and %s", c.maxKeys, c.idleTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.maxWait < 0 {
		c.maxWait = c.maxPause
	}
	g := &PauseGates{cfg: c, start: time.Now()}
	g.m = newKeyedMap(c.maxKeys, c.idleTTL, func(key string) *pauseGate { return &pauseGate{key: key} }, g.evictable)
	if c.bus != nil {
		c.bus.Subscribe(g.applyRemote)
	}
	return g, nil
}

func (g *PauseGates) now() int64 { return int64(time.Since(g.start)) }

func (g *PauseGates) wall(n int64) time.Time { return g.start.Add(time.Duration(n)) }

func (g *PauseGates) evictable(pg *pauseGate) bool { return pg.until.Load() <= g.now() }

// MaxPause returns the cap on pauses.
func (g *PauseGates) MaxPause() time.Duration {
	if g == nil {
		return 0
	}
	return g.cfg.maxPause
}

// gate returns key's gate without creating it. A key without one is not
// paused: in particular, a pause that found the registry full (and went to
// its overflow gate) holds no other key.
func (g *PauseGates) gate(key string) (*pauseGate, bool) {
	return g.m.lookup(key)
}

// Pause pauses key for d from now, clamped to the maximum pause, unless it
// is already paused for longer. It returns when the key's pause ends (the
// zero time when d <= 0 or g is nil).
func (g *PauseGates) Pause(key string, d time.Duration) time.Time {
	return g.pause(key, d, g != nil && g.cfg.bus != nil)
}

// pause is Pause, publishing an extended pause to the cluster bus when
// publish is set.
func (g *PauseGates) pause(key string, d time.Duration, publish bool) time.Time {
	if g == nil || d <= 0 {
		return time.Time{}
	}
	until := g.now() + int64(min(d, g.cfg.maxPause))
	pg := g.m.get(key)
	for {
		old := pg.until.Load()
		if old >= until {
			return g.wall(old)
		}
		if pg.until.CompareAndSwap(old, until) {
			break
		}
	}
	for {
		l := g.latest.Load()
		if l >= until || g.latest.CompareAndSwap(l, until) {
			break
		}
	}
	pg.changed()
	if publish {
		g.cfg.bus.Publish(ClusterEvent{Key: key, For: time.Duration(until - g.now())})
	}
	return g.wall(until)
}

// Observe feeds one attempt's outcome for key to the gates: a [Throttled]
// outcome with a Retry-After hint pauses the key for the hint.
func (g *PauseGates) Observe(key string, o Outcome) {
	if o.Category == Throttled && o.HasRetryAfter {
		g.Pause(key, o.RetryAfter)
	}
}

// ObserveHeaders pauses key until the quota reset that h announces as
// spent, if any (see [ParseQuotaReset]). It is how a client paces itself
// on RateLimit and X-RateLimit-* response fields instead of collecting
// 429s.
func (g *PauseGates) ObserveHeaders(key string, h http.Header) {
	if g == nil || len(h[headerRateLimit]) == 0 && len(h[headerRateLimitRemaining]) == 0 && len(h[headerXRateLimitRemaining]) == 0 {
		return
	}
	if d, ok := ParseQuotaReset(h, time.Now()); ok {
		g.Pause(key, d)
	}
}

// Resume ends key's pause now and wakes the calls waiting for it; with
// [WithSharedPauses] it ends on every replica.
func (g *PauseGates) Resume(key string) {
	if g == nil {
		return
	}
	g.resume(key)
	if g.cfg.bus != nil {
		g.cfg.bus.Publish(ClusterEvent{Key: key, Manual: true})
	}
}

func (g *PauseGates) resume(key string) {
	if pg, ok := g.m.lookup(key); ok && pg.until.Swap(0) != 0 {
		pg.changed()
	}
}

// changed wakes the calls waiting on the gate so that they look again.
func (pg *pauseGate) changed() {
	pg.mu.Lock()
	if pg.wake != nil {
		close(pg.wake)
		pg.wake = nil
	}
	pg.mu.Unlock()
}

func (pg *pauseGate) waitChan() <-chan struct{} {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.wake == nil {
		pg.wake = make(chan struct{})
	}
	return pg.wake
}

// Remaining reports how long key stays paused; zero when it is not paused.
func (g *PauseGates) Remaining(key string) time.Duration {
	if g == nil {
		return 0
	}
	if l := g.latest.Load(); l != 0 {
		return g.remaining(key, l)
	}
	return 0
}

func (g *PauseGates) remaining(key string, l int64) time.Duration {
	now := g.now()
	if now >= l {
		g.latest.CompareAndSwap(l, 0)
		return 0
	}
	pg, ok := g.gate(key)
	if !ok {
		return 0
	}
	return time.Duration(max(0, pg.until.Load()-now))
}

// Wait returns at once when key is not paused. While it is, Wait waits for
// the pause to end if the remaining pause is at most the longest wait
// ([WithPauseWait]) and shorter than the time left before ctx's deadline,
// and otherwise fails at once with a *[PauseError] that matches [ErrPaused]
// and carries the remaining time. A pause extended while waiting is
// checked again the same way. If ctx ends while waiting, Wait returns
// ctx.Err().
func (g *PauseGates) Wait(ctx context.Context, key string) error {
	if g == nil {
		return nil
	}
	return g.wait(ctx, key, time.Time{})
}

// wait is Wait with an extra deadline dl (zero: none); g is not nil. Its
// fast path is a single atomic load.
func (g *PauseGates) wait(ctx context.Context, key string, dl time.Time) error {
	if l := g.latest.Load(); l != 0 {
		return g.waitSlow(ctx, key, dl, l)
	}
	return nil
}

func (g *PauseGates) waitSlow(ctx context.Context, key string, dl time.Time, latest int64) error {
	if g.now() >= latest {
		g.latest.CompareAndSwap(latest, 0)
		return nil
	}
	pg, ok := g.gate(key)
	if !ok {
		return nil
	}
	for {
		wake := pg.waitChan()
		t := time.Now()
		now := int64(t.Sub(g.start))
		until := pg.until.Load()
		if until <= now {
			return nil
		}
		rem := time.Duration(until - now)
		if left, ok := timeLeft(ctx, dl, t); rem > g.cfg.maxWait || ok && rem >= left {
			return &PauseError{Key: key, Remaining: rem, Until: g.wall(until)}
		}
		timer := time.NewTimer(rem)
		select {
		case <-timer.C:
		case <-wake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
	}
}

// PauseSnapshot is a point-in-time view of one key's pause gate.
type PauseSnapshot struct {
	Key    string `json:"key"`
	Paused bool   `json:"paused"`
	// Until and Remaining are set while paused.
	Until            time.Time     `json:"until,omitzero"`
	Remaining        time.Duration `json:"-"`
	RemainingSeconds float64       `json:"remaining_seconds,omitempty"`
}

func (g *PauseGates) snapshot(pg *pauseGate) PauseSnapshot {
	s := PauseSnapshot{Key: pg.key}
	if u, now := pg.until.Load(), g.now(); u > now {
		s.Paused, s.Until, s.Remaining = true, g.wall(u), time.Duration(u-now)
		s.RemainingSeconds = s.Remaining.Seconds()
	}
	return s
}

// Snapshot returns key's pause, or false when the registry holds no gate
// for key.
func (g *PauseGates) Snapshot(key string) (PauseSnapshot, bool) {
	if g == nil {
		return PauseSnapshot{}, false
	}
	pg, ok := g.m.lookup(key)
	if !ok {
		return PauseSnapshot{}, false
	}
	return g.snapshot(pg), true
}

// Snapshots returns the state of every gate in the registry.
func (g *PauseGates) Snapshots() []PauseSnapshot {
	if g == nil {
		return nil
	}
	var out []PauseSnapshot
	g.m.each(func(_ string, pg *pauseGate) { out = append(out, g.snapshot(pg)) })
	return out
}
