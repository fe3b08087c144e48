package breakwater_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

func newPauseGates(t *testing.T, opts ...bw.PauseOption) *bw.PauseGates {
	t.Helper()
	g, err := bw.NewPauseGates(opts...)
	if err != nil {
		t.Fatalf("NewPauseGates: %v", err)
	}
	return g
}

func TestPauseGateExtendsOnlyAndClamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t, bw.WithMaxPause(time.Minute))
		if g.Remaining("a") != 0 {
			t.Fatal("paused before any hint")
		}
		start := time.Now()
		if until := g.Pause("a", 10*time.Second); !until.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("Pause returned %v", until)
		}
		g.Pause("a", 3*time.Second) // shorter: ignored
		g.Observe("a", bw.Outcome{Category: bw.Success, Status: 200})
		if r := g.Remaining("a"); r != 10*time.Second {
			t.Fatalf("remaining %s, want 10s: a shorter hint or a success shortened the pause", r)
		}
		g.Observe("a", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: 20 * time.Second, HasRetryAfter: true})
		if r := g.Remaining("a"); r != 20*time.Second {
			t.Fatalf("remaining %s, want 20s", r)
		}
		g.Observe("a", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: time.Hour, HasRetryAfter: true, RetryAfterTooLong: true})
		if r := g.Remaining("a"); r != time.Minute {
			t.Fatalf("remaining %s, want the 1m cap", r)
		}
		if g.Remaining("b") != 0 {
			t.Fatal("key b paused by key a's hint")
		}
		g.Observe("b", bw.Outcome{Category: bw.Throttled, Status: 429}) // no hint: no pause
		g.Pause("b", 0)
		g.Pause("b", -time.Second)
		if g.Remaining("b") != 0 {
			t.Fatal("paused without a positive hint")
		}
		s, ok := g.Snapshot("a")
		if !ok || !s.Paused || s.Remaining != time.Minute || !s.Until.Equal(start.Add(time.Minute)) {
			t.Fatalf("snapshot %+v %v", s, ok)
		}
		time.Sleep(time.Minute)
		if g.Remaining("a") != 0 {
			t.Fatal("still paused after the pause ended")
		}
		if s, _ := g.Snapshot("a"); s.Paused {
			t.Fatalf("snapshot after the end: %+v", s)
		}
		g.Pause("a", time.Second)
		g.Resume("a")
		if g.Remaining("a") != 0 {
			t.Fatal("Resume did not end the pause")
		}
	})
}

func TestPauseGateWaitOrFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t)
		g.Pause("a", 3*time.Second)
		start := time.Now()

		short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := g.Wait(short, "a")
		var pe *bw.PauseError
		if !errors.Is(err, bw.ErrPaused) || !errors.As(err, &pe) || pe.Key != "a" || pe.Remaining != 3*time.Second || pe.RetryAfter() != 3*time.Second {
			t.Fatalf("Wait with a short deadline = %v", err)
		}
		if time.Since(start) != 0 {
			t.Fatal("a call that cannot outlast the pause waited")
		}
		if err := g.Wait(context.Background(), "a"); err != nil || time.Since(start) != 3*time.Second {
			t.Fatalf("Wait = %v after %s, want nil after 3s", err, time.Since(start))
		}

		// A waiter sees an extension, and Resume wakes it.
		g.Pause("b", time.Second)
		done := make(chan error)
		go func() { done <- g.Wait(context.Background(), "b") }()
		synctest.Wait()
		g.Pause("b", 5*time.Second)
		time.Sleep(2 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("waiter returned %v before the extended pause ended", err)
		default:
		}
		g.Resume("b")
		if err := <-done; err != nil || time.Since(start) != 5*time.Second {
			t.Fatalf("after Resume: %v at %s", err, time.Since(start))
		}

		// Cancellation while waiting; WithPauseWait(0) never waits.
		g.Pause("c", time.Minute)
		ctx, cancelC := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancelC() }()
		if err := g.Wait(ctx, "c"); err != context.Canceled {
			t.Fatalf("cancelled Wait = %v", err)
		}
		nowait := newPauseGates(t, bw.WithPauseWait(0))
		nowait.Pause("c", time.Second)
		if err := nowait.Wait(context.Background(), "c"); !errors.Is(err, bw.ErrPaused) {
			t.Fatalf("WithPauseWait(0): %v", err)
		}
	})
}

func TestPauseGateValidationAndNil(t *testing.T) {
	for _, o := range []bw.PauseOption{bw.WithMaxPause(0), bw.WithPauseKeys(0, time.Minute), bw.WithPauseKeys(1, 0)} {
		if _, err := bw.NewPauseGates(o); err == nil {
			t.Error("invalid pause option accepted")
		}
	}
	var g *bw.PauseGates
	g.Pause("a", time.Second)
	g.Observe("a", bw.Outcome{Category: bw.Throttled, HasRetryAfter: true, RetryAfter: time.Second})
	g.ObserveHeaders("a", http.Header{"Ratelimit": {`"d";r=0;t=5`}})
	g.Resume("a")
	if g.Remaining("a") != 0 || g.Wait(context.Background(), "a") != nil || g.Snapshots() != nil || g.MaxPause() != 0 {
		t.Fatal("a nil PauseGates paused")
	}
}

// A pause that found the registry full holds no other key.
func TestPauseOverflowHoldsNoOtherKey(t *testing.T) {
	g, err := bw.NewPauseGates(bw.WithPauseKeys(1, time.Hour), bw.WithPauseWait(0))
	if err != nil {
		t.Fatal(err)
	}
	g.Pause("a", time.Minute)
	g.Pause("b", time.Minute) // the registry is full: "b" overflows
	if err := g.Wait(context.Background(), "never-throttled"); err != nil {
		t.Fatalf("a key nobody paused: %v", err)
	}
	if err := g.Wait(context.Background(), "a"); !errors.Is(err, bw.ErrPaused) {
		t.Fatalf("the paused key: %v, want ErrPaused", err)
	}
}
