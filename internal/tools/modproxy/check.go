package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// check reports, in one error, every reason the modules in dirs cannot be
// tagged together at version, reading the go.mod files of the working tree:
//
//   - version is a valid version for every module's path;
//   - a module in dirs other than the root is named for its directory
//     (the root module's path, a slash, the directory), so that the tag
//     DIR/VERSION finds it;
//   - a module of the repository that requires another one requires a
//     module in dirs (one that will be tagged), at version;
//   - its replace of that module, if any, is for every version and points
//     at the module's directory, so that local builds use the tree.
//
// It prints each module's requirements on the others.
func check(root, version string, dirs []string, out io.Writer) error {
	if len(dirs) == 0 {
		return errors.New("-check needs the directories of the modules to tag")
	}
	files, err := git(root, "ls-files", "--", "go.mod", "*/go.mod")
	if err != nil {
		return err
	}
	type mod struct {
		dir string
		f   *modfile.File
	}
	var mods []mod
	byPath := map[string]string{} // module path → directory
	for _, name := range strings.Fields(files) {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s names no module", name)
		}
		mods = append(mods, mod{path.Dir(name), f})
		byPath[f.Module.Mod.Path] = path.Dir(name)
	}
	rootPath := ""
	for p, d := range byPath {
		if d == "." {
			rootPath = p
		}
	}
	if rootPath == "" {
		return errors.New("no go.mod at the repository's root")
	}

	var errs []error
	tagged := map[string]bool{}
	for _, d := range dirs {
		d = path.Clean(filepath.ToSlash(d))
		tagged[d] = true
		p, ok := "", false
		for mp, md := range byPath {
			if md == d {
				p, ok = mp, true
			}
		}
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: no go.mod", d))
			continue
		case d != "." && p != rootPath+"/"+d:
			errs = append(errs, fmt.Errorf("%s: module %s, want %s/%s for the tag %s/%s", d, p, rootPath, d, d, version))
		}
		if err := module.Check(p, version); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range mods {
		var siblings []string
		for _, r := range m.f.Require {
			d, ok := byPath[r.Mod.Path]
			if !ok {
				continue
			}
			siblings = append(siblings, r.Mod.Path+" "+r.Mod.Version)
			if !tagged[d] {
				errs = append(errs, fmt.Errorf("%s requires %s, which is not tagged", m.dir, r.Mod.Path))
			}
			if r.Mod.Version != version {
				errs = append(errs, fmt.Errorf("%s requires %s %s, want %s", m.dir, r.Mod.Path, r.Mod.Version, version))
			}
		}
		for _, r := range m.f.Replace {
			d, ok := byPath[r.Old.Path]
			if !ok {
				continue
			}
			want, err := filepath.Rel(filepath.FromSlash(m.dir), filepath.FromSlash(d))
			if err != nil {
				return err
			}
			got := strings.TrimSuffix(filepath.ToSlash(r.New.Path), "/")
			if r.Old.Version != "" || r.New.Version != "" || path.Clean(got) != filepath.ToSlash(want) {
				errs = append(errs, fmt.Errorf("%s replaces %s with %s %s, want => %s", m.dir, strings.TrimSpace(r.Old.Path+" "+r.Old.Version), r.New.Path, r.New.Version, filepath.ToSlash(want)))
			}
		}
		if len(siblings) > 0 {
			slices.Sort(siblings)
			fmt.Fprintf(out, "%s requires %s\n", m.dir, strings.Join(siblings, ", "))
		}
	}
	return errors.Join(errs...)
}
