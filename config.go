package breakwater

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Config is a [Transport]'s configuration as data: the one schema that
// JSON files, the breakwater command's flags and Go code share, so that a
// configuration checked in CI with `breakwater check` is the one a program
// runs. A Config is an [Option]: NewTransport(cfg, more...) applies the
// fields that are set over the defaults, and options after it win.
//
// A zero field keeps the default; the zero Config is the default
// configuration. Durations are strings in JSON ("250ms", "1.5s", "2m");
// "off" (a negative [Duration] in Go) switches a timeout off. Names
// (backoff, policy, mode, categories) are lower-case words. An invalid
// value is reported by [NewTransport] with every other invalid option.
//
// The JSON schema, with the defaults:
//
//	{
//	  "call_timeout": "30s",          // whole call, retries included; "off" to disable
//	  "attempt_timeout": "10s",       // one attempt, body included, at most the call timeout (its default when shorter); "off" to disable
//	  "slow_call_threshold": "off",   // a slower success counts as a failure
//	  "max_retry_after": "2m",        // longest server hint honoured; caps pauses
//	  "retry": {
//	    "max_attempts": 3,
//	    "backoff": "exponential_jitter", // or decorrelated_jitter, linear, constant
//	    "base": "100ms", "max": "5s",    // "step" too for linear
//	    "non_idempotent": false,         // retry POST and PATCH too
//	    "charge_per_attempt": false,     // charge the breaker per failing attempt
//	    "budget": {"ratio": 0.2, "floor": 3, "window": "10s", "off": false}
//	  },
//	  "breaker": {
//	    "policy": "",                 // "": the default (a volume-aware window); window, consecutive, failure_rate
//	    "tolerate": 10, "within": "", // window: opens on the tolerate+1-th failure within,
//	    "ratio": 0.5,                 // once that share of the calls failed (0: any share)
//	    "threshold": 5,               // consecutive: opens on the n-th failure in a row
//	    "category_thresholds": {"timeout": 5}, // window, consecutive: sooner for some categories
//	    "min_calls": 20,              // failure_rate: ratio of at least min_calls over within
//	    "open_timeout": "5s", "max_open_timeout": "60s", "jitter": 0.1,
//	    "half_open_probes": 1, "probe_successes": 2,
//	    "mode": "enforce",            // or shadow, disabled
//	    "count_auth_errors": false, "count_throttled": false,
//	    "fault_injection": 0
//	  },
//	  "rate_limit": {"per_second": 0, "burst": 0, "max_wait": "5s"}, // none by default
//	  "concurrency": {"limit": 0, "queue": 0, "max_wait": "5s"},    // none by default; queue 0: no bound but the wait
//	  "pause": {"off": false, "max_wait": "", "rate_limit_headers": true} // capped by max_retry_after
//	}
//
// A Config is a plain value: it is safe to copy, and safe for concurrent
// use as long as nobody modifies it.
type Config struct {
	CallTimeout    Duration `json:"call_timeout,omitzero"`
	AttemptTimeout Duration `json:"attempt_timeout,omitzero"`
	SlowCall       Duration `json:"slow_call_threshold,omitzero"`
	MaxRetryAfter  Duration `json:"max_retry_after,omitzero"`

	Retry struct {
		MaxAttempts int `json:"max_attempts,omitzero"`
		// Backoff names the backoff: exponential_jitter (the default),
		// decorrelated_jitter, linear or constant; Base, Max
		// and Step (linear) are its durations (constant uses Base).
		Backoff          string   `json:"backoff,omitzero"`
		Base             Duration `json:"base,omitzero"`
		Max              Duration `json:"max,omitzero"`
		Step             Duration `json:"step,omitzero"`
		NonIdempotent    bool     `json:"non_idempotent,omitzero"`
		ChargePerAttempt bool     `json:"charge_per_attempt,omitzero"`
		// Budget is the retry budget; unset fields (nil Ratio and Floor)
		// keep their defaults, and Off removes it.
		Budget struct {
			Off    bool     `json:"off,omitzero"`
			Ratio  *float64 `json:"ratio,omitempty"`
			Floor  *float64 `json:"floor,omitempty"`
			Window Duration `json:"window,omitzero"`
		} `json:"budget,omitzero"`
	} `json:"retry,omitzero"`

	Breaker struct {
		// Policy names the counting policy: "" keeps the default, window,
		// consecutive or failure_rate take the fields below as they are
		// (Tolerate 0 opens a window policy on the first failure). Ratio
		// makes a window volume-aware ([Policy.WithRatio]) and is a
		// failure rate's threshold.
		Policy             string         `json:"policy,omitzero"`
		Tolerate           int            `json:"tolerate,omitzero"`
		Within             Duration       `json:"within,omitzero"`
		Threshold          int            `json:"threshold,omitzero"`
		CategoryThresholds map[string]int `json:"category_thresholds,omitzero"`
		Ratio              float64        `json:"ratio,omitzero"`
		MinCalls           int            `json:"min_calls,omitzero"`
		OpenTimeout        Duration       `json:"open_timeout,omitzero"`
		MaxOpenTimeout     Duration       `json:"max_open_timeout,omitzero"`
		// Jitter is a fraction of the open duration; nil keeps the
		// default and 0 disables it.
		Jitter          *float64 `json:"jitter,omitempty"`
		HalfOpenProbes  int      `json:"half_open_probes,omitzero"`
		ProbeSuccesses  int      `json:"probe_successes,omitzero"`
		Mode            string   `json:"mode,omitzero"`
		CountAuthErrors bool     `json:"count_auth_errors,omitzero"`
		CountThrottled  bool     `json:"count_throttled,omitzero"`
		FaultInjection  float64  `json:"fault_injection,omitzero"`
	} `json:"breaker,omitzero"`

	// RateLimit adds a token bucket per key when PerSecond > 0 (Burst
	// defaults to 1); MaxWait 0 keeps the default wait, "off" rejects at
	// once.
	RateLimit struct {
		PerSecond float64  `json:"per_second,omitzero"`
		Burst     int      `json:"burst,omitzero"`
		MaxWait   Duration `json:"max_wait,omitzero"`
	} `json:"rate_limit,omitzero"`

	// Concurrency adds a bulkhead per key when Limit > 0, with a wait
	// queue of Queue requests (0: no bound but the wait) waiting up to
	// MaxWait each; MaxWait 0 keeps the default wait, "off" rejects at
	// once.
	Concurrency struct {
		Limit   int      `json:"limit,omitzero"`
		Queue   int      `json:"queue,omitzero"`
		MaxWait Duration `json:"max_wait,omitzero"`
	} `json:"concurrency,omitzero"`

	// Congestion configures the congestion limit, on by default: Off
	// switches it off ([WithoutCongestionLimit]).
	Congestion struct {
		Off bool `json:"off,omitzero"`
	} `json:"congestion,omitzero"`

	// Pause configures the pause gate, on by default.
	Pause struct {
		Off     bool     `json:"off,omitzero"`
		MaxWait Duration `json:"max_wait,omitzero"`
		// RateLimitHeaders, when set, switches pacing on rate limit fields
		// on or off (see [WithRateLimitHeaders]); nil keeps the default.
		RateLimitHeaders *bool `json:"rate_limit_headers,omitempty"`
	} `json:"pause,omitzero"`
}

