package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func sh(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", args, err, out)
	}
}

// newRepo commits files to a new git repository.
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	for name, content := range files {
		p := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, repo, "git", "init", "-q")
	sh(t, repo, "git", "add", ".")
	sh(t, repo, "git", "commit", "-qm", "first")
	return repo
}

// A repository of two modules, one nested in the other, laid out at one
// version: each zip holds its own module's committed files only.
func TestLayout(t *testing.T) {
	files := map[string]string{
		"go.mod":           "module example.com/Lib\n\ngo 1.25.0\n",
		"lib.go":           "package lib\n",
		"store/go.mod":     "module example.com/Lib/store\n\ngo 1.25.0\n\nrequire example.com/Lib v0.2.0\n\nreplace example.com/Lib => ../\n",
		"store/store.go":   "package store\n",
		"store/sub/sub.go": "package sub\n",
	}
	repo := newRepo(t, files)
	// Not committed: stays out of the zips.
	if err := os.WriteFile(filepath.Join(repo, "untracked.go"), []byte("package lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := t.TempDir()
	var printed bytes.Buffer
	if err := run([]string{"-version", "v0.2.0", "-out", out, "-repo", repo}, &printed); err != nil {
		t.Fatal(err)
	}
	if got, want := printed.String(), "example.com/Lib@v0.2.0\nexample.com/Lib/store@v0.2.0\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	// A second run keeps the list's one entry.
	if err := run([]string{"-version", "v0.2.0", "-out", out, "-repo", repo, "store"}, &printed); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		escaped, mod string
		zipped       []string
	}{
		{"example.com/!lib", files["go.mod"], []string{"example.com/!lib@v0.2.0/go.mod", "example.com/!lib@v0.2.0/lib.go"}},
		{"example.com/!lib/store", files["store/go.mod"], []string{"example.com/!lib/store@v0.2.0/go.mod", "example.com/!lib/store@v0.2.0/store.go", "example.com/!lib/store@v0.2.0/sub/sub.go"}},
	} {
		at := filepath.Join(out, filepath.FromSlash(c.escaped), "@v")
		if b, err := os.ReadFile(filepath.Join(at, "list")); err != nil || string(b) != "v0.2.0\n" {
			t.Errorf("%s list: %q, %v", c.escaped, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(at, "v0.2.0.mod")); err != nil || string(b) != c.mod {
			t.Errorf("%s .mod: %q, %v", c.escaped, b, err)
		}
		var info struct{ Version, Time string }
		if b, err := os.ReadFile(filepath.Join(at, "v0.2.0.info")); err != nil || json.Unmarshal(b, &info) != nil || info.Version != "v0.2.0" || info.Time == "" {
			t.Errorf("%s .info: %q, %v", c.escaped, b, err)
		}
		z, err := zip.OpenReader(filepath.Join(at, "v0.2.0.zip"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range z.File {
			names = append(names, f.Name)
		}
		z.Close()
		slices.Sort(names)
		// Zip paths keep the module path's case; only the proxy's
		// directories are escaped.
		want := make([]string, len(c.zipped))
		for i, n := range c.zipped {
			want[i] = strings.ReplaceAll(n, "!lib", "Lib")
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s zip holds %q, want %q", c.escaped, names, want)
		}
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-version", "v0.2.0"},
		{"-version", "v2.0.0", "-out", t.TempDir(), "."}, // a v2 needs a /v2 module path
		{"-version", "0.2", "-out", t.TempDir(), "."},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// -check finds every requirement a release at one version would break.
func TestCheck(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"go.mod":          "module example.com/lib\n\ngo 1.25.0\n",
		"store/go.mod":    "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.2.0\n\nreplace example.com/lib => ../\n",
		"otel/go.mod":     "module example.com/lib/otel\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib v0.1.0 => ../store\n",
		"misnamed/go.mod": "module example.com/other\n\ngo 1.25.0\n",
		"bench/go.mod":    "module example.com/lib/bench\n\ngo 1.25.0\n\nrequire example.com/lib/misnamed v0.2.0\n",
	})
	var out bytes.Buffer
	err := run([]string{"-version", "v0.2.0", "-check", "-repo", repo, ".", "store", "otel", "misnamed"}, &out)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"otel requires example.com/lib v0.1.0, want v0.2.0",
		"otel replaces example.com/lib v0.1.0 with ../store , want => ..",
		"misnamed: module example.com/other, want example.com/lib/misnamed",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "store requires") || strings.Contains(err.Error(), "bench") {
		t.Errorf("error blames a consistent module:\n%v", err)
	}
	if !strings.Contains(out.String(), "store requires example.com/lib v0.2.0") {
		t.Errorf("printed %q", out.String())
	}
}
