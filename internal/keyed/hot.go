package keyed

import (
	"math/bits"
	"sync/atomic"
)

// hotTable is a Map's cache of entries: a power-of-two number of slots in
// pairs; a key may sit in either slot of its pair.
type hotTable[V any] struct {
	slots []atomic.Pointer[Entry[V]]
	mask  uint64 // selects the first slot of a pair
}

// Bounds of the hot cache's size, in slots: it starts at hotMin and
// doubles (under the map's mutex) while the map holds more than a quarter
// as many entries, up to hotMax (512 KiB of pointers).
const (
	hotMin = 64
	hotMax = 1 << 16
)

// hotPair is the first of key's two slots in t.
func (km *Map[V]) hotPair(t *hotTable[V], key string) int {
	return int(hashString(km.seed, key) & t.mask)
}

// cached returns key's entry from the hot cache, or nil; the caller checks
// that it is live.
func (km *Map[V]) cached(key string) (*hotTable[V], *Entry[V]) {
	t := km.hot.Load()
	if t == nil {
		return nil, nil
	}
	i := km.hotPair(t, key)
	if e := t.slots[i].Load(); e != nil && e.key == key {
		return t, e
	}
	if e := t.slots[i+1].Load(); e != nil && e.key == key {
		return t, e
	}
	return t, nil
}

// remember stores e, found live in m, in a slot of its pair in t: an empty
// one or one whose entry has died, else the first. An eviction meanwhile
// clears the slots only if it saw e there; so once stored, e is taken out
// again if it has died: either the eviction marked e dead after the store
// and clears the slot itself, or the load below sees it dead.
func (km *Map[V]) remember(t *hotTable[V], e *Entry[V]) {
	if t == nil {
		return
	}
	i := km.hotPair(t, e.key)
	if o := t.slots[i].Load(); o != nil && o.word.Load()&entryDead == 0 {
		if o := t.slots[i+1].Load(); o == nil || o.word.Load()&entryDead != 0 {
			i++
		}
	}
	t.slots[i].Store(e)
	if e.word.Load()&entryDead != 0 {
		t.slots[i].CompareAndSwap(e, nil)
	}
}

// forget clears the slots of t that hold e.
func (km *Map[V]) forget(t *hotTable[V], e *Entry[V]) {
	if t != nil {
		i := km.hotPair(t, e.key)
		t.slots[i].CompareAndSwap(e, nil)
		t.slots[i+1].CompareAndSwap(e, nil)
	}
}

// growHotLocked makes the hot cache big enough for the map's entries.
func (km *Map[V]) growHotLocked() {
	t := km.hot.Load()
	n := hotMin
	if t != nil {
		n = len(t.slots)
		if n >= hotMax || int(km.count.Load()) <= n/4 {
			return
		}
		n *= 2
	}
	nt := &hotTable[V]{slots: make([]atomic.Pointer[Entry[V]], n), mask: uint64(n-1) &^ 1}
	for _, e := range km.ring {
		if e != nil {
			km.remember(nt, e)
		}
	}
	km.hot.Store(nt)
}

// hashString hashes s for the hot cache: 8 bytes at a time, seeded. A
// poor spread (keys a client chooses to collide) costs misses, never a
// wrong answer.
func hashString(seed uint64, s string) uint64 {
	h := seed ^ uint64(len(s))*0x9e3779b97f4a7c15
	n := len(s)
	if n < 8 {
		var w uint64
		for i := 0; i < n; i++ {
			w = w<<8 | uint64(s[i])
		}
		return mix64(h, w)
	}
	for i := 0; i+8 < n; i += 8 {
		h = mix64(h, load64(s[i:]))
	}
	return mix64(h, load64(s[n-8:])) // the last 8 bytes, overlapping
}

// load64 reads s's first 8 bytes, little-endian, in one load.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// mix64 folds w into h: the high and low halves of a 128-bit product, so
// that every bit of w moves bits of both halves.
func mix64(h, w uint64) uint64 {
	hi, lo := bits.Mul64(h^w, 0x94d049bb133111eb)
	return hi ^ lo
}
