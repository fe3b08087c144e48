package breakwater

// Mechanism names the part of breakwater that refused or delayed work (the
// table of rejections in the sentinels' documentation pairs each with its
// errors), and whose state a [ClusterEvent] carries. Its values are
// stable metric label values.
type Mechanism string

// Mechanisms.
const (
	MechBreaker      Mechanism = "breaker"       // a Transport's circuit breaker
	MechRateLimit    Mechanism = "rate_limit"    // a token bucket, a Transport's or a client's
	MechPause        Mechanism = "pause"         // the pause gate
	MechConcurrency  Mechanism = "concurrency"   // a Transport's bulkhead
	MechRetryBudget  Mechanism = "retry_budget"  // the retry budget
	MechShed         Mechanism = "shed"          // a load shedder
	MechTimeout      Mechanism = "timeout"       // a call, attempt or handler timeout
	MechRouteBreaker Mechanism = "route_breaker" // a route breaker
)
