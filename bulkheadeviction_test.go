package breakwater_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
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

// A bulkhead that refused a request, saw a waiter give up and granted a
// slot to another holds nothing once its slots are back: a full registry
// gives it up for a new key.
func TestBulkheadsEvictABulkheadThatHoldsNothing(t *testing.T) {
	for _, path := range []string{"refused", "gave up", "granted"} {
		t.Run(path, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := []bw.Option{bw.WithKeyLimits(1, time.Hour), bw.WithMaxWait(time.Second)}
				if path == "refused" {
					opts[1] = bw.WithMaxWait(0)
				}
				bs, err := bw.NewBulkheads(1, opts...)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				held, _ := bs.Acquire(ctx, "k")
				switch path {
				case "refused", "gave up": // at once, or after the longest wait
					if _, err := bs.Acquire(ctx, "k"); !errors.Is(err, bw.ErrConcurrencyLimit) {
						t.Fatalf("Acquire = %v, want a refusal", err)
					}
					held.Release()
				case "granted":
					done := make(chan bw.Slot)
					go func() { s, _ := bs.Acquire(ctx, "k"); done <- s }()
					synctest.Wait()
					held.Release()
					s := <-done
					s.Release()
				}
				s, err := bs.Acquire(ctx, "other")
				if err != nil {
					t.Fatal(err)
				}
				s.Release()
				if _, ok := bulkheadOf(bs, "k"); ok {
					t.Fatal("a bulkhead that holds nothing was kept as if a request still waited")
				}
			})
		})
	}
}
