package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

// configFlags are the flags that set a breakwater.Config. Each one that is
// given is applied, in the order given, over the -config file.
type configFlags struct {
	file string
	set  []func(*breakwater.Config) error
}

func addConfigFlags(fs *flag.FlagSet) *configFlags {
	cf := &configFlags{}
	fs.StringVar(&cf.file, "config", "", "read the configuration from `FILE` (JSON, breakwater.Config's schema); flags override it")
	dur := func(name, usage string, field func(*breakwater.Config) *breakwater.Duration) {
		fs.Func(name, usage+" (a duration, or off)", func(v string) error {
			var d breakwater.Duration
			if err := d.UnmarshalText([]byte(v)); err != nil {
				return errors.New(unprefixed(err))
			}
			cf.set = append(cf.set, func(c *breakwater.Config) error { *field(c) = d; return nil })
			return nil
		})
	}
	num := func(name, usage string, field func(*breakwater.Config) *int) {
		fs.Func(name, usage, func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return errors.New("want an integer")
			}
			cf.set = append(cf.set, func(c *breakwater.Config) error { *field(c) = n; return nil })
			return nil
		})
	}
	real := func(name, usage string, field func(*breakwater.Config) *float64) {
		fs.Func(name, usage, func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return errors.New("want a number")
			}
			cf.set = append(cf.set, func(c *breakwater.Config) error { *field(c) = f; return nil })
			return nil
		})
	}
	realPtr := func(name, usage string, field func(*breakwater.Config) **float64) {
		fs.Func(name, usage, func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return errors.New("want a number")
			}
			cf.set = append(cf.set, func(c *breakwater.Config) error { *field(c) = &f; return nil })
			return nil
		})
	}
	word := func(name, usage string, field func(*breakwater.Config) *string) {
		fs.Func(name, usage, func(v string) error {
			cf.set = append(cf.set, func(c *breakwater.Config) error { *field(c) = v; return nil })
			return nil
		})
	}
	on := func(name, usage string, field func(*breakwater.Config) *bool) {
		fs.BoolFunc(name, usage, func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return err
			}
			cf.set = append(cf.set, func(c *breakwater.Config) error { *field(c) = b; return nil })
			return nil
		})
	}

	dur("call-timeout", "bound the whole call", func(c *breakwater.Config) *breakwater.Duration { return &c.CallTimeout })
	dur("attempt-timeout", "bound each attempt", func(c *breakwater.Config) *breakwater.Duration { return &c.AttemptTimeout })
	dur("slow-call", "count a success slower than this as a failure", func(c *breakwater.Config) *breakwater.Duration { return &c.SlowCall })
	dur("max-retry-after", "the longest Retry-After honoured", func(c *breakwater.Config) *breakwater.Duration { return &c.MaxRetryAfter })

	num("max-attempts", "attempts per call, the first included", func(c *breakwater.Config) *int { return &c.Retry.MaxAttempts })
	word("backoff", "exponential_jitter, decorrelated_jitter, linear or constant", func(c *breakwater.Config) *string { return &c.Retry.Backoff })
	dur("backoff-base", "the backoff's first wait", func(c *breakwater.Config) *breakwater.Duration { return &c.Retry.Base })
	dur("backoff-max", "the backoff's longest wait", func(c *breakwater.Config) *breakwater.Duration { return &c.Retry.Max })
	dur("backoff-step", "a linear backoff's step", func(c *breakwater.Config) *breakwater.Duration { return &c.Retry.Step })
	on("retry-non-idempotent", "retry POST and PATCH too", func(c *breakwater.Config) *bool { return &c.Retry.NonIdempotent })
	on("charge-per-attempt", "charge the breaker for every failing attempt", func(c *breakwater.Config) *bool { return &c.Retry.ChargePerAttempt })
	on("no-retry-budget", "remove the retry budget", func(c *breakwater.Config) *bool { return &c.Retry.Budget.Off })
	realPtr("retry-budget-ratio", "retries allowed per call", func(c *breakwater.Config) **float64 { return &c.Retry.Budget.Ratio })
	realPtr("retry-budget-floor", "retries allowed per second beyond the ratio", func(c *breakwater.Config) **float64 { return &c.Retry.Budget.Floor })
	dur("retry-budget-window", "the retry budget's window", func(c *breakwater.Config) *breakwater.Duration { return &c.Retry.Budget.Window })

	word("policy", "the breaker's policy: window, consecutive or failure_rate", func(c *breakwater.Config) *string { return &c.Breaker.Policy })
	num("tolerate", "window: failures absorbed", func(c *breakwater.Config) *int { return &c.Breaker.Tolerate })
	dur("within", "window, failure_rate: the counting window", func(c *breakwater.Config) *breakwater.Duration { return &c.Breaker.Within })
	num("threshold", "consecutive: failures in a row that open it", func(c *breakwater.Config) *int { return &c.Breaker.Threshold })
	fs.Func("category-threshold", "window, consecutive: `CATEGORY=N`, a lower threshold for a category (repeatable)", func(v string) error {
		name, n, ok := strings.Cut(v, "=")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			return errors.New("want CATEGORY=N, such as timeout=2")
		}
		cf.set = append(cf.set, func(c *breakwater.Config) error {
			if c.Breaker.CategoryThresholds == nil {
				c.Breaker.CategoryThresholds = map[string]int{}
			}
			c.Breaker.CategoryThresholds[name] = count
			return nil
		})
		return nil
	})
	real("ratio", "window: the share of calls that must have failed too; failure_rate: the share that opens it", func(c *breakwater.Config) *float64 { return &c.Breaker.Ratio })
	num("min-calls", "failure_rate: calls needed before the ratio counts", func(c *breakwater.Config) *int { return &c.Breaker.MinCalls })
	dur("open-timeout", "how long the breaker first stays open", func(c *breakwater.Config) *breakwater.Duration { return &c.Breaker.OpenTimeout })
	dur("max-open-timeout", "the longest it stays open", func(c *breakwater.Config) *breakwater.Duration { return &c.Breaker.MaxOpenTimeout })
	realPtr("open-jitter", "jitter added to open durations, a fraction", func(c *breakwater.Config) **float64 { return &c.Breaker.Jitter })
	num("half-open-probes", "probes in flight while half-open", func(c *breakwater.Config) *int { return &c.Breaker.HalfOpenProbes })
	num("probe-successes", "successful probes that close it", func(c *breakwater.Config) *int { return &c.Breaker.ProbeSuccesses })
	word("breaker-mode", "enforce, shadow or disabled", func(c *breakwater.Config) *string { return &c.Breaker.Mode })
	on("count-auth-errors", "count 401, 403 and 407 as failures", func(c *breakwater.Config) *bool { return &c.Breaker.CountAuthErrors })
	on("count-throttled", "count 429s as failures", func(c *breakwater.Config) *bool { return &c.Breaker.CountThrottled })
	real("fault-injection", "reject this fraction of admissions", func(c *breakwater.Config) *float64 { return &c.Breaker.FaultInjection })

	real("rate-limit", "requests per second per key", func(c *breakwater.Config) *float64 { return &c.RateLimit.PerSecond })
	num("burst", "the rate limit's burst", func(c *breakwater.Config) *int { return &c.RateLimit.Burst })
	dur("rate-limit-wait", "the longest wait for a token", func(c *breakwater.Config) *breakwater.Duration { return &c.RateLimit.MaxWait })
	num("concurrency", "requests in flight per key", func(c *breakwater.Config) *int { return &c.Concurrency.Limit })
	num("queue", "requests waiting for a slot", func(c *breakwater.Config) *int { return &c.Concurrency.Queue })
	dur("queue-wait", "the longest wait for a slot", func(c *breakwater.Config) *breakwater.Duration { return &c.Concurrency.MaxWait })
	on("no-pause-gate", "do not hold calls while an upstream asks to pause", func(c *breakwater.Config) *bool { return &c.Pause.Off })
	dur("pause-wait", "the longest a call waits for a pause", func(c *breakwater.Config) *breakwater.Duration { return &c.Pause.MaxWait })
	fs.BoolFunc("rate-limit-headers", "pace calls on RateLimit response fields (on by default; =false switches it off)", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		cf.set = append(cf.set, func(c *breakwater.Config) error { c.Pause.RateLimitHeaders = &b; return nil })
		return nil
	})
	return cf
}

