package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestGraph(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"a.go":      "package p\n\ntype A struct{ b B }\n\nfunc (A) C() {}\n",
		"b.go":      "package p\n\ntype B int\n\nfunc f() A { return A{} }\n",
		"c.go":      "package p\n\nfunc g(x A) { x.C(); _ = struct{ B int }{B: 1} }\n",
		"c_test.go": "package p\n\nvar _ = f\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	uses, err := graph(dir)
	if err != nil {
		t.Fatal(err)
	}
	// c.go names A; its x.C() and its field and key B are members.
	want := map[string][]string{"a.go": {"b.go"}, "b.go": {"a.go"}, "c.go": {"a.go"}}
	for f, w := range want {
		var got []string
		for to := range uses[f] {
			got = append(got, to)
		}
		slices.Sort(got)
		if !slices.Equal(got, w) {
			t.Errorf("%s uses %v, want %v", f, got, w)
		}
	}
	if _, ok := uses["c_test.go"]; ok {
		t.Error("a test file was read")
	}
	files := []string{"a.go", "b.go", "c.go"}
	if got := largestCycle(files, uses); !slices.Equal(got, []string{"a.go", "b.go"}) {
		t.Errorf("largest cycle %v, want a.go and b.go", got)
	}
}
