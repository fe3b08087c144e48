// Command client is breakwater's outbound demo: it starts a flaky upstream
// on loopback that goes through five phases (healthy, a 5xx storm, 429s with
// Retry-After, hangs, recovery), drives concurrent traffic through a
// breakwater.Transport, and explains what happened: the configuration
// first, then a line per interval whose counts add up, a line for every
// breaker transition with its reason, a summary, the insights, and an SVG
// timeline of the whole run. While it runs, a status page and Prometheus
// metrics are served on a loopback admin port; -keep keeps serving them
// after the run until Ctrl-C.
//
//	go run ./examples/client [-phase 3s] [-workers 8] [-svg timeline.svg] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/breakwater-go/breakwater/status"
	"github.com/breakwater-go/breakwater/timeline"
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
	name    string
	healthy bool
	step    breakwatertest.Step
}

var phases = []phase{
	{"healthy", true, breakwatertest.Step{Body: []byte("ok\n")}},
	{"5xx storm", false, breakwatertest.Step{Status: http.StatusBadGateway}},
	{"429 + Retry-After: 1", false, breakwatertest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}}},
	{"hangs", false, breakwatertest.Step{Hang: true}},
	{"recovered", true, breakwatertest.Step{Body: []byte("ok\n")}},
}

const legend = `What the columns count, per interval (a call is counted when it starts,
and again when it ends, in the interval where that happens):
  started   calls the workers began
  ended     calls that returned: ok + failed + open + busy + paused + other
  ok        the upstream's answer, a success
  failed    the upstream's failure, returned after the retries the plan allows
  open      rejected at once, the upstream not called: the breaker was open
  busy      rejected at once: the breaker was half-open, its probe slots taken
  paused    rejected: the upstream asked to pause (429) longer than the call could wait
  other     rejected by another limit, or abandoned when the demo stops
  retries   attempts repeated after a failure or a 429
  budget    retries the retry budget refused (that call returned its failure)
  upstream  requests the upstream saw: first attempts and retries
  breaker   its state when the interval ended; a line marks every change
  note      what the row shows, in words (a row of zeros says why nothing moved)`

// The library's defaults that the demo scales to its phases; TestDefaults
// checks them against what a default Transport's Explain says.
const (
	defaultCallTimeout    = 30 * time.Second
	defaultAttemptTimeout = 10 * time.Second
	defaultOpenTimeout    = 100 * time.Millisecond
	defaultMaxOpenTimeout = time.Minute
)

