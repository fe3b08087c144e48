package breakwater_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
)

// fakeShared is a SharedLimiter in memory: a GCRA of its own per key
// stands for the store, and err, when set, makes every call fail.
type fakeShared struct {
	mu       sync.Mutex
	tat      map[string]time.Time
	calls    int
	err      error
	replicas int
	waits    []time.Duration
}

func (f *fakeShared) Take(_ context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (bw.RateStatus, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.waits = append(f.waits, maxWait)
	if f.err != nil {
		return bw.RateStatus{}, 0, f.err
	}
	if f.tat == nil {
		f.tat = map[string]time.Time{}
	}
	now := time.Now()
	interval := time.Duration(float64(time.Second) / float64(limit))
	capacity := interval * time.Duration(burst)
	tat := f.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	delay := next.Sub(now) - capacity
	st := bw.RateStatus{Limit: limit, Burst: burst}
	backlog := tat.Sub(now)
	if delay > maxWait {
		st.RetryAfter = delay
		st.Reset = backlog
		return st, 0, nil
	}
	f.tat[key] = next
	st.Allowed, st.Reset = true, next.Sub(now)
	if free := capacity - st.Reset; free >= interval {
		st.Remaining = int(free / interval)
	} else {
		st.RetryAfter = interval - free
	}
	return st, max(0, delay), nil
}

func (f *fakeShared) Replicas() int { return max(1, f.replicas) }

func (f *fakeShared) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestSharedLimiterCachesRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{}
		rl, err := bw.NewRateLimiters(10, 2, bw.WithSharedLimiter(f))
		if err != nil {
			t.Fatal(err)
		}
		crl, err := bw.NewClientRateLimit(rl, bw.RemoteAddrKey)
		if err != nil {
			t.Fatal(err)
		}
		h := crl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		codes := []int{}
		for range 5 {
			codes = append(codes, from(h, "192.0.2.1:1").Code)
		}
		if want := []int{200, 200, 429, 429, 429}; !equalInts(codes, want) {
			t.Fatalf("codes %v, want %v", codes, want)
		}
		if n := f.count(); n != 3 {
			t.Fatalf("the store was asked %d times, want 3: a refusal is remembered until it ends", n)
		}
		rec := from(h, "192.0.2.1:1")
		if rec.Header().Get("Retry-After") != "1" || rec.Header().Get("RateLimit") != `"default";r=0;t=1` {
			t.Fatalf("cached refusal: Retry-After %q RateLimit %q", rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit"))
		}
		time.Sleep(100 * time.Millisecond)
		if rec := from(h, "192.0.2.1:1"); rec.Code != 200 || f.count() != 4 {
			t.Fatalf("after the refusal ended: %d, %d calls", rec.Code, f.count())
		}
	})
}

// TestSharedLimiterFallsBackToShare: while the store fails, each replica
// admits its share of the limit, never refuses because of the failure,
// and never the whole limit.
func TestSharedLimiterFallsBackToShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{err: errors.New("down"), replicas: 3}
		rl, err := bw.NewRateLimiters(30, 9, bw.WithSharedLimiter(f), bw.WithRateLimitWait(0))
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for range 20 {
			if rl.Allow("k") {
				admitted++
			}
		}
		if admitted != 3 {
			t.Fatalf("admitted %d of a burst while the store is down, want the share 9/3 = 3", admitted)
		}
		time.Sleep(time.Second) // the share refills at 30/3 = 10/s
		admitted = 0
		for range 20 {
			if rl.Allow("k") {
				admitted++
			}
		}
		if admitted != 3 {
			t.Fatalf("admitted %d after 1 s, want 3 (the share's burst)", admitted)
		}
		f.mu.Lock()
		f.err = nil
		f.mu.Unlock()
		if st := rl.Take("k"); !st.Allowed || st.Remaining != 8 {
			t.Fatalf("the store is back: %+v", st)
		}
	})
}

func TestSharedLimiterWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{}
		rl, err := bw.NewRateLimiters(10, 1, bw.WithSharedLimiter(f), bw.WithRateLimitWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		for range 2 {
			if err := rl.Wait(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("two requests at 10/s took %v", d)
		}
		if err := rl.Wait(ctx, "k"); !errors.Is(err, bw.ErrRateLimited) {
			t.Fatalf("a wait past the deadline: %v", err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if w := f.waits[len(f.waits)-1]; w <= 0 || w >= 50*time.Millisecond {
			t.Fatalf("the store was asked to reserve up to %v, want the 50 ms left before the deadline", w)
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
