package breakwater_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

var (
	fail    = bw.Outcome{Category: bw.ServerError, Status: 500}
	ok      = bw.Outcome{Category: bw.Success, Status: 200}
	timeout = bw.Outcome{Category: bw.Timeout}
)

func newBreakers(t *testing.T, opts ...bw.Option) *bw.Breakers {
	t.Helper()
	bs, err := bw.NewBreakers(opts...)
	if err != nil {
		t.Fatalf("NewBreakers: %v", err)
	}
	return bs
}

// call admits one attempt on key and records o, returning the admission error.
func call(bs *bw.Breakers, key string, o bw.Outcome) error {
	p, err := bs.Get(key).Allow()
	if err != nil {
		return err
	}
	p.Done(o)
	return nil
}

func TestWindowOpensOnToleratePlusOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Window(10, time.Minute)))
		for i := 1; i <= 10; i++ {
			if err := call(bs, "k", fail); err != nil {
				t.Fatalf("failure %d rejected: %v", i, err)
			}
			if s := bs.Get("k").State(); s != bw.StateClosed {
				t.Fatalf("after failure %d state = %s, want closed", i, s)
			}
			time.Sleep(time.Second)
		}
		if err := call(bs, "k", fail); err != nil {
			t.Fatalf("11th failure rejected: %v", err)
		}
		if s := bs.Get("k").State(); s != bw.StateOpen {
			t.Fatalf("after 11th failure state = %s, want open", s)
		}
		err := call(bs, "k", ok)
		var be *bw.Error
		if !errors.Is(err, bw.ErrCircuitOpen) || !errors.As(err, &be) {
			t.Fatalf("admission after opening: %v, want ErrCircuitOpen", err)
		}
		if d, ok := bw.RetryAfter(err); be.Key != "k" || be.Mechanism != bw.MechBreaker || !ok || d > 5500*time.Millisecond {
			t.Fatalf("Error = %+v, RetryAfter %s, %v", be, d, ok)
		}
	})
}

func TestWindowIsStrictAndSliding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Failures at 0, 30, 60 and 90 s with a 90 s window: at 90 s the one
		// at 0 has left the window, so only 3 are counted.
		bs := newBreakers(t, bw.WithPolicy(bw.Window(3, 90*time.Second)))
		for i := range 4 {
			if i > 0 {
				time.Sleep(30 * time.Second)
			}
			bs.Get("k").RecordFailure(bw.ServerError)
		}
		if s, _ := breakerOf(bs, "k"); s.State != bw.StateClosed || s.Failures != 3 {
			t.Fatalf("state %s with %d failures, want closed with 3", s.State, s.Failures)
		}
	})
}

func TestMeltAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Window(2, time.Minute)))
		bs.Get("k").RecordFailure(bw.ServerError)
		bs.Get("k").RecordFailure(bw.ServerError)
		if !available(bs, "k") || blown(bs, "k") {
			t.Fatal("open after 2 melts with tolerate 2")
		}
		bs.Get("k").RecordFailure(bw.ServerError)
		if available(bs, "k") || !blown(bs, "k") {
			t.Fatal("closed after 3 melts with tolerate 2")
		}
		bs.Get("k").Reset()
		if !available(bs, "k") || blown(bs, "k") {
			t.Fatal("not available after reset")
		}
		bs.Get("k").RecordFailure(bw.ClientError) // not a failure: ignored
		bs.Get("k").RecordFailure(bw.ServerError)
		bs.Get("k").RecordFailure(bw.ServerError)
		if !available(bs, "k") {
			t.Fatal("reset did not forget the earlier melts")
		}
	})
}

