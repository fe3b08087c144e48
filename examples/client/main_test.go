package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/internal/svgcheck"
	"github.com/breakwater-go/breakwater/timeline"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pageWatcher is the demo's output: it remembers the status page's URL
// from the line that announces it, and fetches the page when a line
// containing at is written, recording the answer's status (0: the page
// could not be reached).
type pageWatcher struct {
	bytes.Buffer
	at     string
	url    string
	status int
	seen   chan struct{} // closed once the line with at is written
	client *http.Client
}

var statusPageURL = regexp.MustCompile(`status page (http://\S+/debug/breakwater/)`)

func newPageWatcher(at string) *pageWatcher {
	return &pageWatcher{at: at, seen: make(chan struct{}), client: &http.Client{Transport: &http.Transport{}}}
}

func (w *pageWatcher) Write(p []byte) (int, error) {
	if w.url == "" {
		if m := statusPageURL.FindSubmatch(p); m != nil {
			w.url = string(m[1])
		}
	}
	if w.url != "" && w.status == 0 && bytes.Contains(p, []byte(w.at)) {
		w.status = w.get()
		close(w.seen)
	}
	return w.Buffer.Write(p)
}

// get fetches the status page and returns the answer's status, 0 when it
// cannot be reached.
func (w *pageWatcher) get() int {
	defer w.client.CloseIdleConnections()
	resp, err := w.client.Get(w.url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The demo runs through every phase, explains itself, prints counts that
// add up, and writes a well-formed timeline; it leaves nothing running.
// It says which timeouts it scales and why, labels every row it prints,
// and serves its status page until its last line.
func TestRun(t *testing.T) {
	out := newPageWatcher("timeline of the run")
	svg := filepath.Join(t.TempDir(), "timeline.svg")
	if err := run(context.Background(), []string{"-phase", "300ms", "-workers", "2", "-svg", svg}, out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"as Explain describes it", "circuit breaker", "What the columns count", "healthy", "recovered",
		"summary over", "requests the upstream saw", "breaker transitions", "insights", "timeline of the run", svg,
		"scaled to phases of 300ms (the defaults suit outages of minutes): call timeout 300ms (default 30s), attempt timeout 75ms (default 10s)",
		"breaker open 100ms at first, up to 300ms (default 100ms, then 1/32 of the outage's age, up to 60s)",
		"served until the run ends, in about 1.5s (-keep: until Ctrl-C after it)",
		"  note      what the row shows"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if out.url == "" || out.status != http.StatusOK {
		t.Errorf("status page %q answered %d when the run printed its last line, want 200", out.url, out.status)
	}
	// Every row of counts ends with a note after the breaker's state.
	rows := regexp.MustCompile(`(?m)^ *\d+\.\ds  .*│.*│.*$`).FindAllString(text, -1)
	labelled := regexp.MustCompile(`  (closed|half_open|open) +\S.*$`)
	if len(rows) < 5 {
		t.Fatalf("%d rows printed:\n%s", len(rows), text)
	}
	for _, r := range rows {
		if !labelled.MatchString(r) {
			t.Errorf("row without a note: %q", r)
		}
	}
	// The summary's sums hold.
	m := regexp.MustCompile(`ended (\d+) = ok (\d+) \+ failed (\d+) \+ rejected (\d+) \+ abandoned when the demo stopped (\d+)`).FindStringSubmatch(text)
	r := regexp.MustCompile(`rejected (\d+) = breaker open (\d+) \+ half-open busy (\d+) \+ paused (\d+) \+ other limits (\d+)`).FindStringSubmatch(text)
	s := regexp.MustCompile(`calls started (\d+), ended (\d+)`).FindStringSubmatch(text)
	if m == nil || r == nil || s == nil {
		t.Fatalf("no summary sums in:\n%s", text)
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	if n(m[1]) != n(m[2])+n(m[3])+n(m[4])+n(m[5]) || n(r[1]) != n(r[2])+n(r[3])+n(r[4])+n(r[5]) || n(m[4]) != n(r[1]) || n(s[1]) != n(s[2]) || n(s[2]) != n(m[1]) {
		t.Errorf("the summary does not add up:\n%s\n%s\n%s", s[0], m[0], r[0])
	}
	if b, err := os.ReadFile(svg); err != nil {
		t.Fatal(err)
	} else if err := svgcheck.Check(bytes.NewReader(b)); err != nil {
		t.Errorf("the timeline reaches outside its viewBox:\n%v", err)
	}
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("timeline is not well-formed XML: %v", err)
		}
	}
}

// With -keep, the status page stays up after the run until the context
// ends (Ctrl-C), and the demo says so.
func TestRunKeepsPageUntilInterrupted(t *testing.T) {
	out := newPageWatcher("press Ctrl-C to stop")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-phase", "100ms", "-workers", "1", "-keep", "-svg", filepath.Join(t.TempDir(), "t.svg")}, out)
	}()
	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("run returned before Ctrl-C: %v\n%s", err, out.String())
	}
	if out.status != http.StatusOK {
		t.Errorf("status page answered %d after the run, want 200", out.status)
	}
	if again := out.get(); again != http.StatusOK {
		t.Errorf("status page answered %d a second time after the run, want 200", again)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if after := out.get(); after != 0 {
		t.Errorf("status page answered %d after Ctrl-C, want it closed", after)
	}
	if !strings.Contains(out.String(), "served until Ctrl-C after the run") {
		t.Errorf("output does not say how long the page stays up:\n%s", out.String())
	}
}

// The defaults the demo names are the library's: a default Transport's
// Explain states them.
func TestDefaults(t *testing.T) {
	tr, err := breakwater.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	explain := tr.Explain()
	for _, want := range []string{
		`call timeout\s+` + fmtDuration(defaultCallTimeout) + `\n`,
		`attempt timeout\s+` + fmtDuration(defaultAttemptTimeout) + `\n`,
		`probes\s+an opening lasts ` + fmtDuration(defaultOpenTimeout) + ` while the outage is young \(its first [^)]*\), then 1/32 of its age, at most ` + fmtDuration(defaultMaxOpenTimeout) + ` `,
	} {
		if !regexp.MustCompile(want).MatchString(explain) {
			t.Errorf("a default Transport's Explain does not match %q:\n%s", want, explain)
		}
	}
}

// Each row's note explains it; a row of zeros says why nothing moved.
func TestNote(t *testing.T) {
	iv := func(started, ended, ok, failed int, rejected map[string]int) timeline.Interval {
		return timeline.Interval{Start: 7 * time.Second, Started: started, Ended: ended, Succeeded: ok, Failed: failed, Rejected: rejected}
	}
	cases := []struct {
		name string
		iv   timeline.Interval
		st   rowState
		want string
	}{
		{"all ok", iv(10, 10, 10, 0, nil), rowState{}, "all answered"},
		{"breaker open", iv(10, 10, 0, 2, map[string]int{timeline.BreakerOpen: 8}), rowState{}, "2 failed after retries; 8 refused, breaker open"},
		{"paused refusals", iv(3, 3, 0, 0, map[string]int{timeline.Paused: 3}), rowState{pausedUntil: 8200 * time.Millisecond},
			"3 refused: the host is paused until 8.2s, longer than they could wait"},
		{"zeros while paused", iv(0, 0, 0, 0, nil), rowState{inFlight: 8, pausedUntil: 8200 * time.Millisecond},
			"0 sent: the host is paused until 8.2s (the upstream's Retry-After); 8 calls wait at the pause gate"},
		{"a probe while paused", timeline.Interval{Start: 7 * time.Second, Attempts: 1}, rowState{inFlight: 8, pausedUntil: 8200 * time.Millisecond},
			"only 1 sent, to probe: the host is paused until 8.2s (the upstream's Retry-After); 8 calls wait at the pause gate"},
		{"attempts, no call ends", timeline.Interval{Start: 7 * time.Second, Attempts: 2}, rowState{inFlight: 4}, "no call ended: all 4 in flight wait for answers (2 attempts sent)"},
		{"zeros while calls hang", iv(0, 0, 0, 0, nil), rowState{inFlight: 4}, "0 sent: all 4 calls in flight are waiting, for an answer or a probe's"},
		{"zeros after the run", iv(0, 0, 0, 0, nil), rowState{over: true}, "run over: nothing left in flight"},
		{"nothing ended", iv(4, 0, 0, 0, nil), rowState{inFlight: 4}, "none ended: 4 calls in flight"},
		{"no calls", iv(0, 0, 0, 0, nil), rowState{}, "no calls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := note(tc.iv, tc.st); got != tc.want {
				t.Errorf("note = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), []string{"-workers", "0"}, &bytes.Buffer{}); err == nil {
		t.Fatal("-workers 0 accepted")
	}
}
