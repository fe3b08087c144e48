package keyed

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item is what the tests keep in a Map: its weight is set by the test.
type item struct {
	key    string
	weight atomic.Uint32 // a Keep
}

func newItemMap(max int, ttl time.Duration) *Map[*item] {
	return New(max, ttl, func(k string) *item { return &item{key: k} },
		func(it *item, _ time.Time) Keep { return Keep(it.weight.Load()) })
}

// check verifies the map's invariants: every live entry is in both the map
// and the ring, once; the count matches; no key has two live entries.
func (km *Map[V]) check(t testing.TB) {
	t.Helper()
	km.mu.Lock()
	defer km.mu.Unlock()
	inRing := 0
	for i, e := range km.ring {
		if e == nil {
			continue
		}
		inRing++
		if e.word.Load()&entryDead != 0 {
			t.Fatalf("slot %d holds a dead entry", i)
		}
		if got, ok := km.m.Load(e.key); !ok || got.(*Entry[V]) != e {
			t.Fatalf("slot %d (%q) is not the map's entry for its key", i, e.key)
		}
	}
	inMap := 0
	km.m.Range(func(k, v any) bool {
		inMap++
		if v.(*Entry[V]).word.Load()&entryDead != 0 {
			t.Fatalf("the map holds a dead entry for %q", k)
		}
		return true
	})
	if ht := km.hot.Load(); ht != nil {
		for i := range ht.slots {
			e := ht.slots[i].Load()
			if e == nil {
				continue
			}
			if e.word.Load()&entryDead != 0 {
				t.Fatalf("hot slot %d holds a dead entry (%q)", i, e.key)
			}
			if got, ok := km.m.Load(e.key); !ok || got.(*Entry[V]) != e {
				t.Fatalf("hot slot %d (%q) is not the map's entry for its key", i, e.key)
			}
			if p := km.hotPair(ht, e.key); i != p && i != p+1 {
				t.Fatalf("hot slot %d holds %q, whose slot is another", i, e.key)
			}
		}
	}
	if e := km.first.Load(); e != nil {
		if e.word.Load()&entryDead != 0 {
			t.Fatalf("first holds a dead entry (%q)", e.key)
		}
		if got, ok := km.m.Load(e.key); !ok || got.(*Entry[V]) != e {
			t.Fatalf("first (%q) is not the map's entry for its key", e.key)
		}
	}
	if n := int(km.count.Load()); n != inRing || n != inMap {
		t.Fatalf("count %d, %d entries in the ring, %d in the map", n, inRing, inMap)
	}
	if inMap > km.hard {
		t.Fatalf("%d entries, over the hard cap %d", inMap, km.hard)
	}
}

// A full map makes room for a new key at once: every new key gets a value
// of its own and the map never holds more than its cap.
func TestKeyedMapMakesRoomAtCap(t *testing.T) {
	km := newItemMap(100, time.Hour)
	for i := range 10_000 {
		k := strconv.Itoa(i)
		if it := km.Get(k); it.key != k {
			t.Fatalf("key %q got the value of %q", k, it.key)
		}
		if _, ok := km.Lookup(k); !ok {
			t.Fatalf("key %q is not kept right after its insertion", k)
		}
		if n := km.Len(); n > 100 {
			t.Fatalf("%d entries, cap 100", n)
		}
	}
	km.check(t)
}

// Values that must not be lost (Hard) and entries pinned by a caller
// are never evicted; while every entry is such the map grows up to twice
// its cap, and past that new keys get transient values it does not keep.
func TestKeyedMapNeverEvictsHardOrPinned(t *testing.T) {
	km := newItemMap(10, time.Hour)
	var pins []*Entry[*item]
	for i := range 10 {
		if i%2 == 0 {
			km.Get("hard" + strconv.Itoa(i)).weight.Store(uint32(Hard))
		} else {
			pins = append(pins, km.Acquire("pinned"+strconv.Itoa(i)))
		}
	}
	// A new key evicts nothing it may not: it takes the slot of a new key
	// that holds nothing, or grows the map.
	for i := range 10 {
		if it := km.Get("new" + strconv.Itoa(i)); it.key != "new"+strconv.Itoa(i) {
			t.Fatal("shared value")
		}
	}
	if n := km.Len(); n < 11 || n > 20 {
		t.Fatalf("%d entries, want between 11 and 20", n)
	}
	for i := range 20 {
		km.Get("newer" + strconv.Itoa(i)).weight.Store(uint32(Hard))
	}
	if n := km.Len(); n != 20 {
		t.Fatalf("%d entries, want the map grown to 20", n)
	}
	e := km.Acquire("transient")
	if !e.transient || e.Value.key != "transient" {
		t.Fatalf("past the hard cap: transient %v, key %q", e.transient, e.Value.key)
	}
	e.Release()
	if _, ok := km.Lookup("transient"); ok || km.Len() != 20 {
		t.Fatalf("a transient value was kept (%d entries)", km.Len())
	}
	for i := range 10 {
		k := "hard" + strconv.Itoa(i)
		if i%2 == 1 {
			k = "pinned" + strconv.Itoa(i)
		}
		if _, ok := km.Lookup(k); !ok {
			t.Fatalf("%s was evicted", k)
		}
	}
	for _, p := range pins {
		p.Release()
	}
	km.check(t)
}

