package breakwater

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
)

// When the attempt's context ends just as the body does, the expiry and
// Close race to release what the response holds: Close must not return
// before the release is done, or a caller that closed the body still finds
// the concurrency slot held.
func TestCloseWaitsForAnExpiryInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh, err := NewBulkheads(1)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := bh.Acquire(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		entered, unblock := make(chan struct{}), make(chan struct{})
		tb := &trackedBody{rc: io.NopCloser(strings.NewReader("")), ctx: context.Background(), release: releaser{slot: slot}}
		testHookRelease = func(b *trackedBody) {
			if b == tb {
				close(entered) // the expiry's release, caught half-way
				<-unblock
			}
		}
		defer func() { testHookRelease = nil }()
		go tb.expire()
		<-entered
		closed := make(chan struct{})
		go func() {
			tb.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatalf("Close returned while the release was under way (%d slot held)", inFlightOf(bh))
		default:
		}
		close(unblock)
		<-closed
		if n := inFlightOf(bh); n != 0 {
			t.Fatalf("%d slot held after Close", n)
		}
	})
}

// inFlightOf reports the slots held of the bulkhead of key "".
func inFlightOf(bs *Bulkheads) int {
	b, ok := bs.m.Lookup("")
	if !ok {
		return 0
	}
	return b.snapshot().InFlight
}
