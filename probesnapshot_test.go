package breakwater_test

import (
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A half-open breaker's snapshot counts the probes in flight: admitted, not
// yet released, and not past the probe timeout (after which their lease is
// taken back).
func TestSnapshotProbesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probeTimeout = 10 * time.Second
		bs := newBreakers(t, bw.WithHalfOpen(3, 5), bw.WithProbeTimeout(probeTimeout))
		b := bs.Get("k")
		b.Trip(time.Second)
		time.Sleep(time.Second)
		inFlight := func() int { return b.Snapshot().ProbesInFlight }
		if n := inFlight(); n != 0 {
			t.Fatalf("half-open before any probe: %d in flight", n)
		}
		p1, err1 := b.Allow()
		p2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if n := inFlight(); n != 2 {
			t.Fatalf("two probes admitted: %d in flight", n)
		}
		p1.Done(bw.Outcome{Category: bw.Canceled}) // neutral: only gives the lease back
		if n := inFlight(); n != 1 {
			t.Fatalf("one probe released: %d in flight", n)
		}
		time.Sleep(probeTimeout - time.Nanosecond)
		if n := inFlight(); n != 1 {
			t.Fatalf("1ns before its probe timeout: %d in flight", n)
		}
		time.Sleep(time.Nanosecond)
		if n := inFlight(); n != 0 {
			t.Fatalf("at its probe timeout the lease is taken back: %d in flight", n)
		}
		p2.Done(bw.Outcome{Category: bw.Canceled})
	})
}
