package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of a [Store].
const (
	// DefaultBudget is the longest one store call may take before the
	// caller falls back to its local share. Loopback round trips take a
	// fraction of a millisecond, but a loaded host holds a process up for
	// tens of them: on two cores with a CPU burner on each, three
	// replicas under load fell back 129 times in 42 s at a budget of 5 ms
	// (and, at load averages of 10 to 14, 36 times in 28 s at 20 ms and 5
	// at 50 ms); at 100 ms, 3 times in 70 s, all in one 7 s run at a load
	// average of 11. A store that hangs costs an admission this much at
	// most.
	DefaultBudget = 100 * time.Millisecond
	// DefaultRetryInterval is how long a Store stops asking Redis after a
	// failed or late call; then one call tries again.
	DefaultRetryInterval = 200 * time.Millisecond
	// DefaultHeartbeat is how often a Store announces its replica, and
	// DefaultReconcile how often a [Bus] reads the shared state.
	DefaultHeartbeat = time.Second
	DefaultReconcile = time.Second
	// DefaultNamespace prefixes every key and channel.
	DefaultNamespace = "breakwater"
)

// ErrUnavailable is returned by store calls while Redis is considered
// down: after a call failed or ran past its budget, the Store answers
// this at once, without a round trip, until the retry interval passes.
var ErrUnavailable = errors.New("redisstore: redis unavailable")

// ErrBudget is returned by a store call that did not complete within the
// Store's budget.
var ErrBudget = errors.New("redisstore: redis call over budget")

// An Option configures [New].
type Option func(*config)

type config struct {
	ns        string
	id        string
	budget    time.Duration
	retry     time.Duration
	heartbeat time.Duration
	replicas  int
	onMode    func(shared bool, err error)
	queue     int // admissions that may wait for the sender
}

// WithNamespace prefixes every key and channel the Store uses with ns, so
// that several services share one Redis. Default: "breakwater".
func WithNamespace(ns string) Option { return func(c *config) { c.ns = ns } }

// WithReplicaID names this replica; it must differ between replicas, and
// must not be "*" nor hold a newline or NUL. Default: a random 64-bit hex
// string.
func WithReplicaID(id string) Option { return func(c *config) { c.id = id } }

// WithBudget sets the longest one store call may take; past it the call
// gives up with [ErrBudget] and the caller falls back to its local share.
// It holds even when the client was built without ContextTimeoutEnabled
// (go-redis then ignores context deadlines): such calls are waited for on
// a timer instead. A rate limit admission waits for its answer on its own
// budget either way; the Store's other calls (heartbeat, bus) then cost a
// goroutine each. Admissions begun within an eighth of d (at most 1 ms) of
// each other share one timer: an admission's budget may end that much
// early, never late. Default: [DefaultBudget].
func WithBudget(d time.Duration) Option { return func(c *config) { c.budget = d } }

// WithRetryInterval sets how long the Store stops asking Redis after a
// call failed or ran over budget: meanwhile calls fail at once with
// [ErrUnavailable], and then one call tries again. It bounds how long
// after Redis comes back the Store is shared again. Default:
// [DefaultRetryInterval].
func WithRetryInterval(d time.Duration) Option { return func(c *config) { c.retry = d } }

// WithHeartbeat sets how often the Store announces its replica in Redis;
// a replica not heard of for three intervals no longer counts. Default:
// [DefaultHeartbeat].
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithReplicas fixes the number of replicas sharing the limits instead of
// counting them by heartbeat. Default: 0, count them.
func WithReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// OnModeChange calls fn (outside every lock, from the goroutine whose call
// changed the mode) when the Store falls back to local shares (shared
// false, with the error) and when it is shared again (shared true). On a
// ClusterClient, whose masters each have their mode, it reports the
// Store's as [Store.Shared] does: local when the first master falls back,
// shared when the last comes back.
func OnModeChange(fn func(shared bool, err error)) Option {
	return func(c *config) { c.onMode = fn }
}

