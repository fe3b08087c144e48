package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

func newPauseGates(t *testing.T, opts ...bw.Option) *bw.PauseGates {
	t.Helper()
	g, err := bw.NewPauseGates(opts...)
	if err != nil {
		t.Fatalf("NewPauseGates: %v", err)
	}
	return g
}

func TestPauseGateExtendsOnlyAndClamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t, bw.WithMaxRetryAfter(time.Minute))
		if pauseLeft(g, "a") != 0 {
			t.Fatal("paused before any hint")
		}
		start := time.Now()
		if until := g.Pause("a", 10*time.Second); !until.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("Pause returned %v", until)
		}
		g.Pause("a", 3*time.Second) // shorter: ignored
		g.Observe("a", bw.Outcome{Category: bw.Success, Status: 200}, nil)
		if r := pauseLeft(g, "a"); r != 10*time.Second {
			t.Fatalf("remaining %s, want 10s: a shorter hint or a success shortened the pause", r)
		}
		g.Observe("a", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: 20 * time.Second, HasRetryAfter: true}, nil)
		if r := pauseLeft(g, "a"); r != 20*time.Second {
			t.Fatalf("remaining %s, want 20s", r)
		}
		g.Observe("a", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: time.Hour, HasRetryAfter: true, RetryAfterTooLong: true}, nil)
		if r := pauseLeft(g, "a"); r != time.Minute {
			t.Fatalf("remaining %s, want the 1m cap", r)
		}
		if pauseLeft(g, "b") != 0 {
			t.Fatal("key b paused by key a's hint")
		}
		g.Observe("b", bw.Outcome{Category: bw.Throttled, Status: 429}, nil) // no hint: no pause
		if !g.Pause("b", 0).IsZero() || !g.Pause("b", -time.Second).IsZero() {
			t.Fatal("Pause without a positive hint returned an end")
		}
		if pauseLeft(g, "b") != 0 {
			t.Fatal("paused without a positive hint")
		}
		s, ok := pauseOf(g, "a")
		if !ok || !s.Paused || s.Remaining != time.Minute || !s.Until.Equal(start.Add(time.Minute)) {
			t.Fatalf("snapshot %+v %v", s, ok)
		}
		time.Sleep(time.Minute)
		if pauseLeft(g, "a") != 0 {
			t.Fatal("still paused after the pause ended")
		}
		if s, _ := pauseOf(g, "a"); s.Paused {
			t.Fatalf("snapshot after the end: %+v", s)
		}
		g.Pause("a", time.Second)
		g.Resume("a")
		if pauseLeft(g, "a") != 0 {
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
		var pe *bw.Error
		if d, _ := bw.RetryAfter(err); !errors.Is(err, bw.ErrPaused) || !errors.As(err, &pe) || pe.Key != "a" || d != 3*time.Second {
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

		// Cancellation while waiting; WithMaxWait(0) never waits.
		g.Pause("c", time.Minute)
		ctx, cancelC := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancelC() }()
		if err := g.Wait(ctx, "c"); err != context.Canceled {
			t.Fatalf("cancelled Wait = %v", err)
		}
		nowait := newPauseGates(t, bw.WithMaxWait(0))
		nowait.Pause("c", time.Second)
		if err := nowait.Wait(context.Background(), "c"); !errors.Is(err, bw.ErrPaused) {
			t.Fatalf("WithMaxWait(0): %v", err)
		}
	})
}

func TestPauseGateValidationAndNil(t *testing.T) {
	for _, o := range []bw.Option{bw.WithMaxRetryAfter(0), bw.WithKeyLimits(0, time.Minute), bw.WithKeyLimits(1, 0)} {
		if _, err := bw.NewPauseGates(o); err == nil {
			t.Error("invalid pause option accepted")
		}
	}
	var g *bw.PauseGates
	g.Pause("a", time.Second)
	g.Observe("a", bw.Outcome{Category: bw.Throttled, HasRetryAfter: true, RetryAfter: time.Second}, http.Header{"Ratelimit": {`"d";r=0;t=5`}})
	g.Resume("a")
	if pauseLeft(g, "a") != 0 || g.Wait(context.Background(), "a") != nil || g.Snapshot().Pauses != nil {
		t.Fatal("a nil PauseGates paused")
	}
}

