package breakwater_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
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

func newRouteBreaker(t *testing.T, bs *bw.Breakers, opts ...bw.Option) func(http.Handler) http.Handler {
	t.Helper()
	rb, err := bw.RouteBreaker(bs, opts...)
	if err != nil {
		t.Fatalf("RouteBreaker: %v", err)
	}
	return rb
}

func TestRouteBreakerOpensAndCountsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(3)), bw.WithOpenTimeout(10*time.Second, time.Minute), bw.WithOpenJitter(0))
		rb := newRouteBreaker(t, bs)
		var calls atomic.Int32
		r := chi.NewRouter()
		r.Use(rb)
		r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			http.Error(w, "database unavailable", http.StatusInternalServerError)
		})
		r.Get("/health", func(w http.ResponseWriter, r *http.Request) {})

		for i := 1; i <= 3; i++ {
			if rec := serve(r, "GET", "/orders/1"); rec.Code != 500 {
				t.Fatalf("call %d: %d, want the handler's 500", i, rec.Code)
			}
		}
		if s := bs.Get("/orders/{id}").State(); s != bw.StateOpen {
			t.Fatalf("after 3 failures the route is %s", s)
		}
		for want := 10; want >= 1; want-- {
			rec := serve(r, "GET", "/orders/2")
			if rec.Code != 503 || rec.Header().Get("Retry-After") != itoa(want) {
				t.Fatalf("%d s remaining: %d Retry-After %q, want 503 and %d", want, rec.Code, rec.Header().Get("Retry-After"), want)
			}
			if p := decodeProblem(t, rec.Header(), rec.Body.String()); p.Status != 503 {
				t.Fatalf("problem %+v", p)
			}
			time.Sleep(time.Second)
		}
		if calls.Load() != 3 {
			t.Fatalf("the handler ran %d times, want 3: an open route must not call it", calls.Load())
		}
		if rec := serve(r, "GET", "/health"); rec.Code != 200 {
			t.Fatalf("another route got %d", rec.Code)
		}

		// Open time over: one probe reaches the handler, fails, and the
		// route reopens for the open timeout again (the outage is young:
		// a 32nd of its age is shorter), rounded up from what remains.
		if rec := serve(r, "GET", "/orders/3"); rec.Code != 500 || calls.Load() != 4 {
			t.Fatalf("probe: %d after %d calls", rec.Code, calls.Load())
		}
		time.Sleep(1500 * time.Millisecond)
		if rec := serve(r, "GET", "/orders/3"); rec.Header().Get("Retry-After") != "9" {
			t.Fatalf("after reopening for 10 s and 1.5 s passing, Retry-After %q, want 9", rec.Header().Get("Retry-After"))
		}
	})
}

func TestRouteBreakerHalfOpenBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenTimeout(time.Second, time.Second), bw.WithOpenJitter(0))
		rb := newRouteBreaker(t, bs, bw.WithKeyFunc(func(*http.Request) string { return "r" }))
		release := make(chan struct{})
		var fail atomic.Bool
		fail.Store(true)
		h := rb(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fail.Load() {
				w.WriteHeader(502)
				return
			}
			<-release
		}))
		serve(h, "GET", "/")
		time.Sleep(time.Second)
		fail.Store(false)
		done := make(chan int)
		go func() { done <- serve(h, "GET", "/").Code }()
		synctest.Wait() // the probe is in the handler
		rec := serve(h, "GET", "/")
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
			t.Fatalf("while the probe runs: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
		}
		close(release)
		if code := <-done; code != 200 {
			t.Fatalf("probe got %d", code)
		}
	})
}

func TestRouteBreakerCountsPanicsAndRepanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(2)), bw.WithOpenJitter(0))
		rb := newRouteBreaker(t, bs)
		mux := http.NewServeMux()
		mux.Handle("GET /boom", rb(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })))
		var recovered atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v == "boom" {
					recovered.Add(1)
					w.WriteHeader(500)
				}
			}()
			mux.ServeHTTP(w, r)
		})
		serve(h, "GET", "/boom")
		serve(h, "GET", "/boom")
		if recovered.Load() != 2 {
			t.Fatalf("%d panics reached the recoverer, want 2", recovered.Load())
		}
		if rec := serve(h, "GET", "/boom"); rec.Code != 503 || recovered.Load() != 2 {
			t.Fatalf("after 2 panics: %d, %d panics", rec.Code, recovered.Load())
		}
		if s := bs.Get("GET /boom").State(); s != bw.StateOpen {
			t.Fatalf("the ServeMux pattern's breaker is %s", s)
		}
	})
}

func TestRouteBreakerIgnoresWhatIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)))
		rb := newRouteBreaker(t, bs)
		r := chi.NewRouter()
		r.Use(rb)
		r.Get("/shed", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
		})
		r.Get("/missing", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
		r.Get("/unsupported", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(501) })
		r.Get("/canceled", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			w.WriteHeader(500)
		})
		for _, p := range []string{"/shed", "/missing", "/unsupported", "/nowhere"} {
			serve(r, "GET", p)
			serve(r, "GET", p)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/canceled", nil).WithContext(ctx))
		for _, s := range bs.Snapshot().Breakers {
			if s.State != bw.StateClosed {
				t.Errorf("route %q is %s", s.Key, s.State)
			}
		}
	})
}

func TestRouteBreakerCountsTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, order := range []string{"timeout outside", "timeout inside"} {
			bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(2)))
			rb := newRouteBreaker(t, bs)
			ht := newTimeout(t, time.Second)
			r := chi.NewRouter()
			if order == "timeout outside" {
				r.Use(ht, rb)
			} else {
				r.Use(rb, ht)
			}
			r.Get("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
			for range 2 {
				if rec := serve(r, "GET", "/slow"); rec.Code != 503 || rec.Header().Get("Retry-After") != "" {
					t.Fatalf("%s: %d Retry-After %q, want the timeout's 503", order, rec.Code, rec.Header().Get("Retry-After"))
				}
			}
			if s := bs.Get("/slow").State(); s != bw.StateOpen {
				t.Fatalf("%s: two timeouts left the route %s", order, s)
			}
		}
	})
}

func TestRouteBreakerRoutesOnChiAndServeMux(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t)
		rb := newRouteBreaker(t, bs)
		ok := func(http.ResponseWriter, *http.Request) {}
		r := chi.NewRouter()
		r.With(rb).Get("/with/{id}", ok)
		r.Group(func(r chi.Router) {
			r.Use(rb)
			r.Get("/group/{id}", ok)
		})
		r.Route("/route", func(r chi.Router) {
			r.Use(rb)
			r.Get("/{id}", ok)
		})
		for _, p := range []string{"/with/1", "/group/2", "/route/3"} {
			serve(r, "GET", p)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /mux/{id}", ok)
		whole := newRouteBreaker(t, bs, bw.WithKeyFunc(func(r *http.Request) string { _, p := mux.Handler(r); return p }))
		serve(whole(mux), "GET", "/mux/4")

		want := map[string]bool{"/with/{id}": true, "/group/{id}": true, "/route/{id}": true, "GET /mux/{id}": true}
		for _, s := range bs.Snapshot().Breakers {
			if !want[s.Key] {
				t.Errorf("unexpected breaker %q", s.Key)
			}
			delete(want, s.Key)
		}
		if len(want) != 0 {
			t.Errorf("no breaker for %v", want)
		}
	})
}

func TestRouteBreakerObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var obs eventLog
		bs := newBreakers(t, bw.WithPolicy(bw.Consecutive(1)), bw.WithOpenJitter(0))
		rb := newRouteBreaker(t, bs, bw.WithObserver(&obs))
		r := chi.NewRouter()
		r.Use(rb)
		r.Post("/pay/{id}", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			w.WriteHeader(502)
		})
		serve(r, "POST", "/pay/1")
		serve(r, "POST", "/pay/2")
		evs := obs.events()
		if len(evs) != 3 {
			t.Fatalf("events %+v", evs)
		}
		if e := evs[0]; e.Kind != bw.EventRequest || e.Route != "/pay/{id}" || e.Method != "POST" || e.Status != 502 ||
			e.Category != bw.ServerError || e.Duration != 20*time.Millisecond {
			t.Errorf("first request %+v", e)
		}
		if e := evs[1]; e.Kind != bw.EventReject || e.Mechanism != bw.MechRouteBreaker || e.Key != "/pay/{id}" ||
			!errors.Is(e.Err, bw.ErrCircuitOpen) || e.Status != 503 {
			t.Errorf("rejection %+v", e)
		}
		if e := evs[2]; e.Kind != bw.EventRequest || e.Status != 503 || e.Category != bw.Rejected {
			t.Errorf("rejected request %+v", e)
		}
	})
}

// A route breaker counts only the failures its server caused: requests
// whose bodies the clients aborted or sent too slowly make the handler
// fail (here past an inner handler timeout), and must not open the route
// for everyone. A handler slow on its own, with the body read at once,
// still counts.
func TestRouteBreakerIgnoresClientCausedFailures(t *testing.T) {
	for _, mode := range []string{"aborted", "slow", "slow server"} {
		t.Run(mode, func(t *testing.T) {
			bs := newBreakers(t, bw.WithPolicy(bw.Window(10, time.Minute)))
			served := make(chan struct{}, 11)
			rb, err := bw.RouteBreaker(bs, bw.WithKeyFunc(func(*http.Request) string { return "/upload" }),
				bw.WithObserver(bw.ObserverFunc(func(_ context.Context, e bw.Event) {
					if e.Kind == bw.EventRequest && e.Method == http.MethodPost {
						served <- struct{}{}
					}
				})))
			if err != nil {
				t.Fatal(err)
			}
			ht, err := bw.HandlerTimeout(50 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(rb(ht(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					http.Error(w, "upstream request failed: "+err.Error(), http.StatusBadGateway) // as a proxy would
					return
				}
				if mode == "slow server" {
					<-r.Context().Done()
				}
				if r.Context().Err() != nil {
					return // out of time: the handler timeout answers
				}
			}))))
			defer srv.Close()
			var clients sync.WaitGroup
			for range 11 {
				clients.Go(func() {
					c, err := net.Dial("tcp", srv.Listener.Addr().String())
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf.")
					switch mode {
					case "aborted":
						return
					case "slow":
						time.Sleep(150 * time.Millisecond) // the rest arrives after the handler's deadline
					}
					io.WriteString(c, "half.")
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusServiceUnavailable {
						t.Errorf("a slow upload got %d, want the handler timeout's 503", resp.StatusCode)
					}
				})
			}
			clients.Wait()
			for range 11 {
				<-served // the route breaker has judged every upload
			}
			resp, err := srv.Client().Get(srv.URL + "/upload")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusOK
			if mode == "slow server" {
				want = http.StatusServiceUnavailable // the server's own timeouts open it
			}
			if resp.StatusCode != want {
				t.Fatalf("after 11 %s uploads the route answers %d (breaker %s), want %d", mode, resp.StatusCode, bs.Get("/upload").State(), want)
			}
		})
	}
}
