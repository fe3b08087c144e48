package status_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
	"github.com/breakwater-go/breakwater/status"
)

// troubleOf is the head of the state JSON and which tables each source
// shows.
type troubleOf struct {
	Trouble struct {
		Counts   map[string]int `json:"counts"`
		Total    int            `json:"total"`
		Findings int            `json:"findings"`
		Rows     []struct {
			Kind, Source, Key, What, Detail string
		} `json:"rows"`
	} `json:"trouble"`
	Sources []map[string]json.RawMessage `json:"sources"`
}

func readTrouble(t *testing.T, h http.Handler) troubleOf {
	t.Helper()
	var s troubleOf
	if err := json.Unmarshal(get(t, h, "/state?q=nothing-matches").Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The head of the state lists every key in trouble, worst first whatever
// source it is in and whatever the filter: open breakers, half-open ones,
// pauses, spent retry budgets, full bulkheads; each in plain words.
func TestTroubleWorstFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, 0)
		var err error
		if reg.bs, err = bw.NewBreakers(bw.WithPolicy(bw.Consecutive(5)), bw.WithOpenTimeout(5*time.Second, time.Minute), bw.WithOpenJitter(0)); err != nil {
			t.Fatal(err)
		}
		reg.bs.Get("half").Trip(time.Second)
		time.Sleep(2 * time.Second)
		for range 5 {
			reg.bs.Get("open").RecordFailure(bw.ServerError)
		}
		reg.bs.Get("calm").RecordFailure(bw.ServerError)
		reg.gates.Pause("paused", time.Minute)

		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Status: http.StatusInternalServerError})
		tr, err := bw.NewTransport(bw.WithBase(u.Transport()), bw.WithBackoff(bw.Constant(0)),
			bw.WithRetryBudget(0.1, 1, 10*time.Second), bw.WithoutBreaker(), bw.WithInsights(true))
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: tr}
		for range 6 {
			if resp, err := client.Get("http://upstream.test/"); err == nil {
				resp.Body.Close()
			}
		}
		slots, err := bw.NewBulkheads(1)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := slots.Acquire(t.Context(), "full")
		if err != nil {
			t.Fatal(err)
		}
		defer slot.Release()

		h := newPage(t, status.Source("outbound", tr), status.Source("inbound", slots), status.Source("registry", reg))
		s := readTrouble(t, h)
		var got []string
		for _, r := range s.Trouble.Rows {
			got = append(got, r.Kind+" "+r.Source+" "+r.Key+": "+r.What+": "+r.Detail)
		}
		want := []string{
			"breaker_open registry open: breaker open: rejects calls for 5s more, then lets a probe through; opened on 5 failures (threshold 5) 0s ago; last failure: server error",
			"breaker_half_open registry half: breaker half-open: admits only probes: 0 in flight, 0 succeeded; open time elapsed 1s ago",
			"paused registry paused: paused: holds its calls for 1m0s more",
			"retry_budget_spent outbound http://upstream.test: retry budget spent: 3 retries on 6 calls, 0.6000000000000001 allowed: failures return unretried",
			"bulkhead_saturated inbound full: bulkhead full: 1 of 1 slots taken",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("trouble:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if s.Trouble.Total != 5 || s.Trouble.Counts[status.TroublePaused] != 1 {
			t.Errorf("total %d, counts %v", s.Trouble.Total, s.Trouble.Counts)
		}

		// A source shows the tables of what it holds, and the insights
		// only when it can have them.
		for i, want := range [][]string{{"breakers", "pauses", "insights"}, {"bulkheads"}, {"breakers", "pauses"}} {
			var has []string
			for _, f := range []string{"breakers", "pauses", "buckets", "bulkheads", "insights", "insights_off"} {
				if _, ok := s.Sources[i][f]; ok {
					has = append(has, f)
				}
			}
			if strings.Join(has, " ") != strings.Join(want, " ") {
				t.Errorf("source %d shows %v, want %v", i, has, want)
			}
		}

		// Healthy again, nothing is left to report.
		slot.Release()
		reg.bs.Get("open").Reset()
		reg.bs.Get("half").Reset()
		reg.gates.Resume("paused")
		time.Sleep(10 * time.Second) // the budget's window
		if s := readTrouble(t, h); s.Trouble.Total != 0 || len(s.Trouble.Rows) != 0 {
			t.Fatalf("trouble once healthy: %+v", s.Trouble)
		}
	})
}

// At most TroubleRows keys are listed, the rest counted.
func TestTroubleIsBounded(t *testing.T) {
	reg := newRegistry(t, 1000)
	for i := range 300 {
		reg.bs.Get(strings.Replace("host-0000", "0000", string(rune('a'+i%26))+strings.Repeat("x", i/26), 1)).Trip(time.Minute)
	}
	s := readTrouble(t, newPage(t, status.Source("many", reg)))
	if s.Trouble.Total != 300 || len(s.Trouble.Rows) != status.TroubleRows || s.Trouble.Counts[status.TroubleBreakerOpen] != 300 {
		t.Fatalf("total %d, %d rows, counts %v", s.Trouble.Total, len(s.Trouble.Rows), s.Trouble.Counts)
	}
}
