package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater/bench/internal/quality"
	"github.com/breakwater-go/breakwater/bench/internal/tail"
	"github.com/breakwater-go/breakwater/bench/internal/wrkload"
)

// group describes one benchmark group of RESULTS.md.
type group struct {
	name, title, about string
	// base is the row the others' overhead is measured from, if any.
	base string
}

var groups = []group{
	{"BreakerClosed", "Breaker closed: admit a call and record its success",
		"One breaker, no registry lookup. gobreaker: `Execute`; gobreaker-twostep: `TwoStepCircuitBreaker.Allow` then `done(nil)`; failsafe-go: `TryAcquirePermit` + `RecordSuccess`; failsafe-go-executor: `failsafe.With(cb).Get`; hystrix-go: `hystrix.Do`; go-resiliency: `Breaker.Run`.", ""},
	{"BreakerOpen", "Breaker open: reject a call",
		"The same breakers, forced or tripped open for an hour.", ""},
	{"Retry", "Retry wrapper, first attempt succeeds",
		"Over an in-memory transport answering 200. breakwater: `NewTransport` with the breaker and both timeouts off; breakwater-stage: `RetryStage` (the stage `Chain` composes); failsafehttp: `NewRoundTripper` with `NewRetryPolicyBuilder`; go-retryablehttp: its `RoundTripper`, nil logger; cenkalti-backoff and go-resiliency retry a function making the same `RoundTrip`.", ""},
	{"Transport", "Whole outbound stack, in-memory base answering a canned 200",
		"bare: the base alone. bare-timeout: the base with what a bare client's timeout costs, each request under `context.WithTimeout` (10 s) cancelled when its body ends, as `http.Client.Timeout` does. breakwater: `NewTransport` defaults (call timeout, retry, breaker, attempt timeout). breakwater-notimeouts: retry and breaker only, like failsafehttp. failsafehttp: retry policy and breaker. failsafehttp-timeouts: timeout, retry, breaker, timeout, like breakwater's default. go-retryablehttp: nil logger, no breaker. gobreaker: a breaker around `RoundTrip`. *Overhead* is the stack's ns/op minus bare's.", "bare"},
	{"TransportLoopback", "Whole outbound stack over a loopback httptest server",
		"The same stacks, each over its own clone of `http.DefaultTransport`, to a server answering 200 \"ok\": the network dominates, the stacks' cost is the difference to bare, and an overhead smaller than the spread is noise.", "bare"},
	{"Inbound", "Inbound: chi router with a per-client rate limiter",
		"`ServeHTTP` straight into a reusable recorder, requests cycling through 256 client addresses, limits high enough never to reject. chi: the router alone; httprate: `LimitByIP`. *Overhead* is the ns/op minus chi's.", "chi"},
	{"RateAdmission", "Rate admission: one token from a limiter with plenty",
		"x-time-rate: `rate.Limiter.Allow`; failsafe-go: smooth `RateLimiter.TryAcquirePermit`.", ""},
}

