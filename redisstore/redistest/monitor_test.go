package redistest

import (
	"slices"
	"testing"
	"time"
)

func TestParseMonitorLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		line   string
		at     time.Time
		script bool
		args   []string
	}{
		{"client", `+1700000000.000123 [0 127.0.0.1:5000] "get" "k"`, time.Unix(1700000000, 123000), false, []string{"get", "k"}},
		{"script", `1700000000.500000 [3 lua] "SET" "rl:{a b}" "17" "PX" "2"`, time.Unix(1700000000, 500000000), true, []string{"SET", "rl:{a b}", "17", "PX", "2"}},
		{"escapes", `+1.000001 [0 unix:/tmp/r.sock] "x" "a\"b\\c" "\x00\xff" "\n\r\t" ""`, time.Unix(1, 1000), false, []string{"x", `a"b\c`, "\x00\xff", "\n\r\t", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseMonitorLine(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if !c.At.Equal(tc.at) || c.Script != tc.script || !slices.Equal(c.Args, tc.args) {
				t.Fatalf("got %v %v %q, want %v %v %q", c.At, c.Script, c.Args, tc.at, tc.script, tc.args)
			}
		})
	}
	for _, bad := range []string{"+OK", `+1.2 [0 lua]`, `+x.1 [0 lua] "a"`, `+1.1 [0 lua] a`, `+1.1 [0 lua] "a`, `+1.1 [0 lua] "\x4"`} {
		if c, err := parseMonitorLine(bad); err == nil {
			t.Errorf("%q parsed as %+v", bad, c)
		}
	}
}

func TestMonitorTimesScriptCommands(t *testing.T) {
	s := New(t)
	m := s.Monitor(t)
	before := time.Now()
	if _, err := command(s.Addr, "EVAL", "redis.call('TIME') redis.call('SET', KEYS[1], '1') return 1", "1", "k"); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	got := m.Commands(func(c Command) bool { return c.Script })
	if len(got) != 2 || got[0].Args[0] != "TIME" || !slices.Equal(got[1].Args, []string{"SET", "k", "1"}) {
		t.Fatalf("script commands %+v", got)
	}
	for _, c := range got {
		// Redis's clock is this machine's wall clock.
		if c.At.Before(before.Round(0).Add(-time.Millisecond)) || c.At.After(after.Round(0).Add(time.Millisecond)) {
			t.Errorf("%v at %v, outside [%v, %v]", c.Args, c.At, before, after)
		}
	}
	if n := len(m.Commands(nil)); n < 4 { // EVAL, TIME, SET, ECHO
		t.Errorf("%d commands recorded, want the EVAL, its two and the marker", n)
	}
}
