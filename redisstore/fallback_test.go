package redisstore_test

// What the fallback to local shares does, on real redis-servers: a shared
// limit stays within limit + burst in any 1 s window across replicas in
// seconds that hold fallbacks; a value another client wrote into one key
// is that key's problem only; on a
// Cluster, one master's outage is its own keys' fallback only.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"

	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// admission is one admitted request, timed by the caller: the instant it
// was admitted (on Redis's clock or the replica's, one machine's wall
// clock either way) lies between from and to.
type admission struct{ from, to time.Time }

// maxAdmittedIn returns the largest number of admissions that certainly
// fell within one window of d: those that began at or after the window's
// start and ended before its end, for windows starting at an admission.
func maxAdmittedIn(as []admission, d time.Duration) int {
	slices.SortFunc(as, func(a, b admission) int { return a.from.Compare(b.from) })
	best := 0
	for i := range as {
		n := 0
		end := as[i].from.Add(d)
		for _, b := range as[i:] {
			if !b.from.Before(end) {
				break
			}
			if b.to.Before(end) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// sharedLoad runs three replicas, each its own client and Store on addr,
// sharing limit/s + burst for one key, each taking as fast as every 2 ms,
// for d; faults runs meanwhile. It returns every admission, and the
// stores' counters.
func sharedLoad(t *testing.T, addr string, limit, burst int, d time.Duration, faults func()) ([]admission, []redisstore.Stats) {
	t.Helper()
	var (
		mu  sync.Mutex
		as  []admission
		wg  sync.WaitGroup
		sts []*redisstore.Store
	)
	var rls []*bw.RateLimiters
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { c.Close() })
		s := newStore(t, c, redisstore.WithReplicas(3), redisstore.WithBudget(claimBudget), redisstore.WithRetryInterval(100*time.Millisecond))
		sts = append(sts, s)
		rl, err := bw.NewRateLimiters(rate.Limit(limit), burst, bw.WithSharedLimiter(s.Limiter("in")), bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		rls = append(rls, rl)
	}
	stop := time.Now().Add(d)
	for _, rl := range rls {
		wg.Go(func() {
			for time.Now().Before(stop) {
				from := time.Now()
				ok := !rl.Take("client").Limited
				to := time.Now()
				if ok {
					mu.Lock()
					as = append(as, admission{from, to})
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	faults()
	wg.Wait()
	var stats []redisstore.Stats
	for _, s := range sts {
		stats = append(stats, s.Stats())
	}
	return as, stats
}

// TestFallbackStaysWithinLimit: three replicas share 30/s + burst 6 under
// a load far above it while the redis-server is paused (CLIENT PAUSE, so
// every call runs past its budget) and later killed and restarted: in no
// 1 s window do they admit more than 36 together, though each fell back
// to its local share and came back.
func TestFallbackStaysWithinLimit(t *testing.T) {
	srv := redistest.New(t)
	const limit, burst = 30, 6
	admin := newRedisClient(t, srv.Addr)
	as, stats := sharedLoad(t, srv.Addr, limit, burst, 4*time.Second, func() {
		time.Sleep(800 * time.Millisecond)
		if err := admin.ClientPause(context.Background(), 300*time.Millisecond).Err(); err != nil {
			t.Error(err)
		}
		time.Sleep(1200 * time.Millisecond)
		if err := srv.Kill(); err != nil {
			t.Error(err)
		}
		time.Sleep(400 * time.Millisecond)
		if err := srv.Restart(); err != nil {
			t.Error(err)
		}
	})
	n := maxAdmittedIn(as, time.Second)
	t.Logf("%d admitted in 4 s, at most %d in any 1 s (limit %d + burst %d); stores %+v", len(as), n, limit, burst, stats)
	for i, st := range stats {
		if st.Fails == 0 {
			t.Errorf("store %d never fell back: the run shows nothing", i)
		}
	}
	if n > limit+burst {
		t.Errorf("%d admitted in one 1 s window across the replicas, more than limit %d + burst %d", n, limit, burst)
	}
	if len(as) < 3*limit {
		t.Errorf("only %d admitted in 4 s of %d/s: the fallback refused far more than it must", len(as), limit)
	}
}

// TestForeignValueIsThatKeysOnly: a list and a string that is no number,
// written by another client into limiter keys, and a number far in the
// future, neither fail the admission of their keys nor make the Store
// fall back: the script overwrites them, and every other key stays
// shared.
func TestForeignValueIsThatKeysOnly(t *testing.T) {
	srv := redistest.New(t)
	c := newRedisClient(t, srv.Addr)
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(time.Second))
	l := s.Limiter("in")
	ctx := context.Background()
	other := newRedisClient(t, srv.Addr)
	if err := other.RPush(ctx, l.Key("list"), "x", "y").Err(); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, l.Key("word"), "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, l.Key("inf"), "inf", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, l.Key("future"), "1e30", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"list", "word", "inf"} {
		st, _, err := l.Take(ctx, key, 10, 5, 0)
		if err != nil || st.Limited || st.Remaining != 4 {
			t.Errorf("key %q holding another client's value: %+v %v, want admitted as a full bucket", key, st, err)
		}
	}
	// A TAT further ahead than the limiter ever sets is an empty bucket:
	// refused, rewritten, and full again one burst window later.
	st, _, err := l.Take(ctx, "future", 1000, 5, 0)
	if err != nil || !st.Limited || st.RetryAfter > 5*time.Millisecond {
		t.Errorf("key holding a TAT far ahead: %+v %v, want refused for one interval", st, err)
	}
	time.Sleep(10 * time.Millisecond)
	if st, _, err := l.Take(ctx, "future", 1000, 5, 0); err != nil || st.Limited {
		t.Errorf("a burst window after the rewrite: %+v %v", st, err)
	}
	for _, key := range []string{"list", "word", "inf", "future"} {
		if v, err := other.Get(ctx, l.Key(key)).Result(); err != nil {
			t.Errorf("key %q after the admission: %v", key, err)
		} else if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			t.Errorf("key %q still holds %q", key, v)
		}
	}
	if st, _, err := l.Take(ctx, "clean", 10, 5, 0); err != nil || st.Limited {
		t.Errorf("another key: %+v %v", st, err)
	}
	if st := s.Stats(); st.Fails != 0 || !s.Shared() {
		t.Errorf("the store fell back over other clients' values: %+v, shared %v", st, s.Shared())
	}
}

// TestKeyErrorKeepsShared: an error reply about one key (WRONGTYPE from a
// charge is the one the scripts leave to Redis) fails that call alone;
// the Store stays shared.
func TestKeyErrorKeepsShared(t *testing.T) {
	srv := redistest.New(t)
	c := newRedisClient(t, srv.Addr)
	var flips atomic.Int64
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(time.Second), redisstore.OnModeChange(func(bool, error) { flips.Add(1) }))
	ctx := context.Background()
	// A script that fails on its key, run through the Store's guard as
	// every limiter call is.
	if err := c.RPush(ctx, "breakwater:rl:in:{k}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	err := redisstore.DoKey(s, ctx, "breakwater:rl:in:{k}", func(ctx context.Context) error {
		return c.Incr(ctx, "breakwater:rl:in:{k}").Err()
	})
	if err == nil {
		t.Fatal("INCR of a list succeeded")
	}
	if st := s.Stats(); st.Fails != 0 || !s.Shared() || flips.Load() != 0 {
		t.Fatalf("a WRONGTYPE reply made the store fall back: %v, %+v", err, st)
	}
	if _, _, err := s.Limiter("in").Take(ctx, "other", 10, 5, 0); err != nil {
		t.Fatal(err)
	}
}

// TestClusterModePerNode: on a Redis Cluster of three masters, a master
// that stops answering (CLIENT PAUSE, past the budget) makes its own keys
// fall back; keys on the other masters stay shared and keep being
// admitted by Redis.
func TestClusterModePerNode(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRedirects: 1, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(50*time.Millisecond), redisstore.WithRetryInterval(100*time.Millisecond))
	l := s.Limiter("in")
	ctx := context.Background()
	// One key per master.
	byNode := map[string]string{}
	for i := 0; len(byNode) < 3 && i < 1000; i++ {
		key := fmt.Sprint("client-", i)
		node, err := c.MasterForKey(ctx, l.Key(key))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byNode[node.Options().Addr]; !ok {
			byNode[node.Options().Addr] = key
		}
	}
	for _, key := range byNode {
		if _, _, err := l.Take(ctx, key, 1000, 1000, 0); err != nil {
			t.Fatal(err)
		}
	}
	paused := cl.Addrs()[0]
	admin := newRedisClient(t, paused)
	if err := admin.ClientPause(ctx, 600*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(400 * time.Millisecond)
	var down, upErrs, upTakes int
	for time.Now().Before(deadline) {
		for addr, key := range byNode {
			_, _, err := l.Take(ctx, key, 1000, 1000, 0)
			switch {
			case addr == paused && err != nil:
				down++
			case addr != paused:
				upTakes++
				if err != nil {
					upErrs++
					if upErrs <= 3 {
						t.Errorf("key %s on a healthy master %s: %v", key, addr, err)
					}
				} else if !l.Shared(key) {
					t.Errorf("key %s on a healthy master is not shared", key)
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if down == 0 {
		t.Fatal("the paused master's key never failed: the test shows nothing")
	}
	if l.Shared(byNode[paused]) {
		t.Error("the paused master's key reports shared")
	}
	t.Logf("paused master: %d failed admissions; healthy masters: %d of %d admissions failed; store shared: %v", down, upErrs, upTakes, s.Shared())
	if s.Shared() {
		t.Error("Store.Shared reports every master shared while one is paused")
	}
}

// TestMeasureFallbacksUnderLoad counts the fallbacks of three replicas
// sharing a limit under a load far above it, at the budget in
// BREAKWATER_MEASURE_BUDGET (a Go duration), with a CPU burner on every
// core when BREAKWATER_MEASURE_BURN is set. It measures; it checks
// nothing, and runs only when the budget is given.
func TestMeasureFallbacksUnderLoad(t *testing.T) {
	b := os.Getenv("BREAKWATER_MEASURE_BUDGET")
	if b == "" {
		t.Skip("set BREAKWATER_MEASURE_BUDGET to measure")
	}
	budget, err := time.ParseDuration(b)
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.New(t)
	if os.Getenv("BREAKWATER_MEASURE_BURN") != "" {
		for range runtime.NumCPU() {
			burn := exec.Command("sh", "-c", "while :; do :; done")
			if err := burn.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(burn.Process.Pid, syscall.SIGKILL); _ = burn.Wait() })
		}
	}
	var episodes atomic.Int64
	var stores []*redisstore.Store
	var wg sync.WaitGroup
	stop := time.Now().Add(7 * time.Second)
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { c.Close() })
		s := newStore(t, c, redisstore.WithBudget(budget), redisstore.OnModeChange(func(shared bool, err error) {
			if !shared {
				if episodes.Add(1) <= 5 {
					t.Logf("fell back: %v", err)
				}
			}
		}))
		stores = append(stores, s)
		rl, err := bw.NewRateLimiters(30, 6, bw.WithSharedLimiter(s.Limiter("in")), bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					rl.Take("client")
					time.Sleep(2 * time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	var fails int64
	for _, s := range stores {
		fails += s.Stats().Fails
	}
	t.Logf("budget %v, burner %v: %d fallback episodes in 7 s (%d failed calls)", budget, os.Getenv("BREAKWATER_MEASURE_BURN") != "", episodes.Load(), fails)
}