func write(w io.Writer, r results, q quality.Report, tr tail.Report, wr wrkload.Report, env [][2]string, stat string) {
	fmt.Fprint(w, "# Comparative benchmarks and resilience quality\n\n")
	fmt.Fprintf(w, "Written by `bench/run.sh` on %s; do not edit by hand, run it again. ", lookup(env, "date"))
	fmt.Fprint(w, "The suite and the harness live in [`bench/`](.): see [`doc.go`](doc.go), the `*_test.go` files and [`internal/stacks`](internal/stacks/stacks.go) for exactly what each row runs.\n\n")

	fmt.Fprint(w, "## Machine and settings\n\n")
	fmt.Fprintf(w, "- machine: %s CPUs (`nproc`), %s, %s\n", lookup(env, "nproc"), lookup(env, "cpu"), lookup(env, "os"))
	fmt.Fprintf(w, "- Go: `%s`\n", lookup(env, "go"))
	fmt.Fprintf(w, "- load average (1, 5, 15 min) at the start: %s; at the end: %s\n", lookup(env, "load start"), lookup(env, "load end"))
	fmt.Fprintf(w, "- benchmarks: `-benchtime %s`, %s rounds of the whole suite (`-count 1` each, so noise spreads over every library alike), serial runs at `-cpu 1`, parallel (`b.RunParallel`) at `-cpu %s`\n",
		lookup(env, "benchtime"), lookup(env, "rounds"), lookup(env, "cpus"))
	if note := lookup(env, "note"); note != "?" {
		fmt.Fprintf(w, "- %s\n", note)
	}
	fmt.Fprint(w, "\nPeer versions (`bench/go.mod`):\n\n| module | version |\n|---|---|\n")
	for _, p := range all(env, "module") {
		path, version, _ := strings.Cut(p, " ")
		fmt.Fprintf(w, "| %s | %s |\n", path, version)
	}
	fmt.Fprintln(w)

	writeTargets(w, r, q, tr, wr)
	writeFailed(w, r)

	fmt.Fprint(w, "## Speed\n\n")
	fmt.Fprint(w, "Median of the rounds for each figure. *vs breakwater* is the library's ns/op divided by breakwater's in the same setting: above 1, slower than breakwater. *Spread* is (max − min) / median of ns/op over the rounds: large spreads mean a noisy machine. Parallel runs at 1 CPU include `RunParallel`'s own bookkeeping.\n\n")
	for _, g := range groups {
		writeGroup(w, r, g)
	}
	writeShared(w, r)

	fmt.Fprint(w, "## Resilience quality\n\n")
	if len(q.Results) == 0 {
		fmt.Fprint(w, "Not run.\n\n")
	} else {
		fmt.Fprint(w, "Not speed figures: what each library does to an upstream that is failing, and what it leaves behind. ")
		quality.Markdown(w, q)
		fmt.Fprint(w, "Reading the Retry-After columns: *retries before Retry-After* counts a call's own retries that came earlier than the hint its previous attempt got. *Requests inside another call's Retry-After* is the server's view: the client was told to wait, yet another of its calls arrived (10 ms after the 429 at the earliest, so requests already on the wire do not count). Per-call waiting cannot bring that to 0, and jittered waits make retries of different calls land in each other's windows; a client-wide pause per host can, and so can a breaker that opens on 429s.\n\n")
		fmt.Fprint(w, "Why the peers rarely fail fast: each retries its own breaker's rejection as it retries any error (failsafehttp's retry policy, go-retryablehttp's `DefaultRetryPolicy`, `backoff.Retry`, go-resiliency's default classifier), so a call that meets an open breaker still waits out its backoff before giving up. Each can be told not to (`AbortOnErrors(circuitbreaker.ErrOpen)`, a `CheckRetry`, `backoff.Permanent`, a classifier), but that is not how their documentation composes them. breakwater never retries its own rejections.\n\n")
	}

	fmt.Fprint(w, "## Tail latency: hedged requests\n\n")
	if len(tr.Results) == 0 {
		fmt.Fprint(w, "Not run.\n\n")
	} else {
		tail.Markdown(w, tr)
	}

	fmt.Fprint(w, "## Under load: the inbound middleware and wrk\n\n")
	if len(wr.Results) == 0 {
		fmt.Fprint(w, "Not run.\n\n")
	} else {
		wrkload.Markdown(w, wr)
	}

	if stat != "" {
		fmt.Fprint(w, "## benchstat\n\nThe same runs through `benchstat -col /lib` (ns/op only, one table per group; the first column is the base of the comparison), with 95 % confidence intervals and p-values.\n\n<details><summary>benchstat output</summary>\n\n```\n")
		fmt.Fprint(w, strings.TrimSpace(stat))
		fmt.Fprint(w, "\n```\n\n</details>\n")
	}
}

