package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/breakwater-go/breakwater/internal/svgcheck"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs through every phase, explains itself, prints counts that
// add up, and writes a well-formed timeline; it leaves nothing running.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	svg := filepath.Join(t.TempDir(), "timeline.svg")
	if err := run(context.Background(), []string{"-phase", "300ms", "-workers", "2", "-svg", svg}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"as Explain describes it", "circuit breaker", "What the columns count", "healthy", "recovered",
		"summary over", "requests the upstream saw", "breaker transitions", "insights", "timeline of the run", svg} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// The summary's sums hold.
	m := regexp.MustCompile(`ended (\d+) = ok (\d+) \+ failed (\d+) \+ rejected (\d+) \+ abandoned when the demo stopped (\d+)`).FindStringSubmatch(text)
	r := regexp.MustCompile(`rejected (\d+) = breaker open (\d+) \+ half-open busy (\d+) \+ paused (\d+) \+ other limits (\d+)`).FindStringSubmatch(text)
	s := regexp.MustCompile(`calls started (\d+), ended (\d+)`).FindStringSubmatch(text)
	if m == nil || r == nil || s == nil {
		t.Fatalf("no summary sums in:\n%s", text)
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	if n(m[1]) != n(m[2])+n(m[3])+n(m[4])+n(m[5]) || n(r[1]) != n(r[2])+n(r[3])+n(r[4])+n(r[5]) || n(m[4]) != n(r[1]) || n(s[1]) != n(s[2]) || n(s[2]) != n(m[1]) {
		t.Errorf("the summary does not add up:\n%s\n%s\n%s", s[0], m[0], r[0])
	}
	if b, err := os.ReadFile(svg); err != nil {
		t.Fatal(err)
	} else if err := svgcheck.Check(bytes.NewReader(b)); err != nil {
		t.Errorf("the timeline reaches outside its viewBox:\n%v", err)
	}
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("timeline is not well-formed XML: %v", err)
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), []string{"-workers", "0"}, &bytes.Buffer{}); err == nil {
		t.Fatal("-workers 0 accepted")
	}
}
