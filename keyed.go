package breakwater

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// keyedMap is a bounded per-key registry shared by every per-key primitive
// (breakers, retry budgets, limiters, gates, bulkheads). Lookups are
// lock-free: each shard publishes an immutable map through an atomic
// pointer, and writers (new keys, evictions) copy the shard under its lock.
//
// Bounds: entries not used since the previous sweep are evicted when their
// evictable function agrees (sweeps run at most once per idleTTL per shard,
// on insertion); when the map holds max entries a full sweep runs first, and
// if nothing can be evicted the key gets the shared overflow value.
type keyedMap[V any] struct {
	seed      maphash.Seed
	shards    [keyedShards]keyedShard[V]
	count     atomic.Int64
	max       int
	idleTTL   int64
	start     time.Time
	make      func(key string) V
	evictable func(V) bool
	overflow  V
}

const keyedShards = 64

type keyedShard[V any] struct {
	m         atomic.Pointer[map[string]*keyedEntry[V]]
	mu        sync.Mutex
	lastSweep int64
}

type keyedEntry[V any] struct {
	v    V
	used atomic.Bool
}

func newKeyedMap[V any](max int, idleTTL time.Duration, make func(string) V, evictable func(V) bool) *keyedMap[V] {
	km := &keyedMap[V]{seed: maphash.MakeSeed(), max: max, idleTTL: int64(idleTTL), start: time.Now(), make: make, evictable: evictable}
	for i := range km.shards {
		m := map[string]*keyedEntry[V]{}
		km.shards[i].m.Store(&m)
	}
	km.overflow = make("~overflow")
	return km
}

func (km *keyedMap[V]) now() int64 { return int64(time.Since(km.start)) }

func (km *keyedMap[V]) shard(key string) *keyedShard[V] {
	return &km.shards[maphash.String(km.seed, key)%keyedShards]
}

// get returns key's value, creating it if needed.
func (km *keyedMap[V]) get(key string) V {
	if e, ok := (*km.shard(key).m.Load())[key]; ok {
		if !e.used.Load() {
			e.used.Store(true)
		}
		return e.v
	}
	return km.insert(key)
}

// lookup returns key's value without creating it.
func (km *keyedMap[V]) lookup(key string) (V, bool) {
	e, ok := (*km.shard(key).m.Load())[key]
	if !ok {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (km *keyedMap[V]) insert(key string) V {
	sh := km.shard(key)
	sh.mu.Lock()
	if e, ok := (*sh.m.Load())[key]; ok {
		sh.mu.Unlock()
		return e.v
	}
	if now := km.now(); now-sh.lastSweep > km.idleTTL {
		km.sweepLocked(sh, now)
	}
	full := km.count.Load() >= int64(km.max)
	sh.mu.Unlock()
	if full {
		km.sweepAll()
		if km.count.Load() >= int64(km.max) {
			return km.overflow
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := *sh.m.Load()
	if e, ok := old[key]; ok {
		return e.v
	}
	next := make(map[string]*keyedEntry[V], len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	e := &keyedEntry[V]{v: km.make(key)}
	e.used.Store(true)
	next[key] = e
	sh.m.Store(&next)
	km.count.Add(1)
	return e.v
}

// sweepLocked evicts the shard's evictable entries unused since the
// previous sweep and marks the rest unused. sh.mu must be held.
func (km *keyedMap[V]) sweepLocked(sh *keyedShard[V], now int64) {
	sh.lastSweep = now
	old := *sh.m.Load()
	next := make(map[string]*keyedEntry[V], len(old))
	for k, e := range old {
		if !e.used.Swap(false) && km.evictable(e.v) {
			km.count.Add(-1)
			continue
		}
		next[k] = e
	}
	sh.m.Store(&next)
}

func (km *keyedMap[V]) sweepAll() {
	now := km.now()
	for i := range km.shards {
		sh := &km.shards[i]
		sh.mu.Lock()
		km.sweepLocked(sh, now)
		sh.mu.Unlock()
	}
}

// len reports the number of entries, the overflow value excluded.
func (km *keyedMap[V]) len() int { return int(km.count.Load()) }

// each calls fn for every entry.
func (km *keyedMap[V]) each(fn func(key string, v V)) {
	for i := range km.shards {
		for k, e := range *km.shards[i].m.Load() {
			fn(k, e.v)
		}
	}
}
