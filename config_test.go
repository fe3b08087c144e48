package breakwater_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"golang.org/x/time/rate"
)

// A Config and the options it names build the same transport: Explain
// reads every resolved setting, so equal texts mean equal configurations.
func TestConfigMatchesOptions(t *testing.T) {
	jitter := 0.0
	for _, tc := range []struct {
		name string
		json string
		opts []bw.Option
	}{
		{"zero is the default", `{}`, nil},
		{"timeouts", `{"call_timeout":"2s","attempt_timeout":"500ms"}`,
			[]bw.Option{bw.WithCallTimeout(2 * time.Second), bw.WithAttemptTimeout(500 * time.Millisecond)}},
		{"timeouts off", `{"call_timeout":"off","attempt_timeout":"off"}`,
			[]bw.Option{bw.WithCallTimeout(0), bw.WithAttemptTimeout(0)}},
		{"retry", `{"retry":{"max_attempts":5,"backoff":"constant","base":"250ms","budget":{"off":true},"charge_per_attempt":true,"non_idempotent":true}}`,
			[]bw.Option{bw.WithMaxAttempts(5), bw.WithBackoff(bw.Constant(250 * time.Millisecond)), bw.WithoutRetryBudget(), bw.WithChargePerAttempt(true), bw.WithRetryNonIdempotent(true)}},
		{"linear backoff and a budget", `{"retry":{"backoff":"linear","base":"100ms","step":"50ms","max":"1s","budget":{"ratio":0.5,"floor":0}}}`,
			[]bw.Option{bw.WithBackoff(bw.Linear(100*time.Millisecond, 50*time.Millisecond, time.Second)), bw.WithRetryBudget(0.5, 0, 10*time.Second)}},
		{"consecutive with a category threshold", `{"breaker":{"policy":"consecutive","threshold":5,"category_thresholds":{"server_error":2}}}`,
			[]bw.Option{bw.WithPolicy(bw.Consecutive(5).WithCategoryThreshold(bw.ServerError, 2))}},
		{"window", `{"breaker":{"policy":"window","tolerate":0,"within":"20s","open_timeout":"1s","max_open_timeout":"4s","jitter":0,"half_open_probes":3}}`,
			[]bw.Option{bw.WithPolicy(bw.Window(0, 20*time.Second)), bw.WithOpenTimeout(time.Second, 4*time.Second), bw.WithOpenJitter(jitter), bw.WithHalfOpen(3, 2)}},
		{"volume-aware window", `{"breaker":{"policy":"window","tolerate":10,"ratio":0.5,"category_thresholds":{"timeout":5}}}`,
			[]bw.Option{bw.WithPolicy(bw.Window(10, 0).WithRatio(0.5).WithCategoryThreshold(bw.Timeout, 5))}},
		{"failure rate in shadow mode", `{"breaker":{"policy":"failure_rate","ratio":0.5,"min_calls":20,"within":"30s","mode":"shadow"}}`,
			[]bw.Option{bw.WithPolicy(bw.FailureRate(0.5, 20, 30*time.Second)), bw.WithShadowMode(true)}},
		{"disabled breaker", `{"breaker":{"mode":"disabled"}}`,
			[]bw.Option{bw.WithoutBreaker()}},
		{"limits", `{"rate_limit":{"per_second":50,"burst":5},"concurrency":{"limit":8,"queue":16,"max_wait":"1s"},"pause":{"off":true}}`,
			[]bw.Option{bw.WithRateLimit(rate.Limit(50), 5), bw.WithConcurrencyLimit(8, bw.WithMaxQueue(16), bw.WithMaxWait(time.Second)), bw.WithoutPauseGate()}},
		{"no congestion limit", `{"congestion":{"off":true}}`,
			[]bw.Option{bw.WithoutCongestionLimit()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := bw.ParseConfig([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			fromCfg, err := bw.NewTransport(cfg)
			if err != nil {
				t.Fatal(err)
			}
			fromOpts, err := bw.NewTransport(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fromCfg.Explain(), fromOpts.Explain(); got != want {
				t.Fatalf("config explains as\n%s\noptions as\n%s", got, want)
			}
		})
	}
}

// A typo in a checked-in file is an error, not a silent default.
func TestParseConfigIsStrict(t *testing.T) {
	for _, in := range []string{
		`{"call_timout":"2s"}`,
		`{"call_timeout":2000000000}`,
		`{"call_timeout":"2 seconds"}`,
		`{"call_timeout":"-2s"}`,
		`{"retry":{"max_attempts":"3"}}`,
		`{} {}`,
		`[]`,
	} {
		if _, err := bw.ParseConfig([]byte(in)); err == nil {
			t.Errorf("ParseConfig(%s) accepted it", in)
		}
	}
}

// A field given twice, or under another case, is an error naming it, at
// any depth: encoding/json alone would let the last value win.
func TestParseConfigRefusesDuplicateAndMiscasedNames(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{`{"call_timeout":"1s","CALL_TIMEOUT":"60s"}`, `"CALL_TIMEOUT" is spelt "call_timeout"`},
		{`{"CALL_TIMEOUT":"60s"}`, `"CALL_TIMEOUT" is spelt "call_timeout"`},
		{`{"call_timeout":"1s","call_timeout":"60s"}`, `"call_timeout" is given twice`},
		{`{"retry":{"max_attempts":2,"Max_Attempts":9}}`, `"retry.Max_Attempts" is spelt "retry.max_attempts"`},
		{`{"retry":{"budget":{"ratio":0.1,"ratio":0.9}}}`, `"retry.budget.ratio" is given twice`},
		{`{"Retry":{"max_attempts":2}}`, `"Retry" is spelt "retry"`},
		{`{"retry":{},"retry":{"max_attempts":9}}`, `"retry" is given twice`},
		{`{"breaker":{"category_thresholds":{"timeout":2,"timeout":9}}}`, `"breaker.category_thresholds.timeout" is given twice`},
		{`{"pause":{"rate_limit_headers":true,"RATE_LIMIT_HEADERS":false}}`, `"pause.RATE_LIMIT_HEADERS" is spelt "pause.rate_limit_headers"`},
	} {
		_, err := bw.ParseConfig([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("ParseConfig(%s): %v, want an error with %s", tc.in, err, tc.field)
		}
	}
	// Distinct fields and keys, nested objects and arrays of values pass.
	cfg, err := bw.ParseConfig([]byte(`{"call_timeout":"1s","retry":{"max_attempts":2,"budget":{"ratio":0.1}},"breaker":{"category_thresholds":{"timeout":2,"network_error":3}},"attempt_timeout":"500ms"}`))
	if err != nil || cfg.CallTimeout != bw.Duration(time.Second) || cfg.Retry.MaxAttempts != 2 || cfg.Breaker.CategoryThresholds["network_error"] != 3 {
		t.Fatalf("%+v, %v", cfg, err)
	}
}

// A malformed duration is reported by its field's JSON path, as the file
// spells it, with what was wrong with it.
func TestParseConfigNamesBadDuration(t *testing.T) {
	for in, want := range map[string]string{
		`{"retry": {"base": "5x"}}`:                                    `breakwater: config: retry.base: time: unknown unit "x" in duration "5x"`,
		`{"call_timeout": "2 seconds"}`:                                `breakwater: config: call_timeout: time: `,
		`{"retry": {"budget": {"window": "-1m"}}}`:                     `breakwater: config: retry.budget.window: duration "-1m" is negative`,
		`{"Breaker": {"open_timeout": "1s", "Max_Open_Timeout": "x"}}`: `breakwater: config: Breaker.Max_Open_Timeout: time: invalid duration "x"`,
		`{"concurrency": {"max_wait": "1d"}}`:                          `concurrency.max_wait: time: unknown unit "d"`,
	} {
		_, err := bw.ParseConfig([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s): %v, want %q", in, err, want)
		}
		if err != nil && strings.Count(err.Error(), "breakwater:") != 1 {
			t.Errorf("ParseConfig(%s): %v, want one prefix", in, err)
		}
	}
	// Durations that are right, and values that are not durations, are
	// left to the decoder.
	if _, err := bw.ParseConfig([]byte(`{"retry": {"base": "5ms", "max": "off"}, "call_timeout": "2s"}`)); err != nil {
		t.Error(err)
	}
	if _, err := bw.ParseConfig([]byte(`{"retry": {"base": 5}}`)); err == nil || !strings.Contains(err.Error(), "retry.base") {
		t.Errorf("a number for a duration: %v", err)
	}
}

// Every invalid value is reported at once, by NewTransport, with the
// other invalid options.
func TestConfigErrorsAreJoined(t *testing.T) {
	cfg, err := bw.ParseConfig([]byte(`{
		"retry": {"backoff": "fibonacci", "max_attempts": -1},
		"breaker": {"policy": "sometimes", "mode": "loud", "category_thresholds": {"teapot": 1}},
		"rate_limit": {"burst": 3}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.NewTransport(mustParse(t, `{"breaker":{"policy":"failure_rate","ratio":0.5,"min_calls":5,"within":"10s","category_thresholds":{"timeout":2}}}`)); err == nil {
		t.Error("category thresholds on a failure rate accepted")
	}
	_, err = bw.NewTransport(cfg, bw.WithCallTimeout(-time.Second))
	if err == nil {
		t.Fatal("NewTransport accepted an invalid config")
	}
	for _, want := range []string{"fibonacci", "max attempts", "sometimes", "loud", "teapot", "per_second", "timeouts must be"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// Options after a Config win over it.
func TestConfigThenOptions(t *testing.T) {
	var cfg bw.Config
	cfg.Retry.MaxAttempts = 5
	tr, err := bw.NewTransport(cfg, bw.WithMaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tr.Explain(), "up to 2\n") {
		t.Fatalf("a later option did not win:\n%s", tr.Explain())
	}
}

func TestConfigRoundTrip(t *testing.T) {
	in := `{"call_timeout":"off","attempt_timeout":"1.5s","retry":{"max_attempts":4,"budget":{"floor":1}},"breaker":{"policy":"window","within":"1m0s","jitter":0},"pause":{"max_wait":"off"}}`
	cfg, err := bw.ParseConfig([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("round trip:\n got %s\nwant %s", out, in)
	}
}

// A Config is the schema of a checked-in file; the same value configures a
// Transport directly.
func ExampleParseConfig() {
	cfg, err := bw.ParseConfig([]byte(`{
		"call_timeout": "2s",
		"attempt_timeout": "500ms",
		"retry": {"max_attempts": 4},
		"breaker": {"policy": "consecutive", "threshold": 5}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := bw.NewTransport(cfg, bw.WithoutRetryBudget())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(tr.Explain(), "\n") {
		if strings.Contains(line, "opens after") {
			fmt.Println(strings.Join(strings.Fields(line), " "))
		}
	}
	// Output: opens after 5 consecutive failures
}

func mustParse(t *testing.T, s string) bw.Config {
	t.Helper()
	c, err := bw.ParseConfig([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