// With a rank, a map at its hard cap full of Hard values gives a new key
// the place of the unpinned entry of lowest rank instead of a transient
// value; pinned entries are never displaced, and only when every entry is
// pinned is the new value transient.
func TestKeyedMapDisplacesLowestRank(t *testing.T) {
	type ranked struct {
		key  string
		rank int64
	}
	km := New(2, time.Hour, func(k string) *ranked { return &ranked{key: k} },
		func(*ranked, time.Time) Keep { return Hard })
	km.Displace(func(v *ranked, _ time.Time) int64 { return v.rank })
	for i, r := range []int64{30, 10, 40, 20} {
		km.Get("k" + strconv.Itoa(i)).rank = r
	}
	pinned := km.Acquire("k1") // the lowest rank, but pinned
	e := km.Acquire("new")
	if e.transient {
		t.Fatal("a new key past the hard cap got a transient value")
	}
	e.Value.rank = 50
	e.Release()
	if _, ok := km.Lookup("k3"); ok {
		t.Fatal("k3, the lowest unpinned rank, was kept")
	}
	for _, k := range []string{"k0", "k1", "k2", "new"} {
		if _, ok := km.Lookup(k); !ok {
			t.Fatalf("%s was displaced", k)
		}
	}
	if km.Len() != 4 {
		t.Fatalf("%d entries, want the hard cap of 4", km.Len())
	}
	km.check(t)
	var pins []*Entry[*ranked]
	for _, k := range []string{"k0", "k2", "new"} {
		pins = append(pins, km.Acquire(k))
	}
	if e := km.Acquire("late"); !e.transient {
		t.Fatal("with every entry pinned, a new key displaced one")
	}
	for _, p := range append(pins, pinned) {
		p.Release()
	}
	km.check(t)
}

// An entry holding state worth keeping (Soft) outlives a churn of
// entries that hold none, even when it is not used for a long time.
func TestKeyedMapPrefersLosslessVictims(t *testing.T) {
	km := newItemMap(100, time.Hour)
	km.Get("counting").weight.Store(uint32(Soft))
	for i := range 100_000 {
		km.Get(strconv.Itoa(i))
	}
	if _, ok := km.Lookup("counting"); !ok {
		t.Fatal("the entry with state was evicted while entries without any were there")
	}
	// With nothing but state around, the oldest goes.
	for i := range 100 {
		km.Get("s" + strconv.Itoa(i)).weight.Store(uint32(Soft))
	}
	if n := km.Len(); n > 100 {
		t.Fatalf("%d entries, cap 100", n)
	}
	km.check(t)
}

// Entries unused for the idle TTL are evicted (after TTL to 2·TTL), unless
// they must not be lost; entries used within it are kept.
func TestKeyedMapIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		km := newItemMap(1000, time.Minute)
		km.Get("idle")
		km.Get("soft-idle").weight.Store(uint32(Soft))
		km.Get("hard-idle").weight.Store(uint32(Hard))
		km.Get("busy")
		acquired := km.Acquire("busy-acquired")
		acquired.Release()
		for range 5 {
			time.Sleep(30 * time.Second)
			km.Get("busy")
			km.Acquire("busy-acquired").Release()   // a use too
			km.Get("trigger" + time.Now().String()) // insertions run the sweep
		}
		for k, want := range map[string]bool{"idle": false, "soft-idle": false, "hard-idle": true, "busy": true} {
			if _, ok := km.Lookup(k); ok != want {
				t.Errorf("%s kept: %v, want %v", k, ok, want)
			}
		}
		if v, ok := km.Lookup("busy-acquired"); !ok || v != acquired.Value {
			t.Error("an entry acquired every 30 s was evicted as idle")
		}
		km.check(t)

		// Within the TTL nothing idle goes.
		km.Get("recent")
		time.Sleep(59 * time.Second)
		km.Get("trigger")
		if _, ok := km.Lookup("recent"); !ok {
			t.Error("an entry idle for less than the TTL was evicted")
		}
	})
}

