package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const src = `package p

func f(a, b int) bool {
	return a < b
}

func g(a, b int) bool {
	return a < b
}

func h(n int) int {
	return n - 1
}
`

// writeReport writes a gremlins report of src's mutants, with the given
// statuses (KILLED when not given), as gremlins reports them when src is
// shifted down by shift lines.
func writeReport(t *testing.T, dir string, shift int, statuses map[string]string) string {
	t.Helper()
	var ms []string
	for _, m := range []struct {
		typ  string
		line int
	}{
		{"CONDITIONALS_BOUNDARY", 4},
		{"CONDITIONALS_NEGATION", 4},
		{"CONDITIONALS_BOUNDARY", 8},
		{"ARITHMETIC_BASE", 12},
	} {
		status := statuses[m.typ+" "+strconv.Itoa(m.line)]
		if status == "" {
			status = "KILLED"
		}
		ms = append(ms, `{"type":"`+m.typ+`","status":"`+status+`","line":`+strconv.Itoa(m.line+shift)+`,"column":11}`)
	}
	path := filepath.Join(dir, "report.json")
	write(t, path, `{"files":[{"file_name":"p.go","mutations":[`+strings.Join(ms, ",")+`]}]}`)
	return path
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScoreAndSurvivors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.go"), src)
	report := writeReport(t, dir, 0, map[string]string{
		"CONDITIONALS_BOUNDARY 8": "LIVED",
		"ARITHMETIC_BASE 12":      "TIMED OUT", // counts as killed
		"CONDITIONALS_NEGATION 4": "NOT VIABLE",
	})
	var out strings.Builder
	err := run([]string{"-src", dir, "-min", "50", report}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"p.go                         2         1           0           1    66.7%",
		"p.go:8:11 CONDITIONALS_BOUNDARY | g | return a < b",
		"mutant: return a <= b",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run([]string{"-src", dir, "-min", "95", report}, &out); err == nil || !strings.Contains(err.Error(), "p.go (66.7%)") {
		t.Errorf("-min 95: %v", err)
	}
	if err := run([]string{"-src", dir, "-fail-on-survivor", report}, &out); err == nil {
		t.Error("-fail-on-survivor passed with a survivor")
	}
}

func TestEquivalentEntries(t *testing.T) {
	dir := t.TempDir()
	eq := filepath.Join(dir, "eq.txt")
	write(t, eq, "# comment\n\np.go:8:11 CONDITIONALS_BOUNDARY | g | return a < b | a reason\n")
	// The file as the entry was written, then with lines added above the
	// mutants: the entry still finds its mutant by the line's text, and not
	// the same text in f (line 4), which is nearer than g's in the second.
	for _, shift := range []int{0, 3} {
		write(t, filepath.Join(dir, "p.go"), strings.Replace(src, "package p\n", "package p\n"+strings.Repeat("\n", shift), 1))
		report := writeReport(t, dir, shift, map[string]string{"CONDITIONALS_BOUNDARY 8": "LIVED"})
		var out strings.Builder
		if err := run([]string{"-src", dir, "-equivalent", eq, "-fail-on-survivor", report}, &out); err != nil {
			t.Fatalf("shift %d: %v\n%s", shift, err, out.String())
		}
		if !strings.Contains(out.String(), "p.go                         3         0           1           0   100.0%") {
			t.Errorf("shift %d:\n%s", shift, out.String())
		}
	}
}

func TestEquivalentWarnings(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.go"), src)
	report := writeReport(t, dir, 0, nil)
	eq := filepath.Join(dir, "eq.txt")
	write(t, eq, "p.go:4:11 CONDITIONALS_BOUNDARY | f | return a < b | but it is killed\n"+
		"p.go:30:1 ARITHMETIC_BASE | h | x := 1 + 2 | the code changed\n")
	var out strings.Builder
	if err := run([]string{"-src", dir, "-equivalent", eq, report}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1 listed as equivalent but killed",
		"p.go:4:11 CONDITIONALS_BOUNDARY | f | return a < b",
		"1 equivalent entries match no mutant",
		"p.go:30:1 ARITHMETIC_BASE | h | x := 1 + 2",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseEntry(t *testing.T) {
	e, err := parseEntry("a.go:3:9 INVERT_BITWISE | (*T).m | x := a | b | c | why")
	if err != nil {
		t.Fatal(err)
	}
	if e.file != "a.go" || e.line != 3 || e.column != 9 || e.typ != "INVERT_BITWISE" || e.fn != "(*T).m" || e.code != "x := a | b | c" || e.reason != "why" {
		t.Fatalf("%+v", e)
	}
	for _, bad := range []string{
		"a.go:3:9 ARITHMETIC_BASE | f | x + 1",
		"a.go:3:9 ARITHMETIC_BASE | x + 1 | why",
		"a.go:3 ARITHMETIC_BASE | f | x + 1 | why",
		"a.go:3:x ARITHMETIC_BASE | f | x + 1 | why",
		"a.go:3:9 | f | x + 1 | why",
		"a.go:3:9 ARITHMETIC_BASE |  | x + 1 | why",
		"a.go:3:9 ARITHMETIC_BASE | f | x + 1 | ",
	} {
		if _, err := parseEntry(strings.TrimSpace(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
