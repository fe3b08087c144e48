package otelbw

import (
	"slices"
	"testing"

	"github.com/breakwater-go/breakwater/internal/labels"
)

// TestMethodValues checks that methodValues follows labels.MethodIndex.
func TestMethodValues(t *testing.T) {
	if len(methodValues) != len(labels.Methods)+1 {
		t.Fatalf("%d method values, want %d and _OTHER", len(methodValues), len(labels.Methods))
	}
	for _, m := range slices.Concat(labels.Methods, []string{"get", "PROPFIND"}) {
		want := m
		if labels.MethodIndex(m) == len(labels.Methods) {
			want = "_OTHER"
		}
		if got := methodValues[labels.MethodIndex(m)].Value.AsString(); got != want {
			t.Errorf("method %q has value %q, want %q", m, got, want)
		}
	}
}
