package breakwater

import (
	"context"
	"net/http"
	"time"
)

// Defaults of a Transport; the package documentation lists them all.
const (
	defaultCallTimeout       = 30 * time.Second
	defaultAttemptTimeout    = 10 * time.Second
	defaultMaxAttempts       = 3
	defaultBackoffBase       = 100 * time.Millisecond
	defaultBackoffMax        = 5 * time.Second
	defaultRetryBudgetRatio  = 0.2
	defaultRetryBudgetFloor  = 3 // retries per second allowed beyond the ratio
	defaultRetryBudgetWindow = 10 * time.Second
)

// config is a Transport's configuration.
type config struct {
	base               http.RoundTripper
	callTimeout        time.Duration
	attemptTimeout     time.Duration
	attemptSet         bool // WithAttemptTimeout was given
	maxAttempts        int
	backoff            Backoff
	backoffMax         func(n int, prev time.Duration) time.Duration // nil: estimate by drawing
	backoffExact       bool                                          // backoffMax is the wait, not a bound
	planned            []time.Duration                               // the retry plan checkPlan computed; nil before
	retryIf            func(context.Context, *http.Response, error) (bool, error)
	retryNonIdempotent bool
	propagate          bool // WithPropagation
	bufferBodies       int64
	budget             bool
	budgetRatio        float64
	budgetFloor        float64
	budgetWindow       time.Duration
	budgetSet          bool // WithRetryBudget was given
	chargePerAttempt   bool
	maxRetryAfter      time.Duration
	classifier         Classifier
	key                KeyFunc
	slowCall           time.Duration
	maxKeys            int
	idleTTL            time.Duration
	bus                ClusterBus
	observers          []Observer
	insights           bool
	stage              bool // a RetryStage: only the retry loop's options apply

	// The breakers: its own (configured by the breaker options, named in
	// breakerSet), shared (breakers), or none (noBreaker).
	breaker    breakerConfig
	breakerSet []string
	breakers   *Breakers
	noBreaker  bool

	// The pause gate, likewise.
	pause    pauseConfig
	pauseSet []string
	gates    *PauseGates
	noPause  bool

	limits       limitsConfig // the rate and concurrency limits (admission.go)
	noCongestion bool         // WithoutCongestionLimit (congestion.go)
	hedging      *hedging     // hedge.go; nil: no hedging
	failover     *failover    // failover.go; nil: one upstream
}

// newConfig returns the default configuration.
func newConfig() config {
	c := config{
		callTimeout:    defaultCallTimeout,
		attemptTimeout: defaultAttemptTimeout,
		maxAttempts:    defaultMaxAttempts,
		budget:         true,
		budgetRatio:    defaultRetryBudgetRatio,
		budgetFloor:    defaultRetryBudgetFloor,
		budgetWindow:   defaultRetryBudgetWindow,
		maxKeys:        defaultMaxKeys,
		idleTTL:        defaultIdleTTL,
		breaker:        newBreakerConfig(),
		pause:          newPauseConfig(),
	}
	c.setBackoff(ExponentialJitter(defaultBackoffBase, defaultBackoffMax))
	return c
}

// transportOption is an option of NewTransport alone; retryLoop marks one
// that RetryStage takes too.
func transportOption(name string, retryLoop bool, fn func(*config)) Option {
	return option(func(s *settings) {
		if c := s.forTransport(name, retryLoop); c != nil {
			fn(c)
		}
	})
}

// WithBase sets the transport that makes the actual requests. nil (the
// default) is a clone of [http.DefaultTransport]; the shared one is never
// modified. A base that is another breakwater Transport (or wraps one
// under RoundTrippers with an Unwrap() http.RoundTripper method) is a
// warning ([EventWarning], [ReasonStackedTransport]): the attempts of the
// two multiply. It configures [NewTransport].
func WithBase(rt http.RoundTripper) Option {
	return transportOption("WithBase", false, func(c *config) { c.base = rt })
}

// WithCallTimeout bounds the whole call (all attempts, waits and the
// response body); 0 switches the call timeout off. One no longer than the
// first wait between attempts leaves no room for a retry: a warning
// ([EventWarning], [ReasonRetriesDoNotFit]), and [Transport.Explain] says
// how many attempts fit. It configures [NewTransport]; see [CallTimeout]
// for a stage of your own. Default: 30 s.
func WithCallTimeout(d time.Duration) Option {
	return transportOption("WithCallTimeout", false, func(c *config) { c.callTimeout = d })
}

// WithAttemptTimeout bounds each attempt, response body included; 0
// switches the attempt timeout off. It must not exceed the call timeout.
// It configures [NewTransport]; see [AttemptTimeout] for a stage of your
// own. Default: 10 s, or the call timeout when that is shorter.
//
// An attempt's deadline is the earlier of its own and the call's, and its
// context ends there with [ErrAttemptTimeout] or [ErrCallTimeout]. When
// the caller's context can never be cancelled (context.Background, as
// http.Client.Get's is) and at least 100 ms remain, that deadline is
// rounded down to the millisecond and its context is shared with the
// attempts ending in the same millisecond, so that net/http pays for one
// deadline context per millisecond rather than one per attempt: the
// attempt may end up to 1 ms early, never late.
func WithAttemptTimeout(d time.Duration) Option {
	return transportOption("WithAttemptTimeout", false, func(c *config) { c.attemptTimeout, c.attemptSet = d, true })
}

