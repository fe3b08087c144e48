package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// A BulkheadOption configures [NewBulkhead], [NewBulkheads] and
// [WithConcurrencyLimit].
type BulkheadOption interface{ applyBulkhead(*bulkheadConfig) }

type bulkheadOptionFunc func(*bulkheadConfig)

func (f bulkheadOptionFunc) applyBulkhead(c *bulkheadConfig) { f(c) }

type bulkheadConfig struct {
	limit    int
	maxQueue int
	maxWait  time.Duration
	adaptive AdaptiveLimit
	maxKeys  int
	idleTTL  time.Duration
}

// WithBulkheadQueue lets up to maxLen requests wait, in arrival order, for
// a slot, each for at most maxWait (and never past its context's
// deadline). Both 0, the default, refuse a request at once when every slot
// is taken. maxLen and maxWait must be both positive or both 0.
func WithBulkheadQueue(maxLen int, maxWait time.Duration) BulkheadOption {
	return bulkheadOptionFunc(func(c *bulkheadConfig) { c.maxQueue, c.maxWait = maxLen, maxWait })
}

// WithBulkheadKeys bounds a [Bulkheads] registry: at most maxKeys
// bulkheads, and idle ones (no slot held, nobody waiting, unused for
// idleTTL) are evicted; an adaptive limit starts again from the initial
// limit after eviction. A full registry makes room for a new key by
// evicting an idle bulkhead; one with a slot held or a request waiting is
// never evicted, and while every bulkhead is such the registry grows up to
// twice maxKeys. Defaults: [DefaultMaxKeys] and [DefaultKeyIdleTTL]; a
// [Transport] uses its [WithKeyLimits] values.
func WithBulkheadKeys(maxKeys int, idleTTL time.Duration) BulkheadOption {
	return bulkheadOptionFunc(func(c *bulkheadConfig) { c.maxKeys, c.idleTTL = maxKeys, idleTTL })
}

// WithAdaptiveLimit makes the limit move with what the released slots
// report, starting from the bulkhead's limit: [AIMD] or [Gradient]. nil,
// the default, keeps the limit fixed.
func WithAdaptiveLimit(a AdaptiveLimit) BulkheadOption {
	return bulkheadOptionFunc(func(c *bulkheadConfig) { c.adaptive = a })
}