// ParseConfig reads a JSON [Config] strictly: an unknown field, a field
// given twice in one object (at any depth, map keys included), a field
// name that matches only without regard to case ("CALL_TIMEOUT"), a
// second value or a malformed duration is an error naming it, so a typo
// in a checked-in file fails CI instead of silently keeping a default or
// overriding a value. A malformed duration is reported by its field's
// JSON path, such as `retry.base: time: invalid duration "5x"`.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := badDuration(data); err != nil {
		return Config{}, fmt.Errorf("breakwater: config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("breakwater: config: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errors.New("breakwater: config: data after the JSON object")
	}
	if err := checkNames(json.NewDecoder(bytes.NewReader(data)), reflect.TypeFor[Config](), ""); err != nil {
		return Config{}, fmt.Errorf("breakwater: config: %w", err)
	}
	return c, nil
}

// checkNames reads one JSON value of type t from dec and reports the first
// field name given twice in one object, or matching a field of t only
// without regard to case: encoding/json accepts both, the last value
// winning, so that {"call_timeout":"1s","CALL_TIMEOUT":"60s"} would run
// with 60 s. Map keys given twice are refused too. path names the value,
// for the error. The data is valid JSON of the right shape (ParseConfig
// decoded it first).
func checkNames(dec *json.Decoder, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') || t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
		return skipValue(dec, tok)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		field := path + name
		if seen[name] {
			return fmt.Errorf("field %q is given twice", field)
		}
		seen[name] = true
		elem := t
		if t.Kind() == reflect.Map {
			elem = t.Elem()
		} else if f, exact, ok := jsonField(t, name); !ok {
			elem = reflect.TypeFor[any]() // unknown: the decoder refused it already
		} else if !exact {
			return fmt.Errorf("field %q is spelt %q: field names are case-sensitive", field, path+f.name)
		} else {
			elem = f.typ
		}
		if err := checkNames(dec, elem, field+"."); err != nil {
			return err
		}
	}
	_, err = dec.Token() // '}'
	return err
}