// A pause that found the registry full holds no other key.
func TestPauseRegistryFullHoldsNoOtherKey(t *testing.T) {
	g, err := bw.NewPauseGates(bw.WithKeyLimits(1, time.Hour), bw.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	g.Pause("a", time.Minute)
	g.Pause("b", time.Minute) // the registry is full of paused gates: it grows
	if err := g.Wait(context.Background(), "never-throttled"); err != nil {
		t.Fatalf("a key nobody paused: %v", err)
	}
	if err := g.Wait(context.Background(), "a"); !errors.Is(err, bw.ErrPaused) {
		t.Fatalf("the paused key: %v, want ErrPaused", err)
	}
}

// A 503 with a hint holds the key only when such answers are the majority
// of the attempts sent; then one probe goes every 175 ms, and the first
// probe answered otherwise ends the hold.
func TestPauseGateOverloadAdmission(t *testing.T) {
	overloaded := bw.Outcome{Category: bw.Throttled, Status: 503, RetryAfter: time.Second, HasRetryAfter: true}
	served := bw.Outcome{Category: bw.Success, Status: 200}
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t)
		// One attempt in four answered 503: never held.
		for i := range 40 {
			if err := g.Wait(context.Background(), "lb"); err != nil {
				t.Fatalf("attempt %d: %v", i, err)
			}
			if i%4 == 0 {
				g.Observe("lb", overloaded, nil)
			} else if i%4 == 1 {
				g.Observe("lb", served, nil)
			} // the other two are still in flight, or failed otherwise
			time.Sleep(10 * time.Millisecond)
		}
		// Every attempt answered 503: held after the second, one probe
		// every 175 ms.
		g.Observe("down", overloaded, nil)
		if pauseLeft(g, "down") != 0 {
			t.Fatalf("held after one 503 for %s", pauseLeft(g, "down"))
		}
		g.Observe("down", overloaded, nil)
		start := time.Now()
		var probes []time.Duration
		for time.Since(start) < time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			if g.Wait(ctx, "down") == nil {
				probes = append(probes, time.Since(start))
				g.Observe("down", overloaded, nil)
			}
			cancel()
			time.Sleep(10 * time.Millisecond)
		}
		for i, p := range probes {
			if p != time.Duration(i+1)*175*time.Millisecond {
				t.Fatalf("probes at %v, want one every 175ms", probes)
			}
		}
		// A probe answered otherwise ends the hold at once.
		time.Sleep(175 * time.Millisecond)
		if err := g.Wait(context.Background(), "down"); err != nil {
			t.Fatal(err)
		}
		g.Observe("down", served, nil)
		before := time.Now()
		if err := g.Wait(context.Background(), "down"); err != nil || time.Since(before) != 0 {
			t.Fatalf("after a probe was served: %v after %s", err, time.Since(before))
		}
		if pauseLeft(g, "down") != 0 {
			t.Fatalf("still held for %s", pauseLeft(g, "down"))
		}
	})
}

// When a pause ends, one probe goes first; the calls it held follow once
// it is answered, spread out in the order they arrived.
func TestPauseGateReleasesAProbeThenSpreads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t)
		g.Pause("a", time.Second)
		start := time.Now()
		gone := make(chan int, 10)
		for i := range 10 {
			go func() {
				if err := g.Wait(context.Background(), "a"); err == nil {
					gone <- i
				}
			}()
			time.Sleep(100 * time.Millisecond) // ten arrivals, one every 100 ms
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if n := len(gone); n != 1 || time.Since(start) != 1500*time.Millisecond {
			t.Fatalf("%d calls left the gate before the probe was answered", n)
		}
		<-gone
		g.Observe("a", bw.Outcome{Category: bw.Success, Status: 200}, nil)
		var order []int
		var at []time.Duration
		for range 9 {
			order = append(order, <-gone)
			at = append(at, time.Since(start))
		}
		for i := 1; i < len(order); i++ {
			if order[i] < order[i-1] || at[i]-at[i-1] < 100*time.Millisecond {
				t.Fatalf("released %v at %v: want arrival order, at least 100 ms apart", order, at)
			}
		}
	})
}

