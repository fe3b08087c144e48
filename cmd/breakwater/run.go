package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/timeline"
)

// exitError ends the command with an exit status: 1 for failed checks, 2
// for a usage error (as any other error).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

const usage = `usage:
  breakwater explain  [config flags]
  breakwater simulate [config flags] [scenario flags] [-svg FILE]
  breakwater check    [config flags] [scenario flags] -assert EXPR [-assert EXPR...]
  breakwater config   [config flags]     print the configuration as JSON
  breakwater help     [command]

A configuration comes from -config FILE (JSON, the schema of breakwater.Config)
and from the config flags, which override the file.

check runs the simulation and exits with status 1 when an assertion fails, and
with status 2 on any other error (a flag, a configuration, a file). An
assertion is NAME OP VALUE with OP one of <= < >= > == !=:
  opens        the call that opened the breaker ("never": it did not)
  opened-at    when it opened, in virtual time ("never")
  worst-call   the longest call
  attempts     requests the upstream saw
  calls, succeeded, failed, rejected, unfinished   calls by outcome
  elapsed      the virtual time simulated
For example: -assert 'opens<=15' -assert 'worst-call<=5s' -assert 'attempts<=60'.
`

// run is the whole command: args without the program name. Warnings go
// to stderr; the error it returns is for main to print.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return usageError("no command")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "explain", "simulate", "check", "config":
	case "help", "-h", "-help", "--help":
		if len(args) > 0 {
			return command(ctx, args[0], []string{"-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stdout, usage)
		return usageError("unknown command %q", cmd)
	}
	return command(ctx, cmd, args, stdout, stderr)
}

func command(_ context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("breakwater "+cmd, flag.ContinueOnError)
	// A bad flag is one line on stderr (main prints the error); -h prints
	// every flag.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cf := addConfigFlags(fs)
	var sf *scenarioFlags
	if cmd == "simulate" || cmd == "check" {
		sf = addScenarioFlags(fs)
	}
	var svg, title string
	if cmd == "simulate" || cmd == "check" {
		fs.StringVar(&svg, "svg", "", "draw the simulation as an SVG timeline into `FILE`")
		fs.StringVar(&title, "title", "", "the timeline's title (default: the scenario)")
	}
	var asserts assertions
	if cmd == "check" {
		fs.Var(&asserts, "assert", "an assertion `EXPR`, such as 'opens<=15' (repeatable)")
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintf(stdout, "Usage of %s:\n", fs.Name())
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return usageError("%v (breakwater help %s: every flag)", err, cmd)
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := cf.config()
	if err != nil {
		return usageError("%s", unprefixed(err))
	}
	if cmd == "config" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cfg)
	}
	tr, err := breakwater.NewTransport(cfg)
	if err != nil {
		return usageError("%s", unprefixed(err))
	}
	switch cmd {
	case "explain":
		_, err := io.WriteString(stdout, tr.Explain())
		return err
	case "check":
		if len(asserts) == 0 {
			return usageError("check needs at least one -assert")
		}
	}
	scenario, err := sf.scenario(svg != "")
	if err != nil {
		return err
	}
	res, tl, f := simulate(tr, scenario, sf.interval)
	report(stdout, sf, scenario, res, tl, f)
	if scenario.HealthyFor > 0 && res.Elapsed < scenario.HealthyFor {
		fmt.Fprintf(stderr, "breakwater: warning: the simulation ended after %d calls, %s in, before the outage starts at %s: "+
			"nothing above is about the outage (set -duration or -max-calls)\n", res.Calls, seconds(res.Elapsed), seconds(scenario.HealthyFor))
	}
	if svg != "" {
		if title == "" {
			title = sf.describe(scenario)
		}
		if err := writeSVG(svg, tl, title); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "timeline: %s\n", svg)
	}
	if cmd == "check" {
		return asserts.check(stdout, res)
	}
	return nil
}

// facts are what the report says of a recovery and of a strict limiter,
// gathered from the simulation's events.
type facts struct {
	firstOK time.Duration // the first request served after the recovery; -1: none
	// From halfway through the run (a strict limiter's rate learned by
	// then): the requests served, and those answered 429, and since when.
	from              time.Duration
	served, throttled int
	throttledAll      int
}