// jsonField finds the field of struct t that encoding/json would decode
// name into: exact reports whether name is its name as spelt.
func jsonField(t reflect.Type, name string) (f struct {
	name string
	typ  reflect.Type
}, exact, ok bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		if tag == "" {
			tag = sf.Name
		}
		if tag == name {
			f.name, f.typ = tag, sf.Type
			return f, true, true
		}
		if !ok && strings.EqualFold(tag, name) {
			f.name, f.typ, ok = tag, sf.Type, true
		}
	}
	return f, false, ok
}

// skipValue reads the rest of the JSON value whose first token is tok.
func skipValue(dec *json.Decoder, tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// apply makes a Config an Option of [NewTransport]: every field that is
// set becomes the option it names, and invalid values become construction
// errors.
func (c Config) apply(s *settings) {
	s.applyConfig(c.options(&s.errs))
}

func (c Config) options(errs *[]error) []Option {
	var opts []Option
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("breakwater: config: "+format, args...))
	}
	timeout := func(d Duration, with func(time.Duration) Option) {
		switch {
		case d < 0:
			opts = append(opts, with(0))
		case d > 0:
			opts = append(opts, with(time.Duration(d)))
		}
	}
	timeout(c.CallTimeout, WithCallTimeout)
	timeout(c.AttemptTimeout, WithAttemptTimeout)
	timeout(c.SlowCall, WithSlowCallThreshold)
	if c.MaxRetryAfter > 0 {
		opts = append(opts, WithMaxRetryAfter(time.Duration(c.MaxRetryAfter)))
	}
	opts = append(opts, c.retryOptions(fail)...)
	opts = append(opts, c.breakerOptions(fail)...)
	return append(opts, c.limitOptions(fail)...)
}

