// Package keyed is the bounded, evicting per-key registry that every
// per-key primitive of breakwater keeps its state in: breakers, retry
// budgets, token buckets, pause gates, bulkheads, insights and log gates.
package keyed

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Map is a bounded per-key registry. It is a leaf: it knows nothing of what
// it holds but what weigh tells it. It is safe for concurrent use.
//
// Lookups of existing keys are lock-free and allocation-free: a look at
// one entry held apart (the first key inserted, or the first after its
// eviction: one atomic load), then a probe of a two-way cache of entries (a hash and up to two atomic loads), else a
// sync.Map load, and, at most once between two passes of the eviction
// hand, a compare-and-swap. Inserting a key takes a mutex and is amortised
// O(1). The cache grows to 4 to 8 pointers per entry the map has held at
// most, up to 512 KiB, and never shrinks.
//
// Bounds. The map holds at most max values. A new key at the cap makes room
// at once: a clock hand (the CLOCK approximation of least-recently-used)
// sweeps the entries, giving each one used since it last passed a second
// chance, and evicts the first that nothing holds, preferring values whose
// loss costs nothing (None: a closed breaker with no failures, a full
// bucket, a gate not paused) over values that hold state worth keeping
// (Soft: failure counts, a drained bucket). Values that must not be
// lost (Hard: an open breaker, an active pause, a slot held) and
// entries pinned by a caller are never evicted. When every entry is such,
// the map grows past max, up to hard = 2·max; past that, a new key gets a
// transient value that is not kept (it admits everything it is asked to,
// and forgets what it is told), unless the map was told how to rank its
// Hard values ([Map.Displace]): then the new key takes the place of the
// unpinned entry of lowest rank, so that a value whose Hard state ends
// (a pause) is never refused for want of room. No key ever shares
// another key's value.
//
// Idle entries: every idleTTL an insertion also sweeps the whole map and
// evicts the entries not used since the previous such sweep (idle for
// idleTTL to 2·idleTTL), unless they are Hard or pinned.
type Map[V any] struct {
	m       sync.Map // string → *Entry[V]
	count   atomic.Int64
	max     int
	hard    int
	idleTTL time.Duration
	start   time.Time
	entry   func(key string) *Entry[V] // a new entry of key, its value made
	weigh   func(v V, now time.Time) Keep
	rank    func(v V, now time.Time) int64 // Displace; nil: past hard, new keys are transient

	// hot caches entries by a hash of their keys, in front of m: a slot
	// holds nil or an entry that was live when stored (see remember). A
	// hit is used only when its key matches and it is still live; since
	// an evicted entry never lives again and a key has at most one live
	// entry, a live entry for the key is the one m holds. Evictions clear
	// their slots, so the cache keeps nothing reachable that the map
	// dropped.
	hot  atomic.Pointer[hotTable[V]]
	seed uint64
	// first is the entry of a key inserted while it was nil, in front of
	// hot: a map that serves one key (a client of one upstream) finds it
	// without hashing. It is set and cleared under mu, by the insertion
	// and the eviction of its entry, so it holds nil or a live entry.
	first atomic.Pointer[Entry[V]]

	mu        sync.Mutex // guards everything below, and insertions
	ring      []*Entry[V]
	free      []int32 // empty slots of ring
	hand      int
	nextSweep time.Duration // since start
	skipClock int           // insertions that grow without scanning, after a scan found nothing
}

// Keep says what evicting a value would lose.
type Keep uint8

const (
	// None: nothing; the value is as good as a new one.
	None Keep = iota
	// Soft: state worth keeping, evicted only when no None value
	// is found nearby.
	Soft
	// Hard: state that must not be lost; never evicted.
	Hard
)

// softScan is how many eviction candidates (entries neither pinned nor
// used since the hand last passed) past the first Soft one the hand
// looks at for a None one before settling for the Soft one.
const softScan = 32

// Entry is a key's place in a [Map], pinned by [Map.Acquire] until
// [Entry.Release].
type Entry[V any] struct {
	key       string
	Value     V
	word      atomic.Int64 // pins<<3 | entryDead | entrySeen | entryRef
	transient bool         // never in the map: the map was at its hard cap
}

// Bits of Entry.word. A use sets entryRef and entrySeen; the clock hand
// clears entryRef and the idle sweep entrySeen; an eviction sets entryDead
// with a compare-and-swap that fails if the entry was used or pinned
// meanwhile.
const (
	entryRef  = 1 << iota // used since the hand last passed
	entrySeen             // used since the last idle sweep
	entryDead             // evicted, or transient (never in the map)
	pinUnit               // the pin count starts here
	entryUsed = entryRef | entrySeen
)

// use marks e used and reports whether it is still live.
func (e *Entry[V]) use() bool {
	for {
		w := e.word.Load()
		switch {
		case w&entryDead != 0:
			return false
		case w&entryUsed == entryUsed:
			return true
		case e.word.CompareAndSwap(w, w|entryUsed):
			return true
		}
	}
}

