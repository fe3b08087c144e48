package timeline_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/internal/svgcheck"
	"github.com/breakwater-go/breakwater/timeline"
)

const s = time.Second

func TestRecorderCounts(t *testing.T) {
	r := timeline.New(time.Second)
	openErr := fmt.Errorf("open: %w", bw.ErrCircuitOpen)
	busyErr := fmt.Errorf("busy: %w", bw.ErrHalfOpenBusy)
	pauseErr := fmt.Errorf("paused: %w", bw.ErrPaused)
	events := []struct {
		at time.Duration
		e  bw.Event
	}{
		{0, bw.Event{Kind: bw.EventCallStart}},
		{100 * time.Millisecond, bw.Event{Kind: bw.EventAttempt, Category: bw.ServerError}},
		{100 * time.Millisecond, bw.Event{Kind: bw.EventRetry}},
		{900 * time.Millisecond, bw.Event{Kind: bw.EventCallStart}},
		{1100 * time.Millisecond, bw.Event{Kind: bw.EventAttempt, Category: bw.Success}},
		{1100 * time.Millisecond, bw.Event{Kind: bw.EventCallEnd, Category: bw.Success}}, // started in interval 0, ended in 1
		{1200 * time.Millisecond, bw.Event{Kind: bw.EventAttempt, Category: bw.ServerError}},
		{1200 * time.Millisecond, bw.Event{Kind: bw.EventReject, Mechanism: bw.MechRetryBudget, Err: bw.ErrRetryBudget}},
		{1200 * time.Millisecond, bw.Event{Kind: bw.EventCallEnd, Category: bw.ServerError, Status: 502}},
		{1300 * time.Millisecond, bw.Event{Kind: bw.EventTransition, Transition: &bw.Transition{Key: "k", From: bw.StateClosed, To: bw.StateOpen, Reason: bw.ReasonFailures}}},
		{2000 * time.Millisecond, bw.Event{Kind: bw.EventCallStart}},
		{2000 * time.Millisecond, bw.Event{Kind: bw.EventCallEnd, Category: bw.Rejected, Err: openErr}},
		{2100 * time.Millisecond, bw.Event{Kind: bw.EventCallStart}},
		{2100 * time.Millisecond, bw.Event{Kind: bw.EventCallEnd, Category: bw.Rejected, Err: fmt.Errorf("after 2 attempts: %w", busyErr)}},
		{2200 * time.Millisecond, bw.Event{Kind: bw.EventCallStart}},
		{2200 * time.Millisecond, bw.Event{Kind: bw.EventReject, Mechanism: bw.MechPause, Delay: 500 * time.Millisecond, Err: pauseErr}},
		{2200 * time.Millisecond, bw.Event{Kind: bw.EventCallEnd, Category: bw.Rejected, Err: pauseErr}},
		{3500 * time.Millisecond, bw.Event{Kind: bw.EventWait, Mechanism: bw.MechPause, Duration: 800 * time.Millisecond}},
		{3600 * time.Millisecond, bw.Event{Kind: bw.EventTransition, Transition: &bw.Transition{Key: "k", From: bw.StateOpen, To: bw.StateHalfOpen}}},
		{3700 * time.Millisecond, bw.Event{Kind: bw.EventTransition, Transition: &bw.Transition{Key: "k", From: bw.StateHalfOpen, To: bw.StateClosed}}},
		{-time.Second, bw.Event{Kind: bw.EventCallStart}},              // dropped
		{timeline.MaxIntervals * s, bw.Event{Kind: bw.EventCallStart}}, // dropped
	}
	for _, ev := range events {
		r.Record(ev.at, ev.e)
	}
	tl := r.Timeline()
	if len(tl.Intervals) != 4 {
		t.Fatalf("%d intervals, want 4", len(tl.Intervals))
	}
	iv := tl.Intervals
	check := func(name string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	check("started[0]", iv[0].Started, 2)
	check("ended[0]", iv[0].Ended, 0)
	check("retries[0]", iv[0].Retries, 1)
	check("ended[1]", iv[1].Ended, 2)
	check("succeeded[1]", iv[1].Succeeded, 1)
	check("failed[1]", iv[1].Failed, 1)
	check("attempts[1]", iv[1].Attempts, 2)
	check("failed attempts[1]", iv[1].FailedAttempts, 1)
	check("budget refused[1]", iv[1].BudgetRefused, 1)
	check("breaker open[2]", iv[2].Rejected[timeline.BreakerOpen], 1)
	check("half-open busy[2]", iv[2].Rejected[timeline.HalfOpenBusy], 1)
	check("paused[2]", iv[2].Rejected[timeline.Paused], 1)
	check("rejected total[2]", iv[2].RejectedTotal(), 3)
	for i, v := range iv {
		if got := v.Succeeded + v.Failed + v.Canceled + v.RejectedTotal(); got != v.Ended {
			t.Errorf("interval %d: outcomes add up to %d, ended %d", i, got, v.Ended)
		}
	}
	// Paused: [2.2s, 2.7s) from the refusal, [2.7s, 3.5s) from the wait.
	if iv[2].Paused != 800*time.Millisecond || iv[3].Paused != 500*time.Millisecond {
		t.Errorf("paused %s and %s, want 800ms and 500ms", iv[2].Paused, iv[3].Paused)
	}
	want := []timeline.Span{
		{From: 0, To: 1300 * time.Millisecond, State: bw.StateClosed},
		{From: 1300 * time.Millisecond, To: 3600 * time.Millisecond, State: bw.StateOpen},
		{From: 3600 * time.Millisecond, To: 3700 * time.Millisecond, State: bw.StateHalfOpen},
		{From: 3700 * time.Millisecond, To: 3700 * time.Millisecond, State: bw.StateClosed},
	}
	if !equalSpans(tl.States, want) {
		t.Errorf("states %v, want %v", tl.States, want)
	}
}

func equalSpans(a, b []timeline.Span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// With several keys, the band shows the worst state among them.
func TestStatesWorstAcrossKeys(t *testing.T) {
	r := timeline.New(time.Second)
	tr := func(at time.Duration, key string, from, to bw.State) {
		r.Record(at, bw.Event{Kind: bw.EventTransition, Transition: &bw.Transition{Key: key, From: from, To: to}})
	}
	tr(1*s, "a", bw.StateClosed, bw.StateOpen)
	tr(2*s, "b", bw.StateClosed, bw.StateHalfOpen) // a still open: no change
	tr(3*s, "a", bw.StateOpen, bw.StateClosed)     // b half-open is now the worst
	tr(4*s, "b", bw.StateHalfOpen, bw.StateClosed)
	r.Record(5*s, bw.Event{Kind: bw.EventCallStart})
	got := r.Timeline().States
	want := []timeline.Span{
		{From: 0, To: 1 * s, State: bw.StateClosed},
		{From: 1 * s, To: 3 * s, State: bw.StateOpen},
		{From: 3 * s, To: 4 * s, State: bw.StateHalfOpen},
		{From: 4 * s, To: 5 * s, State: bw.StateClosed},
	}
	if !equalSpans(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
}

// svgDoc is what a test reads back from a drawing.
type svgDoc struct {
	ids    map[string]map[string]string // id → attributes
	states map[string]bool              // data-state values of the breaker band
	phases []string
	health []string // endpoint:tier of the health marks, in order
	title  string
}

// parseSVG checks that b is well-formed XML with an <svg> root whose
// elements all lie inside its viewBox, and collects the elements that
// carry an id.
func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	if err := svgcheck.Check(bytes.NewReader(b)); err != nil {
		t.Errorf("the picture reaches outside its viewBox:\n%v", err)
	}
	doc := svgDoc{ids: map[string]map[string]string{}, states: map[string]bool{}}
	dec := xml.NewDecoder(bytes.NewReader(b))
	depth := 0
	inTitle := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (el.Name.Local != "svg" || el.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v, want svg", el.Name)
			}
			depth++
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if id := attrs["id"]; id != "" {
				doc.ids[id] = attrs
			}
			if st := attrs["data-state"]; st != "" {
				doc.states[st] = true
			}
			if ph := attrs["data-phase"]; ph != "" {
				doc.phases = append(doc.phases, ph)
			}
			if attrs["class"] == "health" {
				doc.health = append(doc.health, attrs["data-endpoint"]+":"+attrs["data-health"])
			}
			inTitle = el.Name.Local == "title" && attrs["id"] == "title"
		case xml.EndElement:
			depth--
			inTitle = false
		case xml.CharData:
			if inTitle {
				doc.title += string(el)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced document")
	}
	return doc
}

func TestWriteSVG(t *testing.T) {
	r := timeline.New(time.Second)
	r.Phase(0, "healthy", true)
	r.Phase(2*s, "5xx <storm> & more", false)
	for i := range 5 {
		at := time.Duration(i) * s
		r.Record(at, bw.Event{Kind: bw.EventCallStart})
		r.Record(at, bw.Event{Kind: bw.EventAttempt, Category: bw.Success})
		r.Record(at, bw.Event{Kind: bw.EventCallEnd, Category: bw.Success})
	}
	r.Record(2500*time.Millisecond, bw.Event{Kind: bw.EventRetry})
	r.Record(3100*time.Millisecond, bw.Event{Kind: bw.EventHedge, Attempt: 2, Hedge: true})
	r.Record(3200*time.Millisecond, bw.Event{Kind: bw.EventHedge, Attempt: 3, Hedge: true})
	r.Record(4500*time.Millisecond, bw.Event{Kind: bw.EventHealth, Key: "k", Endpoint: "http://a.test", Health: bw.HealthHealthy, Reason: bw.ReasonProbesSucceeded})
	r.Record(1500*time.Millisecond, bw.Event{Kind: bw.EventHealth, Key: "k", Endpoint: "http://a.test", Health: bw.HealthEjected, Reason: bw.ReasonOutlier})
	r.Record(2600*time.Millisecond, bw.Event{Kind: bw.EventCallEnd, Category: bw.Rejected, Err: bw.ErrCircuitOpen})
	r.Record(2600*time.Millisecond, bw.Event{Kind: bw.EventTransition, Transition: &bw.Transition{Key: "k", To: bw.StateOpen, Reason: bw.ReasonFailures}})
	var b bytes.Buffer
	if err := timeline.WriteSVG(&b, r.Timeline(), `outage "A" <1>`); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b.Bytes())
	if doc.title != `outage "A" <1>` {
		t.Errorf("title %q", doc.title)
	}
	for _, id := range []string{"band-upstream", "band-breaker", "band-paused", "paused-values", "axes", "legend", "sent", "retried", "hedged", "health-changes",
		"calls-succeeded", "calls-failed", "calls-breaker_open", "calls-half_open_busy", "calls-paused", "calls-rate_limited", "calls-concurrency", "calls-other"} {
		if _, ok := doc.ids[id]; !ok {
			t.Errorf("no element with id %q", id)
		}
	}
	for id, want := range map[string]string{
		"calls-succeeded":    "1,1,1,1,1",
		"calls-breaker_open": "0,0,1,0,0",
		"sent":               "1,1,1,1,1",
		"retried":            "0,0,1,0,0",
		"hedged":             "0,0,0,2,0",
	} {
		if got := doc.ids[id]["data-values"]; got != want {
			t.Errorf("%s data-values %q, want %q", id, got, want)
		}
	}
	if !doc.states["closed"] || !doc.states["open"] {
		t.Errorf("breaker band states %v, want closed and open", doc.states)
	}
	if strings.Join(doc.phases, "|") != "healthy|5xx <storm> & more" {
		t.Errorf("phases %q", doc.phases)
	}
	if got := strings.Join(doc.health, " "); got != "http://a.test:ejected http://a.test:healthy" {
		t.Errorf("health marks %q, want the ejection, then the return", got)
	}
	if !strings.Contains(b.String(), "endpoint ejected") {
		t.Error("the legend does not explain the health marks")
	}
}

// Without a failover there is no health mark, and the legend does not
// explain one.
func TestWriteSVGWithoutFailover(t *testing.T) {
	r := timeline.New(time.Second)
	r.Record(0, bw.Event{Kind: bw.EventCallStart})
	var b bytes.Buffer
	if err := timeline.WriteSVG(&b, r.Timeline(), "x"); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b.Bytes())
	if _, ok := doc.ids["health-changes"]; ok || strings.Contains(b.String(), "endpoint ejected") {
		t.Error("health marks drawn for a timeline without any")
	}
}

