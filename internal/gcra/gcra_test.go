package gcra

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// at is a clock stopped at now.
func at(now int64) func() int64 { return func() int64 { return now } }

func TestGCRAParams(t *testing.T) {
	for _, tc := range []struct {
		limit    rate.Limit
		burst    int
		interval int64
	}{
		{10, 5, int64(100 * time.Millisecond)},
		{1, 1, int64(time.Second)},
		{3, 2, 333_333_334}, // rounded up: never faster than the limit
		{1e12, 4, 1},        // saturates at one token per nanosecond
		{1e-30, 2, maxGCRASpan / 2},
	} {
		p := NewParams(tc.limit, tc.burst)
		if p.Interval != tc.interval || p.Burst != int64(tc.burst) || p.Capacity != p.Interval*p.Burst {
			t.Errorf("NewParams(%v, %d) = %+v, want interval %d", tc.limit, tc.burst, p, tc.interval)
		}
	}
}

// TestGCRASequence walks one bucket of 10/s with a burst of 3 through the
// cases every caller relies on.
func TestGCRASequence(t *testing.T) {
	p := NewParams(10, 3)
	var c Cell
	ms := int64(time.Millisecond)
	step := func(now int64, wantOK bool, wantRemaining int64, wantRetry, wantReset time.Duration) {
		t.Helper()
		ok, delay, tat, _ := c.Take(p, at(now), 0)
		rem, retry, reset := p.Status(tat, now)
		if ok != wantOK || delay < 0 || rem != wantRemaining || retry != wantRetry || reset != wantReset {
			t.Fatalf("at %dms: ok=%v delay=%v remaining=%d retry=%v reset=%v, want %v %d %v %v",
				now/ms, ok, delay, rem, retry, reset, wantOK, wantRemaining, wantRetry, wantReset)
		}
		if !ok && retry <= 0 {
			t.Fatalf("a refusal must say when to come back")
		}
	}
	step(0, true, 2, 0, 100*time.Millisecond)
	step(0, true, 1, 0, 200*time.Millisecond)
	step(0, true, 0, 100*time.Millisecond, 300*time.Millisecond)
	step(0, false, 0, 100*time.Millisecond, 300*time.Millisecond)
	step(40*ms, false, 0, 60*time.Millisecond, 260*time.Millisecond)
	step(100*ms, true, 0, 100*time.Millisecond, 300*time.Millisecond)
	step(1000*ms, true, 2, 0, 100*time.Millisecond)
}

// TestGCRAMatchesTokenBucket drives the GCRA and x/time/rate's token
// bucket with the same random arrivals: they must admit the same requests.
func TestGCRAMatchesTokenBucket(t *testing.T) {
	for _, tc := range []struct {
		limit rate.Limit
		burst int
	}{{10, 1}, {10, 10}, {100, 5}, {1, 3}, {1000, 50}} {
		p := NewParams(tc.limit, tc.burst)
		var c Cell
		base := time.Unix(1_700_000_000, 0)
		tb := rate.NewLimiter(tc.limit, tc.burst)
		r := rand.New(rand.NewPCG(1, uint64(tc.burst)))
		now := int64(0)
		agree, admitted := 0, 0
		for i := range 20_000 {
			// Arrivals on a 1 µs grid, averaging twice the limit.
			now += int64(time.Microsecond) * r.Int64N(int64(float64(time.Second/time.Microsecond)/float64(tc.limit)))
			ok, _, tat, _ := c.Take(p, at(now), 0)
			want := tb.AllowN(base.Add(time.Duration(now)), 1)
			if ok == want {
				agree++
			}
			if ok {
				admitted++
			}
			if got, want := p.Tokens(tat, now), tb.TokensAt(base.Add(time.Duration(now))); got-want > 1e-6 || want-got > 1e-6 {
				t.Fatalf("%v/%d step %d: tokens %v, token bucket %v", tc.limit, tc.burst, i, got, want)
			}
		}
		if agree != 20_000 || admitted == 0 || admitted == 20_000 {
			t.Errorf("%v/%d: agreed on %d of 20000 decisions (%d admitted)", tc.limit, tc.burst, agree, admitted)
		}
	}
}

// TestGCRAPreemptedCallerNotRefused holds one caller up between its clock
// read and its decision (the injected clock stands for a preemption, or a
// slow store call before the local fallback) while other callers, far
// below the limit, move the TAT on for longer than the burst window. The
// held-up caller must be judged at the time it decides, and admitted.
func TestGCRAPreemptedCallerNotRefused(t *testing.T) {
	p := NewParams(1e6, 1000) // 1 µs per token, a 1 ms burst window
	var c Cell
	var wall int64
	others := func() {
		// 10 ms of other callers at a tenth of the limit.
		for range 1000 {
			wall += int64(10 * time.Microsecond)
			if ok, _, _, _ := c.Take(p, at(wall), 0); !ok {
				t.Fatalf("another caller refused at %v", time.Duration(wall))
			}
		}
	}
	held := true
	clock := func() int64 {
		now := wall
		if held { // read the time, then lose the CPU for 10 ms
			held = false
			others()
		}
		return now
	}
	ok, delay, tat, now := c.Take(p, clock, 0)
	if !ok {
		t.Fatalf("refused with a delay of %v after being held up for 10ms, at a tenth of the limit", time.Duration(delay))
	}
	if now != wall || tat != wall+2*p.Interval { // the last other caller's token, then this one's
		t.Fatalf("decided at %v with TAT %v, want at %v with TAT two intervals later", time.Duration(now), time.Duration(tat), time.Duration(wall))
	}
}

