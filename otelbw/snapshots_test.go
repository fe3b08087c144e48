package otelbw_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
)

// exerciseSource is a source holding a paced key and a half-open breaker,
// so that the gauges read from snapshots have data points.
type exerciseSource struct{}

func (exerciseSource) Snapshot() bw.Snapshot {
	return bw.Snapshot{At: time.Now(),
		Breakers: []bw.BreakerSnapshot{{Key: "api.test", State: bw.StateHalfOpen, StateName: "half_open", ProbesAllowed: 2, ProbeSuccesses: 1}},
		Pauses:   []bw.PauseSnapshot{{Key: "api.test", Paced: true, PaceRate: 9.7, PacePhase: bw.PaceCeiling, PaceCeiling: 10}},
	}
}

// staticSource is a source whose snapshot is fixed.
type staticSource bw.Snapshot

func (s staticSource) Snapshot() bw.Snapshot { return bw.Snapshot(s) }

// The learned rate of a paced key and the probes of a half-open breaker
// are observable gauges read from the sources of Watch: keys under one
// value add up, a key not paced has no rate, a breaker not half-open
// reads 0; without a source neither gauge has a data point.
func TestSnapshotGauges(t *testing.T) {
	s := newSDK(t, otelbw.WithKeyValue(func(k string) string { return strings.Replace(k, "2", "", 1) }))
	for id := range s.series(t) {
		if strings.HasPrefix(id, otelbw.MetricPaceRate) || strings.HasPrefix(id, otelbw.MetricBreakerProbes) {
			t.Errorf("%s without a source", id)
		}
	}
	s.obs.Watch(staticSource{
		Breakers: []bw.BreakerSnapshot{
			{Key: "a.test", State: bw.StateHalfOpen, ProbesAllowed: 4},
			{Key: "b.test", State: bw.StateClosed},
			{Key: "a2.test", State: bw.StateHalfOpen, ProbesAllowed: 1},
		},
		Pauses: []bw.PauseSnapshot{
			{Key: "a.test", Paced: true, PaceRate: 8, PacePhase: bw.PaceCeiling},
			{Key: "a2.test", Paced: true, PaceRate: 0.5, PacePhase: bw.PaceSlowStart},
			{Key: "b.test"},
		},
	}, nil)
	got := s.series(t)
	for id, want := range map[string]float64{
		`breakwater.pace.rate{breakwater.key="a.test"}`:      8.5,
		`breakwater.breaker.probes{breakwater.key="a.test"}`: 5,
		`breakwater.breaker.probes{breakwater.key="b.test"}`: 0,
	} {
		if v, ok := got[id]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", id, v, ok, want)
		}
	}
	if _, ok := got[`breakwater.pace.rate{breakwater.key="b.test"}`]; ok {
		t.Errorf("a key not paced has a rate: %v", got)
	}
}

// On a live registry the probes gauge follows a breaker's ramp: 1 when it
// turns half-open, 2 after a probe succeeded, 0 once closed.
func TestBreakerProbesGaugeFollowsTheRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs, err := bw.NewBreakers(bw.WithHalfOpen(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		s := newSDK(t)
		s.obs.Watch(bs)
		const id = `breakwater.breaker.probes{breakwater.key="k"}`
		b := bs.Get("k")
		b.Trip(time.Second)
		time.Sleep(time.Second)
		if v := s.series(t)[id]; v != 1 {
			t.Fatalf("half-open: %s = %v, want 1", id, v)
		}
		succeed := func() {
			p, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(bw.Outcome{Category: bw.Success, Status: 200})
		}
		succeed()
		if v := s.series(t)[id]; v != 2 {
			t.Fatalf("after a success: %s = %v, want 2", id, v)
		}
		succeed()
		if v := s.series(t)[id]; v != 0 {
			t.Fatalf("closed: %s = %v, want 0", id, v)
		}
	})
}