// WithMaxAttempts sets the number of attempts per call, the first
// included; 1 switches retries off. It must be at most 1000. It configures
// [NewTransport] and [RetryStage]. Default: 3.
func WithMaxAttempts(n int) Option {
	return transportOption("WithMaxAttempts", true, func(c *config) { c.maxAttempts = n })
}

// WithBackoff sets the wait between attempts. A server's Retry-After hint
// is honoured on top: the wait is never shorter than the hint. The one
// exception is a 502 Bad Gateway without a hint: a gateway says its
// backend failed, so the call's first retry goes at once, and a load
// balancer's next pick is another backend. A Backoff
// that panics when NewTransport draws its plan is a construction error;
// one that panics later means "do not retry". It configures [NewTransport]
// and [RetryStage]. Default: ExponentialJitter(100ms, 5s).
func WithBackoff(b Backoff) Option {
	return option(func(s *settings) {
		if b == nil {
			s.fail("WithBackoff(nil)")
			return
		}
		if c := s.forTransport("WithBackoff", true); c != nil {
			c.setBackoff(b)
		}
	})
}

func (c *config) setBackoff(b Backoff) {
	c.backoff = b
	c.backoffMax, c.backoffExact = b.Delay, true
	if bb, ok := b.(boundedBackoff); ok {
		c.backoffMax, c.backoffExact = bb.MaxDelay, false
	} else if _, random := b.(BackoffFunc); random {
		c.backoffMax, c.backoffExact = nil, false // a function may be random: estimate
	}
}

// WithRetryIf replaces the category-based decision of whether an attempt's
// result is worth retrying. Its signature is the CheckRetry of
// [go-retryablehttp], so retryablehttp.DefaultRetryPolicy and
// ErrorPropagatedRetryPolicy plug in as they are. Returning a non-nil
// error ends the call with that error. breakwater's safety rules still
// apply on top: our own rejections and the caller's cancellation are
// never retried, non-idempotent requests only when provably not sent,
// bodies only when replayable, and never past the deadline or the retry
// budget; a retry fn asked for that a safety rule skips is reported
// ([EventRetrySkipped], [Error].NotRetried, [CallReport]). A panicking fn
// means "do not retry". It configures
// [NewTransport] and [RetryStage].
//
// [go-retryablehttp]: https://pkg.go.dev/github.com/hashicorp/go-retryablehttp#CheckRetry
func WithRetryIf(fn func(ctx context.Context, resp *http.Response, err error) (bool, error)) Option {
	return transportOption("WithRetryIf", true, func(c *config) { c.retryIf = fn })
}

// WithRetryNonIdempotent, when on, retries requests whose method is not
// idempotent (POST, PATCH, …) and that carry no Idempotency-Key. Only do
// this when the upstream deduplicates them some other way. Off, such a
// request is sent once, and a retry its outcome called for is reported
// with [ReasonNotIdempotent] ([EventRetrySkipped], [Error].NotRetried,
// [CallReport]). It only
// retries: such a request is never hedged ([WithHedging]), since a hedge
// repeats a request that has not failed. It configures [NewTransport] and
// [RetryStage]. Default: off.
func WithRetryNonIdempotent(on bool) Option {
	return transportOption("WithRetryNonIdempotent", true, func(c *config) { c.retryNonIdempotent = on })
}

// WithBodyBuffering lets requests whose body has no GetBody be retried by
// buffering bodies of up to max bytes in memory. A longer body is sent once,
// unbuffered and unchanged, and a retry its outcome called for is reported
// with [ReasonBodyTooLarge] (with no buffering, [ReasonBodyNotReplayable]). The body is read when RoundTrip starts, before
// any timeout applies, so a body source that stalls holds the call: buffer
// only bodies that are already in memory or on disk. It configures
// [NewTransport] and [RetryStage]. Default: 0, no buffering (such requests
// are sent once).
func WithBodyBuffering(max int64) Option {
	return transportOption("WithBodyBuffering", true, func(c *config) { c.bufferBodies = max })
}

// WithRetryBudget limits retries per key to ratio × calls plus floor
// retries per second, over a sliding window, so that an outage cannot
// multiply the load on an upstream; a retry that succeeds is given back.
// Only calls that may retry count: one whose [RequestPolicy] allows a
// single attempt adds nothing to the budget. A key whose last five
// attempts all failed (an outage) loses the floor until one succeeds: its
// retries are the ratio of its calls alone, since another attempt at it
// helps no one; a retry that failover sends to another endpoint keeps it.
// It configures [NewTransport] and [RetryStage]. Defaults: 0.2, 3 per
// second, 10 s.
func WithRetryBudget(ratio, floor float64, window time.Duration) Option {
	return transportOption("WithRetryBudget", true, func(c *config) {
		c.budgetSet, c.budgetRatio, c.budgetFloor, c.budgetWindow = true, ratio, floor, window
	})
}

