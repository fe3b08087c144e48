package breakwater_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// keyBulkhead is one key of a registry of bulkheads.
type keyBulkhead struct{ bs *bw.Bulkheads }

func newBulkhead(t *testing.T, limit int, opts ...bw.Option) keyBulkhead {
	t.Helper()
	b, err := bw.NewBulkheads(limit, opts...)
	if err != nil {
		t.Fatalf("NewBulkheads: %v", err)
	}
	return keyBulkhead{b}
}

func (b keyBulkhead) Acquire(ctx context.Context) (bw.Slot, error) { return b.bs.Acquire(ctx, "k") }

// TryAcquire takes a free slot without waiting: Acquire with a context
// that has ended.
func (b keyBulkhead) TryAcquire() (bw.Slot, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := b.bs.Acquire(ctx, "k")
	return s, err == nil
}

func (b keyBulkhead) Snapshot() bw.BulkheadSnapshot { s, _ := bulkheadOf(b.bs, "k"); return s }
func (b keyBulkhead) InFlight() int                 { return b.Snapshot().InFlight }
func (b keyBulkhead) Queued() int                   { return b.Snapshot().Queued }
func (b keyBulkhead) Limit() int                    { return b.Snapshot().Limit }

func TestBulkheadOptionValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		opts  []bw.Option
	}{
		{"zero limit", 0, nil},
		{"huge limit", 1 << 31, nil},
		{"queue without wait", 4, []bw.Option{bw.WithMaxQueue(4), bw.WithMaxWait(0)}},
		{"negative queue", 4, []bw.Option{bw.WithMaxQueue(-1), bw.WithMaxWait(time.Second)}},
		{"no keys", 4, []bw.Option{bw.WithKeyLimits(0, time.Minute)}},
		{"AIMD max below limit", 4, []bw.Option{bw.WithAdaptiveLimit(bw.AIMD{Max: 2})}},
		{"AIMD min above limit", 4, []bw.Option{bw.WithAdaptiveLimit(bw.AIMD{Min: 5})}},
		{"AIMD backoff 1", 4, []bw.Option{bw.WithAdaptiveLimit(bw.AIMD{Backoff: 1})}},
		{"AIMD backoff 1 on a limit of 1", 1, []bw.Option{bw.WithAdaptiveLimit(bw.AIMD{Backoff: 1})}},
		{"AIMD negative increase", 4, []bw.Option{bw.WithAdaptiveLimit(bw.AIMD{Increase: -1})}},
		{"AIMD negative timeout", 4, []bw.Option{bw.WithAdaptiveLimit(bw.AIMD{Timeout: -1})}},
		{"gradient smoothing 2", 4, []bw.Option{bw.WithAdaptiveLimit(bw.Gradient{Smoothing: 2})}},
		{"gradient tolerance 0.5", 4, []bw.Option{bw.WithAdaptiveLimit(bw.Gradient{Tolerance: 0.5})}},
		{"gradient long window", 4, []bw.Option{bw.WithAdaptiveLimit(bw.Gradient{LongWindow: -1})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := bw.NewBulkheads(tc.limit, tc.opts...); err == nil {
				t.Error("NewBulkheads accepted it")
			}
		})
	}
}

func TestBulkheadRejectsAtOnceWithoutWait(t *testing.T) {
	b := newBulkhead(t, 2, bw.WithMaxWait(0))
	ctx := context.Background()
	s1, err1 := b.Acquire(ctx)
	s2, err2 := b.Acquire(ctx)
	if err1 != nil || err2 != nil || b.InFlight() != 2 {
		t.Fatalf("%v %v, in flight %d", err1, err2, b.InFlight())
	}
	_, err := b.Acquire(ctx)
	var ce *bw.Error
	if !errors.Is(err, bw.ErrConcurrencyLimit) || !errors.As(err, &ce) || ce.Mechanism != bw.MechConcurrency ||
		!strings.HasSuffix(err.Error(), "(2 in flight, limit 2)") {
		t.Fatalf("third Acquire: %v", err)
	}
	if _, ok := b.TryAcquire(); ok {
		t.Fatal("TryAcquire admitted a third")
	}
	if s := b.Snapshot(); !s.Saturated || s.InFlight != 2 || s.Limit != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	s1.Release()
	s1.Release() // a second Release of the same slot does nothing
	if b.InFlight() != 1 {
		t.Fatalf("in flight %d after releasing one slot twice", b.InFlight())
	}
	s3, ok := b.TryAcquire()
	if !ok {
		t.Fatal("TryAcquire refused a free slot")
	}
	s2.Drop()
	s3.Ignore()
	if b.InFlight() != 0 {
		t.Fatalf("in flight %d", b.InFlight())
	}
	var none bw.Slot
	none.Release()
}

func TestBulkheadQueueIsFIFOAndBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, bw.WithMaxQueue(3), bw.WithMaxWait(10*time.Second))
		holder, _ := b.Acquire(context.Background())
		var mu sync.Mutex
		var order []int
		slots := make(chan bw.Slot, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				s, err := b.Acquire(context.Background())
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				slots <- s
			})
			synctest.Wait() // waiter i is queued before i+1
		}
		if b.Queued() != 3 {
			t.Fatalf("queued %d", b.Queued())
		}
		start := time.Now()
		if _, err := b.Acquire(context.Background()); !errors.Is(err, bw.ErrConcurrencyLimit) || time.Since(start) != 0 {
			t.Fatalf("a fourth waiter with the queue full: %v after %s", err, time.Since(start))
		}
		holder.Release()
		for range 3 {
			s := <-slots
			if b.InFlight() != 1 {
				t.Fatalf("in flight %d", b.InFlight())
			}
			s.Release()
		}
		wg.Wait()
		if !slices.Equal(order, []int{0, 1, 2}) {
			t.Fatalf("waiters served in order %v", order)
		}
	})
}

func TestBulkheadQueueWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 1, bw.WithMaxQueue(5), bw.WithMaxWait(2*time.Second))
		holder, _ := b.Acquire(context.Background())
		start := time.Now()
		_, err := b.Acquire(context.Background())
		var ce *bw.Error
		if !errors.As(err, &ce) || !strings.HasSuffix(err.Error(), "after waiting 2s") || time.Since(start) != 2*time.Second {
			t.Fatalf("queue wait: %v after %s", err, time.Since(start))
		}
		// A deadline shorter than the queue wait ends it earlier.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := b.Acquire(ctx); err == nil || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("deadline: %v after %s", err, time.Since(start))
		}
		// Cancellation.
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second / 4); cancel2() }()
		if _, err := b.Acquire(ctx2); err != context.Canceled {
			t.Fatalf("cancelled: %v", err)
		}
		if b.Queued() != 0 {
			t.Fatalf("queued %d after every waiter left", b.Queued())
		}
		holder.Release()
		if s, err := b.Acquire(context.Background()); err != nil || b.InFlight() != 1 {
			t.Fatalf("after the waiters left: %v", err)
		} else {
			s.Release()
		}
	})
}

func TestBulkheadHammer(t *testing.T) {
	b := newBulkhead(t, 8, bw.WithMaxQueue(64), bw.WithMaxWait(time.Second))
	var inside, worst atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range 2000 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
				s, err := b.Acquire(ctx)
				cancel()
				if err != nil {
					continue
				}
				n := inside.Add(1)
				for {
					w := worst.Load()
					if n <= w || worst.CompareAndSwap(w, n) {
						break
					}
				}
				inside.Add(-1)
				s.Release()
			}
		})
	}
	wg.Wait()
	if worst.Load() > 8 || b.InFlight() != 0 || b.Queued() != 0 {
		t.Fatalf("worst %d in flight, %d left in flight, %d queued", worst.Load(), b.InFlight(), b.Queued())
	}
}