// The use/evict race: callers pin hot keys while a churn of new keys keeps
// the map evicting at its cap; a pinned entry is never evicted under its
// holder, and no key ever has two live entries.
func TestKeyedMapUseEvictRace(t *testing.T) {
	km := newItemMap(8, time.Nanosecond) // every insertion sweeps, and evicts at the cap
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				km.Get("churn" + strconv.Itoa(i%64))
			}
		}
	})
	rounds := 5_000
	if testing.Short() {
		rounds = 500
	}
	var users sync.WaitGroup
	var lost atomic.Int64
	for u := range 4 {
		users.Go(func() {
			k := "hot" + strconv.Itoa(u%2)
			for r := range rounds {
				e := km.Acquire(k)
				for i := range 3 * 8 { // the hand goes round the map several times
					km.Get("user" + strconv.Itoa(u) + "-" + strconv.Itoa(r%7) + "-" + strconv.Itoa(i))
				}
				if got, ok := km.m.Load(k); !e.transient && (!ok || got.(*Entry[*item]) != e || e.word.Load()&entryDead != 0) {
					lost.Add(1)
				}
				e.Release()
			}
		})
	}
	users.Wait()
	close(stop)
	churn.Wait()
	if n := lost.Load(); n > 0 {
		t.Fatalf("%d times a pinned entry was evicted under its holder", n)
	}
	km.check(t)
}

// FuzzKeyedMap runs sequences of operations on a small map and checks its
// invariants after each: the count matches the live entries, no key has
// two, the hard cap holds, and neither Hard nor pinned entries are ever
// evicted.
func FuzzKeyedMap(f *testing.F) {
	f.Add(uint8(2), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add(uint8(1), []byte{0x40, 0x41, 0x42, 0x80, 0x81, 0xc0, 0x03, 0x04})
	f.Add(uint8(3), []byte{0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a})
	f.Fuzz(func(t *testing.T, max uint8, ops []byte) {
		ops = ops[:min(len(ops), 512)] // long sequences add time, not states
		synctest.Test(t, func(t *testing.T) {
			km := newItemMap(1+int(max%6), time.Minute)
			var pinned []*Entry[*item]
			hard := map[string]bool{}
			for _, op := range ops {
				k := strconv.Itoa(int(op & 15))
				switch op >> 6 {
				case 0:
					km.Get(k)
				case 1:
					if e := km.Acquire(k); !e.transient {
						pinned = append(pinned, e)
					} else {
						e.Release()
					}
				case 2:
					if len(pinned) > 0 {
						pinned[0].Release()
						pinned = pinned[1:]
					} else {
						time.Sleep(time.Duration(op&63) * time.Second)
					}
				case 3:
					if it, ok := km.Lookup(k); ok {
						w := Keep(op>>4&3) % 3
						it.weight.Store(uint32(w))
						hard[k] = w == Hard
					}
				}
				km.check(t)
				for k, h := range hard {
					if _, ok := km.Lookup(k); h && !ok {
						t.Fatalf("Hard entry %q was evicted", k)
					}
				}
				for _, e := range pinned {
					if e.word.Load()&entryDead != 0 {
						t.Fatalf("pinned entry %q was evicted", e.key)
					}
				}
			}
		})
	})
}

// Once the values that could not be evicted can be again, a full map makes
// room for new keys again: it grows only for a short while after a scan
// found nothing to evict, and every new key keeps its value.
func TestKeyedMapMakesRoomAgainAfterPressure(t *testing.T) {
	km := newItemMap(16, time.Hour)
	var hard []*item
	for i := range 16 {
		it := km.Get("hard" + strconv.Itoa(i))
		it.weight.Store(uint32(Hard))
		hard = append(hard, it)
	}
	km.Get("over") // nothing to evict: the map grows
	if n := km.Len(); n != 17 {
		t.Fatalf("%d entries, want the map grown to 17", n)
	}
	for _, it := range hard {
		it.weight.Store(uint32(None))
	}
	for i := range 200 {
		k := "new" + strconv.Itoa(i)
		if e := km.Acquire(k); e.transient {
			t.Fatalf("new key %d got a transient value while entries could be evicted", i)
		} else {
			e.Release()
		}
		if _, ok := km.Lookup(k); !ok {
			t.Fatalf("new key %d is not kept", i)
		}
		if n := km.Len(); n > 16+16/8+1 {
			t.Fatalf("%d entries after new key %d: the map kept growing past 16 while it could evict", n, i)
		}
	}
	km.check(t)
}

// A pinned entry is never evicted, even once the hand and the idle sweep
// have both found it unused since they last passed: a pin is not a use.
func TestKeyedMapPinOutlivesHandAndSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		km := newItemMap(2, time.Minute)
		e := km.Acquire("pinned")
		defer e.Release()
		time.Sleep(time.Minute + time.Second)
		km.Get("a") // sweeps: the pinned entry has not been used since
		for i := range 4 {
			km.Get("b" + strconv.Itoa(i)) // at the cap: the hand goes round
		}
		if got, ok := km.Lookup("pinned"); !ok || got != e.Value || e.word.Load()&entryDead != 0 {
			t.Fatal("the pinned entry was evicted under its holder")
		}
		km.check(t)
	})
}