// WithoutRetryBudget switches the retry budget off. It configures
// [NewTransport] and [RetryStage].
func WithoutRetryBudget() Option {
	return transportOption("WithoutRetryBudget", true, func(c *config) { c.budget = false })
}

// WithChargePerAttempt, when on, charges the breaker for every failing
// attempt. By default it is charged once per call whose retrying gave up
// on a failure, so that the number of failing calls that opens it does
// not depend on the number of attempts per call (see "Charging the
// breaker" in the package documentation). It configures [NewTransport] and
// [RetryStage]. Default: off.
func WithChargePerAttempt(on bool) Option {
	return transportOption("WithChargePerAttempt", true, func(c *config) { c.chargePerAttempt = on })
}

// WithClassifier replaces the default classification ([Classify], with the
// [WithMaxRetryAfter] maximum). A classifier that panics is treated as the
// default for that attempt. It configures [NewTransport] and [RetryStage].
func WithClassifier(cl Classifier) Option {
	return transportOption("WithClassifier", true, func(c *config) { c.classifier = cl })
}

// WithSlowCallThreshold classifies a successful attempt slower than d as
// [Slow], which breakers count as a failure (the response is still
// returned and not retried); 0 switches it off. It configures
// [NewTransport] and [RetryStage]. Default: off.
func WithSlowCallThreshold(d time.Duration) Option {
	return transportOption("WithSlowCallThreshold", true, func(c *config) { c.slowCall = d })
}

// WithInsights, when on, keeps a few counters per key over the last five
// minutes (about 1.5 KiB a key, for at most 10 000 keys) and turns them
// into plain-words warnings that [Transport.Snapshot] carries as [Insight]
// values, in the manner of the insights of the Elixir library
// [ExternalService]:
//
//   - breaker_never_opened: at least 20 % of at least 20 calls failed in
//     the last minute and the breaker did not open;
//   - breaker_flapping: the breaker opened 3 times or more in 5 minutes,
//     reopening on a failed probe included, a [Breaker.Trip] not;
//   - retry_budget_exhausted: the retry budget refused retries in the last
//     minute;
//   - pause_held: a pause the upstream asked for held or refused calls for
//     at least 20 % of the last 5 minutes (a minute), a pause still under
//     way included;
//   - attempt_timeouts: the attempt timeout fired on at least 10 % of at
//     least 20 attempts in the last minute;
//   - retries_absorb_failures: at least 20 % of at least 20 successful
//     calls needed a retry in the last minute.
//
// It configures [NewTransport] and [RetryStage]. Default: off.
//
// [ExternalService]: https://hexdocs.pm/external_service/
func WithInsights(on bool) Option {
	return transportOption("WithInsights", true, func(c *config) { c.insights = on })
}

// WithBreakers makes the Transport use bs, a registry you built (with
// [NewBreakers]) and may share (with a health checker, another Transport,
// a status page's controls), instead of breakers of its own; the breaker
// options then have no place, and giving one is a construction error. The
// Transport's observers do not receive the registry's transitions: give
// the registry its own [WithObserver]. It configures [NewTransport].
func WithBreakers(bs *Breakers) Option {
	return option(func(s *settings) {
		if bs == nil {
			s.fail("WithBreakers(nil): leave the option out for breakers of the Transport's own, or give WithoutBreaker")
			return
		}
		if c := s.forTransport("WithBreakers", false); c != nil {
			c.breakers = bs
		}
	})
}

// WithoutBreaker switches the circuit breaker off: no breaker state is
// kept and no call is refused by one. It configures [NewTransport].
func WithoutBreaker() Option {
	return transportOption("WithoutBreaker", false, func(c *config) { c.noBreaker = true })
}

// WithPauseGates makes the Transport use g, pause gates you built (with
// [NewPauseGates]) and may share, instead of a gate of its own; the pause
// options then have no place. It configures [NewTransport] and
// [RetryStage].
func WithPauseGates(g *PauseGates) Option {
	return option(func(s *settings) {
		if g == nil {
			s.fail("WithPauseGates(nil): leave the option out for a pause gate of the Transport's own, or give WithoutPauseGate")
			return
		}
		if c := s.forTransport("WithPauseGates", true); c != nil {
			c.gates = g
		}
	})
}

// WithoutCongestionLimit switches off the limit a Transport puts by default
// on each key's attempts in flight while its latency says requests queue
// at the upstream (see "Rate limits, pauses and bulkheads" in the package
// documentation): every attempt is sent, however long the upstream's
// queue. Switch it off for a host whose answers are slow by design and
// come many at once, such as long polls that answer only when there is
// news: their headers' latency would read as a queue. It configures
// [NewTransport] and [RetryStage].
func WithoutCongestionLimit() Option {
	return transportOption("WithoutCongestionLimit", true, func(c *config) { c.noCongestion = true })
}

// WithoutPauseGate switches the pause gate off: a throttled call still
// retries no earlier than its hint, but other calls are not held. It
// configures [NewTransport] and [RetryStage].
func WithoutPauseGate() Option {
	return transportOption("WithoutPauseGate", true, func(c *config) { c.noPause = true })
}
