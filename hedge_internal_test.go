package breakwater

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHedgingResolve(t *testing.T) {
	tests := []struct {
		name string
		in   Hedging
		want hedging
	}{
		{"zero: adaptive at 100(1-0.8·budget)", Hedging{}, hedging{delay: time.Millisecond, q: 0.92, maxHedges: 1, budget: 0.1}},
		{"fixed", Hedging{Delay: 20 * time.Millisecond}, hedging{delay: 20 * time.Millisecond, maxHedges: 1, budget: 0.1}},
		{"percentile with floor", Hedging{Delay: 5 * time.Millisecond, Percentile: 95}, hedging{delay: 5 * time.Millisecond, q: 0.95, maxHedges: 1, budget: 0.1}},
		{"budget moves the percentile", Hedging{Budget: 0.05}, hedging{delay: time.Millisecond, q: 0.96, maxHedges: 1, budget: 0.05}},
		{"two hedges", Hedging{MaxHedges: 2, Delay: time.Millisecond}, hedging{delay: time.Millisecond, maxHedges: 2, budget: 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if d := got.q - tt.want.q; d > 1e-9 || d < -1e-9 {
				t.Fatalf("q = %v, want %v", got.q, tt.want.q)
			}
			got.q = tt.want.q
			if got != tt.want {
				t.Fatalf("resolve() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHedgingResolveReportsEveryError(t *testing.T) {
	_, err := Hedging{Delay: -1, Percentile: 100, MaxHedges: -1, Budget: 1.5}.resolve()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"delay", "percentile", "max hedges", "budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestHedgeable(t *testing.T) {
	withBody := func(method string, replayable bool) *http.Request {
		req, _ := http.NewRequest(method, "http://x/", bytes.NewReader([]byte("body")))
		if !replayable {
			req.GetBody = nil
			req.Body = io.NopCloser(strings.NewReader("body"))
		}
		return req
	}
	keyed := withBody(http.MethodPost, true)
	keyed.Header.Set("Idempotency-Key", "k1")
	get, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	tests := []struct {
		name   string
		req    *http.Request
		policy bool
		want   bool
	}{
		{"GET", get, false, true},
		{"GET with a replayable body", withBody(http.MethodGet, true), false, true},
		{"GET with a one-shot body", withBody(http.MethodGet, false), false, false},
		{"POST", withBody(http.MethodPost, true), false, false},
		{"POST with Idempotency-Key", keyed, false, true},
		{"POST declared idempotent", withBody(http.MethodPost, true), true, true},
		{"POST declared idempotent, one-shot body", withBody(http.MethodPost, false), true, false},
	}
	for _, tt := range tests {
		if got := replayable(tt.req, tt.policy); got != tt.want {
			t.Errorf("%s: replayable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestHedgeBudget: hedges never exceed the budget's share of the key's
// calls in the window, and the budget refills as the window slides.
func TestHedgeBudget(t *testing.T) {
	s := newHedgeState()
	var now int64
	granted := 0
	for range 1000 {
		now += int64(time.Millisecond)
		s.deposit(now)
		if s.withdraw(now, 0.1) {
			granted++
		}
	}
	if granted > 100 || granted < 95 {
		t.Fatalf("granted %d hedges for 1000 calls at a 10%% budget", granted)
	}
	if s.withdraw(now, 0.1) {
		t.Fatal("a hedge beyond the budget was granted")
	}
	// No calls at all: nothing to hedge against.
	if newHedgeState().withdraw(0, 1) {
		t.Fatal("an empty window granted a hedge")
	}
	// The window slides: 20 s later the old calls and hedges are gone.
	now += int64(2 * hedgeWindow)
	for range 10 {
		s.deposit(now)
	}
	if !s.withdraw(now, 0.1) || s.withdraw(now, 0.1) {
		t.Fatal("ten fresh calls should allow exactly one hedge at 10%")
	}
}

func TestHedgeDelay(t *testing.T) {
	fixed, _ := Hedging{Delay: 20 * time.Millisecond}.resolve()
	s := newHedgeState()
	if d, ok := s.delayFor(0, &fixed); !ok || d != 20*time.Millisecond {
		t.Fatalf("fixed delay = %s, %v", d, ok)
	}

	adaptive, _ := Hedging{Delay: 2 * time.Millisecond}.resolve() // fixed: Percentile zero
	if adaptive.q != 0 {
		t.Fatal("a Delay alone should be fixed")
	}
	adaptive, _ = Hedging{Percentile: 90, Delay: 2 * time.Millisecond}.resolve()
	var now int64
	for range hedgeMinSamples - 1 {
		s.observe(now, 5*time.Millisecond)
	}
	if _, ok := s.delayFor(now, &adaptive); ok {
		t.Fatal("an adaptive delay before enough samples")
	}
	s.observe(now, 5*time.Millisecond)
	d, ok := s.delayFor(now, &adaptive)
	if !ok || d < 4*time.Millisecond || d > 6*time.Millisecond {
		t.Fatalf("p90 of 5ms attempts = %s, %v: the 20th latency should give a delay at once", d, ok)
	}
	// Known, the delay is recomputed once per refresh interval.
	for range 100 {
		s.observe(now, 50*time.Millisecond)
	}
	if d2, _ := s.delayFor(now, &adaptive); d2 != d {
		t.Fatalf("the delay moved to %s before the refresh interval", d2)
	}
	now += int64(hedgeRefresh)
	if d2, _ := s.delayFor(now, &adaptive); d2 < 40*time.Millisecond {
		t.Fatalf("after the refresh interval the delay is %s, want about 50ms", d2)
	}
	// The floor holds under fast attempts.
	s2 := newHedgeState()
	for range 100 {
		s2.observe(0, 100*time.Microsecond)
	}
	if d, ok := s2.delayFor(0, &adaptive); !ok || d != 2*time.Millisecond {
		t.Fatalf("delay over 100µs attempts = %s, %v; want the 2ms floor", d, ok)
	}
}

func TestHedgeDelayDoesNotAllocate(t *testing.T) {
	h, _ := Hedging{}.resolve()
	s := newHedgeState()
	var now int64
	allocs := testing.AllocsPerRun(1000, func() {
		now += int64(time.Millisecond)
		s.deposit(now)
		s.observe(now, 5*time.Millisecond)
		s.delayFor(now, &h)
		s.withdraw(now, h.budget)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per call", allocs)
	}
}
