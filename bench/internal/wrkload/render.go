package wrkload

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Markdown writes the table of r and the servers' configurations.
func Markdown(w io.Writer, r Report) {
	cfg := r.Config
	typed := ", writing no header"
	if cfg.Typed {
		typed = ", its `Content-Type` set as a real handler sets it"
	}
	fmt.Fprintf(w, "Each server is a real `http.Server` on a loopback listener of its own, all in one process, with a chi router answering `GET %s` with 200 \"ok\"%s; "+
		"`wrk -t%d -c%d -d%s --latency` (%s, in the same machine's other processes' company: nothing is pinned) drives one server at a time, "+
		"%d rounds of every server in turn (the order reversed every other round) after a %s warm-up each. "+
		"*requests/s* is the median of the rounds', *range* their min–max; *vs %s* is the median of each round's ratio to %s's requests/s in the same round, *its range* that ratio's min–max. "+
		"*CPU per request* is the servers' process's CPU time (user and system, GC included) over the round divided by its requests, which other processes' load inflates far less than requests/s; *vs %s* beside it, the median of each round's ratio to %s's. "+
		"No limit is ever reached: every response is a 200.\n\n",
		Path, typed, cfg.Threads, cfg.Conns, cfg.Duration, r.Version, cfg.Rounds, cfg.Warmup, Base, Base, Base, Base)
	fmt.Fprintf(w, "| server | requests/s | range | vs %s | its range | p50 latency | CPU per request | vs %s | its range |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n", Base, Base)
	for _, res := range r.Results {
		name := res.Server
		if strings.HasPrefix(name, "breakwater") {
			name = "**" + name + "**"
		}
		cpu := "– | – | –"
		if len(res.CPU) > 0 && len(res.CPURatio) > 0 {
			cpu = fmt.Sprintf("%.1f µs | %.3f | %.3f–%.3f", float64(Median(res.CPU))/1e3, Median(res.CPURatio), slices.Min(res.CPURatio), slices.Max(res.CPURatio))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f–%.0f | %.3f | %.3f–%.3f | %s | %s |\n", name, Median(res.RPS), slices.Min(res.RPS), slices.Max(res.RPS),
			Median(res.Ratio), slices.Min(res.Ratio), slices.Max(res.Ratio), Median(res.LatencyP50).Round(time.Microsecond), cpu)
	}
	fmt.Fprint(w, "\nConfigurations:\n\n| server | configuration |\n|---|---|\n")
	for _, c := range r.Configs {
		fmt.Fprintf(w, "| %s | %s |\n", c[0], c[1])
	}
	fmt.Fprintln(w)
}
