package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// eventLog collects the events a bus delivers.
type eventLog struct {
	mu     sync.Mutex
	events []bw.ClusterEvent
}

func (l *eventLog) add(e bw.ClusterEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) get() []bw.ClusterEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bw.ClusterEvent(nil), l.events...)
}

// TestBusCarriesMechanism: a pause and a trip of one key travel on one bus
// as what they are, in messages and in the shared state a late replica
// reads; a pause needs no quorum. An event without a mechanism is not
// sent, and a message or field of the earlier format, which names none,
// is ignored.
func TestBusCarriesMechanism(t *testing.T) {
	srv := redistest.New(t)
	client := newRedisClient(t, srv.Addr)
	a := newStore(t, client, redisstore.WithReplicaID("a"), redisstore.WithBudget(claimBudget))
	busA, err := a.Bus("cluster", redisstore.WithQuorum(2))
	if err != nil {
		t.Fatal(err)
	}
	b := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithReplicaID("b"), redisstore.WithBudget(claimBudget))
	busB, _ := b.Bus("cluster", redisstore.WithQuorum(2))
	var got eventLog
	busB.Subscribe(got.add)
	waitSubscribers(t, srv.Addr, "breakwater:bus:cluster", 1)

	// The earlier format: a message and a field that name no mechanism.
	ctx := context.Background()
	if err := client.Publish(ctx, "breakwater:bus:cluster", "old\n1\n5000\napi").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, "breakwater:bus:{cluster}", "api\x00old", time.Now().Add(time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	busA.Publish(bw.ClusterEvent{Key: "api", For: 5 * time.Second, Manual: true}) // no mechanism
	busA.Publish(bw.ClusterEvent{Key: "api", For: 5 * time.Second, Mechanism: bw.MechPause})
	busA.Publish(bw.ClusterEvent{Key: "api", For: 5 * time.Second, Manual: true, Mechanism: bw.MechBreaker})
	if !waitFor(t, time.Second, func() bool { return len(got.get()) >= 2 }) {
		t.Fatalf("events delivered: %+v, want a pause and a trip", got.get())
	}
	time.Sleep(50 * time.Millisecond) // anything more would have come by now
	events := got.get()
	if len(events) != 2 || events[0].Mechanism != bw.MechPause || events[0].Manual || events[0].For < 4*time.Second ||
		events[1].Mechanism != bw.MechBreaker || !events[1].Manual || events[0].Key != "api" || events[1].Key != "api" {
		t.Fatalf("events delivered: %+v, want the pause (without quorum) and the manual trip, in order", events)
	}
	if n := busA.Dropped(); n != 1 {
		t.Errorf("Dropped = %d, want 1 (the event without a mechanism)", n)
	}

	// A late replica reads both from the shared state, and not the old field.
	late := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithReplicaID("late"), redisstore.WithBudget(claimBudget))
	busLate, _ := late.Bus("cluster", redisstore.WithQuorum(2))
	var caught eventLog
	busLate.Subscribe(caught.add)
	if !waitFor(t, time.Second, func() bool { return len(caught.get()) >= 2 }) {
		t.Fatalf("a late replica read %+v, want a pause and a trip", caught.get())
	}
	seen := map[bw.Mechanism]bw.ClusterEvent{}
	for _, e := range caught.get() {
		seen[e.Mechanism] = e
	}
	if p, tr := seen[bw.MechPause], seen[bw.MechBreaker]; len(seen) != 2 || p.Key != "api" || p.For < 4*time.Second || tr.Key != "api" || !tr.Manual {
		t.Fatalf("a late replica read %+v", caught.get())
	}
}

// TestBusKeysWithNUL: keys that share a prefix up to a NUL byte stay
// apart in the shared state: resetting "x" leaves the trip of "x\x00y",
// and a replica that starts later finds "x\x00y" open and "x" closed.
func TestBusKeysWithNUL(t *testing.T) {
	srv := redistest.New(t)
	var regs []*bw.Breakers
	for range 2 {
		store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
		bus, err := store.Bus("trips", redisstore.WithReconcile(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := bw.NewBreakers(bw.WithClusterBus(bus))
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, bs)
	}
	waitSubscribers(t, srv.Addr, "breakwater:bus:trips", 2)
	const long, short = "x\x00y", "x"
	regs[0].Get(long).Trip(time.Minute)
	regs[0].Get(short).Trip(time.Minute)
	if !waitFor(t, time.Second, func() bool {
		return regs[1].Get(long).State() == bw.StateOpen && regs[1].Get(short).State() == bw.StateOpen
	}) {
		t.Fatalf("replica 1: %q %v, %q %v after replica 0's trips", long, regs[1].Get(long).State(), short, regs[1].Get(short).State())
	}
	regs[1].Get(short).Reset()
	if !waitFor(t, time.Second, func() bool { return regs[0].Get(short).State() == bw.StateClosed }) {
		t.Fatalf("replica 0's %q still %v after a reset on replica 1", short, regs[0].Get(short).State())
	}

	store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
	bus, _ := store.Bus("trips", redisstore.WithReconcile(50*time.Millisecond))
	late, _ := bw.NewBreakers(bw.WithClusterBus(bus))
	if !waitFor(t, time.Second, func() bool { return late.Get(long).State() == bw.StateOpen }) {
		t.Fatalf("a late replica finds %q %v, want open: resetting %q erased its trip", long, late.Get(long).State(), short)
	}
	time.Sleep(150 * time.Millisecond) // three reconcile rounds
	for i, bs := range append(regs, late) {
		if s := bs.Get(short).State(); s != bw.StateClosed {
			t.Errorf("registry %d: %q %v after its reset, want closed", i, short, s)
		}
		if s := bs.Get(long).State(); s != bw.StateOpen {
			t.Errorf("registry %d: %q %v, want open", i, long, s)
		}
	}
}
