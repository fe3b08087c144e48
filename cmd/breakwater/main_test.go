package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/svgcheck"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out, io.Discard)
	return out.String(), err
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A file and flags make one configuration, flags winning; explain prints
// what the library's Explain says about it.
func TestExplainFileAndFlags(t *testing.T) {
	file := writeFile(t, "bw.json", `{"retry": {"max_attempts": 4}, "breaker": {"policy": "consecutive", "threshold": 5}}`)
	out, err := runCmd(t, "explain", "-config", file, "-max-attempts", "2", "-category-threshold", "server_error=2")
	if err != nil {
		t.Fatal(err)
	}
	var c breakwater.Config
	c.Retry.MaxAttempts = 2
	c.Breaker.Policy, c.Breaker.Threshold = "consecutive", 5
	c.Breaker.CategoryThresholds = map[string]int{"server_error": 2}
	tr, err := breakwater.NewTransport(c)
	if err != nil {
		t.Fatal(err)
	}
	if out != tr.Explain() {
		t.Fatalf("explain printed\n%s\nthe library says\n%s", out, tr.Explain())
	}
	if !strings.Contains(out, "opens on call 2 ") {
		t.Fatalf("explain does not say the breaker opens on call 2:\n%s", out)
	}
}

// config prints the schema the library loads.
func TestConfigRoundTrips(t *testing.T) {
	out, err := runCmd(t, "config", "-call-timeout", "2s", "-attempt-timeout", "off", "-policy", "window", "-tolerate", "0", "-open-jitter", "0", "-no-retry-budget")
	if err != nil {
		t.Fatal(err)
	}
	c, err := breakwater.ParseConfig([]byte(out))
	if err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	if c.CallTimeout != breakwater.Duration(2e9) || c.AttemptTimeout >= 0 || c.Breaker.Policy != "window" || c.Breaker.Jitter == nil || !c.Retry.Budget.Off {
		t.Fatalf("config %+v from\n%s", c, out)
	}
	again, err := runCmd(t, "config", "-config", writeFile(t, "c.json", out))
	if err != nil || again != out {
		t.Fatalf("config of its own output: %v\n%s\nwant\n%s", err, again, out)
	}
}

// simulate's default scenario is a few callers at a human pace: 40 calls a
// second, whose failures and probes a timeline can show, not a single
// caller's thousands.
func TestSimulateDefaultScenario(t *testing.T) {
	out, err := runCmd(t, "simulate")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"scenario: 4 callers (100ms apart), upstream 500s for good", "the breaker opens on call 11, 300ms in"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// simulate -svg draws a well-formed timeline with every series.
func TestSimulateSVG(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "outage.svg")
	out, err := runCmd(t, "simulate", "-callers", "4", "-think", "100ms", "-attempt-time", "20ms",
		"-healthy-for", "5s", "-fail-for", "20s", "-duration", "40s", "-open-timeout", "2s", "-svg", svg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"scenario: 4 callers (100ms apart), upstream healthy for 5s, then 500s for 20s, then healthy",
		"the breaker opens on call", "breaker opened:", "breaker closed:", "timeline: " + svg} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svgcheck.Check(bytes.NewReader(b)); err != nil {
		t.Errorf("the timeline reaches outside its viewBox:\n%v", err)
	}
	ids := map[string]string{}
	states := map[string]bool{}
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			var id, values string
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "data-values":
					values = a.Value
				case "data-state":
					states[a.Value] = true
				}
			}
			if id != "" {
				ids[id] = values
			}
		}
	}
	for _, id := range []string{"band-upstream", "band-breaker", "band-paused", "sent", "retried", "calls-succeeded", "calls-failed", "calls-breaker_open"} {
		if _, ok := ids[id]; !ok {
			t.Errorf("no %q series", id)
		}
	}
	if strings.Trim(ids["calls-breaker_open"], "0,") == "" || strings.Trim(ids["calls-succeeded"], "0,") == "" {
		t.Errorf("series: rejected %q, succeeded %q", ids["calls-breaker_open"], ids["calls-succeeded"])
	}
	if !states["open"] || !states["closed"] {
		t.Errorf("breaker band states %v", states)
	}
}

