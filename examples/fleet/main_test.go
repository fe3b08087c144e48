package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo plays every phase twice and prints each phase's figures side
// by side, every row labelled; with propagation, B sees at most two
// requests for a client call in the outage. It leaves nothing running.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-phase", "300ms"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	text := out.String()
	for _, want := range []string{"without propagation", "with propagation", "phase 1/3  healthy", "phase 2/3  outage", "phase 3/3  overload",
		"requests B saw per client call", "at most, for one call", "client calls that succeeded", "of the critical ones",
		"B's work for callers who had given up", "shed by B: critical/default/sheddable", "refused at once for the caller's deadline",
		"pushback sent: elsewhere/none", "retries skipped for pushback", "What the rows count"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Every row of figures has a label and two columns.
	tables, _, _ := strings.Cut(text, "What the rows count")
	rows := regexp.MustCompile(`(?m)^ {2,4}[A-Za-z].*?\s{3,}(\S+(?: %)?)\s+(\S+(?: %)?)$`).FindAllStringSubmatch(tables, -1)
	if len(rows) != 3*10 {
		t.Fatalf("%d rows of figures, want 10 per phase:\n%s", len(rows), text)
	}
	outage := text[strings.Index(text, "phase 2/3"):strings.Index(text, "phase 3/3")]
	m := regexp.MustCompile(`at most, for one call\s+(\d+)\s+(\d+)`).FindStringSubmatch(outage)
	if m == nil {
		t.Fatalf("no figure of the most requests per call in:\n%s", outage)
	}
	if with, _ := strconv.Atoi(m[2]); with > 2 {
		t.Errorf("with propagation, B saw %d requests for one client call in the outage, want at most 2:\n%s", with, outage)
	}
	// A's failed calls to B tell the client not to retry, with
	// propagation only, and the client honours it.
	p := regexp.MustCompile(`pushback sent: elsewhere/none\s+(\d+)/(\d+)\s+(\d+)/(\d+)`).FindStringSubmatch(outage)
	h := regexp.MustCompile(`retries skipped for pushback\s+(\d+)\s+(\d+)`).FindStringSubmatch(outage)
	if p == nil || h == nil {
		t.Fatalf("no pushback figures in:\n%s", outage)
	}
	if p[1] != "0" || p[2] != "0" || p[4] == "0" || h[1] != "0" || h[2] == "0" {
		t.Errorf("pushback in the outage: sent %s/%s without, %s/%s with, honoured %s and %s; want none without, some none with, honoured:\n%s", p[1], p[2], p[3], p[4], h[1], h[2], outage)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-phase", "1ms"}, &out); err == nil {
		t.Error("-phase 1ms accepted")
	}
	if err := run(context.Background(), []string{"-nope"}, &out); err == nil {
		t.Error("an unknown flag accepted")
	}
}
