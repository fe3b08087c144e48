package breakwater

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// The tests below stop a bulkhead between two steps of another goroutine
// (a release that freed a slot but has not handed it out yet, an acquirer
// that counted itself as waiting but has not looked at the slots yet), so
// the interleavings only a scheduler would otherwise reach run every time.

// newTestBulkhead returns a bulkhead of one slot that waits up to wait.
func newTestBulkhead(wait time.Duration) *bulkhead {
	c := newBulkheadConfig(1)
	c.maxWait = wait
	return c.newBulkhead("k")
}

// A slot freed while a request waits goes to that request, even when a
// newcomer arrives between the release and the hand-over.
func TestBulkheadNewcomerNeverTakesAWaitersSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBulkhead(time.Second)
		if _, err := b.acquire(context.Background(), time.Time{}); err != nil {
			t.Fatal(err)
		}
		waiter := make(chan error, 1)
		go func() {
			s, err := b.acquire(context.Background(), time.Time{})
			s.Release()
			waiter <- err
		}()
		synctest.Wait() // the waiter is queued

		// The first half of a release: the slot is free, the hand-over to
		// the queue has not run yet.
		b.state.Add(^uint64(0))
		newcomer := make(chan error, 1)
		go func() {
			s, err := b.acquire(context.Background(), time.Time{})
			s.Release()
			newcomer <- err
		}()
		synctest.Wait()
		select {
		case err := <-newcomer:
			t.Fatalf("a newcomer got an answer (%v) before the waiter ahead of it", err)
		default:
		}
		b.dispatch() // the second half of the release
		if err := <-waiter; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if err := <-newcomer; err != nil {
			t.Fatalf("newcomer after the waiter: %v", err)
		}
	})
}

// An acquirer that finds the queue empty takes a free slot at once, even
// when another acquirer has counted itself as waiting but not queued yet;
// and it leaves the count of waiters as it found it, so the bulkhead can
// be evicted once idle.
func TestBulkheadFreeSlotWithAnotherAcquirerCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestBulkhead(time.Second)
		b.nwait.Add(1) // another acquirer, between counting itself and locking
		start := time.Now()
		s, err := b.acquire(context.Background(), time.Time{})
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("a free slot with an empty queue: %v after %s", err, time.Since(start))
		}
		if n := b.nwait.Load(); n != 1 {
			t.Fatalf("%d acquirers counted as waiting, want the other one only", n)
		}
		b.nwait.Add(-1) // the other acquirer goes its way
		s.Release()
		if k := b.weigh(time.Now()); k != keyed.None {
			t.Fatalf("an idle bulkhead weighs %v, want nothing to keep", k)
		}
		if _, err := b.acquire(context.Background(), time.Time{}); err != nil {
			t.Fatalf("after the release: %v", err)
		}
		_, err = b.acquire(context.Background(), time.Time{})
		if !errors.Is(err, ErrConcurrencyLimit) {
			t.Fatalf("a second request on one slot: %v", err)
		}
	})
}
