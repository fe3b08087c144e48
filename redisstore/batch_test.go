package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// countingProxy forwards TCP connections to a Redis server and counts,
// from client to server, the reads that carried EVALSHA (round trips, on
// loopback, where one write arrives in one read) and the EVALSHAs in them.
type countingProxy struct {
	ln          net.Listener
	target      string
	trips, cmds atomic.Int64
	mu          sync.Mutex
	conns       []net.Conn
	wg          sync.WaitGroup
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) accept() {
	for {
		cn, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			cn.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, cn, up)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(cn, up); cn.Close() })
		p.wg.Go(func() {
			buf := make([]byte, 1<<16)
			for {
				n, err := cn.Read(buf)
				if n > 0 {
					if k := bytes.Count(bytes.ToLower(buf[:n]), []byte("evalsha")); k > 0 {
						p.trips.Add(1)
						p.cmds.Add(int64(k))
					}
					if _, werr := up.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			up.Close()
		})
	}
}

func (p *countingProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// pauseScripts makes the server hold every script call until unpaused
// (CLIENT PAUSE WRITE holds EVAL and EVALSHA; admin's own commands pass).
func pauseScripts(t *testing.T, admin *redis.Client) (unpause func()) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(unpause)
	return unpause
}

func adminClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// commandCalls returns how many times the server ran cmd.
func commandCalls(t *testing.T, admin *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_` + cmd + `:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// waitUntil polls cond every millisecond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// takeAll runs one admission of key-i on each of n goroutines and returns
// their errors and durations once all have returned.
func takeAll(l *redisstore.Limiter, n int) (errs []error, took []time.Duration) {
	errs, took = make([]error, n), make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, _, errs[i] = l.Take(context.Background(), fmt.Sprint("key-", i), 10, 100, 0)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	return errs, took
}

// TestBatchOneRoundTrip: up to MaxDirect admissions go to Redis on their
// own, each in its round trip; the next goes with the sender, and those
// that arrive while it is in flight go together in its next round trip.
func TestBatchOneRoundTrip(t *testing.T) {
	srv := redistest.New(t)
	proxy := newCountingProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: proxy.addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	admin := adminClient(t, srv.Addr)
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(20*time.Second))
	l := s.Limiter("in")
	if _, _, err := l.Take(context.Background(), "warm", 10, 100, 0); err != nil {
		t.Fatal(err)
	}
	trips0, cmds0 := proxy.trips.Load(), proxy.cmds.Load()
	unpause := pauseScripts(t, admin)
	ahead := make(chan error, redisstore.MaxDirect+1)
	take := func(key string) {
		go func() { _, _, err := l.Take(context.Background(), key, 10, 100, 0); ahead <- err }()
	}
	for i := range redisstore.MaxDirect {
		take(fmt.Sprint("direct-", i))
		waitUntil(t, "a direct admission to reach Redis", func() bool { return proxy.trips.Load() == trips0+int64(i)+1 })
	}
	take("lead")
	waitUntil(t, "the sender to send the next", func() bool { return proxy.trips.Load() == trips0+redisstore.MaxDirect+1 })
	const n = 20
	var errs []error
	done := make(chan struct{})
	go func() { errs, _ = takeAll(l, n); close(done) }()
	waitUntil(t, "the admissions to queue", func() bool { return redisstore.QueueLen(s) == n })
	unpause()
	<-done
	for range redisstore.MaxDirect + 1 {
		if err := <-ahead; err != nil {
			t.Fatal(err)
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("admission %d: %v", i, err)
		}
	}
	wantTrips, wantCmds := int64(redisstore.MaxDirect+2), int64(redisstore.MaxDirect+1+n)
	if trips, cmds := proxy.trips.Load()-trips0, proxy.cmds.Load()-cmds0; trips != wantTrips || cmds != wantCmds {
		t.Fatalf("%d admissions took %d round trips carrying %d EVALSHA, want %d carrying %d", wantCmds, trips, cmds, wantTrips, wantCmds)
	}
	if st := s.Stats(); st.Fails != 0 || st.Calls != wantCmds+1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchBudgetWhileSlow: while Redis holds a batch, every admission
// leaves at its budget with ErrBudget (or at once with ErrUnavailable once
// the Store has stopped asking), whether or not the client honours
// deadlines; when Redis answers again the Store is shared again by itself.
func TestBatchBudgetWhileSlow(t *testing.T) {
	srv := redistest.New(t)
	admin := adminClient(t, srv.Addr)
	for _, honour := range []bool{true, false} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled=", honour), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: honour, MaxRetries: -1})
			defer c.Close()
			const budget = 50 * time.Millisecond
			s, err := redisstore.New(c, redisstore.WithReplicas(1), redisstore.WithBudget(budget), redisstore.WithRetryInterval(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l := s.Limiter("in")
			if _, _, err := l.Take(context.Background(), "warm", 10, 100, 0); err != nil {
				t.Fatal(err)
			}
			unpause := pauseScripts(t, admin)
			errs, took := takeAll(l, 16)
			over := 0
			for i, err := range errs {
				if !errors.Is(err, redisstore.ErrBudget) && !errors.Is(err, redisstore.ErrUnavailable) {
					t.Errorf("admission %d: %v, want ErrBudget or ErrUnavailable", i, err)
				}
				if errors.Is(err, redisstore.ErrBudget) {
					over++
				}
				// Redis holds the batch for 30 s: an admission that
				// waited for it would take that long.
				if took[i] > budget+time.Second {
					t.Errorf("admission %d took %v with a budget of %v", i, took[i], budget)
				}
			}
			if over == 0 || s.Shared() {
				t.Fatalf("%d admissions over budget, shared %v", over, s.Shared())
			}
			unpause()
			waitUntil(t, "shared mode", func() bool {
				_, _, err := l.Take(context.Background(), "after", 10, 100, 0)
				return err == nil && s.Shared()
			})
		})
	}
}

