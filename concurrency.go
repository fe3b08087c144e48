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

// bulkheadConfig is the configuration of a registry of bulkheads.
type bulkheadConfig struct {
	limit    int
	maxQueue int // 0: no bound but the wait
	maxWait  time.Duration
	// queueTarget bounds the waits of a queue that has not been empty for
	// queueInterval (WithQueueTarget); 0: off.
	queueTarget, queueInterval time.Duration
	queueTargetSet             bool
	adaptive                   AdaptiveLimit
	maxKeys                    int
	idleTTL                    time.Duration
}

// newBulkheadConfig returns the defaults of a registry of bulkheads of
// limit slots each.
func newBulkheadConfig(limit int) bulkheadConfig {
	return bulkheadConfig{limit: limit, maxWait: defaultMaxWait, maxKeys: defaultMaxKeys, idleTTL: defaultIdleTTL}
}

// bulkheadOption is an option of the bulkheads of [NewBulkheads] and
// [WithConcurrencyLimit].
func bulkheadOption(name string, fn func(*bulkheadConfig)) Option {
	return option(func(s *settings) {
		if s.bulk == nil {
			s.reject(name)
			return
		}
		s.note(name)
		fn(s.bulk)
	})
}

// WithMaxQueue bounds how many requests may wait for a slot of a bulkhead
// at once (see [WithMaxWait] for how long each may); a request that finds
// the queue full is refused at once. 0 means no bound but the wait. It
// configures [NewBulkheads] and [WithConcurrencyLimit]. Default: 0.
func WithMaxQueue(n int) Option {
	return bulkheadOption("WithMaxQueue", func(c *bulkheadConfig) { c.maxQueue = n })
}

// WithQueueTarget bounds the queueing delay of a bulkhead the way CoDel
// does, in the manner of Facebook's server queues: while its queue has
// been empty within the last interval, a request waits as [WithMaxWait]
// lets it; once the queue has not emptied for a whole interval, the
// bulkhead is overloaded, a standing queue only adds delay, and a request
// less than [Critical] that arrives waits at most target (a Critical one
// waits as WithMaxWait lets it, ahead of the others). A queue that drains
// ends it.
// target must be > 0 and interval >= target; 5 ms and 100 ms are
// Facebook's. It configures [NewBulkheads] and [WithConcurrencyLimit].
// Default: off.
func WithQueueTarget(target, interval time.Duration) Option {
	return bulkheadOption("WithQueueTarget", func(c *bulkheadConfig) {
		c.queueTarget, c.queueInterval = target, interval
		c.queueTargetSet = true
	})
}

// WithAdaptiveLimit makes a bulkhead's limit move with what the released
// slots report, starting from its limit: [AIMD] or [Gradient]. nil keeps
// the limit fixed. It configures [NewBulkheads] and [WithConcurrencyLimit].
// Default: fixed.
func WithAdaptiveLimit(a AdaptiveLimit) Option {
	return bulkheadOption("WithAdaptiveLimit", func(c *bulkheadConfig) { c.adaptive = a })
}