// With nothing but state worth keeping around, the entry unused for the
// longest goes first, as in least-recently-used order.
func TestKeyedMapEvictsTheOldestSoftEntry(t *testing.T) {
	km := newItemMap(3, time.Hour)
	for _, k := range []string{"a", "b", "c"} {
		km.Get(k).weight.Store(uint32(Soft))
	}
	km.Get("d")
	for k, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true} {
		if _, ok := km.Lookup(k); ok != want {
			t.Errorf("%s kept: %v, want %v", k, ok, want)
		}
	}
	km.check(t)
}

// Past the first Soft entry, the hand looks at softScan more candidates
// for a None one, and settles for the Soft one after that: an insertion at
// the cap costs a bounded scan, not a turn of the whole map.
func TestKeyedMapSoftScan(t *testing.T) {
	for _, c := range []struct {
		name      string
		softAfter int  // Soft entries between the first Soft one and a None one
		wantFirst bool // the first Soft entry is kept
	}{
		{"a None entry softScan candidates on", softScan, true},
		{"a None entry one candidate further", softScan + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			km := newItemMap(c.softAfter+2, time.Hour)
			km.Get("first").weight.Store(uint32(Soft))
			for i := range c.softAfter {
				km.Get("soft" + strconv.Itoa(i)).weight.Store(uint32(Soft))
			}
			km.Get("none")
			km.Get("new")
			_, first := km.Lookup("first")
			_, none := km.Lookup("none")
			if first != c.wantFirst || none == c.wantFirst {
				t.Errorf("kept: the first Soft entry %v, the None one %v; want %v, %v", first, none, c.wantFirst, !c.wantFirst)
			}
			km.check(t)
		})
	}
}