// Store connects breakwater's shared limits, pauses and breaker trips to
// Redis. It owns two background goroutines (the heartbeat and the sender of
// batched admissions) and those of its buses' subscriptions; [Store.Close]
// stops them. The client stays the
// caller's: Close does not close it.
//
// Every call runs under the Store's budget. After a failure or a late
// answer the Store stops asking Redis for the retry interval, answering
// [ErrUnavailable] at once (callers then use their local share), and
// then lets one call try again; the first success restores shared mode.
// On a ClusterClient it does so for each master apart: a rate limit
// admission is judged by the mode of its key's master, the Store's other
// calls (heartbeat, buses) by a mode of their own. An error reply about
// the call's own key (such as WRONGTYPE) fails that call only.
//
// A Store is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	cfg    config
	ctxOK  bool // the client honours context deadlines
	start  time.Time

	mode    *mode                // Redis, or on a ClusterClient the calls not tied to a key's node
	cluster *redis.ClusterClient // nil: one mode for every call
	nodes   sync.Map             // on a ClusterClient: master address -> *mode
	modeMu  sync.Mutex
	downs   int // modes down, under modeMu

	replicas atomic.Int64 // counted by heartbeat, >= 1

	calls, fails, skipped atomic.Int64

	batch  *batcher                     // rate limit admissions
	shared atomic.Pointer[sharedBudget] // the admissions' latest budget end
	grain  int64                        // budgetGrain of the budget

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background loops

	// Calls left to finish on their own goroutine (a client that ignores
	// deadlines); closeMu orders their start against Close.
	closeMu  sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
}

// New returns a Store on client, or an error describing every invalid
// option. It starts the heartbeat unless [WithReplicas] fixes the count.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	c := config{ns: DefaultNamespace, budget: DefaultBudget, retry: DefaultRetryInterval, heartbeat: DefaultHeartbeat, queue: queueSize}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("redisstore: New needs a client"))
	}
	if c.ns == "" || strings.ContainsAny(c.ns, "{}") {
		errs = append(errs, fmt.Errorf("redisstore: namespace must be non-empty and without braces, got %q", c.ns))
	}
	if c.budget <= 0 || c.retry <= 0 || c.heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("redisstore: budget, retry interval and heartbeat must be > 0, got %s, %s and %s", c.budget, c.retry, c.heartbeat))
	}
	if c.id != "" && !validReplicaID(c.id) {
		errs = append(errs, fmt.Errorf("redisstore: replica ID must not be \"*\" nor hold a newline or NUL, got %q", c.id))
	}
	if c.replicas < 0 {
		errs = append(errs, fmt.Errorf("redisstore: replicas must be >= 0, got %d", c.replicas))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.id = hex.EncodeToString(b[:])
	}
	s := &Store{client: client, cfg: c, ctxOK: contextTimeouts(client), start: time.Now(), grain: budgetGrain(c.budget), mode: &mode{}}
	s.cluster, _ = client.(*redis.ClusterClient)
	s.replicas.Store(1)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.batch = newBatcher(s, c.queue)
	s.wg.Go(s.batch.run)
	if c.replicas == 0 {
		s.firstBeat()
		s.wg.Go(s.heartbeatLoop)
	}
	return s, nil
}

