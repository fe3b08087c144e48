package status

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

// Kinds of trouble, worst first: an open breaker rejects every call to
// its key, a half-open one all but its probes; a pause holds or refuses
// every call to its key until it ends; a spent retry budget lets calls
// through but returns their failures unretried; a saturated bulkhead
// queues or refuses only the calls beyond its limit.
const (
	TroubleBreakerOpen       = "breaker_open"
	TroubleBreakerHalfOpen   = "breaker_half_open"
	TroublePaused            = "paused"
	TroubleRetryBudgetSpent  = "retry_budget_spent"
	TroubleBulkheadSaturated = "bulkhead_saturated"
)

var troubleRank = map[string]int{
	TroubleBreakerOpen: 0, TroubleBreakerHalfOpen: 1, TroublePaused: 2, TroubleRetryBudgetSpent: 3, TroubleBulkheadSaturated: 4,
}

// TroubleRows is the most rows of trouble the state holds; the rest are
// counted.
const TroubleRows = 20

// troubleState is what is wrong now, over every key of the sources shown,
// whatever the filter: the head of the page.
type troubleState struct {
	// Counts counts the keys in trouble by kind; Total is their sum.
	Counts map[string]int `json:"counts"`
	Total  int            `json:"total"`
	// Rows are the worst TroubleRows of them: by kind, then by source, then
	// as the source's table ranks them.
	Rows []troubleRow `json:"rows"`
	// Findings counts the insights of the sources shown.
	Findings int `json:"findings"`
}

// troubleRow is one key in trouble, said in plain words.
type troubleRow struct {
	Kind   string `json:"kind"`
	Source string `json:"source"`
	Key    string `json:"key"`
	// What names the trouble ("breaker open"); Detail says how bad, and
	// why when the state knows.
	What   string `json:"what"`
	Detail string `json:"detail"`

	src  int // the source's index
	item any // the key's snapshot, to rank rows of the same kind
}

// add appends the trouble in snap, the snapshot of source i, to t.
func (t *troubleState) add(i int, name string, snap breakwater.Snapshot, now time.Time) {
	row := func(kind, key, what, detail string, item any) {
		t.Counts[kind]++
		t.Rows = append(t.Rows, troubleRow{Kind: kind, Source: name, Key: key, What: what, Detail: detail, src: i, item: item})
	}
	for _, b := range snap.Breakers {
		switch b.State {
		case breakwater.StateOpen:
			row(TroubleBreakerOpen, b.Key, "breaker open", openDetail(b, now), b)
		case breakwater.StateHalfOpen:
			row(TroubleBreakerHalfOpen, b.Key, "breaker half-open", halfOpenDetail(b, now), b)
		}
	}
	for _, p := range snap.Pauses {
		if p.Paused {
			row(TroublePaused, p.Key, "paused", "holds its calls for "+seconds(p.Remaining)+" more", p)
		}
	}
	for _, r := range snap.RetryBudgets {
		if r.Spent {
			row(TroubleRetryBudgetSpent, r.Key, "retry budget spent",
				fmt.Sprintf("%d retries on %d calls, %s allowed: failures return unretried", r.Retries, r.Calls, strconv.FormatFloat(r.Allowed, 'f', -1, 64)), r)
		}
	}
	for _, b := range snap.Bulkheads {
		if b.Saturated {
			d := fmt.Sprintf("%d of %d slots taken", b.InFlight, b.Limit)
			if b.Queued > 0 {
				d += fmt.Sprintf(", %d waiting", b.Queued)
			}
			row(TroubleBulkheadSaturated, b.Key, "bulkhead full", d, b)
		}
	}
	t.Findings += len(snap.Insights)
}