// When the Soft entry the hand settled on is used before it is evicted, the
// hand looks on for another victim, and still never takes a Hard one.
func TestKeyedMapSoftVictimUsedMeanwhile(t *testing.T) {
	var km *Map[*item]
	last := "s" + strconv.Itoa(softScan-1)
	km = New(softScan+2, time.Hour, func(k string) *item { return &item{key: k} },
		func(it *item, _ time.Time) Keep {
			if it.key == last {
				km.Get("first") // a caller uses it while the hand looks on
			}
			return Keep(it.weight.Load())
		})
	km.Get("first").weight.Store(uint32(Soft))
	km.Get("hard").weight.Store(uint32(Hard))
	for i := range softScan {
		km.Get("s" + strconv.Itoa(i)).weight.Store(uint32(Soft))
	}
	km.Get("new")
	for _, k := range []string{"first", "hard", "new"} {
		if _, ok := km.Lookup(k); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
	if n := km.Len(); n != softScan+2 {
		t.Errorf("%d entries, want %d", n, softScan+2)
	}
	km.check(t)
}

// The hot cache grows with the map, and a key found in it is the map's
// live entry.
func TestKeyedMapHotCacheGrows(t *testing.T) {
	km := newItemMap(10_000, time.Hour)
	km.seed = 1
	for i := range 1000 {
		km.Get(strconv.Itoa(i))
	}
	km.check(t)
	ht := km.hot.Load()
	if ht == nil || len(ht.slots) < 4*km.Len() {
		t.Fatalf("hot cache of %d slots for %d entries", len(ht.slots), km.Len())
	}
	hits := 0
	for i := range 1000 {
		k := strconv.Itoa(i)
		if _, e := km.cached(k); e != nil {
			hits++
			if got, _ := km.Lookup(k); got != e.Value {
				t.Fatalf("the cache's entry for %q is not the map's", k)
			}
		}
	}
	if hits < 900 {
		t.Errorf("only %d of 1000 keys in the hot cache", hits)
	}
}

// Keys that differ in a few bytes only, client addresses of one network,
// spread over the hot cache: nearly all of them are found there.
func TestKeyedMapHotCacheSpreadsSimilarKeys(t *testing.T) {
	for _, format := range []string{"192.0.2.%d", "10.%d.0.1", "2001:db8:0:%x::/64", "tenant-%d"} {
		km := newItemMap(10_000, time.Hour)
		km.seed = 1 // a chance spread is no flake: the figure is the same every run
		for i := range 256 {
			km.Get(fmt.Sprintf(format, i))
		}
		hits := 0
		for i := range 256 {
			if _, e := km.cached(fmt.Sprintf(format, i)); e != nil {
				hits++
			}
		}
		if hits < 240 {
			t.Errorf("%s: only %d of 256 keys in the hot cache", format, hits)
		}
	}
}

// killHot evicts key's entry and leaves it in its hot slot, as a reader
// storing it there while the eviction ran can; it returns the old value.
func killHot(t *testing.T, km *Map[*item], key string) *item {
	t.Helper()
	old := km.Get(key)
	km.mu.Lock()
	defer km.mu.Unlock()
	for i, e := range km.ring {
		if e != nil && e.key == key {
			if !km.evictLocked(i, e.word.Load()) {
				t.Fatal("could not evict")
			}
			km.free = append(km.free, int32(i))
			km.hot.Load().slots[km.hotPair(km.hot.Load(), key)].Store(e)
			return old
		}
	}
	t.Fatalf("%q not in the ring", key)
	return nil
}

// An evicted entry left in the hot cache is never handed out again: Get and
// Acquire make the key a new value.
func TestKeyedMapHotCacheSkipsDeadEntries(t *testing.T) {
	km := newItemMap(8, time.Hour)
	if old := killHot(t, km, "a"); km.Get("a") == old {
		t.Error("Get returned the evicted value")
	}
	old := killHot(t, km, "b")
	e := km.Acquire("b")
	if e.Value == old {
		t.Error("Acquire returned the evicted value")
	}
	e.Release()
	km.check(t)
}

// An entry that a reader remembers after its eviction cleared the slot is
// taken out again.
func TestKeyedMapHotCacheRememberAfterEviction(t *testing.T) {
	km := newItemMap(8, time.Hour)
	km.Get("a")
	ht := km.hot.Load()
	_, e := km.cached("a")
	km.mu.Lock()
	for i, x := range km.ring {
		if x == e && !km.evictLocked(i, e.word.Load()) {
			t.Fatal("could not evict")
		}
	}
	km.mu.Unlock()
	km.remember(ht, e)
	if _, e := km.cached("a"); e != nil {
		t.Error("the hot cache keeps an evicted entry")
	}
}

// NewEmbedded's values are set up by init for their key, in the entry's
// own allocation, and are the same value on every lookup; eviction and
// transient values work as New's.
func TestKeyedMapEmbedded(t *testing.T) {
	km := NewEmbedded(2, time.Hour, func(k string, it *item) { it.key = k },
		func(it *item, _ time.Time) Keep { return Keep(it.weight.Load()) })
	a := km.Get("a")
	if a.key != "a" || km.Get("a") != a {
		t.Fatalf("a's value is %q, then %p, not %p", a.key, km.Get("a"), a)
	}
	e := km.Acquire("a")
	defer e.Release()
	if start, v := uintptr(unsafe.Pointer(e)), uintptr(unsafe.Pointer(a)); v < start || v >= start+unsafe.Sizeof(*e)+unsafe.Sizeof(*a) {
		t.Errorf("the value at %#x is not in its entry's allocation at %#x", v, start)
	}
	km.Get("b").weight.Store(uint32(Hard))
	km.Get("c").weight.Store(uint32(Hard)) // a was pinned: the map grows
	km.Get("d").weight.Store(uint32(Hard))
	if x := km.Acquire("x"); !x.transient || x.Value.key != "x" {
		t.Errorf("past the hard cap x got %+v", x)
	}
	km.check(t)
}