func (c Config) retryOptions(fail func(string, ...any)) []Option {
	r := &c.Retry
	var opts []Option
	if r.MaxAttempts != 0 {
		opts = append(opts, WithMaxAttempts(r.MaxAttempts))
	}
	if r.Backoff != "" || r.Base != 0 || r.Max != 0 || r.Step != 0 {
		base, limit := orDefault(time.Duration(r.Base), defaultBackoffBase), orDefault(time.Duration(r.Max), defaultBackoffMax)
		switch r.Backoff {
		case "", "exponential_jitter":
			opts = append(opts, WithBackoff(ExponentialJitter(base, limit)))
		case "decorrelated_jitter":
			opts = append(opts, WithBackoff(DecorrelatedJitter(base, limit)))
		case "linear":
			opts = append(opts, WithBackoff(Linear(base, orDefault(time.Duration(r.Step), base), limit)))
		case "constant":
			opts = append(opts, WithBackoff(Constant(base)))
		default:
			fail("unknown backoff %q (want exponential_jitter, decorrelated_jitter, linear or constant)", r.Backoff)
		}
	}
	if r.NonIdempotent {
		opts = append(opts, WithRetryNonIdempotent(true))
	}
	if r.ChargePerAttempt {
		opts = append(opts, WithChargePerAttempt(true))
	}
	switch b := r.Budget; {
	case b.Off:
		opts = append(opts, WithoutRetryBudget())
	case b.Ratio != nil || b.Floor != nil || b.Window != 0:
		ratio, floor := float64(defaultRetryBudgetRatio), float64(defaultRetryBudgetFloor)
		if b.Ratio != nil {
			ratio = *b.Ratio
		}
		if b.Floor != nil {
			floor = *b.Floor
		}
		opts = append(opts, WithRetryBudget(ratio, floor, orDefault(time.Duration(b.Window), defaultRetryBudgetWindow)))
	}
	return opts
}

func (c Config) breakerOptions(fail func(string, ...any)) []Option {
	b := &c.Breaker
	var opts []Option
	var p Policy
	switch b.Policy {
	case "":
		if b.Tolerate != 0 || b.Within != 0 || b.Threshold != 0 || len(b.CategoryThresholds) > 0 || b.Ratio != 0 || b.MinCalls != 0 {
			fail("breaker policy parameters need a policy name (window, consecutive or failure_rate)")
		}
	case "window":
		p = Window(b.Tolerate, time.Duration(b.Within))
		if b.Ratio != 0 {
			p = p.WithRatio(b.Ratio)
		}
	case "consecutive":
		p = Consecutive(b.Threshold)
	case "failure_rate":
		p = FailureRate(b.Ratio, b.MinCalls, time.Duration(b.Within))
	default:
		fail("unknown breaker policy %q (want window, consecutive or failure_rate)", b.Policy)
	}
	// Category thresholds go on any policy; the breakers' validation says
	// which take them.
	for name, n := range b.CategoryThresholds {
		cat, ok := categoryNamed(name)
		if !ok {
			fail("unknown category %q in category_thresholds", name)
			continue
		}
		p = p.WithCategoryThreshold(cat, n)
	}
	if b.Policy != "" {
		opts = append(opts, WithPolicy(p))
	}
	if b.OpenTimeout != 0 || b.MaxOpenTimeout != 0 {
		base := orDefault(time.Duration(b.OpenTimeout), defaultOpenTimeout)
		opts = append(opts, WithOpenTimeout(base, orDefault(time.Duration(b.MaxOpenTimeout), max(base, defaultMaxOpenTimeout))))
	}
	if b.Jitter != nil {
		opts = append(opts, WithOpenJitter(*b.Jitter))
	}
	if b.HalfOpenProbes != 0 || b.ProbeSuccesses != 0 {
		probes, ok := b.HalfOpenProbes, b.ProbeSuccesses
		if probes == 0 {
			probes = defaultHalfOpenProbes
		}
		if ok == 0 {
			ok = defaultProbeSuccesses
		}
		opts = append(opts, WithHalfOpen(probes, ok))
	}
	switch b.Mode {
	case "", "enforce":
	case "shadow":
		opts = append(opts, WithShadowMode(true))
	case "disabled":
		opts = append(opts, WithoutBreaker())
	default:
		fail("unknown breaker mode %q (want enforce, shadow or disabled)", b.Mode)
	}
	if b.CountAuthErrors {
		opts = append(opts, WithCountAsFailure(AuthError))
	}
	if b.CountThrottled {
		opts = append(opts, WithCountAsFailure(Throttled))
	}
	if b.FaultInjection != 0 {
		opts = append(opts, WithFaultInjection(b.FaultInjection))
	}
	return opts
}

