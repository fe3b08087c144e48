// Package wrkload measures the inbound middleware under a real load
// generator: each server is a real http.Server on loopback with a chi
// router answering "ok", and wrk (https://github.com/wg/wrk, the Debian
// package scripts/deps.sh installs) drives it over keep-alive connections.
// The servers run in turn, round after round, so that the noise of a shared
// machine falls on each alike; the figures are the medians of the rounds'
// requests per second and each server's ratio to chi alone in the same
// round.
package wrkload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
)

// Config is one run of the harness.
type Config struct {
	// Rounds run every server in turn, Rounds times.
	Rounds int
	// Threads, Conns and Duration are wrk's -t, -c and -d for each
	// server and round; Warmup is -d of one run per server before the
	// rounds. wrk takes whole seconds.
	Threads, Conns   int
	Duration, Warmup time.Duration
	// Wrk is the wrk program.
	Wrk string
	// Typed has every server's handler set its response's Content-Type,
	// as a real handler does; net/http then copies the header map at
	// WriteHeader whatever the middleware wrote. Without it the handler
	// writes no header at all, net/http's cheapest path, and a middleware
	// that writes any header pays for that copy.
	Typed bool
}

// DefaultConfig is the configuration bench/run.sh uses.
func DefaultConfig() Config {
	return Config{Rounds: 6, Threads: 2, Conns: 16, Duration: 3 * time.Second, Warmup: time.Second, Wrk: "wrk"}
}

// Path is the request every server is driven with: chi's route
// /v1/items/{id}.
const Path = "/v1/items/42"

// Base is the server the others are compared with: chi alone.
const Base = "chi"

// A Server is one router to drive: Build returns its handler.
type Server struct {
	Name, Config string
	Build        func() (http.Handler, error)
}

