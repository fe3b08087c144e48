// Command fleet runs three breakwater services on loopback, a client
// calling service A, whose handler calls service B, and plays one script
// twice: once with the services knowing nothing of each other, once with
// propagation on both hops (breakwater.WithPropagation): deadlines,
// attempt numbers, criticality and pushback travel with the requests. It
// prints, per phase of the script, what each run cost B and gave the
// client, side by side.
//
//	go run ./examples/fleet            # phases of 2 s, about 13 s in all
//	go run ./examples/fleet -phase 1s  # quicker
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
	"strconv"
	"sync"
	"time"

	"github.com/breakwater-go/breakwater"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// How B behaves in a phase.
type behaviour int

const (
	healthy behaviour = iota // answers after 5 ms of work
	slow                     // 20 ms of work: 4 workers serve 200 calls/s
	failing                  // answers 500 at once
)

// phase is one stretch of the script.
type phase struct {
	name string
	what string
	b    behaviour
	rate int // client calls per second
}

var script = []phase{
	{"healthy", "B answers in 5 ms", healthy, 100},
	{"outage", "B answers 500 to every request", failing, 100},
	{"overload", "B's work takes 20 ms: its 4 workers serve 200 calls/s of the 300 offered", slow, 300},
}

// The demo's fixed figures.
const (
	deadline = 500 * time.Millisecond // every client call's
	bWorkers = 4                      // B's Shedder slots
	bWait    = 2 * time.Second        // the longest B's queue holds a request
	aWorkers = 512                    // A's Shedder slots: A is not the bottleneck
	routeA   = "GET /a"
	routeB   = "GET /b"
)

// figures are what one phase of one run cost and gave.
type figures struct {
	calls, ok, critical, criticalOK int
	bRequests                       map[int]int // per client call
	busy, wasted                    time.Duration
	shed                            [3]int // by criticality: critical, default, sheddable
	late                            int    // sheds for the caller's deadline
	elsewhere, none                 int    // pushback sent, by A and B
	honoured                        int    // retries skipped for pushback, by the client and A
}

func critIndex(c breakwater.Criticality) int {
	switch {
	case c >= breakwater.Critical:
		return 0
	case c <= breakwater.Sheddable:
		return 2
	}
	return 1
}

// fleet is one run's services and what they saw.
type fleet struct {
	mu      sync.Mutex
	phase   int
	figs    []figures
	callOf  map[int]int // client call → its phase
	servers []*http.Server
	toA     *breakwater.Transport
	toB     *breakwater.Transport
	aURL    string
}

func (f *fleet) fig(i int) *figures { return &f.figs[i] }

// Observe counts the events of every component of the run.
func (f *fleet) Observe(_ context.Context, e breakwater.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fg := f.fig(f.phase)
	switch {
	case e.Kind == breakwater.EventReject && e.Mechanism == breakwater.MechShed && e.Route == routeB:
		fg.shed[critIndex(e.Criticality)]++
		if errors.Is(e.Err, breakwater.ErrCallerDeadline) {
			fg.late++
		}
	case e.Kind == breakwater.EventRequest && e.Reason == breakwater.ReasonPushback:
		if e.Category == breakwater.Rejected {
			fg.elsewhere++
		} else {
			fg.none++
		}
	case e.Kind == breakwater.EventRetrySkipped && e.Reason == breakwater.ReasonPushback:
		fg.honoured++
	}
}

