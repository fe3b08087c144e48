package breakwater_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Helpers that read one key of a registry from its Snapshot, and build
// middleware or fail the test.

// breakerOf returns key's breaker state, and whether the registry holds
// a breaker for key.
func breakerOf(bs *bw.Breakers, key string) (bw.BreakerSnapshot, bool) {
	b, ok := bs.Lookup(key)
	if !ok {
		return bw.BreakerSnapshot{}, false
	}
	return b.Snapshot(), true
}

// available reports whether every named key's breaker is closed.
func available(bs *bw.Breakers, keys ...string) bool {
	for _, k := range keys {
		if b, _ := bs.Lookup(k); b.State() != bw.StateClosed {
			return false
		}
	}
	return true
}

// blown reports whether any named key's breaker is open.
func blown(bs *bw.Breakers, keys ...string) bool {
	for _, k := range keys {
		if b, _ := bs.Lookup(k); b.State() == bw.StateOpen {
			return true
		}
	}
	return false
}

// bucketOf returns key's token bucket, and whether the registry holds one.
func bucketOf(rs *bw.RateLimiters, key string) (bw.RateLimitSnapshot, bool) {
	for _, b := range rs.Snapshot().RateLimiters {
		if b.Key == key {
			return b, true
		}
	}
	return bw.RateLimitSnapshot{}, false
}

// bulkheadOf returns key's bulkhead, and whether the registry holds one.
func bulkheadOf(bs *bw.Bulkheads, key string) (bw.BulkheadSnapshot, bool) {
	for _, b := range bs.Snapshot().Bulkheads {
		if b.Key == key {
			return b, true
		}
	}
	return bw.BulkheadSnapshot{}, false
}

// inFlight returns how many of key's slots are held.
func inFlight(bs *bw.Bulkheads, key string) int {
	b, _ := bulkheadOf(bs, key)
	return b.InFlight
}

// pauseOf returns key's pause gate, and whether the registry holds one.
func pauseOf(g *bw.PauseGates, key string) (bw.PauseSnapshot, bool) {
	for _, p := range g.Snapshot().Pauses {
		if p.Key == key {
			return p, true
		}
	}
	return bw.PauseSnapshot{}, false
}

// pauseLeft returns how long key stays held (0 when it is not).
func pauseLeft(g *bw.PauseGates, key string) time.Duration {
	p, _ := pauseOf(g, key)
	return p.Remaining
}

// mw returns a function that fails t on a middleware constructor's error.
func mw(t testing.TB) func(func(http.Handler) http.Handler, error) func(http.Handler) http.Handler {
	return func(m func(http.Handler) http.Handler, err error) func(http.Handler) http.Handler {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// onTransition is an observer option that calls fn with every breaker
// transition.
func onTransition(fn func(bw.Transition)) bw.Option {
	return bw.WithObserver(bw.ObserverFunc(func(_ context.Context, e bw.Event) {
		if e.Kind == bw.EventTransition && e.Transition != nil {
			fn(*e.Transition)
		}
	}))
}

// slotsHeld returns how many of key's slots a Transport's concurrency limit
// holds.
func slotsHeld(tr *bw.Transport, key string) int {
	for _, b := range tr.Snapshot().Bulkheads {
		if b.Key == key {
			return b.InFlight
		}
	}
	return 0
}

// bucketCount returns how many token buckets the registry holds.
func bucketCount(rs *bw.RateLimiters) int { return len(rs.Snapshot().RateLimiters) }

// jsonOf returns v as indented JSON, in a buffer with a String method.
func jsonOf(t testing.TB, v any) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return &b
}

// queued returns how many requests wait for a slot of key's bulkhead.
func queued(bs *bw.Bulkheads, key string) int {
	b, _ := bulkheadOf(bs, key)
	return b.Queued
}

// limitOf returns the current limit of key's bulkhead.
func limitOf(bs *bw.Bulkheads, key string) int {
	b, _ := bulkheadOf(bs, key)
	return b.Limit
}