// A 429 answered is counted per interval and drawn as its own line, which
// the legend explains; a timeline without any draws none.
func TestWriteSVGDrawsThrottled(t *testing.T) {
	r := timeline.New(time.Second)
	r.Record(0, bw.Event{Kind: bw.EventAttempt, Category: bw.Success, Status: 200})
	r.Record(1100*time.Millisecond, bw.Event{Kind: bw.EventAttempt, Category: bw.Throttled, Status: 429})
	r.Record(1200*time.Millisecond, bw.Event{Kind: bw.EventAttempt, Category: bw.Throttled, Status: 429})
	r.Record(2100*time.Millisecond, bw.Event{Kind: bw.EventAttempt, Category: bw.ServerError, Status: 502})
	tl := r.Timeline()
	if got := [3]int{tl.Intervals[0].Throttled, tl.Intervals[1].Throttled, tl.Intervals[2].Throttled}; got != [3]int{0, 2, 0} {
		t.Fatalf("throttled per interval %v, want [0 2 0]", got)
	}
	var b bytes.Buffer
	if err := timeline.WriteSVG(&b, tl, "x"); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b.Bytes())
	if got := doc.ids["throttled"]["data-values"]; got != "0,2,0" {
		t.Errorf("throttled data-values %q, want 0,2,0", got)
	}
	if !strings.Contains(b.String(), "429s the upstream answered") {
		t.Error("the legend does not explain the 429s")
	}
	b.Reset()
	r = timeline.New(time.Second)
	r.Record(0, bw.Event{Kind: bw.EventAttempt, Category: bw.ServerError, Status: 502})
	if err := timeline.WriteSVG(&b, r.Timeline(), "x"); err != nil {
		t.Fatal(err)
	}
	if doc := parseSVG(t, b.Bytes()); doc.ids["throttled"] != nil || strings.Contains(b.String(), "429s") {
		t.Error("a 429 line drawn for a timeline without any")
	}
}

