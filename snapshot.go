package breakwater

import (
	"time"

	"golang.org/x/time/rate"
)

// Snapshot is a point-in-time view of the per-key state a [Transport] or
// a registry holds ([Breakers], [RateLimiters], [PauseGates],
// [Bulkheads]), each of which has a Snapshot method: the sources of the
// status page (package status), and of anything that serves or checks
// state as JSON.
type Snapshot struct {
	At       time.Time         `json:"at"`
	Breakers []BreakerSnapshot `json:"breakers"`
	// Bulkheads, RateLimiters and Pauses are set by the Transport or the
	// registry that holds them.
	Bulkheads    []BulkheadSnapshot  `json:"bulkheads,omitempty"`
	RateLimiters []RateLimitSnapshot `json:"rate_limiters,omitempty"`
	Pauses       []PauseSnapshot     `json:"pauses,omitempty"`
	// RetryBudgets are set by a Transport with a retry budget.
	RetryBudgets []RetryBudgetSnapshot `json:"retry_budgets,omitempty"`
	// Insights are the findings of [WithInsights] about the
	// component: nil when none observes it, empty when it finds nothing.
	Insights []Insight `json:"insights,omitzero"`
	// Endpoints and Hedges are set by a Transport with [WithFailover] and
	// [WithHedging].
	Endpoints []EndpointSnapshot `json:"endpoints,omitempty"`
	Hedges    []HedgeSnapshot    `json:"hedges,omitempty"`
}

// RetryBudgetSnapshot is the state of one key's retry budget
// ([WithRetryBudget]).
type RetryBudgetSnapshot struct {
	Key string `json:"key"`
	// Calls and Retries are counted over the budget's window; Allowed is
	// the retries it grants over that window now: its ratio of the calls,
	// plus its floor unless the key's last attempts all failed.
	Calls   int64   `json:"calls"`
	Retries int64   `json:"retries"`
	Allowed float64 `json:"allowed"`
	// Spent reports that retries used it up: it holds retries and refuses
	// the key another one now.
	Spent bool `json:"spent"`
}

// BreakerSnapshot is a point-in-time view of one breaker.
type BreakerSnapshot struct {
	Key   string `json:"key"`
	State State  `json:"-"`
	// StateName is State's String form, for JSON.
	StateName string `json:"state"`
	// Since is when the breaker entered its state (when it was made, for
	// a breaker that never changed state) and Reason why (empty then).
	Since  time.Time `json:"since"`
	Reason Reason    `json:"reason,omitempty"`
	// Failures is the policy's current failure count (closed state), and
	// Threshold the count at which it opens: tolerate+1 for a window (a
	// volume-aware one also needs its share of calls to have failed), the
	// threshold of a consecutive policy (a category threshold may open
	// either sooner), the failures that the ratio needs at the current
	// volume for a failure rate.
	Failures  int `json:"failures"`
	Threshold int `json:"threshold"`
	// Opens counts consecutive openings without a close.
	Opens int `json:"opens"`
	// OpenedOn is, while open or half-open, the failure count that opened
	// it (kept through reopenings on a failed probe); 0 after a Trip.
	OpenedOn int `json:"opened_on,omitempty"`
	// OpenUntil and Remaining are set while open.
	OpenUntil        time.Time     `json:"open_until,omitzero"`
	Remaining        time.Duration `json:"-"`
	RemainingSeconds float64       `json:"remaining_seconds,omitempty"`
	// LastFailure is the category of the most recent failure, if any.
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	// ProbesInFlight and ProbeSuccesses describe the half-open state, and
	// ProbesAllowed is how many probes its ramp lets through at once now:
	// the configured probes ([WithHalfOpen]), doubled per success, at most
	// 1024; 0 unless half-open.
	ProbesInFlight int `json:"probes_in_flight"`
	ProbeSuccesses int `json:"probe_successes"`
	ProbesAllowed  int `json:"probes_allowed,omitempty"`
	// ShadowRejections counts admissions a shadow-mode breaker would have
	// rejected.
	ShadowRejections int64  `json:"shadow_rejections,omitempty"`
	Generation       uint64 `json:"generation"`
}

// BulkheadSnapshot is a point-in-time view of one bulkhead.
type BulkheadSnapshot struct {
	Key      string `json:"key"`
	Limit    int    `json:"limit"`
	InFlight int    `json:"in_flight"`
	Queued   int    `json:"queued"`
	// Saturated reports that every slot is taken.
	Saturated bool `json:"saturated"`
	// Congestion marks a Transport's congestion limit while it is
	// engaged (see [WithoutCongestionLimit]) rather than a bulkhead:
	// Limit is the attempts it lets be in flight to the key now.
	Congestion bool `json:"congestion,omitempty"`
}

