package breakwater_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
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

func (f *fakeShared) Take(_ context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (bw.RateLimitSnapshot, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.waits = append(f.waits, maxWait)
	if f.err != nil {
		return bw.RateLimitSnapshot{}, 0, f.err
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
	st := bw.RateLimitSnapshot{Limit: limit, Burst: burst}
	backlog := tat.Sub(now)
	if delay > maxWait {
		st.Limited, st.RetryAfter = true, delay
		st.Reset = backlog
		return st, 0, nil
	}
	f.tat[key] = next
	st.Reset = next.Sub(now)
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

// downStore is a SharedLimiter that always fails; the first call after
// slow is set takes 20 ms to do so.
type downStore struct{ slow atomic.Bool }

func (d *downStore) Take(context.Context, string, rate.Limit, int, time.Duration) (bw.RateLimitSnapshot, time.Duration, error) {
	if d.slow.CompareAndSwap(true, false) {
		time.Sleep(20 * time.Millisecond)
	}
	return bw.RateLimitSnapshot{}, 0, errors.New("down")
}

func (d *downStore) Replicas() int { return 1 }

// TestSharedLimiterSlowFailureNotRefused: a request whose store call fails
// only after 20 ms, while other requests at half the limit take the local
// share's tokens, is judged by the share when the store gave up, not when
// it asked, and admitted.
func TestSharedLimiterSlowFailureNotRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &downStore{}
		rl, err := bw.NewRateLimiters(10_000, 10, bw.WithSharedLimiter(d), bw.WithMaxWait(0)) // a 1 ms burst window
		if err != nil {
			t.Fatal(err)
		}
		rl.Take("k")                 // the key falls back: its share starts empty
		time.Sleep(time.Millisecond) // and is full again one burst window later
		d.slow.Store(true)
		done := make(chan bw.RateLimitSnapshot)
		go func() { done <- rl.Take("k") }()
		synctest.Wait() // the store call is under way
		for range 100 {
			if st := rl.Take("k"); st.Limited {
				t.Fatalf("a request at half the limit refused: %+v", st)
			}
			time.Sleep(200 * time.Microsecond)
		}
		if st := <-done; st.Limited {
			t.Fatalf("refused after a slow store failure at half the limit: %+v", st)
		}
	})
}

func TestSharedLimiterCachesRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{}
		rl, err := bw.NewRateLimiters(10, 2, bw.WithSharedLimiter(f))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(t)(bw.ClientRateLimit(rl, bw.RemoteAddrKey))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
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
// admits its share of the limit, never the whole limit; the share starts
// empty, since the store may have spent the burst just before it failed.
func TestSharedLimiterFallsBackToShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{err: errors.New("down"), replicas: 3}
		rl, err := bw.NewRateLimiters(30, 9, bw.WithSharedLimiter(f), bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for range 20 {
			if !rl.Take("k").Limited {
				admitted++
			}
		}
		if admitted != 0 {
			t.Fatalf("admitted %d of a burst as the store failed, want none: the share starts empty", admitted)
		}
		time.Sleep(time.Second) // the share refills at 30/3 = 10/s
		admitted = 0
		for range 20 {
			if !rl.Take("k").Limited {
				admitted++
			}
		}
		if admitted != 3 {
			t.Fatalf("admitted %d after 1 s, want 3 (the share's burst)", admitted)
		}
		f.mu.Lock()
		f.err = nil
		f.mu.Unlock()
		if st := rl.Take("k"); st.Limited || st.Remaining != 8 {
			t.Fatalf("the store is back: %+v", st)
		}
	})
}

// chargedStore is a fakeShared that can be charged: it records the
// backlogs it is told.
type chargedStore struct {
	fakeShared
	charges []time.Duration
}

func (c *chargedStore) Charge(_ context.Context, key string, _ rate.Limit, _ int, backlog time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.charges = append(c.charges, backlog)
	return nil
}

// TestSharedLimiterChargesOnReturn: a key whose share admitted while the
// store failed charges the store with the share's backlog, scaled to the
// whole bucket, once, before its first shared admission; a key whose
// share admitted nothing charges nothing.
func TestSharedLimiterChargesOnReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &chargedStore{fakeShared: fakeShared{err: errors.New("down"), replicas: 3}}
		rl, err := bw.NewRateLimiters(30, 9, bw.WithSharedLimiter(c), bw.WithMaxWait(0))
		if err != nil {
			t.Fatal(err)
		}
		rl.Take("idle")
		for range 12 {
			rl.Take("busy")
			time.Sleep(50 * time.Millisecond)
		}
		c.mu.Lock()
		c.err = nil
		c.mu.Unlock()
		rl.Take("busy")
		rl.Take("busy")
		rl.Take("idle")
		// The busy share (10/s, burst 3: a 300 ms span) started empty and
		// admitted every 100 ms after that: it is left empty, or nearly,
		// and charges up to the whole bucket's 300 ms span.
		if len(c.charges) != 1 || c.charges[0] <= 0 || c.charges[0] > 300*time.Millisecond {
			t.Fatalf("charges %v, want one for the busy key, within the bucket's span", c.charges)
		}
	})
}

func TestSharedLimiterWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{}
		rl, err := bw.NewRateLimiters(10, 1, bw.WithSharedLimiter(f), bw.WithMaxWait(time.Second))
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

// hub is an in-memory cluster bus: each replica's bus delivers what the
// others publish, synchronously.
type hub struct {
	mu    sync.Mutex
	subs  map[*hubBus][]func(bw.ClusterEvent)
	sent  []bw.ClusterEvent
	buses []*hubBus
}

type hubBus struct{ h *hub }

func (h *hub) bus() *hubBus {
	b := &hubBus{h: h}
	h.mu.Lock()
	h.buses = append(h.buses, b)
	h.mu.Unlock()
	return b
}

func (b *hubBus) Publish(e bw.ClusterEvent) {
	b.h.mu.Lock()
	b.h.sent = append(b.h.sent, e)
	var fns []func(bw.ClusterEvent)
	for other, fs := range b.h.subs {
		if other != b {
			fns = append(fns, fs...)
		}
	}
	b.h.mu.Unlock()
	for _, fn := range fns {
		fn(e)
	}
}

func (b *hubBus) Subscribe(fn func(bw.ClusterEvent)) {
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	if b.h.subs == nil {
		b.h.subs = map[*hubBus][]func(bw.ClusterEvent){}
	}
	b.h.subs[b] = append(b.h.subs[b], fn)
}

func (h *hub) published() []bw.ClusterEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bw.ClusterEvent(nil), h.sent...)
}

func TestSharedTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hub{}
		var remote []bw.Transition
		a, err := bw.NewBreakers(bw.WithPolicy(bw.Consecutive(2)), bw.WithOpenTimeout(time.Second, time.Minute), bw.WithOpenJitter(0), bw.WithClusterBus(h.bus()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := bw.NewBreakers(bw.WithOpenJitter(0), bw.WithClusterBus(h.bus()), onTransition(func(tr bw.Transition) { remote = append(remote, tr) }))
		if err != nil {
			t.Fatal(err)
		}
		a.Get("api").RecordFailure(bw.ServerError)
		a.Get("api").RecordFailure(bw.ServerError)
		if a.Get("api").State() != bw.StateOpen || b.Get("api").State() != bw.StateOpen {
			t.Fatalf("after A opened: A %v, B %v", a.Get("api").State(), b.Get("api").State())
		}
		if len(remote) != 1 || remote[0].Reason != bw.ReasonCluster || remote[0].OpenFor < time.Second || remote[0].OpenFor > 1100*time.Millisecond {
			t.Fatalf("B's transitions %+v: want one opening by the cluster for 1 s plus at most 10 %% jitter", remote)
		}
		if sent := h.published(); len(sent) != 1 || sent[0].Manual || sent[0].For != time.Second {
			t.Fatalf("published %+v: want A's opening only (B's must not echo)", sent)
		}
		// B recovers on its own: half-open after its (jittered) open time.
		time.Sleep(remote[0].OpenFor)
		if s := b.Get("api").State(); s != bw.StateHalfOpen {
			t.Fatalf("B after its open time: %v", s)
		}
		// A manual trip and reset reach every replica.
		a.Get("db").Trip(5 * time.Second)
		if b.Get("db").State() != bw.StateOpen {
			t.Fatalf("B after A's Trip: %v", b.Get("db").State())
		}
		a.Get("db").Reset()
		if b.Get("db").State() != bw.StateClosed {
			t.Fatalf("B after A's Reset: %v", b.Get("db").State())
		}
		if sent := h.published(); len(sent) != 3 || !sent[1].Manual || !sent[2].Manual || sent[2].For != 0 {
			t.Fatalf("published %+v", sent)
		}
	})
}

func TestSharedPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hub{}
		a, err := bw.NewPauseGates(bw.WithClusterBus(h.bus()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := bw.NewPauseGates(bw.WithClusterBus(h.bus()))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the replicas' clocks have run
		a.Observe("api.example", bw.Outcome{Category: bw.Throttled, HasRetryAfter: true, RetryAfter: 2 * time.Second}, nil)
		if r := pauseLeft(b, "api.example"); r != 2*time.Second {
			t.Fatalf("B paused for %v after A's 429, want 2s", r)
		}
		a.Pause("api.example", time.Second)   // shorter: no change, nothing sent
		a.Pause("api.example", 2*time.Second) // the same end: nothing sent
		if sent := h.published(); len(sent) != 1 || sent[0].For != 2*time.Second {
			t.Fatalf("published %+v: want one pause for 2s (B's must not echo, one that ends no later changes nothing)", sent)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.Wait(ctx, "api.example"); !errors.Is(err, bw.ErrPaused) {
			t.Fatalf("B's call during A's pause: %v", err)
		}
		a.Resume("api.example")
		if r := pauseLeft(b, "api.example"); r != 0 {
			t.Fatalf("B still paused for %v after A's Resume", r)
		}
	})
}