// svgSeries returns the data-values of every element with an id in the
// SVG file at path.
func svgSeries(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := svgcheck.Check(bytes.NewReader(b)); err != nil {
		t.Errorf("the timeline reaches outside its viewBox:\n%v", err)
	}
	ids := map[string]string{}
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ids
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			var id, values, phase string
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "data-values":
					values = a.Value
				case "data-phase":
					phase = a.Value
				}
			}
			if id != "" {
				ids[id] = values
			}
			if phase != "" {
				ids["phase "+phase] = ""
			}
		}
	}
}

// simulate of an outage that ends says how soon the upstream was served
// again and the breaker closed, and draws the recovery.
func TestSimulateRecovery(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "recovery.svg")
	out, err := runCmd(t, "simulate", "-healthy-for", "10s", "-fail-for", "20s", "-duration", "60s", "-svg", svg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"upstream healthy for 10s, then 500s for 20s, then healthy",
		"the upstream recovers at 30s: the first request served ", ", the breaker closes "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	ids := svgSeries(t, svg)
	for _, id := range []string{"phase healthy", "phase outage", "phase recovered", "band-breaker"} {
		if _, ok := ids[id]; !ok {
			t.Errorf("the timeline has no %q", id)
		}
	}
	out, err = runCmd(t, "simulate", "-healthy-for", "10s", "-fail-for", "20s", "-duration", "20s")
	if err != nil || !strings.Contains(out, "the simulation ends before the upstream recovers at 30s") {
		t.Errorf("a run that ends before the recovery: %v\n%s", err, out)
	}
}

// simulate -outage strict_limiter meets an upstream serving -limit
// requests a second, says at what rate it was served once learned, and
// draws its 429s.
func TestSimulateStrictLimiterCommand(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "strict.svg")
	out, err := runCmd(t, "simulate", "-outage", "strict_limiter", "-limit", "10", "-duration", "60s", "-svg", svg)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"upstream a strict limiter of 10/s (429 + Retry-After 1s beyond it) for good",
		"the breaker never opens", "from 30s on it served 8.8/s of its 10/s, with 3 429s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	ids := svgSeries(t, svg)
	if _, ok := ids["phase limited to 10/s"]; !ok {
		t.Errorf("the timeline has no phase \"limited to 10/s\": %v", ids)
	}
	if v, ok := ids["throttled"]; !ok || strings.Trim(v, "0,") == "" {
		t.Errorf("the timeline's 429s: %q", v)
	}
	for _, bad := range []string{"0", "-1"} {
		if _, err := runCmd(t, "simulate", "-outage", "strict_limiter", "-limit", bad); exitCode(err) != 2 {
			t.Errorf("-limit %s: exit %d (%v), want 2", bad, exitCode(err), err)
		}
	}
}

// check exits 1 when an assertion fails, 2 on a bad one, 0 when all hold.
func TestCheck(t *testing.T) {
	out, err := runCmd(t, "check", "-policy", "window", "-tolerate", "14", "-assert", "opens<=15", "-assert", "worst-call <= 5s", "-assert", "rejected==0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "ok   opens<=15 (opens is 15)") {
		t.Errorf("output:\n%s", out)
	}
	out, err = runCmd(t, "check", "-policy", "window", "-tolerate", "20", "-assert", "opens<=15", "-assert", "attempts<=100")
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL opens<=15 (opens is 21)") || !strings.Contains(err.Error(), "1 of 2 checks failed") {
		t.Fatalf("exit %d (%v)\n%s", exitCode(err), err, out)
	}
	out, err = runCmd(t, "check", "-outage", "timeout", "-call-timeout", "off", "-attempt-timeout", "off", "-assert", "opens==never", "-assert", "unfinished==4")
	if err != nil {
		t.Fatalf("an unbounded hang: %v\n%s", err, out)
	}
	for _, bad := range [][]string{
		{"check"},
		{"check", "-assert", "opens~3"},
		{"check", "-assert", "speed<=3"},
		{"check", "-assert", "worst-call<=3"},
		{"simulate", "-outage", "meteor"},
		{"explain", "extra"},
		{"explain", "-max-attempts", "three"},
		{},
		{"frobnicate"},
	} {
		if _, err := runCmd(t, bad...); exitCode(err) != 2 {
			t.Errorf("%q: exit %d (%v), want 2", bad, exitCode(err), err)
		}
	}
}

