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

// A half-open breaker's snapshot shows its ramp: the probes it lets through
// at once now, doubling with each success; none while closed.
func TestSnapshotProbesAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithHalfOpen(3, 4))
		b := bs.Get("k")
		if n := b.Snapshot().ProbesAllowed; n != 0 {
			t.Fatalf("closed: %d probes allowed, want 0", n)
		}
		b.Trip(time.Second)
		time.Sleep(time.Second)
		for i, want := range []int{3, 6, 12, 24} {
			if s := b.Snapshot(); s.ProbesAllowed != want || s.ProbeSuccesses != i {
				t.Fatalf("after %d successes: %d probes allowed (%d successes), want %d", i, s.ProbesAllowed, s.ProbeSuccesses, want)
			}
			p, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(bw.Outcome{Category: bw.Success, Status: 200})
		}
		if s := b.Snapshot(); s.State != bw.StateClosed || s.ProbesAllowed != 0 {
			t.Fatalf("after 4 successes: %s with %d probes allowed, want closed with 0", s.StateName, s.ProbesAllowed)
		}
	})
}
