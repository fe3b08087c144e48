package quality

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what cmd/quality writes as JSON and cmd/report renders.
type Report struct {
	Config  Config
	Stacks  []StackConfig
	Results []Result
}

// StackConfig says how one library was configured.
type StackConfig struct{ Name, Config string }

// Markdown writes the quality tables of r: one per scenario, then the
// configurations and what each stack left behind.
func Markdown(w io.Writer, r Report) {
	cfg := r.Config
	fmt.Fprintf(w, "%d calls from %d goroutines per library and scenario, each on a fresh loopback `httptest` server and a fresh clone of `http.DefaultTransport`, calls made with `client.Do` and no context of their own (as `client.Get` does). ", cfg.Calls, cfg.Workers)
	if cfg.Procs > 1 {
		fmt.Fprintf(w, "Each library ran in a process of its own, %d at a time (latencies here are timeouts and backoff, not CPU). ", cfg.Procs)
	}
	fmt.Fprintf(w, "Every library gets 3 attempts, a breaker, a %s timeout per attempt and exponential backoff %s–%s (jitter as the library does it). ", cfg.Options.AttemptTimeout, cfg.Options.BackoffBase, cfg.Options.BackoffMax)
	fmt.Fprintf(w, "*Failed fast*: failed in under %s. *Left*: goroutines (client and server side) and server connections still there after the calls returned, idle connections were closed and up to %s passed.\n\n", cfg.FastFail, cfg.Settle)
	for _, sc := range Scenarios(cfg) {
		fmt.Fprintf(w, "#### %s\n\n", sc.Title)
		throttle := sc.Mode == Throttle
		fmt.Fprint(w, "| library | upstream requests | per call | succeeded | failed fast | p50 | p99 |")
		if throttle {
			fmt.Fprint(w, " retries before Retry-After | requests inside another call's Retry-After |")
		}
		fmt.Fprint(w, " goroutines left | connections left | run time |\n|---|--:|--:|--:|--:|--:|--:|")
		if throttle {
			fmt.Fprint(w, "--:|--:|")
		}
		fmt.Fprint(w, "--:|--:|--:|\n")
		for _, res := range r.Results {
			if res.Scenario != sc.Mode {
				continue
			}
			name := res.Library
			if name == "breakwater" {
				name = "**breakwater**"
			}
			fmt.Fprintf(w, "| %s | %d | %.2f | %d | %d | %s | %s |", name, res.Requests, float64(res.Requests)/float64(res.Calls),
				res.Succeeded, res.FailedFast, round(res.P50), round(res.P99))
			if throttle {
				fmt.Fprintf(w, " %d | %d |", res.EarlyRetries, res.EarlyAny)
			}
			wall := round(res.Wall).String()
			if res.Aborted {
				wall += " (aborted)"
			}
			fmt.Fprintf(w, " %d | %d | %s |\n", res.Goroutines, res.Conns, wall)
		}
		fmt.Fprintln(w)
	}

	var left []string
	for _, res := range r.Results {
		if len(res.LeftBy) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(res.LeftBy)) {
			parts = append(parts, fmt.Sprintf("%d × `%s`", res.LeftBy[k], k))
		}
		left = append(left, fmt.Sprintf("- %s, %s: %s", res.Library, res.Scenario, strings.Join(parts, ", ")))
	}
	if len(left) > 0 {
		fmt.Fprint(w, "Goroutines left, by the function that started them:\n\n", strings.Join(left, "\n"), "\n\n")
	}

	fmt.Fprint(w, "Configurations:\n\n| library | configuration |\n|---|---|\n")
	for _, st := range r.Stacks {
		fmt.Fprintf(w, "| %s | %s |\n", st.Name, st.Config)
	}
	fmt.Fprintln(w)
}

// Find returns the result of library in scenario.
func (r Report) Find(library string, scenario Mode) (Result, bool) {
	for _, res := range r.Results {
		if res.Library == library && res.Scenario == scenario {
			return res, true
		}
	}
	return Result{}, false
}

// Total returns the run's wall time, all scenarios included.
func (r Report) Total() time.Duration {
	var d time.Duration
	for _, res := range r.Results {
		d += res.Wall
	}
	return d
}
