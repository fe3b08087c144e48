package breakwater

import "time"

// State is a circuit breaker's state. Its numeric values are the ones the
// breaker state gauge exports: 0 closed, 1 half-open, 2 open.
type State uint8

// Breaker states.
const (
	StateClosed State = iota
	StateHalfOpen
	StateOpen
)

// String returns "closed", "half_open" or "open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half_open"
	case StateOpen:
		return "open"
	}
	return "unknown"
}

// Reason says why a breaker changed state.
type Reason string

// Transition reasons.
const (
	ReasonFailures        Reason = "failures"         // closed → open: the policy's threshold was reached
	ReasonProbeFailed     Reason = "probe_failed"     // half-open → open
	ReasonOpenElapsed     Reason = "open_elapsed"     // open → half-open
	ReasonProbesSucceeded Reason = "probes_succeeded" // half-open → closed
	ReasonTrip            Reason = "trip"             // forced open with Trip
	ReasonReset           Reason = "reset"            // forced closed with Reset
	ReasonRecovery        Reason = "recovery_signal"  // RecordSuccess while open or half-open
	ReasonCluster         Reason = "cluster"          // another replica tripped or reset the key (WithClusterBus)
)

// Transition describes one state change of one breaker. Listeners receive
// transitions in the order they happened, after the breaker's lock is
// released, so a listener may call any method of the breaker.
type Transition struct {
	Key      string
	From, To State
	Reason   Reason
	// Category is the failure that caused an opening, if any.
	Category Category
	// Failures is the policy's failure count at the moment of opening.
	Failures int
	// OpenFor is the open duration chosen, jitter included (To == open).
	OpenFor time.Duration
	// Opens counts consecutive openings without an intervening close,
	// this one included (1 for the first opening).
	Opens      int
	At         time.Time
	Generation uint64
}

// ReasonOutlier is the reason an endpoint is ejected for a failure rate
// well above the other endpoints'. An endpoint ejected for failing
// attempts in a row has [ReasonFailures], one whose probe failed
// [ReasonProbeFailed], and one brought back [ReasonProbesSucceeded].
const ReasonOutlier Reason = "outlier"

// Health is an endpoint's tier. Its values are stable metric label and
// JSON values.
type Health string

// Health tiers, best first.
const (
	// HealthHealthy: in, nothing wrong seen.
	HealthHealthy Health = "healthy"
	// HealthDegraded: in, but its breaker is half-open, the upstream asked
	// it to pause or slow down, or its ejection is over and it awaits its
	// probe. Attempts go to degraded endpoints only when no healthy one is
	// left.
	HealthDegraded Health = "degraded"
	// HealthEjected: out, by outlier detection or an open breaker.
	HealthEjected Health = "ejected"
)