// A Recorder on a Transport with failover and hedging counts the hedges it
// sent and records the ejection of the endpoint that failed.
func TestRecorderSeesHedgesAndEjections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstreamFunc(t, func(n int, r *http.Request) breakwatertest.Step {
			if r.Host == "bad.test" {
				return breakwatertest.Step{Status: 500}
			}
			if n%4 == 0 {
				return breakwatertest.Step{Delay: 300 * time.Millisecond} // slow enough to be hedged
			}
			return breakwatertest.Step{}
		})
		rec := timeline.New(time.Second)
		tr, err := bw.NewTransport(bw.WithBase(u.Transport()), bw.WithObserver(rec),
			bw.WithFailover(bw.Failover{Endpoints: []string{"http://bad.test", "http://good1.test", "http://good2.test"}}),
			bw.WithHedging(bw.Hedging{Delay: 50 * time.Millisecond}))
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		tl := rec.Timeline()
		hedges := 0
		for _, iv := range tl.Intervals {
			hedges += iv.Hedges
		}
		if hedges == 0 {
			t.Error("no hedge recorded")
		}
		if len(tl.Health) == 0 || tl.Health[0].Endpoint != "http://bad.test" || tl.Health[0].Health != bw.HealthEjected || tl.Health[0].Key == "" {
			t.Errorf("health changes %+v, want bad.test ejected first", tl.Health)
		}
		t.Logf("%d hedges; health changes %+v", hedges, tl.Health)
	})
}