func writeGroup(w io.Writer, r results, g group) {
	libs := r.libs(g.name)
	if len(libs) == 0 {
		return
	}
	fmt.Fprintf(w, "### %s\n\n%s\n\n", g.title, g.about)
	withCPU := r.hasCPU(g.name)
	fmt.Fprint(w, "| run | library | ns/op | B/op | allocs/op | vs breakwater |")
	if g.base != "" {
		fmt.Fprint(w, " overhead ns/op | overhead vs breakwater's |")
	}
	if withCPU {
		fmt.Fprint(w, " CPU ns/op |")
		if g.base != "" {
			fmt.Fprint(w, " CPU overhead |")
		}
	}
	fmt.Fprint(w, " spread |\n|---|---|--:|--:|--:|--:|")
	if g.base != "" {
		fmt.Fprint(w, "--:|--:|")
	}
	if withCPU {
		fmt.Fprint(w, "--:|")
		if g.base != "" {
			fmt.Fprint(w, "--:|")
		}
	}
	fmt.Fprint(w, "--:|\n")
	for _, v := range r.variants(g.name) {
		bwNS, hasBW := r.ns(g.name, v.run, "breakwater", v.cpu)
		baseNS, hasBase := r.ns(g.name, v.run, g.base, v.cpu)
		baseCPU, hasBaseCPU := r.cpuNS(g.name, v.run, g.base, v.cpu)
		for _, lib := range libs {
			m, spread, _, ok := r.median(key{g.name, v.run, lib, v.cpu})
			if !ok {
				continue
			}
			name := lib
			if lib == "breakwater" {
				name = "**breakwater**"
			}
			vs := "–"
			if hasBW && bwNS > 0 {
				vs = fmt.Sprintf("%.2f", m.ns/bwNS)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.0f | %s |", variantName(v), name, fmtNS(m.ns), m.bytes, m.allocs, vs)
			if g.base != "" {
				over, overVS := "–", "–"
				if hasBase && lib != g.base {
					over = fmtNS(m.ns - baseNS)
					if hasBW && bwNS-baseNS > 0 {
						overVS = fmt.Sprintf("%.2f", (m.ns-baseNS)/(bwNS-baseNS))
					}
				}
				fmt.Fprintf(w, " %s | %s |", over, overVS)
			}
			if withCPU {
				cpu, over := "–", "–"
				if m.cpu > 0 {
					cpu = fmtNS(m.cpu)
					if hasBaseCPU && lib != g.base {
						over = fmtNS(m.cpu - baseCPU)
					}
				}
				fmt.Fprintf(w, " %s |", cpu)
				if g.base != "" {
					fmt.Fprintf(w, " %s |", over)
				}
			}
			fmt.Fprintf(w, " %.0f %% |\n", 100*spread)
		}
	}
	fmt.Fprintln(w)
}

// writeShared writes the shared admission runs: each library's
// throughput, latency and CPU per admission at a fixed number of callers.
func writeShared(w io.Writer, r results) {
	const g = "SharedAdmission"
	libs := r.libs(g)
	if len(libs) == 0 {
		return
	}
	fmt.Fprint(w, "### Shared admission on Redis\n\n")
	fmt.Fprint(w, "One rate limit admission against a loopback `redis-server` the benchmark starts, by a fixed number of callers at once. breakwater: `redisstore` through a `RateLimiters` registry; redis_rate: go-redis/redis_rate; ping: a bare `PING`, the floor every round trip pays. *CPU* is per admission, this process's and the redis-server's together. *vs breakwater* is the library's throughput divided by breakwater's.\n\n")
	fmt.Fprint(w, "| callers | library | admissions/s | vs breakwater | p50 | p99 | CPU | B/op | allocs/op | spread |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, v := range r.variants(g) {
		bw, _, _, hasBW := r.median(key{g, v.run, "breakwater", v.cpu})
		for _, lib := range libs {
			m, spread, _, ok := r.median(key{g, v.run, lib, v.cpu})
			if !ok {
				continue
			}
			name, vs := lib, "–"
			if lib == "breakwater" {
				name = "**breakwater**"
			}
			if hasBW && bw.ops > 0 {
				vs = fmt.Sprintf("%.2f", m.ops/bw.ops)
			}
			fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %.0f | %.0f | %.0f %% |\n",
				variantName(v), name, m.ops, vs, fmtLatency(m.p50), fmtLatency(m.p99), fmtLatency(m.cpu+m.redisCPU), m.bytes, m.allocs, 100*spread)
		}
	}
	fmt.Fprintln(w)
}

// fmtLatency formats ns as a duration to two or three significant digits.
func fmtLatency(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d < 10*time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}

