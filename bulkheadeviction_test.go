package breakwater_test

import (
	"context"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// A full registry of bulkheads makes room for a new key by evicting an idle
// bulkhead at its initial limit rather than one whose adaptive limit has
// moved: what the limit learned is kept.
func TestBulkheadsEvictAnUnlearnedLimitFirst(t *testing.T) {
	bs, err := bw.NewBulkheads(20, bw.WithAdaptiveLimit(bw.AIMD{Min: 2, Max: 40}), bw.WithKeyLimits(2, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 20 { // one window of drops: 20 × 0.9
		s, _ := bs.Acquire(ctx, "learned")
		s.Drop()
	}
	var s bw.Slot
	for range 2 { // used again, as the learned one was
		s, _ = bs.Acquire(ctx, "initial")
		s.Release()
	}
	if l, _ := bulkheadOf(bs, "learned"); l.Limit != 18 {
		t.Fatalf("limit %d after a window of drops, want 18", l.Limit)
	}
	s, _ = bs.Acquire(ctx, "new")
	s.Release()
	for k, want := range map[string]bool{"learned": true, "initial": false, "new": true} {
		if _, ok := bulkheadOf(bs, k); ok != want {
			t.Errorf("%s kept: %v, want %v", k, ok, want)
		}
	}
}