func newBulkheadConfig(limit int, defaults, opts []BulkheadOption) (*bulkheadConfig, error) {
	c := &bulkheadConfig{limit: limit, maxKeys: DefaultMaxKeys, idleTTL: DefaultKeyIdleTTL}
	for _, o := range defaults {
		o.applyBulkhead(c)
	}
	for _, o := range opts {
		if o != nil {
			o.applyBulkhead(c)
		}
	}
	var errs []error
	if c.limit < 1 || c.limit > maxBulkheadLimit {
		errs = append(errs, fmt.Errorf("breakwater: concurrency limit must be in [1, %d], got %d", maxBulkheadLimit, c.limit))
	}
	if c.maxQueue < 0 || c.maxWait < 0 || (c.maxQueue == 0) != (c.maxWait == 0) {
		errs = append(errs, fmt.Errorf("breakwater: bulkhead queue needs a length and a wait both > 0 or both 0, got %d and %s", c.maxQueue, c.maxWait))
	}
	if c.maxKeys < 1 || c.maxKeys > keyed.MaxKeys || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: bulkhead keys need maxKeys in [1, %d] and idleTTL > 0, got %d and %s", keyed.MaxKeys, c.maxKeys, c.idleTTL))
	}
	if c.adaptive != nil && c.limit >= 1 {
		if _, err := c.adaptive.adaptive(c.limit); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// maxBulkheadLimit bounds limits so that the in-flight count fits its
// 32 bits.
const maxBulkheadLimit = 1 << 30

// Bulkhead bounds how many requests are in flight at once for one key.
// Each request takes a [Slot] with [Bulkhead.Acquire] and gives it back
// with [Slot.Release] when it is over. When every slot is taken, a request
// waits in a bounded FIFO queue (see [WithBulkheadQueue]) or is refused at
// once with an [*Error] matching [ErrConcurrencyLimit]. An
// adaptive limit ([WithAdaptiveLimit]) moves the limit with the latencies
// and drops the slots report.
//
// The uncontended path (a free slot and nobody waiting) is a few atomic
// operations, allocation-free; waiting takes a lock. A Bulkhead is safe for
// concurrent use; a nil *Bulkhead admits everything.
type Bulkhead struct {
	key   string
	cfg   *bulkheadConfig
	state atomic.Uint64 // epoch<<32 | slots in flight
	limit atomic.Int64
	nwait atomic.Int32 // requests queued or about to queue
	mu    sync.Mutex
	queue []*bulkheadWaiter
	adapt *adaptiveLimit // nil: fixed limit
	start time.Time
}

const inFlightMask = 1<<32 - 1

type bulkheadWaiter struct {
	ch      chan struct{} // buffered; receives the grant
	granted bool          // guarded by Bulkhead.mu
	slot    Slot
}

// NewBulkhead returns a bulkhead of limit slots, or an error describing
// every invalid argument or option. limit must be at least 1.
func NewBulkhead(limit int, opts ...BulkheadOption) (*Bulkhead, error) {
	c, err := newBulkheadConfig(limit, nil, opts)
	if err != nil {
		return nil, err
	}
	return c.newBulkhead(""), nil
}

func (c *bulkheadConfig) newBulkhead(key string) *Bulkhead {
	b := &Bulkhead{key: key, cfg: c, start: time.Now()}
	b.limit.Store(int64(c.limit))
	if c.adaptive != nil {
		b.adapt, _ = c.adaptive.adaptive(c.limit)
	}
	return b
}

func (b *Bulkhead) now() int64 { return int64(time.Since(b.start)) }

// Key returns the bulkhead's key ("" for one made by [NewBulkhead]).
func (b *Bulkhead) Key() string {
	if b == nil {
		return ""
	}
	return b.key
}

// Slot is one admission by a [Bulkhead]. Give it back exactly once with
// [Slot.Release] (or [Slot.Drop] or [Slot.Ignore], which also tell an
// adaptive limit what happened) when the request is over. The methods
// clear the Slot, so calling one again on the same variable does nothing;
// a copy of a Slot is the same slot, so release only one copy. A Slot is
// not safe for concurrent use. The zero Slot holds nothing.
type Slot struct {
	b       *Bulkhead
	epoch   uint32
	verdict slotVerdict
	start   int64 // adaptive limits: bulkhead nanoseconds at admission
}

type slotVerdict uint8

const (
	slotOK     slotVerdict = iota // a latency sample
	slotDrop                      // an overload signal
	slotIgnore                    // nothing to learn
)

// Held reports whether the slot still has to be given back.
func (s *Slot) Held() bool { return s.b != nil }

// Release gives the slot back. For an adaptive limit it reports a request
// that completed normally, with the time since [Bulkhead.Acquire] as its
// latency.
func (s *Slot) Release() { s.done(slotOK) }

// Drop gives the slot back and reports, to an adaptive limit, that the
// request was dropped or timed out: the upstream is overloaded.
func (s *Slot) Drop() { s.done(slotDrop) }

// Ignore gives the slot back without teaching an adaptive limit anything,
// for a request that was cancelled by its caller.
func (s *Slot) Ignore() { s.done(slotIgnore) }

// release gives the slot back with the verdict set by judge.
func (s *Slot) release() { s.done(s.verdict) }

// judge sets what an adaptive limit learns from an attempt's outcome when
// the slot is released: timeouts, throttling and 503s are drops, the
// caller's cancellations, rejections and connection failures teach
// nothing, everything else is a latency sample.
func (s *Slot) judge(o Outcome) {
	switch {
	case o.Category == Timeout, o.Category == Throttled, o.Status == http.StatusServiceUnavailable:
		s.verdict = slotDrop
	case o.Category == Canceled, o.Category == Rejected, o.Category == NetworkError:
		s.verdict = slotIgnore
	default:
		s.verdict = slotOK
	}
}

func (s *Slot) done(v slotVerdict) {
	b := s.b
	if b == nil {
		return
	}
	s.b = nil
	b.release(s.epoch, s.start, v)
}

// Acquire takes a slot. When every slot is taken it waits in the queue, if
// the bulkhead has one with room, until a slot is free, the queue wait
// ends or ctx's deadline is reached; then, or at once without a queue, it
// returns an [*Error] matching [ErrConcurrencyLimit]. If ctx ends while
// waiting, Acquire
// returns ctx.Err(). Slots are granted to waiters in arrival order.
func (b *Bulkhead) Acquire(ctx context.Context) (Slot, error) { return b.acquire(ctx, time.Time{}) }

// TryAcquire takes a slot if one is free now, without waiting.
func (b *Bulkhead) TryAcquire() (Slot, bool) {
	if b == nil {
		return Slot{}, true
	}
	if b.nwait.Load() != 0 {
		return Slot{}, false
	}
	return b.tryAcquire()
}

// acquire is Acquire with an extra deadline dl (zero: none).
func (b *Bulkhead) acquire(ctx context.Context, dl time.Time) (Slot, error) {
	if b == nil {
		return Slot{}, nil
	}
	if b.nwait.Load() == 0 {
		if s, ok := b.tryAcquire(); ok {
			return s, nil
		}
	}
	return b.acquireSlow(ctx, dl)
}

func (b *Bulkhead) tryAcquire() (Slot, bool) {
	limit := uint64(b.limit.Load())
	for {
		st := b.state.Load()
		if st&inFlightMask >= limit {
			return Slot{}, false
		}
		if b.state.CompareAndSwap(st, st+1) {
			s := Slot{b: b, epoch: uint32(st >> 32)}
			if b.adapt != nil {
				s.start = b.now()
			}
			return s, true
		}
	}
}

func (b *Bulkhead) acquireSlow(ctx context.Context, dl time.Time) (Slot, error) {
	b.mu.Lock()
	// Counting ourselves before looking at the slots pairs with release,
	// which frees a slot before looking at nwait: one of the two sees the
	// other, so a freed slot never misses a waiter.
	b.nwait.Add(1)
	if len(b.queue) == 0 {
		if s, ok := b.tryAcquire(); ok {
			b.nwait.Add(-1)
			b.mu.Unlock()
			return s, nil
		}
	}
	wait := b.cfg.maxWait
	t := time.Now()
	if left, ok := timeLeft(ctx, dl, t); ok && left < wait {
		wait = left
	}
	if len(b.queue) >= b.cfg.maxQueue || wait <= 0 {
		b.nwait.Add(-1)
		b.mu.Unlock()
		return Slot{}, b.reject(0)
	}
	w := &bulkheadWaiter{ch: make(chan struct{}, 1)}
	b.queue = append(b.queue, w)
	b.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ch:
		return w.slot, nil
	case <-timer.C:
		if b.leave(w) {
			return Slot{}, b.reject(time.Since(t))
		}
		<-w.ch // granted meanwhile: take it
		return w.slot, nil
	case <-ctx.Done():
		if !b.leave(w) {
			<-w.ch
			w.slot.Ignore()
		}
		return Slot{}, ctx.Err()
	}
}

