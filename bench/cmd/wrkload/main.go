// Command wrkload drives breakwater's inbound middleware with wrk, the
// load generator (scripts/deps.sh installs it): chi alone, chi with
// breakwater's per-client rate limit, with httprate's, and with
// breakwater's whole inbound stack, each a real http.Server on loopback,
// in turn for several rounds. It prints the markdown table, or with -json
// the raw results that cmd/report renders into RESULTS.md. Progress goes
// to stderr.
//
//	go run ./cmd/wrkload                          # markdown on stdout
//	go run ./cmd/wrkload -json                    # for cmd/report
//	go run ./cmd/wrkload -only chi,breakwater-stack -rounds 8
//	go run ./cmd/wrkload -typed                   # handlers set a Content-Type
//	go run ./cmd/wrkload -cpuprofile cpu.out      # the servers' profile
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/breakwater-go/breakwater/bench/internal/wrkload"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrkload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := wrkload.DefaultConfig()
	fs := flag.NewFlagSet("wrkload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the raw results as JSON instead of markdown")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of every server")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "wrk -t")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "wrk -c")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "wrk -d per server and round")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "wrk -d of each server's warm-up")
	fs.StringVar(&cfg.Wrk, "wrk", cfg.Wrk, "the wrk program")
	fs.BoolVar(&cfg.Typed, "typed", false, "every handler sets a Content-Type, as a real one does")
	only := fs.String("only", "", "comma-separated servers to run, chi first (default: all)")
	cpuprofile := fs.String("cpuprofile", "", "write the process's CPU profile over the rounds to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	servers := wrkload.Servers(cfg.Typed)
	if *only != "" {
		var sel []wrkload.Server
		for _, s := range servers {
			if slices.Contains(strings.Split(*only, ","), s.Name) {
				sel = append(sel, s)
			}
		}
		if len(sel) == 0 || sel[0].Name != wrkload.Base {
			return fmt.Errorf("-only %q: want %s and the servers to compare with it", *only, wrkload.Base)
		}
		servers = sel
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := wrkload.Run(ctx, cfg, servers, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	wrkload.Markdown(stdout, rep)
	return nil
}
