package labels

import (
	"net/http"
	"slices"
	"testing"

	"github.com/breakwater-go/breakwater"
)

func TestCategories(t *testing.T) {
	cs := breakwater.Categories()
	if len(Categories) != len(cs)+1 || Categories[len(cs)] != "unknown" {
		t.Fatalf("Categories = %q, want the %d categories and unknown", Categories, len(cs))
	}
	for i, c := range cs {
		if got := CategoryIndex(c); got != i || Categories[got] != c.String() {
			t.Errorf("CategoryIndex(%v) = %d, want %d", c, got, i)
		}
	}
	if got := CategoryIndex(breakwater.Category(200)); got != len(cs) {
		t.Errorf("CategoryIndex(200) = %d, want %d (unknown)", got, len(cs))
	}
}

func TestMechanisms(t *testing.T) {
	ms := breakwater.Mechanisms()
	if len(Mechanisms) != len(ms)+1 || Mechanisms[len(ms)] != Other {
		t.Fatalf("Mechanisms = %q, want the %d mechanisms and %q", Mechanisms, len(ms), Other)
	}
	for i, m := range ms {
		if got := MechanismIndex(m); got != i || Mechanisms[got] != string(m) {
			t.Errorf("MechanismIndex(%q) = %d, want %d", m, got, i)
		}
	}
	if got := MechanismIndex("nonesuch"); got != len(ms) {
		t.Errorf("MechanismIndex(nonesuch) = %d, want %d (other)", got, len(ms))
	}
}

func TestMethodIndex(t *testing.T) {
	for i, m := range Methods {
		if got := MethodIndex(m); got != i {
			t.Errorf("MethodIndex(%q) = %d, want %d", m, got, i)
		}
	}
	if got := MethodIndex(""); got != 0 || Methods[0] != http.MethodGet {
		t.Errorf(`MethodIndex("") = %d, want 0 (GET)`, got)
	}
	for _, m := range []string{"get", "PROPFIND", "G"} {
		if got := MethodIndex(m); got != len(Methods) {
			t.Errorf("MethodIndex(%q) = %d, want %d (other)", m, got, len(Methods))
		}
	}
}

func TestStates(t *testing.T) {
	for _, s := range []breakwater.State{breakwater.StateClosed, breakwater.StateHalfOpen, breakwater.StateOpen, breakwater.StateOpen + 1, 255} {
		if got := States[StateIndex(s)]; got != s.String() {
			t.Errorf("States[StateIndex(%d)] = %q, want %q", s, got, s.String())
		}
	}
	if got := StateIndex(255); got != len(States)-1 {
		t.Errorf("StateIndex(255) = %d, want %d (unknown)", got, len(States)-1)
	}
}

func TestReasons(t *testing.T) {
	for _, tc := range []struct {
		list  []string
		index func(breakwater.Reason) int
		known []breakwater.Reason
	}{
		{Reasons, ReasonIndex, []breakwater.Reason{breakwater.ReasonFailures, breakwater.ReasonProbeFailed, breakwater.ReasonOpenElapsed,
			breakwater.ReasonProbesSucceeded, breakwater.ReasonTrip, breakwater.ReasonReset, breakwater.ReasonRecovery}},
		{EjectionReasons, EjectionIndex, []breakwater.Reason{breakwater.ReasonFailures, breakwater.ReasonOutlier, breakwater.ReasonProbeFailed}},
	} {
		want := append(slices.Clone(tc.known), Other)
		for i, r := range want[:len(want)-1] {
			if got := tc.index(r); got != i || tc.list[got] != string(r) {
				t.Errorf("index of %q in %q = %d, want %d", r, tc.list, got, i)
			}
		}
		for _, r := range []breakwater.Reason{"", "nonesuch", breakwater.Reason(Other)} {
			if got := tc.index(r); got != len(tc.list)-1 || tc.list[got] != Other {
				t.Errorf("index of %q in %q = %d, want the last (other)", r, tc.list, got)
			}
		}
	}
}
