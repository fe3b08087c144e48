package breakwater_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// keyLimiter is one key of a registry of token buckets.
type keyLimiter struct {
	rs  *bw.RateLimiters
	key string
}

func newRateLimiter(t *testing.T, limit rate.Limit, burst int, opts ...bw.Option) keyLimiter {
	t.Helper()
	rs, err := bw.NewRateLimiters(limit, burst, opts...)
	if err != nil {
		t.Fatalf("NewRateLimiters: %v", err)
	}
	return keyLimiter{rs, "k"}
}

func (l keyLimiter) Wait(ctx context.Context) error { return l.rs.Wait(ctx, l.key) }
func (l keyLimiter) Take() bw.RateLimitSnapshot     { return l.rs.Take(l.key) }
func (l keyLimiter) Allow() bool                    { return !l.Take().Limited }
func (l keyLimiter) Reset()                         { l.rs.Reset(l.key) }

// Snapshot reads the bucket without taking a token (a key never used reads
// as a full bucket).
func (l keyLimiter) Snapshot() bw.RateLimitSnapshot {
	if s, ok := bucketOf(l.rs, l.key); ok {
		return s
	}
	return bw.RateLimitSnapshot{Key: l.key}
}

// Peek reports whether a request would be admitted now, and else how long
// until it would.
func (l keyLimiter) Peek() (bool, time.Duration) {
	s := l.Snapshot()
	return !s.Limited, s.RetryAfter
}

func TestRateLimitOptionValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit rate.Limit
		burst int
		opts  []bw.Option
	}{
		{"zero limit", 0, 1, nil},
		{"negative limit", -1, 1, nil},
		{"NaN limit", rate.Limit(math.NaN()), 1, nil},
		{"zero burst", 10, 0, nil},
		{"infinite limit", rate.Inf, 1, nil},
		{"negative wait", 10, 1, []bw.Option{bw.WithMaxWait(-time.Second)}},
		{"no keys", 10, 1, []bw.Option{bw.WithKeyLimits(0, time.Minute)}},
		{"no idle TTL", 10, 1, []bw.Option{bw.WithKeyLimits(10, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := bw.NewRateLimiters(tc.limit, tc.burst, tc.opts...); err == nil {
				t.Error("NewRateLimiters accepted it")
			}
		})
	}
}

func TestRateLimiterRejectMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRateLimiter(t, 10, 2, bw.WithMaxWait(0))
		ctx := context.Background()
		for i := range 2 {
			if err := l.Wait(ctx); err != nil {
				t.Fatalf("token %d: %v", i, err)
			}
		}
		start := time.Now()
		err := l.Wait(ctx)
		var re *bw.Error
		if !errors.Is(err, bw.ErrRateLimited) || !errors.As(err, &re) {
			t.Fatalf("third Wait: %v, want a rate limit error", err)
		}
		if d, _ := bw.RetryAfter(err); d != 100*time.Millisecond {
			t.Errorf("quoted wait %s, want 100ms", d)
		}
		if time.Since(start) != 0 {
			t.Error("reject mode waited")
		}
		if ok, w := l.Peek(); ok || w != 100*time.Millisecond {
			t.Errorf("Peek = %v, %s; want false, 100ms", ok, w)
		}
		if l.Allow() {
			t.Error("Allow admitted with an empty bucket")
		}
		time.Sleep(100 * time.Millisecond)
		if !l.Allow() {
			t.Error("no token after one emission interval")
		}
	})
}

func TestRateLimiterWaitersServedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRateLimiter(t, 1, 1, bw.WithMaxWait(time.Minute))
		start := time.Now()
		var mu sync.Mutex
		var order []int
		var at []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				if err := l.Wait(context.Background()); err != nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				mu.Lock()
				order = append(order, i)
				at = append(at, time.Since(start))
				mu.Unlock()
			})
			synctest.Wait() // waiter i has its reservation before i+1 asks
		}
		wg.Wait()
		for i := range 5 {
			if order[i] != i || at[i] != time.Duration(i)*time.Second {
				t.Fatalf("waiters finished %v at %v, want in order at 0s, 1s, 2s, ...", order, at)
			}
		}
	})
}

func TestRateLimiterWaitThatDoesNotFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRateLimiter(t, 1, 1)
		if !l.Allow() {
			t.Fatal("first token refused")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.Wait(ctx)
		if d, _ := bw.RetryAfter(err); !errors.Is(err, bw.ErrRateLimited) || d != time.Second {
			t.Fatalf("Wait = %v, want a rate limit error quoting 1s", err)
		}
		if time.Since(start) != 0 {
			t.Error("gave up after waiting")
		}
		// The refused reservation was given back: the next token is still
		// due in 1 s, and a caller with time to spare gets it then.
		if ok, w := l.Peek(); ok || w != time.Second {
			t.Fatalf("after the refusal Peek = %v, %s; want false, 1s", ok, w)
		}
		if err := l.Wait(context.Background()); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Wait = %v after %s, want nil after 1s", err, time.Since(start))
		}
		// Longer than the limiter's own longest wait (5 s by default).
		l2 := newRateLimiter(t, rate.Every(10*time.Second), 1)
		l2.Allow()
		if err := l2.Wait(context.Background()); !errors.Is(err, bw.ErrRateLimited) || retryAfter(err) != 10*time.Second {
			t.Fatalf("Wait beyond the longest wait = %v", err)
		}
	})
}

func TestRateLimiterCancelGivesTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRateLimiter(t, 1, 1)
		l.Allow()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- l.Wait(ctx) }()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("Wait = %v, want context.Canceled unchanged", err)
		}
		if ok, w := l.Peek(); ok || w != 700*time.Millisecond {
			t.Fatalf("Peek = %v, %s; want the cancelled reservation returned (700ms left)", ok, w)
		}
	})
}

func TestRateLimiterStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRateLimiter(t, 10, 5)
		for i := 4; i >= 0; i-- {
			if st := l.Take(); st.Limited || st.Remaining != i || st.Burst != 5 || st.Limit != 10 || st.Key != "k" {
				t.Fatalf("take: %+v, want remaining %d", st, i)
			}
		}
		st := l.Take()
		if !st.Limited || st.Remaining != 0 || st.RetryAfter != 100*time.Millisecond || st.Reset != 500*time.Millisecond {
			t.Fatalf("empty bucket: %+v", st)
		}
		time.Sleep(250 * time.Millisecond)
		if st := l.Snapshot(); st.Limited || st.Remaining != 2 || st.RetryAfter != 0 || st.Reset != 250*time.Millisecond || st.Tokens != 2.5 {
			t.Fatalf("after 250ms: %+v", st)
		}
		l.Reset()
		if s := l.Snapshot(); s.Tokens != 5 || s.Limited || s.Burst != 5 || s.Limit != 10 {
			t.Fatalf("after Reset: %+v", s)
		}
	})
}

func TestRateLimitersPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs, err := bw.NewRateLimiters(1, 1, bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Snapshot().RateLimiters) != 0 {
			t.Fatal("a new registry holds buckets")
		}
		if rs.Take("a").Limited || !rs.Take("a").Limited {
			t.Fatal("key a: want one token")
		}
		if rs.Take("b").Limited {
			t.Fatal("key b shares key a's bucket")
		}
		var re *bw.Error
		if err := rs.Wait(context.Background(), "a"); !errors.As(err, &re) || re.Key != "a" || time.Until(re.Until) != time.Second {
			t.Fatalf("Wait(a) = %v", err)
		}
		if s, ok := bucketOf(rs, "a"); !ok || !s.Limited || s.Key != "a" || s.RetryAfter != time.Second || s.RetryAfterSeconds != 1 {
			t.Fatalf("snapshot a: %+v %v", s, ok)
		}
		rs.Reset("a")
		if rs.Take("a").Limited {
			t.Fatal("Reset did not refill")
		}
		if snaps := rs.Snapshot().RateLimiters; len(snaps) != 2 || snaps[0].Limit != 1 || snaps[0].Burst != 1 {
			t.Fatalf("snapshots %+v", snaps)
		}
	})
}

