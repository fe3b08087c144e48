package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCountAndLimit(t *testing.T) {
	dir := t.TempDir()
	src := `package p

type T struct{}
type u struct{}

func (T) M()  {}
func (*T) N() {}
func (u) M()  {}
func (T) m()  {}

func F() {}
func f() {}

const A, b = 1, 2
var V, W int
`
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("p.go", src)
	write("p_test.go", "package p\n\nfunc Exported() {}\n")

	var out strings.Builder
	if err := run([]string{dir}, &out); err != nil {
		t.Fatal(err)
	}
	want := "7 exported identifiers (1 types, 1 funcs, 2 methods, 1 consts, 2 vars)"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("got %q, want it to contain %q", out.String(), want)
	}
	if err := run([]string{"-max", "7", dir}, &out); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if err := run([]string{"-max", "6", dir}, &out); err == nil {
		t.Fatal("above the limit: no error")
	}
}