func TestExplainSaysWhatIsShared(t *testing.T) {
	h := &hub{}
	tr, err := bw.NewTransport(
		bw.WithRateLimit(100, 10, bw.WithSharedLimiter(&fakeShared{replicas: 3})),
		bw.WithClusterBus(h.bus()),
	)
	if err != nil {
		t.Fatal(err)
	}
	out := tr.Explain()
	for _, want := range []string{
		"rate limit       shared: one quota for all replicas, one store round trip per attempt; while the store fails, this replica's share (1/3)",
		"pauses           shared: a pause set here holds every replica",
		"breaker trips    shared: openings and resets reach every replica after the fact (admission stays local)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
	}
}

// TestClusterBusPauseIsNotATrip: two Transports share one bus for their
// breakers and pause gates. A 429 with Retry-After: 1 on replica 1
// pauses the key on replica 2, whose next call waits for the pause and
// goes, and opens no breaker anywhere; a trip on replica 1 opens replica
// 2's breaker and pauses nothing; a reset and a resume each end only
// their own.
func TestClusterBusPauseIsNotATrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hub{}
		var opened atomic.Int32
		watch := onTransition(func(tr bw.Transition) {
			if tr.To == bw.StateOpen {
				opened.Add(1)
			}
		})
		u1 := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}, breakwatertest.Step{})
		u2 := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{})
		tr1 := newTransport(t, u1.Transport(), bw.WithClusterBus(h.bus()), bw.WithMaxAttempts(1), watch)
		tr2 := newTransport(t, u2.Transport(), bw.WithClusterBus(h.bus()), bw.WithMaxAttempts(1), watch)

		t429 := time.Now()
		if r := get(tr1); r.err != nil || r.status != http.StatusTooManyRequests {
			t.Fatalf("replica 1: %+v, want the 429", r)
		}
		if d := pauseLeft(tr2.PauseGates(), upstreamKey); d != time.Second {
			t.Fatalf("replica 2 paused for %v after replica 1's 429, want 1s", d)
		}
		if s, _ := breakerOf(tr2.Breakers(), upstreamKey); s.State != bw.StateClosed {
			t.Fatalf("replica 2's breaker is %v after replica 1's 429, want closed", s.State)
		}
		if r := get(tr2); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("replica 2's call during the pause: %+v, want a 200 after the pause", r)
		}
		if reqs := u2.Requests(); len(reqs) != 1 || reqs[0].At.Sub(t429) < time.Second {
			t.Fatalf("replica 2's requests %+v: want one, a second after the 429", reqs)
		}
		if n := opened.Load(); n != 0 {
			t.Fatalf("%d breakers opened on a 429", n)
		}

		// A trip opens the other replica's breaker and pauses nothing; a
		// resume leaves the breaker open and a reset closes it.
		tr1.Breakers().Get("db").Trip(5 * time.Second)
		if s, _ := breakerOf(tr2.Breakers(), "db"); s.State != bw.StateOpen {
			t.Fatalf("replica 2's breaker after replica 1's trip: %v", s.State)
		}
		if d := pauseLeft(tr2.PauseGates(), "db"); d != 0 {
			t.Fatalf("replica 1's trip paused replica 2 for %v", d)
		}
		tr1.PauseGates().Pause("db", 3*time.Second)
		tr1.PauseGates().Resume("db")
		if s, _ := breakerOf(tr2.Breakers(), "db"); s.State != bw.StateOpen {
			t.Fatalf("replica 2's breaker after replica 1's resume: %v, want still open", s.State)
		}
		tr1.PauseGates().Pause("db", 3*time.Second)
		tr1.Breakers().Get("db").Reset()
		if d := pauseLeft(tr2.PauseGates(), "db"); d != 3*time.Second {
			t.Fatalf("replica 2 paused for %v after replica 1's reset, want still 3s", d)
		}
		if s, _ := breakerOf(tr2.Breakers(), "db"); s.State != bw.StateClosed {
			t.Fatalf("replica 2's breaker after replica 1's reset: %v", s.State)
		}
	})
}

// TestClusterBusDropsUnknownEvents: an event that does not say whose
// state it carries (from a bus that drops the field, or an older
// replica) neither opens a breaker nor pauses a key.
func TestClusterBusDropsUnknownEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hub{}
		tr := newTransport(t, breakwatertest.NewPipeUpstream(t).Transport(), bw.WithClusterBus(h.bus()))
		other := h.bus()
		other.Publish(bw.ClusterEvent{Key: upstreamKey, For: time.Second})
		other.Publish(bw.ClusterEvent{Key: upstreamKey, For: time.Second, Manual: true})
		if s, _ := breakerOf(tr.Breakers(), upstreamKey); s.State != bw.StateClosed {
			t.Errorf("breaker %v after events of no mechanism, want closed", s.State)
		}
		if d := pauseLeft(tr.PauseGates(), upstreamKey); d != 0 {
			t.Errorf("paused for %v after events of no mechanism", d)
		}
		if r := get(tr); r.err != nil || r.status != http.StatusOK {
			t.Errorf("call after events of no mechanism: %+v", r)
		}
	})
}