// Servers are chi alone, chi with breakwater's per-client rate limit, chi
// with httprate's, and chi with breakwater's whole inbound stack as the
// README mounts it, their handler setting a Content-Type when typed. No
// limit is ever reached: each request costs what admitting it costs.
func Servers(typed bool) []Server {
	h := ok
	if typed {
		h = typedOK
	}
	router := func(mw ...func(http.Handler) http.Handler) http.Handler {
		r := chi.NewRouter()
		r.Use(mw...)
		r.Get("/v1/items/{id}", h)
		return r
	}
	stack := func() (http.Handler, error) {
		mw, err := stackMiddleware()
		if err != nil {
			return nil, err
		}
		return router(mw...), nil
	}
	return []Server{
		{Base, "a chi router, one route answering 200 \"ok\"", func() (http.Handler, error) { return router(), nil }},
		{"breakwater-ratelimit", "chi with `ClientRateLimit(NewRateLimiters(1e6, 1000), RemoteAddrKey)`", func() (http.Handler, error) {
			crl, err := clientRateLimit()
			if err != nil {
				return nil, err
			}
			return router(crl), nil
		}},
		{"httprate", "chi with `httprate.LimitByIP(1e6, time.Second)`", func() (http.Handler, error) {
			//lint:ignore SA1019 LimitByIP is the comparison point users know; it is LimitBy(…, KeyByIP).
			return router(httprate.LimitByIP(1_000_000, time.Second)), nil
		}},
		{"breakwater-stack", "chi with `CallerHeaders(\"10.0.0.0/8\")`, the rate limit above, `RouteBreaker(NewBreakers())`, `Shedder(NewBulkheads(4096))`, `HandlerTimeout(5s)`", stack},
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

var textPlain = []string{"text/plain; charset=utf-8"}

func typedOK(w http.ResponseWriter, _ *http.Request) {
	w.Header()["Content-Type"] = textPlain
	_, _ = w.Write([]byte("ok"))
}

func clientRateLimit() (func(http.Handler) http.Handler, error) {
	rl, err := bw.NewRateLimiters(1_000_000, 1000)
	if err != nil {
		return nil, err
	}
	return bw.ClientRateLimit(rl, bw.RemoteAddrKey)
}

// stackMiddleware is the README's inbound stack ("Inbound middleware", "A fleet of
// breakwater services") with limits no load here reaches.
func stackMiddleware() ([]func(http.Handler) http.Handler, error) {
	trust, err := bw.CallerHeaders("10.0.0.0/8")
	if err != nil {
		return nil, err
	}
	limit, err := clientRateLimit()
	if err != nil {
		return nil, err
	}
	routes, err := bw.NewBreakers()
	if err != nil {
		return nil, err
	}
	breaker, err := bw.RouteBreaker(routes)
	if err != nil {
		return nil, err
	}
	slots, err := bw.NewBulkheads(4096)
	if err != nil {
		return nil, err
	}
	shed, err := bw.Shedder(slots)
	if err != nil {
		return nil, err
	}
	timeout, err := bw.HandlerTimeout(5 * time.Second)
	if err != nil {
		return nil, err
	}
	return []func(http.Handler) http.Handler{trust, limit, breaker, shed, timeout}, nil
}

// Result is what one server did over the rounds.
type Result struct {
	Server string
	// RPS are wrk's requests per second, one per round.
	RPS []float64
	// Ratio is RPS over Base's RPS in the same round, one per round.
	Ratio []float64
	// LatencyP50 are wrk's median latencies, one per round.
	LatencyP50 []time.Duration
	// CPU is the process's CPU time per request (the servers' process:
	// only this server was loaded), one per round; CPURatio is CPU over
	// Base's in the same round. Empty where the CPU time is unknown.
	CPU      []time.Duration
	CPURatio []float64
}

// Report is a run's results, Base's first, and the configuration.
type Report struct {
	Config  Config
	Version string
	Servers []Server `json:"-"`
	Configs [][2]string
	Results []Result
}

// Find returns the named server's result.
func (r Report) Find(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Server == name {
			return res, true
		}
	}
	return Result{}, false
}

// Run starts every server on its own loopback listener and drives each
// with wrk in turn, cfg.Rounds times; the order reverses every other round.
// Progress goes to log. servers[0] is the base of the ratios.
func Run(ctx context.Context, cfg Config, servers []Server, log io.Writer) (Report, error) {
	rep := Report{Config: cfg, Servers: servers}
	if len(servers) == 0 {
		return rep, errors.New("no server")
	}
	if cfg.Rounds < 1 {
		return rep, fmt.Errorf("rounds %d: want at least 1", cfg.Rounds)
	}
	for _, d := range []time.Duration{cfg.Duration, cfg.Warmup} {
		if d < time.Second || d%time.Second != 0 {
			return rep, fmt.Errorf("duration %s: wrk takes whole seconds", d)
		}
	}
	out, err := exec.CommandContext(ctx, cfg.Wrk, "-v").CombinedOutput()
	if len(out) == 0 && err != nil {
		return rep, fmt.Errorf("%s: %w (scripts/deps.sh installs wrk)", cfg.Wrk, err)
	}
	rep.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), " Copyright")
	urls := make([]string, len(servers))
	for i, s := range servers {
		h, err := s.Build()
		if err != nil {
			return rep, fmt.Errorf("%s: %w", s.Name, err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return rep, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		urls[i] = "http://" + ln.Addr().String() + Path
		rep.Configs = append(rep.Configs, [2]string{s.Name, s.Config})
		rep.Results = append(rep.Results, Result{Server: s.Name})
	}
	for i := range servers {
		fmt.Fprintf(log, "warm-up %s\n", servers[i].Name)
		if _, err := drive(ctx, cfg, cfg.Warmup, urls[i]); err != nil {
			return rep, fmt.Errorf("%s: %w", servers[i].Name, err)
		}
	}
	order := make([]int, len(servers))
	for round := range cfg.Rounds {
		for i := range order {
			order[i] = i
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		rps := make([]float64, len(servers))
		cpu := make([]time.Duration, len(servers))
		for _, i := range order {
			m, err := drive(ctx, cfg, cfg.Duration, urls[i])
			if err != nil {
				return rep, fmt.Errorf("%s, round %d: %w", servers[i].Name, round+1, err)
			}
			rps[i], cpu[i] = m.rps, m.cpu
			res := &rep.Results[i]
			res.RPS = append(res.RPS, m.rps)
			res.LatencyP50 = append(res.LatencyP50, m.p50)
			if m.cpu > 0 {
				res.CPU = append(res.CPU, m.cpu)
			}
			fmt.Fprintf(log, "round %d/%d %-22s %9.0f requests/s, p50 %s, CPU %s/request\n", round+1, cfg.Rounds, servers[i].Name, m.rps, m.p50, m.cpu)
		}
		for i := range servers {
			rep.Results[i].Ratio = append(rep.Results[i].Ratio, rps[i]/rps[0])
			if cpu[i] > 0 && cpu[0] > 0 {
				rep.Results[i].CPURatio = append(rep.Results[i].CPURatio, float64(cpu[i])/float64(cpu[0]))
			}
		}
	}
	return rep, nil
}

// measure is one wrk run's figures: requests per second, the median
// latency, and the process's CPU time per request (0 when unknown).
type measure struct {
	rps float64
	p50 time.Duration
	cpu time.Duration
}

var (
	reRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reCount   = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	reP50     = regexp.MustCompile(`(?m)^\s+50%\s+([0-9.]+)(us|ms|s)\b`)
	reNon2xx  = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	reSockErr = regexp.MustCompile(`(?m)^\s*Socket errors:.*`)
)

// drive runs wrk for d against url. A response other than 2xx or 3xx, or
// a socket error, fails the run: a limit was reached, or a server broke.
func drive(ctx context.Context, cfg Config, d time.Duration, url string) (measure, error) {
	cmd := exec.CommandContext(ctx, cfg.Wrk, "-t", strconv.Itoa(cfg.Threads), "-c", strconv.Itoa(cfg.Conns),
		"-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency", url)
	before, okBefore := cpuTime()
	out, err := cmd.CombinedOutput()
	after, okAfter := cpuTime()
	if err != nil {
		return measure{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	m, err := parse(string(out))
	if err == nil && okBefore && okAfter {
		if c := reCount.FindStringSubmatch(string(out)); c != nil {
			if n, _ := strconv.ParseInt(c[1], 10, 64); n > 0 {
				m.cpu = (after - before) / time.Duration(n)
			}
		}
	}
	return m, err
}

// parse reads wrk's report.
func parse(out string) (measure, error) {
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		return measure{}, fmt.Errorf("wrk: %s responses were not 2xx or 3xx", m[1])
	}
	if m := reSockErr.FindString(out); m != "" {
		return measure{}, fmt.Errorf("wrk: %s", strings.TrimSpace(m))
	}
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return measure{}, fmt.Errorf("wrk: no Requests/sec in its output: %s", out)
	}
	rps, err := strconv.ParseFloat(m[1], 64)
	if err != nil || rps <= 0 {
		return measure{}, fmt.Errorf("wrk: Requests/sec %q", m[1])
	}
	var p50 time.Duration
	if m := reP50.FindStringSubmatch(out); m != nil {
		p50, _ = time.ParseDuration(m[1] + m[2])
	}
	return measure{rps: rps, p50: p50}, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func Median[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
