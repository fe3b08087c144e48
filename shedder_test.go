package breakwater_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
)

func newShedder(t *testing.T, limit int, opts ...bw.Option) (func(http.Handler) http.Handler, *bw.Bulkheads) {
	t.Helper()
	bh, err := bw.NewBulkheads(limit, opts...)
	if err != nil {
		t.Fatalf("NewBulkheads: %v", err)
	}
	sh, err := bw.Shedder(bh)
	if err != nil {
		t.Fatalf("Shedder: %v", err)
	}
	return sh, bh
}

// gauge tracks how many handlers run at once and the most seen.
type gauge struct{ now, peak atomic.Int32 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

func TestShedderLimitsConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, bh := newShedder(t, 4, bw.WithMaxQueue(3), bw.WithMaxWait(10*time.Second))
		var g gauge
		r := chi.NewRouter()
		r.Use(sh)
		r.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
			g.enter()
			defer g.leave()
			time.Sleep(time.Second)
		})

		recs := make([]*httptest.ResponseRecorder, 10)
		var wg sync.WaitGroup
		for i := range recs {
			wg.Go(func() { recs[i] = serve(r, "GET", "/slow") })
		}
		synctest.Wait()
		if n := g.now.Load(); n != 4 {
			t.Fatalf("%d handlers running, want 4", n)
		}
		if q := queued(bh, ""); q != 3 {
			t.Fatalf("%d queued, want 3", q)
		}
		wg.Wait()
		var ok, shed int
		for _, rec := range recs {
			switch rec.Code {
			case 200:
				ok++
			case 503:
				shed++
				if ra := rec.Header().Get("Retry-After"); ra != "1" && ra != "2" {
					t.Errorf("Retry-After %q, want 1 or 2", ra)
				}
				if p := decodeProblem(t, rec.Header(), rec.Body.String()); p.Status != 503 {
					t.Errorf("problem %+v", p)
				}
			default:
				t.Errorf("status %d", rec.Code)
			}
		}
		if ok != 7 || shed != 3 || g.peak.Load() != 4 {
			t.Fatalf("%d served, %d shed, peak %d; want 7, 3, 4", ok, shed, g.peak.Load())
		}
		if inFlight(bh, "") != 0 {
			t.Fatalf("%d slots still held", inFlight(bh, ""))
		}
	})
}

func TestShedderRetryAfterJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh, _ := bw.NewBulkheads(1)
		sh, err := bw.Shedder(bh, bw.WithShedRetryAfter(2*time.Second, 4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h := sh(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		go serve(h, "GET", "/")
		synctest.Wait()
		seen := map[string]int{}
		for range 300 {
			seen[serve(h, "GET", "/").Header().Get("Retry-After")]++
		}
		close(release)
		if len(seen) != 3 || seen["2"] == 0 || seen["3"] == 0 || seen["4"] == 0 {
			t.Fatalf("Retry-After values %v, want 2, 3 and 4", seen)
		}
	})
}

func TestShedderFreesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, bh := newShedder(t, 1, bw.WithMaxQueue(1), bw.WithMaxWait(time.Minute))

		// A panicking handler.
		boom := sh(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
		func() {
			defer func() {
				if recover() != "boom" {
					t.Error("the panic did not go on")
				}
			}()
			serve(boom, "GET", "/")
		}()
		if inFlight(bh, "") != 0 {
			t.Fatal("a panicking handler kept its slot")
		}

		// A client that disconnects while its handler runs: the handler
		// honours its context and returns.
		var ran atomic.Int32
		wait := sh(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran.Add(1)
			<-r.Context().Done()
		}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			wait.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			close(done)
		}()
		synctest.Wait()
		if inFlight(bh, "") != 1 {
			t.Fatalf("in flight %d, want 1", inFlight(bh, ""))
		}

		// A client that disconnects while queued leaves the queue and
		// gets nothing; its handler never runs.
		qctx, qcancel := context.WithCancel(context.Background())
		qrec := httptest.NewRecorder()
		qdone := make(chan struct{})
		go func() {
			wait.ServeHTTP(qrec, httptest.NewRequest("GET", "/", nil).WithContext(qctx))
			close(qdone)
		}()
		synctest.Wait()
		if queued(bh, "") != 1 {
			t.Fatalf("queued %d, want 1", queued(bh, ""))
		}
		qcancel()
		<-qdone
		if queued(bh, "") != 0 || ran.Load() != 1 || qrec.Body.Len() != 0 || qrec.Header().Get("Retry-After") != "" {
			t.Fatalf("queued %d, handler ran %d times, wrote %q", queued(bh, ""), ran.Load(), qrec.Body)
		}

		cancel()
		<-done
		if inFlight(bh, "") != 0 {
			t.Fatal("a disconnected client's slot was not freed")
		}
	})
}

