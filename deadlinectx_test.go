package breakwater

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var errTestCause = errors.New("test cause")

// newDeadlineCtx returns a deadlineCtx and, for comparison, the context
// the context package makes from the same parent, deadline and cause.
func newDeadlineCtx(parent context.Context, d time.Duration) (*deadlineCtx, context.Context, context.CancelFunc) {
	origin := time.Now()
	dl := origin.Add(d)
	c := &deadlineCtx{}
	c.init(parent, &origin, int64(d), true)
	std, cancel := context.WithDeadlineCause(parent, dl, ErrAttemptTimeout)
	return c, std, cancel
}

// same fails unless c and std agree on Err and Cause.
func same(t *testing.T, when string, c *deadlineCtx, std context.Context) {
	t.Helper()
	if got, want := c.Err(), std.Err(); got != want {
		t.Errorf("%s: Err %v, want %v", when, got, want)
	}
	if got, want := context.Cause(c), context.Cause(std); got != want {
		t.Errorf("%s: Cause %v, want %v", when, got, want)
	}
}

// TestDeadlineCtxMatchesTheContextPackage: whether or not anything asked
// for its Done channel, a deadlineCtx reports what
// context.WithDeadlineCause's context reports, at the deadline, after a
// cancellation and after its parent's end.
func TestDeadlineCtxMatchesTheContextPackage(t *testing.T) {
	for _, made := range []bool{false, true} {
		name := "lazy"
		if made {
			name = "made"
		}
		t.Run(name+"/deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, std, cancel := newDeadlineCtx(context.Background(), time.Second)
				defer cancel()
				if made {
					_ = c.Done()
				}
				if d, ok := c.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
					t.Errorf("Deadline %v %v", d, ok)
				}
				same(t, "before", c, std)
				time.Sleep(time.Second)
				synctest.Wait()
				same(t, "at the deadline", c, std)
				if !errors.Is(markTimeout(c, errors.New("read")), ErrAttemptTimeout) {
					t.Errorf("markTimeout does not see the cause")
				}
				select {
				case <-c.Done():
				default:
					t.Errorf("Done not closed after the deadline")
				}
				c.cancel()
				if c.Err() != context.DeadlineExceeded {
					t.Errorf("after cancel: %v, want the deadline to stay the reason", c.Err())
				}
			})
		})
		t.Run(name+"/cancel", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, std, cancel := newDeadlineCtx(context.Background(), time.Second)
				if made {
					_ = c.Done()
				}
				c.cancel()
				cancel()
				same(t, "canceled", c, std)
				select {
				case <-c.Done():
				default:
					t.Errorf("Done not closed after cancel")
				}
			})
		})
		t.Run(name+"/parent", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, cancelParent := context.WithCancelCause(context.Background())
				c, std, cancel := newDeadlineCtx(parent, time.Second)
				defer cancel()
				defer c.cancel()
				if made {
					_ = c.Done()
				}
				same(t, "before", c, std)
				cancelParent(errTestCause)
				same(t, "parent canceled", c, std)
			})
		})
		t.Run(name+"/earlier parent deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, cancelParent := context.WithTimeout(context.Background(), time.Millisecond)
				defer cancelParent()
				c, std, cancel := newDeadlineCtx(parent, time.Second)
				defer cancel()
				defer c.cancel()
				if made {
					_ = c.Done()
				}
				if d, _ := c.Deadline(); !d.Equal(time.Now().Add(time.Millisecond)) {
					t.Errorf("Deadline %v, want the parent's", d)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				same(t, "parent's deadline", c, std)
			})
		})
	}
}

// TestDeadlineCtxChildren: contexts and AfterFuncs made from a deadlineCtx
// end with it, as net/http's own request context does.
func TestDeadlineCtxChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, cancel := newDeadlineCtx(context.WithValue(context.Background(), errTestCause, 1), time.Second)
		defer cancel()
		child, cancelChild := context.WithCancelCause(c)
		defer cancelChild(nil)
		called := make(chan struct{})
		context.AfterFunc(c, func() { close(called) })
		if c.Value(errTestCause) != 1 {
			t.Errorf("Value does not reach the parent")
		}
		time.Sleep(time.Second)
		<-called
		if child.Err() != context.DeadlineExceeded || context.Cause(child) != ErrAttemptTimeout {
			t.Errorf("child: %v, cause %v", child.Err(), context.Cause(child))
		}
	})
}

// TestDeadlineCtxCancelRacesMake: a cancellation concurrent with the
// first Done always ends the context (run with -race).
func TestDeadlineCtxCancelRacesMake(t *testing.T) {
	for range 200 {
		c := &deadlineCtx{}
		c.init(context.Background(), &stageEpoch, int64(time.Since(stageEpoch)+time.Hour), false)
		var wg sync.WaitGroup
		wg.Go(func() { _ = c.Done() })
		wg.Go(c.cancel)
		wg.Wait()
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("a cancellation concurrent with the first Done was lost")
		}
	}
}

// TestDeadlineCtxErrWithoutDone: a deadlineCtx nobody asked for its Done
// channel or its values, as over an in-memory base transport, still
// reports its deadline from the first Err after it.
func TestDeadlineCtxErrWithoutDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, cancel := newDeadlineCtx(context.Background(), time.Second)
		defer cancel()
		defer c.cancel()
		time.Sleep(time.Second)
		if err := c.Err(); err != context.DeadlineExceeded {
			t.Fatalf("Err at the deadline: %v", err)
		}
		if timeoutCause(c) != ErrAttemptTimeout {
			t.Errorf("timeoutCause %v", timeoutCause(c))
		}
	})
}

// TestDeadlineCtxValuesAreLazy: the parent's values, a router's route
// context among them, come without making the real context; and
// context.Cause asked before Err, under a parent that is itself
// cancellable (as a server's request context is), answers as the context
// package's context does before the deadline, at it, and after cancel.
func TestDeadlineCtxValuesAreLazy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), errTestCause, 1))
		defer cancelParent()
		c, std, cancel := newDeadlineCtx(parent, time.Second)
		defer cancel()
		at, _, cancelAt := newDeadlineCtx(parent, time.Second) // asked only at its deadline
		defer cancelAt()
		if c.Value(errTestCause) != 1 {
			t.Fatal("Value does not reach the parent")
		}
		if c.state.Load()&ctxMade != 0 {
			t.Error("asking for a parent's value made the real context")
		}
		if got, want := context.Cause(c), context.Cause(std); got != want {
			t.Errorf("Cause before the deadline: %v, want %v", got, want)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := context.Cause(c), context.Cause(std); got != want {
			t.Errorf("Cause asked first at the deadline: %v, want %v", got, want)
		}
		if at.Value(errTestCause) != 1 || at.state.Load()&ctxMade == 0 {
			t.Error("a value asked for at the deadline, before anything else, did not make the real context")
		}
		c2, std2, cancel2 := newDeadlineCtx(parent, time.Second)
		c2.cancel()
		cancel2()
		if got, want := context.Cause(c2), context.Cause(std2); got != want {
			t.Errorf("Cause asked first after cancel: %v, want %v", got, want)
		}
	})
}
