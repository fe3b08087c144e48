// Package quality measures how outbound stacks behave against a failing
// upstream: how much load they add, how fast they fail, whether they honour
// Retry-After and what they leave behind. These are not speed figures; they
// run on real loopback servers and wall-clock time.
package quality

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/bench/internal/stacks"
)

// Mode is how a scenario's upstream behaves.
type Mode string

const (
	// Down answers every request 500.
	Down Mode = "down"
	// Hang never answers; a request ends when the client gives up.
	Hang Mode = "hang"
	// Throttle answers 429 with Retry-After for a while, then 200.
	Throttle Mode = "throttle"
)

// Config is one run of the harness.
type Config struct {
	Calls   int // calls per library and scenario
	Workers int // goroutines making them
	// Options are given to every stack: per-attempt timeout and backoff.
	Options stacks.Options
	// RetryAfter is the hint a throttling upstream sends (whole seconds),
	// and Throttling how long it throttles after its first request.
	RetryAfter, Throttling time.Duration
	// FastFail is the latency under which a failed call failed fast.
	FastFail time.Duration
	// Settle bounds the wait for goroutines and connections to go away
	// after the calls, idle connections closed.
	Settle time.Duration
	// Deadline aborts a scenario that runs longer (a stuck library).
	Deadline time.Duration
	// Procs is how many libraries ran at once, each in its own process
	// (set by cmd/quality; 1 when they ran one after the other).
	Procs int
}

// DefaultConfig is the configuration run.sh uses: 200 calls from 8
// goroutines, 1 s per attempt, backoff 100 ms–5 s, Retry-After 1 s.
func DefaultConfig() Config {
	return Config{
		Calls:      200,
		Workers:    8,
		Options:    stacks.Options{AttemptTimeout: time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: 5 * time.Second},
		RetryAfter: time.Second,
		Throttling: 2 * time.Second,
		FastFail:   10 * time.Millisecond,
		Settle:     2 * time.Second,
		Deadline:   45 * time.Second,
		Procs:      1,
	}
}

// Scenario is one upstream behaviour.
type Scenario struct {
	Mode  Mode
	Title string
}

// Scenarios lists the scenarios of a run with cfg.
func Scenarios(cfg Config) []Scenario {
	return []Scenario{
		{Down, "Hard-down upstream: every request answered 500"},
		{Hang, fmt.Sprintf("Hanging upstream: no request is ever answered (%s attempt timeout everywhere)", cfg.Options.AttemptTimeout)},
		{Throttle, fmt.Sprintf("Throttling upstream: 429 with Retry-After: %d for the first %s, then 200", int(cfg.RetryAfter/time.Second), cfg.Throttling)},
	}
}

// A Builder builds a fresh stack over base; id is unique per call.
type Builder struct {
	Name  string
	Build func(base http.RoundTripper, o stacks.Options, id string) (stacks.Stack, error)
}

// Builders are the stacks the harness compares, breakwater first.
func Builders() []Builder {
	return []Builder{
		{"breakwater", func(b http.RoundTripper, o stacks.Options, _ string) (stacks.Stack, error) {
			return stacks.Breakwater(b, o)
		}},
		{"failsafe-go", func(b http.RoundTripper, o stacks.Options, _ string) (stacks.Stack, error) {
			return stacks.Failsafe(b, o), nil
		}},
		{"go-retryablehttp+gobreaker", func(b http.RoundTripper, o stacks.Options, _ string) (stacks.Stack, error) {
			return stacks.Retryablehttp(b, o, true), nil
		}},
		{"backoff+hystrix-go", func(b http.RoundTripper, o stacks.Options, id string) (stacks.Stack, error) {
			return stacks.BackoffHystrix(b, o, "quality-"+id), nil
		}},
		{"go-resiliency", func(b http.RoundTripper, o stacks.Options, _ string) (stacks.Stack, error) {
			return stacks.Resiliency(b, o), nil
		}},
	}
}

// Result is what one stack did in one scenario.
type Result struct {
	Library  string
	Scenario Mode
	Calls    int
	// Requests is the number of requests the upstream received.
	Requests int
	// Succeeded calls got a 2xx; FailedFast calls failed in under
	// Config.FastFail.
	Succeeded, FailedFast int
	P50, P99              time.Duration
	// EarlyRetries counts requests of a call that arrived before the
	// Retry-After its previous attempt was given; EarlyAny counts requests
	// of any call that arrived while a Retry-After given to another call
	// was running (after a 10 ms grace for requests already in flight).
	EarlyRetries, EarlyAny int
	// Goroutines and Conns are what was left once the calls had returned,
	// idle connections were closed and Config.Settle passed (server side
	// included); LeftBy names the creators of the goroutines left.
	Goroutines, Conns int
	LeftBy            map[string]int `json:",omitempty"`
	Wall              time.Duration
	Aborted           bool `json:",omitempty"`
}

