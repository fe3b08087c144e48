package breakwater_test

import (
	"errors"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// Every numeric option is range-checked at construction: NaN, negative,
// overflowing and memory-exhausting values are errors, never a panic, an
// out-of-memory crash or a silently disabled mechanism.
func TestConstructionRefusesWhatCannotRun(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for name, opts := range map[string][]bw.Option{
		"max attempts MaxInt":        {bw.WithMaxAttempts(math.MaxInt)},
		"window tolerate MaxInt":     {bw.WithBreaker(bw.WithPolicy(bw.Window(math.MaxInt, 0)))},
		"window tolerate 1<<40":      {bw.WithBreaker(bw.WithPolicy(bw.Window(1<<40, 0)))},
		"retry budget NaN ratio":     {bw.WithRetryBudget(nan, 3, 10*time.Second)},
		"retry budget NaN floor":     {bw.WithRetryBudget(0.2, nan, 10*time.Second)},
		"retry budget infinite":      {bw.WithRetryBudget(inf, inf, 10*time.Second)},
		"negative pause wait":        {bw.WithPauseGate(bw.WithPauseWait(-time.Second))},
		"backoff that panics":        {bw.WithBackoff(bw.BackoffFunc(func(int, time.Duration) time.Duration { panic("boom") }))},
		"attempts × waits overflow":  {bw.WithMaxAttempts(100), bw.WithBackoff(bw.Constant(math.MaxInt64 / 2)), bw.WithCallTimeout(0)},
		"breaker limits negative":    {bw.WithBreaker(bw.WithBreakerLimits(-1, -1))},
		"open jitter NaN":            {bw.WithBreaker(bw.WithOpenJitter(nan))},
		"fault injection NaN":        {bw.WithBreaker(bw.WithFaultInjection(nan))},
		"failure rate NaN":           {bw.WithBreaker(bw.WithPolicy(bw.FailureRate(nan, 10, time.Second)))},
		"failure rate min calls Max": {bw.WithBreaker(bw.WithPolicy(bw.FailureRate(0.5, math.MaxInt, time.Second)))},
		"half-open probes MaxInt":    {bw.WithBreaker(bw.WithHalfOpen(math.MaxInt, 1))},
		"consecutive MaxInt":         {bw.WithBreaker(bw.WithPolicy(bw.Consecutive(math.MaxInt)))},
		"key limits MaxInt":          {bw.WithKeyLimits(math.MaxInt, time.Minute)},
		"body buffering MaxInt64":    {bw.WithBodyBuffering(math.MaxInt64)},
		"rate limit keys MaxInt":     {bw.WithRateLimit(10, 10, bw.WithRateLimitKeys(math.MaxInt, time.Minute))},
	} {
		t.Run(name, func(t *testing.T) {
			mustNotPanic(t, "NewTransport", func() {
				tr, err := bw.NewTransport(opts...)
				if err == nil {
					t.Errorf("NewTransport accepted it: %s", tr.Explain())
				}
			})
		})
	}
}

// Construction reports every invalid option at once.
func TestConstructionJoinsEveryError(t *testing.T) {
	_, err := bw.NewTransport(bw.WithMaxAttempts(0), bw.WithRetryBudget(math.NaN(), 3, time.Second),
		bw.WithBreaker(bw.WithPolicy(bw.Window(-1, 0)), bw.WithOpenJitter(2)), bw.WithPauseGate(bw.WithPauseWait(-1)))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"max attempts", "retry budget", "tolerate", "jitter", "pause wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %q:\n%v", want, err)
		}
	}
}

// A breaker's memory does not grow with its policy's thresholds.
func TestBreakerMemoryIndependentOfTolerate(t *testing.T) {
	size := func(tolerate int) uint64 {
		bs, err := bw.NewBreakers(bw.WithPolicy(bw.Window(tolerate, time.Minute)))
		if err != nil {
			t.Fatal(err)
		}
		bs.Get("warm") // the registry's own first allocations
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		bs.Get("k")
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := size(10), size(1_000_000)
	t.Logf("bytes allocated for one breaker: %d with tolerate 10, %d with tolerate 1,000,000", small, large)
	if large > 2*small+1024 {
		t.Errorf("a breaker of tolerate 1,000,000 takes %d bytes, one of tolerate 10 %d", large, small)
	}
}

// Above 31 failures a Window counts in 32 buckets: it still opens on the
// (tolerate+1)-th failure within the window, and a failure stops counting
// between within and within·33/32 after it happened.
func TestLargeWindowCountsInBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Window(100, 32*time.Second)))
		for range 50 {
			bs.Melt("k", bw.ServerError)
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(27 * time.Second) // the first failures are 32 s old
		if s, _ := bs.Snapshot("k"); s.Failures != 50 {
			t.Fatalf("%d failures counted within the window, want 50", s.Failures)
		}
		time.Sleep(time.Second + 100*time.Millisecond) // 33.1 s: within·33/32 past the first ones
		if s, _ := bs.Snapshot("k"); s.Failures >= 50 || s.Failures < 35 {
			t.Fatalf("%d failures counted, want the oldest expired", s.Failures)
		}
		time.Sleep(10 * time.Second)
		if s, _ := bs.Snapshot("k"); s.Failures != 0 {
			t.Fatalf("%d failures counted long after the window", s.Failures)
		}
		for i := 1; i <= 101; i++ {
			bs.Melt("k", bw.ServerError)
			if got, want := bs.State("k"), bw.StateClosed; i == 101 {
				if got != bw.StateOpen {
					t.Fatalf("after failure %d the breaker is %s", i, got)
				}
			} else if got != want {
				t.Fatalf("after failure %d the breaker is %s", i, got)
			}
		}
	})
}

// Explain and Simulate survive a retry plan whose waits add up to almost
// math.MaxInt64: virtual time stops at its end instead of wrapping round.
func TestExplainWithWaitsNearMaxInt64(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithBackoff(bw.Constant(math.MaxInt64/2)), bw.WithCallTimeout(0),
		bw.WithBase(bw.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("unused") })))
	if err != nil {
		t.Fatalf("waits that fit in a Duration were refused: %v", err)
	}
	mustNotPanic(t, "Explain", func() { _ = tr.Explain() })
	mustNotPanic(t, "Simulate", func() { _ = tr.Simulate(bw.Scenario{}) })
}

// mustNotPanic runs fn and reports a panic as a test failure.
func mustNotPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	fn()
}
