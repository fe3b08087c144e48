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
	// all) for its turn reserves it: st.Allowed is true and delay is how
	// long to wait before going. Otherwise st.Allowed is false, nothing is
	// reserved, and st.RetryAfter says when a request would be admitted.
	//
	// An error means the store could not answer within its own budget;
	// the caller then admits by its local share of the limit (see
	// Replicas), so Take must return quickly, never block on the network
	// for longer than a few milliseconds.
	Take(ctx context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (st RateStatus, delay time.Duration, err error)
	// Replicas is how many replicas share the limits (at least 1): while
	// the store fails, each replica admits limit/Replicas requests per
	// second on its own.
	Replicas() int
}

// ClusterBus carries breaker trips and pauses between the replicas of a
// service (see [WithSharedTrips] and [WithSharedPauses]). A replica
// publishes only what it saw itself; what it receives it applies without
// publishing again, so nothing echoes. The Redis adapter implements it.
//
// Implementations must be safe for concurrent use, and deliver to
// Subscribe's function only events that other replicas published (or
// that a periodic read of the shared state finds still in force).
type ClusterBus interface {
	// Publish sends e to the other replicas. It must not block: calls run
	// on the request path.
	Publish(e ClusterEvent)
	// Subscribe calls fn with every event from the other replicas until
	// the bus is closed; fn must return quickly.
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
}
