package breakwater_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

func TestBackoffSequences(t *testing.T) {
	ms := time.Millisecond
	seq := func(b bw.Backoff, n int) []time.Duration {
		var out []time.Duration
		var prev time.Duration
		for i := 1; i <= n; i++ {
			prev = b.Delay(i, prev)
			out = append(out, prev)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  []time.Duration
		want []time.Duration
	}{
		{"linear", seq(bw.Linear(100*ms, 50*ms, time.Hour), 5), []time.Duration{100 * ms, 150 * ms, 200 * ms, 250 * ms, 300 * ms}},
		{"linear capped", seq(bw.Linear(100*ms, 100*ms, 250*ms), 3), []time.Duration{100 * ms, 200 * ms, 250 * ms}},
		{"constant", seq(bw.Constant(7*ms), 3), []time.Duration{7 * ms, 7 * ms, 7 * ms}},
	} {
		if len(tc.got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
		for i := range tc.want {
			if tc.got[i] != tc.want[i] {
				t.Fatalf("%s: %v, want %v", tc.name, tc.got, tc.want)
			}
		}
	}
	for range 1000 {
		for i, d := range seq(bw.ExponentialJitter(100*ms, time.Second), 6) {
			if hi := min(time.Second, 100*ms<<i); d < 0 || d > hi {
				t.Fatalf("full jitter wait %d = %s, want within [0, %s]", i+1, d, hi)
			}
		}
		for _, d := range seq(bw.DecorrelatedJitter(100*ms, 2*time.Second), 8) {
			if d < 100*ms || d > 2*time.Second {
				t.Fatalf("decorrelated jitter wait %s outside [100ms, 2s]", d)
			}
		}
	}
}

// A call whose context is canceled while it waits to retry returns the
// cancellation as it is, with its cause if it gave one, and not as a
// timeout.
func TestContextEndingDuringBackoff(t *testing.T) {
	errGoingAway := errors.New("shutting down")
	for _, c := range []struct {
		name string
		end  func(ctx context.Context) (context.Context, func())
		want error
	}{
		{name: "canceled", end: func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, want: context.Canceled},
		{name: "canceled with a cause", end: func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			time.AfterFunc(time.Second, func() { cancel(errGoingAway) })
			return ctx, func() { cancel(nil) }
		}, want: errGoingAway},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: 503})
				opts := []bw.Option{bw.WithBackoff(bw.Constant(time.Hour)), bw.WithCallTimeout(0), bw.WithAttemptTimeout(0)}
				rt := newTransport(t, u.Transport(), opts...)
				ctx, stop := c.end(context.Background())
				defer stop()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/", nil)
				start := time.Now()
				r := do(rt, req)
				if !errors.Is(r.err, c.want) || time.Since(start) != time.Second {
					t.Fatalf("%v after %s, want %v after 1s", r.err, time.Since(start), c.want)
				}
				if ne := net.Error(nil); errors.As(r.err, &ne) && ne.Timeout() {
					t.Fatalf("%v: reported as a timeout", r.err)
				}
			})
		})
	}
}

// Full jitter draws from the whole closed range [0, ceiling]: both ends
// come up, nothing beyond them does.
func TestExponentialJitterRangeIsClosed(t *testing.T) {
	for _, ceiling := range []time.Duration{time.Nanosecond, 3 * time.Nanosecond} {
		b := bw.ExponentialJitter(ceiling, ceiling)
		seen := map[time.Duration]bool{}
		for range 1000 {
			d := b.Delay(1, 0)
			if d < 0 || d > ceiling {
				t.Fatalf("ExponentialJitter(%s, %s) waited %s", ceiling, ceiling, d)
			}
			seen[d] = true
		}
		if !seen[0] || !seen[ceiling] {
			t.Fatalf("ExponentialJitter(%s, %s): 1000 draws gave %v, want both 0 and %s", ceiling, ceiling, seen, ceiling)
		}
	}
}

// Decorrelated jitter draws from [base, 3·prev] capped at the limit, and
// waits the limit when the limit is below the base.
func TestDecorrelatedJitterRange(t *testing.T) {
	const base = 100 * time.Millisecond
	b := bw.DecorrelatedJitter(base, time.Second)
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := b.Delay(2, 200*time.Millisecond)
		if d < base || d > 600*time.Millisecond {
			t.Fatalf("waited %s, want 100ms to 600ms", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("1000 draws gave %v: no jitter", seen)
	}
	if d := bw.DecorrelatedJitter(time.Second, 100*time.Millisecond).Delay(1, 0); d != 100*time.Millisecond {
		t.Fatalf("a limit below the base: waited %s, want the limit", d)
	}
}

// Decorrelated jitter reaches both ends of its range.
func TestDecorrelatedJitterRangeIsClosed(t *testing.T) {
	b := bw.DecorrelatedJitter(time.Nanosecond, time.Second) // [1ns, 3ns] on the first retry
	seen := map[time.Duration]bool{}
	for range 1000 {
		seen[b.Delay(1, 0)] = true
	}
	if len(seen) != 3 || !seen[1] || !seen[2] || !seen[3] {
		t.Fatalf("1000 draws gave %v, want 1ns, 2ns and 3ns", seen)
	}
}
