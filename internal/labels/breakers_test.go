package labels

import (
	"testing"
	"time"

	"github.com/breakwater-go/breakwater"
)

func TestBreakers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	tr := func(from, to breakwater.State, at int) breakwater.Transition {
		return breakwater.Transition{From: from, To: to, At: sec(at), OpenFor: 10 * time.Second}
	}
	closed, half, open := breakwater.StateClosed, breakwater.StateHalfOpen, breakwater.StateOpen
	var b Breakers
	check := func(step string, now int, want breakwater.State, wantOpen float64) {
		t.Helper()
		if s, o := b.Read(sec(now)); s != want || o != wantOpen {
			t.Errorf("%s: at %ds read %v, %vs; want %v, %vs", step, now, s, o, want, wantOpen)
		}
	}
	check("zero value", 5, closed, 0)
	b.Record(tr(closed, open, 1)) // first breaker opens until 11
	check("one open", 4, open, 3)
	check("open elapsed", 12, half, 11)
	b.Record(tr(closed, open, 5)) // second breaker opens until 15
	check("two open, the first elapsed", 12, open, 11)
	b.Record(tr(open, half, 12))
	b.Record(tr(half, closed, 13))
	check("one still open", 14, open, 13)
	b.Record(tr(open, half, 16))
	check("the last half-open", 16, half, 15)
	b.Record(tr(half, closed, 17))
	check("all closed", 18, closed, 0)

	// A transition from a state never seen entered subtracts nothing.
	var u Breakers
	u.Record(tr(open, half, 1))
	u.Record(tr(open, closed, 2))
	if s, o := u.Read(sec(3)); s != half || o != 2 {
		t.Errorf("unmatched From: read %v, %vs; want half_open, 2s", s, o)
	}
}

func TestBreakersZeroAt(t *testing.T) {
	var b Breakers
	before := time.Now()
	b.Record(breakwater.Transition{From: breakwater.StateClosed, To: breakwater.StateOpen, OpenFor: time.Hour})
	if s, o := b.Read(before.Add(time.Minute)); s != breakwater.StateOpen || o > 60 || o < 59 {
		t.Errorf("a transition without At read a minute later: %v, %vs; want open, about 60s", s, o)
	}
}
