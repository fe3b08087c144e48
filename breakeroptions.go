package breakwater

import (
	"errors"
	"fmt"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// breakerMode says what a breaker does with its verdicts.
type breakerMode uint8

const (
	modeEnforce  breakerMode = iota // an open breaker rejects attempts
	modeShadow                      // counts what it would reject, rejects nothing
	modeDisabled                    // no breaker: no state, nothing rejected
)

// Defaults of a breaker; the package documentation lists them all.
const (
	defaultOpenTimeout    = 100 * time.Millisecond
	defaultMaxOpenTimeout = 60 * time.Second
	defaultOpenJitter     = 0.10
	defaultHalfOpenProbes = 1
	defaultProbeSuccesses = 2
	defaultProbeTimeout   = 10 * time.Second
)

type breakerConfig struct {
	policy         Policy
	openTimeout    time.Duration
	maxOpenTimeout time.Duration
	jitter         float64
	maxProbes      int
	successes      int
	probeTimeout   time.Duration
	probeSet       bool // WithProbeTimeout was given
	countAuth      bool
	countThrottled bool
	mode           breakerMode
	faultRate      float64
	maxKeys        int
	idleTTL        time.Duration
	listeners      []func(Transition)
	autoWithin     bool // the Window's within was left to be sized
	bus            ClusterBus
	errs           []error // of the options
}

// newBreakerConfig returns the breakers' defaults.
func newBreakerConfig() breakerConfig {
	return breakerConfig{
		policy:         defaultPolicy,
		openTimeout:    defaultOpenTimeout,
		maxOpenTimeout: defaultMaxOpenTimeout,
		jitter:         defaultOpenJitter,
		maxProbes:      defaultHalfOpenProbes,
		successes:      defaultProbeSuccesses,
		probeTimeout:   defaultProbeTimeout,
		maxKeys:        defaultMaxKeys,
		idleTTL:        defaultIdleTTL,
	}
}

// breakerOption is an option of the breakers: those of [NewBreakers], or
// a Transport's own.
func breakerOption(name string, fn func(*breakerConfig)) Option {
	return option(func(s *settings) {
		if c := s.forBreaker(name); c != nil {
			fn(c)
		}
	})
}

// WithPolicy sets the counting policy. Default: the volume-aware
// Window(10, auto).WithRatio(0.5).WithCategoryThreshold(Timeout, 5), which
// opens on the 11th failing call within the window (the 5th, when it timed
// out) once at least half of the calls made since the first of them
// failed: a total outage opens it as fast as Window(10, auto) does, and a
// failure rate that retries absorb never does. The window is sized from
// the retry plan by a [Transport] (at least 10 s). Window(10, …) without a
// ratio keeps the exact contract of a count (see [Window]). It configures
// the breakers of [NewTransport] and [NewBreakers].
func WithPolicy(p Policy) Option {
	return breakerOption("WithPolicy", func(c *breakerConfig) { c.policy = p })
}

// WithOpenTimeout sets how long an opening lasts while the outage is
// young (base) and the longest it may last (max). Between the two, each
// opening after a failed probe lasts a 32nd of the outage's age, the time
// since its first opening: probes come every base at first and ever more
// rarely as the outage goes on, so that a recovery is noticed within about
// 3 % of the outage's age (never more than a tenth of it once that is 10
// base or longer), while a dead key costs about 22 probes per doubling of
// its age, one every 1.9 s after a minute with the defaults. A closed
// breaker forgets the outage. A 429's hint sets the opening instead. It
// configures the breakers of [NewTransport] and [NewBreakers]. Defaults:
// 100 ms and 60 s.
func WithOpenTimeout(base, max time.Duration) Option {
	return breakerOption("WithOpenTimeout", func(c *breakerConfig) { c.openTimeout, c.maxOpenTimeout = base, max })
}

// WithOpenJitter sets the jitter of each open duration as a fraction of
// it: 0.1 shortens it by up to 10 % (so that a probe never comes later
// than the cadence of [WithOpenTimeout] promises), or lengthens an opening
// set by a server's hint by up to 10 % (never before the hint ends); 0
// switches jitter off. It configures
// the breakers of [NewTransport] and [NewBreakers]. Default: 0.1.
func WithOpenJitter(fraction float64) Option {
	return breakerOption("WithOpenJitter", func(c *breakerConfig) { c.jitter = fraction })
}

// WithHalfOpen sets how many probes may be in flight when a breaker turns
// half-open (at most 1024) and how many successful probes close it. Each
// successful probe doubles the probes let through at once (a ramp, as
// TCP's slow start: one probe, then two, four, …, up to 1024). A call
// that finds every probe slot taken waits for a probe's answer, up to a
// quarter of the time its deadline leaves and at most 1 s, and is then let
// through or refused as the answer says; a breaker open again refuses it
// at once. It
// configures the breakers of [NewTransport] and [NewBreakers]. Defaults: 1
// and 2.
func WithHalfOpen(maxProbes, successes int) Option {
	return breakerOption("WithHalfOpen", func(c *breakerConfig) { c.maxProbes, c.successes = maxProbes, successes })
}

// WithProbeTimeout sets how long a half-open probe's lease may be held
// before it is reclaimed (a probe whose outcome never arrives). It
// configures the breakers of [NewTransport] and [NewBreakers]. Default: a
// Transport's attempt timeout, 10 s for [NewBreakers].
func WithProbeTimeout(d time.Duration) Option {
	return breakerOption("WithProbeTimeout", func(c *breakerConfig) { c.probeTimeout, c.probeSet = d, true })
}

// WithCountAsFailure makes the breakers count the outcomes of the given
// categories as failures besides the default ones: [AuthError] (401, 403
// and 407 are successes by default: the upstream answered) and
// [Throttled] (neutral by default: the pause gate's business). A breaker
// opened by a throttled outcome that carried a Retry-After hint stays open
// for the hint (capped by the maximum open timeout) and closes after a
// single successful probe. Other categories are a construction error. It
// configures the breakers of [NewTransport] and [NewBreakers].
func WithCountAsFailure(cats ...Category) Option {
	return breakerOption("WithCountAsFailure", func(c *breakerConfig) {
		for _, cat := range cats {
			switch cat {
			case AuthError:
				c.countAuth = true
			case Throttled:
				c.countThrottled = true
			default:
				c.errs = append(c.errs, fmt.Errorf("breakwater: WithCountAsFailure takes auth_error and throttled, got %s", cat))
			}
		}
	})
}

// WithShadowMode, when on, runs the breakers' state machine and counts
// what they would have rejected ([BreakerSnapshot.ShadowRejections]), but
// rejects nothing: a way to try a policy on live traffic. It configures the
// breakers of [NewTransport] and [NewBreakers]. Default: off.
func WithShadowMode(on bool) Option {
	return breakerOption("WithShadowMode", func(c *breakerConfig) {
		if on {
			c.mode = modeShadow
		} else {
			c.mode = modeEnforce
		}
	})
}

// WithFaultInjection makes closed breakers reject the given fraction
// (0 < rate <= 1) of admissions with [ErrCircuitOpen] (an [*Error] whose
// Injected is set), without calling the upstream: a way to rehearse an
// outage. It configures the breakers of [NewTransport] and [NewBreakers].
// Default: 0, none.
func WithFaultInjection(rate float64) Option {
	return breakerOption("WithFaultInjection", func(c *breakerConfig) { c.faultRate = rate })
}

func (c *breakerConfig) validate() error {
	errs := append([]error{c.policy.validate()}, c.errs...)
	if c.openTimeout <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: open timeout must be > 0, got %s", c.openTimeout))
	}
	if c.maxOpenTimeout < c.openTimeout {
		errs = append(errs, fmt.Errorf("breakwater: max open timeout %s is below the open timeout %s", c.maxOpenTimeout, c.openTimeout))
	}
	if !(c.jitter >= 0 && c.jitter <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: open jitter must be in [0, 1], got %v", c.jitter))
	}
	if c.maxProbes < 1 || c.maxProbes > maxProbes || c.successes < 1 || c.successes > maxCount {
		errs = append(errs, fmt.Errorf("breakwater: half-open needs 1 to %d probes and 1 to %d successes, got %d and %d", maxProbes, maxCount, c.maxProbes, c.successes))
	}
	if c.probeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: probe timeout must be > 0, got %s", c.probeTimeout))
	}
	if !(c.faultRate >= 0 && c.faultRate <= 1) {
		errs = append(errs, fmt.Errorf("breakwater: fault injection rate must be in [0, 1], got %v", c.faultRate))
	}
	if c.maxKeys < 1 || c.maxKeys > keyed.MaxKeys || c.idleTTL <= 0 {
		errs = append(errs, fmt.Errorf("breakwater: breaker limits need maxKeys in [1, %d] and idleTTL > 0, got %d and %s", keyed.MaxKeys, c.maxKeys, c.idleTTL))
	}
	return errors.Join(errs...)
}

// verdict of one outcome for a breaker.
type verdict uint8

const (
	neutral verdict = iota
	success
	failure
)

func (c *breakerConfig) judge(cat Category) verdict {
	switch cat {
	case Success, ClientError:
		return success
	case AuthError:
		if c.countAuth {
			return failure
		}
		return success
	case Throttled:
		if c.countThrottled {
			return failure
		}
		return neutral
	}
	if cat.Failure() {
		return failure
	}
	return neutral
}
