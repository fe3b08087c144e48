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
// configuration to its promises:
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
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "breakwater:", ee.msg)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "breakwater:", err)
	os.Exit(1)
}
