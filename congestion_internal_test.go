package breakwater

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// window feeds g one window of answers taking d each, with flight
// attempts in flight meanwhile (see windowOf).
func (g *congestion) window(flight int64, d time.Duration) {
	g.windowOf(flight, answers(congestionWindow, d, 0)...)
}

// TestCongestionEngagesOnQueueing: latency four times the usual, two
// windows in a row with many attempts in flight, engages the limit; one
// such window does not, nor does a rise while few are in flight, which
// becomes the usual instead.
func TestCongestionEngagesOnQueueing(t *testing.T) {
	var g congestion
	g.window(10, 10*time.Millisecond)
	g.window(10, 10*time.Millisecond)
	if !g.admits() || g.limit.Load() != 0 {
		t.Fatalf("a steady latency engaged the limit: %d", g.limit.Load())
	}
	g.window(60, 50*time.Millisecond)
	if g.limit.Load() != 0 {
		t.Fatalf("one slow window engaged the limit: %d", g.limit.Load())
	}
	g.window(60, 10*time.Millisecond) // chance: not queueing after all
	g.window(60, 50*time.Millisecond)
	if g.limit.Load() != 0 {
		t.Fatalf("two slow windows apart engaged the limit: %d", g.limit.Load())
	}
	g.window(60, 50*time.Millisecond)
	if lim := g.limit.Load(); lim != 48 { // 60 × 40/50
		t.Fatalf("limit %d after two slow windows with 60 in flight, want 48", lim)
	}
	if g.admits() {
		t.Error("60 in flight admitted over a limit of 48")
	}
	g.window(48, 200*time.Millisecond)
	if lim := g.limit.Load(); lim != 24 { // at most halved
		t.Fatalf("limit %d after a much slower window, want 24", lim)
	}
	g.window(24, 400*time.Millisecond)
	if lim := g.limit.Load(); lim != congestionMinLimit {
		t.Fatalf("limit %d, want the floor %d", lim, congestionMinLimit)
	}

	var slower congestion // an upstream that became slower, with few in flight
	slower.window(5, 10*time.Millisecond)
	slower.window(5, 100*time.Millisecond)
	slower.window(5, 100*time.Millisecond)
	slower.window(50, 100*time.Millisecond)
	slower.window(50, 100*time.Millisecond)
	if lim := slower.limit.Load(); lim != 0 {
		t.Errorf("a slower upstream at 5 in flight engaged the limit (%d): its latency is the new usual", lim)
	}
}

// TestCongestionEnds: windows without queueing grow the limit by its
// square root, and one that uses under half of it ends it; a limit held
// for congestionRelearn windows takes the queue as the usual latency.
func TestCongestionEnds(t *testing.T) {
	var g congestion
	g.window(10, 10*time.Millisecond)
	g.window(100, 80*time.Millisecond)
	g.window(100, 80*time.Millisecond)
	if lim := g.limit.Load(); lim != 50 {
		t.Fatalf("limit %d, want 50", lim)
	}
	g.window(50, 10*time.Millisecond)
	if lim := g.limit.Load(); lim != 57 { // 50 + ⌊√50⌋
		t.Fatalf("limit %d after a window without queueing, want 57", lim)
	}
	g.window(27, 10*time.Millisecond)
	if lim := g.limit.Load(); lim != 0 {
		t.Fatalf("limit %d after a window using under half of it, want none", lim)
	}

	var held congestion
	held.window(10, 10*time.Millisecond)
	for range congestionRelearn + 1 {
		held.window(100, 80*time.Millisecond)
	}
	if held.limit.Load() == 0 {
		t.Fatal("the limit ended while the queue stayed")
	}
	held.window(100, 80*time.Millisecond)
	if lim := held.limit.Load(); lim != 0 {
		t.Errorf("limit %d after %d windows of it: the queue it did not shorten is the usual now", lim, congestionRelearn+2)
	}
}

// TestCongestionFloor: answers under a millisecond count as one, so that
// fast answers' noise is not queueing.
func TestCongestionFloor(t *testing.T) {
	var g congestion
	g.window(50, 10*time.Microsecond)
	g.window(50, 900*time.Microsecond)
	g.window(50, 900*time.Microsecond)
	if lim := g.limit.Load(); lim != 0 {
		t.Errorf("answers of 10 µs, then 900 µs engaged the limit (%d)", lim)
	}
}

