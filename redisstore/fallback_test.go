package redisstore_test

// What the fallback to local shares does, on real redis-servers: a value
// another client wrote into one key is that key's problem only.

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/breakwater-go/breakwater/redisstore/redistest"
)

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