// scaled returns the demo's timeouts for phases of phaseLen: the
// defaults suit outages of minutes, the demo's phases last seconds.
func scaled(phaseLen time.Duration) (call, attempt, open, maxOpen time.Duration) {
	return phaseLen, phaseLen / 4, phaseLen / 3, phaseLen
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	phaseLen := fs.Duration("phase", 3*time.Second, "how long each upstream phase lasts")
	workers := fs.Int("workers", 8, "concurrent callers")
	svgPath := fs.String("svg", filepath.Join(os.TempDir(), "breakwater-client-timeline.svg"), "where to write the timeline")
	keep := fs.Bool("keep", false, "keep serving the status page and metrics after the run, until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *phaseLen <= 0 || *workers <= 0 {
		return fmt.Errorf("-phase and -workers must be positive")
	}
	interval := max(100*time.Millisecond, *phaseLen/3)

	var (
		mu      sync.Mutex // serializes the output
		current int
	)
	printf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
	}
	rec := timeline.New(interval)
	upstream := breakwatertest.NewUpstreamFunc(nil, func(int, *http.Request) breakwatertest.Step {
		mu.Lock()
		defer mu.Unlock()
		return phases[current].step
	})
	defer upstream.Close()

	reg := prometheus.NewRegistry()
	metrics, err := prom.New(reg)
	if err != nil {
		return err
	}
	// The defaults, with timeouts and open durations scaled to a demo whose
	// phases last seconds rather than minutes.
	callTimeout, attemptTimeout, openTimeout, maxOpenTimeout := scaled(*phaseLen)
	tr, err := breakwater.NewTransport(
		breakwater.WithCallTimeout(callTimeout),
		breakwater.WithAttemptTimeout(attemptTimeout),
		breakwater.WithOpenTimeout(openTimeout, maxOpenTimeout),
		breakwater.WithObserver(breakwater.ObserverFunc(func(_ context.Context, e breakwater.Event) {
			if e.Kind == breakwater.EventTransition {
				printf("      ▸ %5s  %s\n", fmtSeconds(rec.Elapsed()), timeline.Describe(*e.Transition))
			}
		})),
		breakwater.WithObserver(rec),
		breakwater.WithObserver(metrics),
		breakwater.WithInsights(true),
	)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()

	adminURL, stopAdmin, err := serveAdmin(reg, tr)
	if err != nil {
		return err
	}
	defer stopAdmin()

	runFor := time.Duration(len(phases)) * *phaseLen
	fmt.Fprintf(out, "upstream %s, %d workers, %d phases of %s\n", upstream.URL, *workers, len(phases), fmtDuration(*phaseLen))
	fmt.Fprintf(out, "scaled to phases of %s (the defaults suit outages of minutes): call timeout %s (default %s), attempt timeout %s (default %s),\n",
		fmtDuration(*phaseLen), fmtDuration(callTimeout), fmtDuration(defaultCallTimeout), fmtDuration(attemptTimeout), fmtDuration(defaultAttemptTimeout))
	fmt.Fprintf(out, "breaker open %s at first, up to %s (default %s, then 1/32 of the outage's age, up to %s), so that one phase shows hangs timing out and the breaker probing\n",
		fmtDuration(openTimeout), fmtDuration(maxOpenTimeout), fmtDuration(defaultOpenTimeout), fmtDuration(defaultMaxOpenTimeout))
	until := "until the run ends, in about " + fmtDuration(runFor) + " (-keep: until Ctrl-C after it)"
	if *keep {
		until = "until Ctrl-C after the run"
	}
	fmt.Fprintf(out, "status page %s/debug/breakwater/, metrics %s/metrics, served %s\n\n", adminURL, adminURL, until)
	fmt.Fprintf(out, "The transport, as Explain describes it:\n\n%s\n%s\n\n", tr.Explain(), legend)
	const row = "%6s  %-21s %7v %6v │ %5v %6v %5v %5v %6v %5v │ %7v %6v %8v  %-9s  %s\n"
	fmt.Fprintf(out, row, "t", "phase", "started", "ended", "ok", "failed", "open", "busy", "paused", "other", "retries", "budget", "upstream", "breaker", "note")

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, runFor)
	defer cancel()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() { work(ctx, client, upstream.URL) })
	}

	rec.Phase(0, phases[0].name, phases[0].healthy)
	printRow := func(tl timeline.Timeline, i int, live bool) {
		iv := tl.Intervals[i]
		name := phaseAt(tl, iv.Start+interval/2)
		if iv.Start >= runFor {
			name = "(run over)"
		}
		st := rowState{inFlight: inFlight(tl, i), pausedUntil: pausedUntil(tl, i), over: iv.Start+interval > runFor}
		if live {
			st.pausedUntil = max(st.pausedUntil, livePause(tr, rec.Elapsed()))
		}
		printf(row, fmtSeconds(iv.Start+interval), name, iv.Started, iv.Ended,
			iv.Succeeded, iv.Failed, iv.Rejected[timeline.BreakerOpen], iv.Rejected[timeline.HalfOpenBusy], iv.Rejected[timeline.Paused],
			iv.Rejected[timeline.RateLimited]+iv.Rejected[timeline.Concurrency]+iv.Rejected[timeline.Other]+iv.Canceled,
			iv.Retries, iv.BudgetRefused, iv.Attempts, stateAt(tl, iv.Start+interval), note(iv, st))
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	printed := 0
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		elapsed := rec.Elapsed()
		if p := min(int(elapsed / *phaseLen), len(phases)-1); p != current && !done {
			mu.Lock()
			current = p
			mu.Unlock()
			rec.Phase(elapsed, phases[p].name, phases[p].healthy)
		}
		tl := rec.Timeline()
		for ; printed < len(tl.Intervals) && tl.Intervals[printed].Start+interval <= elapsed; printed++ {
			printRow(tl, printed, true)
		}
	}
	wg.Wait()
	tl := rec.Timeline()
	for ; printed < len(tl.Intervals); printed++ {
		printRow(tl, printed, false)
	}
	if err := summary(out, tl, tr.Snapshot().Insights); err != nil {
		return err
	}
	if err := printTransitions(out, reg); err != nil {
		return err
	}
	if err := writeSVG(out, *svgPath, tl); err != nil {
		return err
	}
	if *keep && parent.Err() == nil {
		fmt.Fprintf(out, "\nstill serving the status page %s/debug/breakwater/ and metrics %s/metrics: press Ctrl-C to stop\n", adminURL, adminURL)
		<-parent.Done()
	}
	return nil
}

