package breakwater_test

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
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
		"window tolerate MaxInt":     {bw.WithPolicy(bw.Window(math.MaxInt, 0))},
		"window tolerate 1<<40":      {bw.WithPolicy(bw.Window(1<<40, 0))},
		"retry budget NaN ratio":     {bw.WithRetryBudget(nan, 3, 10*time.Second)},
		"retry budget NaN floor":     {bw.WithRetryBudget(0.2, nan, 10*time.Second)},
		"retry budget infinite":      {bw.WithRetryBudget(inf, inf, 10*time.Second)},
		"negative pause wait":        {bw.WithMaxWait(-time.Second)},
		"backoff that panics":        {bw.WithBackoff(bw.BackoffFunc(func(int, time.Duration) time.Duration { panic("boom") }))},
		"attempts × waits overflow":  {bw.WithMaxAttempts(100), bw.WithBackoff(bw.Constant(math.MaxInt64 / 2)), bw.WithCallTimeout(0)},
		"breaker limits negative":    {bw.WithKeyLimits(-1, -1)},
		"open jitter NaN":            {bw.WithOpenJitter(nan)},
		"fault injection NaN":        {bw.WithFaultInjection(nan)},
		"failure rate NaN":           {bw.WithPolicy(bw.FailureRate(nan, 10, time.Second))},
		"failure rate min calls Max": {bw.WithPolicy(bw.FailureRate(0.5, math.MaxInt, time.Second))},
		"half-open probes MaxInt":    {bw.WithHalfOpen(math.MaxInt, 1)},
		"consecutive MaxInt":         {bw.WithPolicy(bw.Consecutive(math.MaxInt))},
		"key limits MaxInt":          {bw.WithKeyLimits(math.MaxInt, time.Minute)},
		"body buffering MaxInt64":    {bw.WithBodyBuffering(math.MaxInt64)},
		"rate limit keys MaxInt":     {bw.WithRateLimit(10, 10, bw.WithKeyLimits(math.MaxInt, time.Minute))},
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
		bw.WithPolicy(bw.Window(-1, 0)), bw.WithOpenJitter(2), bw.WithMaxWait(-1))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"max attempts", "retry budget", "tolerate", "jitter", "WithMaxWait"} {
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
			bs.Get("k").RecordFailure(bw.ServerError)
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(27 * time.Second) // the first failures are 32 s old
		if s, _ := breakerOf(bs, "k"); s.Failures != 50 {
			t.Fatalf("%d failures counted within the window, want 50", s.Failures)
		}
		time.Sleep(time.Second + 100*time.Millisecond) // 33.1 s: within·33/32 past the first ones
		if s, _ := breakerOf(bs, "k"); s.Failures >= 50 || s.Failures < 35 {
			t.Fatalf("%d failures counted, want the oldest expired", s.Failures)
		}
		time.Sleep(10 * time.Second)
		if s, _ := breakerOf(bs, "k"); s.Failures != 0 {
			t.Fatalf("%d failures counted long after the window", s.Failures)
		}
		for i := 1; i <= 101; i++ {
			bs.Get("k").RecordFailure(bw.ServerError)
			if got, want := bs.Get("k").State(), bw.StateClosed; i == 101 {
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

// Each stage is configured, shared or switched off, one of the three: a
// transport given two of them for one stage is refused with an error that
// names both.
func TestOneWayPerStage(t *testing.T) {
	bs, _ := bw.NewBreakers()
	gates, _ := bw.NewPauseGates()
	rl, _ := bw.NewRateLimiters(10, 10)
	bh, _ := bw.NewBulkheads(4)
	for name, tc := range map[string]struct {
		opts []bw.Option
		want []string
	}{
		"breaker configured and shared":       {[]bw.Option{bw.WithBreakers(bs), bw.WithPolicy(bw.Consecutive(3))}, []string{"breaker", "WithPolicy", "WithBreakers"}},
		"breaker shared and off":              {[]bw.Option{bw.WithBreakers(bs), bw.WithoutBreaker()}, []string{"breaker", "WithBreakers", "WithoutBreaker"}},
		"breaker configured and off":          {[]bw.Option{bw.WithOpenTimeout(time.Second, time.Minute), bw.WithoutBreaker()}, []string{"breaker", "WithOpenTimeout", "WithoutBreaker"}},
		"pause gate configured and off":       {[]bw.Option{bw.WithRateLimitHeaders(false), bw.WithoutPauseGate()}, []string{"pause gate", "WithRateLimitHeaders", "WithoutPauseGate"}},
		"pause gate shared and off":           {[]bw.Option{bw.WithPauseGates(gates), bw.WithoutPauseGate()}, []string{"pause gate", "WithPauseGates", "WithoutPauseGate"}},
		"retry budget configured and off":     {[]bw.Option{bw.WithRetryBudget(0.1, 1, time.Second), bw.WithoutRetryBudget()}, []string{"retry budget", "WithRetryBudget", "WithoutRetryBudget"}},
		"rate limit configured and shared":    {[]bw.Option{bw.WithRateLimit(5, 5), bw.WithRateLimiters(rl)}, []string{"rate limit", "WithRateLimit", "WithRateLimiters"}},
		"concurrency configured and shared":   {[]bw.Option{bw.WithConcurrencyLimit(2), bw.WithBulkheads(bh)}, []string{"concurrency limit", "WithConcurrencyLimit", "WithBulkheads"}},
		"a nil registry":                      {[]bw.Option{bw.WithBreakers(nil), bw.WithPauseGates(nil), bw.WithRateLimiters(nil), bw.WithBulkheads(nil)}, []string{"WithBreakers", "WithPauseGates", "WithRateLimiters", "WithBulkheads"}},
		"a middleware option on a transport":  {[]bw.Option{bw.WithShedRetryAfter(time.Second, 2*time.Second)}, []string{"WithShedRetryAfter", "does not apply"}},
		"a limit's option outside the limit":  {[]bw.Option{bw.WithMaxQueue(3)}, []string{"WithMaxQueue", "does not apply"}},
		"a transport option inside the limit": {[]bw.Option{bw.WithRateLimit(5, 5, bw.WithCallTimeout(time.Second))}, []string{"WithCallTimeout", "does not apply"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := bw.NewTransport(tc.opts...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// Options are refused where they do not apply: every constructor names
// the option.
func TestOptionsOnlyWhereTheyApply(t *testing.T) {
	for name, err := range map[string]error{
		"NewBreakers(WithCallTimeout)":         second(bw.NewBreakers(bw.WithCallTimeout(time.Second))),
		"NewPauseGates(WithPolicy)":            second(bw.NewPauseGates(bw.WithPolicy(bw.Consecutive(2)))),
		"NewRateLimiters(WithMaxQueue)":        second(bw.NewRateLimiters(1, 1, bw.WithMaxQueue(2))),
		"NewBulkheads(WithRetryNonIdempotent)": second(bw.NewBulkheads(1, bw.WithRetryNonIdempotent(true))),
		"RetryStage(WithCallTimeout)":          second(bw.RetryStage(bw.WithCallTimeout(time.Second))),
		"Shedder(WithPolicy)":                  second(bw.Shedder(mustBulkheads(t), bw.WithPolicy(bw.Consecutive(2)))),
		"HandlerTimeout(WithMaxWait)":          second(bw.HandlerTimeout(time.Second, bw.WithMaxWait(time.Second))),
		"NewRateLimiters(WithClusterBus(nil))": second(bw.NewRateLimiters(1, 1, bw.WithClusterBus(nil))),
		"NewBulkheads(WithObserver(nil))":      second(bw.NewBulkheads(1, bw.WithObserver(nil))),
	} {
		if err == nil || !strings.Contains(err.Error(), "does not apply") {
			t.Errorf("%s: %v, want a \"does not apply\" error", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func mustBulkheads(t *testing.T) *bw.Bulkheads {
	t.Helper()
	bh, err := bw.NewBulkheads(1)
	if err != nil {
		t.Fatal(err)
	}
	return bh
}

// Registries shared by two transports are one: a pause one transport sets
// holds the other's calls, and a slot one holds is one fewer for the
// other.
func TestSharedRegistriesAreOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates, err := bw.NewPauseGates()
		if err != nil {
			t.Fatal(err)
		}
		bh, err := bw.NewBulkheads(1, bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		base := bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/hold" {
				<-release
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})
		var trs [2]*bw.Transport
		for i := range trs {
			if trs[i], err = bw.NewTransport(bw.WithBase(base), bw.WithPauseGates(gates), bw.WithBulkheads(bh)); err != nil {
				t.Fatal(err)
			}
		}
		get := func(tr *bw.Transport, path string) error {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test"+path, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		done := make(chan error, 1)
		go func() { done <- get(trs[0], "/hold") }()
		synctest.Wait()
		if err := get(trs[1], "/"); !errors.Is(err, bw.ErrConcurrencyLimit) {
			t.Errorf("with the shared slot held by the other transport: %v, want ErrConcurrencyLimit", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		gates.Pause(bw.HostKey(httptest.NewRequest(http.MethodGet, "http://api.test/", nil)), time.Minute)
		if err := get(trs[1], "/"); !errors.Is(err, bw.ErrPaused) {
			t.Errorf("while the shared gate pauses the key: %v, want ErrPaused", err)
		}
	})
}

// An unset attempt timeout follows a call timeout shorter than its
// default; one given explicitly must still fit in the call timeout.
func TestAttemptTimeoutFollowsAShorterCallTimeout(t *testing.T) {
	tr, err := bw.NewTransport(bw.WithCallTimeout(2 * time.Second))
	if err != nil {
		t.Fatalf("WithCallTimeout(2s) alone: %v", err)
	}
	attempt := regexp.MustCompile(`attempt timeout +(\S+)\n`)
	if m := attempt.FindStringSubmatch(tr.Explain()); m == nil || m[1] != "2s" {
		t.Errorf("the attempt timeout does not follow the call timeout:\n%s", tr.Explain())
	}
	tr, err = bw.NewTransport(bw.WithCallTimeout(time.Minute))
	if m := attempt.FindStringSubmatch(tr.Explain()); err != nil || m == nil || m[1] != "10s" {
		t.Errorf("with a longer call timeout the default stays: %v\n%s", err, tr.Explain())
	}
	if _, err := bw.NewTransport(bw.WithCallTimeout(2*time.Second), bw.WithAttemptTimeout(5*time.Second)); err == nil {
		t.Error("an explicit attempt timeout longer than the call timeout was accepted")
	}
}
