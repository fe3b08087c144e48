package breakwater_test

import (
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
			bw.OnTransition(func(tr bw.Transition) {
				got = append(got, tr.From.String()+">"+tr.To.String()+":"+string(tr.Reason))
				_ = bs.State(tr.Key) // a listener may read the breaker
				if tr.Reason == bw.ReasonTrip {
					bs.Reset(tr.Key) // and change it: delivered after this one
				}
			}))
		call(bs, "k", fail)
		time.Sleep(10 * time.Second)
		call(bs, "k", ok)
		bs.Trip("k", time.Second)
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
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithBreakerLimits(100, time.Minute))
		bs.Melt("open-0", bw.ServerError) // open breakers are never evicted
		for i := range 10_000 {
			call(bs, string(rune('a'+i%26))+string(rune(i)), ok)
			if bs.Len() > 100 {
				t.Fatalf("%d breakers, cap 100", bs.Len())
			}
		}
		time.Sleep(3 * time.Minute)
		call(bs, "fresh", ok)
		if s := bs.State("open-0"); s == bw.StateClosed {
			// It lapsed to half-open on read; it must still exist.
			t.Fatal("open breaker evicted")
		}
		if _, ok := bs.Lookup("open-0"); !ok {
			t.Fatal("open breaker evicted")
		}
	})
}
