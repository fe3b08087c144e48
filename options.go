package breakwater

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// An Option configures one of breakwater's constructors: [NewTransport],
// [RetryStage], the registries ([NewBreakers], [NewRateLimiters],
// [NewPauseGates], [NewBulkheads]), the stages [WithRateLimit] and
// [WithConcurrencyLimit] add to a Transport, and the inbound middleware
// ([ClientRateLimit], [RouteBreaker], [Shedder], [HandlerTimeout]). Each
// option's documentation says which it configures; given to any other
// constructor, it is a construction error naming both, reported with every
// other invalid option. An option given twice to one constructor is a
// construction error naming it, since one of the two would be dropped
// without a word; the options that add rather than set are repeatable:
// [WithObserver] (every observer observes) and [WithCountAsFailure] (the
// categories add up). Options given after a [Config] override the fields it
// sets: the file, then the code. The package documentation lists every
// option by concern.
type Option interface{ apply(*settings) }

// option is an Option made of a function.
type option func(*settings)

func (o option) apply(s *settings) { o(s) }

// settings is what one constructor's options configure: the configurations
// it builds are set, the others nil.
type settings struct {
	to        string           // the constructor, for errors
	transport *config          // NewTransport, RetryStage
	breaker   *breakerConfig   // a Transport's own breakers, NewBreakers
	pause     *pauseConfig     // a Transport's own gates, NewPauseGates
	rate      *rateLimitConfig // WithRateLimit, NewRateLimiters
	bulk      *bulkheadConfig  // WithConcurrencyLimit, NewBulkheads
	inbound   *inboundConfig   // the inbound middleware
	errs      []error

	// given holds the options applied so far, by name, to report one
	// given twice; at numbers each option applied, a Config's fields
	// included, and fromConfig marks a Config's.
	given      map[string]givenOption
	at         int
	fromConfig bool
}

// givenOption is where an option was given.
type givenOption struct {
	at         int
	fromConfig bool
}

// repeatable names the options that add rather than set: given twice,
// both count.
var repeatable = map[string]bool{"WithObserver": true, "WithCountAsFailure": true}

// applyOptions applies opts, skipping nil ones.
func (s *settings) applyOptions(opts []Option) {
	for _, o := range opts {
		if o != nil {
			s.at++
			o.apply(s)
		}
	}
}

// applyConfig applies the options a Config's fields name: a later option
// given to the constructor overrides them (see note).
func (s *settings) applyConfig(opts []Option) {
	was := s.fromConfig
	s.fromConfig = true
	s.applyOptions(opts)
	s.fromConfig = was
}

// note records that the option name applies, reporting one given twice,
// unless it is repeatable or follows a Config that gave it (the code
// overrides the file). One option may note its name more than once, for
// the stages it configures.
func (s *settings) note(name string) {
	prev, seen := s.given[name]
	switch {
	case repeatable[name] || seen && prev.at == s.at:
		return
	case !seen, prev.fromConfig && !s.fromConfig:
	case s.fromConfig && !prev.fromConfig:
		s.fail("%s is given to %s before a Config that sets it too: give it after the Config to override the Config's value", name, s.to)
	default:
		s.fail("%s is given twice to %s: give it once (only WithObserver and WithCountAsFailure add up)", name, s.to)
	}
	if s.given == nil {
		s.given = make(map[string]givenOption)
	}
	s.given[name] = givenOption{at: s.at, fromConfig: s.fromConfig}
}

// reject reports that the option name does not apply to s.to.
func (s *settings) reject(name string) {
	s.errs = append(s.errs, fmt.Errorf("breakwater: %s does not apply to %s", name, s.to))
}

// fail reports an invalid argument of an option.
func (s *settings) fail(format string, args ...any) {
	s.errs = append(s.errs, fmt.Errorf("breakwater: "+format, args...))
}

// forTransport returns the Transport's configuration, or reports that name
// does not apply. retryLoop marks the options a [RetryStage] takes.
func (s *settings) forTransport(name string, retryLoop bool) *config {
	if s.transport == nil || s.transport.stage && !retryLoop {
		s.reject(name)
		return nil
	}
	s.note(name)
	return s.transport
}

// forBreaker returns the breakers' configuration, noting that a Transport's
// own breakers were configured, or reports that name does not apply.
func (s *settings) forBreaker(name string) *breakerConfig {
	if s.breaker == nil || s.transport != nil && s.transport.stage {
		s.reject(name)
		return nil
	}
	s.note(name)
	if s.transport != nil {
		s.transport.breakerSet = append(s.transport.breakerSet, name)
	}
	return s.breaker
}

// forPause is forBreaker for the pause gates.
func (s *settings) forPause(name string) *pauseConfig {
	if s.pause == nil {
		s.reject(name)
		return nil
	}
	s.note(name)
	if s.transport != nil {
		s.transport.pauseSet = append(s.transport.pauseSet, name)
	}
	return s.pause
}

