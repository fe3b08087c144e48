package status

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

// Rows per table: the default and the most a request may ask for.
const (
	DefaultRows = 50
	MaxRows     = 500
)

// state is the JSON the page polls.
type state struct {
	Title    string    `json:"title"`
	At       time.Time `json:"at"`
	Refresh  float64   `json:"refresh_seconds"`
	Controls bool      `json:"controls"`
	// Limit is the most rows a table holds.
	Limit int `json:"limit"`
	// Trouble is what is wrong now in the sources shown.
	Trouble troubleState  `json:"trouble"`
	Sources []sourceState `json:"sources"`
}

type sourceState struct {
	Name    string `json:"name"`
	Explain string `json:"explain,omitempty"`
	// CanTrip and CanResume say which controls the source supports.
	CanTrip   bool `json:"can_trip,omitempty"`
	CanResume bool `json:"can_resume,omitempty"`
	// A table is absent when the source holds no such component.
	Breakers  *table[breakwater.BreakerSnapshot]   `json:"breakers,omitempty"`
	Pauses    *table[breakwater.PauseSnapshot]     `json:"pauses,omitempty"`
	Buckets   *table[breakwater.RateLimitSnapshot] `json:"buckets,omitempty"`
	Bulkheads *table[breakwater.BulkheadSnapshot]  `json:"bulkheads,omitempty"`
	// Fleet holds the counts of a [Counts] source.
	Fleet *table[countRow] `json:"fleet,omitempty"`
	// Insights is absent when no breakwater.WithInsights observes the
	// source; InsightsOff is set for a Transport without them.
	Insights    []breakwater.Insight `json:"insights,omitzero"`
	InsightsOff bool                 `json:"insights_off,omitempty"`
}

// table is one page of a ranked, filtered list of per-key states.
type table[T any] struct {
	// Total is the number of keys; Matched those that match the filter;
	// Rows the page of them starting at Offset.
	Total   int `json:"total"`
	Matched int `json:"matched"`
	Offset  int `json:"offset"`
	// Counts counts keys by state (breakers) or condition (paused,
	// limited, saturated), over all keys.
	Counts map[string]int `json:"counts,omitempty"`
	Rows   []T            `json:"rows"`
}

// query is what a state request asks for.
type query struct {
	source  string // "" for all
	filter  string
	limit   int
	offsets map[string]int // "<source index>.<table>" → offset
}

func parseQuery(v url.Values) query {
	q := query{source: v.Get("source"), filter: v.Get("q"), limit: DefaultRows, offsets: map[string]int{}}
	if n, err := strconv.Atoi(v.Get("limit")); err == nil && n > 0 {
		q.limit = min(n, MaxRows)
	}
	// o=<source index>.<table>.<offset>, repeated.
	for _, o := range v["o"] {
		i := strings.LastIndexByte(o, '.')
		if i < 0 {
			continue
		}
		if n, err := strconv.Atoi(o[i+1:]); err == nil && n > 0 {
			q.offsets[o[:i]] = n
		}
	}
	return q
}

func (p *Page) serveState(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r.URL.Query())
	st := p.state(q)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	_ = enc.Encode(st)
}

func (p *Page) state(q query) state {
	st := state{Title: p.cfg.title, At: time.Now(), Refresh: p.cfg.refresh.Seconds(), Controls: p.cfg.controls, Limit: q.limit, Sources: []sourceState{}}
	st.Trouble = troubleState{Counts: map[string]int{}, Rows: []troubleRow{}}
	for i, src := range p.cfg.sources {
		if q.source != "" && q.source != src.name {
			continue
		}
		snap := src.snap.Snapshot()
		st.Trouble.add(i, src.name, snap, st.At)
		_, transport := src.snap.(*breakwater.Transport)
		ss := sourceState{Name: src.name, Explain: src.explain, Insights: snap.Insights, InsightsOff: transport && snap.Insights == nil}
		bs, gates := breakersOf(src.snap), pauseGatesOf(src.snap)
		ss.CanTrip, ss.CanResume = bs != nil, gates != nil
		prefix := strconv.Itoa(i) + "."
		if bs != nil || len(snap.Breakers) > 0 {
			ss.Breakers = page(snap.Breakers, q, q.offsets[prefix+"breakers"],
				func(b breakwater.BreakerSnapshot) string { return b.Key }, compareBreakers,
				func(b breakwater.BreakerSnapshot) string { return b.StateName })
		}
		if gates != nil || len(snap.Pauses) > 0 {
			ss.Pauses = page(snap.Pauses, q, q.offsets[prefix+"pauses"],
				func(s breakwater.PauseSnapshot) string { return s.Key }, comparePauses,
				pauseClass)
		}
		if _, ok := src.snap.(*breakwater.RateLimiters); ok || len(snap.RateLimiters) > 0 {
			ss.Buckets = page(snap.RateLimiters, q, q.offsets[prefix+"buckets"],
				func(s breakwater.RateLimitSnapshot) string { return s.Key }, compareBuckets,
				func(s breakwater.RateLimitSnapshot) string { return flag(s.Limited, "limited") })
		}
		if _, ok := src.snap.(*breakwater.Bulkheads); ok || len(snap.Bulkheads) > 0 {
			ss.Bulkheads = page(snap.Bulkheads, q, q.offsets[prefix+"bulkheads"],
				func(s breakwater.BulkheadSnapshot) string { return s.Key }, compareBulkheads,
				func(s breakwater.BulkheadSnapshot) string { return flag(s.Saturated, "saturated") })
		}
		if c, ok := src.snap.(*Counts); ok {
			ss.Fleet = page(c.rows(), q, q.offsets[prefix+"fleet"],
				func(r countRow) string { return r.Key }, compareCounts, shedClass)
		}
		st.Sources = append(st.Sources, ss)
	}
	st.Trouble.finish()
	return st
}

