// Package tail measures what hedged requests do to tail latency: each stack
// calls a loopback upstream that answers in 5 ms, but in 200 ms for a
// random 5 % of its requests, and the harness reports the calls' latency
// percentiles and how many extra requests the upstream received. These are
// wall-clock figures on real sockets, run one stack at a time.
package tail

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/bench/internal/stacks"
)

// Config is one run of the harness.
type Config struct {
	// Calls are measured per stack and round, after Warmup calls that let
	// adaptive delays learn; Workers goroutines make them.
	Calls, Warmup, Workers int
	// Rounds run every stack in turn, Rounds times; percentiles are the
	// median of the rounds', requests and failures their sums.
	Rounds int
	// Fast is the upstream's usual latency; Slow is the latency of a
	// random SlowShare of its requests (drawn from Seed, per request).
	Fast, Slow time.Duration
	SlowShare  float64
	Seed       uint64
	// Settle bounds the wait for the upstream's connections to close
	// after a stack's calls, idle connections closed.
	Settle time.Duration
}

// DefaultConfig is the configuration bench/run.sh uses.
func DefaultConfig() Config {
	return Config{Calls: 2000, Warmup: 200, Workers: 8, Rounds: 3, Fast: 5 * time.Millisecond,
		Slow: 200 * time.Millisecond, SlowShare: 0.05, Seed: 1, Settle: 2 * time.Second}
}

// A Builder builds a fresh stack over base.
type Builder struct {
	Name  string
	Build func(base http.RoundTripper) (stacks.Stack, error)
}

// Builders are the stacks the harness compares.
func Builders() []Builder {
	return []Builder{
		{"bare", func(b http.RoundTripper) (stacks.Stack, error) { return stacks.Bare(b), nil }},
		{"breakwater-nohedge", func(b http.RoundTripper) (stacks.Stack, error) {
			st, err := stacks.Breakwater(b, stacks.Options{})
			st.Name = "breakwater-nohedge"
			return st, err
		}},
		{"breakwater", func(b http.RoundTripper) (stacks.Stack, error) { return stacks.BreakwaterHedge(b, 0) }},
		{"failsafe-go", func(b http.RoundTripper) (stacks.Stack, error) { return stacks.FailsafeHedge(b, 0), nil }},
		{"breakwater-fixed", func(b http.RoundTripper) (stacks.Stack, error) { return stacks.BreakwaterHedge(b, FixedDelay) }},
		{"failsafe-go-fixed", func(b http.RoundTripper) (stacks.Stack, error) { return stacks.FailsafeHedge(b, FixedDelay), nil }},
	}
}

// FixedDelay is the delay of the fixed-delay rows: twice the usual
// latency.
const FixedDelay = 10 * time.Millisecond

// Result is what one stack did over the rounds.
type Result struct {
	Library string
	// Calls measured, the Requests the upstream received for them, and
	// the calls that did not get a 200.
	Calls, Requests, Failed int
	// Latency percentiles of the measured calls: the median of the rounds.
	P50, P99, P999 time.Duration
	// Conns is the most server connections any round left open once its
	// calls were over and idle connections closed.
	Conns int
}

// Extra is the share of requests beyond one per call.
func (r Result) Extra() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Requests-r.Calls) / float64(r.Calls)
}

// Report is what cmd/tail writes as JSON and cmd/report renders.
type Report struct {
	Config  Config
	Stacks  []StackConfig
	Results []Result
}

// StackConfig says how one stack was configured.
type StackConfig struct{ Name, Config string }

// Find returns the result of library.
func (r Report) Find(library string) (Result, bool) {
	for _, res := range r.Results {
		if res.Library == library {
			return res, true
		}
	}
	return Result{}, false
}