// send makes one GET to host through rt with ctx and reads and closes the
// body; it reports the result and how long the call took.
func send(ctx context.Context, rt http.RoundTripper, host string) (result, time.Duration) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
	start := time.Now()
	r := do(rt, req)
	return r, time.Since(start)
}

// maxInWindow is the largest number of times in any half-open window
// [t, t+w) starting at one of them; ts must be sorted.
func maxInWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Before(ts[i].Add(w)) {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

func arrivals(u *breakwatertest.Upstream) []time.Time {
	var ts []time.Time
	for _, r := range u.Requests() {
		ts = append(ts, r.At)
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// load sends calls at a steady rate for d, each in its own goroutine, and
// returns their results and durations once all are done.
func load(rt http.RoundTripper, perSecond int, d time.Duration, ctxTimeout time.Duration) ([]result, []time.Duration) {
	n := int(d.Seconds() * float64(perSecond))
	results := make([]result, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx := context.Background()
			if ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, ctxTimeout)
				defer cancel()
			}
			results[i], took[i] = send(ctx, rt, "upstream.test")
		})
		time.Sleep(time.Second / time.Duration(perSecond))
	}
	wg.Wait()
	return results, took
}

func TestTransportRateLimitBoundsEveryWindow(t *testing.T) {
	for _, wait := range []time.Duration{time.Second, 0} {
		synctest.Test(t, func(t *testing.T) {
			u := breakwatertest.NewPipeUpstream(t)
			tr := newTransport(t, u.Transport(), bw.WithRateLimit(50, 50, bw.WithMaxWait(wait)))
			load(tr, 300, 5*time.Second, 0) // 6× the limit
			ts := arrivals(u)
			if n := maxInWindow(ts, time.Second); n > 100 {
				t.Fatalf("wait %s: the upstream saw %d requests within 1 s, more than burst + limit = 100", wait, n)
			}
			if len(ts) < 250 {
				t.Fatalf("wait %s: only %d requests in 5 s at 50/s", wait, len(ts))
			}
		})
	}
}

func TestTransportRateLimitShedding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Wait mode with a 1 s budget at 1× load: nothing is shed.
		u := breakwatertest.NewPipeUpstream(t)
		tr := newTransport(t, u.Transport(), bw.WithRateLimit(50, 50, bw.WithMaxWait(time.Second)))
		results, _ := load(tr, 50, 10*time.Second, time.Second)
		for i, r := range results {
			if r.err != nil || r.status != 200 {
				t.Fatalf("1× load, call %d: %+v", i, r)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// Reject mode at 6× sustained load: most calls are refused at once,
		// and no call waits.
		u := breakwatertest.NewPipeUpstream(t)
		tr := newTransport(t, u.Transport(), bw.WithRateLimit(50, 50, bw.WithMaxWait(0)))
		results, took := load(tr, 300, 10*time.Second, 0)
		rejected := 0
		for i, r := range results {
			switch {
			case errors.Is(r.err, bw.ErrRateLimited):
				rejected++
			case r.err != nil || r.status != 200:
				t.Fatalf("call %d: %+v", i, r)
			}
			if took[i] != 0 {
				t.Fatalf("call %d took %s: reject mode waited", i, took[i])
			}
		}
		// 3000 calls; the bucket admits 50 + 50/s × 10 s = 550 of them.
		if frac := float64(rejected) / float64(len(results)); frac < 0.75 || frac > 0.85 {
			t.Fatalf("rejected %.1f%% of the calls, want about 82%%", 100*frac)
		}
		if u.Count() != len(results)-rejected {
			t.Fatalf("upstream saw %d, admitted %d", u.Count(), len(results)-rejected)
		}
	})
}