// simulate runs the scenario, recording its timeline.
func simulate(tr *breakwater.Transport, s breakwater.Scenario, interval time.Duration) (breakwater.SimResult, timeline.Timeline, facts) {
	rec := timeline.New(interval)
	if s.HealthyFor > 0 {
		rec.Phase(0, "healthy", true)
	}
	outage := "outage"
	if s.Limit > 0 {
		outage = "limited to " + strconv.FormatFloat(s.Limit, 'f', -1, 64) + "/s"
	}
	rec.Phase(s.HealthyFor, outage, false)
	recovery := s.HealthyFor + s.FailFor
	if s.FailFor > 0 {
		rec.Phase(recovery, "recovered", true)
	}
	f := facts{firstOK: -1, from: s.Duration / 2}
	s.Observe = func(at time.Duration, e breakwater.Event) {
		rec.Record(at, e)
		if e.Kind != breakwater.EventAttempt {
			return
		}
		switch e.Category {
		case breakwater.Success:
			if s.FailFor > 0 && at >= recovery && f.firstOK < 0 {
				f.firstOK = at - recovery
			}
			if at >= f.from {
				f.served++
			}
		case breakwater.Throttled:
			f.throttledAll++
			if at >= f.from {
				f.throttled++
			}
		}
	}
	res := tr.Simulate(s)
	return res, rec.Timeline(), f
}

func report(w io.Writer, sf *scenarioFlags, s breakwater.Scenario, r breakwater.SimResult, tl timeline.Timeline, f facts) {
	fmt.Fprintf(w, "scenario: %s\n", sf.describe(s))
	if r.OpensAfter > 0 {
		fmt.Fprintf(w, "the breaker opens on call %d, %s in\n", r.OpensAfter, seconds(r.OpenedAt))
	} else {
		fmt.Fprintf(w, "the breaker never opens\n")
	}
	fmt.Fprintf(w, "calls %d: %d succeeded, %d failed, %d rejected, %d unfinished\n", r.Calls, r.Succeeded, r.Failed, r.Rejected, r.Unfinished)
	fmt.Fprintf(w, "requests the upstream saw %d (%.2f per call)\n", r.Attempts, float64(r.Attempts)/float64(max(1, r.Calls)))
	fmt.Fprintf(w, "worst call %s, %s simulated\n", seconds(r.WorstCall), seconds(r.Elapsed))
	if s.FailFor > 0 {
		reportRecovery(w, s.HealthyFor+s.FailFor, r, tl, f)
	}
	if s.Limit > 0 && s.Duration > 0 {
		fmt.Fprintf(w, "the strict limiter answered %d 429s; from %s on it served %.1f/s of its %s/s, with %d 429s\n",
			f.throttledAll, seconds(f.from), float64(f.served)/max(s.Duration-f.from, time.Second).Seconds(), strconv.FormatFloat(s.Limit, 'f', -1, 64), f.throttled)
	}
	if len(tl.Transitions) > 0 {
		fmt.Fprintln(w, "breaker transitions:")
		for _, t := range tl.Transitions {
			fmt.Fprintf(w, "  %8s  %s\n", seconds(t.At), timeline.Describe(t.Transition))
		}
	}
}

// reportRecovery says how soon after the upstream's recovery at rec the
// calls were served again and the breaker closed.
func reportRecovery(w io.Writer, rec time.Duration, r breakwater.SimResult, tl timeline.Timeline, f facts) {
	if r.Elapsed < rec {
		fmt.Fprintf(w, "the simulation ends before the upstream recovers at %s\n", seconds(rec))
		return
	}
	fmt.Fprintf(w, "the upstream recovers at %s: ", seconds(rec))
	if f.firstOK >= 0 {
		fmt.Fprintf(w, "the first request served %s after", seconds(f.firstOK))
	} else {
		fmt.Fprintf(w, "no request served before the end")
	}
	var open bool
	for _, t := range tl.Transitions {
		switch {
		case t.At < rec:
			open = t.To != breakwater.StateClosed
		case t.To == breakwater.StateClosed:
			fmt.Fprintf(w, ", the breaker closes %s after\n", seconds(t.At-rec))
			return
		default:
			open = true
		}
	}
	if open {
		fmt.Fprintf(w, ", the breaker does not close before the end\n")
		return
	}
	fmt.Fprintf(w, ", the breaker was closed\n")
}

func writeSVG(path string, tl timeline.Timeline, title string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := timeline.WriteSVG(f, tl, title); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// seconds prints a duration as "850ms", "3.3s" or "2m5s".
func seconds(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
