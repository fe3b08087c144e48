package main

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-selftest"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "self test passed") {
		t.Fatalf("output:\n%s", &out)
	}
}

func TestBadFlag(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-nope"}, &out); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
}