// rowState is what a row's note needs beyond the interval's counts.
type rowState struct {
	inFlight    int           // calls started and not ended when the interval ended
	pausedUntil time.Duration // the end of the latest pause that overlaps the interval; 0: none
	over        bool          // the run ends before the interval does: no new calls after that
}

// note says what a row shows, so that no row of counts goes unexplained.
func note(iv timeline.Interval, st rowState) string {
	paused := st.pausedUntil > iv.Start
	if iv.Started == 0 && iv.Ended == 0 {
		switch {
		case st.over && st.inFlight == 0:
			return "run over: nothing left in flight"
		case st.over:
			return fmt.Sprintf("run over: %d calls still in flight", st.inFlight)
		case paused && st.inFlight > 0:
			sent := "0 sent"
			if iv.Attempts > 0 {
				sent = fmt.Sprintf("only %d sent, to probe", iv.Attempts)
			}
			return fmt.Sprintf("%s: the host is paused until %s (the upstream's Retry-After); %d calls wait at the pause gate", sent, fmtSeconds(st.pausedUntil), st.inFlight)
		case st.inFlight > 0 && iv.Attempts > 0:
			return fmt.Sprintf("no call ended: all %d in flight wait for answers (%d attempts sent)", st.inFlight, iv.Attempts)
		case st.inFlight > 0:
			return fmt.Sprintf("0 sent: all %d calls in flight are waiting, for an answer or a probe's", st.inFlight)
		}
		return "no calls"
	}
	var parts []string
	add := func(n int, format string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf(format, n))
		}
	}
	if iv.Ended > 0 && iv.Succeeded == iv.Ended {
		parts = append(parts, "all answered")
	} else {
		add(iv.Succeeded, "%d answered")
	}
	add(iv.Failed, "%d failed after retries")
	add(iv.Rejected[timeline.BreakerOpen], "%d refused, breaker open")
	add(iv.Rejected[timeline.HalfOpenBusy], "%d refused, probes busy")
	if n := iv.Rejected[timeline.Paused]; n > 0 && paused {
		parts = append(parts, fmt.Sprintf("%d refused: the host is paused until %s, longer than they could wait", n, fmtSeconds(st.pausedUntil)))
	} else {
		add(n, "%d refused: the host is paused longer than they could wait")
	}
	add(iv.RejectedTotal()-iv.Rejected[timeline.BreakerOpen]-iv.Rejected[timeline.HalfOpenBusy]-iv.Rejected[timeline.Paused], "%d refused by another limit")
	add(iv.Canceled, "%d abandoned at the stop")
	add(iv.BudgetRefused, "the retry budget refused %d")
	if iv.Ended == 0 {
		parts = append(parts, fmt.Sprintf("none ended: %d calls in flight", st.inFlight))
	}
	if st.over {
		parts = append(parts, "the run ends: no new calls")
	}
	return strings.Join(parts, "; ")
}

// inFlight counts the calls started and not ended by the end of interval i.
func inFlight(tl timeline.Timeline, i int) int {
	n := 0
	for _, iv := range tl.Intervals[:i+1] {
		n += iv.Started - iv.Ended
	}
	return n
}

// pausedUntil is the end of the latest recorded pause that overlaps
// interval i, or 0. Pauses are recorded when a held call leaves the gate,
// so a live row also asks the transport (livePause).
func pausedUntil(tl timeline.Timeline, i int) time.Duration {
	start := tl.Intervals[i].Start
	var until time.Duration
	for _, p := range tl.Pauses {
		if p.From < start+tl.Interval && p.To > start {
			until = max(until, p.To)
		}
	}
	return until
}

