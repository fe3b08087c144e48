package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/redisstore"
)

func newMini(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return m, c
}

func newStore(t *testing.T, c redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestNewReportsEveryBadOption(t *testing.T) {
	_, err := redisstore.New(nil, redisstore.WithNamespace("a{b}"), redisstore.WithBudget(0), redisstore.WithReplicas(-1), redisstore.WithReplicaID("a\nb"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"needs a client", "namespace", "budget", "replicas", "replica ID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, c := newMini(t)
	s := newStore(t, c, redisstore.WithReplicas(1))
	if _, err := s.Bus("x", redisstore.WithQuorum(0), redisstore.WithReconcile(0)); err == nil || !strings.Contains(err.Error(), "quorum") || !strings.Contains(err.Error(), "reconcile") {
		t.Fatalf("Bus: %v", err)
	}
}

func TestLimiterGCRA(t *testing.T) {
	m, c := newMini(t)
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(time.Second))
	l := s.Limiter("in")
	ctx := context.Background()
	for i := range 3 {
		st, delay, err := l.Take(ctx, "client", 1, 3, 0)
		if err != nil || st.Limited || delay != 0 || st.Remaining != 2-i {
			t.Fatalf("take %d: %+v %v %v", i, st, delay, err)
		}
	}
	st, _, err := l.Take(ctx, "client", 1, 3, 0)
	if err != nil || !st.Limited || st.RetryAfter <= 0 || st.RetryAfter > time.Second || st.Reset < 2*time.Second {
		t.Fatalf("over the burst: %+v %v", st, err)
	}
	// A wait that fits reserves a turn.
	st, delay, err := l.Take(ctx, "client", 1, 3, 2*time.Second)
	if err != nil || st.Limited || delay <= 0 || delay > time.Second {
		t.Fatalf("reserving: %+v %v %v", st, delay, err)
	}
	if keys := m.Keys(); len(keys) != 1 || !containsKey(keys, "breakwater:rl:in:{client}") {
		t.Fatalf("keys %v", keys)
	}
}

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// TestStoreStopsAskingWhileDown: a failing call makes the Store answer
// ErrUnavailable without a round trip for the retry interval, then one
// call tries again and the first success restores shared mode.
func TestStoreStopsAskingWhileDown(t *testing.T) {
	m, c := newMini(t)
	var mu sync.Mutex
	var modes []bool
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(time.Second), redisstore.WithRetryInterval(100*time.Millisecond),
		redisstore.OnModeChange(func(shared bool, _ error) { mu.Lock(); modes = append(modes, shared); mu.Unlock() }))
	l := s.Limiter("in")
	ctx := context.Background()
	if _, _, err := l.Take(ctx, "k", 10, 10, 0); err != nil {
		t.Fatal(err)
	}
	m.SetError("LOADING pretend")
	if _, _, err := l.Take(ctx, "k", 10, 10, 0); err == nil {
		t.Fatal("no error from a failing server")
	}
	calls := s.Stats().Calls
	for range 100 {
		if _, _, err := l.Take(ctx, "k", 10, 10, 0); !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("while down: %v", err)
		}
	}
	if st := s.Stats(); st.Calls != calls || st.Skipped != 100 || s.Shared() {
		t.Fatalf("while down: %+v, shared %v", st, s.Shared())
	}
	m.SetError("")
	time.Sleep(110 * time.Millisecond)
	if _, _, err := l.Take(ctx, "k", 10, 10, 0); err != nil || !s.Shared() {
		t.Fatalf("after the retry interval: %v, shared %v", err, s.Shared())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(modes) != 2 || modes[0] || !modes[1] {
		t.Fatalf("mode changes %v, want [false true]", modes)
	}
}

// TestBudgetWithoutContextTimeouts: go-redis ignores context deadlines
// unless ContextTimeoutEnabled is set; the budget holds anyway.
func TestBudgetWithoutContextTimeouts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	stop := make(chan struct{})
	go func() { // a server that accepts and never answers
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { <-stop; cn.Close() })
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: 2 * time.Second, MaxRetries: -1})
	s, err := redisstore.New(c, redisstore.WithReplicas(1), redisstore.WithBudget(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = s.Limiter("in").Take(context.Background(), "k", 10, 10, 0)
	if d := time.Since(start); !errors.Is(err, redisstore.ErrBudget) || d > 200*time.Millisecond {
		t.Fatalf("Take on a silent server: %v after %v, want ErrBudget within the budget", err, d)
	}
	close(stop)
	s.Close() // waits for the abandoned call
	c.Close()
	ln.Close()
	conns.Wait()
}

// TestBusQuorumOnMiniredis checks the publish script's bookkeeping: a
// trip is recorded per replica and goes out once quorum replicas have it.
func TestBusQuorumOnMiniredis(t *testing.T) {
	_, c := newMini(t)
	a := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithReplicaID("a"), redisstore.WithBudget(time.Second))
	b := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithReplicaID("b"), redisstore.WithBudget(time.Second))
	obs := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithReplicaID("c"), redisstore.WithBudget(time.Second))
	busA, _ := a.Bus("trips", redisstore.WithQuorum(2))
	busB, _ := b.Bus("trips", redisstore.WithQuorum(2))
	busC, _ := obs.Bus("trips", redisstore.WithQuorum(2), redisstore.WithReconcile(20*time.Millisecond))
	got := make(chan bw.ClusterEvent, 10)
	busC.Subscribe(func(e bw.ClusterEvent) { got <- e })
	busA.Publish(bw.ClusterEvent{Key: "api", For: 5 * time.Second, Mechanism: bw.MechBreaker})
	select {
	case e := <-got:
		t.Fatalf("one replica's trip reached the others: %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
	busB.Publish(bw.ClusterEvent{Key: "api", For: 5 * time.Second, Mechanism: bw.MechBreaker})
	select {
	case e := <-got:
		if e.Key != "api" || e.For < 4*time.Second || e.Manual || e.Mechanism != bw.MechBreaker {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("two replicas' trips did not reach the third")
	}
}
