// Command server is breakwater's inbound demo: a chi router whose route
// groups each show one middleware — a per-client rate limit, load shedding,
// a handler timeout and a route breaker — with a snapshot endpoint.
//
//	go run ./examples/server [-addr 127.0.0.1:8080]
//	go run ./examples/server -selftest
//
// With -selftest it listens on a free loopback port, sends itself a few
// requests that make each middleware react, prints what happened and exits
// (with status 1 if anything did not behave as described).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/breakwater-go/breakwater/status"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	selftest := fs.Bool("selftest", false, "listen on a free loopback port, exercise every middleware, print the results and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *selftest {
		*addr = "127.0.0.1:0" // -addr does not apply
	}

	// Interactive runs log each kind of rejection (at most every 10 s per
	// client and mechanism); the self test prints its own report.
	var obs bw.Observer
	if !*selftest {
		obs = bw.LogObserver(slog.New(slog.NewTextHandler(out, nil)), 10*time.Second)
	}
	// Prometheus metrics of every middleware, served on /metrics.
	reg := prometheus.NewRegistry()
	collector, err := prom.New(reg)
	if err != nil {
		return err
	}
	a, err := newApp([]bw.Observer{obs, collector}, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	serverLog := &lockedBuffer{}
	// The Shedder holds a slot while its handler runs, and a handler runs
	// at its client's pace while it reads the body or writes the answer:
	// without ReadTimeout and WriteTimeout, as many clients as the limit
	// trickling their bodies, or not reading their answers, would hold
	// every slot and have every other request shed (HandlerTimeout cannot
	// end a blocked read or write). ReadTimeout bounds headers and body;
	// WriteTimeout runs from the end of the headers, so it must exceed the
	// longest handler (/work: 10 s of work after 1 s in the queue).
	srv := &http.Server{
		Handler:           a.router,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      15 * time.Second,
		ErrorLog:          log.New(io.MultiWriter(serverLog, os.Stderr), "http: ", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "breakwater inbound demo on %s\n\n", base)
	printRoutes(out)

	if *selftest {
		err = selfTest(ctx, a, base, out)
	} else {
		<-ctx.Done()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil && err == nil {
		err = serr
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if strings.Contains(serverLog.String(), "superfluous") && err == nil {
		err = errors.New("the server logged a superfluous WriteHeader")
	}
	return err
}

// The demo's limits, small enough to hit by hand.
const (
	rateBurst      = 5 // requests a client may make at once
	rateRefill     = 1 // requests per second a client gets back
	shedLimit      = 2 // requests in /work at once
	shedQueue      = 2 // more that may wait for a slot
	shedWait       = time.Second
	handlerTimeout = 250 * time.Millisecond
	breakerAfter   = 3 // consecutive failures that open an /orders route
	breakerOpen    = 5 * time.Second
)

var routes = [][2]string{
	{"GET  /api/items/{id}", fmt.Sprintf("per-client rate limit: a burst of %d, %d more each second; 429 + Retry-After past it; RateLimit fields on every response (loopback is a trusted proxy: X-Forwarded-For names the client)", rateBurst, rateRefill)},
	{"GET  /work?ms=800", fmt.Sprintf("load shedding: %d at once, %d more wait up to %s; the rest 503 + Retry-After 1-2 s", shedLimit, shedQueue, shedWait)},
	{"GET  /reports/slow", fmt.Sprintf("handler timeout %s: a handler that wrote nothing by then gets 503", handlerTimeout)},
	{"GET  /reports/stream", fmt.Sprintf("handler timeout %s: a handler that started its response keeps it", handlerTimeout)},
	{"GET  /orders/{id}", fmt.Sprintf("route breaker: %d failures in a row open the route for %s; 503 + a Retry-After that counts down", breakerAfter, breakerOpen)},
	{"POST /admin/outage?on=1", "make /orders fail (on=0 to recover)"},
	{"GET  /debug/breakwater/", "the status page of the route breakers, rate limit buckets and the bulkhead (JSON at /debug/breakwater/state)"},
	{"GET  /metrics", "Prometheus metrics: requests by route pattern, rejections by mechanism, breaker transitions"},
}

func printRoutes(out io.Writer) {
	for _, r := range routes {
		fmt.Fprintf(out, "  %-24s %s\n", r[0], r[1])
	}
	fmt.Fprintln(out)
}

// app is the demo's router and the state its middleware share.
type app struct {
	router    http.Handler
	buckets   *bw.RateLimiters
	breakers  *bw.Breakers
	bulkheads *bw.Bulkheads
	outage    atomic.Bool
	working   gauge // requests inside /work's handler
}

func newApp(observers []bw.Observer, metrics http.Handler) (*app, error) {
	a := &app{}
	var observe []bw.Option
	for _, o := range observers {
		if o != nil {
			observe = append(observe, bw.WithObserver(o))
		}
	}
	// Rate limit per client. Behind a reverse proxy the client is read from
	// X-Forwarded-For, trusted only on connections from the proxy (here,
	// loopback).
	clientKey, err := bw.ForwardedForKey("X-Forwarded-For", "127.0.0.0/8", "::1")
	if err != nil {
		return nil, err
	}
	if a.buckets, err = bw.NewRateLimiters(rateRefill, rateBurst, bw.WithKeyLimits(100_000, 10*time.Minute)); err != nil {
		return nil, err
	}
	limit, err := bw.ClientRateLimit(a.buckets, clientKey, observe...)
	if err != nil {
		return nil, err
	}

	// Load shedding on a bulkhead with a short queue.
	if a.bulkheads, err = bw.NewBulkheads(shedLimit, bw.WithMaxQueue(shedQueue), bw.WithMaxWait(shedWait)); err != nil {
		return nil, err
	}
	shedder, err := bw.Shedder(a.bulkheads, observe...)
	if err != nil {
		return nil, err
	}

	timeout, err := bw.HandlerTimeout(handlerTimeout, observe...)
	if err != nil {
		return nil, err
	}

	if a.breakers, err = bw.NewBreakers(append([]bw.Option{bw.WithPolicy(bw.Consecutive(breakerAfter)), bw.WithOpenTimeout(breakerOpen, time.Minute), bw.WithOpenJitter(0)}, observe...)...); err != nil {
		return nil, err
	}
	breaker, err := bw.RouteBreaker(a.breakers, observe...)
	if err != nil {
		return nil, err
	}

	// The status page of the state the middleware share; mount it on an
	// admin listener in a real server.
	page, err := status.New(status.Source("api rate limit", a.buckets), status.Source("work shedder", a.bulkheads), status.Source("route breakers", a.breakers))
	if err != nil {
		return nil, err
	}

	r := chi.NewRouter()
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range routes {
			fmt.Fprintf(w, "%-24s %s\n", rt[0], rt[1])
		}
	})
	r.Route("/api", func(r chi.Router) {
		r.Use(limit)
		r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"id": chi.URLParam(r, "id")})
		})
	})
	r.With(shedder).Get("/work", func(w http.ResponseWriter, r *http.Request) {
		a.working.enter()
		defer a.working.leave()
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(min(max(ms, 0), 10_000)) * time.Millisecond):
			fmt.Fprintln(w, "worked", ms, "ms")
		case <-r.Context().Done():
		}
	})
	r.Group(func(r chi.Router) {
		r.Use(timeout)
		r.Get("/reports/slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * time.Second):
				fmt.Fprintln(w, "report")
			case <-r.Context().Done(): // out of time: give up without writing
			}
		})
		r.Get("/reports/stream", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "first rows")
			http.NewResponseController(w).Flush()
			select {
			case <-time.After(2 * time.Second):
				fmt.Fprintln(w, "more rows")
			case <-r.Context().Done(): // the response has started: it stays a 200
			}
		})
	})
	r.Route("/orders", func(r chi.Router) {
		r.Use(breaker)
		r.Get("/{id}", func(w http.ResponseWriter, r *http.Request) {
			if a.outage.Load() {
				http.Error(w, "orders database unavailable", http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(w, "order %s\n", chi.URLParam(r, "id"))
		})
	})
	r.Post("/admin/outage", func(w http.ResponseWriter, r *http.Request) {
		a.outage.Store(r.URL.Query().Get("on") == "1")
		fmt.Fprintln(w, "outage:", a.outage.Load())
	})
	r.Handle("/debug/breakwater/*", http.StripPrefix("/debug/breakwater", page))
	r.Handle("/metrics", metrics)
	a.router = r
	return a, nil
}

// gauge counts requests in a handler and the most at once.
type gauge struct{ now, peak atomic.Int32 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