// TestCongestionSnapshot: a Transport's snapshot lists each key whose
// congestion limit is engaged among its bulkheads, marked as such, and
// nothing once it ended or when switched off.
func TestCongestionSnapshot(t *testing.T) {
	for _, off := range []bool{false, true} {
		var opts []Option
		if off {
			opts = append(opts, WithoutCongestionLimit())
		}
		tr, err := NewTransport(opts...)
		if err != nil {
			t.Fatal(err)
		}
		g := &tr.keys.Get("http://busy.test").cong
		g.window(10, 10*time.Millisecond)
		g.window(100, 80*time.Millisecond)
		g.window(100, 80*time.Millisecond)
		got := tr.Snapshot().Bulkheads
		if off {
			if len(got) != 0 {
				t.Errorf("switched off, the snapshot lists %+v", got)
			}
			continue
		}
		want := BulkheadSnapshot{Key: "http://busy.test", Limit: 50, InFlight: 100, Saturated: true, Congestion: true}
		if len(got) != 1 || got[0] != want {
			t.Errorf("snapshot %+v, want [%+v]", got, want)
		}
		g.window(10, 10*time.Millisecond)
		if got := tr.Snapshot().Bulkheads; len(got) != 0 {
			t.Errorf("after the limit ended, the snapshot lists %+v", got)
		}
	}
}

// TestCongestionFailover: with failover, an endpoint whose congestion
// limit is full is passed over for another; with every endpoint full, the
// call is refused with ErrConcurrencyLimit.
func TestCongestionFailover(t *testing.T) {
	var mu sync.Mutex
	hosts := map[string]int{}
	base := RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		hosts[req.URL.Host]++
		mu.Unlock()
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	tr, err := NewTransport(WithBase(base), WithFailover(Failover{Endpoints: []string{"http://a:1", "http://b:2"}}))
	if err != nil {
		t.Fatal(err)
	}
	congest := func(key string) {
		g := &tr.keys.Get(key).cong
		g.window(10, 10*time.Millisecond)
		g.window(100, 80*time.Millisecond)
		g.window(100, 80*time.Millisecond)
		if g.admits() {
			t.Fatalf("%s admits after the windows", key)
		}
	}
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, "http://service.test/x", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	congest("http://a:1")
	for range 10 {
		if err := get(); err != nil {
			t.Fatalf("a call with b free: %v", err)
		}
	}
	if hosts["a:1"] != 0 || hosts["b:2"] != 10 {
		t.Errorf("requests per endpoint %v, want all 10 on b", hosts)
	}
	congest("http://b:2")
	if err := get(); !errors.Is(err, ErrConcurrencyLimit) {
		t.Errorf("every endpoint congested: %v, want ErrConcurrencyLimit", err)
	}
}

// TestCongestionLearnsFromDeadlines: attempts that run into their
// caller's deadline, with no answer, teach the limit as answers that slow
// would: a hang under many callers engages it, and the calls past it are
// refused at once.
func TestCongestionLearnsFromDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hang atomic.Bool
		base := RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if hang.Load() {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			time.Sleep(10 * time.Millisecond)
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
		})
		tr, err := NewTransport(WithBase(base))
		if err != nil {
			t.Fatal(err)
		}
		call := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://hung.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		for range 2 * congestionWindow { // the usual latency
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}
		hang.Store(true)
		var refused atomic.Int32
		var wg sync.WaitGroup
		wave := func(n int) {
			for range n {
				wg.Go(func() {
					if errors.Is(call(), ErrConcurrencyLimit) {
						refused.Add(1)
					}
				})
			}
		}
		wave(70) // 70 deadlines: two windows of them
		time.Sleep(400 * time.Millisecond)
		wave(30)
		wg.Wait()
		if refused.Load() == 0 {
			t.Error("a hang under 70 callers did not engage the limit: no call of the next 30 was refused")
		}
	})
}

// windowOf feeds g one window of the answers ds (congestionWindow of
// them), with flight attempts in flight meanwhile (flight + 1 at its peak:
// each answer's attempt is sent first).
func (g *congestion) windowOf(flight int64, ds ...time.Duration) {
	if len(ds) != congestionWindow {
		panic(len(ds))
	}
	g.state.Store(g.state.Load()&^(1<<32-1) | uint64(flight))
	g.peak.Store(flight)
	for _, d := range ds {
		g.send()
		g.answered(d, true)
	}
	if got := flightOf(g.state.Load()); got != flight {
		panic(got)
	}
}