// An empty timeline still draws a valid document.
func TestWriteSVGEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := timeline.WriteSVG(&b, timeline.New(0).Timeline(), ""); err != nil {
		t.Fatal(err)
	}
	parseSVG(t, b.Bytes())
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteSVGReportsWriteErrors(t *testing.T) {
	if err := timeline.WriteSVG(failWriter{}, timeline.New(0).Timeline(), "x"); err == nil {
		t.Fatal("no error from a failing writer")
	}
}

// A Recorder given to a real Transport sees the breaker open during an
// outage, and every call it saw start ends in one of its counts.
func TestRecorderOnTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := true
		u := breakwatertest.NewPipeUpstreamFunc(t, func(int, *http.Request) breakwatertest.Step {
			if failing {
				return breakwatertest.Step{Status: http.StatusBadGateway}
			}
			return breakwatertest.Step{Body: []byte("ok")}
		})
		rec := timeline.New(time.Second)
		tr, err := bw.NewTransport(bw.WithBase(u.Transport()), bw.WithObserver(rec),
			bw.WithPolicy(bw.Consecutive(3)), bw.WithOpenTimeout(2*s, 2*s), bw.WithOpenJitter(0))
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: tr}
		for i := range 40 {
			if i == 20 {
				failing = false
			}
			resp, err := client.Get(u.URL)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(250 * time.Millisecond)
		}
		tl := rec.Timeline()
		var started, ended, rejected int
		for _, iv := range tl.Intervals {
			started += iv.Started
			ended += iv.Ended
			rejected += iv.Rejected[timeline.BreakerOpen]
		}
		if started != 40 || ended != 40 {
			t.Errorf("started %d, ended %d, want 40 and 40", started, ended)
		}
		if rejected == 0 {
			t.Error("no call rejected by the open breaker")
		}
		var opened, closed bool
		for _, s := range tl.States {
			opened = opened || s.State == bw.StateOpen
			closed = closed || s.State == bw.StateClosed && s.From > 0
		}
		if !opened || !closed {
			t.Errorf("states %v: want an opening and a close after recovery", tl.States)
		}
		var b bytes.Buffer
		if err := timeline.WriteSVG(&b, tl, "pipe outage"); err != nil {
			t.Fatal(err)
		}
		parseSVG(t, b.Bytes())
	})
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		tr   bw.Transition
		want string
	}{
		{bw.Transition{From: bw.StateClosed, To: bw.StateOpen, Reason: bw.ReasonFailures, Failures: 11, Category: bw.ServerError, OpenFor: 5500 * time.Millisecond, Opens: 1},
			"breaker opened: 11 failures reached its threshold (last: server_error); rejects calls for 5.5s"},
		{bw.Transition{From: bw.StateHalfOpen, To: bw.StateOpen, Reason: bw.ReasonProbeFailed, Category: bw.Timeout, OpenFor: 10 * time.Second, Opens: 2},
			"breaker reopened: a probe failed (timeout); rejects calls for 10s (opening 2 in a row: probes grow rarer as the outage ages)"},
		{bw.Transition{From: bw.StateClosed, To: bw.StateOpen, Reason: bw.ReasonTrip, OpenFor: 250 * time.Millisecond},
			"breaker tripped by hand; rejects calls for 250ms"},
		{bw.Transition{From: bw.StateOpen, To: bw.StateHalfOpen, Reason: bw.ReasonOpenElapsed},
			"breaker half-open: its open time elapsed; lets a few probes through, rejects the rest"},
		{bw.Transition{From: bw.StateHalfOpen, To: bw.StateClosed, Reason: bw.ReasonProbesSucceeded},
			"breaker closed: its probes succeeded; admits every call again"},
		{bw.Transition{From: bw.StateOpen, To: bw.StateClosed, Reason: bw.ReasonReset},
			"breaker reset by hand; admits every call again"},
	} {
		if got := timeline.Describe(tc.tr); got != tc.want {
			t.Errorf("Describe(%v → %v, %s)\n got %q\nwant %q", tc.tr.From, tc.tr.To, tc.tr.Reason, got, tc.want)
		}
	}
}

