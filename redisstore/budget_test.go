package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

// holdPool takes the only connection of c's pool, a client of one
// connection, with a BLPOP that Redis holds for d, and returns when it is
// in flight.
func holdPool(t *testing.T, c *redis.Client, d time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() { _ = c.BLPop(context.Background(), d, "nothing").Err() })
	waitUntil(t, "the pool's one connection in use", func() bool { return c.PoolStats().IdleConns == 0 && c.PoolStats().TotalConns == 1 })
}

// TestBudgetWhilePoolBusy: an admission that sends itself, on a client
// that honours deadlines, waits for go-redis's pool on its context's Done
// and not on a socket deadline. Three of them, begun 15 ms apart while the
// pool's one connection is held, each end with ErrBudget at their own
// budget: not before it (the timer ends only those whose budget ran out)
// and not at the pool's timeout.
func TestBudgetWhilePoolBusy(t *testing.T) {
	srv := redistest.New(t)
	const budget = 60 * time.Millisecond
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 1, PoolTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(budget), redisstore.WithRetryInterval(time.Millisecond))
	l := s.Limiter("in")
	for range 100 { // leave the budgets' timer armed for an admission long gone
		if _, _, err := l.Take(context.Background(), "warm", 10, 1000, 0); err != nil {
			t.Fatal(err)
		}
	}
	holdPool(t, c, time.Second)
	const n = 3
	var wg sync.WaitGroup
	errs, took := make([]error, n), make([]time.Duration, n)
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, _, errs[i] = l.Take(context.Background(), "k", 10, 10, 0)
			took[i] = time.Since(start)
		})
		time.Sleep(15 * time.Millisecond)
	}
	wg.Wait()
	for i := range n {
		if !errors.Is(errs[i], redisstore.ErrBudget) || took[i] < budget-time.Millisecond || took[i] > budget+100*time.Millisecond {
			t.Errorf("admission %d: %v after %v, want ErrBudget after %v", i, errs[i], took[i], budget)
		}
	}
}

// TestBudgetCallerGivesUp: an admission that sends itself ends when its
// caller's context does, before its budget, and Redis is not blamed.
func TestBudgetCallerGivesUp(t *testing.T) {
	srv := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 1, PoolTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1), redisstore.WithBudget(5*time.Second))
	l := s.Limiter("in")
	if _, _, err := l.Take(context.Background(), "warm", 10, 10, 0); err != nil {
		t.Fatal(err)
	}
	holdPool(t, c, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := l.Take(ctx, "k", 10, 10, 0)
	if d := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || d > time.Second {
		t.Fatalf("Take: %v after %v, want the caller's deadline after 30ms", err, d)
	}
	if st := s.Stats(); st.Fails != 0 || !s.Shared() {
		t.Fatalf("stats %+v, shared %v: the caller's deadline counted against Redis", st, s.Shared())
	}
}

type valueKey struct{}

// valueHook records the value under valueKey of the contexts of the
// client's commands.
type valueHook struct{ seen chan any }

func (h valueHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h valueHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		select {
		case h.seen <- ctx.Value(valueKey{}):
		default:
		}
		return next(ctx, cmd)
	}
}
func (h valueHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAdmissionCarriesCallerValues: the client's hooks (tracing, for
// one) see the values of the context an admission was asked under, though
// its budget is shared with other admissions.
func TestAdmissionCarriesCallerValues(t *testing.T) {
	srv := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1))
	l := s.Limiter("in")
	if _, _, err := l.Take(context.Background(), "warm", 10, 10, 0); err != nil {
		t.Fatal(err)
	}
	h := valueHook{seen: make(chan any, 1)}
	c.AddHook(h)
	ctx := context.WithValue(context.Background(), valueKey{}, "span")
	if _, _, err := l.Take(ctx, "k", 10, 10, 0); err != nil {
		t.Fatal(err)
	}
	if v := <-h.seen; v != "span" {
		t.Fatalf("the client's hook saw %v, want the caller's value", v)
	}
}

// TestAdmissionCallerGoneBeforeAsking: an admission whose caller's
// context ended already is not sent, and Redis is not blamed.
func TestAdmissionCallerGoneBeforeAsking(t *testing.T) {
	srv := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	s := newStore(t, c, redisstore.WithReplicas(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Limiter("in").Take(ctx, "k", 10, 10, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take: %v, want the caller's cancellation", err)
	}
	if n := redisstore.Batches(s); n != 0 {
		t.Fatalf("%d round trips for a caller that had gone", n)
	}
	if st := s.Stats(); st.Fails != 0 || !s.Shared() {
		t.Fatalf("stats %+v, shared %v: the caller's cancellation counted against Redis", st, s.Shared())
	}
}