// leave takes w out of the queue, or reports false when it was granted a
// slot already.
func (b *Bulkhead) leave(w *bulkheadWaiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		return false
	}
	if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	b.nwait.Add(-1)
	return true
}

func (b *Bulkhead) reject(waited time.Duration) error {
	e := rejected(ErrConcurrencyLimit, b.key, time.Time{})
	e.limit, e.inFlight, e.waited = int(b.limit.Load()), int(b.state.Load()&inFlightMask), waited
	return e
}

// release gives back a slot of epoch; a slot from before a Reset is not
// counted any more.
func (b *Bulkhead) release(epoch uint32, start int64, v slotVerdict) {
	for {
		st := b.state.Load()
		if uint32(st>>32) != epoch || st&inFlightMask == 0 {
			break
		}
		if b.state.CompareAndSwap(st, st-1) {
			if b.adapt != nil && v != slotIgnore {
				b.adapt.sample(b, start, int(st&inFlightMask), v == slotDrop)
			}
			break
		}
	}
	if b.nwait.Load() != 0 {
		b.dispatch()
	}
}

// dispatch grants free slots to waiters in arrival order.
func (b *Bulkhead) dispatch() {
	b.mu.Lock()
	for len(b.queue) > 0 {
		s, ok := b.tryAcquire()
		if !ok {
			break
		}
		w := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		w.granted, w.slot = true, s
		b.nwait.Add(-1)
		w.ch <- struct{}{}
	}
	if len(b.queue) == 0 {
		b.queue = nil
	}
	b.mu.Unlock()
}

// InFlight reports how many slots are held.
func (b *Bulkhead) InFlight() int {
	if b == nil {
		return 0
	}
	return int(b.state.Load() & inFlightMask)
}

// Limit reports the current limit (0 for nil).
func (b *Bulkhead) Limit() int {
	if b == nil {
		return 0
	}
	return int(b.limit.Load())
}

// Queued reports how many requests are waiting for a slot.
func (b *Bulkhead) Queued() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Reset forgets every slot held, as if all were released, without
// stopping the requests that hold them (their Release then does nothing),
// and sets an adaptive limit back to its initial value. Waiting requests
// are granted the freed slots.
func (b *Bulkhead) Reset() {
	if b == nil {
		return
	}
	b.mu.Lock()
	for {
		st := b.state.Load()
		if b.state.CompareAndSwap(st, (st>>32+1)<<32) {
			break
		}
	}
	if b.adapt != nil {
		b.adapt.reset(b)
	}
	b.mu.Unlock()
	b.dispatch()
}

