// Command apicount counts the exported identifiers of a Go package: its
// exported types, functions, constants and variables, and the exported methods
// of its exported types. With -max it fails when the count is above the limit,
// so a CI step can keep a package's surface from growing unnoticed.
//
//	go run ./internal/tools/apicount -max 250 .
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(1)
	}
}

// count is the tally of one package's exported identifiers by kind.
type count struct {
	types, funcs, methods, consts, vars int
	names                               []string
}

func (c count) total() int { return c.types + c.funcs + c.methods + c.consts + c.vars }

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("apicount", flag.ContinueOnError)
	limit := fs.Int("max", 0, "fail when the package exports more identifiers than this (0: no limit)")
	list := fs.Bool("list", false, "print every exported identifier")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir := "."
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	c, err := countDir(dir)
	if err != nil {
		return err
	}
	if *list {
		for _, n := range c.names {
			fmt.Fprintln(out, n)
		}
	}
	fmt.Fprintf(out, "%s: %d exported identifiers (%d types, %d funcs, %d methods, %d consts, %d vars)\n",
		dir, c.total(), c.types, c.funcs, c.methods, c.consts, c.vars)
	if *limit > 0 && c.total() > *limit {
		return fmt.Errorf("%s exports %d identifiers, more than the limit of %d", dir, c.total(), *limit)
	}
	return nil
}

// countDir parses the non-test Go files of dir and counts what they export.
func countDir(dir string) (count, error) {
	var c count
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return c, err
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return c, err
		}
		for _, d := range f.Decls {
			c.add(d)
		}
	}
	sort.Strings(c.names)
	return c, nil
}

func (c *count) add(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		if d.Recv == nil {
			c.funcs++
			c.names = append(c.names, "func "+d.Name.Name)
			return
		}
		if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
			c.methods++
			c.names = append(c.names, "method "+recv+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					c.types++
					c.names = append(c.names, "type "+s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					if d.Tok == token.CONST {
						c.consts++
						c.names = append(c.names, "const "+n.Name)
					} else {
						c.vars++
						c.names = append(c.names, "var "+n.Name)
					}
				}
			}
		}
	}
}

// receiverType returns the name of a method receiver's type, without pointer
// or type parameters.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