// Under fault injection and a failure rate, every command gives the same
// output, and check the same verdict, for the same flags and seed; -seed
// chooses the draws.
func TestCommandsAreDeterministic(t *testing.T) {
	for _, args := range [][]string{
		{"check", "-fault-injection", "0.25", "-assert", "opens<=25"},
		{"check", "-fault-injection", "0.25", "-failure-rate", "0.5", "-callers", "4", "-duration", "30s", "-seed", "9", "-assert", "rejected<=1000"},
		{"simulate", "-fault-injection", "0.5", "-outage", "throttled", "-duration", "20s"},
		{"explain", "-fault-injection", "0.25"},
	} {
		first, firstErr := runCmd(t, args...)
		for range 10 {
			out, err := runCmd(t, args...)
			if out != first || exitCode(err) != exitCode(firstErr) {
				t.Fatalf("%q: exit %d then %d, output\n%s\nthen\n%s", args, exitCode(firstErr), exitCode(err), first, out)
			}
		}
	}
	seen := map[string]bool{}
	for seed := range 10 {
		out, _ := runCmd(t, "simulate", "-fault-injection", "0.25", "-healthy-for", "1h", "-max-calls", "50", "-seed", strconv.Itoa(seed))
		seen[out] = true
	}
	if len(seen) < 2 {
		t.Error("10 seeds gave one simulation: -seed is not used")
	}
}

func TestBadConfigFile(t *testing.T) {
	file := writeFile(t, "bad.json", `{"retry": {"max_atempts": 4}}`)
	if _, err := runCmd(t, "explain", "-config", file); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("error %v, want one naming the file", err)
	}
	if _, err := runCmd(t, "explain", "-policy", "sometimes"); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("error %v, want one naming the policy", err)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"help", "check"}, {"simulate", "-h"}} {
		out, err := runCmd(t, args...)
		if err != nil || out == "" {
			t.Errorf("%q: %v, output %q", args, err, out)
		}
	}
}

// The README's configuration file parses, and the README's check of it
// passes.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "### The `breakwater` command"); i >= 0 {
		section = section[i:]
	} else {
		t.Fatal("README has no section on the command")
	}
	start := strings.Index(section, "```json\n")
	end := strings.Index(section[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("README's command section has no JSON block")
	}
	file := writeFile(t, "breakwater.json", section[start+8:start+8+end])
	out, err := runCmd(t, "check", "-config", file, "-assert", "opens<=15", "-assert", "worst-call<=5s")
	if err != nil {
		t.Fatalf("the README's check fails: %v\n%s", err, out)
	}
}

// Every picture the command draws lies inside its viewBox: simulate's and
// check's, with the default duration and with a long title.
func TestSVGInsideViewBox(t *testing.T) {
	for _, args := range [][]string{
		{"simulate"},
		{"simulate", "-outage", "throttled", "-retry-after", "2s", "-callers", "8", "-duration", "5m", "-title", strings.Repeat("a long title ", 20)},
		{"check", "-healthy-for", "10s", "-fail-for", "5s", "-duration", "30s", "-assert", "calls>=1"},
	} {
		svg := filepath.Join(t.TempDir(), "t.svg")
		if out, err := runCmd(t, append(args, "-svg", svg)...); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		f, err := os.Open(svg)
		if err != nil {
			t.Fatal(err)
		}
		if err := svgcheck.Check(f); err != nil {
			t.Errorf("%q: the timeline reaches outside its viewBox:\n%v", args, err)
		}
		f.Close()
	}
}

// runMain runs the command as main does: what it prints on stdout and on
// stderr, and its exit status.
func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errs bytes.Buffer
	code = exit(run(context.Background(), args, &out, &errs), &errs)
	return out.String(), errs.String(), code
}

// check exits 1 only for a failed assertion, and 2 for any other error:
// a usage error, a configuration that does not load or build, a file it
// cannot write.
func TestCheckExitStatus(t *testing.T) {
	bad := writeFile(t, "bad.json", `{"retry": {"base": "5x"}}`)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"check", "-assert", "opens<=15"}, 0},
		{[]string{"check", "-assert", "opens<=3"}, 1},
		{[]string{"check", "-config", bad, "-assert", "opens<=15"}, 2},
		{[]string{"check", "-config", filepath.Join(t.TempDir(), "missing.json"), "-assert", "opens<=15"}, 2},
		{[]string{"check", "-policy", "sometimes", "-assert", "opens<=15"}, 2},
		{[]string{"check", "-max-attempts", "-1", "-assert", "opens<=15"}, 2},
		{[]string{"check", "-assert", "opens<=15", "-svg", filepath.Join(t.TempDir(), "no", "such", "dir.svg")}, 2},
		{[]string{"check", "-assert", "opens<=15", "-callers", "0"}, 2},
		{[]string{"explain", "-config", bad}, 2},
	} {
		if _, stderr, code := runMain(t, c.args...); code != c.code {
			t.Errorf("%q: exit %d, want %d\n%s", c.args, code, c.code, stderr)
		}
	}
}