// finish ranks the rows, worst first, and keeps the first TroubleRows.
func (t *troubleState) finish() {
	slices.SortFunc(t.Rows, func(a, b troubleRow) int {
		if c := cmp.Or(cmp.Compare(troubleRank[a.Kind], troubleRank[b.Kind]), cmp.Compare(a.src, b.src)); c != 0 {
			return c
		}
		return cmp.Or(compareItems(a.item, b.item), strings.Compare(a.Key, b.Key))
	})
	t.Total = len(t.Rows)
	t.Rows = t.Rows[:min(len(t.Rows), TroubleRows)]
}

// compareItems ranks two states of the same kind (from the same source)
// as their table does.
func compareItems(a, b any) int {
	switch a := a.(type) {
	case breakwater.BreakerSnapshot:
		return compareBreakers(a, b.(breakwater.BreakerSnapshot))
	case breakwater.PauseSnapshot:
		return comparePauses(a, b.(breakwater.PauseSnapshot))
	case breakwater.RetryBudgetSnapshot:
		b := b.(breakwater.RetryBudgetSnapshot)
		return cmp.Compare(b.Retries, a.Retries)
	case breakwater.BulkheadSnapshot:
		return compareBulkheads(a, b.(breakwater.BulkheadSnapshot))
	}
	return 0
}

// reasons says why a breaker is in its state.
var reasons = map[breakwater.Reason]string{
	breakwater.ReasonFailures:        "opened on failures",
	breakwater.ReasonProbeFailed:     "a probe failed",
	breakwater.ReasonOpenElapsed:     "open time elapsed",
	breakwater.ReasonProbesSucceeded: "probes succeeded",
	breakwater.ReasonTrip:            "tripped by hand",
	breakwater.ReasonReset:           "reset by hand",
	breakwater.ReasonRecovery:        "a recovery signal",
	breakwater.ReasonCluster:         "set by another replica",
}

func reasonWords(r breakwater.Reason) string {
	if w, ok := reasons[r]; ok {
		return w
	}
	return strings.ReplaceAll(string(r), "_", " ")
}

// openDetail says since when an open breaker is open, why, on how many
// failures, and when it lets a probe through.
func openDetail(b breakwater.BreakerSnapshot, now time.Time) string {
	parts := []string{"rejects calls for " + seconds(b.Remaining) + " more, then lets a probe through"}
	parts = append(parts, since(b, now)...)
	if b.LastFailure != "" {
		parts = append(parts, "last failure: "+strings.ReplaceAll(b.LastFailure, "_", " "))
	}
	if b.Opens > 1 {
		parts = append(parts, fmt.Sprintf("opening %d in a row", b.Opens))
	}
	return strings.Join(parts, "; ")
}

// halfOpenDetail says how a half-open breaker's probes are doing.
func halfOpenDetail(b breakwater.BreakerSnapshot, now time.Time) string {
	parts := []string{fmt.Sprintf("admits only probes: %d in flight, %d succeeded", b.ProbesInFlight, b.ProbeSuccesses)}
	parts = append(parts, since(b, now)...)
	if b.LastFailure != "" {
		parts = append(parts, "last failure: "+strings.ReplaceAll(b.LastFailure, "_", " "))
	}
	return strings.Join(parts, "; ")
}

// since says why and since when a breaker is in its state, and what
// opened it.
func since(b breakwater.BreakerSnapshot, now time.Time) []string {
	ago := seconds(now.Sub(b.Since)) + " ago"
	on := ""
	if b.OpenedOn > 0 {
		on = fmt.Sprintf("opened on %d %s (threshold %d)", b.OpenedOn, plural(b.OpenedOn, "failure", "failures"), b.Threshold)
	}
	switch {
	case b.Reason == breakwater.ReasonFailures && on != "":
		return []string{on + " " + ago}
	case b.Reason == "":
		return nil
	case on != "":
		return []string{reasonWords(b.Reason) + " " + ago, "first " + on}
	}
	return []string{reasonWords(b.Reason) + " " + ago}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// seconds formats d as the page does: "850ms", "4.2s", "3m5s".
func seconds(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + "s"
	}
	return d.Round(time.Second).String()
}
