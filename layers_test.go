package breakwater_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The files of the package in three layers, so that dependencies run one
// way: the middleware, the chain and the operator tools use the stages,
// the stages use the vocabulary, and the vocabulary uses nothing else of
// the package (the internal packages are below all three).
var (
	vocabularyFiles = []string{
		"category.go",     // the outcome categories
		"chain.go",        // Stage, Chain, RoundTripperFunc
		"classify.go",     // outcomes, the classifier
		"criticality.go",  // criticality and its header
		"durationtext.go", // durations in words
		"errors.go",       // sentinels, Error, the table of rejections
		"mechanism.go",    // the mechanisms that refuse or delay work
		"observe.go",      // events, observers
		"state.go",        // breaker states, reasons, transitions, health
	}
	topFiles = []string{
		"callerheaders.go", "clientratelimit.go", "config.go", "doc.go", "explain.go", "handlertimeout.go",
		"middleware.go", "problem.go", "responsewriter.go", "routebreaker.go",
		"shedder.go", "simulate.go",
	}
)

// TestLayers checks that no vocabulary file uses a name declared in
// another layer, and that no stage uses a name declared in the top layer.
func TestLayers(t *testing.T) {
	layer := map[string]int{} // 0 vocabulary, 1 stages, 2 top
	for _, f := range vocabularyFiles {
		layer[f] = 0
	}
	for _, f := range topFiles {
		layer[f] = 2
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // package-level name → file
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if _, ok := layer[name]; !ok {
			layer[name] = 1
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[s.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = name
						}
					}
				}
			}
		}
	}
	for _, f := range append(vocabularyFiles, topFiles...) {
		if files[f] == nil {
			t.Errorf("%s is listed in a layer but is not a file of the package", f)
		}
	}
	for name, f := range files {
		// The identifiers a file does not declare itself: names of the
		// universe, of imports, and of the package's other files.
		for _, id := range f.Unresolved {
			from, ok := declared[id.Name]
			if !ok || from == name {
				continue
			}
			if l, lf := layer[name], layer[from]; l == 0 && lf > 0 || l == 1 && lf == 2 {
				t.Errorf("%s: %s (a layer-%d file) uses %s of %s (layer %d)", fset.Position(id.Pos()), name, l, id.Name, from, lf)
			}
		}
	}
}