// Run measures every builder, round after round, writing progress lines to
// log.
func Run(ctx context.Context, cfg Config, builders []Builder, log io.Writer) (Report, error) {
	rep := Report{Config: cfg}
	rounds := make([][]round, len(builders))
	for r := range cfg.Rounds {
		for i, b := range builders {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			rd, st, err := runOne(cfg, b, cfg.Seed+uint64(r))
			if err != nil {
				return rep, fmt.Errorf("%s: %w", b.Name, err)
			}
			if r == 0 {
				rep.Stacks = append(rep.Stacks, StackConfig{b.Name, st.Config})
			}
			fmt.Fprintf(log, "tail: round %d %-20s p50 %-8s p99 %-8s p99.9 %-8s extra %5.1f %%  failed %d  conns left %d\n",
				r+1, b.Name, rd.p50.Round(10*time.Microsecond), rd.p99.Round(10*time.Microsecond), rd.p999.Round(10*time.Microsecond),
				100*float64(rd.requests-cfg.Calls)/float64(cfg.Calls), rd.failed, rd.conns)
			rounds[i] = append(rounds[i], rd)
		}
	}
	for i, b := range builders {
		res := Result{Library: b.Name}
		var p50, p99, p999 []time.Duration
		for _, rd := range rounds[i] {
			res.Calls += cfg.Calls
			res.Requests += rd.requests
			res.Failed += rd.failed
			res.Conns = max(res.Conns, rd.conns)
			p50, p99, p999 = append(p50, rd.p50), append(p99, rd.p99), append(p999, rd.p999)
		}
		res.P50, res.P99, res.P999 = median(p50), median(p99), median(p999)
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

type round struct {
	p50, p99, p999          time.Duration
	requests, failed, conns int
}

func runOne(cfg Config, b Builder, seed uint64) (round, stacks.Stack, error) {
	u := newUpstream(cfg, seed)
	defer u.close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Workers * 4 // hedges need connections of their own
	st, err := b.Build(base)
	if err != nil {
		return round{}, st, err
	}
	client := &http.Client{Transport: st}
	calls := func(n int, lat []time.Duration) int {
		var failed atomic.Int64
		jobs := make(chan int)
		var wg sync.WaitGroup
		for range cfg.Workers {
			wg.Go(func() {
				for i := range jobs {
					t0 := time.Now()
					if !get(client, u.srv.URL) {
						failed.Add(1)
					}
					if lat != nil {
						lat[i] = time.Since(t0)
					}
				}
			})
		}
		for i := range n {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		return int(failed.Load())
	}
	calls(cfg.Warmup, nil)
	// Hedges of the warm-up still running are cancelled by now, or nearly:
	// wait for the upstream to be idle before counting.
	settle(time.Second, func() bool { return u.busy.Load() == 0 })
	before := u.requests.Load()
	lat := make([]time.Duration, cfg.Calls)
	var rd round
	rd.failed = calls(cfg.Calls, lat)
	settle(time.Second, func() bool { return u.busy.Load() == 0 })
	rd.requests = int(u.requests.Load() - before)
	slices.Sort(lat)
	rd.p50, rd.p99, rd.p999 = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999)
	settle(cfg.Settle, func() bool {
		st.CloseIdleConnections()
		base.CloseIdleConnections()
		return u.open() == 0
	})
	rd.conns = u.open()
	return rd, st, nil
}

func get(client *http.Client, url string) bool {
	resp, err := client.Get(url + "/item")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// upstream answers every request after Fast, or Slow for a random share,
// and counts requests and open connections.
type upstream struct {
	srv      *httptest.Server
	cfg      Config
	requests atomic.Int64
	busy     atomic.Int64

	mu    sync.Mutex
	rng   *rand.Rand
	conns map[net.Conn]bool
}

func newUpstream(cfg Config, seed uint64) *upstream {
	u := &upstream{cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), conns: map[net.Conn]bool{}}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if s == http.StateClosed || s == http.StateHijacked {
			delete(u.conns, c)
		} else {
			u.conns[c] = true
		}
	}
	u.srv.Start()
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.requests.Add(1)
	u.busy.Add(1)
	defer u.busy.Add(-1)
	u.mu.Lock()
	d := u.cfg.Fast
	if u.rng.Float64() < u.cfg.SlowShare {
		d = u.cfg.Slow
	}
	u.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		_, _ = w.Write([]byte("ok"))
	case <-r.Context().Done(): // a hedge's loser, cancelled
	}
}

func (u *upstream) open() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.conns)
}

func (u *upstream) close() {
	u.srv.CloseClientConnections()
	u.srv.Close()
}

func settle(d time.Duration, done func() bool) {
	for end := time.Now().Add(d); !done() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
