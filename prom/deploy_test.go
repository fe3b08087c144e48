package prom_test

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The operations kit in ../deploy must only query metrics the collector
// exports. The names are taken from a registry after every kind of event,
// not from a list kept by hand.

var metricName = regexp.MustCompile(`\bbreakwater_[a-z0-9_]+`)

// exportedNames returns every sample name the collector exports: the
// family names, and for histograms their _bucket, _sum and _count series.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	c, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.Watch(exerciseSource{})
	exercise(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	// Every family the collector describes is exported after exercise.
	for _, n := range describedFamilies(c) {
		if !names[n] {
			t.Fatalf("%s is not exported after every kind of event", n)
		}
	}
	return names
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describedFamilies returns the name of every metric family c describes.
func describedFamilies(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var out []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestExerciseCoversEveryEventKind: the events that exportedNames feeds
// the collector include one of every kind, so that a metric family fed by
// any kind of event is exported and checked against the kit.
func TestExerciseCoversEveryEventKind(t *testing.T) {
	seen := map[bw.EventKind]bool{}
	for _, e := range exerciseEvents() {
		seen[e.Kind] = true
	}
	for k := bw.EventKind(1); k.String() != "unknown"; k++ {
		if !seen[k] {
			t.Errorf("exerciseEvents has no %s event", k)
		}
	}
	c, err := prom.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if fams := describedFamilies(c); !slices.Contains(fams, prom.MetricCalls) || !slices.Contains(fams, prom.MetricEndpointEjections) {
		t.Fatalf("described families %v lack %s or %s", fams, prom.MetricCalls, prom.MetricEndpointEjections)
	}
}

// family strips a histogram sample suffix.
func family(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, s); ok && !strings.HasSuffix(name, "_total") {
			return f
		}
	}
	return name
}

// queries collects, by path, every string under a key named "expr",
// "query" or "definition" in the JSON document v.
func queries(v any, path string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			p := path + "." + k
			if s, ok := child.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				out[p] = s
				continue
			}
			queries(child, p, out)
		}
	case []any:
		for i, child := range v {
			queries(child, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	raw, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []map[string]any `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard lacks a title, a uid or panels")
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.RefID == "" || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has a target without refId or expr", p.Title)
			}
		}
	}

	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// Every name anywhere in the file (queries, descriptions) exists.
	for _, name := range metricName.FindAllString(string(raw), -1) {
		if !exported[name] {
			t.Errorf("the dashboard names %s, which the collector does not export", name)
		}
	}
	qs := map[string]string{}
	queries(doc, "", qs)
	used := map[string]bool{}
	for path, q := range qs {
		for _, name := range metricName.FindAllString(q, -1) {
			if !exported[name] {
				t.Errorf("dashboard %s queries %s, which the collector does not export", path, name)
			}
			used[family(name)] = true
		}
	}
	// And the dashboard shows every metric family.
	for name := range exported {
		if family(name) == name && !used[name] {
			t.Errorf("no dashboard panel shows %s", name)
		}
	}
}

// alertRule is what the line scanner reads from a rule file.
type alertRule struct {
	name, expr, severity, summary string
}

// readRules reads the rules of a Prometheus rule file with a line scanner
// (keeping the module free of a YAML dependency): "- alert:" starts a rule;
// "expr:", "severity:" and "summary:" take their value from the rest of the
// line, or, after "|" or ">" block indicators, from the following lines
// indented deeper than the key.
func readRules(t *testing.T, path string) []alertRule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		rules  []alertRule
		field  *string // a block scalar being read
		indent int     // the block's key indentation
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		ind := len(line) - len(strings.TrimLeft(line, " "))
		if field != nil {
			if trimmed == "" || ind > indent {
				*field = strings.TrimSpace(*field + " " + trimmed)
				continue
			}
			field = nil
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasPrefix(line, "\t") {
			t.Fatalf("%s: tab in indentation: %q", path, line)
		}
		if name, ok := strings.CutPrefix(trimmed, "- alert:"); ok {
			rules = append(rules, alertRule{name: strings.TrimSpace(name)})
			continue
		}
		if len(rules) == 0 {
			continue
		}
		r := &rules[len(rules)-1]
		key, value, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		var dst *string
		switch key {
		case "expr":
			dst = &r.expr
		case "severity":
			dst = &r.severity
		case "summary":
			dst = &r.summary
		default:
			continue
		}
		value = strings.TrimSpace(value)
		if value == "|" || value == ">" || strings.HasPrefix(value, "|-") || strings.HasPrefix(value, ">-") {
			field, indent = dst, ind
			continue
		}
		*dst = strings.Trim(value, `"'`)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestAlertsQueryExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	for _, file := range []string{"alerts.yml", "alerts_test.yml"} {
		raw, err := os.ReadFile("../deploy/" + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range metricName.FindAllString(string(raw), -1) {
			if !exported[name] {
				t.Errorf("%s names %s, which the collector does not export", file, name)
			}
		}
	}
	rules := readRules(t, "../deploy/alerts.yml")
	var names []string
	for _, r := range rules {
		names = append(names, r.name)
		if r.expr == "" || r.severity == "" || r.summary == "" {
			t.Errorf("alert %s lacks an expr, a severity or a summary: %+v", r.name, r)
		}
		refs := metricName.FindAllString(r.expr, -1)
		if len(refs) == 0 {
			t.Errorf("alert %s queries no breakwater metric: %q", r.name, r.expr)
		}
		for _, name := range refs {
			if !exported[name] {
				t.Errorf("alert %s queries %s, which the collector does not export", r.name, name)
			}
		}
	}
	slices.Sort(names)
	want := []string{"BreakwaterBreakerOpen", "BreakwaterEndpointEjected", "BreakwaterRetryBudgetExhausted", "BreakwaterShedding"}
	if !slices.Equal(names, want) {
		t.Fatalf("alerts %v, want %v", names, want)
	}
	byName := map[string]string{}
	for _, r := range rules {
		byName[r.name] = r.expr
	}
	for alert, fragment := range map[string]string{
		"BreakwaterBreakerOpen":          prom.MetricBreakerOpenSeconds,
		"BreakwaterEndpointEjected":      prom.MetricEndpointEjected,
		"BreakwaterRetryBudgetExhausted": prom.MetricRetryBudgetExhausted,
		"BreakwaterShedding":             `breakwater_rejections_total{mechanism="shed"}`,
	} {
		if !strings.Contains(byName[alert], fragment) {
			t.Errorf("alert %s does not query %s: %q", alert, fragment, byName[alert])
		}
	}
}

// TestReadRulesBlockScalars pins the scanner on the block forms a rule
// file may use for expr.
func TestReadRulesBlockScalars(t *testing.T) {
	path := t.TempDir() + "/rules.yml"
	content := `groups:
  - name: g
    rules:
      - alert: A
        expr: |
          sum(rate(breakwater_calls_total[5m]))
            > 1
        labels:
          severity: page
        annotations:
          summary: "a"
      - alert: B
        expr: >-
          breakwater_in_flight > 10
        labels:
          severity: ticket
        annotations:
          summary: b
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	got := readRules(t, path)
	want := []alertRule{
		{name: "A", expr: "sum(rate(breakwater_calls_total[5m])) > 1", severity: "page", summary: "a"},
		{name: "B", expr: "breakwater_in_flight > 10", severity: "ticket", summary: "b"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rules\n got %+v\nwant %+v", got, want)
	}
}
