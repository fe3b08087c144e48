// Command mutants reads the JSON reports of a gremlins run (gremlins unleash
// -o report.json), leaves out the mutants listed as equivalent, and prints a
// score for each file and every mutant that survived. scripts/mutation.sh runs
// it; it is not meant to be called on its own.
//
//	go run ./internal/tools/mutants -equivalent scripts/mutation-equivalent.txt -min 95 report.json
//
// A mutant is killed when the tests failed or timed out with it in place, and
// survived when they passed or when it was never run because no test reached
// its line. The score of a file is killed / (killed + survived); mutants that
// do not compile and mutants outside a diff are left out of it.
//
// The equivalent list has one mutant a line, in four fields separated by
// " | ": where gremlins reports it and its type, the function it is in ("-"
// outside functions), the source line as it reads (leading and trailing space
// trimmed), and why no test can tell it apart. Survivors are printed in the
// same form, without the reason:
//
//	window.go:19:20 ARITHMETIC_BASE | (*failureWindow).add | w.head = (w.head + 1) % len(w.times) | unreachable: …
//
// An entry matches a mutant of that file, type, column and function on a line
// that reads the same; the line number only breaks ties, so an entry survives
// edits that move its line. Blank lines and lines starting with # are
// comments.
//
// With -min the command fails when a file scores below the minimum; with
// -fail-on-survivor it fails on any survivor.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

// report is the part of gremlins' JSON report this command reads.
type report struct {
	Files []struct {
		Name      string   `json:"file_name"`
		Mutations []mutant `json:"mutations"`
	} `json:"files"`
}

