package breakwater

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// newSharedCtx returns a deadlineCtx over parent whose deadline, d from
// now, is shared in s, as admit makes it for an attempt.
func newSharedCtx(s *deadlineShare, origin *time.Time, parent context.Context, d time.Duration) *deadlineCtx {
	now := int64(time.Since(*origin))
	c := &deadlineCtx{}
	c.init(parent, origin, now+int64(d), true)
	if at := shared(now, c.dl); at != 0 {
		c.dl, c.share = at, s
	}
	return c
}

// makeEachMillisecond makes n attempts' shared contexts in s, a
// millisecond apart, each ended at once, as a busy Transport does.
func makeEachMillisecond(s *deadlineShare, origin *time.Time, n int) {
	for range n {
		time.Sleep(time.Millisecond)
		c := newSharedCtx(s, origin, context.Background(), time.Second)
		_ = c.Done()
		c.cancel()
	}
}

// TestSharedDeadline: attempts whose deadlines fall in one millisecond
// share one real context; each keeps its own values and its own end, and
// the deadline is never later than asked, nor earlier by a millisecond.
func TestSharedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		s := new(deadlineShare)
		time.Sleep(1500 * time.Microsecond) // deadlines off the millisecond
		a := newSharedCtx(s, &origin, context.WithValue(context.Background(), errTestCause, "a"), time.Second)
		b := newSharedCtx(s, &origin, context.WithValue(context.Background(), errTestCause, "b"), time.Second+100*time.Microsecond)
		if a.share == nil || b.share == nil {
			t.Fatal("a deadline a second away is not shared")
		}
		want := time.Now().Add(time.Second)
		for _, c := range []*deadlineCtx{a, b} {
			if d, _ := c.Deadline(); d.After(want) || !d.After(want.Add(-time.Millisecond)) {
				t.Errorf("Deadline %v: want within the millisecond before %v", d, want)
			}
		}
		if a.Done() != b.Done() {
			t.Errorf("two deadlines in one millisecond made two contexts")
		}
		if a.Value(errTestCause) != "a" || b.Value(errTestCause) != "b" {
			t.Errorf("values %v %v: each must keep its parent's", a.Value(errTestCause), b.Value(errTestCause))
		}
		other := &deadlineCtx{}
		other.init(context.Background(), &origin, a.dl, false)
		other.share = s
		if other.Done() == a.Done() {
			t.Errorf("a call timeout shares the context of an attempt timeout")
		}

		// b ends before its deadline: only b.
		b.cancel()
		if b.Err() != context.Canceled || context.Cause(b) != context.Canceled || a.Err() != nil {
			t.Errorf("after b's cancel: b %v (cause %v), a %v", b.Err(), context.Cause(b), a.Err())
		}
		select {
		case <-b.Done():
		default:
			t.Errorf("b's Done is open after its cancel")
		}
		late, stop := context.WithCancel(b)
		defer stop()
		if late.Err() != context.Canceled {
			t.Errorf("a context made from b after its cancel is live: %v", late.Err())
		}

		// a ends at its deadline, and so do its children.
		child, stopChild := context.WithCancelCause(a)
		defer stopChild(nil)
		done := a.Done()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("a's Done is open after its deadline")
		}
		if a.Err() != context.DeadlineExceeded || context.Cause(a) != ErrAttemptTimeout || a.timeoutCause() != ErrAttemptTimeout {
			t.Errorf("a: %v, cause %v, timeout cause %v", a.Err(), context.Cause(a), a.timeoutCause())
		}
		if child.Err() != context.DeadlineExceeded || context.Cause(child) != ErrAttemptTimeout {
			t.Errorf("a's child: %v, cause %v", child.Err(), context.Cause(child))
		}
		a.cancel()
		if a.Err() != context.DeadlineExceeded || b.Err() != context.Canceled {
			t.Errorf("the first end must stay the reason: a %v, b %v", a.Err(), b.Err())
		}
	})
}

// TestSharedDeadlineOnlyWhenSafe: a deadline is shared only when the
// rounding is at most 1/100 of the time left and the caller's context
// cannot end it sooner.
func TestSharedDeadlineOnlyWhenSafe(t *testing.T) {
	if at := shared(0, int64(99*time.Millisecond)); at != 0 {
		t.Errorf("a deadline 99ms away is shared (at %v)", time.Duration(at))
	}
	if at := shared(5, int64(100*time.Millisecond)+5); at != int64(100*time.Millisecond) {
		t.Errorf("shared at %v, want 100ms", time.Duration(at))
	}
	if at := shared(int64(time.Hour), int64(time.Hour+50*time.Millisecond)); at != 0 {
		t.Errorf("a deadline 50ms away, an hour after the start, is shared (at %v)", time.Duration(at))
	}
	synctest.Test(t, func(t *testing.T) {
		var calls []*http.Request
		base := RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			calls = append(calls, req)
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
		})
		tr, err := NewTransport(WithBase(base), WithAttemptTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, ctx := range []context.Context{context.Background(), parent} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if c := calls[0].Context().(*deadlineCtx); c.share == nil {
			t.Errorf("a Background call's deadline is not shared")
		}
		if c := calls[1].Context().(*deadlineCtx); c.share != nil {
			t.Errorf("a cancellable caller's deadline is shared")
		}
	})
}