func TestTransportRateLimitWaitThatDoesNotFitFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t)
		tr := newTransport(t, u.Transport(), bw.WithRateLimit(1, 1))
		if r, _ := send(context.Background(), tr, "upstream.test"); r.status != 200 {
			t.Fatalf("first call: %+v", r)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		r, took := send(ctx, tr, "upstream.test")
		var re *bw.Error
		if d, _ := bw.RetryAfter(r.err); !errors.As(r.err, &re) || d != time.Second || re.Key != upstreamKey {
			t.Fatalf("second call: %+v, want a rate limit error quoting 1s", r)
		}
		if took != 0 {
			t.Fatalf("gave up after %s, want at once", took)
		}
		if u.Count() != 1 {
			t.Fatalf("the upstream saw %d requests, want 1", u.Count())
		}
		// The call timeout bounds the wait too.
		tr2 := newTransport(t, u.Transport(), bw.WithRateLimit(rate.Every(time.Minute), 1, bw.WithMaxWait(time.Hour)))
		send(context.Background(), tr2, "upstream.test")
		if r, took := send(context.Background(), tr2, "upstream.test"); !errors.Is(r.err, bw.ErrRateLimited) || took != 0 {
			t.Fatalf("a wait longer than the call timeout: %+v after %s", r, took)
		}
	})
}

func TestTransportRejectionsAreNotRetriedOrCharged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t)
		tr := newTransport(t, u.Transport(), bw.WithRateLimit(1, 1, bw.WithMaxWait(0)),
			bw.WithPolicy(bw.Consecutive(1)))
		send(context.Background(), tr, "upstream.test")
		for range 20 {
			if r, _ := send(context.Background(), tr, "upstream.test"); !errors.Is(r.err, bw.ErrRateLimited) {
				t.Fatalf("%+v", r)
			}
		}
		if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.State != bw.StateClosed || s.Failures != 0 {
			t.Fatalf("rejections charged the breaker: %+v", s)
		}
		if u.Count() != 1 {
			t.Fatalf("upstream saw %d", u.Count())
		}
	})
}

func TestTransportPauseOn429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
			if n == 1 {
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"3"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport())
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() {
			// The throttled call itself retries no earlier than the hint.
			if r, _ := send(context.Background(), tr, "a.test"); r.status != 200 {
				t.Errorf("the throttled call: %+v", r)
			}
		})
		synctest.Wait() // answered 429; a.test is paused and the call backs off
		if r := pauseLeft(tr.PauseGates(), "http://a.test"); r != 3*time.Second {
			t.Fatalf("a.test paused for %s, want 3s", r)
		}
		for i := range 20 {
			wg.Go(func() {
				ctx := context.Background()
				patient := i%2 == 0
				if !patient {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Second)
					defer cancel()
				}
				r, took := send(ctx, tr, "a.test")
				d, _ := bw.RetryAfter(r.err)
				switch {
				case patient && (r.status != 200 || took < 3*time.Second || took > 6*time.Second):
					// Released after the pause, one probe first and the
					// others spread out (ten held for 3 s: 250 ms apart).
					t.Errorf("patient call %d: %+v after %s, want 200 between 3s and 6s", i, r, took)
				case !patient && (!errors.Is(r.err, bw.ErrPaused) || d != 3*time.Second || took != 0):
					t.Errorf("hurried call %d: %+v after %s, want a pause error at once", i, r, took)
				}
			})
		}
		if r, took := send(context.Background(), tr, "b.test"); r.status != 200 || took != 0 {
			t.Fatalf("b.test: %+v after %s, want unaffected", r, took)
		}
		wg.Wait()
		for _, r := range u.Requests()[1:] {
			if r.Host == "a.test" && r.At.Before(start.Add(3*time.Second)) {
				t.Fatalf("a.test was called at +%s, during its pause", r.At.Sub(start))
			}
		}
		if n := u.Count(); n != 1+1+10+1 {
			t.Fatalf("upstream saw %d requests, want 13 (429, retry, 10 patient calls, b.test)", n)
		}
		var held []time.Time
		for _, r := range u.Requests()[1:] {
			if r.Host == "a.test" {
				held = append(held, r.At)
			}
		}
		// The probe, the first call released and the throttled call's
		// own retry may come together; the held calls do not.
		if n := maxInWindow(held, 200*time.Millisecond); n > 3 {
			t.Fatalf("%d calls reached a.test within 200 ms of each other after the pause, want them spread out", n)
		}
	})
}

