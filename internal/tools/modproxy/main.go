// Command modproxy lays out a module proxy on the file system, GOPROXY's
// protocol (https://go.dev/ref/mod#goproxy-protocol), holding modules of
// this repository at one version, as a release would tag them: each
// module's zip is made (golang.org/x/mod/zip.CreateFromDir) from the files
// git archive gives for a commit, so untracked files and nested modules
// stay out, as they do on the real proxy.
//
//	go run ./internal/tools/modproxy -version v0.2.0 -out DIR [-rev HEAD] [DIR...]
//	go run ./internal/tools/modproxy -version v0.2.0 -check DIR...
//
// The arguments are the modules' directories, relative to the repository's
// root ("." for the root module); none, and every module of the repository
// is laid out. For each it writes DIR/<escaped path>/@v/list,
// VERSION.info, VERSION.mod and VERSION.zip. A consumer then builds with
// GOPROXY=file://DIR,$(go env GOPROXY) and the modules' path in GONOSUMDB,
// since the checksum database has never seen them.
//
// With -check it lays out nothing and checks, in the working tree, that
// the modules given can be tagged together at the version: each one's
// path is the root module's path followed by its directory (as a tag
// DIR/VERSION needs), and every module of the repository that requires
// another requires one of those, at the version, with a replace pointing
// at its directory for local development (see check.go).
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("modproxy", flag.ContinueOnError)
	version := fs.String("version", "", "the version to lay out the modules at, such as v0.2.0 (required)")
	dir := fs.String("out", "", "the proxy's directory (required; created when missing)")
	rev := fs.String("rev", "HEAD", "the commit the modules' files come from")
	repo := fs.String("repo", ".", "a directory inside the repository")
	checkOnly := fs.Bool("check", false, "check the modules' requirements on each other instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || (*dir == "" && !*checkOnly) {
		return errors.New("-version and -out (or -check) are required")
	}
	root, err := git(*repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	root = strings.TrimSpace(root)
	if *checkOnly {
		return check(root, *version, fs.Args(), out)
	}
	commit, err := git(root, "rev-parse", "--verify", *rev+"^{commit}")
	if err != nil {
		return err
	}
	commit = strings.TrimSpace(commit)
	dirs := fs.Args()
	if len(dirs) == 0 {
		if dirs, err = moduleDirs(root, commit); err != nil {
			return err
		}
	}
	when, err := git(root, "show", "-s", "--format=%cI", commit)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return fmt.Errorf("commit time %q: %v", when, err)
	}
	// zip.CreateFromVCS would do the archiving, but finds no repository
	// in a git worktree (whose .git is a file).
	tree, err := os.MkdirTemp("", "modproxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	if err := archive(root, commit, tree); err != nil {
		return err
	}
	for _, d := range dirs {
		m, err := publish(root, tree, commit, path.Clean(filepath.ToSlash(d)), *version, t.UTC(), *dir)
		if err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		fmt.Fprintf(out, "%s@%s\n", m.Path, m.Version)
	}
	return nil
}

// moduleDirs lists the directories of every go.mod in the commit.
func moduleDirs(root, commit string) ([]string, error) {
	files, err := git(root, "ls-tree", "-r", "--name-only", commit)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, f := range strings.Fields(files) {
		if path.Base(f) == "go.mod" {
			dirs = append(dirs, path.Dir(f))
		}
	}
	slices.Sort(dirs)
	return dirs, nil
}

// archive writes the files of commit into dir, as git archive gives them.
func archive(root, commit, dir string) error {
	cmd := exec.Command("git", "archive", "--format=tar", commit)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git archive: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			continue // directories are made below; links are not module files
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
}

// publish writes one module's files at version, from tree (the commit's
// files), into the proxy at out.
func publish(root, tree, commit, dir, version string, t time.Time, out string) (module.Version, error) {
	gomodPath := "go.mod"
	if dir != "." {
		gomodPath = dir + "/go.mod"
	}
	gomod, err := git(root, "show", commit+":"+gomodPath)
	if err != nil {
		return module.Version{}, err
	}
	f, err := modfile.ParseLax(gomodPath, []byte(gomod), nil)
	if err != nil {
		return module.Version{}, err
	}
	if f.Module == nil {
		return module.Version{}, errors.New("go.mod names no module")
	}
	m := module.Version{Path: f.Module.Mod.Path, Version: version}
	if err := module.Check(m.Path, m.Version); err != nil {
		return m, err
	}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return m, err
	}
	ev, err := module.EscapeVersion(m.Version)
	if err != nil {
		return m, err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return m, err
	}
	var z bytes.Buffer
	if err := zip.CreateFromDir(&z, m, filepath.Join(tree, filepath.FromSlash(dir))); err != nil {
		return m, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, t})
	if err != nil {
		return m, err
	}
	for name, data := range map[string][]byte{
		ev + ".zip":  z.Bytes(),
		ev + ".mod":  []byte(gomod),
		ev + ".info": info,
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return m, err
		}
	}
	return m, addToList(filepath.Join(at, "list"), m.Version)
}

// addToList adds version to a proxy's list file, once.
func addToList(file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if slices.Contains(versions, version) {
		return nil
	}
	versions = append(versions, version)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
