package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	bw "github.com/breakwater-go/breakwater"
)

// reply is what the self test keeps of a response.
type reply struct {
	status     int
	retryAfter string
	rateLimit  string
	policy     string
	body       string
}

type tester struct {
	ctx    context.Context
	client *http.Client
	base   string
	out    io.Writer
	errs   []error
}

func (t *tester) do(method, path string, header ...string) reply {
	req, err := http.NewRequestWithContext(t.ctx, method, t.base+path, nil)
	if err != nil {
		t.fail("%s %s: %v", method, path, err)
		return reply{}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := t.client.Do(req)
	if err != nil {
		t.fail("%s %s: %v", method, path, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{
		status:     resp.StatusCode,
		retryAfter: resp.Header.Get("Retry-After"),
		rateLimit:  resp.Header.Get("RateLimit"),
		policy:     resp.Header.Get("RateLimit-Policy"),
		body:       strings.TrimSpace(string(b)),
	}
}

func (t *tester) fail(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	t.errs = append(t.errs, err)
	fmt.Fprintln(t.out, "    FAILED:", err)
}

func (t *tester) check(ok bool, format string, args ...any) {
	if !ok {
		t.fail(format, args...)
	}
}

func (t *tester) section(title string) { fmt.Fprintf(t.out, "\n== %s\n", title) }

// selfTest sends requests that make each middleware react and prints what
// came back.
func selfTest(ctx context.Context, a *app, base string, out io.Writer) error {
	t := &tester{ctx: ctx, client: &http.Client{Timeout: 10 * time.Second}, base: base, out: out}
	defer t.client.CloseIdleConnections()
	fmt.Fprintln(out, "self test:")

	t.section("per-client rate limit: GET /api/items/1")
	var codes []string
	var last reply
	for i := range rateBurst + 2 {
		r := t.do("GET", "/api/items/1", "X-Forwarded-For", "203.0.113.10")
		codes = append(codes, fmt.Sprint(r.status))
		if i == 0 {
			fmt.Fprintf(out, "  first response: RateLimit-Policy: %s  RateLimit: %s\n", r.policy, r.rateLimit)
			t.check(r.policy == `"default";q=5;w=5`, "policy %q", r.policy)
		}
		last = r
	}
	fmt.Fprintf(out, "  client 203.0.113.10, %d requests in a row: %s\n", rateBurst+2, strings.Join(codes, " "))
	fmt.Fprintf(out, "  last response: Retry-After: %s  RateLimit: %s\n", last.retryAfter, last.rateLimit)
	t.check(strings.Join(codes, " ") == "200 200 200 200 200 429 429", "statuses %v", codes)
	t.check(last.retryAfter == "1", "Retry-After %q", last.retryAfter)
	other := t.do("GET", "/api/items/1", "X-Forwarded-For", "203.0.113.20")
	fmt.Fprintf(out, "  client 203.0.113.20 meanwhile: %d (its own bucket)\n", other.status)
	t.check(other.status == 200, "second client got %d", other.status)

	t.section("load shedding: 6 requests at once to GET /work?ms=800")
	var mu sync.Mutex
	counts := map[int]int{}
	retryAfters := map[string]bool{}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			r := t.do("GET", "/work?ms=800")
			mu.Lock()
			defer mu.Unlock()
			counts[r.status]++
			if r.status == 503 {
				retryAfters[r.retryAfter] = true
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(out, "  served %d, shed %d (Retry-After %v); at most %d in the handler at once\n",
		counts[200], counts[503], keys(retryAfters), a.working.peak.Load())
	t.check(counts[200] >= shedLimit && counts[503] >= 1 && counts[200]+counts[503] == 6, "statuses %v", counts)
	t.check(a.working.peak.Load() <= shedLimit, "%d at once, limit %d", a.working.peak.Load(), shedLimit)
	for ra := range retryAfters {
		t.check(ra == "1" || ra == "2", "Retry-After %q", ra)
	}
	held := 0
	for _, b := range a.bulkheads.Snapshot().Bulkheads {
		held += b.InFlight
	}
	t.check(held == 0, "%d slots still held", held)

	t.section(fmt.Sprintf("handler timeout %s", handlerTimeout))
	slow := t.do("GET", "/reports/slow")
	fmt.Fprintf(out, "  GET /reports/slow:   %d %s\n", slow.status, slow.body)
	t.check(slow.status == 503 && strings.Contains(slow.body, `"status":503`), "slow report: %d %s", slow.status, slow.body)
	stream := t.do("GET", "/reports/stream")
	fmt.Fprintf(out, "  GET /reports/stream: %d %q (started before the deadline: kept)\n", stream.status, stream.body)
	t.check(stream.status == 200 && stream.body == "first rows", "stream: %d %q", stream.status, stream.body)

	t.section("route breaker: POST /admin/outage?on=1, then GET /orders/7")
	t.do("POST", "/admin/outage?on=1")
	var seq []string
	for range breakerAfter + 2 {
		r := t.do("GET", "/orders/7")
		s := fmt.Sprint(r.status)
		if r.retryAfter != "" {
			s += " (Retry-After " + r.retryAfter + ")"
		}
		seq = append(seq, s)
	}
	fmt.Fprintf(out, "  %s\n", strings.Join(seq, ", "))
	t.check(strings.HasPrefix(strings.Join(seq, ","), "500,500,500,503 (Retry-After 5)"), "sequence %v", seq)
	route, _ := a.breakers.Lookup("/orders/{id}")
	fmt.Fprintf(out, "  breaker for %q: %s\n", "/orders/{id}", route.State())
	t.check(route.State() == bw.StateOpen, "breaker %s", route.State())
	t.do("POST", "/admin/outage?on=0")

	t.section("GET /debug/breakwater/state")
	snap := t.do("GET", "/debug/breakwater/state")
	// The part of the status page's state read here.
	type table struct {
		Total int               `json:"total"`
		Rows  []json.RawMessage `json:"rows"`
	}
	var page struct {
		Sources []struct {
			Name      string `json:"name"`
			Breakers  table  `json:"breakers"`
			Buckets   table  `json:"buckets"`
			Bulkheads table  `json:"bulkheads"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(snap.body), &page); err != nil {
		t.fail("state: %v", err)
	}
	for _, s := range page.Sources {
		fmt.Fprintf(out, "  %-16s %d breakers, %d buckets, %d bulkheads\n", s.Name, s.Breakers.Total, s.Buckets.Total, s.Bulkheads.Total)
		for _, b := range s.Breakers.Rows {
			var row bw.BreakerSnapshot
			if err := json.Unmarshal(b, &row); err == nil {
				fmt.Fprintf(out, "    breaker %s: %s, %.0f s remaining\n", row.Key, row.StateName, row.RemainingSeconds)
			}
		}
	}
	t.check(len(page.Sources) == 3, "%d sources", len(page.Sources))

	t.section("GET /metrics")
	metrics := t.do("GET", "/metrics")
	for _, line := range strings.Split(metrics.body, "\n") {
		if strings.HasPrefix(line, "breakwater_rejections_total{") || strings.HasPrefix(line, "breakwater_breaker_transitions_total{") {
			fmt.Fprintln(out, " ", line)
		}
	}
	t.check(strings.Contains(metrics.body, `breakwater_rejections_total{key="/api/items/{id}",mechanism="rate_limit"}`), "no rate limit rejections in /metrics")

	if len(t.errs) > 0 {
		return fmt.Errorf("self test: %w", errors.Join(t.errs...))
	}
	fmt.Fprintln(out, "\nself test passed")
	return nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