func TestTransportPacesOnRateLimitHeaders(t *testing.T) {
	epoch := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name string
		h    http.Header
	}{
		{"RateLimit", http.Header{"Ratelimit": {`"default";r=0;t=5`}, "Ratelimit-Policy": {`"default";q=10;w=60`}}},
		{"RateLimit-Policy window", http.Header{"Ratelimit": {`"default";r=0`}, "Ratelimit-Policy": {`"default";q=10;w=5`}}},
		{"RateLimit-Remaining delta", http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"5"}}},
		{"X-RateLimit delta", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"5"}}},
		{"X-RateLimit epoch", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(epoch.Unix()+5, 10)},
			"Date": {epoch.UTC().Format(http.TimeFormat)}}},
	} {
		for _, pacing := range []bool{true, false} {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				// The upstream enforces its quota: 429 until 5 s have passed.
				u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
					switch {
					case n == 1:
						return breakwatertest.Step{Header: tc.h}
					case time.Since(start) < 5*time.Second:
						return breakwatertest.Step{Status: 429}
					}
					return breakwatertest.Step{}
				})
				tr := newTransport(t, u.Transport(), bw.WithRateLimitHeaders(pacing), bw.WithMaxAttempts(1))
				send(context.Background(), tr, "upstream.test")
				r, took := send(context.Background(), tr, "upstream.test")
				switch {
				case pacing && (r.status != 200 || took != 5*time.Second):
					t.Errorf("%s, pacing: %+v after %s, want 200 after 5s", tc.name, r, took)
				case !pacing && (r.status != 429 || took != 0):
					t.Errorf("%s, no pacing: %+v after %s, want the 429 at once", tc.name, r, took)
				}
			})
		}
	}
}

func TestTransportLimitOptions(t *testing.T) {
	for name, opts := range map[string][]bw.Option{
		"rate limit 0":                {bw.WithRateLimit(0, 1)},
		"burst 0":                     {bw.WithRateLimit(10, 0)},
		"concurrency 0":               {bw.WithConcurrencyLimit(0)},
		"queue without wait":          {bw.WithConcurrencyLimit(4, bw.WithMaxQueue(4), bw.WithMaxWait(0))},
		"pacing without a pause gate": {bw.WithoutPauseGate(), bw.WithRateLimitHeaders(true)},
		"max pause 0":                 {bw.WithMaxRetryAfter(-1)},
		"infinite rate limit":         {bw.WithRateLimit(rate.Inf, 1)},
		"configured and shared":       {bw.WithRateLimit(10, 1), bw.WithRateLimiters(mustRateLimiters(t))},
		"bad adaptive limit":          {bw.WithConcurrencyLimit(4, bw.WithAdaptiveLimit(bw.Gradient{Max: 2}))},
		"rate limit given twice":      {bw.WithRateLimit(5, 5), bw.WithRateLimit(10, 2)},
	} {
		if _, err := bw.NewTransport(opts...); err == nil {
			t.Errorf("%s: NewTransport accepted it", name)
		}
	}
	tr, err := bw.NewTransport(bw.WithBase(okBase))
	if err != nil || tr.PauseGates() == nil {
		t.Fatalf("defaults: %v; want a pause gate", err)
	}
	if tr.PauseGates().Pause("k", time.Hour); pauseLeft(tr.PauseGates(), "k") <= 119*time.Second {
		t.Errorf("max pause %s, want 2m", pauseLeft(tr.PauseGates(), "k"))
	}
	if _, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://other.test/", nil)); err != nil {
		t.Fatal(err)
	}
	if s := tr.Snapshot(); len(s.RateLimiters) != 0 || len(s.Bulkheads) != 0 {
		t.Errorf("defaults: limits %+v", s)
	}
	tr, _ = bw.NewTransport(bw.WithBase(okBase), bw.WithMaxRetryAfter(time.Minute), bw.WithRateLimit(10, 2),
		bw.WithConcurrencyLimit(3))
	tr.PauseGates().Pause("k", time.Hour)
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://other.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := tr.Snapshot(); len(s.RateLimiters) != 1 || s.RateLimiters[0].Burst != 2 || s.Bulkheads[0].Limit != 3 || pauseLeft(tr.PauseGates(), "k") > time.Minute {
		t.Fatalf("the options did not configure the limits: %+v", s)
	}
	tr, _ = bw.NewTransport(bw.WithoutPauseGate())
	if tr.PauseGates() != nil {
		t.Fatal("WithoutPauseGate kept a gate")
	}
	shared, _ := bw.NewRateLimiters(1, 1)
	tr, _ = bw.NewTransport(bw.WithBase(okBase), bw.WithRateLimiters(shared))
	if resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://other.test/", nil)); err == nil {
		resp.Body.Close()
	}
	if _, ok := bucketOf(shared, "http://other.test"); !ok {
		t.Fatal("WithRateLimiters did not share the registry")
	}
}