// contextTimeouts reports whether client passes context deadlines down to
// its sockets.
func contextTimeouts(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// ReplicaID returns this replica's name.
func (s *Store) ReplicaID() string { return s.cfg.id }

// Replicas returns how many replicas share the limits: the configured
// number, or those heard of by heartbeat (at least 1, this one; the last
// count while Redis is down).
func (s *Store) Replicas() int {
	if s.cfg.replicas > 0 {
		return s.cfg.replicas
	}
	return int(s.replicas.Load())
}

// Shared reports whether the Store is in shared mode (Redis answered the
// last call) rather than falling back to local shares. On a ClusterClient
// each master has its own mode, and Shared reports whether all of them
// are shared; [Limiter.Shared] reports one key's.
func (s *Store) Shared() bool {
	s.modeMu.Lock()
	defer s.modeMu.Unlock()
	return s.downs == 0
}

// Stats counts the Store's calls.
type Stats struct {
	Calls   int64 // calls that went to Redis
	Fails   int64 // of which failed or ran over budget
	Skipped int64 // calls answered ErrUnavailable or ErrQueueFull without a round trip
}

// Stats returns the Store's counters.
func (s *Store) Stats() Stats {
	return Stats{Calls: s.calls.Load(), Fails: s.fails.Load(), Skipped: s.skipped.Load()}
}

// Close stops the heartbeat, the sender and every subscription and waits
// for them, and for calls still running past their budget on a client
// that ignores deadlines (at most the client's read timeout). Admissions
// waiting for Redis return [ErrUnavailable] at once; the round trip in
// flight, if any, is waited for up to its budget. It does not close the
// client. Calls after Close fail with [ErrUnavailable]. It is safe to call
// more than once.
func (s *Store) Close() error {
	s.closeMu.Lock()
	done := s.closed
	s.closed = true
	s.closeMu.Unlock()
	if done {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	s.inflight.Wait()
	if s.cfg.replicas == 0 {
		// Leave the replica count at once rather than after three beats.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_ = s.client.ZRem(ctx, s.replicasKey(), s.cfg.id).Err()
	}
	return nil
}

func (s *Store) now() int64 { return int64(time.Since(s.start)) }

// do runs fn against Redis under the budget, or fails at once with
// ErrUnavailable while Redis is considered down. fn gets a context that
// ends at the budget. Its outcome keeps the Store's own mode (on a
// ClusterClient, that of the calls not tied to a key's node).
func (s *Store) do(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.guard(ctx, s.mode, func(ctx context.Context) error { return s.run(ctx, fn) })
}

// doKey is do for a call on key alone: on a ClusterClient its outcome
// keeps the mode of key's master.
func (s *Store) doKey(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	return s.guard(ctx, s.modeOf(ctx, key), func(ctx context.Context) error { return s.run(ctx, fn) })
}

// evalBatched runs gcraScript on keys and args, at once or in the
// sender's next round trip, under the budget (shared: see admission) and
// the same guard as do, with the mode of keys[0]'s node. The caller waits
// for its answer or its budget, whichever comes first, whether the client
// honours deadlines or not.
func (s *Store) evalBatched(ctx context.Context, keys []string, args ...any) (cmd *redis.Cmd, err error) {
	err = s.guard(ctx, s.modeOf(ctx, keys[0]), func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err // the caller gave up before asking
		}
		ctx, cancel := s.admission(ctx)
		defer cancel()
		cmd, err = s.batch.eval(ctx, keys, args...)
		return budgetErr(ctx, err)
	})
	return cmd, err
}

// A mode is whether Redis, or one master of a Cluster, is considered up:
// after a failure or a late answer the Store stops asking it until
// downUntil, then lets one call (the probe) try again.
type mode struct {
	downUntil atomic.Int64 // monotonic ns since start; 0: up
	probing   atomic.Bool
	down      bool // under Store.modeMu
}

// modeOf is the mode of key's node: on a ClusterClient, that of key's
// master as the client's slot map has it (the Store's own mode when the
// client cannot tell yet); otherwise the Store's one mode.
func (s *Store) modeOf(ctx context.Context, key string) *mode {
	if s.cluster == nil {
		return s.mode
	}
	node, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return s.mode
	}
	addr := node.Options().Addr
	if m, ok := s.nodes.Load(addr); ok {
		return m.(*mode)
	}
	m, _ := s.nodes.LoadOrStore(addr, &mode{})
	return m.(*mode)
}

// guard runs call unless the Store is closed or m is down, and keeps m
// from its outcome: a failure or a late answer stops the Store asking
// m's node for the retry interval, a success after that restores shared
// mode. A caller that gave up, a full queue, and an error that Redis
// answered about the call's own key (see keyError) are not the node's
// failure.
func (s *Store) guard(ctx context.Context, m *mode, call func(ctx context.Context) error) error {
	if s.ctx.Err() != nil {
		return ErrUnavailable // closed
	}
	if until := m.downUntil.Load(); until != 0 {
		if s.now() < until || !m.probing.CompareAndSwap(false, true) {
			s.skipped.Add(1)
			return ErrUnavailable
		}
		defer m.probing.Store(false)
	}
	s.calls.Add(1)
	err := call(ctx)
	if err != nil && !errors.Is(err, redis.Nil) && !keyError(err) {
		if ctx.Err() != nil && !errors.Is(err, ErrBudget) {
			return err // the caller gave up: Redis is not to blame
		}
		if errors.Is(err, ErrQueueFull) {
			s.calls.Add(-1) // it never reached Redis
			s.skipped.Add(1)
			return err
		}
		if errors.Is(err, ErrUnavailable) && s.ctx.Err() != nil {
			return err // closed while waiting
		}
		s.fails.Add(1)
		m.downUntil.Store(max(1, s.now()+int64(s.cfg.retry)))
		s.setMode(m, false, err)
		return err
	}
	if m.downUntil.Load() != 0 {
		m.downUntil.Store(0)
		s.setMode(m, true, nil)
	}
	return err
}