func TestBulkheadsRegistry(t *testing.T) {
	bs, err := bw.NewBulkheads(2, bw.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs.Snapshot().Bulkheads) != 0 {
		t.Fatal("a new registry holds bulkheads")
	}
	sa, _ := bs.Acquire(context.Background(), "a")
	bs.Acquire(context.Background(), "a")
	if _, err := bs.Acquire(context.Background(), "a"); !errors.Is(err, bw.ErrConcurrencyLimit) {
		t.Fatalf("third slot of a: %v", err)
	}
	var ce *bw.Error
	if _, err := bs.Acquire(context.Background(), "a"); !errors.As(err, &ce) || ce.Key != "a" {
		t.Fatalf("error key: %v", err)
	}
	if _, err := bs.Acquire(context.Background(), "b"); err != nil {
		t.Fatalf("b shares a's slots: %v", err)
	}
	if s, ok := bulkheadOf(bs, "a"); !ok || s.InFlight != 2 || !s.Saturated || s.Key != "a" || s.Limit != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	sa.Release()
	if inFlight(bs, "a") != 1 || len(bs.Snapshot().Bulkheads) != 2 {
		t.Fatalf("after a release: %d in flight", inFlight(bs, "a"))
	}
}

// scheduleCall is one call of a generated schedule: when it starts, what
// the upstream does with it (sent as headers) and what the caller does with
// the response.
type scheduleCall struct {
	at     time.Duration
	header http.Header
	caller string        // "read", "close", "cancel", "leave"
	after  time.Duration // think time before close, or time until cancel
}

// scheduleStep turns a request's X-Test-* headers into a step.
func scheduleStep(_ int, r *http.Request) breakwatertest.Step {
	ms := func(k string) time.Duration {
		n, _ := strconv.Atoi(r.Header.Get(k))
		return time.Duration(n) * time.Millisecond
	}
	s := breakwatertest.Step{Delay: ms("X-Test-Delay"), SlowBody: ms("X-Test-Slow"), Hang: r.Header.Get("X-Test-Hang") != ""}
	if s.SlowBody > 0 {
		s.BodySize, s.ChunkSize = 8<<10, 1<<10
	}
	if st, _ := strconv.Atoi(r.Header.Get("X-Test-Status")); st != 0 {
		s.Status = st
	}
	return s
}

func generateSchedule(r *rand.Rand, n int) []scheduleCall {
	calls := make([]scheduleCall, n)
	for i := range calls {
		h := http.Header{}
		switch r.IntN(5) {
		case 0:
			h.Set("X-Test-Delay", strconv.Itoa(r.IntN(600)))
		case 1:
			h.Set("X-Test-Slow", strconv.Itoa(20+r.IntN(150)))
		case 2:
			h.Set("X-Test-Hang", "1")
		case 3:
			h.Set("X-Test-Status", "503")
			h.Set("X-Test-Delay", strconv.Itoa(r.IntN(100)))
		}
		calls[i] = scheduleCall{
			at:     time.Duration(r.IntN(2000)) * time.Millisecond,
			header: h,
			caller: []string{"read", "close", "cancel", "leave"}[r.IntN(4)],
			after:  time.Duration(r.IntN(1500)) * time.Millisecond,
		}
	}
	return calls
}

// serverSpans records, on the bubble's clock, when each request's handler
// ran: from its start until its request context ended (the handler
// returned or the client went away).
type serverSpans struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

func (s *serverSpans) wrap(fn func(int, *http.Request) breakwatertest.Step) func(int, *http.Request) breakwatertest.Step {
	return func(n int, r *http.Request) breakwatertest.Step {
		start := time.Now()
		s.mu.Lock()
		i := len(s.spans)
		s.spans = append(s.spans, [2]time.Time{start})
		s.mu.Unlock()
		context.AfterFunc(r.Context(), func() {
			s.mu.Lock()
			s.spans[i][1] = time.Now()
			s.mu.Unlock()
		})
		return fn(n, r)
	}
}

