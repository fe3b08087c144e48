package breakwater_test

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

func TestListenerOrderAndReentry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bs *bw.Breakers
		var got []string
		bs = newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithHalfOpen(1, 1),
			onTransition(func(tr bw.Transition) {
				got = append(got, tr.From.String()+">"+tr.To.String()+":"+string(tr.Reason))
				_ = bs.Get(tr.Key).State() // a listener may read the breaker
				if tr.Reason == bw.ReasonTrip {
					bs.Get(tr.Key).Reset() // and change it: delivered after this one
				}
			}))
		call(bs, "k", fail)
		time.Sleep(10 * time.Second)
		call(bs, "k", ok)
		bs.Get("k").Trip(time.Second)
		want := []string{"closed>open:failures", "open>half_open:open_elapsed", "half_open>closed:probes_succeeded",
			"closed>open:trip", "open>closed:reset"}
		if len(got) != len(want) {
			t.Fatalf("transitions %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("transitions %v, want %v", got, want)
			}
		}
	})
}

func TestRegistryIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithKeyLimits(100, time.Minute))
		bs.Get("open-0").RecordFailure(bw.ServerError) // open breakers are never evicted
		for i := range 10_000 {
			call(bs, string(rune('a'+i%26))+string(rune(i)), ok)
			if len(bs.Snapshot().Breakers) > 100 {
				t.Fatalf("%d breakers, cap 100", len(bs.Snapshot().Breakers))
			}
		}
		time.Sleep(3 * time.Minute)
		call(bs, "fresh", ok)
		if s := bs.Get("open-0").State(); s == bw.StateClosed {
			// It lapsed to half-open on read; it must still exist.
			t.Fatal("open breaker evicted")
		}
		if _, ok := bs.Lookup("open-0"); !ok {
			t.Fatal("open breaker evicted")
		}
	})
}

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
