package breakwater

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// SharedLimiter keeps rate limits in a store that the replicas of a
// service share, so that a limit holds across all of them together: the
// per-client limit of a [ClientRateLimit], or a quota of requests to an
// upstream. The Redis adapter (module
// github.com/breakwater-go/breakwater/redisstore) implements it; install
// one with [WithSharedLimiter].
//
// Implementations must be safe for concurrent use.
type SharedLimiter interface {
	// Take asks for one request of key's quota of limit requests per
	// second with a burst of burst, by the same GCRA the local limiter
	// runs. A request that would have to wait at most maxWait (0: not at
	// all) for its turn reserves it: st.Limited is false and delay is how
	// long to wait before going. Otherwise st.Limited is true, nothing is
	// reserved, and st.RetryAfter says when a request would be admitted.
	// The other fields of st are its Remaining and Reset, as far as the
	// store knows them.
	//
	// An error means the store could not answer within its own budget;
	// the caller then admits by its local share of the limit (see
	// Replicas), so Take must return quickly, never block on the network
	// for longer than a few milliseconds.
	Take(ctx context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (st RateLimitSnapshot, delay time.Duration, err error)
	// Replicas is how many replicas share the limits (at least 1): while
	// the store fails, each replica admits limit/Replicas requests per
	// second on its own.
	Replicas() int
}

// SharedCharger is a [SharedLimiter] that can be told what a replica
// admitted on its own while the store failed. The limiters call Charge
// once, before the first admission the store answers after their local
// share admitted: backlog is the share's backlog (how far its bucket is
// from full), scaled to the whole limit's bucket, and the store's bucket
// must then hold at most what a bucket of that backlog holds (its TAT at
// least now + backlog; one further ahead stays). An error leaves the
// limiter on its share, as a failed Take does. The Redis adapter
// implements it.
type SharedCharger interface {
	SharedLimiter
	Charge(ctx context.Context, key string, limit rate.Limit, burst int, backlog time.Duration) error
}

// ClusterBus carries breaker trips and pauses between the replicas of a
// service (see [WithClusterBus]). One bus may carry both: each event says
// which it is ([ClusterEvent.Mechanism]). A replica publishes only what
// it saw itself; what it receives it applies without publishing again, so
// nothing echoes. The Redis adapter implements it.
//
// Implementations must be safe for concurrent use, carry every field of
// an event, and deliver to Subscribe's functions only events that other
// replicas published (or that a periodic read of the shared state finds
// still in force).
type ClusterBus interface {
	// Publish sends e to the other replicas. It must not block: calls run
	// on the request path.
	Publish(e ClusterEvent)
	// Subscribe calls fn with every event from the other replicas until
	// the bus is closed; fn must return quickly. Breakers and pause gates
	// that share a bus each subscribe, and each applies only the events
	// of its own mechanism.
	Subscribe(fn func(ClusterEvent))
}

// ClusterEvent is one change of shared state: a key opened (a breaker
// tripped) or paused for For, or, when For is 0, closed again (a breaker
// reset, a pause resumed).
type ClusterEvent struct {
	Key string
	// For is how long the key stays open or paused from the moment the
	// event was published; 0 closes it.
	For time.Duration
	// Manual marks a Trip, Reset or Resume made by hand: it applies on
	// every replica at once, whatever quorum the bus requires.
	Manual bool
	// Mechanism is whose state changed: [MechBreaker] for a breaker's
	// trip or reset, [MechPause] for a pause gate's pause or resume.
	// Breakers apply only MechBreaker events and pause gates only
	// MechPause ones, so a pause never opens a breaker and a trip never
	// pauses a key. An event of any other mechanism, or of none (from a
	// bus that does not carry the field), is dropped.
	Mechanism Mechanism
}
