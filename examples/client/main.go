// Command client is breakwater's outbound demo: it starts a flaky upstream
// on loopback that goes through five phases (healthy, a 5xx storm, 429s with
// Retry-After, hangs, recovery), drives concurrent traffic through a default
// breakwater.Transport, and prints what happened each second and in total.
//
//	go run ./examples/client [-phase 3s] [-workers 8]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

// phase is one stretch of the upstream's behaviour.
type phase struct {
	name string
	step breakwatertest.Step
}

var phases = []phase{
	{"healthy", breakwatertest.Step{Body: []byte("ok\n")}},
	{"5xx storm", breakwatertest.Step{Status: http.StatusBadGateway}},
	{"429 + Retry-After: 1", breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}},
	{"hangs", breakwatertest.Step{Hang: true}},
	{"recovered", breakwatertest.Step{Body: []byte("ok\n")}},
}

// counts are what the demo tallies, per second and in total.
type counts struct {
	sent, ok, failed, rejected, retried, upstream atomic.Int64
}

func (c *counts) snapshot() [6]int64 {
	return [6]int64{c.sent.Load(), c.ok.Load(), c.failed.Load(), c.rejected.Load(), c.retried.Load(), c.upstream.Load()}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	phaseLen := fs.Duration("phase", 3*time.Second, "how long each upstream phase lasts")
	workers := fs.Int("workers", 8, "concurrent callers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *phaseLen <= 0 || *workers <= 0 {
		return fmt.Errorf("-phase and -workers must be positive")
	}

	var current atomic.Int32
	var total counts
	upstream := breakwatertest.NewUpstreamFunc(nil, func(int, *http.Request) breakwatertest.Step {
		total.upstream.Add(1)
		return phases[current.Load()].step
	})
	defer upstream.Close()

	tally := breakwater.ObserverFunc(func(_ context.Context, e breakwater.Event) {
		if e.Kind == breakwater.EventRetry {
			total.retried.Add(1)
		}
	})
	// Prometheus metrics, served on a loopback port while the demo runs.
	reg := prometheus.NewRegistry()
	metrics, err := prom.New(reg)
	if err != nil {
		return err
	}
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	metricsSrv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
	go metricsSrv.Serve(metricsLn)
	defer metricsSrv.Close()
	// The defaults, with timeouts and open durations scaled to a demo whose
	// phases last seconds rather than minutes.
	tr, err := breakwater.NewTransport(
		breakwater.WithCallTimeout(*phaseLen),
		breakwater.WithAttemptTimeout(*phaseLen/4),
		breakwater.WithBreaker(breakwater.WithOpenTimeout(*phaseLen/3, *phaseLen)),
		breakwater.WithObserver(tally),
		breakwater.WithObserver(metrics),
	)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	key := breakwater.HostKey(&http.Request{URL: mustURL(upstream.URL)})

	fmt.Fprintf(out, "upstream %s, %d workers, %d phases of %s; metrics on http://%s/metrics\n\n", upstream.URL, *workers, len(phases), *phaseLen, metricsLn.Addr())
	const row = "%4s  %-22s %6v %6v %7v %9v %8v %9v  %s\n"
	fmt.Fprintf(out, row, "t", "phase", "sent", "ok", "failed", "rejected", "retried", "upstream", "breaker")

	ctx, cancel := context.WithTimeout(ctx, time.Duration(len(phases))**phaseLen)
	defer cancel()
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() { work(ctx, client, upstream.URL, &total) })
	}

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev := total.snapshot()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		elapsed := time.Since(start)
		cur := total.snapshot()
		if done && cur == prev {
			break
		}
		fmt.Fprintf(out, row, elapsed.Round(time.Second), phases[current.Load()].name,
			cur[0]-prev[0], cur[1]-prev[1], cur[2]-prev[2], cur[3]-prev[3], cur[4]-prev[4], cur[5]-prev[5], tr.Breakers().State(key))
		prev = cur
		current.Store(int32(min(int(elapsed / *phaseLen), len(phases)-1)))
	}
	wg.Wait()

	c := total.snapshot()
	fmt.Fprintf(out, "\nsummary over %s\n", time.Since(start).Round(100*time.Millisecond))
	sw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(sw, "calls sent\t%d\n", c[0])
	fmt.Fprintf(sw, "succeeded\t%d\n", c[1])
	fmt.Fprintf(sw, "failed (upstream error returned)\t%d\n", c[2])
	fmt.Fprintf(sw, "rejected fast (breaker, pause)\t%d\n", c[3])
	fmt.Fprintf(sw, "retries\t%d\n", c[4])
	fmt.Fprintf(sw, "requests the upstream saw\t%d (%.2f per call)\n", c[5], float64(c[5])/float64(max(1, c[0])))
	if err := sw.Flush(); err != nil {
		return err
	}
	return printTransitions(out, reg)
}

// printTransitions prints the breaker transitions the Prometheus collector
// counted.
func printTransitions(out io.Writer, reg *prometheus.Registry) error {
	families, err := reg.Gather()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nbreaker transitions (breakwater_breaker_transitions_total)")
	for _, f := range families {
		if f.GetName() != prom.MetricBreakerTransitions {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			fmt.Fprintf(out, "  %-9s -> %-9s %-17s %3.0f\n", labels["from"], labels["to"], labels["reason"], m.GetCounter().GetValue())
		}
	}
	return nil
}

// work makes calls until ctx ends, pausing briefly between them.
func work(ctx context.Context, client *http.Client, url string, c *counts) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		c.sent.Add(1)
		resp, err := client.Do(req)
		switch {
		case err != nil && ctx.Err() != nil:
			c.sent.Add(-1) // the demo is over; not a result
			return
		case err != nil && breakwater.Classify(nil, err).Category == breakwater.Rejected:
			c.rejected.Add(1)
		case err != nil:
			c.failed.Add(1)
		default:
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				c.ok.Add(1)
			} else {
				c.failed.Add(1)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