// Every element of a picture lies inside its viewBox, whatever the
// timeline holds: the legend's rows wrap onto as many lines as they need,
// and the picture grows to hold them.
func TestWriteSVGInsideViewBox(t *testing.T) {
	long := strings.Repeat("a long title about a long outage, ", 6)
	for name, tl := range map[string]func() timeline.Timeline{
		"empty": func() timeline.Timeline { return timeline.New(0).Timeline() },
		"one interval, long phase names": func() timeline.Timeline {
			r := timeline.New(time.Second)
			r.Phase(0, strings.Repeat("healthy ", 20), true)
			r.Phase(500*time.Millisecond, strings.Repeat("failing ", 20), false)
			r.Record(0, bw.Event{Kind: bw.EventCallEnd, Category: bw.Success})
			return r.Timeline()
		},
		"ten minutes, every series, ejections": func() timeline.Timeline {
			r := timeline.New(10 * time.Second)
			for i := range 600 {
				at := time.Duration(i) * time.Second
				r.Record(at, bw.Event{Kind: bw.EventAttempt, Category: bw.ServerError})
				r.Record(at, bw.Event{Kind: bw.EventRetry})
				r.Record(at, bw.Event{Kind: bw.EventCallEnd, Category: bw.Rejected, Err: bw.ErrCircuitOpen})
			}
			r.Record(5*time.Minute, bw.Event{Kind: bw.EventHealth, Key: "k", Endpoint: "http://a.test", Health: bw.HealthEjected, Reason: bw.ReasonOutlier})
			return r.Timeline()
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := timeline.WriteSVG(&b, tl(), long); err != nil {
				t.Fatal(err)
			}
			parseSVG(t, b.Bytes())
		})
	}
}