// pin marks e used and keeps it from being evicted until release; it
// reports false if e was evicted already. The pin is one atomic add, not a
// compare-and-swap loop, so that calls pinning one key on several cores do
// not retry each other's updates: an eviction compares and swaps a word
// without pins, so once the add is in, e stays live until release; an add
// that finds e evicted is taken back.
func (e *Entry[V]) pin() bool {
	w := e.word.Add(pinUnit)
	if w&entryDead != 0 {
		e.word.Add(-pinUnit)
		return false
	}
	if w&entryUsed != entryUsed {
		e.use()
	}
	return true
}

// Pin pins e again, as [Map.Acquire] does, for a caller that kept e from
// an earlier Acquire: it reports false, pinning nothing, when e has been
// evicted since (or is transient), and the caller must Acquire the key
// anew. Each successful Pin needs its own Release.
func (e *Entry[V]) Pin() bool { return e.pin() }

// Release undoes the pin [Map.Acquire] or [Entry.Pin] took. A nil e is
// ignored.
func (e *Entry[V]) Release() {
	if e != nil {
		e.word.Add(-pinUnit)
	}
}

// New returns a map of at most max values (see [Map]) made by make on first
// use, idle ones evicted after idleTTL to 2·idleTTL, weighed by weigh when
// room is needed.
func New[V any](max int, idleTTL time.Duration, make func(string) V, weigh func(V, time.Time) Keep) *Map[V] {
	return newMap(max, idleTTL, func(key string) *Entry[V] { return &Entry[V]{key: key, Value: make(key)} }, weigh)
}

// NewEmbedded returns a map like [New] whose values are pointers to Ts
// that init sets up, each T allocated together with its entry: a lookup
// that reaches the entry has reached the value too, in the same or the
// next cache line, instead of following a pointer to another allocation.
func NewEmbedded[T any](max int, idleTTL time.Duration, init func(key string, v *T), weigh func(*T, time.Time) Keep) *Map[*T] {
	return newMap(max, idleTTL, func(key string) *Entry[*T] {
		b := &struct {
			e Entry[*T]
			v T
		}{}
		init(key, &b.v)
		b.e.key, b.e.Value = key, &b.v
		return &b.e
	}, weigh)
}

func newMap[V any](max int, idleTTL time.Duration, entry func(string) *Entry[V], weigh func(V, time.Time) Keep) *Map[V] {
	max = min(max, MaxKeys)
	return &Map[V]{max: max, hard: 2 * max, idleTTL: idleTTL, start: time.Now(), entry: entry, weigh: weigh, nextSweep: idleTTL, seed: rand.Uint64()}
}

// Displace makes the map, at its hard cap with nothing it may evict, make
// room for a new key by evicting the unpinned entry whose value ranks
// lowest by rank (for values whose Hard state has an end, when it ends:
// the soonest is the cheapest loss) instead of giving the key a transient
// value. Only when every entry is pinned at that instant is the value
// transient. Finding the entry scans the map under its insertion lock: an
// insertion at the hard cap costs O(entries). Call Displace before the map
// is used.
func (km *Map[V]) Displace(rank func(v V, now time.Time) int64) { km.rank = rank }

// MaxKeys bounds the cap of a registry: its slot indices are int32.
const MaxKeys = 1 << 28

// Get returns key's value, creating it if needed.
func (km *Map[V]) Get(key string) V {
	if e := km.first.Load(); e != nil && e.key == key && e.use() {
		return e.Value
	}
	t, e := km.cached(key)
	if e != nil && e.use() {
		return e.Value
	}
	if e, ok := km.m.Load(key); ok {
		if e := e.(*Entry[V]); e.use() {
			km.remember(t, e)
			return e.Value
		}
	}
	return km.insert(key, false).Value
}

// Acquire returns key's entry, creating it if needed, pinned: it is not
// evicted until e.Release(). Use it when what is done with the value must
// not be lost to an eviction in between (a failure recorded at the end of a
// call, a pause set, a slot taken).
func (km *Map[V]) Acquire(key string) *Entry[V] {
	if e := km.first.Load(); e != nil && e.key == key && e.pin() {
		return e
	}
	t, e := km.cached(key)
	if e != nil && e.pin() {
		return e
	}
	if e, ok := km.m.Load(key); ok {
		if e := e.(*Entry[V]); e.pin() {
			km.remember(t, e)
			return e
		}
	}
	return km.insert(key, true)
}

// Lookup returns key's value without creating it or marking it used.
func (km *Map[V]) Lookup(key string) (V, bool) {
	if e, ok := km.m.Load(key); ok {
		if e := e.(*Entry[V]); e.word.Load()&entryDead == 0 {
			return e.Value, true
		}
	}
	var zero V
	return zero, false
}