// livePause is when the transport's current pause ends, on the recorder's
// clock (now is its elapsed time), or 0 when nothing is paused.
func livePause(tr *breakwater.Transport, now time.Duration) time.Duration {
	var until time.Duration
	for _, p := range tr.Snapshot().Pauses {
		if p.Paused {
			until = max(until, now+p.Remaining)
		}
	}
	return until
}

// serveAdmin serves the status page and the metrics on a loopback port
// until stop is called.
func serveAdmin(reg *prometheus.Registry, tr *breakwater.Transport) (url string, stop func(), err error) {
	page, err := status.New(status.Source("upstream", tr), status.WithTitle("breakwater client demo"))
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/breakwater/", http.StripPrefix("/debug/breakwater", page))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// summary prints the totals, shows that they add up, and the insights.
func summary(out io.Writer, tl timeline.Timeline, found []breakwater.Insight) error {
	var total timeline.Interval
	total.Rejected = map[string]int{}
	for _, iv := range tl.Intervals {
		total.Started += iv.Started
		total.Ended += iv.Ended
		total.Succeeded += iv.Succeeded
		total.Failed += iv.Failed
		total.Canceled += iv.Canceled
		total.Retries += iv.Retries
		total.BudgetRefused += iv.BudgetRefused
		total.Attempts += iv.Attempts
		for k, v := range iv.Rejected {
			total.Rejected[k] += v
		}
	}
	fmt.Fprintf(out, "\nsummary over %s\n", fmtSeconds(tl.End))
	fmt.Fprintf(out, "  calls started %d, ended %d\n", total.Started, total.Ended)
	fmt.Fprintf(out, "  ended %d = ok %d + failed %d + rejected %d + abandoned when the demo stopped %d\n",
		total.Ended, total.Succeeded, total.Failed, total.RejectedTotal(), total.Canceled)
	fmt.Fprintf(out, "  rejected %d = breaker open %d + half-open busy %d + paused %d + other limits %d\n", total.RejectedTotal(),
		total.Rejected[timeline.BreakerOpen], total.Rejected[timeline.HalfOpenBusy], total.Rejected[timeline.Paused],
		total.Rejected[timeline.RateLimited]+total.Rejected[timeline.Concurrency]+total.Rejected[timeline.Other])
	fmt.Fprintf(out, "  retries %d, refused by the retry budget %d\n", total.Retries, total.BudgetRefused)
	fmt.Fprintf(out, "  requests the upstream saw %d (%.2f per call started)\n", total.Attempts, float64(total.Attempts)/float64(max(1, total.Started)))
	fmt.Fprintln(out, "\ninsights (breakwater.WithInsights, also on the status page)")
	if len(found) == 0 {
		fmt.Fprintln(out, "  none")
	}
	for _, f := range found {
		fmt.Fprintf(out, "  - %s\n", f.Message)
	}
	return nil
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

func writeSVG(out io.Writer, path string, tl timeline.Timeline) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := timeline.WriteSVG(f, tl, "breakwater client demo: five phases of one upstream"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ntimeline of the run (open it in a browser): %s\n", path)
	return nil
}

// phaseAt names the upstream phase at t.
func phaseAt(tl timeline.Timeline, t time.Duration) string {
	name := ""
	for _, p := range tl.Phases {
		if p.At <= t {
			name = p.Name
		}
	}
	return name
}

// stateAt is the breaker's state at t.
func stateAt(tl timeline.Timeline, t time.Duration) breakwater.State {
	s := breakwater.StateClosed
	for _, sp := range tl.States {
		if sp.From < t {
			s = sp.State
		}
	}
	return s
}

// fmtDuration prints d rounded to the millisecond: 750ms, 3s, 1.5s, 60s.
func fmtDuration(d time.Duration) string {
	d = d.Round(time.Millisecond)
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func fmtSeconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// work makes calls until ctx ends, pausing briefly between them.
func work(ctx context.Context, client *http.Client, url string) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
