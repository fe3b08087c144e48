package breakwater_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// options returns the package's exported functions that return an Option,
// by name, with the file that declares each.
func options(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); !ok || id.Name != "Option" {
				continue
			}
			found[fn.Name.Name] = name
		}
	}
	if len(found) < 40 {
		t.Fatalf("found %d options; the test no longer sees them", len(found))
	}
	return found
}

// TestPackageDocListsEveryOption checks that the table of options in the
// package documentation has a row for every function that returns an
// Option.
func TestPackageDocListsEveryOption(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for opt, file := range options(t) {
		if !strings.Contains(string(doc), "//\t  "+opt+"(") {
			t.Errorf("the package documentation's table of options has no row for %s (%s)", opt, file)
		}
	}
}

// exampleExempt names the options that need no Example, each with the
// reason: only an option that changes nothing a caller can observe (one
// that only names or labels something) belongs here. Empty: every option
// has one.
var exampleExempt = map[string]string{}

// TestPackageDocExampleForEveryOption checks that every option has an
// Example that godoc attaches to it (ExampleWithX, or ExampleWithX_suffix),
// that the example uses the option, and that its output is checked.
func TestPackageDocExampleForEveryOption(t *testing.T) {
	names, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name == "breakwater_test" {
			files = append(files, f)
		}
	}
	examples := map[string][]*doc.Example{}
	for _, ex := range doc.Examples(files...) {
		examples[ex.Name] = append(examples[ex.Name], ex)
	}
	for opt, file := range options(t) {
		if why, ok := exampleExempt[opt]; ok {
			if why == "" {
				t.Errorf("the exemption of %s from examples gives no reason", opt)
			}
			continue
		}
		exs := examples[opt]
		if len(exs) == 0 {
			t.Errorf("%s (%s) has no Example%s: add one whose output shows what it changes", opt, file, opt)
			continue
		}
		for _, ex := range exs {
			name := "Example" + opt
			if ex.Suffix != "" {
				name += "_" + ex.Suffix
			}
			if ex.Output == "" || ex.Unordered {
				t.Errorf("%s has no ordered // Output: to check", name)
			}
			if !uses(ex.Code, opt) {
				t.Errorf("%s never calls %s", name, opt)
			}
		}
	}
	for opt := range exampleExempt {
		if len(examples[opt]) > 0 {
			t.Errorf("%s is exempt from examples and has one: drop the exemption", opt)
		}
	}
}

// uses reports whether code calls the package's function name.
func uses(code ast.Node, name string) bool {
	found := false
	ast.Inspect(code, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}