// maxOverlap is the largest number of spans [start, end) in progress at
// one instant. A span that ends at t and one that starts at t do not
// overlap: a slot handed over at t counts once.
func (s *serverSpans) maxOverlap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, sp := range s.spans {
		edges = append(edges, edge{sp[0], +1}, edge{sp[1], -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends before starts
	})
	n, worst := 0, 0
	for _, e := range edges {
		n += e.delta
		worst = max(worst, n)
	}
	return worst
}

func runSchedule(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 42))
	var spans serverSpans
	u := breakwatertest.NewPipeUpstreamFunc(t, spans.wrap(scheduleStep))
	var opts []bw.Option
	if r.IntN(2) == 0 {
		opts = append(opts, bw.WithMaxQueue(1+r.IntN(8)), bw.WithMaxWait(time.Duration(50+r.IntN(500))*time.Millisecond))
	}
	tr := newTransport(t, u.Transport(), bw.WithConcurrencyLimit(8, opts...),
		bw.WithAttemptTimeout(time.Second), bw.WithCallTimeout(3*time.Second), bw.WithMaxAttempts(1+r.IntN(3)),
		bw.WithoutRetryBudget(), bw.WithoutBreaker())
	calls := generateSchedule(r, 40)
	leftOpen := make(chan io.Closer, len(calls))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range calls {
		wg.Go(func() {
			time.Sleep(c.at)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.caller == "cancel" {
				time.AfterFunc(c.after, cancel)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, breakwatertest.PipeURL+"/"+strconv.Itoa(i), nil)
			req.Header = c.header
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return
			}
			switch c.caller {
			case "read", "cancel":
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			case "close":
				time.Sleep(c.after)
				resp.Body.Close()
			case "leave":
				leftOpen <- resp.Body // never closed until the schedule is over
			}
		})
	}
	wg.Wait()
	time.Sleep(5 * time.Second) // past every attempt timeout
	if n := slotsHeld(tr, breakwatertest.PipeURL); n != 0 {
		t.Errorf("seed %d: %d slots still held after every attempt ended", seed, n)
	}
	close(leftOpen)
	for b := range leftOpen {
		b.Close()
	}
	if n := spans.maxOverlap(); n > 8 {
		t.Errorf("seed %d: the upstream had %d requests in flight at once, limit 8", seed, n)
	}
	if len(spans.spans) == 0 || time.Since(start) == 0 {
		t.Errorf("seed %d: nothing reached the upstream", seed)
	}
}

func TestTransportBulkheadRandomSchedules(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	for seed := range uint64(seeds) {
		synctest.Test(t, func(t *testing.T) { runSchedule(t, seed) })
	}
}

func TestTransportSlotOfAnUnclosedBodyEndsWithTheAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{BodySize: 64 << 10})
		tr := newTransport(t, u.Transport(), bw.WithConcurrencyLimit(1, bw.WithMaxQueue(1), bw.WithMaxWait(5*time.Second)),
			bw.WithAttemptTimeout(2*time.Second))
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if r, took := send(context.Background(), tr, "upstream.test"); r.status != 200 || took != 2*time.Second {
			t.Fatalf("second call: %+v after %s, want 200 once the first attempt's timeout freed the slot (2s)", r, took)
		}
		if at := u.Requests()[1].At; !at.Equal(start.Add(2 * time.Second)) {
			t.Fatalf("second request reached the upstream at +%s", at.Sub(start))
		}
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, bw.ErrAttemptTimeout) {
			t.Fatalf("reading the expired body: %v", err)
		}
		resp.Body.Close() // releases nothing more
		if n := slotsHeld(tr, upstreamKey); n != 0 {
			t.Fatalf("%d slots held", n)
		}
	})
}

func TestTransportSlotLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
			if r.URL.Path == "/flaky" && n == 1 {
				return breakwatertest.Step{Status: 503}
			}
			return breakwatertest.Step{Body: []byte("body")}
		})
		tr := newTransport(t, u.Transport(), bw.WithConcurrencyLimit(1), bw.WithBackoff(bw.Constant(time.Second)))
		inFlight := func() int { return slotsHeld(tr, upstreamKey) }

		// Held until EOF, released at EOF.
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || inFlight() != 1 {
			t.Fatalf("%v, in flight %d", err, inFlight())
		}
		if _, err := tr.RoundTrip(req); !errors.Is(err, bw.ErrConcurrencyLimit) {
			t.Fatalf("a second call while the body is open: %v", err)
		}
		io.ReadAll(resp.Body)
		if inFlight() != 0 {
			t.Fatalf("in flight %d after EOF", inFlight())
		}
		resp.Body.Close()

		// No slot while backing off: another call runs during the retry's
		// sleep.
		done := make(chan result)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/flaky", nil)
			done <- do(tr, req)
		}()
		synctest.Wait()
		if inFlight() != 0 {
			t.Fatalf("in flight %d during the backoff", inFlight())
		}
		if r := get(tr); r.status != 200 {
			t.Fatalf("call during the backoff: %+v", r)
		}
		if r := <-done; r.status != 200 {
			t.Fatalf("retried call: %+v", r)
		}
		if inFlight() != 0 {
			t.Fatalf("in flight %d at the end", inFlight())
		}
	})
}

func TestSlotDropAndIgnore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBulkhead(t, 20, bw.WithAdaptiveLimit(bw.AIMD{Min: 2, Max: 40}))
		for range 20 { // one window of drops: 20 × 0.9
			s, _ := b.Acquire(context.Background())
			s.Drop()
		}
		if b.Limit() != 18 {
			t.Fatalf("limit %d after a window of drops, want 18", b.Limit())
		}
		for range 100 { // ignored samples teach nothing
			s, _ := b.Acquire(context.Background())
			s.Ignore()
		}
		if b.Limit() != 18 {
			t.Fatalf("limit %d after ignored samples", b.Limit())
		}
		if s := b.Snapshot(); s.Limit != 18 || s.InFlight != 0 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

// A sweep that evicts an idle bulkhead while a caller is taking a slot of
// it must not leave the key with two bulkheads (twice its limit).
func TestBulkheadEvictionNeverDoublesTheLimit(t *testing.T) {
	bs, err := bw.NewBulkheads(1, bw.WithKeyLimits(1_000_000, time.Nanosecond)) // every insertion sweeps
	if err != nil {
		t.Fatal(err)
	}
	var inFlight, peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // churn: new keys, so that sweeps keep running
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
				if s, err := bs.Acquire(context.Background(), strconv.Itoa(i)); err == nil {
					s.Release()
				}
			}
		}
	})
	var users sync.WaitGroup
	for range 3 {
		users.Go(func() {
			for range 300_000 {
				s, err := bs.Acquire(context.Background(), "k")
				if err != nil {
					continue
				}
				n := inFlight.Add(1)
				for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
				}
				inFlight.Add(-1)
				s.Release()
			}
		})
	}
	users.Wait()
	close(done)
	wg.Wait()
	if peak.Load() > 1 {
		t.Fatalf("%d holders of a key limited to 1", peak.Load())
	}
}

// A concurrency limit waits by default, as a rate limit does, within the
// call's deadline: a call that finds the slot taken goes when it is freed,
// and one whose deadline comes first is refused at its deadline.
func TestConcurrencyLimitWaitsByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		base := bw.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/hold" {
				<-release
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})
		tr := newTransport(t, base, bw.WithConcurrencyLimit(1))
		get := func(ctx context.Context, path string) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test"+path, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		held := make(chan error, 1)
		go func() { held <- get(context.Background(), "/hold") }()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := get(ctx, "/"); !errors.Is(err, bw.ErrConcurrencyLimit) || time.Since(start) != time.Second {
			t.Errorf("with a 1s deadline: %v after %s, want ErrConcurrencyLimit after 1s", err, time.Since(start))
		}

		waited := make(chan error, 1)
		go func() { waited <- get(context.Background(), "/") }()
		time.Sleep(2 * time.Second)
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if err := <-waited; err != nil {
			t.Errorf("a call that waited for the slot: %v", err)
		}
	})
}
