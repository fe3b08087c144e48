package redisstore

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

type ctxKey struct{}

// budgetStore runs test in a bubble with a Store whose budget is budget,
// on a client that is never dialled.
func budgetStore(t *testing.T, budget time.Duration, test func(t *testing.T, s *Store)) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	synctest.Test(t, func(t *testing.T) {
		s, err := New(c, WithReplicas(1), WithBudget(budget))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		test(t, s)
	})
}

// TestAdmissionsShareBudget: admissions begun within a grain of each
// other run under one context, which ends with ErrBudget at the first's
// budget: never later than an admission's own, at most a grain sooner.
func TestAdmissionsShareBudget(t *testing.T) {
	for _, tc := range []struct {
		budget time.Duration
		grain  time.Duration
	}{
		{5 * time.Millisecond, 625 * time.Microsecond}, // an eighth
		{time.Second, time.Millisecond},                // at most a millisecond
	} {
		t.Run(tc.budget.String(), func(t *testing.T) {
			budgetStore(t, tc.budget, func(t *testing.T, s *Store) {
				start := time.Now()
				first, _ := s.admission(context.Background())
				if d, _ := first.Deadline(); !d.Equal(start.Add(tc.budget)) {
					t.Fatalf("first deadline %v after its start, want the budget %v", d.Sub(start), tc.budget)
				}
				time.Sleep(tc.grain - time.Nanosecond)
				second, _ := s.admission(context.Background())
				if second.Done() != first.Done() {
					t.Fatalf("an admission %v after another has a budget of its own", tc.grain-time.Nanosecond)
				}
				time.Sleep(time.Nanosecond)
				third, _ := s.admission(context.Background())
				if third.Done() == first.Done() {
					t.Fatalf("an admission %v after another shares its budget, which would end it %v early", tc.grain, tc.grain)
				}
				if d, _ := third.Deadline(); !d.Equal(time.Now().Add(tc.budget)) {
					t.Fatalf("third deadline %v away, want the budget %v", time.Until(d), tc.budget)
				}
				time.Sleep(tc.budget - tc.grain - time.Nanosecond)
				if first.Err() != nil {
					t.Fatalf("the shared budget ended 1 ns early: %v", first.Err())
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if !errors.Is(first.Err(), context.DeadlineExceeded) || context.Cause(second) != ErrBudget {
					t.Fatalf("at the budget: err %v, cause %v; want the deadline, with ErrBudget", first.Err(), context.Cause(second))
				}
				if third.Err() != nil {
					t.Fatalf("a later budget ended with an earlier one: %v", third.Err())
				}
			})
		})
	}
}

// TestAdmissionCallerContext: an admission carries its caller's values;
// the caller's deadline bounds it when sooner than the budget, with the
// caller's own cause; the caller's cancellation alone does not end it.
func TestAdmissionCallerContext(t *testing.T) {
	budgetStore(t, 5*time.Millisecond, func(t *testing.T, s *Store) {
		shared, _ := s.admission(context.Background())

		values := context.WithValue(context.Background(), ctxKey{}, "span")
		if a, _ := s.admission(values); a.Value(ctxKey{}) != "span" {
			t.Fatalf("the caller's value: %v", a.Value(ctxKey{}))
		}

		parent, cancelParent := context.WithCancel(context.Background())
		a, _ := s.admission(parent)
		cancelParent()
		if a.Err() != nil || a.Done() != shared.Done() {
			t.Fatalf("a cancelled caller ended its admission: %v", a.Err())
		}
		// A context made from an admission's ends with the budget.
		derived, stop := context.WithCancel(a)
		defer stop()

		sooner, cancelSooner := context.WithTimeoutCause(context.Background(), time.Millisecond, errors.New("caller's"))
		defer cancelSooner()
		own, cancelOwn := s.admission(sooner)
		defer cancelOwn()
		if own.Done() == shared.Done() {
			t.Fatal("an admission whose caller's deadline comes first shares the budget")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if c := context.Cause(own); c == nil || c.Error() != "caller's" {
			t.Fatalf("at the caller's deadline: cause %v, want the caller's", c)
		}
		time.Sleep(4 * time.Millisecond)
		synctest.Wait()
		if context.Cause(derived) != ErrBudget {
			t.Fatalf("a context made from an admission's: cause %v at the budget, want ErrBudget", context.Cause(derived))
		}
	})
}