// validate reports every invalid value of c, and errs, its options'.
func (c *bulkheadConfig) validate(errs []error) error {
	if c.limit < 1 || c.limit > maxBulkheadLimit {
		errs = append(errs, fmt.Errorf("breakwater: concurrency limit must be in [1, %d], got %d", maxBulkheadLimit, c.limit))
	}
	if c.maxQueue < 0 || c.maxQueue > 0 && c.maxWait == 0 {
		errs = append(errs, fmt.Errorf("breakwater: a bulkhead queue needs a length >= 0 and, to wait in it, a wait > 0 (WithMaxWait), got %d and %s", c.maxQueue, c.maxWait))
	}
	if c.queueTargetSet && (c.queueTarget <= 0 || c.queueInterval < c.queueTarget) {
		errs = append(errs, fmt.Errorf("breakwater: a queue target needs target > 0 and interval >= target, got %s and %s", c.queueTarget, c.queueInterval))
	}
	if c.maxKeys < 1 || c.maxKeys > keyed.MaxKeys || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: bulkhead keys need maxKeys in [1, %d] and idleTTL > 0, got %d and %s", keyed.MaxKeys, c.maxKeys, c.idleTTL))
	}
	if c.adaptive != nil && c.limit >= 1 {
		if _, err := c.adaptive.adaptive(c.limit); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// maxBulkheadLimit bounds limits so that the in-flight count fits its
// 32 bits.
const maxBulkheadLimit = 1 << 30

// bulkhead bounds how many requests are in flight at once for one key;
// see [Bulkheads]. The uncontended path (a free slot and nobody waiting) is
// a few atomic operations, allocation-free; waiting takes a lock. It is
// safe for concurrent use; a nil *bulkhead admits everything.
type bulkhead struct {
	key   string
	cfg   *bulkheadConfig
	state atomic.Uint64 // epoch<<32 | slots in flight
	limit atomic.Int64
	nwait atomic.Int32 // requests queued or about to queue
	mu    sync.Mutex
	queue []*bulkheadWaiter
	// grantEvery is the mean time between two grants to waiters while a
	// queue lasts (a moving average), lastGrant the latest grant's time,
	// 0 when the queue emptied since: how fast the queue moves.
	grantEvery, lastGrant int64
	busySince             int64 // when the queue last stopped being empty
	ranked                int   // waiters whose rank is not defaultRank
	// hold is how long a slot granted from the queue is held (a moving
	// average, lossy under contention): a queued request's work.
	hold  atomic.Int64
	adapt *adaptiveLimit // nil: fixed limit
	start time.Time
}

const inFlightMask = 1<<32 - 1

type bulkheadWaiter struct {
	ch   chan struct{} // buffered; receives the grant, or being turned away
	rank int8          // its place in the queue (rankOf)
	// granted, or turnedAway by a more critical waiter when the queue was
	// full; guarded by bulkhead.mu.
	granted, turnedAway bool
	slot                Slot
}

func (c *bulkheadConfig) newBulkhead(key string) *bulkhead {
	b := &bulkhead{key: key, cfg: c, start: time.Now()}
	b.limit.Store(int64(c.limit))
	if c.adaptive != nil {
		b.adapt, _ = c.adaptive.adaptive(c.limit)
	}
	return b
}

func (b *bulkhead) now() int64 { return int64(time.Since(b.start)) }

// Slot is one admission by a bulkhead of [Bulkheads]. Give it back exactly
// once with [Slot.Release] (or [Slot.Drop] or [Slot.Ignore], which also
// tell an adaptive limit what happened) when the request is over. The methods
// clear the Slot, so calling one again on the same variable does nothing;
// a copy of a Slot is the same slot, so release only one copy. A Slot is
// not safe for concurrent use. The zero Slot holds nothing.
type Slot struct {
	b       *bulkhead
	epoch   uint32
	verdict slotVerdict
	queued  bool  // granted from the queue: its hold times the queue's work
	start   int64 // adaptive limits, or queued: bulkhead nanoseconds at admission
}

type slotVerdict uint8

const (
	slotOK     slotVerdict = iota // a latency sample
	slotDrop                      // an overload signal
	slotIgnore                    // nothing to learn
)

// held reports whether the slot still has to be given back.
func (s *Slot) held() bool { return s.b != nil }

// Release gives the slot back. For an adaptive limit it reports a request
// that completed normally, with the time since [Bulkheads.Acquire] as its
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
	if s.queued {
		b.held(s.start)
	}
	b.release(s.epoch, s.start, v)
}