// With the pause registry full of paused keys, a 429 for a new key still
// pauses that key: keys that keep answering 429 never switch the gate off
// for the others.
func TestPauseRegistryFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := bw.NewPauseGates(bw.WithKeyLimits(4, time.Hour), bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			g.Pause(fmt.Sprint("noisy", i), time.Minute)
		}
		g.Pause("new", 30*time.Second)
		if pauseLeft(g, "new") <= 0 {
			t.Fatal("a 429 for a new key paused nothing while the registry was full")
		}
		if err := g.Wait(t.Context(), "new"); !errors.Is(err, bw.ErrPaused) {
			t.Fatalf("a call to the paused key: %v, want ErrPaused", err)
		}
		if err := g.Wait(t.Context(), "other"); err != nil {
			t.Fatalf("a key never paused: %v", err)
		}
		for i := range 4 {
			if pauseLeft(g, fmt.Sprint("noisy", i)) <= 0 {
				t.Fatalf("noisy%d lost its pause", i)
			}
		}
	})
}

// Past twice its key limit, with every gate paused, a 429 for a new key
// still pauses that key: it takes the place of the gate whose pause ends
// soonest, and every other pause stays.
func TestPauseRegistryPastItsHardCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := bw.NewPauseGates(bw.WithKeyLimits(4, time.Hour), bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		// noisy3 ends soonest; the others later, up to noisy7 for 8 minutes.
		for i := range 8 {
			d := time.Duration(i+1) * time.Minute
			if i == 3 {
				d = 10 * time.Second
			}
			g.Pause(fmt.Sprint("noisy", i), d)
		}
		g.Observe("new", bw.Outcome{Category: bw.Throttled, Status: http.StatusTooManyRequests, RetryAfter: 30 * time.Second, HasRetryAfter: true}, nil)
		if left := pauseLeft(g, "new"); left != 30*time.Second {
			t.Fatalf("a 429 for a new key past the hard cap paused it for %s, want 30s", left)
		}
		if err := g.Wait(t.Context(), "new"); !errors.Is(err, bw.ErrPaused) {
			t.Fatalf("a call to the paused key: %v, want ErrPaused", err)
		}
		if pauseLeft(g, "noisy3") != 0 {
			t.Fatal("the pause ending soonest was kept, another one displaced")
		}
		for i := range 8 {
			if i != 3 && pauseLeft(g, fmt.Sprint("noisy", i)) <= 0 {
				t.Fatalf("noisy%d lost its pause", i)
			}
		}
		if n := len(g.Snapshot().Pauses); n != 8 {
			t.Fatalf("%d gates, want the hard cap of 8", n)
		}
		// Every later new key displaces the soonest pause in turn: now
		// new's (30 s), then noisy0's (1 min).
		g.Pause("newer", time.Hour)
		g.Pause("newest", time.Hour)
		if pauseLeft(g, "newer") <= 0 || pauseLeft(g, "newest") <= 0 || pauseLeft(g, "new") != 0 || pauseLeft(g, "noisy0") != 0 || pauseLeft(g, "noisy1") <= 0 {
			t.Fatalf("newer %s, newest %s, new %s, noisy0 %s, noisy1 %s: want new's and noisy0's pauses displaced",
				pauseLeft(g, "newer"), pauseLeft(g, "newest"), pauseLeft(g, "new"), pauseLeft(g, "noisy0"), pauseLeft(g, "noisy1"))
		}
	})
}

// A gate whose pause and the probe lease after it have ended is as good
// as new: a full registry evicts it for a new key at that very instant,
// and keeps it until then.
func TestPauseRegistryEvictsAGateOnceItsProbeLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t, bw.WithKeyLimits(1, time.Hour))
		g.Pause("a", time.Second) // its probe may go until 1 s after the pause
		time.Sleep(2*time.Second - 1)
		g.Pause("b", time.Minute)
		if keys := pauseKeys(g); keys != "a b" {
			t.Fatalf("gates %q, want a b: a gate whose probe lease lasts was evicted", keys)
		}
		time.Sleep(time.Nanosecond)
		g.Pause("c", time.Minute)
		if keys := pauseKeys(g); keys != "b c" {
			t.Fatalf("gates %q, want b c: a gate with nothing left to hold was kept", keys)
		}
	})
}

