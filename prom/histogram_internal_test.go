package prom

import (
	"math"
	"testing"
	"time"
)

func TestHistogramSumSurvivesWraps(t *testing.T) {
	c := &Collector{bounds: []float64{1}, boundsNs: []int64{1e9}}
	h := &c.newHistograms(1)[0]
	for range 3 {
		h.observe(c.boundsNs, time.Duration(math.MaxInt64))
	}
	h.observe(c.boundsNs, 500*time.Millisecond)
	counts := make([]uint64, 2)
	total, sum := h.snapshot(counts)
	if total != 4 || counts[0] != 1 || counts[1] != 3 {
		t.Fatalf("counts %v, total %d", counts, total)
	}
	want := 3*(float64(math.MaxInt64)/1e9) + 0.5
	if math.Abs(sum-want) > 1e-6*want {
		t.Fatalf("sum %v s, want %v s", sum, want)
	}
	if h.carries.Load() != 1 {
		t.Fatalf("carries %d, want 1", h.carries.Load())
	}
}

func TestBucketBoundsAreInclusive(t *testing.T) {
	c := &Collector{bounds: []float64{0.005, 0.1}, boundsNs: []int64{5e6, 1e8}}
	h := &c.newHistograms(1)[0]
	for _, d := range []time.Duration{5 * time.Millisecond, 5*time.Millisecond + 1, 100 * time.Millisecond, -time.Second} {
		h.observe(c.boundsNs, d)
	}
	counts := make([]uint64, 3)
	h.snapshot(counts)
	if counts[0] != 2 || counts[1] != 2 || counts[2] != 0 {
		t.Fatalf("counts %v, want [2 2 0] (le is inclusive, negative counts as 0)", counts)
	}
}
