package breakwater_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	bw "github.com/breakwater-go/breakwater"
)

// Per-client token buckets that never wait, with the numbers an inbound
// rate limit puts in its RateLimit and Retry-After fields.
func ExampleNewRateLimiters() {
	// 2 requests per second per client, in bursts of up to 2.
	limiters, err := bw.NewRateLimiters(2, 2, bw.WithMaxWait(0))
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		st := limiters.Take("client-a")
		fmt.Printf("request %d: limited=%v remaining=%d retry-after=%s\n",
			i+1, st.Limited, st.Remaining, st.RetryAfter.Round(100*time.Millisecond))
	}
	fmt.Println("client-b limited:", limiters.Take("client-b").Limited)
	// Output:
	// request 1: limited=false remaining=1 retry-after=0s
	// request 2: limited=false remaining=0 retry-after=500ms
	// request 3: limited=true remaining=0 retry-after=500ms
	// client-b limited: false
}

// A wait that cannot fit the caller's deadline fails at once, quoting the
// wait it would have needed.
func ExampleRateLimiters_Wait() {
	lim, _ := bw.NewRateLimiters(1, 1) // one request per second per key
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	fmt.Println(lim.Wait(ctx, "api"))
	err := lim.Wait(ctx, "api")
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrRateLimited), d.Round(time.Second))
	}
	// Output:
	// <nil>
	// true 1s
}

// A throttled answer pauses its key; calls that cannot outlast the pause
// fail at once instead of collecting more 429s.
func ExamplePauseGates() {
	gates, _ := bw.NewPauseGates(bw.WithMaxRetryAfter(time.Minute))
	// A 429 asking for two minutes: the pause is clamped to one.
	gates.Observe("api.example.com", bw.Outcome{Category: bw.Throttled, Status: 429, RetryAfter: 2 * time.Minute, HasRetryAfter: true}, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := gates.Wait(ctx, "api.example.com")
	if d, ok := bw.RetryAfter(err); ok {
		fmt.Println(errors.Is(err, bw.ErrPaused), d.Round(time.Second))
	}
	fmt.Println(gates.Wait(ctx, "other.example.com"))
	gates.Resume("api.example.com")
	fmt.Println(gates.Wait(ctx, "api.example.com"))
	// Output:
	// true 1m0s
	// <nil>
	// <nil>
}

// A bulkhead of two slots per key, refusing at once when both are taken
// (by default a request waits up to 5 s for a slot).
func ExampleBulkheads() {
	bh, _ := bw.NewBulkheads(2, bw.WithMaxWait(0))
	ctx := context.Background()
	first, _ := bh.Acquire(ctx, "db")
	second, _ := bh.Acquire(ctx, "db")
	_, err := bh.Acquire(ctx, "db")
	var e *bw.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, bw.ErrConcurrencyLimit), e.Mechanism)
	}
	first.Release()
	third, err := bh.Acquire(ctx, "db")
	fmt.Println(err, bh.Snapshot().Bulkheads[0].InFlight)
	second.Release()
	third.Release()
	// Output:
	// true concurrency
	// <nil> 2
}

// Bulkheads used on their own as load-shedding middleware: one request at
// a time, the rest answered 503 with Retry-After.
func ExampleBulkheads_loadShedding() {
	bh, _ := bw.NewBulkheads(1, bw.WithMaxWait(0))
	shed := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slot, err := bh.Acquire(r.Context(), "")
			if err != nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return
			}
			defer slot.Release()
			next.ServeHTTP(w, r)
		})
	}
	var inner *httptest.ResponseRecorder
	h := shed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// While this request holds the only slot, another one is shed.
		inner = httptest.NewRecorder()
		shed(http.NotFoundHandler()).ServeHTTP(inner, r)
		fmt.Fprintln(w, "done")
	}))
	outer := httptest.NewRecorder()
	h.ServeHTTP(outer, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(outer.Code, inner.Code, inner.Header().Get("Retry-After"))
	// Output:
	// 200 503 1
}

// A Transport whose attempts to each host are limited to one per second,
// refused at once when no token is left.
func ExampleWithRateLimit() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tr, err := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimit(1, 1, bw.WithMaxWait(0)))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(errors.Is(err, bw.ErrRateLimited))
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// true
}

// A limit of 20 attempts per second in bursts of 1: the second call waits
// about 50 ms for its token when it may wait 100 ms, and is refused at
// once when it may not wait at all.
func ExampleWithMaxWait() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	for _, wait := range []time.Duration{100 * time.Millisecond, 0} {
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimit(20, 1, bw.WithMaxWait(wait)))
		fmt.Println(wait, getVia(tr, srv.URL), getVia(tr, srv.URL))
	}
	// Output:
	// 100ms 200 200
	// 0s 200 ErrRateLimited
}

// A 429 asking for a minute pauses the key: the next call is refused
// without reaching the upstream (its deadline cannot outlast the pause).
// Without the pause gate it is sent, and answered 429 again.
func ExampleWithoutPauseGate() {
	srv := newCounted(func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithoutPauseGate()}} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(srv.Client().Transport))...)
		fmt.Println(getVia(tr, srv.URL), getVia(tr, srv.URL), "after", sent(srv.requests()))
	}
	// Output:
	// 429 ErrPaused after 1 request
	// 429 429 after 2 requests
}

// An upstream that says in its RateLimit field that the quota is spent for
// a minute: the key is paused before the upstream has to answer 429.
// Switched off, the next call is sent.
func ExampleWithRateLimitHeaders() {
	srv := newCounted(func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("RateLimit-Policy", `"hourly";q=100;w=3600`)
		w.Header().Set("RateLimit", `"hourly";r=0;t=60`)
	})
	defer srv.Close()
	for _, on := range []bool{true, false} {
		srv.n.Store(0)
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimitHeaders(on))
		fmt.Println(on, getVia(tr, srv.URL), getVia(tr, srv.URL), "after", sent(srv.requests()))
	}
	// Output:
	// true 200 ErrPaused after 1 request
	// false 200 200 after 2 requests
}

