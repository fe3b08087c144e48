// Command breakwater explains, simulates and checks a breakwater
// configuration before any traffic flows.
//
//	breakwater explain  [config flags]
//	breakwater simulate [config flags] [scenario flags] [-svg FILE]
//	breakwater check    [config flags] [scenario flags] -assert EXPR...
//	breakwater config   [config flags]
//
// A configuration is given by flags, by a JSON file (-config FILE, the
// schema of [breakwater.Config], which the library loads too), or both:
// flags override the file. explain prints what [breakwater.Transport.Explain]
// says; simulate runs [breakwater.Transport.Simulate] against an outage
// and can draw it as an SVG timeline; check runs the same simulation and
// exits with status 1 when an assertion fails, so that CI can hold a
// configuration to its promises. Every other error (a bad flag, command
// or assertion, a configuration that does not load or build, a file that
// cannot be written) exits with status 2, printed on one line per error,
// each naming what was wrong:
//
//	go run github.com/breakwater-go/breakwater/cmd/breakwater check \
//		-config breakwater.json -assert 'opens<=15' -assert 'worst-call<=5s'
//
// Every command is deterministic: the simulation's random draws (a
// -failure-rate, fault injection) come from -seed, 0 unless given, so a
// check that passes once passes every time.
//
// Run "breakwater help" for every flag.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code := exit(err, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// exit prints err on stderr, each of its lines prefixed once with
// "breakwater: ", and returns the command's exit status: 0 without an
// error, the status an *exitError carries, and 2 for any other error.
func exit(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 2
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := unprefixed(err); msg != "" {
		for line := range strings.SplitSeq(msg, "\n") {
			fmt.Fprintln(stderr, "breakwater:", line)
		}
	}
	return code
}

// unprefixed is err's message without the "breakwater: " that the
// library's errors start each of their lines with, since the command
// prints its own.
func unprefixed(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "breakwater: ")
	}
	return strings.Join(lines, "\n")
}