func TestConsecutive(t *testing.T) {
	t.Run("opens on the nth", func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(5)))
		for i := 1; i <= 4; i++ {
			call(bs, "k", fail)
		}
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("open after 4 consecutive failures, threshold 5")
		}
		call(bs, "k", fail)
		if bs.Get("k").State() != bw.StateOpen {
			t.Fatal("closed after 5 consecutive failures")
		}
	})
	t.Run("success resets", func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(5)))
		for range 4 {
			call(bs, "k", fail)
		}
		call(bs, "k", ok)
		for range 4 {
			call(bs, "k", fail)
		}
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("a success did not reset the consecutive count")
		}
	})
	t.Run("category threshold", func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.Timeout, 2)))
		call(bs, "k", fail)
		call(bs, "k", fail)
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("open after two server errors")
		}
		call(bs, "k", timeout)
		if bs.Get("k").State() != bw.StateOpen {
			t.Fatal("server, server, timeout did not open with a timeout threshold of 2")
		}
	})
	t.Run("neutral outcomes change nothing", func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(2)))
		call(bs, "k", fail)
		for _, c := range []bw.Category{bw.Canceled, bw.Rejected, bw.Throttled, bw.Unsupported} {
			call(bs, "k", bw.Outcome{Category: c})
		}
		if s, _ := breakerOf(bs, "k"); s.Failures != 1 || s.State != bw.StateClosed {
			t.Fatalf("neutral outcomes moved the count: %+v", s)
		}
	})
}

func TestFailureRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.FailureRate(0.5, 10, 10*time.Second)))
		for range 4 {
			call(bs, "k", ok)
			call(bs, "k", fail)
		}
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("opened below the minimum number of calls")
		}
		call(bs, "k", ok)
		call(bs, "k", fail) // 10 calls, 5 failures
		if bs.Get("k").State() != bw.StateOpen {
			t.Fatal("50% failures over 10 calls did not open")
		}
		// Old outcomes leave the window.
		bs.Get("k").Reset()
		for range 9 {
			call(bs, "k", fail)
		}
		time.Sleep(11 * time.Second)
		call(bs, "k", fail)
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("failures older than the window were counted")
		}
	})
}

// A FailureRate opens on the share of failures, not on their number: a
// failing share below the ratio keeps it closed however many calls there
// were, and the failure that brings the share to the ratio opens it.
func TestFailureRateBelowTheRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.FailureRate(0.5, 10, 10*time.Second)))
		for range 6 {
			call(bs, "k", ok)
		}
		for i := range 5 {
			call(bs, "k", fail) // up to 11 calls, 5 failures: 45 %
			if s := bs.Get("k").State(); s != bw.StateClosed {
				t.Fatalf("%d failures of %d calls, ratio 0.5: %s, want closed", i+1, 7+i, s)
			}
		}
		call(bs, "k", fail) // 12 calls, 6 failures
		if s := bs.Get("k").State(); s != bw.StateOpen {
			t.Fatalf("6 failures of 12 calls, ratio 0.5: %s, want open", s)
		}
	})
}

