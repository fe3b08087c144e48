package prom_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series is a gathered registry: the value of every sample by its name and
// sorted labels, as in `name{a="x",b="y"}`. Histograms contribute their
// _count and _sum samples.
type series map[string]float64

// gather reads every metric of g.
func gather(t testing.TB, g prometheus.Gatherer) series {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			id := func(suffix string) string { return mf.GetName() + suffix + labelString(m.GetLabel()) }
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[id("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[id("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[id("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[id("_sum")] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labelString(lps []*dto.LabelPair) string {
	if len(lps) == 0 {
		return ""
	}
	parts := make([]string, 0, len(lps))
	for _, lp := range lps {
		parts = append(parts, lp.GetName()+"="+`"`+lp.GetValue()+`"`)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// sum adds the samples of metric name whose labels include every
// name="value" pair in match (value "!x" matches any value but x).
func (s series) sum(name string, match ...string) float64 {
	var total float64
	for id, v := range s {
		n, labels, _ := strings.Cut(id, "{")
		if n != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			got, found := labelValue(labels, match[i])
			want := match[i+1]
			if neg, isNeg := strings.CutPrefix(want, "!"); isNeg {
				ok = ok && found && got != neg
			} else {
				ok = ok && found && got == want
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// of returns the samples of the metrics named, sorted.
func (s series) of(names ...string) []string {
	var out []string
	for id := range s {
		if n, _, _ := strings.Cut(id, "{"); slices.Contains(names, n) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// values returns the distinct values of label across every sample.
func (s series) values(label string) map[string]bool {
	out := map[string]bool{}
	for id := range s {
		_, labels, _ := strings.Cut(id, "{")
		if v, ok := labelValue(labels, label); ok {
			out[v] = true
		}
	}
	return out
}

func labelValue(labels, name string) (string, bool) {
	for _, p := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
		if v, ok := strings.CutPrefix(p, name+`="`); ok {
			return strings.TrimSuffix(v, `"`), true
		}
	}
	return "", false
}