// TestSharedDeadlineRetires: a shared context no attempt uses any more is
// ended once its slot has moved on, so that live contexts stay about
// those in flight; one an attempt still uses is never ended early.
func TestSharedDeadlineRetires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		s := new(deadlineShare)
		first := newSharedCtx(s, &origin, context.Background(), time.Second)
		unused := first.Done()
		first.cancel()
		busy := newSharedCtx(s, &origin, context.Background(), time.Second+time.Millisecond)
		inUse := busy.Done()
		makeEachMillisecond(s, &origin, 3*len(s.slots)) // every slot moves on, more than once
		select {
		case <-unused:
		default:
			t.Errorf("an unused shared context lives on after its slot moved on")
		}
		select {
		case <-inUse:
			t.Fatalf("a shared context in use was ended early: %v", busy.Err())
		default:
		}
		if busy.Err() != nil {
			t.Errorf("busy: %v", busy.Err())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if busy.timeoutCause() != ErrAttemptTimeout {
			t.Errorf("busy at its deadline: %v", busy.Err())
		}
		busy.cancel()
	})
}

// TestSharedDeadlineCancelAtTheDeadline: a cancel at the very instant of
// the deadline comes after it: the deadline stays the reason.
func TestSharedDeadlineCancelAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		c := newSharedCtx(new(deadlineShare), &origin, context.Background(), time.Second)
		_ = c.Done()
		time.Sleep(time.Second)
		if c.Err() != context.DeadlineExceeded {
			t.Fatalf("Err at the deadline: %v", c.Err())
		}
		c.cancel()
		if c.Err() != context.DeadlineExceeded || c.timeoutCause() != ErrAttemptTimeout {
			t.Errorf("after a cancel at the deadline: %v, timeout cause %v", c.Err(), c.timeoutCause())
		}
	})
}

// TestSharedDeadlineNeighbours: deadlines in neighbouring milliseconds,
// as concurrent attempts have, each keep their shared context: a third
// attempt finds the first's.
func TestSharedDeadlineNeighbours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		s := new(deadlineShare)
		first := newSharedCtx(s, &origin, context.Background(), time.Second)
		next := newSharedCtx(s, &origin, context.Background(), time.Second+time.Millisecond)
		again := newSharedCtx(s, &origin, context.Background(), time.Second)
		if first.Done() == next.Done() {
			t.Errorf("deadlines a millisecond apart share a context")
		}
		if again.Done() != first.Done() {
			t.Errorf("a neighbouring deadline took the first one's place")
		}
		for _, c := range []*deadlineCtx{first, next, again} {
			c.cancel()
		}
	})
}

// TestSharedDeadlineServesSerialCalls: attempts made one after another in
// one millisecond, each ended before the next, share one context, and one
// still in use when its slot moves on is ended once its last user is done.
func TestSharedDeadlineServesSerialCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		s := new(deadlineShare)
		first := newSharedCtx(s, &origin, context.Background(), time.Second)
		_ = first.Done()
		first.cancel()
		second := newSharedCtx(s, &origin, context.Background(), time.Second)
		done := second.Done()
		if second.shared != first.shared {
			t.Errorf("a serial attempt in the same millisecond made a context of its own")
		}
		makeEachMillisecond(s, &origin, 3*len(s.slots)) // its slot moves on while second uses it
		select {
		case <-done:
			t.Fatal("a context in use was ended")
		default:
		}
		second.cancel()
		makeEachMillisecond(s, &origin, 2) // two makings: a retired context ends at the second
		select {
		case <-done:
		default:
			t.Errorf("a replaced context lives on after its last user")
		}
	})
}

// TestSharedDeadlineRetiredIsNeverUsed: an attempt that read a slot just
// before it moved on cannot take the context retired from it, which will
// be ended: it makes its own.
func TestSharedDeadlineRetiredIsNeverUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		s := new(deadlineShare)
		at := int64(time.Second)
		d := s.use(&origin, at, true)
		s.done(d)
		later := s.use(&origin, at+int64(len(s.slots)/2)*shareGrain, true) // the same slot
		defer s.done(later)
		if d.acquire() {
			t.Fatal("a retired context was handed out again")
		}
		if got := s.use(&origin, at, true); got == d {
			t.Errorf("use returned the retired context")
		} else {
			s.done(got)
		}
	})
}