// The default policy is a Window with a ratio: it opens on the 11th failing
// call within the window (the 5th timeout), once the failing calls are a
// majority, beyond chance, of the calls since the first of them.
func TestWindowWithRatio(t *testing.T) {
	timeout := bw.Outcome{Category: bw.Timeout}
	t.Run("a total outage opens it on the 11th failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bs := newBreakers(t)
			for range 1000 { // a long healthy history does not delay it
				call(bs, "k", ok)
			}
			for i := 1; i <= 11; i++ {
				if call(bs, "k", fail) != nil || (bs.Get("k").State() == bw.StateOpen) != (i == 11) {
					t.Fatalf("after %d failing calls the breaker is %s", i, bs.Get("k").State())
				}
			}
		})
	})
	t.Run("timeouts open it on the 5th", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bs := newBreakers(t)
			for i := 1; i <= 5; i++ {
				if call(bs, "k", timeout) != nil || (bs.Get("k").State() == bw.StateOpen) != (i == 5) {
					t.Fatalf("after %d timeouts the breaker is %s", i, bs.Get("k").State())
				}
			}
		})
	})
	t.Run("a minority never opens it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bs := newBreakers(t)
			for i := range 3000 { // 40 % failing, one call every 10 ms
				o := ok
				if i%5 < 2 {
					o = fail
				}
				if err := call(bs, "k", o); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	})
	t.Run("the share is taken since the oldest failure in the window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bs := newBreakers(t, bw.WithPolicy(bw.Window(10, 10*time.Second).WithRatio(0.5)))
			call(bs, "k", fail)
			for range 100 {
				call(bs, "k", ok)
			}
			for range 10 {
				call(bs, "k", fail)
			}
			if s, _ := breakerOf(bs, "k"); s.State != bw.StateClosed || s.Failures != 11 {
				t.Fatalf("11 failures of 111 calls: %+v", s)
			}
			time.Sleep(11 * time.Second) // all of them leave the window
			for i := 1; i <= 11; i++ {
				call(bs, "k", fail)
			}
			if s := bs.Get("k").State(); s != bw.StateOpen {
				t.Fatalf("11 failures of the 11 calls since the window emptied: %s", s)
			}
		})
	})
	t.Run("memory does not grow with tolerate", func(t *testing.T) {
		// Bytes, not allocations: the registry's own growth adds an
		// allocation now and then, which a count of them would mistake
		// for the breaker's. A breaker takes about 1.2 KB; one whose
		// window grew with tolerate would take gigabytes.
		bs := newBreakers(t, bw.WithPolicy(bw.Window(1<<30, time.Minute).WithRatio(0.5)))
		const n = 1000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range n {
			bs.Get("k" + strconv.Itoa(i))
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 4<<10 {
			t.Fatalf("%d bytes per breaker", per)
		}
	})
	if got, want := bw.Window(10, 0).WithRatio(0.5).WithCategoryThreshold(bw.Timeout, 5).String(), "window(tolerate=10, within=auto, ratio=0.50, timeout=5)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// The threshold is checked after successes too: the success that
// completes the minimum volume opens the breaker when enough failed.
func TestFailureRateChecksAfterSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.FailureRate(0.5, 10, 10*time.Second)))
		for range 9 {
			call(bs, "k", fail)
		}
		call(bs, "k", ok) // 10 calls, 90 % failing
		if s := bs.Get("k").State(); s != bw.StateOpen {
			t.Fatalf("9 failures of 10 calls, minCalls 10: %s, want open", s)
		}
		if snap, _ := breakerOf(bs, "k"); snap.LastFailure != "server_error" {
			t.Fatalf("%+v", snap)
		}
	})
}

// openFor returns how long k stays open right after it opened.
func openFor(t *testing.T, bs *bw.Breakers, k string) time.Duration {
	t.Helper()
	s, _ := breakerOf(bs, k)
	if s.State != bw.StateOpen {
		t.Fatalf("state %s, want open", s.State)
	}
	return s.Remaining
}

// Reopens follow the outage's age: each opening lasts a 32nd of the time
// since the first (between the open timeout and its cap), jitter only
// shortens it, and a recovery is never noticed later than a tenth of the
// outage's age.
func TestReopenCadence(t *testing.T) {
	for _, jitter := range []float64{0, 0.1} {
		synctest.Test(t, func(t *testing.T) {
			const base = 100 * time.Millisecond
			bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(base, time.Minute),
				bw.WithOpenJitter(jitter), bw.WithHalfOpen(1, 1))
			call(bs, "k", fail)
			start := time.Now()
			probes := 0
			for age := time.Duration(0); age < 2*time.Hour; age = time.Since(start) {
				d := openFor(t, bs, "k")
				want := min(max(age/32, base), time.Minute)
				if d > want || d < want-time.Duration(jitter*float64(want))-1 {
					t.Fatalf("at age %s the opening lasted %s, want %s (-%.0f%%)", age, d, want, jitter*100)
				}
				if age >= 10*base && d > age/10 {
					t.Fatalf("at age %s the opening lasted %s, more than a tenth of it", age, d)
				}
				time.Sleep(d)
				probes++
				if err := call(bs, "k", fail); err != nil { // the probe fails
					t.Fatalf("probe %d rejected: %v", probes, err)
				}
				if age >= time.Minute && age < time.Minute+d && d < time.Second {
					t.Fatalf("after a minute a probe every %s, want at most one a second", d)
				}
			}
			t.Logf("jitter %.1f: %d probes in a 2 h outage", jitter, probes)
			// A successful probe closes it and forgets the history.
			time.Sleep(openFor(t, bs, "k"))
			call(bs, "k", ok)
			call(bs, "k", fail)
			if d := openFor(t, bs, "k"); d > base {
				t.Fatalf("after closing the first open lasted %s, want %s", d, base)
			}
		})
	}
}

func TestHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenJitter(0))
		call(bs, "k", fail)
		time.Sleep(5 * time.Second)

		p1, err := bs.Get("k").Allow()
		if s := bs.Get("k").Snapshot(); err != nil || s.ProbesInFlight != 1 {
			t.Fatalf("first probe: %v (%d probes in flight)", err, s.ProbesInFlight)
		}
		if _, err := bs.Get("k").Allow(); !errors.Is(err, bw.ErrHalfOpenBusy) {
			t.Fatalf("second concurrent probe: %v, want ErrHalfOpenBusy", err)
		}
		p1.Done(ok)
		if bs.Get("k").State() != bw.StateHalfOpen {
			t.Fatal("one success closed it; two are needed")
		}
		if err := call(bs, "k", ok); err != nil {
			t.Fatal(err)
		}
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("two sequential successes did not close it")
		}

		// Any failure reopens, for a 32nd of the outage's age.
		call(bs, "k", fail)
		time.Sleep(5 * time.Second)
		call(bs, "k", ok)
		call(bs, "k", fail)
		if d := openFor(t, bs, "k"); d != 5*time.Second/32 {
			t.Fatalf("reopen lasted %s, want a 32nd of the 5 s outage", d)
		}
	})
}

func TestStaleOutcomeChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)))
		old, _ := bs.Get("k").Allow()
		bs.Get("k").Trip(time.Second)
		bs.Get("k").Reset()
		old.Done(fail) // admitted before the trip and the reset
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("a stale failure reopened the breaker")
		}
		// A stale probe only releases its lease.
		bs.Get("k").Trip(time.Second)
		time.Sleep(time.Second)
		probe, err := bs.Get("k").Allow()
		if err != nil {
			t.Fatal(err)
		}
		bs.Get("k").Trip(time.Second)
		time.Sleep(time.Second)
		probe.Done(ok)
		if s, _ := breakerOf(bs, "k"); s.State != bw.StateHalfOpen || s.ProbeSuccesses != 0 {
			t.Fatalf("stale probe success counted: %+v", s)
		}
	})
}

func TestLeakedProbeIsReclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenJitter(0), bw.WithProbeTimeout(2*time.Second))
		call(bs, "k", fail)
		time.Sleep(5 * time.Second)
		leaked, err := bs.Get("k").Allow() // never reported
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Get("k").Allow(); !errors.Is(err, bw.ErrHalfOpenBusy) {
			t.Fatalf("%v, want busy", err)
		}
		time.Sleep(2 * time.Second)
		p, err := bs.Get("k").Allow()
		if err != nil {
			t.Fatalf("lease not reclaimed after the probe timeout: %v", err)
		}
		leaked.Done(bw.Outcome{Category: bw.Canceled}) // the old lease must not free the new one
		if _, err := bs.Get("k").Allow(); !errors.Is(err, bw.ErrHalfOpenBusy) {
			t.Fatalf("a reclaimed lease released the new probe's slot: %v", err)
		}
		p.Done(ok)
	})
}

func TestThrottledOpenLastsTheHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithCountAsFailure(bw.Throttled), bw.WithOpenJitter(0))
		call(bs, "k", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: 30 * time.Second, HasRetryAfter: true})
		if d := openFor(t, bs, "k"); d != 30*time.Second {
			t.Fatalf("opened for %s, want the 30s hint", d)
		}
		time.Sleep(30 * time.Second)
		call(bs, "k", ok)
		if bs.Get("k").State() != bw.StateClosed {
			t.Fatal("a throttle-opened breaker needs one success to close")
		}
		// Capped by the maximum open timeout.
		call(bs, "k", bw.Outcome{Category: bw.Throttled, RetryAfter: time.Hour, HasRetryAfter: true})
		if d := openFor(t, bs, "k"); d != time.Minute {
			t.Fatalf("opened for %s, want the 60s cap", d)
		}
	})
}