// serve starts h on a loopback listener and returns its URL.
func (f *fleet) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	f.servers = append(f.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func (f *fleet) close() {
	f.toA.CloseIdleConnections()
	f.toB.CloseIdleConnections()
	for _, s := range f.servers {
		_ = s.Close()
	}
}

// base is a transport that keeps enough idle connections for the load.
func base() http.RoundTripper {
	return &http.Transport{Proxy: nil, MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second}
}

// newFleet starts B and A, and the client's Transport, with propagation
// on or off at both hops.
func newFleet(propagate bool) (*fleet, error) {
	f := &fleet{figs: make([]figures, len(script)), callOf: map[int]int{}}
	for i := range f.figs {
		f.figs[i].bRequests = map[int]int{}
	}
	trust, err := breakwater.CallerHeaders("127.0.0.1")
	if err != nil {
		return nil, err
	}
	shedder := func(workers int) (func(http.Handler) http.Handler, error) {
		bh, err := breakwater.NewBulkheads(workers, breakwater.WithMaxWait(bWait), breakwater.WithMaxQueue(1000))
		if err != nil {
			return nil, err
		}
		return breakwater.Shedder(bh, breakwater.WithObserver(f))
	}
	shedB, err := shedder(bWorkers)
	if err != nil {
		return nil, err
	}
	bURL, err := f.serve(route(routeB, trust(shedB(http.HandlerFunc(f.serveB)))))
	if err != nil {
		return nil, err
	}
	f.toB, err = breakwater.NewTransport(breakwater.WithBase(base()), breakwater.WithPropagation(propagate), breakwater.WithObserver(f))
	if err != nil {
		return nil, err
	}
	shedA, err := shedder(aWorkers)
	if err != nil {
		return nil, err
	}
	f.aURL, err = f.serve(route(routeA, trust(shedA(f.serveA(bURL+"/b")))))
	f.aURL += "/a"
	if err != nil {
		return nil, err
	}
	f.toA, err = breakwater.NewTransport(breakwater.WithBase(base()), breakwater.WithPropagation(propagate), breakwater.WithObserver(f))
	return f, err
}

// route serves h on pattern: the events of its middleware have the
// pattern as their route, which tells A's from B's.
func route(pattern string, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(pattern, h)
	return mux
}

// serveA calls B with the request's context and answers B's status.
func (f *fleet) serveA(bURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, bURL, nil)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		req.Header.Set("X-Call", r.Header.Get("X-Call"))
		req.Header.Set("X-Deadline", r.Header.Get("X-Deadline"))
		resp, err := f.toB.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
}