// TestShedderFreesSlotOnHijack runs on a real server: only a real
// connection can be hijacked.
func TestShedderFreesSlotOnHijack(t *testing.T) {
	sh, bh := newShedder(t, 1)
	hijacked := make(chan struct{})
	finish := make(chan struct{})
	r := chi.NewRouter()
	r.Use(sh)
	r.Get("/ws", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: demo\r\n\r\n")
		brw.Flush()
		close(hijacked)
		<-finish // the connection lives on, outside the request
	})
	r.Get("/next", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "admitted") })
	srv, _ := newLoggedServer(t, r)

	go func() {
		resp, err := http.Get(srv.URL + "/ws")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-hijacked
	if n := inFlight(bh, ""); n != 0 {
		t.Fatalf("%d slots held after the hijack, want 0", n)
	}
	if status, _, body := fetch(t, srv.URL+"/next"); status != 200 || body != "admitted" {
		t.Fatalf("next request: %d %q", status, body)
	}
	close(finish)
}

// TestStackedSheddersFreeSlots: three Shedders on one request, more than
// the shared writer holds slots for. A hijack frees the two the writer
// holds, the third when its handler returns, and each slot is given back
// once: none is held after the requests, hijacked or not.
func TestStackedSheddersFreeSlots(t *testing.T) {
	var shs [3]func(http.Handler) http.Handler
	var bhs [3]*bw.Bulkheads
	for i := range shs {
		shs[i], bhs[i] = newShedder(t, 1)
	}
	held := func() [3]int { return [3]int{inFlight(bhs[0], ""), inFlight(bhs[1], ""), inFlight(bhs[2], "")} }
	hijacked := make(chan [3]int, 1)
	finish, returned := make(chan struct{}), make(chan struct{})
	outside := func(next http.Handler) http.Handler { // sees the Shedders return
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.URL.Path == "/ws" {
				close(returned)
			}
		})
	}
	r := chi.NewRouter()
	r.Use(outside, shs[0], shs[1], shs[2])
	r.Get("/ws", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: demo\r\n\r\n")
		brw.Flush()
		hijacked <- held()
		<-finish
	})
	r.Get("/next", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "admitted") })
	srv, _ := newLoggedServer(t, r)

	for i := range 2 {
		if status, _, body := fetch(t, srv.URL+"/next"); status != 200 || body != "admitted" {
			t.Fatalf("request %d: %d %q", i, status, body)
		}
		if n := held(); n != [3]int{} {
			t.Fatalf("after request %d: slots held %v, want none", i, n)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(srv.URL + "/ws")
		if err == nil {
			resp.Body.Close()
		}
	}()
	if n := <-hijacked; n != [3]int{0, 0, 1} {
		t.Fatalf("slots held after the hijack %v, want [0 0 1]: the writer holds two", n)
	}
	close(finish)
	<-done
	<-returned
	if n := held(); n != [3]int{} {
		t.Fatalf("slots held after the hijacked handler returned %v, want none", n)
	}
	for i := range 2 {
		if status, _, body := fetch(t, srv.URL+"/next"); status != 200 || body != "admitted" {
			t.Fatalf("request %d after the hijack: %d %q", i, status, body)
		}
	}
}