// PauseSnapshot is a point-in-time view of one key's pause gate.
type PauseSnapshot struct {
	Key    string `json:"key"`
	Paused bool   `json:"paused"`
	// Until and Remaining are set while paused.
	Until            time.Time     `json:"until,omitzero"`
	Remaining        time.Duration `json:"-"`
	RemainingSeconds float64       `json:"remaining_seconds,omitempty"`
	// Paced is set while the key's requests go no faster than the rate
	// its 429s taught (see [PauseGates]): PaceRate, in requests per
	// second. PacePhase is "slow_start" while the rate doubles per round
	// of successes, and "ceiling" once a 429 set a ceiling (PaceCeiling,
	// requests per second) that the rate stays near.
	Paced       bool    `json:"paced,omitempty"`
	PaceRate    float64 `json:"pace_rate,omitempty"`
	PacePhase   string  `json:"pace_phase,omitempty"`
	PaceCeiling float64 `json:"pace_ceiling,omitempty"`
}

// RateLimitSnapshot is one token bucket's quota at one instant: the state
// a registry's Snapshot reports, and what [RateLimiters.Take] returns
// after taking, with the numbers the RateLimit, RateLimit-Policy and
// Retry-After header fields need.
type RateLimitSnapshot struct {
	Key string `json:"key"`
	// Limit is the tokens gained per second and Burst the bucket's size:
	// the policy is Burst requests per Burst/Limit seconds.
	Limit rate.Limit `json:"limit_per_second"`
	Burst int        `json:"burst"`
	// Remaining is the number of whole tokens left (after the request, for
	// Take), never negative; Tokens is the bucket's content, negative while
	// waiting requests hold reservations (set in a registry's Snapshot).
	Remaining int     `json:"remaining"`
	Tokens    float64 `json:"tokens"`
	// Limited reports, for Take, that the request was refused; otherwise
	// that no token is available now.
	Limited bool `json:"limited"`
	// RetryAfter is how long until the next token: zero when Remaining is
	// positive, never zero when it is not.
	RetryAfter        time.Duration `json:"-"`
	RetryAfterSeconds float64       `json:"retry_after_seconds,omitempty"`
	// Reset is how long until the bucket is full again.
	Reset time.Duration `json:"-"`
}

// EndpointSnapshot is a point-in-time view of one endpoint of a
// [Failover].
type EndpointSnapshot struct {
	// Endpoint is the base URL as configured; Key is what its state
	// (breaker, budgets, limits) is kept under.
	Endpoint string `json:"endpoint"`
	Key      string `json:"key"`
	Health   Health `json:"health"`
	InFlight int    `json:"in_flight"`
	// ConsecutiveFailures counts the failing attempts since its last
	// success; Attempts and Failures are the last 10 s.
	ConsecutiveFailures int   `json:"consecutive_failures"`
	Attempts            int64 `json:"attempts"`
	Failures            int64 `json:"failures"`
	// Ejections counts the endpoint's ejections in a row (what its next
	// ejection's length doubles with); EjectedUntil and RemainingSeconds
	// are set while it is ejected by outlier detection.
	Ejections        int       `json:"ejections"`
	EjectedUntil     time.Time `json:"ejected_until,omitzero"`
	RemainingSeconds float64   `json:"remaining_seconds,omitempty"`
}

// HedgeSnapshot is a point-in-time view of one key's hedging.
type HedgeSnapshot struct {
	Key string `json:"key"`
	// Delay is how long an attempt runs before a hedge follows it now;
	// zero while an adaptive delay has not seen enough attempts.
	Delay        time.Duration `json:"-"`
	DelaySeconds float64       `json:"delay_seconds"`
	// Samples is the number of attempt latencies the adaptive delay is
	// drawn from; Calls and Hedges count the key's hedgeable calls and the
	// hedges sent over the last 10 s.
	Samples int   `json:"samples"`
	Calls   int64 `json:"calls"`
	Hedges  int64 `json:"hedges"`
}

// Insight is one plain-words finding about live traffic: something the
// counters show that an operator should know, such as a breaker that never
// opened while many calls failed. See [WithInsights] for the checks.
type Insight struct {
	// Key is the upstream the finding is about.
	Key string `json:"key"`
	// Check names the finding; its values are stable: breaker_never_opened,
	// breaker_flapping, retry_budget_exhausted, pause_held,
	// attempt_timeouts and retries_absorb_failures.
	Check string `json:"check"`
	// Message says what was seen, with numbers, and what it means.
	Message string `json:"message"`
	// Value is the measured number the message is about: a fraction for
	// ratios, a count otherwise.
	Value float64 `json:"value"`
}