func TestAuthErrorsCountOnlyWhenAsked(t *testing.T) {
	auth := bw.Outcome{Category: bw.AuthError, Status: 401}
	bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)))
	call(bs, "k", auth)
	if bs.Get("k").State() != bw.StateClosed {
		t.Fatal("401 counted by default")
	}
	bs = newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithCountAsFailure(bw.AuthError))
	call(bs, "k", auth)
	if bs.Get("k").State() != bw.StateOpen {
		t.Fatal("401 not counted with WithCountAsFailure(AuthError)")
	}
}

func TestRecordSuccessSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithHalfOpen(1, 2))
		call(bs, "k", fail)
		bs.Get("k").RecordSuccess()
		if s := bs.Get("k").State(); s != bw.StateHalfOpen {
			t.Fatalf("recovery signal while open: %s, want half_open", s)
		}
		bs.Get("k").RecordSuccess()
		if s := bs.Get("k").State(); s != bw.StateClosed {
			t.Fatalf("second recovery signal: %s, want closed", s)
		}
	})
}

func TestTripAndModes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t)
		bs.Get("k").Trip(3 * time.Second)
		if err := call(bs, "k", ok); !errors.Is(err, bw.ErrCircuitOpen) {
			t.Fatalf("tripped: %v", err)
		}
		time.Sleep(3 * time.Second)
		if s := bs.Get("k").State(); s != bw.StateHalfOpen {
			t.Fatalf("after the trip: %s", s)
		}
	})
	t.Run("shadow", func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithShadowMode(true))
		call(bs, "k", fail)
		for range 3 {
			if err := call(bs, "k", ok); err != nil {
				t.Fatalf("shadow mode rejected: %v", err)
			}
		}
		if s, _ := breakerOf(bs, "k"); s.State != bw.StateOpen || s.ShadowRejections != 3 {
			t.Fatalf("shadow snapshot %+v, want open with 3 shadow rejections", s)
		}
	})
	t.Run("switched off", func(t *testing.T) {
		tr, err := bw.NewTransport(bw.WithoutBreaker(), bw.WithMaxAttempts(1), bw.WithBase(bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 500, Body: http.NoBody, Request: r}, nil
		})))
		if err != nil {
			t.Fatal(err)
		}
		bs := tr.Breakers()
		for range 1000 {
			bs.Get("k").RecordFailure(bw.ServerError)
			bs.Get("k").Trip(time.Minute)
			resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://k/", nil))
			if err != nil || resp.StatusCode != 500 {
				t.Fatalf("%v %v", resp, err)
			}
		}
		if !available(bs, "k") || len(bs.Snapshot().Breakers) != 0 || bs.Get("k") != nil {
			t.Fatal("a breaker switched off kept state")
		}
	})
	t.Run("fault injection", func(t *testing.T) {
		bs := newBreakers(t, bw.WithFaultInjection(1))
		for range 100 {
			err := call(bs, "k", ok)
			var be *bw.Error
			if !errors.Is(err, bw.ErrCircuitOpen) || !errors.As(err, &be) || !be.Injected {
				t.Fatalf("fault injection 1.0 admitted: %v", err)
			}
		}
	})
}