// Two Transports that share one token bucket per host: together they make
// one call per second to it.
func ExampleWithRateLimiters() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	buckets, _ := bw.NewRateLimiters(1, 1, bw.WithMaxWait(0))
	a, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimiters(buckets))
	b, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimiters(buckets))
	fmt.Println("a:", getVia(a, srv.URL))
	fmt.Println("b:", getVia(b, srv.URL))
	// Output:
	// a: 200
	// b: ErrRateLimited
}

// A Transport that shares its bulkheads: a slot taken elsewhere (here by
// hand, as a handler guarding the same upstream would) leaves none for it.
func ExampleWithBulkheads() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	bulkheads, _ := bw.NewBulkheads(1, bw.WithMaxWait(0))
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithBulkheads(bulkheads))
	slot, _ := bulkheads.Acquire(context.Background(), hostKey(srv.URL))
	fmt.Println(getVia(tr, srv.URL))
	slot.Release()
	fmt.Println(getVia(tr, srv.URL))
	// Output:
	// ErrConcurrencyLimit
	// 200
}

// One attempt in flight and one waiting: a third call finds the queue
// full and is refused at once instead of waiting its turn.
func ExampleWithMaxQueue() {
	inside, release := make(chan struct{}), make(chan struct{})
	srv := newCounted(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			close(inside)
			<-release
		}
	})
	defer srv.Close()
	tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport),
		bw.WithConcurrencyLimit(1, bw.WithMaxWait(time.Second), bw.WithMaxQueue(1)))
	results := make(chan string, 2)
	go func() { results <- getVia(tr, srv.URL) }()
	<-inside
	go func() { results <- getVia(tr, srv.URL) }()
	for tr.Snapshot().Bulkheads[0].Queued == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("third:", getVia(tr, srv.URL))
	close(release)
	fmt.Println(<-results, <-results, "after", sent(srv.requests()))
	// Output:
	// third: ErrConcurrencyLimit
	// 200 200 after 2 requests
}

// An upstream answering 503: a fixed limit stays at 10, an AIMD limit
// halves after a window of 10 overloaded answers.
func ExampleWithAdaptiveLimit() {
	srv := newCounted(always(http.StatusServiceUnavailable))
	defer srv.Close()
	for _, opts := range [][]bw.Option{nil, {bw.WithAdaptiveLimit(bw.AIMD{Backoff: 0.5})}} {
		tr, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithMaxAttempts(1), bw.WithoutBreaker(),
			bw.WithConcurrencyLimit(10, opts...))
		for range 10 {
			getVia(tr, srv.URL)
		}
		fmt.Println("limit:", tr.Snapshot().Bulkheads[0].Limit)
	}
	// Output:
	// limit: 10
	// limit: 5
}

// sharedBuckets stands for a store that replicas share (the redisstore
// module's, in production): here one process's token buckets.
type sharedBuckets struct{ rl *bw.RateLimiters }

func (s sharedBuckets) Take(_ context.Context, key string, _ rate.Limit, _ int, _ time.Duration) (bw.RateLimitSnapshot, time.Duration, error) {
	return s.rl.Take(key), 0, nil
}

func (sharedBuckets) Replicas() int { return 2 }

// Two replicas limited to one call per second each make two calls; with a
// shared limiter the limit is for both together, and they make one.
func ExampleWithSharedLimiter() {
	srv := newCounted(always(http.StatusOK))
	defer srv.Close()
	store, _ := bw.NewRateLimiters(1, 1, bw.WithMaxWait(0))
	for _, opts := range [][]bw.Option{{bw.WithMaxWait(0)}, {bw.WithMaxWait(0), bw.WithSharedLimiter(sharedBuckets{store})}} {
		a, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimit(1, 1, opts...))
		b, _ := bw.NewTransport(bw.WithBase(srv.Client().Transport), bw.WithRateLimit(1, 1, opts...))
		fmt.Println(getVia(a, srv.URL), getVia(b, srv.URL))
	}
	// Output:
	// 200 200
	// 200 ErrRateLimited
}

// oneWorker is an upstream that works one request at a time, 2 ms each,
// and queues the rest: its latency is its queue.
type oneWorker struct{ mu sync.Mutex }

func (u *oneWorker) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// Calls come four times as fast as the upstream works: its queue, and so
// its latency, grows. By default the Transport sees the median latency
// climb and bounds the attempts in flight, refusing the excess at once
// with ErrConcurrencyLimit; switched off, every call joins the queue.
func ExampleWithoutCongestionLimit() {
	for _, opts := range [][]bw.Option{nil, {bw.WithoutCongestionLimit()}} {
		tr, _ := bw.NewTransport(append(opts, bw.WithBase(&oneWorker{}))...)
		get := func() error {
			req, _ := http.NewRequest(http.MethodGet, "http://upstream.example/", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		for range 64 { // the usual latency, one call at a time
			_ = get()
		}
		var refused atomic.Int64
		var wg sync.WaitGroup
		for range 300 { // 2 calls a millisecond, four times what it works
			for range 2 {
				wg.Go(func() {
					if errors.Is(get(), bw.ErrConcurrencyLimit) {
						refused.Add(1)
					}
				})
			}
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		fmt.Println("calls refused at once:", refused.Load() > 0)
	}
	// Output:
	// calls refused at once: true
	// calls refused at once: false
}