// okBase answers every request 200 with an empty body.
var okBase = bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
})

// retryAfter is bw.RetryAfter's duration, 0 when it knows none.
func retryAfter(err error) time.Duration {
	d, _ := bw.RetryAfter(err)
	return d
}

func mustRateLimiters(t *testing.T) *bw.RateLimiters {
	rs, err := bw.NewRateLimiters(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// A wait must end before the caller's deadline: a token due exactly at the
// deadline is refused at once, one due a nanosecond before it is waited
// for, whether the longest wait is longer than the time left or equal to it.
func TestRateLimiterWaitEndsBeforeTheDeadline(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []bw.Option
	}{
		{"default longest wait", nil},
		{"longest wait equal to the time left", []bw.Option{bw.WithMaxWait(time.Second)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newRateLimiter(t, 1, 1, c.opts...)
				l.Allow()
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := l.Wait(ctx); !errors.Is(err, bw.ErrRateLimited) || time.Since(start) != 0 {
					t.Fatalf("a token due at the deadline: Wait = %v after %s, want a refusal at once", err, time.Since(start))
				}
			})
			synctest.Test(t, func(t *testing.T) {
				l := newRateLimiter(t, 1, 1, c.opts...)
				l.Allow()
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second+time.Nanosecond)
				defer cancel()
				if err := l.Wait(ctx); err != nil || time.Since(start) != time.Second {
					t.Fatalf("a token due 1ns before the deadline: Wait = %v after %s, want nil after 1s", err, time.Since(start))
				}
			})
		})
	}
}

// The probe after a pause that gets no answer (it times out) hands the
// probe on at once: the next call held goes at that instant instead of
// waiting out the probe's lease.
func TestTransportPauseProbeWithoutAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
			switch n {
			case 1:
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
			case 2:
				return breakwatertest.Step{Hang: true}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithMaxAttempts(1), bw.WithAttemptTimeout(100*time.Millisecond))
		if r, _ := send(context.Background(), tr, "a.test"); r.status != 429 {
			t.Fatalf("first call: %+v, want the 429", r)
		}
		type ended struct {
			r    result
			took time.Duration
		}
		ends := make(chan ended, 2)
		for range 2 {
			go func() {
				r, took := send(context.Background(), tr, "a.test")
				ends <- ended{r, took}
			}()
		}
		var failed, served int
		for range 2 {
			e := <-ends
			switch {
			case e.took != 1100*time.Millisecond:
				t.Errorf("%+v after %s, want an end at 1.1s, as the probe times out", e.r, e.took)
				continue
			case e.r.err != nil:
				failed++
			case e.r.status == 200:
				served++
			}
		}
		if failed != 1 || served != 1 {
			t.Fatalf("%d calls failed and %d were served, want the probe's timeout and the next call's 200", failed, served)
		}
	})
}

