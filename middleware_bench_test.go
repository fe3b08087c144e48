package breakwater_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
)

// benchWriter is a ResponseWriter that keeps one header map for every
// request and discards the body, so that a benchmark measures the
// middleware, not a recorder's allocations. Reset clears the map between
// requests the way a server starts each response with an empty one.
type benchWriter struct {
	h      http.Header
	status int
}

func newBenchWriter() *benchWriter { return &benchWriter{h: make(http.Header, 8)} }

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(code int)        { w.status = code }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) reset()                      { clear(w.h); w.status = 0 }

var okHandler = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }

// benchRouter is a chi router with mws on the root and one route.
func benchRouter(mws ...func(http.Handler) http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(mws...)
	r.Get("/items/{id}", okHandler)
	return r
}

// runServe drives h serially and in parallel, each goroutine with its own
// request and writer.
func runServe(b *testing.B, h http.Handler, remote func(i int) string) {
	b.Run("serial", func(b *testing.B) {
		req := httptest.NewRequest(http.MethodGet, "/items/42", nil)
		req.RemoteAddr = remote(0)
		w := newBenchWriter()
		b.ReportAllocs()
		for b.Loop() {
			w.reset()
			h.ServeHTTP(w, req)
		}
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int32
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := httptest.NewRequest(http.MethodGet, "/items/42", nil)
			req.RemoteAddr = remote(int(n.Add(1)))
			w := newBenchWriter()
			for pb.Next() {
				w.reset()
				h.ServeHTTP(w, req)
			}
		})
	})
}

func oneClient(int) string { return "192.0.2.1:4000" }

// BenchmarkChi is the router alone, the baseline for the middleware below.
func BenchmarkChi(b *testing.B) {
	runServe(b, benchRouter(), oneClient)
}

// BenchmarkRouteBreaker is a closed route breaker on every request.
func BenchmarkRouteBreaker(b *testing.B) {
	rb, err := bw.RouteBreaker(nil)
	if err != nil {
		b.Fatal(err)
	}
	runServe(b, benchRouter(rb), oneClient)
}

// BenchmarkHandlerTimeout pays for a context with a deadline per request.
func BenchmarkHandlerTimeout(b *testing.B) {
	ht, err := bw.HandlerTimeout(time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	runServe(b, benchRouter(ht), oneClient)
}

// BenchmarkClientRateLimit is an admitted request: a bucket lookup, a
// token, and the RateLimit fields set from precomputed values. Parallel
// goroutines are distinct clients.
func BenchmarkClientRateLimit(b *testing.B) {
	rl, err := bw.NewRateLimiters(1e9, 100) // never short of tokens
	if err != nil {
		b.Fatal(err)
	}
	crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
	if err != nil {
		b.Fatal(err)
	}
	clients := func(i int) string { return "192.0.2." + strconv.Itoa(i%250+1) + ":4000" }
	b.Run("chi", func(b *testing.B) { runServe(b, benchRouter(crl), clients) })
	b.Run("bare", func(b *testing.B) {
		runServe(b, crl(http.HandlerFunc(okHandler)), clients)
	})
}

// BenchmarkClientRateLimitClients is an admitted request of one of 256
// clients in turn, as bench/'s Inbound runs it without the router: the
// registry's hit path over many keys rather than one.
func BenchmarkClientRateLimitClients(b *testing.B) {
	rl, err := bw.NewRateLimiters(1_000_000, 1000)
	if err != nil {
		b.Fatal(err)
	}
	crl, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
	if err != nil {
		b.Fatal(err)
	}
	h := crl(http.HandlerFunc(okHandler))
	reqs := make([]*http.Request, 256)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/items/42", nil)
		reqs[i].RemoteAddr = "192.0.2." + strconv.Itoa(i) + ":" + strconv.Itoa(40000+i)
	}
	w := newBenchWriter()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
	if w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
}

// BenchmarkShedder is admit + release of a slot around a trivial handler,
// bare and on chi.
func BenchmarkShedder(b *testing.B) {
	bh, err := bw.NewBulkheads(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	sh, err := bw.Shedder(bh)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("bare", func(b *testing.B) { runServe(b, sh(http.HandlerFunc(okHandler)), oneClient) })
	b.Run("chi", func(b *testing.B) { runServe(b, benchRouter(sh), oneClient) })
}

// BenchmarkInboundStack is the README's whole inbound stack on chi
// (CallerHeaders, ClientRateLimit, RouteBreaker, Shedder, HandlerTimeout)
// with limits no request reaches: what an admitted request costs beyond
// BenchmarkChi. bench/cmd/wrkload drives the same stack with wrk.
func BenchmarkInboundStack(b *testing.B) {
	b.Run("chi", func(b *testing.B) { runServe(b, benchRouter(inboundStack(b)...), oneClient) })
}

// inboundStack is the README's inbound middleware, in its order.
func inboundStack(tb testing.TB) []func(http.Handler) http.Handler {
	tb.Helper()
	trust, err := bw.CallerHeaders("10.0.0.0/8")
	if err != nil {
		tb.Fatal(err)
	}
	rl, err := bw.NewRateLimiters(1e9, 1000)
	if err != nil {
		tb.Fatal(err)
	}
	limit, err := bw.ClientRateLimit(rl, bw.RemoteAddrKey)
	if err != nil {
		tb.Fatal(err)
	}
	routes, err := bw.NewBreakers()
	if err != nil {
		tb.Fatal(err)
	}
	breaker, err := bw.RouteBreaker(routes)
	if err != nil {
		tb.Fatal(err)
	}
	slots, err := bw.NewBulkheads(1 << 20)
	if err != nil {
		tb.Fatal(err)
	}
	shed, err := bw.Shedder(slots)
	if err != nil {
		tb.Fatal(err)
	}
	timeout, err := bw.HandlerTimeout(time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	return []func(http.Handler) http.Handler{trust, limit, breaker, shed, timeout}
}
