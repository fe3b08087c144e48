package redisstore_test

// The claims of cluster mode, shown on a real redis-server that each test
// starts on a free loopback port (redistest). Each "replica" is a full
// stack of its own: its own go-redis client and connection pool, Store,
// registries, HTTP server and Transport; they share nothing but Redis.
// The shared-limits claim (claim_limits_test.go) runs its replicas as
// separate OS processes; the others run them in this one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// claimBudget is the store budget of these tests: generous, because the
// race detector on a small shared machine slows every call; the outage
// test checks the default budget separately.
const claimBudget = 50 * time.Millisecond

func newRedisClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClaimSharedPause: one replica's 429 with Retry-After: 1 holds the
// upstream's key on every replica: once the pause has reached a replica,
// none of its requests reaches the upstream before the pause ends.
//
// Pauses travel after the fact, so a request that a replica let through
// before the pause reached it still goes out: the test tells those apart
// by when each request started, against when the pause took effect on
// its replica (stamped after the gates had it in force), rather than by a
// grace period after the 429 that a loaded machine can outrun.
func TestClaimSharedPause(t *testing.T) {
	srv := redistest.New(t)
	type arrival struct {
		replica          int
		started, arrived time.Time
	}
	var (
		mu       sync.Mutex
		start    time.Time
		t429     time.Time
		arrivals []arrival
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		var a arrival
		fmt.Sscan(r.Header.Get("X-Replica"), &a.replica)
		started, _ := strconv.ParseInt(r.Header.Get("X-Started"), 10, 64)
		a.started, a.arrived = time.Unix(0, started), now.Round(0)
		arrivals = append(arrivals, a)
		if t429.IsZero() && now.Sub(start) > 300*time.Millisecond {
			t429 = now.Round(0)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer upstream.Close()

	buses := make([]*pauseRecorder, 3)
	clients := make([]*http.Client, 3)
	for i := range buses {
		store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
		bus, err := store.Bus("pauses")
		if err != nil {
			t.Fatal(err)
		}
		buses[i] = &pauseRecorder{ClusterBus: bus}
		tr, err := bw.NewTransport(bw.WithClusterBus(buses[i]), bw.WithMaxAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = &http.Client{Transport: tr}
		defer clients[i].CloseIdleConnections()
	}
	waitSubscribers(t, srv.Addr, "breakwater:bus:pauses", 3)
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	var wg sync.WaitGroup
	for i, client := range clients {
		wg.Go(func() {
			for deadline := start.Add(1800 * time.Millisecond); time.Now().Before(deadline); {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
				req.Header.Set("X-Replica", fmt.Sprint(i))
				req.Header.Set("X-Started", fmt.Sprint(time.Now().UnixNano()))
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
				time.Sleep(3 * time.Millisecond)
			}
		})
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if t429.IsZero() {
		t.Fatal("the upstream never answered 429")
	}
	// When the pause took effect on each replica, and a time before which
	// it cannot have ended there: the replica that saw the 429 paused for
	// a second after it; the others for the time left that they were
	// sent, from when they received it.
	applied, ends := make([]time.Time, len(buses)), make([]time.Time, len(buses))
	for i, b := range buses {
		at, end, origin, ok := b.first()
		if !ok {
			t.Fatalf("the pause never reached replica %d", i)
		}
		if origin {
			end = t429.Add(time.Second)
		}
		applied[i], ends[i] = at, end
		t.Logf("replica %d paused %v after the 429 (set it there: %v)", i, at.Sub(t429), origin)
		if lag := at.Sub(t429); lag > 100*time.Millisecond {
			t.Errorf("the pause reached replica %d %v after the 429, want within 100ms", i, lag)
		}
	}
	var inFlight, held, after int
	for _, a := range arrivals {
		switch {
		case !a.arrived.After(t429):
		case !a.arrived.Before(ends[a.replica]):
			after++
		case a.started.Before(applied[a.replica]):
			inFlight++ // let through before the pause reached its replica
		default:
			held++
			if held <= 5 {
				t.Errorf("replica %d started a request %v after the pause took effect there; it reached the upstream %v after the 429, before the pause ended",
					a.replica, a.started.Sub(applied[a.replica]), a.arrived.Sub(t429))
			}
		}
	}
	t.Logf("%d requests; after the 429: %d already let through before the pause reached their replica, %d let through during it, %d after it", len(arrivals), inFlight, held, after)
	if after == 0 {
		t.Fatal("no request after the pause: the test shows nothing")
	}
}

// pauseRecorder is a bus that records when a pause first took effect on
// its replica: after the gates applied one from another replica, or when
// they publish their own (which they do once it is in force).
type pauseRecorder struct {
	bw.ClusterBus
	mu     sync.Mutex
	at     time.Time
	end    time.Time // a time before which the pause cannot end
	origin bool
}

func (b *pauseRecorder) Publish(e bw.ClusterEvent) {
	if e.For > 0 {
		b.record(time.Now(), time.Time{}, true)
	}
	b.ClusterBus.Publish(e)
}

func (b *pauseRecorder) Subscribe(fn func(bw.ClusterEvent)) {
	b.ClusterBus.Subscribe(func(e bw.ClusterEvent) {
		before := time.Now()
		fn(e)
		if e.For > 0 {
			b.record(time.Now(), before.Add(e.For), false)
		}
	})
}

func (b *pauseRecorder) record(at, end time.Time, origin bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at.IsZero() {
		b.at, b.end, b.origin = at.Round(0), end.Round(0), origin
	}
}

func (b *pauseRecorder) first() (at, end time.Time, origin, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at, b.end, b.origin, !b.at.IsZero()
}

// waitSubscribers waits until channel has n subscribers on the servers at
// addrs together (the nodes of a Cluster each count their own), so that a
// message published next reaches them all.
func waitSubscribers(t *testing.T, addr, channel string, n int64, more ...string) {
	t.Helper()
	var cs []*redis.Client
	for _, a := range append([]string{addr}, more...) {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		cs = append(cs, c)
	}
	if !waitFor(t, 5*time.Second, func() bool {
		var sum int64
		for _, c := range cs {
			m, err := c.PubSubNumSub(context.Background(), channel).Result()
			if err != nil {
				return false
			}
			sum += m[channel]
		}
		return sum >= n
	}) {
		t.Fatalf("%s: fewer than %d subscribers after 5s", channel, n)
	}
}

// trippedAt records when a registry's breaker of key opened by a trip
// from another replica.
type trippedAt struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (r *trippedAt) listener(name string) bw.Option {
	return bw.WithObserver(bw.ObserverFunc(func(_ context.Context, e bw.Event) {
		if tr := e.Transition; tr != nil && tr.To == bw.StateOpen && tr.Reason == bw.ReasonCluster {
			r.mu.Lock()
			if _, ok := r.at[name]; !ok {
				r.at[name] = time.Now()
			}
			r.mu.Unlock()
		}
	}))
}

func (r *trippedAt) get(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[name]
	return t, ok
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}

// TestClaimTripPropagation: a breaker that opens on one replica is open on
// every other one within 100 ms; a replica that starts later catches up
// by reconciliation.
func TestClaimTripPropagation(t *testing.T) {
	srv := redistest.New(t)
	rec := &trippedAt{at: map[string]time.Time{}}
	var regs []*bw.Breakers
	for i := range 3 {
		store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
		bus, err := store.Bus("trips", redisstore.WithReconcile(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(3)), bw.WithOpenTimeout(3*time.Second, time.Minute), bw.WithClusterBus(bus), rec.listener(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, bs)
	}
	waitSubscribers(t, srv.Addr, "breakwater:bus:trips", 3)
	start := time.Now()
	for range 3 {
		regs[0].Get("payments").RecordFailure(bw.ServerError)
	}
	if regs[0].Get("payments").State() != bw.StateOpen {
		t.Fatal("replica 0 did not open")
	}
	for i := 1; i < 3; i++ {
		if !waitFor(t, time.Second, func() bool { _, ok := rec.get(fmt.Sprint(i)); return ok }) {
			t.Fatalf("replica %d never opened", i)
		}
		at, _ := rec.get(fmt.Sprint(i))
		lag := at.Sub(start)
		t.Logf("replica %d open %v after replica 0", i, lag)
		if lag > 100*time.Millisecond {
			t.Errorf("replica %d opened %v after replica 0, want within 100ms", i, lag)
		}
		if _, err := regs[i].Get("payments").Allow(); !errors.Is(err, bw.ErrCircuitOpen) {
			t.Errorf("replica %d admits: %v", i, err)
		}
	}
	// A replica that starts now catches up by reading the shared state.
	store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
	bus, _ := store.Bus("trips", redisstore.WithReconcile(100*time.Millisecond))
	late, _ := bw.NewBreakers(bw.WithClusterBus(bus))
	if !waitFor(t, time.Second, func() bool { return late.Get("payments").State() == bw.StateOpen }) {
		t.Fatal("a late replica never learned the trip")
	}
	// A reset on any replica closes the key everywhere.
	regs[2].Get("payments").Reset()
	for i, bs := range append(regs[:2], late) {
		if !waitFor(t, time.Second, func() bool { return bs.Get("payments").State() == bw.StateClosed }) {
			t.Fatalf("registry %d still %v after a reset elsewhere", i, bs.Get("payments").State())
		}
	}
}

// TestClaimQuorum: with a quorum of 2, one replica's trip stays its own;
// a second replica's trip opens the third.
func TestClaimQuorum(t *testing.T) {
	srv := redistest.New(t)
	var regs []*bw.Breakers
	for range 3 {
		store := newStore(t, newRedisClient(t, srv.Addr), redisstore.WithBudget(claimBudget))
		bus, _ := store.Bus("trips", redisstore.WithQuorum(2), redisstore.WithReconcile(100*time.Millisecond))
		bs, _ := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(1)), bw.WithClusterBus(bus),
			bw.WithOpenTimeout(5*time.Second, time.Minute)) // open through the reconcile rounds
		regs = append(regs, bs)
	}
	waitSubscribers(t, srv.Addr, "breakwater:bus:trips", 3)
	regs[0].Get("search").RecordFailure(bw.ServerError)
	time.Sleep(300 * time.Millisecond) // three reconcile rounds
	if s1, s2 := regs[1].Get("search").State(), regs[2].Get("search").State(); s1 != bw.StateClosed || s2 != bw.StateClosed {
		t.Fatalf("one replica's trip spread without quorum: %v %v", s1, s2)
	}
	regs[1].Get("search").RecordFailure(bw.ServerError)
	if !waitFor(t, time.Second, func() bool { return regs[2].Get("search").State() == bw.StateOpen }) {
		t.Fatal("two replicas' trips did not open the third")
	}
}

// TestClaimRedisKilled: Redis is killed mid-run (SIGKILL, by the PID the
// test started) and restarted on the same port. No call fails because of
// it but the first of each fallback on each replica (its share starts
// empty, and a limit far above the load refills it within 30 µs), each admission during the outage returns within the store budget,
// the stores are shared again within 1 s of Redis answering, and no
// goroutine is left behind.
//
// An admission's time on the caller's clock includes whatever held the
// process up meanwhile (other programs on a loaded machine, the garbage
// collector): a stall meter measures those holds, and an admission fails
// the claim when the rest of its time is over the budget + slack.
func TestClaimRedisKilled(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the server stops
	srv := redistest.New(t)
	const budget = 20 * time.Millisecond // tighter than the default, so that the bound says something
	const slack = 10 * time.Millisecond  // the work of an admission, and holds the meter misses
	stalls := startStallMeter()
	defer stalls.stop()
	type replica struct {
		store *redisstore.Store
		rl    *bw.RateLimiters
		back  atomic.Int64 // unix ns of the first return to shared mode after the restart
	}
	var reps []*replica
	var clients []*redis.Client
	var restartedAt atomic.Int64
	var fallbacks atomic.Int64 // the stores' falls to local shares
	for range 3 {
		rep := &replica{}
		// The client settings README recommends: no retries inside a
		// budget, one dial per attempt (see redisstore's package doc).
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
		clients = append(clients, c)
		s, err := redisstore.New(c, redisstore.WithBudget(budget), redisstore.WithHeartbeat(100*time.Millisecond), redisstore.OnModeChange(func(shared bool, err error) {
			if !shared {
				fallbacks.Add(1)
			}
			if r := restartedAt.Load(); shared && r != 0 {
				rep.back.CompareAndSwap(0, time.Now().UnixNano())
			}
			t.Logf("%s shared=%v err=%v", time.Now().Format("15:04:05.000"), shared, err)
		}))
		if err != nil {
			t.Fatal(err)
		}
		rep.store = s
		// A limit the load never reaches: every refusal would be the outage's.
		rep.rl, _ = bw.NewRateLimiters(100_000, 1000, bw.WithSharedLimiter(s.Limiter("inbound")), bw.WithMaxWait(0))
		reps = append(reps, rep)
	}
	var (
		refused atomic.Int64
		outage  atomic.Bool
		calls   atomic.Int64
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		slowMu  sync.Mutex
		slow    [][2]time.Time // admissions during the outage over budget + slack
		slowest time.Duration
	)
	for _, rep := range reps {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				ok := !rep.rl.Take("client").Limited
				d := time.Since(t0)
				calls.Add(1)
				if !ok {
					refused.Add(1)
				}
				if outage.Load() {
					slowMu.Lock()
					slowest = max(slowest, d)
					if d > budget+slack {
						slow = append(slow, [2]time.Time{t0, t0.Add(d)})
					}
					slowMu.Unlock()
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	outage.Store(true)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(700 * time.Millisecond)
	for i, rep := range reps {
		if rep.store.Shared() {
			t.Errorf("replica %d still in shared mode %v after the kill", i, time.Since(killed))
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	restartedAt.Store(restarted.UnixNano())
	outage.Store(false)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	stalls.stop()
	var over int
	for i, s := range slow {
		held := stalls.held(s[0], s[1])
		if i < 5 {
			t.Logf("an admission took %v during the outage, while the process was held up for %v", s[1].Sub(s[0]), held)
		}
		if s[1].Sub(s[0])-held > budget+slack {
			over++
		}
	}
	t.Logf("%d admissions, %d refused; slowest during the outage %v (budget %v), %d over budget + %v, %d of them not for holds of the process",
		calls.Load(), refused.Load(), slowest, budget, len(slow), slack, over)
	if refused.Load() > fallbacks.Load() {
		t.Errorf("%d admissions refused because Redis was down, more than the first of each of the %d fallbacks", refused.Load(), fallbacks.Load())
	}
	if over != 0 {
		t.Errorf("%d admissions during the outage took longer than the budget + %v, not counting holds of the process", over, slack)
	}
	for i, rep := range reps {
		back := time.Unix(0, rep.back.Load())
		lag := back.Sub(restarted)
		t.Logf("replica %d shared again %v after Redis answered", i, lag)
		if rep.back.Load() == 0 || lag > time.Second {
			t.Errorf("replica %d: back %v after the restart, want within 1s", i, lag)
		}
	}
	for _, rep := range reps {
		rep.store.Close()
	}
	for _, c := range clients {
		c.Close()
	}
}

// TestClaimRedisCluster runs the shared limit and trip propagation on a
// Redis Cluster of three masters started by the test.
func TestClaimRedisCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	newCluster := func() *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	var stores []*redisstore.Store
	var regs []*bw.RateLimiters
	var brs []*bw.Breakers
	for range 2 {
		s := newStore(t, newCluster(), redisstore.WithBudget(claimBudget))
		stores = append(stores, s)
		rl, _ := bw.NewRateLimiters(1, 5, bw.WithSharedLimiter(s.Limiter("inbound")), bw.WithMaxWait(0))
		regs = append(regs, rl)
		bus, _ := s.Bus("trips")
		bs, _ := bw.NewBreakers(bw.WithClusterBus(bus))
		brs = append(brs, bs)
	}
	// Keys spread over the slots of all three nodes: each admits its burst
	// of 5 across both replicas together, and no more.
	for k := range 12 {
		key := fmt.Sprint("client-", k)
		admitted := 0
		for i := range 20 {
			if !regs[i%2].Take(key).Limited {
				admitted++
			}
		}
		if admitted != 5 {
			t.Fatalf("key %s: admitted %d across two replicas, want the burst of 5", key, admitted)
		}
	}
	for i, s := range stores {
		if st := s.Stats(); st.Fails != 0 || !s.Shared() {
			t.Fatalf("store %d on the cluster: %+v", i, st)
		}
	}
	waitSubscribers(t, cl.Addrs()[0], "breakwater:bus:trips", 2, cl.Addrs()[1:]...)
	brs[0].Get("ledger").Trip(5 * time.Second)
	if !waitFor(t, time.Second, func() bool { return brs[1].Get("ledger").State() == bw.StateOpen }) {
		t.Fatal("a trip did not cross the cluster")
	}
}

// stallMeter measures how long the process was held up (by other programs
// on the machine, the garbage collector, the scheduler): a goroutine asks
// to wake every millisecond, and the time by which a wake comes more than
// a millisecond late is time the process did not run it.
type stallMeter struct {
	mu    sync.Mutex
	wakes []time.Time
	quit  chan struct{}
	done  chan struct{}
}

func startStallMeter() *stallMeter {
	m := &stallMeter{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.quit:
				return
			default:
			}
			now := time.Now()
			m.mu.Lock()
			m.wakes = append(m.wakes, now)
			m.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	return m
}

// stop stops the meter; it may be called more than once.
func (m *stallMeter) stop() {
	select {
	case <-m.quit:
	default:
		close(m.quit)
	}
	<-m.done
}

// held returns how much of [from, to] the meter spent more than 1 ms
// late: the part of each sleep past 2 ms.
func (m *stallMeter) held(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for k := 1; k < len(m.wakes); k++ {
		lo, hi := m.wakes[k-1].Add(2*time.Millisecond), m.wakes[k]
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d
}