// TestTransportRateLimitWaitersHonourAPause: calls that wait for a token
// of WithRateLimit(12, 1) against an upstream that allows 10 requests a
// second and answers 429 with Retry-After: 1 otherwise. A call whose token
// comes during a pause waits the pause out: no request reaches the
// upstream within a second of a 429.
func TestTransportRateLimitWaitersHonourAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			next   time.Time // the upstream's GCRA: the next request it allows
			denied []time.Time
		)
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			if now.Before(next) {
				denied = append(denied, now)
				return breakwatertest.Step{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
			}
			next = now.Add(100 * time.Millisecond)
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithRateLimit(12, 1))
		stop := time.Now().Add(10 * time.Second)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					get(tr)
				}
			})
		}
		wg.Wait()
		inside := 0
		var late []time.Duration
		for _, r := range u.Requests() {
			for _, d := range denied {
				if r.At.After(d) && r.At.Before(d.Add(time.Second)) {
					inside++
					late = append(late, r.At.Sub(d).Round(time.Millisecond))
					break
				}
			}
		}
		t.Logf("%d requests, %d answered 429, %d inside a pause %v", u.Count(), len(denied), inside, late)
		if len(denied) == 0 || inside != 0 {
			t.Fatalf("%d requests reached the upstream inside the pause a 429 asked for (%d 429s)", inside, len(denied))
		}
	})
}

// TestTransportSlotWaitersHonourAPause: a call waits for the one slot of
// WithConcurrencyLimit(1) while the call holding it is answered 429 with
// Retry-After: 1. The slot it then gets comes inside the pause: it gives
// the slot back and waits the pause out.
func TestTransportSlotWaitersHonourAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
			if n == 1 {
				return breakwatertest.Step{Delay: 200 * time.Millisecond, Status: 429, Header: http.Header{"Retry-After": {"1"}}}
			}
			return breakwatertest.Step{}
		})
		tr := newTransport(t, u.Transport(), bw.WithConcurrencyLimit(1))
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if r := get(tr); r.status != 200 {
					t.Errorf("call: %+v", r)
				}
			})
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		for _, r := range u.Requests()[1:] {
			if d := r.At.Sub(start); d < 1200*time.Millisecond {
				t.Errorf("a request reached the upstream at +%s, inside the pause of [200ms, 1.2s)", d)
			}
		}
		if n := u.Count(); n != 3 {
			t.Fatalf("upstream saw %d requests, want 3", n)
		}
	})
}

// A full registry of token buckets makes room for a new key by evicting a
// full bucket rather than one still refilling, from the instant it is
// full: a key that spent its quota keeps its state.
func TestRateLimitersEvictAFullBucketFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs, err := bw.NewRateLimiters(1, 3, bw.WithKeyLimits(2, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		rs.Take("drained")
		rs.Take("full")
		rs.Take("full") // full again at 2 s
		time.Sleep(time.Second / 2)
		rs.Take("drained")
		rs.Take("drained") // full again at 3 s
		time.Sleep(time.Second + time.Second/2)
		rs.Take("new")
		for k, want := range map[string]bool{"drained": true, "full": false, "new": true} {
			if _, ok := bucketOf(rs, k); ok != want {
				t.Errorf("%s kept: %v, want %v", k, ok, want)
			}
		}
	})
}

// With a shared store, a key the store refused keeps its bucket, and so
// the refusal, until the refusal ends; from that instant it is as good as
// new.
func TestRateLimitersEvictAFreeSharedKeyFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs, err := bw.NewRateLimiters(rate.Every(time.Minute), 1, bw.WithSharedLimiter(&fakeShared{}),
			bw.WithMaxWait(0), bw.WithKeyLimits(2, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rs.Wait(ctx, "refused")
		time.Sleep(time.Second)
		rs.Wait(ctx, "ends")
		if err := rs.Wait(ctx, "ends"); err == nil {
			t.Fatal("the store admitted a second request in the minute")
		} // refused until 61 s
		time.Sleep(59 * time.Second)
		rs.Wait(ctx, "refused")
		if err := rs.Wait(ctx, "refused"); err == nil {
			t.Fatal("the store admitted a second request in the minute")
		} // refused until 120 s
		time.Sleep(time.Second) // 61 s: the refusal of "ends" ends
		rs.Take("new")
		for k, want := range map[string]bool{"refused": true, "ends": false, "new": true} {
			if _, ok := bucketOf(rs, k); ok != want {
				t.Errorf("%s kept: %v, want %v", k, ok, want)
			}
		}
	})
}
