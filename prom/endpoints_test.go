package prom_test

import (
	"context"
	"strings"
	"testing"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
)

// TestEndpointsCutToOneLabel: two endpoints cut to the same label value
// are one series, so that the registry gathers without error.
func TestEndpointsCutToOneLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	long := "https://" + strings.Repeat("a", prom.MaxLabelLen)
	for _, ep := range []string{long + "/x", long + "/y"} {
		c.Observe(context.Background(), bw.Event{Kind: bw.EventAttempt, Key: "k", Endpoint: ep, Category: bw.Success})
		c.Observe(context.Background(), bw.Event{Kind: bw.EventHealth, Key: "k", Endpoint: ep, Health: bw.HealthEjected, Reason: bw.ReasonOutlier})
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == prom.MetricEndpointAttempts {
			if n := len(mf.GetMetric()); n != 1 || mf.GetMetric()[0].GetCounter().GetValue() != 2 {
				t.Errorf("%s: %d series, want one counting 2", mf.GetName(), n)
			}
		}
	}
}
