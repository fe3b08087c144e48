// Command filegraph measures how the files of one Go package depend on
// each other: a file uses another when it names a package-level
// identifier (a type, function, method's receiver type, variable or
// constant) that the other declares. It prints the references per file,
// the largest set of files that all reach each other, and the pairs of
// files that use each other, test files left out.
//
//	go run ./internal/tools/filegraph [-v] [dir]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list the largest cycle's files and the pairs")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	uses, err := graph(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "filegraph:", err)
		os.Exit(1)
	}
	files := make([]string, 0, len(uses))
	edges := 0
	for f, to := range uses {
		files = append(files, f)
		edges += len(to)
	}
	sort.Strings(files)
	var pairs []string
	for _, a := range files {
		for b := range uses[a] {
			if a < b && uses[b][a] {
				pairs = append(pairs, a+" <-> "+b)
			}
		}
	}
	sort.Strings(pairs)
	big := largestCycle(files, uses)
	fmt.Printf("%s: %d files, %.1f file -> file references per file, largest set that all reach each other %d, %d pairs that use each other\n",
		dir, len(files), float64(edges)/float64(len(files)), len(big), len(pairs))
	if *verbose {
		fmt.Println("largest set:", strings.Join(big, " "))
		for _, p := range pairs {
			fmt.Println("pair:", p)
		}
	}
}

// graph returns, for each non-test file of the package in dir, the files
// whose package-level declarations it names.
func graph(dir string) (map[string]map[string]bool, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	declared := map[string]string{}
	parsed := map[string]*ast.File{}
	for _, path := range names {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(path)
		parsed[name] = f
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
							if n.Name != "_" {
								declared[n.Name] = name
							}
						}
					}
				}
			}
		}
	}
	uses := map[string]map[string]bool{}
	for name, f := range parsed {
		uses[name] = map[string]bool{}
		member := map[*ast.Ident]bool{} // x.Name, {Name: …}, fields and declared names: not a use of a package-level name
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				member[n.Sel] = true
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok {
					member[id] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					member[id] = true
				}
			case *ast.FuncDecl:
				member[n.Name] = true // a method's name, or the function's own
			case *ast.Ident:
				if other, ok := declared[n.Name]; ok && other != name && n.Obj == nil && !member[n] {
					uses[name][other] = true
				}
			}
			return true
		})
	}
	return uses, nil
}

// largestCycle returns the largest strongly connected set of files
// (Tarjan's algorithm), sorted.
func largestCycle(files []string, uses map[string]map[string]bool) []string {
	index, low := map[string]int{}, map[string]int{}
	on := map[string]bool{}
	var stack, best []string
	n := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		on[v] = true
		for w := range uses[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var set []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				set = append(set, w)
				if w == v {
					break
				}
			}
			if len(set) > len(best) {
				best = set
			}
		}
	}
	for _, f := range files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	slices.Sort(best)
	return best
}