func TestShedderExemptAndServeMux(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh, _ := bw.NewBulkheads(1)
		sh, err := bw.Shedder(bh, bw.WithExempt(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		mux := http.NewServeMux()
		mux.HandleFunc("GET /slow", func(http.ResponseWriter, *http.Request) { <-release })
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		h := sh(mux)
		go serve(h, "GET", "/slow")
		synctest.Wait()
		if rec := serve(h, "GET", "/slow"); rec.Code != 503 {
			t.Fatalf("second slow request: %d", rec.Code)
		}
		if rec := serve(h, "GET", "/healthz"); rec.Code != 200 {
			t.Fatalf("exempt request: %d", rec.Code)
		}
		close(release)
	})
}

func TestShedderObservedAndTypedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var obs eventLog
		var got bw.Rejection
		bh, _ := bw.NewBulkheads(1)
		sh, err := bw.Shedder(bh, bw.WithObserver(&obs), bw.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, rej bw.Rejection) {
			got = rej
			bw.WriteProblem(w, r, rej)
		}))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		r := chi.NewRouter()
		r.Use(sh)
		r.Get("/jobs/{id}", func(http.ResponseWriter, *http.Request) { <-release })
		go serve(r, "GET", "/jobs/1")
		synctest.Wait()
		serve(r, "GET", "/jobs/2")
		close(release)
		synctest.Wait()
		var ce *bw.Error
		if !errors.Is(got.Err, bw.ErrConcurrencyLimit) || !errors.As(got.Err, &ce) || ce.Mechanism != bw.MechConcurrency {
			t.Fatalf("rejection %+v", got)
		}
		var rejects, requests int
		for _, e := range obs.events() {
			switch e.Kind {
			case bw.EventReject:
				rejects++
				if e.Mechanism != bw.MechShed || e.Route != "/jobs/{id}" || e.Status != 503 {
					t.Errorf("reject %+v", e)
				}
			case bw.EventRequest:
				requests++
				if e.Route != "/jobs/{id}" || (e.Category != bw.Rejected && e.Category != bw.Success) {
					t.Errorf("request %+v", e)
				}
			}
		}
		if rejects != 1 || requests != 2 {
			t.Fatalf("%d rejects and %d requests reported", rejects, requests)
		}
	})
}

func TestShedderOptionErrors(t *testing.T) {
	if _, err := bw.Shedder(nil); err == nil {
		t.Error("Shedder(nil) succeeded")
	}
	bh, _ := bw.NewBulkheads(1)
	if _, err := bw.Shedder(bh, bw.WithShedRetryAfter(3*time.Second, time.Second)); err == nil {
		t.Error("an inverted Retry-After range was accepted")
	}
	if _, err := bw.Shedder(bh, bw.WithShedRetryAfter(0, time.Second)); err == nil {
		t.Error("a Retry-After range from 0 was accepted")
	}
	if _, err := bw.Shedder(bh, bw.WithShedRetryAfter(time.Nanosecond, time.Second)); err != nil {
		t.Errorf("a Retry-After range from 1ns (1 s once rounded up): %v", err)
	}
}

// TestShedderAdaptiveLimitLearnsFromTheHandler: handler timeouts are
// overload signals that shrink an adaptive limit; fast successes grow it.
func TestShedderAdaptiveLimitLearnsFromTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, bh := newShedder(t, 8, bw.WithAdaptiveLimit(bw.AIMD{Min: 1, Max: 16, Backoff: 0.5}))
		ht := newTimeout(t, time.Second)
		var slow atomic.Bool
		slow.Store(true)
		r := chi.NewRouter()
		r.Use(sh, ht)
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {
			if slow.Load() {
				<-r.Context().Done()
			}
		})
		for range 40 {
			serve(r, "GET", "/")
		}
		shrunk := limitOf(bh, "")
		if shrunk >= 8 {
			t.Fatalf("after 40 handler timeouts the limit is %d, want below 8", shrunk)
		}
		slow.Store(false)
		for range 200 {
			serve(r, "GET", "/")
		}
		if limitOf(bh, "") <= shrunk {
			t.Fatalf("after 200 fast successes the limit is %d, was %d", limitOf(bh, ""), shrunk)
		}
	})
}