// TestBatchQueueFull: an admission that finds the queue full falls back
// at once, without waiting for its budget or blaming Redis.
func TestBatchQueueFull(t *testing.T) {
	srv := redistest.New(t)
	admin := adminClient(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(20*time.Second), redisstore.WithQueueSize(4))
	redisstore.SendAllQueued(s)
	l := s.Limiter("in")
	unpause := pauseScripts(t, admin)
	// One in flight, held by Redis, and four queued behind it.
	first := make(chan error, 1)
	go func() { _, _, err := l.Take(context.Background(), "first", 10, 100, 0); first <- err }()
	waitUntil(t, "the sender to take the first", func() bool { return s.Stats().Calls == 1 && redisstore.QueueLen(s) == 0 })
	var errs []error
	done := make(chan struct{})
	go func() { errs, _ = takeAll(l, 4); close(done) }()
	waitUntil(t, "a full queue", func() bool { return redisstore.QueueLen(s) == 4 })
	start := time.Now()
	_, _, err := l.Take(context.Background(), "one more", 10, 100, 0)
	if took := time.Since(start); !errors.Is(err, redisstore.ErrQueueFull) || took > time.Second {
		t.Fatalf("on a full queue: %v after %v, want ErrQueueFull at once", err, took)
	}
	if st := s.Stats(); !s.Shared() || st.Fails != 0 || st.Skipped != 1 || st.Calls != 5 {
		t.Fatalf("after a full queue: %+v, shared %v", st, s.Shared())
	}
	unpause()
	<-done
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("admission %d: %v", i, err)
		}
	}
}

// TestBatchCloseEndsWaits: Close releases every admission waiting for
// Redis and stops the sender (TestMain checks for leaks).
func TestBatchCloseEndsWaits(t *testing.T) {
	srv := redistest.New(t)
	admin := adminClient(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	const budget = 2 * time.Second
	s, err := redisstore.New(c, redisstore.WithReplicas(1), redisstore.WithBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	redisstore.SendAllQueued(s)
	l := s.Limiter("in")
	unpause := pauseScripts(t, admin)
	var errs []error
	var took []time.Duration
	done := make(chan struct{})
	go func() { errs, took = takeAll(l, 8); close(done) }()
	waitUntil(t, "the admissions to wait", func() bool { return s.Stats().Calls == 8 })
	start := time.Now()
	s.Close()
	closed := time.Since(start)
	<-done
	unpause()
	for i, err := range errs {
		if !errors.Is(err, redisstore.ErrUnavailable) || took[i] > budget {
			t.Errorf("admission %d: %v after %v, want ErrUnavailable at Close", i, err, took[i])
		}
	}
	if closed > budget+time.Second {
		t.Errorf("Close took %v", closed)
	}
	if _, _, err := l.Take(context.Background(), "k", 10, 100, 0); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("after Close: %v", err)
	}
	if st := s.Stats(); st.Fails != 0 {
		t.Fatalf("Close counted as Redis failures: %+v", st)
	}
}

// TestBatchReloadsScript: a batch answered NOSCRIPT (Redis restarted or
// its scripts flushed) is sent again with the script's source.
func TestBatchReloadsScript(t *testing.T) {
	srv := redistest.New(t)
	admin := adminClient(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(5*time.Second))
	redisstore.SendAllQueued(s)
	l := s.Limiter("in")
	if _, _, err := l.Take(context.Background(), "warm", 10, 100, 0); err != nil {
		t.Fatal(err)
	}
	if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	evals := commandCalls(t, admin, "eval")
	errs, _ := takeAll(l, 8)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("admission %d after SCRIPT FLUSH: %v", i, err)
		}
	}
	if commandCalls(t, admin, "eval") == evals {
		t.Fatal("no EVAL after SCRIPT FLUSH")
	}
	if st := s.Stats(); st.Fails != 0 || !s.Shared() {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchRedisCluster: one batch carries keys of every node of a
// Cluster, and each key still admits exactly its burst.
func TestBatchRedisCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(5*time.Second))
	redisstore.SendAllQueued(s)
	l := s.Limiter("in")
	const keys, tries, burst = 24, 8, 5
	var admitted [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range 48 {
		wg.Go(func() {
			for i := range keys * tries / 48 * 2 {
				k := (g + i) % keys
				st, _, err := l.Take(context.Background(), fmt.Sprint("client-", k), 1, burst, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if !st.Limited {
					admitted[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if n := admitted[k].Load(); n != burst {
			t.Errorf("client-%d: admitted %d, want its burst of %d", k, n, burst)
		}
	}
	if st, b := s.Stats(), redisstore.Batches(s); st.Fails != 0 || b >= st.Calls {
		t.Fatalf("%+v in %d round trips", st, b)
	}
}
