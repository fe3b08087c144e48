package breakwater

import (
	"sync"
	"sync/atomic"
	"time"
)

// keyedMap is a bounded per-key registry shared by every per-key primitive
// (breakers, retry budgets, limiters, gates, bulkheads, log gates). Lookups
// of existing keys are lock-free and allocation-free (a sync.Map load and
// an atomic flag); inserting a key is amortised O(1).
//
// Bounds: every idleTTL at most, an insertion sweeps the map, evicting the
// entries that were not used since the previous sweep and that their
// evictable function lets go (a closed breaker, a full bucket, an idle
// bulkhead). When the map holds max entries, an insertion may force a sweep
// (at most one every fullSweepEvery, so that a flood of new keys costs no
// more than that); if the map is still full, the key gets the shared
// overflow value, which is never evicted.
type keyedMap[V any] struct {
	m         sync.Map // string → *keyedEntry[V]
	count     atomic.Int64
	max       int64
	idleTTL   int64
	start     time.Time
	make      func(key string) V
	evictable func(V) bool
	overflow  V
	// overflowEntry wraps overflow for getEntry.
	overflowEntry *keyedEntry[V]

	sweeping      sync.Mutex
	lastSweep     atomic.Int64
	lastFullSweep atomic.Int64
}

// fullSweepEvery bounds how often a full map forces a sweep.
const fullSweepEvery = int64(100 * time.Millisecond)

type keyedEntry[V any] struct {
	v     V
	state atomic.Int32 // entryUnused, entryUsed or entryEvicted
}

// Entry states. A use and an eviction race on one compare-and-swap, so an
// entry handed out by get is never evicted before the next sweep sees it
// unused again.
const (
	entryUnused int32 = iota
	entryUsed
	entryEvicted
)

// use marks e used and reports whether it is still live.
func (e *keyedEntry[V]) use() bool {
	for {
		switch s := e.state.Load(); s {
		case entryUsed:
			return true
		case entryEvicted:
			return false
		default:
			if e.state.CompareAndSwap(s, entryUsed) {
				return true
			}
		}
	}
}

func newKeyedMap[V any](max int, idleTTL time.Duration, make func(string) V, evictable func(V) bool) *keyedMap[V] {
	km := &keyedMap[V]{max: int64(max), idleTTL: int64(idleTTL), start: time.Now(), make: make, evictable: evictable}
	km.overflow = make("~overflow")
	km.overflowEntry = &keyedEntry[V]{v: km.overflow} // never in the map: never evicted
	km.overflowEntry.state.Store(entryUsed)
	km.lastFullSweep.Store(-fullSweepEvery)
	return km
}

func (km *keyedMap[V]) now() int64 { return int64(time.Since(km.start)) }

// get returns key's value, creating it if needed.
func (km *keyedMap[V]) get(key string) V {
	if e, ok := km.m.Load(key); ok {
		if e := e.(*keyedEntry[V]); e.use() {
			return e.v
		}
	}
	return km.insert(key)
}

// getEntry is get for callers that must check, after starting to use the
// value, that it was not evicted meanwhile (see [keyedEntry.evicted]).
func (km *keyedMap[V]) getEntry(key string) *keyedEntry[V] {
	if e, ok := km.m.Load(key); ok {
		if e := e.(*keyedEntry[V]); e.use() {
			return e
		}
	}
	return km.insertEntry(key)
}

// evicted reports whether e left the map; a caller that started using e
// before it did must undo that and get the key again.
func (e *keyedEntry[V]) evicted() bool { return e.state.Load() == entryEvicted }

// lookup returns key's value without creating it.
func (km *keyedMap[V]) lookup(key string) (V, bool) {
	if e, ok := km.m.Load(key); ok {
		if e := e.(*keyedEntry[V]); e.state.Load() != entryEvicted {
			return e.v, true
		}
	}
	var zero V
	return zero, false
}

func (km *keyedMap[V]) insert(key string) V { return km.insertEntry(key).v }

func (km *keyedMap[V]) insertEntry(key string) *keyedEntry[V] {
	now := km.now()
	if now-km.lastSweep.Load() > km.idleTTL {
		km.sweep(now)
	}
	if km.count.Load() >= km.max {
		if last := km.lastFullSweep.Load(); now-last >= fullSweepEvery && km.lastFullSweep.CompareAndSwap(last, now) {
			km.sweep(now)
		}
		if km.count.Load() >= km.max {
			return km.overflowEntry
		}
	}
	e := &keyedEntry[V]{v: km.make(key)}
	e.state.Store(entryUsed)
	for {
		actual, loaded := km.m.LoadOrStore(key, e)
		if !loaded {
			km.count.Add(1)
			return e
		}
		a := actual.(*keyedEntry[V])
		if a.use() {
			return a
		}
		km.m.CompareAndDelete(key, a) // evicted but not yet deleted: take its place
	}
}

// sweep evicts the evictable entries unused since the previous sweep and
// marks the others unused. Concurrent sweeps collapse into one.
func (km *keyedMap[V]) sweep(now int64) {
	if !km.sweeping.TryLock() {
		return
	}
	defer km.sweeping.Unlock()
	km.lastSweep.Store(now)
	km.m.Range(func(k, v any) bool {
		e := v.(*keyedEntry[V])
		if e.state.CompareAndSwap(entryUsed, entryUnused) {
			return true // used since the previous sweep
		}
		if e.state.Load() == entryUnused && km.evictable(e.v) && e.state.CompareAndSwap(entryUnused, entryEvicted) {
			// A caller that got e just before may have started using it
			// (taken a slot): look again, and keep e if so. Such a caller
			// checks evicted afterwards, so one of the two always sees
			// the other.
			if !km.evictable(e.v) {
				e.state.Store(entryUsed)
				return true
			}
			km.m.CompareAndDelete(k, e)
			km.count.Add(-1)
		}
		return true
	})
}

// len reports the number of entries, the overflow value excluded.
func (km *keyedMap[V]) len() int { return int(km.count.Load()) }

// each calls fn for every entry.
func (km *keyedMap[V]) each(fn func(key string, v V)) {
	km.m.Range(func(k, v any) bool {
		if e := v.(*keyedEntry[V]); e.state.Load() != entryEvicted {
			fn(k.(string), e.v)
		}
		return true
	})
}
