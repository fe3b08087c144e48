// Package redisstore shares breakwater's rate limits, pauses and breaker
// trips between the replicas of a service through Redis, the store those
// services already run. It takes the [redis.UniversalClient] the caller
// has, so standalone, Sentinel and Cluster deployments all work.
//
// One [Store] per process, on the caller's client:
//
//	store, err := redisstore.New(client)
//	defer store.Close()
//
// What it shares, each by one option of the root package:
//
//   - rate limits, inbound per client or outbound per upstream:
//     [breakwater.WithSharedLimiter] with [Store.Limiter]. Every admission
//     runs the GCRA that breakwater's local limiter runs, in one Lua
//     script, on Redis's clock, in one round trip (shared with concurrent
//     admissions, see "Batching");
//   - pauses, so that one replica's 429 with Retry-After holds the key on
//     every replica, and breaker trips: [breakwater.WithClusterBus] with
//     a [Store.Bus], given to a Transport (one bus for its breakers and
//     its pause gate: each event says which it is, so a pause never opens
//     a breaker) or to the registries. A breaker's admission never
//     touches the network: trips and pauses travel on pub/sub, after the
//     fact, and a periodic read lets late replicas catch up.
//
// # When Redis is slow or down
//
// Every call has a budget ([WithBudget], [DefaultBudget] by default). A
// call that fails or runs past it makes the Store stop asking Redis for
// the retry interval ([WithRetryInterval], 200 ms): meanwhile, and for
// that call, rate limits admit by the replica's local share of the limit
// (the limit divided by the replicas counted by heartbeat, or
// [WithReplicas]), and trips and pauses stay local. Then one call tries
// again, and the first that succeeds restores shared mode. On a
// ClusterClient each master has its mode: a master that fails makes only
// the keys it holds fall back ([Limiter.Shared] tells a key's mode,
// [Store.Shared] whether every master is shared). An error reply about
// one key (WRONGTYPE, a script's error) fails that call alone and changes
// no mode; the limiter's scripts read a value another client wrote that
// is no bucket state (another type, not a finite number) as an absent
// key, one further ahead than they ever set as an empty bucket, and
// overwrite it.
//
// What a fallback admits (see [breakwater.WithSharedLimiter] for the
// whole contract): a key's share starts empty when the key falls back,
// since Redis may have spent the burst just before; each share admits
// limit/replicas per second at most, whatever the other replicas ask, so
// a busy replica is refused what its share does not cover; and back in
// shared mode the key first charges Redis with what its share admitted
// ([Limiter.Charge]), so that Redis's bucket, refilled meanwhile, holds no
// more than the share did. Replicas that lose and regain Redis together
// so admit at most limit + burst in any 1 s window, seconds with
// fallbacks included (burst >= replicas); one replica cut off alone can
// admit its share on top of what the others admit.
//
// Rate limit admissions begun within an eighth of the budget (at most
// 1 ms) of each other share one timer for it, so an admission's budget
// may end up to that much early, never late: a timer of its own would
// cost a caller alone about 3 % of a loopback round trip. An admission
// ends at its caller's deadline when that comes first; its caller's
// cancellation alone does not end a round trip already on its way, which
// the budget bounds.
//
// Build the client with ContextTimeoutEnabled (otherwise go-redis ignores
// deadlines, and the Store must watch each call on a goroutine of its
// own), MaxRetries: -1 (the Store retries by itself, after its retry
// interval) and DialerRetries: 1. With go-redis's defaults a dead server
// makes the pool hold its dial error for up to a second after Redis is
// back, and shared mode returns that much later:
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "localhost:6379",
//		ContextTimeoutEnabled: true,
//		MaxRetries:            -1,
//		DialerRetries:         1,
//	})
//
// # Batching
//
// While fewer than 8 of the Store's admissions are on their way, an
// admission goes to Redis at once, on its caller's goroutine, in a round
// trip of its own. Beyond that they queue, and one sender goroutine sends
// everything queued in one pipeline: one round trip, one socket write and
// read, for many admissions, and again while the queue fills. Nothing
// waits for company, so one caller alone, or a few, pay what a plain
// EVALSHA does, and many callers pay one round trip per batch instead of
// one each: on two cores, 64 concurrent callers were admitted 1.5 times
// as fast as go-redis/redis_rate admits them with one round trip each,
// with a p99 below a bare PING's (figures in the README). Each admission
// keeps its own budget: a caller whose budget ends stops waiting and
// falls back to its local share while the batch goes on, and an answer that comes too late is
// dropped. An admission whose budget ended before its batch left is not
// sent. At most 1024 admissions wait; one more falls back at once with
// [ErrQueueFull], which does not count against Redis. A batch that fails
// (Redis down, a late answer) counts as each of its callers' failure, as
// a single call would. A batch answered NOSCRIPT (Redis restarted or its
// scripts flushed) is sent again with the script's source. On a
// ClusterClient, go-redis splits a batch by node and sends to the nodes in
// parallel. With a client that ignores deadlines, every admission goes
// through the sender, so none costs a goroutine of its own.
//
// # Keys
//
// Every key starts with the namespace ([WithNamespace], "breakwater"). A
// rate limit's key is "<ns>:rl:<name>:{<key>}" (a [breakwater.ClientRateLimit]
// hands over a client key longer than 128 bytes as "#" and a SHA-256
// digest that every replica computes alike, so a long bearer token is one
// key of bounded size on every replica); a bus keeps its state in
// "<ns>:bus:{<name>}", one field per mechanism, key and replica,
// "<mechanism>:<len(key)>:<key>:<replica>" (the length keeps keys of any
// bytes apart), and sends on the channel "<ns>:bus:<name>"; the replicas
// are counted in "<ns>:{replicas}". Every script touches one key, and the
// braces are Cluster hash tags.
package redisstore