func TestOptionErrors(t *testing.T) {
	for name, opts := range map[string][]bw.Option{
		"fault+disabled":    {bw.WithFaultInjection(0.5), bw.WithoutBreaker()},
		"negative tolerate": {bw.WithPolicy(bw.Window(-1, time.Second))},
		"zero consecutive":  {bw.WithPolicy(bw.Consecutive(0))},
		"rate ratio":        {bw.WithPolicy(bw.FailureRate(1.5, 10, time.Second))},
		"rate window":       {bw.WithPolicy(bw.FailureRate(0.5, 10, 0))},
		"category on rate":  {bw.WithPolicy(bw.FailureRate(0.5, 10, time.Second).WithCategoryThreshold(bw.Timeout, 1))},
		"ratio on rate":     {bw.WithPolicy(bw.FailureRate(0.5, 10, time.Second).WithRatio(0.5))},
		"ratio above 1":     {bw.WithPolicy(bw.Window(1, time.Second).WithRatio(1.5))},
		"negative category": {bw.WithPolicy(bw.Window(1, time.Second).WithCategoryThreshold(bw.Timeout, -1))},
		"open timeout":      {bw.WithOpenTimeout(0, time.Second)},
		"max below base":    {bw.WithOpenTimeout(time.Minute, time.Second)},
		"jitter":            {bw.WithOpenJitter(2)},
		"probes":            {bw.WithHalfOpen(0, 1)},
		"fault rate":        {bw.WithFaultInjection(-0.1)},
		"limits":            {bw.WithKeyLimits(0, time.Minute)},
	} {
		if _, err := bw.NewBreakers(opts...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestHalfOpenHammer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probes = 3
		var mu sync.Mutex
		seen := map[uint64]bw.Transition{}
		var dup int
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithHalfOpen(probes, 5), bw.WithOpenJitter(0),
			bw.WithOpenTimeout(time.Second, time.Second),
			onTransition(func(tr bw.Transition) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := seen[tr.Generation]; ok {
					dup++
				}
				seen[tr.Generation] = tr
			}))
		bs.Get("k").Trip(time.Second)
		var peak, admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range 1000 {
			wg.Go(func() {
				for i := range 20 {
					p, err := bs.Get("k").Allow()
					if errors.Is(err, bw.ErrCircuitOpen) {
						time.Sleep(time.Second)
						continue
					}
					if err != nil {
						continue
					}
					admitted.Add(1)
					if n := int64(bs.Get("k").Snapshot().ProbesInFlight); n > 0 {
						for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
						}
					}
					if (g+i)%97 == 0 {
						p.Done(fail)
					} else {
						p.Done(ok)
					}
				}
			})
		}
		wg.Wait()
		// The ramp doubles the probes per success, up to 4 before the 5th
		// closes the breaker.
		if limit := int64(probes << 4); peak.Load() > limit || peak.Load() == 0 {
			t.Fatalf("peak probes in flight %d, limit %d", peak.Load(), limit)
		}
		if dup != 0 {
			t.Fatalf("%d transitions delivered more than once", dup)
		}
		// Generations are consecutive and each transition starts where the
		// previous one ended.
		for g := uint64(1); g <= uint64(len(seen)); g++ {
			cur, ok := seen[g]
			if !ok {
				t.Fatalf("no transition for generation %d of %d", g, len(seen))
			}
			if prev, ok := seen[g-1]; ok && prev.To != cur.From {
				t.Fatalf("generation %d goes %s>%s after %s>%s", g, cur.From, cur.To, prev.From, prev.To)
			}
		}
		t.Logf("%d transitions, %d admitted, peak %d probes", len(seen), admitted.Load(), peak.Load())
		if len(seen) < 4 {
			t.Fatalf("only %d transitions: the hammer did not exercise the state machine", len(seen))
		}
	})
}

// A breaker's snapshot carries its key; a transport without breakers has
// only nil ones, whose snapshot has none.
func TestBreakerKey(t *testing.T) {
	bs := newBreakers(t)
	for _, k := range []string{"a", "http://upstream.test", ""} {
		if got := bs.Get(k).Snapshot().Key; got != k {
			t.Errorf("Get(%q).Snapshot().Key = %q", k, got)
		}
	}
	tr, err := bw.NewTransport(bw.WithoutBreaker())
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Breakers().Get("a").Snapshot().Key; got != "" {
		t.Errorf("a switched-off breaker has key %q", got)
	}
}