func TestGCRAWaitReserves(t *testing.T) {
	p := NewParams(10, 1)
	var c Cell
	if ok, delay, _, _ := c.Take(p, at(0), int64(time.Second)); !ok || delay != 0 {
		t.Fatalf("first: ok=%v delay=%v", ok, delay)
	}
	ok, delay, tat, _ := c.Take(p, at(0), int64(time.Second))
	if !ok || delay != int64(100*time.Millisecond) {
		t.Fatalf("second: ok=%v delay=%v, want a reservation 100ms ahead", ok, delay)
	}
	if rem, retry, _ := p.Status(tat, 0); rem != 0 || retry != 200*time.Millisecond {
		t.Fatalf("after a reservation: remaining %d, retry %v", rem, retry)
	}
	if ok, delay, _, _ := c.Take(p, at(0), int64(150*time.Millisecond)); ok || delay != int64(200*time.Millisecond) {
		t.Fatalf("third with 150ms to wait: ok=%v delay=%v, want refused with 200ms", ok, delay)
	}
	c.Cancel(p)
	if ok, delay, _, _ := c.Take(p, at(0), int64(150*time.Millisecond)); !ok || delay != int64(100*time.Millisecond) {
		t.Fatalf("after a cancel: ok=%v delay=%v", ok, delay)
	}
}

func TestGCRANextToken(t *testing.T) {
	p := NewParams(10, 3) // 100 ms per token
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		tat, now int64
		want     time.Duration
	}{
		{0, 0, 0},                                     // full
		{250 * ms, 0, 50 * time.Millisecond},          // 2.5 tokens used: the next whole one in 50 ms
		{200 * ms, 0, 100 * time.Millisecond},         // exactly 2 used
		{300 * ms, 0, 100 * time.Millisecond},         // empty: same as RetryAfter
		{500 * ms, 0, 300 * time.Millisecond},         // reserved beyond empty: RetryAfter
		{100 * ms, 100 * ms, 0},                       // refilled
		{1000 * ms, 800 * ms, 100 * time.Millisecond}, // 2 used
	} {
		got := p.NextToken(tc.tat, tc.now)
		rem, retry, reset := p.Status(tc.tat, tc.now)
		if got != tc.want {
			t.Errorf("nextToken(%d, %d) = %v, want %v", tc.tat, tc.now, got, tc.want)
		}
		if got > reset || rem == 0 && got != retry {
			t.Errorf("nextToken(%d, %d) = %v is past retry %v or reset %v", tc.tat, tc.now, got, retry, reset)
		}
	}
}

func TestGCRAShare(t *testing.T) {
	p := NewParams(90, 30)
	s := p.Share(3)
	if s.Interval != 3*p.Interval || s.Burst != 10 {
		t.Fatalf("share(3) of 90/s burst 30 = %+v", s)
	}
	if one := NewParams(2, 1).Share(5); one.Burst != 1 || one.Interval != int64(2500*time.Millisecond) {
		t.Fatalf("share(5) of 2/s burst 1 = %+v", one)
	}
	if same := p.Share(1); same != p {
		t.Fatalf("share(1) changed the policy")
	}
	// Each of n replicas gets exactly an n-th of the rate and of the
	// burst, down to the slowest policy there is.
	for _, tc := range []struct {
		limit rate.Limit
		burst int
		n     int
	}{
		{10, 10, 2},    // 5/s with a burst of 5 each
		{1, 100, 4},    // a burst that leaves each replica 25
		{1e-30, 2, 2},  // saturated: the share still has twice the interval
		{1e-30, 64, 8}, // saturated, a burst of 8 each
	} {
		p := NewParams(tc.limit, tc.burst)
		s := p.Share(tc.n)
		if s.Interval != int64(tc.n)*p.Interval || s.Burst != int64(tc.burst/tc.n) || s.Capacity != s.Interval*s.Burst {
			t.Errorf("share(%d) of %v/s burst %d = %+v, want an interval of %d and a burst of %d",
				tc.n, tc.limit, tc.burst, s, int64(tc.n)*p.Interval, tc.burst/tc.n)
		}
	}
}

// TestGCRAConcurrent hammers one bucket from many goroutines at a frozen
// instant and then at moving ones: exactly the burst is admitted at first,
// and never more than burst + elapsed*limit in all.
func TestGCRAConcurrent(t *testing.T) {
	p := NewParams(1000, 50)
	var c Cell
	var admitted atomic.Int64
	var clock atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if ok, _, _, _ := c.Take(p, clock.Load, 0); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 50 {
		t.Fatalf("admitted %d at one instant, want the burst of 50", n)
	}
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				tick := func() int64 { return clock.Add(int64(10 * time.Microsecond)) }
				if ok, _, _, _ := c.Take(p, tick, 0); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Duration(clock.Load())
	if max := 50 + int64(elapsed.Seconds()*1000) + 1; admitted.Load() > max {
		t.Fatalf("admitted %d over %v, more than burst + rate = %d", admitted.Load(), elapsed, max)
	}
}

func TestGCRAAllocs(t *testing.T) {
	p := NewParams(1e6, 100)
	var c Cell
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += 500
		_, _, tat, _ := c.Take(p, at(now), 0)
		_, _, _ = p.Status(tat, now)
		_ = p.NextToken(tat, now)
	}); n != 0 {
		t.Fatalf("take allocates %v times", n)
	}
}

func BenchmarkGCRATake(b *testing.B) {
	p := NewParams(1e9, 1000)
	var c Cell
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Take(p, func() int64 { return int64(time.Since(start)) }, 0)
		}
	})
}
