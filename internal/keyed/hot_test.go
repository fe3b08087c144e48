package keyed

import (
	"strconv"
	"testing"
	"time"
)

// The hot cache doubles once the map holds more than a quarter as many
// entries as it has slots, and never past hotMax slots (its memory bound).
func TestHotCacheSize(t *testing.T) {
	km := newItemMap(MaxKeys, time.Hour)
	slots := func() int { return len(km.hot.Load().slots) }
	for i := range hotMin / 4 {
		km.Get(strconv.Itoa(i))
	}
	if n := slots(); n != hotMin {
		t.Fatalf("%d slots for %d entries, want %d", n, km.Len(), hotMin)
	}
	km.Get("one more")
	if n := slots(); n != 2*hotMin {
		t.Fatalf("%d slots for %d entries, want %d", n, km.Len(), 2*hotMin)
	}
	for i := range hotMax/4 + 1 {
		km.Get(strconv.Itoa(i))
	}
	if n := slots(); n != hotMax {
		t.Fatalf("%d slots for %d entries, want at most %d", n, km.Len(), hotMax)
	}
}

// A key remembered in a pair whose first slot holds a live entry and whose
// second holds an evicted one takes the second: the live one stays cached.
func TestHotCacheKeepsTheLiveNeighbour(t *testing.T) {
	km := newItemMap(1000, time.Hour)
	km.Get("warm")
	ht := km.hot.Load()
	// Three keys of one pair, not warm's: the seed is random, so search
	// for them.
	pair := map[int][]string{}
	var keys []string
	for i := 0; keys == nil; i++ {
		k := "k" + strconv.Itoa(i)
		p := km.hotPair(ht, k)
		if p == km.hotPair(ht, "warm") {
			continue
		}
		if pair[p] = append(pair[p], k); len(pair[p]) == 3 {
			keys = pair[p]
		}
	}
	live, dead, next := keys[0], keys[1], keys[2]
	km.Get(live) // the first slot of the pair
	km.Get(dead) // the second
	_, d := km.cached(dead)
	p := km.hotPair(ht, dead)
	km.mu.Lock()
	for i, e := range km.ring {
		if e == d && !km.evictLocked(i, e.word.Load()) {
			t.Fatal("could not evict")
		}
	}
	km.mu.Unlock()
	ht.slots[p+1].Store(d) // left in the cache, dead
	if _, e := km.cached(live); e == nil || ht.slots[p].Load() != e {
		t.Fatalf("%q is not in the first slot of its pair", live)
	}
	km.Get(next)
	if _, e := km.cached(live); e == nil {
		t.Errorf("remembering %q displaced the live %q rather than the evicted %q", next, live, dead)
	}
	if _, e := km.cached(next); e == nil {
		t.Errorf("%q is not cached after its lookup", next)
	}
}