// The timelines the README shows (docs/, drawn by scripts/screenshots.sh)
// lie inside their viewBoxes too.
func TestDocsPicturesInsideViewBox(t *testing.T) {
	for _, name := range []string{"../docs/simulated-outage.svg", "../docs/client-timeline.svg"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := svgcheck.Check(bytes.NewReader(b)); err != nil {
			t.Errorf("%s reaches outside its viewBox (run scripts/screenshots.sh):\n%v", name, err)
		}
	}
}

// A probe lasts one attempt, well under a pixel of a minute's drawing, or
// no time at all when it is answered at once: the breaker band still
// shows each half-open stretch as a band, as wide as the open one after
// it allows.
func TestHalfOpenDrawnAsBand(t *testing.T) {
	r := timeline.New(time.Second)
	tr := func(at time.Duration, from, to bw.State) {
		r.Record(at, bw.Event{Kind: bw.EventTransition, Transition: &bw.Transition{Key: "k", From: from, To: to}})
	}
	tr(1*s, bw.StateClosed, bw.StateOpen)
	tr(10*s, bw.StateOpen, bw.StateHalfOpen)
	tr(10*s, bw.StateHalfOpen, bw.StateOpen) // answered at once
	tr(20*s, bw.StateOpen, bw.StateHalfOpen)
	tr(20*s+20*time.Millisecond, bw.StateHalfOpen, bw.StateClosed)
	r.Record(60*s, bw.Event{Kind: bw.EventCallStart})
	tl := r.Timeline()
	want := []timeline.Span{
		{From: 0, To: 1 * s, State: bw.StateClosed},
		{From: 1 * s, To: 10 * s, State: bw.StateOpen},
		{From: 10 * s, To: 10 * s, State: bw.StateHalfOpen},
		{From: 10 * s, To: 20 * s, State: bw.StateOpen},
		{From: 20 * s, To: 20*s + 20*time.Millisecond, State: bw.StateHalfOpen},
		{From: 20*s + 20*time.Millisecond, To: 60 * s, State: bw.StateClosed},
	}
	if !equalSpans(tl.States, want) {
		t.Fatalf("states %v, want %v", tl.States, want)
	}
	var b bytes.Buffer
	if err := timeline.WriteSVG(&b, tl, "probes"); err != nil {
		t.Fatal(err)
	}
	parseSVG(t, b.Bytes())
	var widths []float64
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.Contains(line, `data-state="half_open"`) {
			continue
		}
		var x, w float64
		var y, h int
		if _, err := fmt.Sscanf(line, `<rect x="%g" y="%d" width="%g" height="%d"`, &x, &y, &w, &h); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		widths = append(widths, w)
	}
	if len(widths) != 2 || widths[0] < 3 || widths[1] < 3 {
		t.Errorf("half-open rects %v wide, want two of at least 3 px", widths)
	}
	if !strings.Contains(b.String(), "breaker half-open") {
		t.Error("the legend has no entry for half-open")
	}
}
