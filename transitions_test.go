package breakwater_test

import (
	"runtime"
	"testing"
	"time"
)

// A registry with no transition listener keeps nothing per transition: a
// breaker that opens and closes all day holds no more memory at night.
func TestTransitionsWithoutListenersAreNotKept(t *testing.T) {
	bs := newBreakers(t)
	b := bs.Get("k")
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range 100_000 {
		b.Trip(time.Hour)
		b.Reset()
	}
	// Keeping the 200 000 transitions would take well over 10 MB.
	grew := int64(heap()) - int64(before)
	runtime.KeepAlive(bs)
	if grew > 4<<20 {
		t.Fatalf("the heap grew by %d bytes over 200000 transitions", grew)
	}
}