// Run measures every builder in every scenario, one at a time, writing
// progress lines to log.
func Run(ctx context.Context, cfg Config, builders []Builder, log io.Writer) (Report, error) {
	rep := Report{Config: cfg}
	for i, b := range builders {
		for j, sc := range Scenarios(cfg) {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			r, st, err := runOne(cfg, b, sc.Mode, fmt.Sprintf("%d-%d", i, j))
			if err != nil {
				return rep, fmt.Errorf("%s/%s: %w", b.Name, sc.Mode, err)
			}
			if j == 0 {
				rep.Stacks = append(rep.Stacks, StackConfig{b.Name, st.Config})
			}
			fmt.Fprintf(log, "quality: %-28s %-8s %4d requests  %3d ok  %3d fast  p50 %-8s p99 %-8s early %d/%d  left %d goroutines %d conns  %s\n",
				r.Library, r.Scenario, r.Requests, r.Succeeded, r.FailedFast, round(r.P50), round(r.P99),
				r.EarlyRetries, r.EarlyAny, r.Goroutines, r.Conns, round(r.Wall))
			rep.Results = append(rep.Results, r)
		}
	}
	return rep, nil
}

func runOne(cfg Config, b Builder, mode Mode, id string) (Result, stacks.Stack, error) {
	u := newUpstream(mode, cfg.RetryAfter, cfg.Throttling)
	defer u.close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	st, err := b.Build(base, cfg.Options, id)
	if err != nil {
		return Result{}, st, err
	}
	st.Name = b.Name
	client := &http.Client{Transport: st}

	// Let the previous run's goroutines finish: wait for the count to hold
	// still for 50 ms.
	last := -1
	settle(2*time.Second, func() bool {
		n := runtime.NumGoroutine()
		defer func() { last = n }()
		return n == last
	})
	before, beforeBy := goroutines()

	var aborted atomic.Bool
	watchdog := time.AfterFunc(cfg.Deadline, func() { aborted.Store(true); u.close() })
	lat := make([]time.Duration, cfg.Calls)
	ok := make([]bool, cfg.Calls)
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for n := range jobs {
				t0 := time.Now()
				ok[n] = call(client, u.srv.URL, n)
				lat[n] = time.Since(t0)
			}
		})
	}
	for n := range cfg.Calls {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(start)
	watchdog.Stop()

	r := Result{Library: b.Name, Scenario: mode, Calls: cfg.Calls, Wall: wall, Aborted: aborted.Load()}
	r.Requests = int(u.requests.Load())
	for n := range cfg.Calls {
		switch {
		case ok[n]:
			r.Succeeded++
		case lat[n] < cfg.FastFail:
			r.FailedFast++
		}
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	r.P50, r.P99 = quantile(sorted, 0.50), quantile(sorted, 0.99)
	u.mu.Lock()
	r.EarlyRetries, r.EarlyAny = u.earlyRetry, u.earlyAny
	u.mu.Unlock()

	// What is left once the calls are over: idle connections closed, a
	// moment to let goroutines end.
	var after int
	settle(cfg.Settle, func() bool {
		st.CloseIdleConnections()
		base.CloseIdleConnections()
		after = runtime.NumGoroutine()
		return after <= before && u.open() == 0
	})
	r.Conns = u.open()
	var afterBy map[string]int
	after, afterBy = goroutines()
	r.Goroutines = max(0, after-before)
	if r.Goroutines > 0 {
		r.LeftBy = map[string]int{}
		for k, n := range afterBy {
			if d := n - beforeBy[k]; d > 0 {
				r.LeftBy[k] = d
			}
		}
	}
	return r, st, nil
}

// call makes call n and reports whether it got a 2xx. It uses no context
// of its own, as client.Get does: whatever a library leaves running stays
// running.
func call(client *http.Client, url string, n int) bool {
	req, err := http.NewRequest(http.MethodGet, url+"/item", nil)
	if err != nil {
		return false
	}
	req.Header.Set(callHeader, strconv.Itoa(n))
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode < 300
}

// settle polls done every 50 ms for up to d.
func settle(d time.Duration, done func() bool) {
	for end := time.Now().Add(d); !done() && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
}

// goroutines counts the running goroutines, in total and by the function
// that created them.
func goroutines() (int, map[string]int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	by := map[string]int{}
	total := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		total++
		creator := "main"
		for line := range strings.SplitSeq(g, "\n") {
			if c, ok := strings.CutPrefix(line, "created by "); ok {
				creator, _, _ = strings.Cut(c, " in goroutine")
			}
		}
		by[creator]++
	}
	return total, by
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