func (c Config) limitOptions(fail func(string, ...any)) []Option {
	var opts []Option
	if r := c.RateLimit; r.PerSecond != 0 || r.Burst != 0 || r.MaxWait != 0 {
		if r.PerSecond <= 0 {
			fail("rate_limit needs per_second > 0, got %v", r.PerSecond)
		} else {
			var ro []Option
			switch {
			case r.MaxWait < 0:
				ro = append(ro, WithMaxWait(0))
			case r.MaxWait > 0:
				ro = append(ro, WithMaxWait(time.Duration(r.MaxWait)))
			}
			opts = append(opts, WithRateLimit(rate.Limit(r.PerSecond), max(1, r.Burst), ro...))
		}
	}
	if k := c.Concurrency; k.Limit != 0 || k.Queue != 0 || k.MaxWait != 0 {
		var bo []Option
		if k.Queue != 0 {
			bo = append(bo, WithMaxQueue(k.Queue))
		}
		switch {
		case k.MaxWait < 0:
			bo = append(bo, WithMaxWait(0))
		case k.MaxWait > 0:
			bo = append(bo, WithMaxWait(time.Duration(k.MaxWait)))
		}
		opts = append(opts, WithConcurrencyLimit(k.Limit, bo...))
	}
	if c.Congestion.Off {
		opts = append(opts, WithoutCongestionLimit())
	}
	p := c.Pause
	if p.Off {
		opts = append(opts, WithoutPauseGate()) // with max_wait or rate_limit_headers, a contradiction
	}
	switch {
	case p.MaxWait < 0:
		opts = append(opts, WithMaxWait(0))
	case p.MaxWait > 0:
		opts = append(opts, WithMaxWait(time.Duration(p.MaxWait)))
	}
	if p.RateLimitHeaders != nil {
		opts = append(opts, WithRateLimitHeaders(*p.RateLimitHeaders))
	}
	return opts
}

// categoryNamed returns the category whose String form is name.
func categoryNamed(name string) (Category, bool) {
	for i, n := range categoryNames {
		if n == name {
			return Category(i), true
		}
	}
	return 0, false
}

// Duration is a [time.Duration] that reads and writes itself as text:
// "1.5s", "250ms", "2m" in JSON and flags, as [time.ParseDuration] reads
// them, and "off" for a negative Duration, which switches a timeout off
// where a [Config] allows it.
type Duration time.Duration

// MarshalText writes d as time.Duration's String form, or "off" when d is
// negative.
func (d Duration) MarshalText() ([]byte, error) {
	if d < 0 {
		return []byte("off"), nil
	}
	return []byte(time.Duration(d).String()), nil
}

// UnmarshalText reads a duration such as "1.5s", or "off".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return fmt.Errorf("breakwater: %w", err)
	}
	*d = v
	return nil
}

// parseDuration reads a Duration's text form.
func parseDuration(text string) (Duration, error) {
	s := strings.TrimSpace(text)
	if s == "off" {
		return -1, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w (want a duration such as 1.5s, or off)", err)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative; write off to switch it off", s)
	}
	return Duration(v), nil
}

// badDuration reports the first malformed duration in a JSON Config by
// its field's path ("retry.base"), which encoding/json does not give an
// UnmarshalText error. It walks Config's type beside the decoded JSON;
// anything else wrong is left to the strict decoder.
func badDuration(data []byte) error {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return durationsIn(reflect.TypeFor[Config](), v, "")
}

func durationsIn(t reflect.Type, v any, path string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		for key, fv := range obj {
			if !strings.EqualFold(key, name) { // as encoding/json matches names
				continue
			}
			p := key
			if path != "" {
				p = path + "." + key
			}
			switch s, isString := fv.(string); {
			case f.Type == reflect.TypeFor[Duration]() && isString:
				if _, err := parseDuration(s); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			case f.Type.Kind() == reflect.Struct:
				if err := durationsIn(f.Type, fv, p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