// nodeErrors are the prefixes of the error replies that speak for a whole
// server rather than one key: it is loading, read-only (a master demoted
// by a failover), cut off from its master or its cluster, out of memory,
// busy running a script, full, or refusing this client.
var nodeErrors = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS", "OOM", "BUSY", "NOSCRIPT", "NOAUTH", "NOPERM", "WRONGPASS", "MOVED", "ASK", "max number of clients"}

// keyError reports whether err is an error reply that concerns the call's
// own key, such as WRONGTYPE or a script's error on a value it could not
// read: Redis answered, so the call fails alone and the node's mode
// stays as it is.
func keyError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range nodeErrors {
		if redis.HasErrorPrefix(err, p) {
			return false
		}
	}
	return true
}

// run calls fn with a context ending at the budget; when the client would
// ignore that deadline, it waits on a timer instead and leaves the call to
// finish on its own goroutine.
func (s *Store) run(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.budget, ErrBudget)
	defer cancel()
	if s.ctxOK {
		return budgetErr(ctx, fn(ctx))
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrUnavailable
	}
	s.inflight.Add(1)
	s.closeMu.RUnlock()
	done := make(chan error, 1)
	go func() {
		defer s.inflight.Done()
		done <- fn(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), ErrBudget) {
			return ErrBudget
		}
		return ctx.Err()
	}
}

// budgetErr returns ErrBudget for the error of a call under ctx, the
// budget's context, when the budget ran out: ctx ended with ErrBudget, or
// go-redis saw the deadline pass and returned before ctx's timer fired.
// Other errors, and those of a caller that gave up, stay as they are.
func budgetErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(context.Cause(ctx), ErrBudget) {
		return ErrBudget
	}
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && !time.Now().Before(d) {
		return ErrBudget
	}
	return err
}

// setMode marks m shared or not, and calls the OnModeChange function when
// the Store as a whole changes: the first mode to fall back makes it
// local, the last to come back shared again.
func (s *Store) setMode(m *mode, shared bool, err error) {
	s.modeMu.Lock()
	changed := m.down == shared
	m.down = !shared
	was := s.downs == 0
	if changed && shared {
		s.downs--
	} else if changed {
		s.downs++
	}
	flipped := was != (s.downs == 0)
	s.modeMu.Unlock()
	if flipped && s.cfg.onMode != nil {
		s.cfg.onMode(shared, err)
	}
}

func (s *Store) replicasKey() string { return s.cfg.ns + ":{replicas}" }

// heartbeatScript adds this replica to the set of live ones, drops those
// not heard of in time, and returns how many are left, all on Redis's
// clock. KEYS[1]: the sorted set; ARGV: replica, lifetime in ms.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
`)

func (s *Store) beat() {
	life := 3 * s.cfg.heartbeat.Milliseconds()
	var n int64
	err := s.do(s.ctx, func(ctx context.Context) error {
		var err error
		n, err = heartbeatScript.Run(ctx, s.client, []string{s.replicasKey()}, s.cfg.id, life).Int64()
		return err
	})
	if err == nil && n > 0 {
		s.replicas.Store(n)
	}
}

// firstBeat announces the replica before New returns, so that the count
// is right from the first call; it waits up to a second for Redis, and a
// failure leaves the count at 1 until the next beat.
func (s *Store) firstBeat() {
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	n, err := heartbeatScript.Run(ctx, s.client, []string{s.replicasKey()}, s.cfg.id, 3*s.cfg.heartbeat.Milliseconds()).Int64()
	if err == nil && n > 0 {
		s.replicas.Store(n)
	}
}

func (s *Store) heartbeatLoop() {
	t := time.NewTicker(s.cfg.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.beat()
		}
	}
}