// writeTargets checks the figures the issue sets for breakwater.
func writeTargets(w io.Writer, r results, q quality.Report, tr tail.Report, wr wrkload.Report) {
	fmt.Fprint(w, "## Targets\n\n")
	fmt.Fprint(w, "Figures per setting (serial; parallel at 1 CPU; parallel at 2 CPUs) as breakwater's share of the peer's: 0.25 means breakwater takes a quarter of the peer's time.\n\n")
	fmt.Fprint(w, "| target | measured | met |\n|---|---|---|\n")

	// share is lib's ns/op (or overhead over base) as a fraction of peer's,
	// per setting, by the wall clock or by CPU time (fig).
	type figure func(group, run, lib string, cpu int) (float64, bool)
	share := func(fig figure, group, lib, peer, base string) []float64 {
		var out []float64
		for _, v := range r.variants(group) {
			a, okA := fig(group, v.run, lib, v.cpu)
			p, okP := fig(group, v.run, peer, v.cpu)
			b, okB := fig(group, v.run, base, v.cpu)
			switch {
			case !okA || !okP:
				continue
			case base != "" && !okB:
				continue
			case base != "":
				a, p = a-b, p-b
			}
			out = append(out, a/p)
		}
		return out
	}
	// row writes one target; limit 0 marks a row given for comparison.
	// line writes one target from its figures per setting; limit 0 marks a
	// row given for comparison. A negative figure fails a share (something
	// is off) but meets an overhead bound (the overhead is within noise).
	line := func(what string, got []float64, limit float64, missing string, overhead bool) {
		if len(got) == 0 {
			fmt.Fprintf(w, "| %s | %s | – |\n", what, missing)
			return
		}
		met, parts := "yes", make([]string, len(got))
		for i, s := range got {
			parts[i] = fmt.Sprintf("%.2f", s)
			if s > limit || s < 0 && !overhead {
				met = "**no**"
			}
		}
		if limit == 0 {
			met = "(for comparison)"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", what, strings.Join(parts, "; "), met)
	}
	row := func(what, group, lib, peer, base string, limit float64) {
		line(what, share(r.ns, group, lib, peer, base), limit, "no "+lib+" row in this run", false)
	}
	// cpuRow is row by CPU time, given when the runs reported it.
	cpuRow := func(what, group, lib, peer, base string, limit float64) {
		if r.hasCPU(group) {
			line(what, share(r.cpuNS, group, lib, peer, base), limit, "no "+lib+" row in this run", false)
		}
	}
	// overheadOf is lib's overhead over base as a fraction of base's
	// figure, per setting.
	overheadOf := func(fig figure, group, lib, base string) []float64 {
		var out []float64
		for _, v := range r.variants(group) {
			a, okA := fig(group, v.run, lib, v.cpu)
			b, okB := fig(group, v.run, base, v.cpu)
			if okA && okB && b > 0 {
				out = append(out, (a-b)/b)
			}
		}
		return out
	}
	row("breaker closed success ≤ 1/4 of gobreaker's ns/op (`Execute`)", "BreakerClosed", "breakwater", "gobreaker", "", 0.25)
	row("… against gobreaker's two-step API", "BreakerClosed", "breakwater", "gobreaker-twostep", "", 0.25)
	row("open rejection ≤ 1/2 of gobreaker's", "BreakerOpen", "breakwater", "gobreaker", "", 0.5)
	row("whole-chain overhead over bare ≤ 1/2 of failsafehttp's (breakwater's default chain, with its two timeouts, against failsafehttp's retry + breaker)", "Transport", "breakwater", "failsafehttp", "bare", 0.5)
	cpuRow("… the same in CPU time per call (the process's, which other processes' load inflates far less)", "Transport", "breakwater", "failsafehttp", "bare", 0.5)
	row("… like for like: retry + breaker on both sides", "Transport", "breakwater-notimeouts", "failsafehttp", "bare", 0)
	row("… like for like: timeout, retry, breaker, timeout on both sides", "Transport", "breakwater", "failsafehttp-timeouts", "bare", 0)
	line("default chain's overhead over a loopback round trip < 3 % of the bare round trip", overheadOf(r.ns, "TransportLoopback", "breakwater", "bare"), 0.03, "no loopback rows in this run", true)
	if r.hasCPU("TransportLoopback") {
		line("… the same in CPU time per call (client and server in one process)", overheadOf(r.cpuNS, "TransportLoopback", "breakwater", "bare"), 0.03, "", true)
	}
	if len(r.variants("LoopbackPaired")) > 0 {
		line("… measured in pairs: a call through the chain and a bare call in turn, so the noise common to the two cancels (`LoopbackPaired`)", r.paired("LoopbackPaired", "breakwater"), 0.03, "", true)
		line("… measured in pairs, bare-timeout: what a deadline costs any request", r.paired("LoopbackPaired", "bare-timeout"), 0, "", true)
		if got := r.paired("LoopbackPaired", "breakwater-notimeouts"); len(got) > 0 {
			line("… measured in pairs, breakwater without its timeouts: what the retry loop and the breaker cost", got, 0, "", true)
		}
	}
	line("… what a timeout costs any request, no library: bare-timeout's overhead over bare (`context.WithTimeout`, as `http.Client.Timeout` does)", overheadOf(r.ns, "TransportLoopback", "bare-timeout", "bare"), 0, "no bare-timeout row in this run", true)
	if r.hasCPU("TransportLoopback") {
		line("… the same in CPU time per call", overheadOf(r.cpuNS, "TransportLoopback", "bare-timeout", "bare"), 0, "", true)
	}
	line("… the default chain's overhead over bare-timeout < 3 %: its cost beyond what net/http charges any request with a deadline", overheadOf(r.ns, "TransportLoopback", "breakwater", "bare-timeout"), 0.03, "no bare-timeout row in this run", true)
	if r.hasCPU("TransportLoopback") {
		line("… the same in CPU time per call", overheadOf(r.cpuNS, "TransportLoopback", "breakwater", "bare-timeout"), 0.03, "", true)
	}
	row("inbound per-client limiter overhead over chi ≤ 1/5 of httprate's", "Inbound", "breakwater", "httprate", "chi", 0.2)
	if len(r.variants("InboundPaired")) > 0 {
		bw, hr := r.paired("InboundPaired", "breakwater"), r.paired("InboundPaired", "httprate")
		var got []float64
		for i := range min(len(bw), len(hr)) {
			got = append(got, bw[i]/hr[i])
		}
		line("… measured in pairs: a request through each limiter and one through chi alone in turn, so the noise common to the two cancels (`InboundPaired`)", got, 0.2, "", false)
	}
	if got := r.timePerRedisRate("SharedAdmissionPaired", "breakwater"); len(got) > 0 {
		line("shared admission at one caller: time per admission ≤ go-redis/redis_rate's, the two timed in turn on loopback (`SharedAdmissionPaired`)", got, 1, "", false)
		if lfl := r.timePerRedisRate("SharedAdmissionPaired", "breakwater-vs-budgeted"); len(lfl) > 0 {
			line("… like for like: each redis_rate admission under a timeout of breakwater's budget", lfl, 0, "", false)
		}
	}
	if p50, p99 := r.xPing("SharedTailPaired", "breakwater"); len(p99) > 0 {
		line("shared admission at one caller: p99 ≤ 2× a bare Redis `PING`'s, an admission and a `PING` timed in turn on loopback (`SharedTailPaired`)", p99, 2, "", false)
		line("… its p50 over the `PING`'s, the same pairs", p50, 0, "", false)
		if _, rr := r.xPing("SharedTailPaired", "redis_rate"); len(rr) > 0 {
			line("… go-redis/redis_rate's p99 over the `PING`'s, timed the same way", rr, 0, "", false)
		}
	}

	writeTailTargets(w, tr)
	writeWrkTargets(w, wr)
	if len(q.Results) == 0 {
		fmt.Fprint(w, "| quality targets | quality harness not run | – |\n\n")
		return
	}
	if d, ok := q.Find("breakwater", quality.Down); ok {
		per := float64(d.Requests) / float64(d.Calls)
		fmt.Fprintf(w, "| load amplification against a hard-down upstream ≤ 1.2 upstream requests per call | %.2f (%d requests for %d calls) | %s |\n", per, d.Requests, d.Calls, yes(per <= 1.2))
	}
	if t, ok := q.Find("breakwater", quality.Throttle); ok {
		fmt.Fprintf(w, "| 0 requests before Retry-After: a call's retries | %d | %s |\n", t.EarlyRetries, yes(t.EarlyRetries == 0))
		fmt.Fprintf(w, "| … any call, while another call's Retry-After runs (server's view) | %d | %s |\n", t.EarlyAny, yes(t.EarlyAny == 0))
	}
	var g, c int
	var scen []string
	for _, res := range q.Results {
		if res.Library == "breakwater" {
			g += res.Goroutines
			c += res.Conns
			scen = append(scen, string(res.Scenario))
		}
	}
	fmt.Fprintf(w, "| 0 leaks | %d goroutines, %d connections left over %s | %s |\n\n", g, c, strings.Join(scen, ", "), yes(g == 0 && c == 0))
}

// writeFailed lists the benchmark runs that failed: their rounds are
// missing from the medians below.
func writeFailed(w io.Writer, r results) {
	if len(r.failed) == 0 {
		return
	}
	counts := map[string]int{}
	var names []string
	for _, n := range r.failed {
		if counts[n] == 0 {
			names = append(names, n)
		}
		counts[n]++
	}
	fmt.Fprint(w, "**Failed runs** (missing from the medians below; see the benchmark's log for why):\n\n")
	for _, n := range names {
		fmt.Fprintf(w, "- `%s`: %d of the rounds\n", n, counts[n])
	}
	fmt.Fprintln(w)
}

// writeTailTargets checks hedging's figures: p99 at most a third of the
// same stack's without hedging, at most 10 % extra requests.
func writeTailTargets(w io.Writer, tr tail.Report) {
	ref, okRef := tr.Find("breakwater-nohedge")
	hedged, okH := tr.Find("breakwater")
	if !okRef || !okH {
		fmt.Fprint(w, "| hedging: p99 ≤ 1/3 of no hedging at ≤ 10 % extra requests | tail harness not run | – |\n")
		return
	}
	ratio := float64(hedged.P99) / float64(ref.P99)
	fmt.Fprintf(w, "| hedging: p99 ≤ 1/3 of no hedging at ≤ 10 %% extra requests | %.2f (p99 %s vs %s), %.1f %% extra | %s |\n",
		ratio, hedged.P99.Round(100*time.Microsecond), ref.P99.Round(100*time.Microsecond), 100*hedged.Extra(), yes(ratio <= 1.0/3 && hedged.Extra() <= 0.1))
	if fs, ok := tr.Find("failsafe-go"); ok {
		fmt.Fprintf(w, "| … failsafe-go's hedge policy, same run | %.2f (p99 %s), %.1f %% extra | (for comparison) |\n",
			float64(fs.P99)/float64(ref.P99), fs.P99.Round(100*time.Microsecond), 100*fs.Extra())
	}
}

// writeWrkTargets checks the inbound stack under wrk: at least 0.95 of
// chi alone's requests per second, the median of the rounds' ratios.
func writeWrkTargets(w io.Writer, wr wrkload.Report) {
	const target = "whole inbound stack on chi (`CallerHeaders`, `ClientRateLimit`, `RouteBreaker`, `Shedder`, `HandlerTimeout`) on a real server under wrk ≥ 0.95 of chi alone's requests/s (`cmd/wrkload`)"
	st, ok := wr.Find("breakwater-stack")
	if !ok {
		fmt.Fprintf(w, "| %s | wrk run not run | – |\n", target)
		return
	}
	ratio := func(res wrkload.Result) string {
		return fmt.Sprintf("%.3f (rounds %.3f–%.3f)", wrkload.Median(res.Ratio), slices.Min(res.Ratio), slices.Max(res.Ratio))
	}
	fmt.Fprintf(w, "| %s | %s | %s |\n", target, ratio(st), yes(wrkload.Median(st.Ratio) >= 0.95))
	for _, c := range []struct{ name, what string }{
		{"breakwater-ratelimit", "… the per-client rate limit alone"},
		{"httprate", "… httprate's `LimitByIP`, same run"},
	} {
		if res, ok := wr.Find(c.name); ok {
			fmt.Fprintf(w, "| %s | %s | (for comparison) |\n", c.what, ratio(res))
		}
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func fmtNS(ns float64) string {
	switch a := max(ns, -ns); {
	case a < 10:
		return fmt.Sprintf("%.2f", ns)
	case a < 100:
		return fmt.Sprintf("%.1f", ns)
	}
	return fmt.Sprintf("%.0f", ns)
}