type mutant struct {
	File   string `json:"-"`
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`

	code       string // the trimmed source line
	fn         string // the enclosing function, "-" outside functions
	equivalent *entry
}

// String is the mutant as the equivalent list writes it, without a reason.
func (m *mutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s | %s | %s", m.File, m.Line, m.Column, m.Type, m.fn, m.code)
}

// entry is one line of the equivalent list.
type entry struct {
	file         string
	line, column int
	typ          string
	fn           string
	code, reason string
	at           int // line number in the list, for messages
	used         bool
}

// tally is one file's count.
type tally struct {
	killed, survived, equivalent, notViable, skipped int
}

func (t tally) score() float64 {
	if t.killed+t.survived == 0 {
		return 100
	}
	return 100 * float64(t.killed) / float64(t.killed+t.survived)
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	eqPath := fs.String("equivalent", "", "the list of equivalent mutants")
	src := fs.String("src", ".", "the directory the reported file names are relative to")
	minScore := fs.Float64("min", 0, "fail when a file scores below this percentage (0: never)")
	failOnSurvivor := fs.Bool("fail-on-survivor", false, "fail when any mutant survives")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("no report given")
	}
	var mutants []*mutant
	for _, path := range fs.Args() {
		ms, err := readReport(path)
		if err != nil {
			return err
		}
		mutants = append(mutants, ms...)
	}
	lines := map[string][]string{}
	funcs := map[string][]funcSpan{}
	for _, m := range mutants {
		if _, ok := lines[m.File]; !ok {
			path := filepath.Join(*src, m.File)
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines[m.File] = strings.Split(string(b), "\n")
			if funcs[m.File], err = functions(path, b); err != nil {
				return err
			}
		}
		if l := lines[m.File]; m.Line >= 1 && m.Line <= len(l) {
			m.code = strings.TrimSpace(l[m.Line-1])
		}
		m.fn = "-"
		for _, f := range funcs[m.File] {
			if m.Line >= f.from && m.Line <= f.to {
				m.fn = f.name
			}
		}
	}
	var entries []*entry
	if *eqPath != "" {
		var err error
		if entries, err = readEquivalent(*eqPath); err != nil {
			return err
		}
	}
	match(mutants, entries)

	tallies := map[string]*tally{}
	var survivors, wronglyListed []*mutant
	for _, m := range mutants {
		t := tallies[m.File]
		if t == nil {
			t = &tally{}
			tallies[m.File] = t
		}
		switch {
		case m.Status == "SKIPPED":
			t.skipped++
		case m.Status == "NOT VIABLE":
			t.notViable++
		case m.equivalent != nil && (m.Status == "KILLED" || m.Status == "TIMED OUT"):
			wronglyListed = append(wronglyListed, m)
			t.killed++
		case m.equivalent != nil:
			t.equivalent++
		case m.Status == "KILLED" || m.Status == "TIMED OUT":
			t.killed++
		case m.Status == "LIVED" || m.Status == "NOT COVERED":
			t.survived++
			survivors = append(survivors, m)
		default: // RUNNABLE: a dry run
			t.skipped++
		}
	}

	files := make([]string, 0, len(tallies))
	for f := range tallies {
		files = append(files, f)
	}
	sort.Strings(files)
	var total tally
	var below []string
	fmt.Fprintf(out, "%-22s %7s %9s %11s %11s %8s\n", "file", "killed", "survived", "equivalent", "not viable", "score")
	for _, f := range files {
		t := tallies[f]
		if t.killed+t.survived+t.equivalent+t.notViable == 0 {
			continue // nothing of this file was run (outside the diff)
		}
		total.killed += t.killed
		total.survived += t.survived
		total.equivalent += t.equivalent
		total.notViable += t.notViable
		fmt.Fprintf(out, "%-22s %7d %9d %11d %11d %7.1f%%\n", f, t.killed, t.survived, t.equivalent, t.notViable, t.score())
		if *minScore > 0 && t.score() < *minScore {
			below = append(below, fmt.Sprintf("%s (%.1f%%)", f, t.score()))
		}
	}
	fmt.Fprintf(out, "%-22s %7d %9d %11d %11d %7.1f%%\n", "total", total.killed, total.survived, total.equivalent, total.notViable, total.score())

	sortMutants(survivors)
	if len(survivors) > 0 {
		fmt.Fprintf(out, "\n%d survived (kill each with a test, or list it in the equivalent list with the reason):\n", len(survivors))
		for _, m := range survivors {
			fmt.Fprintf(out, "  %s\n", m)
			if mut := mutated(m, lines[m.File]); mut != "" {
				fmt.Fprintf(out, "      mutant: %s\n", mut)
			}
		}
	}
	sortMutants(wronglyListed)
	if len(wronglyListed) > 0 {
		fmt.Fprintf(out, "\n%d listed as equivalent but killed (remove the entry):\n", len(wronglyListed))
		for _, m := range wronglyListed {
			fmt.Fprintf(out, "  %s\n", m)
		}
	}
	// An entry of a file the run covered whole that matched nothing is stale:
	// the code it describes changed.
	whole := map[string]bool{}
	for _, f := range files {
		t := tallies[f]
		whole[f] = t.skipped == 0
	}
	var stale []*entry
	for _, e := range entries {
		if !e.used && whole[e.file] {
			stale = append(stale, e)
		}
	}
	if len(stale) > 0 {
		fmt.Fprintf(out, "\n%d equivalent entries match no mutant (update or remove them):\n", len(stale))
		for _, e := range stale {
			fmt.Fprintf(out, "  %s:%d: %s:%d:%d %s | %s | %s\n", *eqPath, e.at, e.file, e.line, e.column, e.typ, e.fn, e.code)
		}
	}

	switch {
	case len(below) > 0:
		return fmt.Errorf("below %.0f%%: %s", *minScore, strings.Join(below, ", "))
	case *failOnSurvivor && len(survivors) > 0:
		return fmt.Errorf("%d mutants survived", len(survivors))
	}
	return nil
}

func readReport(path string) ([]*mutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var ms []*mutant
	for _, f := range r.Files {
		for i := range f.Mutations {
			m := f.Mutations[i]
			m.File = filepath.ToSlash(f.Name)
			ms = append(ms, &m)
		}
	}
	return ms, nil
}

func readEquivalent(path string) ([]*entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var es []*entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseEntry(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		e.at = n
		es = append(es, e)
	}
	return es, sc.Err()
}

// parseEntry reads "file:line:col TYPE | func | code | reason". The code may
// itself hold " | "; the function and the reason may not.
func parseEntry(line string) (*entry, error) {
	const format = `want "file:line:col TYPE | func | code | reason"`
	fields := strings.Split(line, " | ")
	if len(fields) < 4 {
		return nil, errors.New(format)
	}
	head := strings.Fields(fields[0])
	if len(head) != 2 {
		return nil, errors.New(format)
	}
	e := &entry{
		typ:    head[1],
		fn:     strings.TrimSpace(fields[1]),
		code:   strings.TrimSpace(strings.Join(fields[2:len(fields)-1], " | ")),
		reason: strings.TrimSpace(fields[len(fields)-1]),
	}
	parts := strings.Split(head[0], ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("location %q: want file:line:col", head[0])
	}
	e.file = parts[0]
	var err1, err2 error
	e.line, err1 = strconv.Atoi(parts[1])
	e.column, err2 = strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("location %q: %w", head[0], err)
	}
	if e.fn == "" || e.reason == "" {
		return nil, errors.New(format)
	}
	return e, nil
}

// funcSpan is the lines of one function declaration.
type funcSpan struct {
	name     string
	from, to int
}

// functions lists the function declarations of a Go file, methods named
// "(*T).m" or "T.m".
func functions(path string, src []byte) ([]funcSpan, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var fs []funcSpan
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = receiver(fd.Recv.List[0].Type) + "." + name
		}
		fs = append(fs, funcSpan{name: name, from: fset.Position(fd.Pos()).Line, to: fset.Position(fd.End()).Line})
	}
	return fs, nil
}

// receiver names a method's receiver type: T, or (*T) for a pointer, type
// parameters left out.
func receiver(e ast.Expr) string {
	star := false
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			star, e = true, t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			if star {
				return "(*" + t.Name + ")"
			}
			return t.Name
		default:
			return "?"
		}
	}
}

// match pairs each entry with at most one mutant of the same file, type,
// column and function on a line that reads the same, the nearest to the
// entry's line.
func match(ms []*mutant, es []*entry) {
	for _, e := range es {
		var best *mutant
		for _, m := range ms {
			if m.equivalent != nil || m.File != e.file || m.Type != e.typ || m.Column != e.column || m.fn != e.fn || m.code != e.code {
				continue
			}
			if best == nil || abs(m.Line-e.line) < abs(best.Line-e.line) {
				best = m
			}
		}
		if best != nil {
			best.equivalent = e
			e.used = true
		}
	}
}

// mutated returns the mutant's source line with the mutation applied, or ""
// when the operator at its column is not one gremlins mutates that way.
func mutated(m *mutant, lines []string) string {
	if m.Line < 1 || m.Line > len(lines) {
		return ""
	}
	line := lines[m.Line-1]
	i := m.Column - 1
	if i < 0 || i >= len(line) {
		return ""
	}
	for _, op := range operators {
		if !strings.HasPrefix(line[i:], op) {
			continue
		}
		to, ok := replacements[m.Type][op]
		if !ok {
			return ""
		}
		return strings.TrimSpace(line[:i] + to + line[i+len(op):])
	}
	return ""
}

// operators are the tokens gremlins mutates, longest first so that a prefix
// never hides a longer token.
var operators = []string{
	"&^=", "<<=", ">>=",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "&^", "<<", ">>",
	"<=", ">=", "==", "!=", "&&", "||", "++", "--",
	"+", "-", "*", "/", "%", "&", "|", "^", "<", ">",
}

// replacements is gremlins' table of what each mutant type turns a token into.
var replacements = map[string]map[string]string{
	"ARITHMETIC_BASE":         {"+": "-", "*": "/", "/": "*", "%": "*", "-": "+"},
	"CONDITIONALS_BOUNDARY":   {">=": ">", ">": ">=", "<=": "<", "<": "<="},
	"CONDITIONALS_NEGATION":   {"==": "!=", ">=": "<", ">": "<=", "<=": ">", "<": ">=", "!=": "=="},
	"INCREMENT_DECREMENT":     {"--": "++", "++": "--"},
	"INVERT_ASSIGNMENTS":      {"+=": "-=", "*=": "/=", "/=": "*=", "%=": "%=", "-=": "+="},
	"INVERT_BITWISE":          {"&": "|", "|": "&", "^": "&", "&^": "&", "<<": ">>", ">>": "<<"},
	"INVERT_BWASSIGN":         {"&=": "|=", "|=": "&=", "^=": "&=", "&^=": "&=", "<<=": ">>=", ">>=": "<<="},
	"INVERT_LOGICAL":          {"&&": "||", "||": "&&"},
	"INVERT_NEGATIVES":        {"-": "+"},
	"REMOVE_SELF_ASSIGNMENTS": {"+=": "=", "&=": "=", "&^=": "=", "*=": "=", "|=": "=", "/=": "=", "%=": "=", "<<=": "=", ">>=": "=", "-=": "=", "^=": "="},
}

func sortMutants(ms []*mutant) {
	sort.Slice(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Type < b.Type
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