// A run that ends before the outage starts says so on stderr: its
// verdicts are about a healthy upstream only.
func TestCheckWarnsWhenTheOutageNeverStarts(t *testing.T) {
	stdout, stderr, code := runMain(t, "check", "-healthy-for", "10s", "-assert", "opens<=15")
	if code != 1 || !strings.Contains(stdout, "FAIL opens<=15 (opens is never)") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	want := "breakwater: warning: the simulation ended after 100 calls, 2.5s in, before the outage starts at 10s"
	if !strings.Contains(stderr, want) || strings.Contains(stdout, "warning") {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for _, args := range [][]string{
		{"check", "-assert", "opens<=15"},
		{"check", "-healthy-for", "10s", "-duration", "30s", "-assert", "opens<=15"},
		{"simulate", "-healthy-for", "1s", "-think", "100ms"},
	} {
		if _, stderr, _ := runMain(t, args...); strings.Contains(stderr, "warning") {
			t.Errorf("%q: %s", args, stderr)
		}
	}
	if _, stderr, _ := runMain(t, "simulate", "-healthy-for", "1m", "-max-calls", "5"); !strings.Contains(stderr, "before the outage starts at 1m0s") {
		t.Errorf("simulate: stderr %q, want the warning", stderr)
	}
}

// A bad flag or assertion is one line on stderr, not the usage; -h still
// prints every flag.
func TestBadFlagIsOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"check", "-assert", "opens~3"},
		{"check", "-assert", "speed<=3"},
		{"check", "-nonsense"},
		{"simulate", "-callers", "many"},
		{"explain", "-backoff-base", "5x"},
	} {
		stdout, stderr, code := runMain(t, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, one line", args, code, stdout, stderr)
		}
	}
	stdout, _, code := runMain(t, "check", "-h")
	if code != 0 || !strings.Contains(stdout, "Usage of breakwater check:") || !strings.Contains(stdout, "-assert EXPR") {
		t.Errorf("check -h: exit %d\n%s", code, stdout)
	}
}

// Everything the command prints carries its "breakwater: " once, however
// many of the library's errors it joins; a config file's bad duration is
// named by its field.
func TestErrorsArePrefixedOnce(t *testing.T) {
	bad := writeFile(t, "bad.json", `{"retry": {"base": "5x"}}`)
	unknown := writeFile(t, "unknown.json", `{"retry": {"max_atempts": 4}}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "-config", bad}, `breakwater: ` + bad + `: config: retry.base: time: unknown unit "x" in duration "5x"`},
		{[]string{"explain", "-config", unknown}, `breakwater: ` + unknown + `: config: json: unknown field "max_atempts"`},
		{[]string{"explain", "-policy", "sometimes", "-max-attempts", "0"}, `breakwater: config: unknown breaker policy "sometimes"`},
		{[]string{"explain", "-backoff-base", "-1s"}, `breakwater: invalid value "-1s" for flag -backoff-base: duration "-1s" is negative`},
		{[]string{"check", "-outage", "meteor", "-assert", "opens<=1"}, `breakwater: unknown -outage "meteor"`},
		{[]string{"check", "-assert", "opens<=1"}, `breakwater: 1 of 1 checks failed`},
		{[]string{"frobnicate"}, `breakwater: unknown command "frobnicate"`},
	} {
		_, stderr, _ := runMain(t, c.args...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%q: stderr %q, want %q", c.args, stderr, c.want)
		}
		for line := range strings.Lines(stderr) {
			if !strings.HasPrefix(line, "breakwater: ") || strings.Count(line, "breakwater: ") != 1 {
				t.Errorf("%q: line %q", c.args, line)
			}
		}
	}
}