// pauseClass counts a gate as paused, or else as paced while a learned
// rate holds its key's requests back.
func pauseClass(s breakwater.PauseSnapshot) string {
	if s.Paused {
		return "paused"
	}
	return flag(s.Paced, "paced")
}

func flag(on bool, name string) string {
	if on {
		return name
	}
	return ""
}

// page ranks rows by compare, keeps those whose key contains the filter,
// and returns limit of them from offset, with counts by class over all
// rows. It sorts indices, not the (large) rows themselves.
func page[T any](rows []T, q query, offset int, key func(T) string, compare func(a, b T) int, class func(T) string) *table[T] {
	t := &table[T]{Total: len(rows), Counts: map[string]int{}, Rows: []T{}}
	kept := make([]int32, 0, len(rows))
	for i := range rows {
		if c := class(rows[i]); c != "" {
			t.Counts[c]++
		}
		if q.filter == "" || strings.Contains(key(rows[i]), q.filter) {
			kept = append(kept, int32(i))
		}
	}
	t.Matched = len(kept)
	slices.SortFunc(kept, func(a, b int32) int {
		if c := compare(rows[a], rows[b]); c != 0 {
			return c
		}
		return strings.Compare(key(rows[a]), key(rows[b]))
	})
	t.Offset = min(offset, max(0, len(kept)-1))
	t.Offset -= t.Offset % max(1, q.limit) // whole pages
	for _, i := range kept[t.Offset:min(len(kept), t.Offset+q.limit)] {
		t.Rows = append(t.Rows, rows[i])
	}
	return t
}

// Trouble first: open breakers (longest to go first), half-open ones, then
// closed ones with the most failures and the most recent failure.
func compareBreakers(a, b breakwater.BreakerSnapshot) int {
	return cmp.Or(
		cmp.Compare(b.State, a.State), // open, half-open, closed
		cmp.Compare(b.Remaining, a.Remaining),
		cmp.Compare(b.Failures, a.Failures),
		cmp.Compare(b.Opens, a.Opens),
		b.LastFailureAt.Compare(a.LastFailureAt),
	)
}

// Paused first (longest to go first), then paced (slowest first).
func comparePauses(a, b breakwater.PauseSnapshot) int {
	return cmp.Or(compareBool(a.Paused, b.Paused), cmp.Compare(b.Remaining, a.Remaining),
		compareBool(a.Paced, b.Paced), cmp.Compare(a.PaceRate, b.PaceRate))
}

func compareBuckets(a, b breakwater.RateLimitSnapshot) int {
	fill := func(s breakwater.RateLimitSnapshot) float64 { return s.Tokens / float64(max(1, s.Burst)) }
	return cmp.Or(compareBool(a.Limited, b.Limited), cmp.Compare(b.RetryAfter, a.RetryAfter), cmp.Compare(fill(a), fill(b)))
}

func compareBulkheads(a, b breakwater.BulkheadSnapshot) int {
	use := func(s breakwater.BulkheadSnapshot) float64 { return float64(s.InFlight) / float64(max(1, s.Limit)) }
	return cmp.Or(compareBool(a.Saturated, b.Saturated), cmp.Compare(b.Queued, a.Queued), cmp.Compare(use(b), use(a)))
}

// compareBool puts true first.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