// forInbound returns the middleware's configuration, or reports that name
// does not apply; only lists the middleware a specific option configures
// (none: every one).
func (s *settings) forInbound(name string, only ...string) *inboundConfig {
	if s.inbound == nil || len(only) > 0 && !contains(only, s.to) {
		s.reject(name)
		return nil
	}
	s.note(name)
	return s.inbound
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Defaults every registry shares ([WithKeyLimits], [WithMaxWait]).
const (
	defaultMaxKeys = 10_000
	defaultIdleTTL = 10 * time.Minute
	defaultMaxWait = 5 * time.Second
)

// WithKeyLimits bounds per-key state: at most maxKeys keys, keys idle for
// idleTTL evicted, and room made at once for a new key by evicting one
// whose state costs nothing to lose (an open breaker, a pause, a slot held
// or a request waiting is never evicted; see each registry). It configures
// every registry [NewTransport] builds (breakers, retry budgets, pause
// gates, limits), and each registry it is given to. Defaults: 10 000 keys,
// 10 minutes.
func WithKeyLimits(maxKeys int, idleTTL time.Duration) Option {
	return option(func(s *settings) {
		if s.transport != nil || s.breaker != nil || s.pause != nil || s.rate != nil || s.bulk != nil {
			s.note("WithKeyLimits")
		}
		switch {
		case s.transport != nil:
			s.transport.maxKeys, s.transport.idleTTL = maxKeys, idleTTL
		case s.breaker != nil:
			s.breaker.maxKeys, s.breaker.idleTTL = maxKeys, idleTTL
		case s.pause != nil:
			s.pause.maxKeys, s.pause.idleTTL = maxKeys, idleTTL
		case s.rate != nil:
			s.rate.maxKeys, s.rate.idleTTL = maxKeys, idleTTL
		case s.bulk != nil:
			s.bulk.maxKeys, s.bulk.idleTTL = maxKeys, idleTTL
		default:
			s.reject("WithKeyLimits")
		}
	})
}

// WithObserver adds an observer: of everything a Transport does (calls,
// attempts, retries, rejections, waits and its own breakers'
// transitions), of a breaker registry's transitions, or of what an inbound
// middleware serves and rejects. Given more than once, every observer
// receives every event; a nil o adds none. Without one, observing costs
// nothing. See [LogObserver] for logging through log/slog.
func WithObserver(o Observer) Option {
	return option(func(s *settings) {
		switch {
		case s.transport == nil && s.breaker == nil && s.inbound == nil:
			s.reject("WithObserver")
		case o == nil:
		case s.transport != nil:
			s.transport.observers = append(s.transport.observers, o)
		case s.breaker != nil:
			s.breaker.listeners = append(s.breaker.listeners, transitionReporter(o))
		default:
			s.inbound.obs = observers(s.inbound.obs, o)
		}
	})
}

// WithMaxWait sets the longest a call waits for admission, within its
// deadline, by the stage it configures: a pause gate (given to
// [NewTransport], [RetryStage] or [NewPauseGates]), a rate limit (within
// [WithRateLimit], or to [NewRateLimiters]) or a concurrency limit (within
// [WithConcurrencyLimit], or to [NewBulkheads]); 0 refuses at once instead
// of waiting. Defaults: as long as the longest pause for a pause gate, so
// that only the call's deadline decides; 5 s for a rate limit and a
// concurrency limit.
func WithMaxWait(d time.Duration) Option {
	return option(func(s *settings) {
		if d < 0 {
			s.fail("WithMaxWait must be >= 0, got %s", d)
			return
		}
		switch {
		case s.pause != nil:
			if c := s.forPause("WithMaxWait"); c != nil {
				c.maxWait, c.waitSet = d, true
			}
		case s.rate != nil:
			s.note("WithMaxWait")
			s.rate.maxWait = d
		case s.bulk != nil:
			s.note("WithMaxWait")
			s.bulk.maxWait = d
		default:
			s.reject("WithMaxWait")
		}
	})
}

// WithMaxRetryAfter sets the longest server hint (Retry-After, or a rate
// limit field's reset) that is honoured: a Transport returns a response
// asking for more at once instead of waiting (see
// [Outcome.RetryAfterTooLong]), and a pause gate pauses a key for at most
// d. It configures [NewTransport] (its classifier, unless
// [WithClassifier] replaces it, and its pause gate), [RetryStage] and
// [NewPauseGates]. Default: 2 minutes.
func WithMaxRetryAfter(d time.Duration) Option {
	return option(func(s *settings) {
		if s.transport != nil || s.pause != nil {
			s.note("WithMaxRetryAfter")
		}
		switch {
		case s.transport != nil:
			s.transport.maxRetryAfter = d
		case s.pause != nil:
			s.pause.maxPause = d
		default:
			s.reject("WithMaxRetryAfter")
		}
	})
}

// WithKeyFunc sets how requests are keyed: the upstream a [Transport]'s
// calls are counted under (default [HostKey]), the route a [RouteBreaker]
// keeps a breaker for (default [RouteKey]), the group a [Shedder] bounds
// (default: one for every request). A key function must return few
// distinct keys (hosts or routes, not paths), since the registries are
// bounded. A KeyFunc that panics fails the call with an error (outbound:
// no RoundTripper may panic); inbound, its panic goes on up as the
// handler's own would, before anything is counted or held, for net/http or
// your recovery middleware to answer and log.
func WithKeyFunc(fn KeyFunc) Option {
	return option(func(s *settings) {
		switch {
		case fn == nil:
			s.fail("WithKeyFunc(nil)")
		case s.transport != nil:
			s.note("WithKeyFunc")
			s.transport.key = fn
		case s.inbound != nil && (s.to == "RouteBreaker" || s.to == "Shedder"):
			s.note("WithKeyFunc")
			s.inbound.key = fn
		default:
			s.reject("WithKeyFunc")
		}
	})
}

// WithClusterBus shares state with the other replicas of a service through
// bus (see [ClusterBus]): a breaker's openings and resets, and a pause
// gate's pauses and resumes. Given to [NewTransport] it shares its own
// breakers' and pause gate's; given to [NewBreakers] or [NewPauseGates],
// that registry's. One bus may serve both: each event names its
// [ClusterEvent.Mechanism], and breakers apply only trips and resets,
// pause gates only pauses and resumes, so another replica's 429 pauses
// the key here and never opens its breaker. A nil bus keeps the state
// local. Default: each replica keeps its own.
//
// Breaker trips: a breaker that opens on its own failures, or by
// [Breaker.Trip], publishes the opening; every other replica opens its
// breaker of the key for the time left (plus jitter, the open jitter or at
// least 10 %, so that the replicas do not probe in lockstep), with reason
// [ReasonCluster], and recovers through its own half-open probes.
// [Breaker.Reset] closes the key on every replica. Closing by probes stays
// local: each replica finds out for itself that the dependency is back.
//
// Pauses: a pause this replica sets (a 429's Retry-After, a spent quota,
// [PauseGates.Pause]) holds the key on every replica for the time it has
// left, and [PauseGates.Resume] ends it everywhere.
//
// Admission never touches the network: trips and pauses travel after the
// fact (a call already admitted elsewhere still goes out), and what a
// replica receives it applies without publishing again. Whether a trip
// needs a quorum of replicas is the bus's setting.
func WithClusterBus(bus ClusterBus) Option {
	return option(func(s *settings) {
		if s.transport == nil && s.breaker == nil && s.pause == nil {
			s.reject("WithClusterBus")
			return
		}
		s.note("WithClusterBus")
		switch {
		case bus == nil:
		case s.transport != nil:
			s.transport.bus = bus
		case s.breaker != nil:
			s.breaker.bus = bus
		default:
			s.pause.bus = bus
		}
	})
}

// inboundConfig is the configuration of an inbound middleware: what every
// one takes, and the fields of the options only one takes.
type inboundConfig struct {
	deny     func(http.ResponseWriter, *http.Request, Rejection)
	obs      Observer
	exempt   func(*http.Request) bool
	key      KeyFunc       // RouteBreaker, Shedder
	status   int           // HandlerTimeout
	retryMin time.Duration // Shedder
	retryMax time.Duration
	policy   string // ClientRateLimit
	xHeaders bool
}

// inboundSettings returns the settings of the middleware named to, with
// its defaults.
func inboundSettings(to string, c *inboundConfig) settings {
	return settings{to: to, inbound: c}
}

// WithDenyHandler replaces the default response of an inbound middleware
// to a request it rejects ([WriteProblem]: an RFC 9457
// application/problem+json body). When h runs, the middleware has already
// set the Retry-After header (when rej.RetryAfter > 0) and, for a rate
// limit, the RateLimit fields; h writes the status (normally rej.Status)
// and a body. It runs on the request's goroutine and must not retain w or
// r. A nil h keeps the default.
func WithDenyHandler(h func(w http.ResponseWriter, r *http.Request, rej Rejection)) Option {
	return option(func(s *settings) {
		if in := s.forInbound("WithDenyHandler"); in != nil {
			in.deny = h
		}
	})
}

// WithExempt exempts the requests for which fn returns true from an
// inbound middleware: they go straight to the next handler, untouched and
// unreported (health checks, readiness probes, an operator's endpoints).
// fn runs on every request before anything else and must be fast and safe
// for concurrent use; if it panics, the panic goes on up as the handler's
// own would. A nil fn (the default) exempts nothing.
func WithExempt(fn func(r *http.Request) bool) Option {
	return option(func(s *settings) {
		if in := s.forInbound("WithExempt"); in != nil {
			in.exempt = fn
		}
	})
}

// contradiction reports when one stage is given more than one of being
// configured, shared and switched off.
func contradiction(stage string, configured []string, shared, off string) error {
	var ways []string
	if len(configured) > 0 {
		ways = append(ways, "configured ("+strings.Join(dedupe(configured), ", ")+")")
	}
	if shared != "" {
		ways = append(ways, "shared ("+shared+")")
	}
	if off != "" {
		ways = append(ways, "switched off ("+off+")")
	}
	if len(ways) < 2 {
		return nil
	}
	return fmt.Errorf("breakwater: the %s is %s: give one of them", stage, strings.Join(ways, " and "))
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