// acquire takes a slot, waiting until dl at the latest (zero: no deadline
// but ctx's); see [Bulkheads.Acquire].
func (b *bulkhead) acquire(ctx context.Context, dl time.Time) (Slot, error) {
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

func (b *bulkhead) tryAcquire() (Slot, bool) {
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

func (b *bulkhead) acquireSlow(ctx context.Context, dl time.Time) (Slot, error) {
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
	w := &bulkheadWaiter{rank: rankOf(ctx)}
	if w.rank < criticalRank && b.overloaded() {
		wait = min(wait, b.cfg.queueTarget)
	}
	t := time.Now()
	if left, ok := timeLeft(ctx, dl, t); ok && left < wait {
		wait = left
	}
	if wait > 0 && b.tooLate(ctx, w.rank, wait) {
		b.nwait.Add(-1)
		b.mu.Unlock()
		return Slot{}, b.rejectLate(0)
	}
	if wait <= 0 || !b.push(w) {
		b.nwait.Add(-1)
		b.mu.Unlock()
		return Slot{}, b.reject(0)
	}
	w.ch = make(chan struct{}, 1)
	b.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ch:
		if w.turnedAway {
			return Slot{}, b.reject(time.Since(t))
		}
		if b.lateGrant(ctx) {
			w.slot.queued = false // not held: no measure of the work
			w.slot.Ignore()
			return Slot{}, b.rejectLate(time.Since(t))
		}
		return w.slot, nil
	case <-timer.C:
		if b.leave(w) {
			return Slot{}, b.reject(time.Since(t))
		}
		<-w.ch // granted or turned away meanwhile
		if w.turnedAway {
			return Slot{}, b.reject(time.Since(t))
		}
		return w.slot, nil
	case <-ctx.Done():
		if !b.leave(w) {
			<-w.ch
			w.slot.queued = false
			w.slot.Ignore() // nothing when turned away
		}
		return Slot{}, ctx.Err()
	}
}

// granted counts a grant to a waiter in the queue's pace; b.mu is held.
func (b *bulkhead) granted() {
	now := b.now()
	switch {
	case b.lastGrant == 0:
	case b.grantEvery == 0:
		b.grantEvery = now - b.lastGrant
	default:
		b.grantEvery += (now - b.lastGrant - b.grantEvery) / 8
	}
	b.lastGrant = max(now, 1)
}

// held counts the hold of a slot granted from the queue at start.
func (b *bulkhead) held(start int64) {
	d := b.now() - start
	if m := b.hold.Load(); m != 0 {
		d = m + (d-m)/8
	}
	b.hold.Store(max(d, 1))
}

// tooLate reports whether a request of rank serving a breakwater caller's
// deadline (CallerHeaders), which may wait for wait, could not be done in
// time: at the queue's pace its turn comes after its wait, or a queued
// request's work ends after its caller's deadline; its caller would get
// nothing from the wait. It is refused at once instead. b.mu is held.
func (b *bulkhead) tooLate(ctx context.Context, rank int8, wait time.Duration) bool {
	if len(b.queue) == 0 || b.grantEvery <= 0 || callerOf(ctx) == nil {
		return false
	}
	turn := time.Duration((2*int64(b.ahead(rank)) + 1) * b.grantEvery / 2) // the next grant comes in half a pace, on average
	if turn > wait {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && turn+time.Duration(b.hold.Load()) > time.Until(dl)
}

// lateGrant reports whether a request serving a breakwater caller's
// deadline, granted a slot after a wait, has too little time left for a
// queued request's work: its caller would give up before the answer. The
// slot goes to the next in line.
func (b *bulkhead) lateGrant(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	if !ok || callerOf(ctx) == nil {
		return false
	}
	return time.Until(dl) < time.Duration(b.hold.Load())
}

// leave takes w out of the queue, or reports false when it was granted a
// slot already.
func (b *bulkhead) leave(w *bulkheadWaiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted || w.turnedAway {
		return false
	}
	if i := slices.Index(b.queue, w); i >= 0 {
		b.remove(i)
	}
	b.nwait.Add(-1)
	return true
}

func (b *bulkhead) reject(waited time.Duration) error {
	e := rejected(ErrConcurrencyLimit, b.key, time.Time{})
	e.limit, e.inFlight, e.waited = int(b.limit.Load()), int(b.state.Load()&inFlightMask), waited
	return e
}

// rejectLate is the refusal of a request whose caller's deadline the
// queue cannot meet (tooLate, lateGrant): it wraps ErrCallerDeadline.
func (b *bulkhead) rejectLate(waited time.Duration) error {
	e := b.reject(waited).(*Error)
	e.Err = ErrCallerDeadline
	return e
}

// release gives back a slot of epoch; a slot from before a Reset is not
// counted any more.
func (b *bulkhead) release(epoch uint32, start int64, v slotVerdict) {
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
func (b *bulkhead) dispatch() {
	b.mu.Lock()
	for len(b.queue) > 0 {
		s, ok := b.tryAcquire()
		if !ok {
			break
		}
		w := b.pop()
		s.queued = true
		if s.start == 0 {
			s.start = b.now()
		}
		w.granted, w.slot = true, s
		b.nwait.Add(-1)
		w.ch <- struct{}{}
		b.granted()
	}
	if len(b.queue) == 0 {
		b.queue, b.lastGrant = nil, 0
	}
	b.mu.Unlock()
}

// queued reports how many requests are waiting for a slot.
func (b *bulkhead) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// weigh tells the registry what evicting the bulkhead would lose (see
// [keyed.Map]): slots held or requests waiting must not be lost; an adaptive
// limit that moved from its start is worth keeping.
func (b *bulkhead) weigh(time.Time) keyed.Keep {
	switch {
	case b.state.Load()&inFlightMask != 0 || b.nwait.Load() != 0:
		return keyed.Hard
	case b.adapt != nil && b.limit.Load() != int64(b.cfg.limit):
		return keyed.Soft
	}
	return keyed.None
}

// snapshot returns the bulkhead's current state.
func (b *bulkhead) snapshot() BulkheadSnapshot {
	s := BulkheadSnapshot{Key: b.key, Limit: int(b.limit.Load()), InFlight: int(b.state.Load() & inFlightMask), Queued: b.queued()}
	s.Saturated = s.InFlight >= s.Limit
	return s
}

// Bulkheads is a registry of bulkheads, one per key, all configured alike,
// each bounding how many requests are in flight at once for its key. Each
// request takes a [Slot] with [Bulkheads.Acquire] and gives it back when it
// is over. When every slot is taken, a request waits for one in arrival
// order, up to the longest wait ([WithMaxWait]; default 0: refused at once)
// and within its deadline, in a queue of at most [WithMaxQueue] requests,
// or is refused with an [*Error] matching [ErrConcurrencyLimit]. An
// adaptive limit ([WithAdaptiveLimit]) moves the limit with the latencies
// and drops the slots report. The uncontended path (a free slot and nobody
// waiting) is a few atomic operations, allocation-free. It is safe for
// concurrent use.
//
// The registry is bounded ([WithKeyLimits]): idle bulkheads (no slot held,
// nobody waiting, unused for idleTTL) are evicted, an adaptive limit
// starting again from the initial limit; a full registry makes room for a
// new key by evicting an idle bulkhead, one with a slot held or a request
// waiting never, and while every bulkhead is such the registry grows up to
// twice maxKeys. A key never has two bulkheads, which would double its
// limit.
type Bulkheads struct {
	cfg *bulkheadConfig
	m   *keyed.Map[*bulkhead]
}

// NewBulkheads returns a registry of bulkheads of limit slots each,
// configured by opts ([WithMaxWait], default 5 s; [WithMaxQueue], default
// no bound but the wait; [WithAdaptiveLimit]; [WithKeyLimits]), or an
// error describing every invalid argument or option.
func NewBulkheads(limit int, opts ...Option) (*Bulkheads, error) {
	c := newBulkheadConfig(limit)
	s := settings{to: "NewBulkheads", bulk: &c}
	s.applyOptions(opts)
	return buildBulkheads(c, s.errs)
}

// buildBulkheads returns the registry of c, or an error describing errs,
// its options', and every invalid value.
func buildBulkheads(c bulkheadConfig, errs []error) (*Bulkheads, error) {
	if err := c.validate(errs); err != nil {
		return nil, err
	}
	return &Bulkheads{cfg: &c, m: keyed.New(c.maxKeys, c.idleTTL, c.newBulkhead, (*bulkhead).weigh)}, nil
}

// Acquire takes a slot of key's bulkhead. When every slot is taken it
// waits for one, in arrival order, while the queue has room, until a slot
// is free, the longest wait ends or ctx's deadline is reached; then, or at
// once when the bulkhead does not wait, it returns an [*Error] matching
// [ErrConcurrencyLimit]. If ctx ends while waiting, Acquire returns
// ctx.Err(); with a ctx that has ended already, Acquire takes a free slot
// or fails at once.
func (bs *Bulkheads) Acquire(ctx context.Context, key string) (Slot, error) {
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

// Snapshot returns the state of every bulkhead in the registry; a
// *Bulkheads is a source for the status page.
func (bs *Bulkheads) Snapshot() Snapshot {
	return Snapshot{At: time.Now(), Bulkheads: bs.snapshots()}
}

// snapshots returns the state of every bulkhead in the registry.
func (bs *Bulkheads) snapshots() []BulkheadSnapshot {
	if bs == nil {
		return nil
	}
	var out []BulkheadSnapshot
	bs.m.Each(func(_ string, b *bulkhead) { out = append(out, b.snapshot()) })
	return out
}