// serveB does the phase's work and counts it: the work is wasted when it
// ends after the client's deadline. Like much work (a computation, a
// query without the request's context), it does not stop when its
// request is given up.
func (f *fleet) serveB(w http.ResponseWriter, r *http.Request) {
	call, _ := strconv.Atoi(r.Header.Get("X-Call"))
	f.mu.Lock()
	ph, known := f.callOf[call]
	if known {
		f.fig(ph).bRequests[call]++
	}
	b := script[f.phase].b
	f.mu.Unlock()
	if b == failing {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	work := 5 * time.Millisecond
	if b == slow {
		work = 20 * time.Millisecond
	}
	began := time.Now()
	time.Sleep(work)
	end := time.Now()
	dl, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-Deadline"))
	f.mu.Lock()
	if known {
		fg := f.fig(ph)
		fg.busy += end.Sub(began)
		if err == nil && end.After(dl) {
			fg.wasted += end.Sub(began)
		}
	}
	f.mu.Unlock()
}

// play runs the script against f, each phase for phaseLen.
func (f *fleet) play(ctx context.Context, phaseLen time.Duration) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	call := 0
	for p, ph := range script {
		f.mu.Lock()
		f.phase = p
		f.mu.Unlock()
		every := time.Second / time.Duration(ph.rate)
		end := time.Now().Add(phaseLen)
		next := time.Now()
		for next.Before(end) {
			if err := sleepUntil(ctx, next); err != nil {
				return err
			}
			call++
			n := call
			f.mu.Lock()
			f.callOf[n] = p
			f.mu.Unlock()
			wg.Go(func() { f.call(ctx, p, n) })
			next = next.Add(every)
		}
	}
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call makes client call n of phase p: a fifth of the calls are critical,
// a fifth sheddable.
func (f *fleet) call(ctx context.Context, p, n int) {
	crit := breakwater.Criticality(0)
	switch n % 5 {
	case 0:
		crit = breakwater.Critical
	case 1:
		crit = breakwater.Sheddable
	}
	ctx, cancel := context.WithTimeout(breakwater.ContextWithCriticality(ctx, crit), deadline)
	defer cancel()
	dl, _ := ctx.Deadline()
	ok := false
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.aURL, nil)
	if err == nil {
		req.Header.Set("X-Call", strconv.Itoa(n))
		req.Header.Set("X-Deadline", dl.Format(time.RFC3339Nano))
		if resp, err := f.toA.RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fg := f.fig(p)
	fg.calls++
	if ok {
		fg.ok++
	}
	if crit == breakwater.Critical {
		fg.critical++
		if ok {
			fg.criticalOK++
		}
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(out)
	phaseLen := fs.Duration("phase", 2*time.Second, "how long each phase of the script lasts")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *phaseLen < 100*time.Millisecond {
		return fmt.Errorf("-phase must be at least 100ms, got %s", *phaseLen)
	}
	fmt.Fprintf(out, `breakwater fleet demo: client -> A -> B on loopback, every hop a breakwater Transport
(its defaults: 3 attempts, a retry budget, a breaker), A and B behind CallerHeaders and a
Shedder (B: %d workers, a queue that holds a request up to %s; A: %d workers).
Each client call has a %s deadline; a fifth are critical, a fifth sheddable.
The script runs twice: without propagation, the services know nothing of each other;
with WithPropagation(true) on both Transports, each request carries its deadline, its
attempt number and its criticality, and answers carry pushback.

`, bWorkers, bWait, aWorkers, deadline)
	var runs [2][]figures
	for i, propagate := range []bool{false, true} {
		fmt.Fprintf(out, "running the script %s propagation: %d phases of %s...\n", map[bool]string{false: "without", true: "with"}[propagate], len(script), *phaseLen)
		f, err := newFleet(propagate)
		if err != nil {
			return err
		}
		err = f.play(ctx, *phaseLen)
		f.close()
		if err != nil {
			return err
		}
		runs[i] = f.figs
	}
	fmt.Fprintln(out)
	for p, ph := range script {
		printPhase(out, p, ph, *phaseLen, runs[0][p], runs[1][p])
	}
	fmt.Fprint(out, `What the rows count, per phase, for the client calls started in it (a call started just
before a phase ends may meet the next one's B):
  requests B saw      B's requests carrying a call's number: its first attempts and every retry
                      of the client and of A (with propagation one tier retries, the one next to B)
  B's work ...        the share of B's worker time spent on requests answered after their
                      client's deadline (B's work, like much work, does not stop when its
                      request is given up)
  shed by B           B's Shedder's refusals, by the request's criticality (without propagation B
                      knows none: every request is default)
  ... for deadline    refused at once: B's queue would have served it after its caller's deadline
  pushback sent       Breakwater-Pushback on answers: elsewhere (a shed), none (a 5xx after the
                      service's own call failed)
  retries skipped     retries the client and A did not make because the server asked
`)
	return nil
}

// printPhase prints one phase's figures, without and with propagation.
func printPhase(out io.Writer, p int, ph phase, phaseLen time.Duration, off, on figures) {
	fmt.Fprintf(out, "phase %d/%d  %s: %s; %d calls/s for %s\n", p+1, len(script), ph.name, ph.what, ph.rate, phaseLen)
	fmt.Fprintf(out, "  %-44s %12s %12s\n", "", "without", "with")
	row := func(label string, f func(figures) string) {
		fmt.Fprintf(out, "  %-44s %12s %12s\n", label, f(off), f(on))
	}
	pct := func(n, of int) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(of))
	}
	row("client calls", func(f figures) string { return strconv.Itoa(f.calls) })
	row("requests B saw per client call", func(f figures) string {
		sum := 0
		for _, n := range f.bRequests {
			sum += n
		}
		if f.calls == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(sum)/float64(f.calls))
	})
	row("  at most, for one call", func(f figures) string {
		most := 0
		for _, n := range f.bRequests {
			most = max(most, n)
		}
		return strconv.Itoa(most)
	})
	row("client calls that succeeded", func(f figures) string { return pct(f.ok, f.calls) })
	row("  of the critical ones", func(f figures) string { return pct(f.criticalOK, f.critical) })
	row("B's work for callers who had given up", func(f figures) string {
		if f.busy <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*f.wasted.Seconds()/f.busy.Seconds())
	})
	row("shed by B: critical/default/sheddable", func(f figures) string {
		return fmt.Sprintf("%d/%d/%d", f.shed[0], f.shed[1], f.shed[2])
	})
	row("  refused at once for the caller's deadline", func(f figures) string { return strconv.Itoa(f.late) })
	row("pushback sent: elsewhere/none", func(f figures) string { return fmt.Sprintf("%d/%d", f.elsewhere, f.none) })
	row("retries skipped for pushback", func(f figures) string { return strconv.Itoa(f.honoured) })
	fmt.Fprintln(out)
}