func (km *Map[V]) insert(key string, pin bool) *Entry[V] {
	e := km.entry(key)
	now := time.Now()
	km.mu.Lock()
	defer km.mu.Unlock()
	if a, ok := km.m.Load(key); ok { // inserted meanwhile (evictions delete under mu)
		a := a.(*Entry[V])
		if pin && a.pin() || !pin && a.use() {
			return a
		}
	}
	if since := now.Sub(km.start); since >= km.nextSweep {
		km.nextSweep = since + km.idleTTL
		km.sweepLocked(now)
	}
	// A new entry starts without its reference bit: one used once is
	// evicted when the hand next comes round (a whole turn of insertions
	// later), one used again gets a second chance.
	w := int64(entrySeen)
	if pin {
		w += pinUnit
	}
	slot := km.slotLocked(now)
	if slot < 0 {
		e.word.Store(w | entryDead)
		e.transient = true
		return e
	}
	e.word.Store(w)
	km.ring[slot] = e
	km.m.Store(key, e)
	km.count.Add(1)
	km.growHotLocked()
	km.remember(km.hot.Load(), e)
	if km.first.Load() == nil {
		km.first.Store(e)
	}
	return e
}

// slotLocked returns a free slot of ring for a new entry, evicting one if
// the map is at its cap, or -1 when the map is at its hard cap and nothing
// can be evicted.
func (km *Map[V]) slotLocked(now time.Time) int {
	if int(km.count.Load()) >= km.max {
		if km.skipClock > 0 {
			km.skipClock--
		} else if i := km.clockLocked(now); i >= 0 {
			return i
		} else {
			km.skipClock = km.max / 8 // nothing to evict: grow for a while without scanning
		}
		if int(km.count.Load()) >= km.hard {
			return km.displaceLocked(now)
		}
	}
	if n := len(km.free); n > 0 {
		i := km.free[n-1]
		km.free = km.free[:n-1]
		return int(i)
	}
	km.ring = append(km.ring, nil)
	return len(km.ring) - 1
}

// clockLocked moves the hand until it evicts an entry and returns its
// slot, or -1 when a whole turn found nothing to evict.
func (km *Map[V]) clockLocked(now time.Time) int {
	n := len(km.ring)
	soft, past := -1, 0
	var softW int64
	for range 2 * n {
		i := km.hand
		if km.hand++; km.hand == n {
			km.hand = 0
		}
		e := km.ring[i]
		if e == nil {
			continue
		}
		w := e.word.Load()
		if w >= pinUnit { // pinned
			continue
		}
		if w&entryRef != 0 {
			e.word.CompareAndSwap(w, w&^entryRef) // a second chance
			continue
		}
		switch km.weigh(e.Value, now) {
		case None:
			if km.evictLocked(i, w) {
				return i
			}
		case Soft:
			if soft < 0 {
				soft, softW, past = i, w, 0
				continue
			}
		}
		if soft < 0 {
			continue
		}
		if past++; past > softScan { // candidates seen since, none free
			if km.evictLocked(soft, softW) {
				return soft
			}
			soft = -1 // used meanwhile: look on
		}
	}
	if soft >= 0 && km.evictLocked(soft, softW) {
		return soft
	}
	return -1
}

// displaceLocked evicts the unpinned entry of lowest rank and returns its
// slot, or -1 without a rank or when every entry is pinned. An entry used
// between the scan and the eviction is kept, and the scan runs again, a
// few times at most.
func (km *Map[V]) displaceLocked(now time.Time) int {
	if km.rank == nil {
		return -1
	}
	for range 4 {
		best, bestW, bestRank := -1, int64(0), int64(0)
		for i, e := range km.ring {
			if e == nil {
				continue
			}
			w := e.word.Load()
			if w >= pinUnit {
				continue
			}
			if r := km.rank(e.Value, now); best < 0 || r < bestRank {
				best, bestW, bestRank = i, w, r
			}
		}
		if best < 0 {
			return -1
		}
		if km.evictLocked(best, bestW) {
			return best
		}
	}
	return -1
}

// evictLocked evicts the entry in slot i if its word is still w (nobody
// used or pinned it since w was read).
func (km *Map[V]) evictLocked(i int, w int64) bool {
	e := km.ring[i]
	if !e.word.CompareAndSwap(w, w|entryDead) {
		return false
	}
	km.m.CompareAndDelete(e.key, e)
	km.forget(km.hot.Load(), e)
	km.first.CompareAndSwap(e, nil)
	km.count.Add(-1)
	km.ring[i] = nil
	return true
}

// sweepLocked evicts the entries not used since the previous sweep, unless
// they are pinned or Hard, and marks the others unused.
func (km *Map[V]) sweepLocked(now time.Time) {
	for i, e := range km.ring {
		if e == nil {
			continue
		}
		w := e.word.Load()
		switch {
		case w&entrySeen != 0:
			e.word.CompareAndSwap(w, w&^entrySeen)
		case w < pinUnit && km.weigh(e.Value, now) != Hard && km.evictLocked(i, w):
			km.free = append(km.free, int32(i))
		}
	}
}

// Len reports the number of entries.
func (km *Map[V]) Len() int { return int(km.count.Load()) }

// Each calls fn for every entry.
func (km *Map[V]) Each(fn func(key string, v V)) {
	km.m.Range(func(k, v any) bool {
		if e := v.(*Entry[V]); e.word.Load()&entryDead == 0 {
			fn(k.(string), e.Value)
		}
		return true
	})
}
