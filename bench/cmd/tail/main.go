// Command tail runs the tail-latency harness: hedged requests against an
// upstream whose latency has a long tail, breakwater's hedging beside
// failsafe-go's hedge policy, in the same run. It prints the markdown
// table, or with -json the raw results that cmd/report renders into
// RESULTS.md. Progress goes to stderr.
//
//	go run ./cmd/tail                                   # markdown on stdout
//	go run ./cmd/tail -json                             # for cmd/report
//	go run ./cmd/tail -only bare,failsafe-go -rounds 4  # some stacks only
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/breakwater-go/breakwater/bench/internal/tail"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tail:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := tail.DefaultConfig()
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the raw results as JSON instead of markdown")
	fs.IntVar(&cfg.Calls, "calls", cfg.Calls, "measured calls per stack and round")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of every stack")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "goroutines making the calls")
	only := fs.String("only", "", "comma-separated stacks to run (default: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	builders := tail.Builders()
	if *only != "" {
		var sel []tail.Builder
		for _, b := range builders {
			if slices.Contains(strings.Split(*only, ","), b.Name) {
				sel = append(sel, b)
			}
		}
		if len(sel) == 0 {
			return fmt.Errorf("-only %q matches no stack", *only)
		}
		builders = sel
	}
	rep, err := tail.Run(ctx, cfg, builders, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tail.Markdown(stdout, rep)
	return nil
}
