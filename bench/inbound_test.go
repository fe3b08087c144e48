package bench_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
)

// inboundClients is how many client addresses the requests cycle through,
// so a per-client limiter keeps that many keys.
const inboundClients = 256

// perClientRate (requests per second per client address) is high enough
// that no limiter here ever rejects: the benchmarks measure the cost of
// admitting a request.
const perClientRate = 1_000_000

// breakwaterInbound are breakwater's rows, added by
// inbound_breakwater_test.go.
var breakwaterInbound []lib

// recorder is a reusable ResponseWriter: a response recorder that a
// goroutine resets between requests, so the figures are the router's and
// the middleware's, not the recorder's.
type recorder struct {
	h    http.Header
	code int
	n    int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(p []byte) (int, error) { r.n += len(p); return len(p), nil }

func (r *recorder) reset() {
	clear(r.h)
	r.code, r.n = http.StatusOK, 0
}

// inboundRequests are GET /v1/items/{id} from inboundClients addresses.
func inboundRequests() []*http.Request {
	reqs := make([]*http.Request, inboundClients)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v1/items/%d", i), nil)
		reqs[i].RemoteAddr = fmt.Sprintf("192.0.2.%d:%d", i, 40000+i)
	}
	return reqs
}

// router is a chi router with mw in front of one route that answers 200.
func router(mw ...func(http.Handler) http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(mw...)
	r.Get("/v1/items/{id}", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return r
}

// serve returns a worker factory: each worker serves the requests in turn
// (from its own offset) into its own recorder and checks the status.
func serve(h http.Handler) func() func() error {
	reqs := inboundRequests()
	var workers atomic.Int64
	return func() func() error {
		rec := &recorder{h: http.Header{}}
		i := int(workers.Add(1)) * 37
		return func() error {
			rec.reset()
			h.ServeHTTP(rec, reqs[i%len(reqs)])
			i++
			if rec.code != http.StatusOK {
				return fmt.Errorf("status %d", rec.code)
			}
			return nil
		}
	}
}

// BenchmarkInbound: one request served by ServeHTTP straight into a
// recorder: chi alone, then chi with each per-client rate limiter.
func BenchmarkInbound(b *testing.B) {
	libs := []lib{
		{"chi", func(*testing.B) func() func() error { return serve(router()) }},
	}
	libs = append(libs, breakwaterInbound...)
	libs = append(libs, lib{"httprate", func(*testing.B) func() func() error {
		//lint:ignore SA1019 LimitByIP is the comparison point users know; it is LimitBy(…, KeyByIP).
		return serve(router(httprate.LimitByIP(perClientRate, time.Second)))
	}})
	compare(b, libs)
}

// BenchmarkInboundPaired: each per-client rate limiter against chi alone,
// timed in pairs (see comparePaired): on a shared machine chi's own rounds
// spread by half, several times what a limiter adds.
func BenchmarkInboundPaired(b *testing.B) {
	libs := append([]lib{{"chi", func(*testing.B) func() func() error { return serve(router()) }}}, breakwaterInbound...)
	libs = append(libs, lib{"httprate", func(*testing.B) func() func() error {
		//lint:ignore SA1019 LimitByIP is the comparison point users know; it is LimitBy(…, KeyByIP).
		return serve(router(httprate.LimitByIP(perClientRate, time.Second)))
	}})
	comparePaired(b, libs[0], libs[1:]...)
}