// pauseKeys lists the keys of g's registry, sorted.
func pauseKeys(g *bw.PauseGates) string {
	var keys []string
	for _, p := range g.Snapshot().Pauses {
		keys = append(keys, p.Key)
	}
	slices.Sort(keys)
	return strings.Join(keys, " ")
}

// 503s answered with "Retry-After: 0" hold the key all the same: calls
// wait for the next probe, 175 ms on. A hold whose probes get no answer
// lapses a second after the last 503: calls go at once again, and the
// snapshot no longer shows the key paused.
func TestPauseGateOverloadHoldWithAZeroHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t)
		o := bw.Classify(&http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"0"}}}, nil)
		if o.Category != bw.Throttled || !o.HasRetryAfter || o.RetryAfter != 0 {
			t.Fatalf("Classify = %+v", o)
		}
		start := time.Now()
		g.Observe("down", o, nil)
		g.Observe("down", o, nil)
		time.Sleep(10 * time.Millisecond)
		if s, _ := pauseOf(g, "down"); !s.Paused {
			t.Fatalf("snapshot of the held key: %+v", s)
		}
		if err := g.Wait(context.Background(), "down"); err != nil || time.Since(start) != 175*time.Millisecond {
			t.Fatalf("Wait = %v after %s, want the probe at 175ms", err, time.Since(start))
		}
		// The probe never gets an answer (it failed without a response).
		time.Sleep(time.Second - 175*time.Millisecond - 1)
		if s, _ := pauseOf(g, "down"); !s.Paused {
			t.Fatalf("snapshot within a second of the 503: %+v", s)
		}
		time.Sleep(time.Nanosecond)
		if s, _ := pauseOf(g, "down"); s.Paused {
			t.Fatalf("snapshot a second after the last 503: %+v, want the lapsed hold not shown", s)
		}
		before := time.Now()
		if err := g.Wait(context.Background(), "down"); err != nil || time.Since(before) != 0 {
			t.Fatalf("Wait after the hold lapsed = %v after %s", err, time.Since(before))
		}
	})
}

// TestOne503DoesNotHoldTheHost: a single 503 with Retry-After delays only
// its own call's retry; the next call goes at once. The host is held only
// once such answers are the majority, at least 2 within a second: after a
// second 503 the next call waits for the probe, 175 ms after the hold
// began.
func TestOne503DoesNotHoldTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var overloaded atomic.Int32
		overloaded.Store(1)
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			if overloaded.Add(-1) >= 0 {
				return breakwatertest.Step{Status: 503, Header: http.Header{"Retry-After": {"10"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1))
		if r := get(tr); r.status != 503 {
			t.Fatalf("first call: %+v, want the 503", r)
		}
		time.Sleep(time.Millisecond)
		start := time.Now()
		if r := get(tr); r.status != 200 || time.Since(start) != 0 {
			t.Fatalf("the call after one 503: %+v after %s, want a 200 at once", r, time.Since(start))
		}
		// A second 503 within the second: now the majority (2 of 3).
		overloaded.Store(1)
		if r := get(tr); r.status != 503 {
			t.Fatalf("third call: %+v, want the 503", r)
		}
		start = time.Now()
		if r := get(tr); r.status != 200 || time.Since(start) != 175*time.Millisecond {
			t.Fatalf("the call after two 503s: %+v after %s, want a 200 after the 175ms probe wait", r, time.Since(start))
		}
	})
}

// TestPauseGateWaitBoundaries: a pause that ends exactly at the longest
// wait is waited for; one that ends exactly at the caller's deadline is
// refused at once, since the call could not be sent before it.
func TestPauseGateWaitBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newPauseGates(t, bw.WithMaxWait(time.Second))
		g.Pause("a", time.Second)
		start := time.Now()
		if err := g.Wait(context.Background(), "a"); err != nil || time.Since(start) != time.Second {
			t.Errorf("a pause as long as the longest wait: %v after %s, want nil after 1s", err, time.Since(start))
		}

		g.Pause("b", time.Second)
		start = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := g.Wait(ctx, "b"); !errors.Is(err, bw.ErrPaused) || time.Since(start) != 0 {
			t.Errorf("a pause ending at the deadline: %v after %s, want ErrPaused at once", err, time.Since(start))
		}
	})
}
