package breakwater

import (
	"errors"
	"fmt"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// BreakerMode selects what a breaker does with its verdicts.
type BreakerMode uint8

const (
	// ModeEnforce is the default: an open breaker rejects attempts.
	ModeEnforce BreakerMode = iota
	// ModeShadow runs the state machine and counts what it would have
	// rejected ([BreakerSnapshot.ShadowRejections]), but rejects nothing.
	ModeShadow
	// ModeDisabled installs no breaker: no state is kept, nothing is
	// rejected and every control method is a no-op.
	ModeDisabled
)

// Defaults of a breaker.
const (
	DefaultOpenTimeout    = 5 * time.Second
	DefaultMaxOpenTimeout = 60 * time.Second
	DefaultOpenJitter     = 0.10
	DefaultHalfOpenProbes = 1
	DefaultProbeSuccesses = 2
	DefaultProbeTimeout   = 10 * time.Second
	DefaultBreakerIdleTTL = 10 * time.Minute
)

// A BreakerOption configures [NewBreakers].
type BreakerOption interface{ applyBreaker(*breakerConfig) }

type breakerOptionFunc func(*breakerConfig)

func (f breakerOptionFunc) applyBreaker(c *breakerConfig) { f(c) }

type breakerConfig struct {
	policy         Policy
	openTimeout    time.Duration
	maxOpenTimeout time.Duration
	jitter         float64
	maxProbes      int
	successes      int
	probeTimeout   time.Duration
	countAuth      bool
	countThrottled bool
	mode           BreakerMode
	faultRate      float64
	maxKeys        int
	idleTTL        time.Duration
	listeners      []func(Transition)
	autoWithin     bool // the Window's within was left to be sized
	bus            ClusterBus
}

// WithPolicy sets the counting policy. Default: the volume-aware
// Window(10, auto).WithRatio(0.5).WithCategoryThreshold(Timeout, 5), which
// opens on the 11th failing call within the window (the 5th, when it timed
// out) once at least half of the calls made since the first of them
// failed: a total outage opens it as fast as Window(10, auto) does, and a
// failure rate that retries absorb never does. The window is sized from
// the retry plan by a [Transport] (at least 10 s). Window(10, …) without a
// ratio keeps ExternalService's exact contract.
func WithPolicy(p Policy) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.policy = p })
}

// WithOpenTimeout sets the first open duration and the cap that consecutive
// reopens double it up to. Defaults: 5 s and 60 s.
func WithOpenTimeout(base, max time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.openTimeout, c.maxOpenTimeout = base, max })
}

// WithOpenJitter sets the positive jitter added to each open duration as a
// fraction of it: 0.1 (the default) adds up to 10 %. 0 disables jitter.
func WithOpenJitter(fraction float64) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.jitter = fraction })
}

// WithHalfOpen sets how many probes may be in flight while half-open (at
// most 1024) and how many successful probes close the breaker. Defaults: 1
// and 2.
func WithHalfOpen(maxProbes, successes int) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.maxProbes, c.successes = maxProbes, successes })
}

// WithProbeTimeout sets how long a half-open probe lease may be held before
// it is reclaimed (a probe whose outcome never arrives). A [Transport] sets
// it to its attempt timeout. Default: 10 s.
func WithProbeTimeout(d time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.probeTimeout = d })
}

// WithCountAuthErrors makes [AuthError] outcomes count as failures
// (401, 403 and 407 are successes by default: the upstream answered).
func WithCountAuthErrors(on bool) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.countAuth = on })
}

// WithCountThrottled makes [Throttled] outcomes count as failures. A breaker
// opened by a throttled outcome that carried a Retry-After hint stays open
// for the hint (capped by the maximum open timeout) and closes after a
// single successful probe.
func WithCountThrottled(on bool) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.countThrottled = on })
}

// WithBreakerMode selects [ModeEnforce] (default), [ModeShadow] or
// [ModeDisabled].
func WithBreakerMode(m BreakerMode) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.mode = m })
}

// WithFaultInjection makes closed breakers reject the given fraction
// (0 < rate <= 1) of admissions with [ErrCircuitOpen], without calling the
// upstream: a way to rehearse an outage. It contradicts [ModeDisabled]; the
// combination is a construction error.
func WithFaultInjection(rate float64) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.faultRate = rate })
}

// WithBreakerLimits bounds the registry: at most maxKeys breakers, and
// breakers unused for idleTTL are evicted unless open or half-open. A full
// registry makes room for a new key at once by evicting a breaker not used
// lately, one with no recent failure rather than one counting failures; an
// open or half-open breaker and one in use by a call are never evicted.
// While every breaker is such, the registry grows up to twice maxKeys, and
// past that a new key gets a breaker of its own that the registry does not
// keep (it admits, and forgets what it counts). A key never shares another
// key's breaker. Defaults: 10 000 keys, 10 minutes.
func WithBreakerLimits(maxKeys int, idleTTL time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.maxKeys, c.idleTTL = maxKeys, idleTTL })
}

// OnTransition adds a listener called once for every state change, in the
// order the changes happened, outside every lock. A listener that panics is
// recovered and ignored.
func OnTransition(fn func(Transition)) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if fn != nil {
			c.listeners = append(c.listeners, fn)
		}
	})
}

// WithBreakerObserver reports the registry's transitions to o as
// [EventTransition] events (with context.Background). A [Transport] that
// owns its registry does this for its own observers already.
func WithBreakerObserver(o Observer) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if o != nil {
			c.listeners = append(c.listeners, transitionReporter(o))
		}
	})
}

func (c *breakerConfig) validate() error {
	errs := []error{c.policy.validate()}
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
	if c.faultRate > 0 && c.mode == ModeDisabled {
		errs = append(errs, errors.New("breakwater: fault injection and a disabled breaker contradict each other"))
	}
	if c.mode > ModeDisabled {
		errs = append(errs, fmt.Errorf("breakwater: unknown breaker mode %d", c.mode))
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