// answers returns n answers of a and congestionWindow-n of b.
func answers(n int, a, b time.Duration) []time.Duration {
	ds := make([]time.Duration, congestionWindow)
	for i := range ds {
		ds[i] = b
		if i < n {
			ds[i] = a
		}
	}
	return ds
}

// TestCongestionNeedsBothQuantiles: queueing is the low quantile and the
// median both over four times their usual values; either alone, or either
// at exactly four times, is not.
func TestCongestionNeedsBothQuantiles(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name          string
		usual, window []time.Duration
	}{
		{"median alone, ten times", answers(32, 10*ms, 0), answers(16, 10*ms, 100*ms)},
		{"low quantile alone, fifteen times", answers(8, 2*ms, 20*ms), answers(32, 30*ms, 0)},
		{"low quantile at four times", answers(32, 10*ms, 0), answers(8, 40*ms, 50*ms)},
		{"median at four times", answers(8, 2*ms, 10*ms), answers(32, 40*ms, 0)},
	} {
		var g congestion
		g.windowOf(50, tc.usual...)
		g.windowOf(50, tc.window...)
		g.windowOf(50, tc.window...)
		if lim := g.limit.Load(); lim != 0 {
			t.Errorf("%s: limit %d, want none", tc.name, lim)
		}
	}
}

// TestCongestionBoundaries: a flight equal to the limit is refused, one
// under it admitted; a peak of exactly congestionMinLimit in flight is
// enough to engage; a load of exactly half the limit keeps it.
func TestCongestionBoundaries(t *testing.T) {
	var g congestion
	g.window(10, 10*time.Millisecond)
	g.window(congestionMinLimit-1, 50*time.Millisecond) // a peak of congestionMinLimit
	g.window(congestionMinLimit-1, 50*time.Millisecond)
	lim := g.limit.Load()
	if lim != congestionMinLimit {
		t.Fatalf("limit %d after a peak of %d, want %d", lim, congestionMinLimit, congestionMinLimit)
	}
	g.state.Store(uint64(lim - 1))
	if !g.admits() {
		t.Error("one under the limit in flight: refused")
	}
	g.state.Store(uint64(lim))
	if g.admits() {
		t.Error("the limit in flight: admitted")
	}

	var h congestion
	h.window(10, 10*time.Millisecond)
	h.window(100, 80*time.Millisecond)
	h.window(100, 80*time.Millisecond) // 50
	h.window(24, 10*time.Millisecond)  // a peak of 25: half of it
	if lim := h.limit.Load(); lim != 57 {
		t.Errorf("limit %d after a window using half of it, want 57 (grown)", lim)
	}
}

// TestCongestionRelearnCountsEveryWindow: windows with and without
// queueing both count toward congestionRelearn while the limit holds.
func TestCongestionRelearnCountsEveryWindow(t *testing.T) {
	var g congestion
	g.window(10, 10*time.Millisecond)
	g.window(100, 80*time.Millisecond)
	g.window(100, 80*time.Millisecond) // engaged
	for i := range congestionRelearn + 2 {
		if g.limit.Load() == 0 {
			if i < congestionRelearn-1 {
				t.Fatalf("the limit ended after %d windows", i)
			}
			return
		}
		if i%2 == 0 {
			g.window(100, 80*time.Millisecond)
		} else {
			g.window(100, 10*time.Millisecond)
		}
	}
	t.Errorf("the limit still holds after %d windows, half of them queued", congestionRelearn+2)
}

// TestCongestionLearn: a window up to congestionLearn times the usual
// value moves it a congestionLong-th of the way; a slower one does not.
func TestCongestionLearn(t *testing.T) {
	v := 10.0
	learn(&v, 10.5)
	if v != 10.025 {
		t.Errorf("usual %v after 10.5, want 10.025", v)
	}
	learn(&v, 20)
	if v != 10.025 {
		t.Errorf("usual %v after a window twice as slow, want it unchanged", v)
	}
	learn(&v, 2.025)
	if v != 9.625 {
		t.Errorf("usual %v after a faster window, want 9.625", v)
	}
}