// weigh tells the registry what evicting the bulkhead would lose (see
// [keyed.Map]): slots held or requests waiting must not be lost; an adaptive
// limit that moved from its start is worth keeping.
func (b *Bulkhead) weigh(time.Time) keyed.Keep {
	switch {
	case b.state.Load()&inFlightMask != 0 || b.nwait.Load() != 0:
		return keyed.Hard
	case b.adapt != nil && b.limit.Load() != int64(b.cfg.limit):
		return keyed.Soft
	}
	return keyed.None
}

// BulkheadSnapshot is a point-in-time view of one bulkhead.
type BulkheadSnapshot struct {
	Key      string `json:"key"`
	Limit    int    `json:"limit"`
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	// Saturated reports that every slot is taken.
	Saturated bool `json:"saturated"`
}

// Snapshot returns the bulkhead's current state.
func (b *Bulkhead) Snapshot() BulkheadSnapshot {
	if b == nil {
		return BulkheadSnapshot{}
	}
	s := BulkheadSnapshot{Key: b.key, Limit: b.Limit(), InFlight: b.InFlight(), Queued: b.Queued()}
	s.Saturated = s.InFlight >= s.Limit
	return s
}

// Bulkheads is a registry of bulkheads, one per key, all configured alike,
// created on first use and bounded in number (see [WithBulkheadKeys]). It
// is safe for concurrent use. Reads never create a bulkhead. A nil
// *Bulkheads admits everything.
type Bulkheads struct {
	cfg *bulkheadConfig
	m   *keyed.Map[*Bulkhead]
}

// NewBulkheads returns a registry of bulkheads of limit slots each, or an
// error describing every invalid argument or option.
func NewBulkheads(limit int, opts ...BulkheadOption) (*Bulkheads, error) {
	return newBulkheads(limit, nil, opts)
}

func newBulkheads(limit int, defaults, opts []BulkheadOption) (*Bulkheads, error) {
	c, err := newBulkheadConfig(limit, defaults, opts)
	if err != nil {
		return nil, err
	}
	return &Bulkheads{cfg: c, m: keyed.New(c.maxKeys, c.idleTTL, c.newBulkhead, (*Bulkhead).weigh)}, nil
}

// Get returns key's bulkhead, creating it if needed (nil for a nil
// registry).
func (bs *Bulkheads) Get(key string) *Bulkhead {
	if bs == nil {
		return nil
	}
	return bs.m.Get(key)
}

// Lookup returns key's bulkhead without creating it.
func (bs *Bulkheads) Lookup(key string) (*Bulkhead, bool) {
	if bs == nil {
		return nil, false
	}
	return bs.m.Lookup(key)
}

// Len reports how many bulkheads the registry holds.
func (bs *Bulkheads) Len() int {
	if bs == nil {
		return 0
	}
	return bs.m.Len()
}

// Acquire takes a slot of key's bulkhead. See [Bulkhead.Acquire].
func (bs *Bulkheads) Acquire(ctx context.Context, key string) (Slot, error) {
	if bs == nil {
		return Slot{}, nil
	}
	return bs.acquire(ctx, key, time.Time{})
}

// acquire takes a slot of key's bulkhead. The bulkhead is pinned in the
// registry while the slot is being taken, and a slot held or a request
// queued keeps it there afterwards: it is never evicted under a holder, so
// one key never has two bulkheads (twice its limit).
func (bs *Bulkheads) acquire(ctx context.Context, key string, dl time.Time) (Slot, error) {
	e := bs.m.Acquire(key)
	defer e.Release()
	return e.Value.acquire(ctx, dl)
}

// InFlight reports how many of key's slots are held.
func (bs *Bulkheads) InFlight(key string) int {
	b, _ := bs.Lookup(key)
	return b.InFlight()
}

// Limit reports key's current limit: the configured one for a key never
// used (0 for a nil registry).
func (bs *Bulkheads) Limit(key string) int {
	if bs == nil {
		return 0
	}
	if b, ok := bs.Lookup(key); ok {
		return b.Limit()
	}
	return bs.cfg.limit
}

// Reset forgets key's slots. See [Bulkhead.Reset].
func (bs *Bulkheads) Reset(key string) {
	if b, ok := bs.Lookup(key); ok {
		b.Reset()
	}
}

// Snapshot returns key's state, or false when no bulkhead exists for key.
func (bs *Bulkheads) Snapshot(key string) (BulkheadSnapshot, bool) {
	b, ok := bs.Lookup(key)
	if !ok {
		return BulkheadSnapshot{}, false
	}
	return b.Snapshot(), true
}

// Snapshots returns the state of every bulkhead in the registry.
func (bs *Bulkheads) Snapshots() []BulkheadSnapshot {
	if bs == nil {
		return nil
	}
	var out []BulkheadSnapshot
	bs.m.Each(func(_ string, b *Bulkhead) { out = append(out, b.Snapshot()) })
	return out
}