// config reads the file, if any, and applies the flags given over it.
func (cf *configFlags) config() (breakwater.Config, error) {
	var c breakwater.Config
	if cf.file != "" {
		data, err := os.ReadFile(cf.file)
		if err != nil {
			return c, err
		}
		if c, err = breakwater.ParseConfig(data); err != nil {
			return c, fmt.Errorf("%s: %s", cf.file, unprefixed(err))
		}
	}
	for _, set := range cf.set {
		if err := set(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// scenarioFlags are the flags of a simulated outage.
type scenarioFlags struct {
	outage                          string
	healthyFor, failFor, retryAfter time.Duration
	attemptTime, think, duration    time.Duration
	interval                        time.Duration
	failureRate, limit              float64
	callers, maxCalls               int
	seed                            uint64
}

func addScenarioFlags(fs *flag.FlagSet) *scenarioFlags {
	sf := &scenarioFlags{}
	fs.StringVar(&sf.outage, "outage", "server_error", "how the upstream fails: server_error (500), timeout (it hangs), network_error, throttled (429) or strict_limiter (429 beyond -limit)")
	fs.DurationVar(&sf.healthyFor, "healthy-for", 0, "how long the upstream answers well before the outage")
	fs.DurationVar(&sf.failFor, "fail-for", 0, "how long the outage lasts (0: it never recovers)")
	fs.Float64Var(&sf.failureRate, "failure-rate", 0, "during the outage, fail only this fraction of attempts")
	fs.DurationVar(&sf.retryAfter, "retry-after", time.Second, "the Retry-After of a throttled or strict_limiter outage")
	fs.Float64Var(&sf.limit, "limit", 10, "the requests per second a strict_limiter outage serves (no burst)")
	fs.DurationVar(&sf.attemptTime, "attempt-time", 0, "how long the upstream takes to answer")
	fs.IntVar(&sf.callers, "callers", 4, "callers making calls at once, each one call after another")
	fs.DurationVar(&sf.think, "think", 100*time.Millisecond, "each caller's pause between its calls")
	fs.DurationVar(&sf.duration, "duration", 0, "simulate this long (0: until the breaker opens or -max-calls; 1m with -svg)")
	fs.IntVar(&sf.maxCalls, "max-calls", 0, "the most calls (default 100 without -duration, unbounded with it)")
	fs.Uint64Var(&sf.seed, "seed", 0, "the seed of every random draw (-failure-rate, -fault-injection): the same flags and seed give the same output")
	fs.DurationVar(&sf.interval, "interval", 0, "the timeline's interval (default: a 60th of the time simulated, at least 100ms)")
	return sf
}

var outages = map[string]breakwater.Category{
	"server_error":  breakwater.ServerError,
	"timeout":       breakwater.Timeout,
	"network_error": breakwater.NetworkError,
	"throttled":     breakwater.Throttled,
	// strictLimiter: a throttled outage that serves -limit requests a
	// second.
	strictLimiter: breakwater.Throttled,
}

const strictLimiter = "strict_limiter"

// scenario builds the Scenario; a timeline needs a duration.
func (sf *scenarioFlags) scenario(drawing bool) (breakwater.Scenario, error) {
	cat, ok := outages[sf.outage]
	if !ok {
		return breakwater.Scenario{}, usageError("unknown -outage %q: want server_error, timeout, network_error, throttled or strict_limiter", sf.outage)
	}
	var limit float64
	if sf.outage == strictLimiter {
		if !(sf.limit > 0) {
			return breakwater.Scenario{}, usageError("-limit must be > 0, got %v", sf.limit)
		}
		limit = sf.limit
	}
	if sf.callers < 1 || sf.maxCalls < 0 || sf.duration < 0 || sf.healthyFor < 0 || sf.failFor < 0 || !(sf.failureRate >= 0 && sf.failureRate <= 1) {
		return breakwater.Scenario{}, usageError("scenario flags out of range: -callers >= 1, -failure-rate in [0, 1], durations >= 0")
	}
	d := sf.duration
	if d == 0 && drawing {
		d = time.Minute
	}
	if sf.interval <= 0 {
		sf.interval = max(100*time.Millisecond, (d / 60).Round(100*time.Millisecond))
		if d == 0 {
			sf.interval = time.Second
		}
	}
	return breakwater.Scenario{
		AttemptTime: sf.attemptTime, HealthyFor: sf.healthyFor, FailFor: sf.failFor, Failure: cat,
		RetryAfter: sf.retryAfter, Limit: limit, FailureRate: sf.failureRate, Seed: sf.seed,
		Callers: sf.callers, Think: sf.think, Duration: d, MaxCalls: sf.maxCalls,
	}, nil
}

// describe says what the scenario is in one line.
func (sf *scenarioFlags) describe(s breakwater.Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d caller", s.Callers)
	if s.Callers != 1 {
		b.WriteString("s")
	}
	if s.Think > 0 {
		fmt.Fprintf(&b, " (%s apart)", seconds(s.Think))
	}
	b.WriteString(", upstream ")
	if s.HealthyFor > 0 {
		fmt.Fprintf(&b, "healthy for %s, then ", seconds(s.HealthyFor))
	}
	what := map[breakwater.Category]string{breakwater.ServerError: "500s", breakwater.Timeout: "hangs", breakwater.NetworkError: "refused connections", breakwater.Throttled: "429s"}[s.Failure]
	if s.Limit > 0 {
		what = fmt.Sprintf("a strict limiter of %s/s (429 + Retry-After %s beyond it)", strconv.FormatFloat(s.Limit, 'f', -1, 64), seconds(s.RetryAfter))
	}
	if s.FailureRate > 0 && s.FailureRate < 1 {
		fmt.Fprintf(&b, "%.0f%% %s", 100*s.FailureRate, what)
	} else {
		b.WriteString(what)
	}
	if s.FailFor > 0 {
		fmt.Fprintf(&b, " for %s, then healthy", seconds(s.FailFor))
	} else {
		b.WriteString(" for good")
	}
	if s.AttemptTime > 0 {
		fmt.Fprintf(&b, "; answers take %s", seconds(s.AttemptTime))
	}
	return b.String()
}
