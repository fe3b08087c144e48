// Command quality runs the resilience-quality harness: breakwater and the
// peer libraries against a hard-down, a hanging and a throttling loopback
// upstream. It prints the markdown tables, or with -json the raw results
// that cmd/report renders into RESULTS.md. Progress goes to stderr.
//
//	go run ./cmd/quality                    # markdown on stdout
//	go run ./cmd/quality -procs 5 -json     # each library in its own process
//
// With -procs above 1 each library runs in a child process of its own, that
// many at a time: goroutine counts stay per library, and the run takes
// about as long as its slowest library instead of the sum. Latencies are
// dominated by timeouts and backoff, so sharing the CPU barely moves them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"

	"github.com/breakwater-go/breakwater/bench/internal/quality"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := quality.DefaultConfig()
	fs := flag.NewFlagSet("quality", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the raw results as JSON instead of markdown")
	only := fs.String("only", "", "comma-separated libraries to run (default: all)")
	fs.IntVar(&cfg.Calls, "calls", cfg.Calls, "calls per library and scenario")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "goroutines making the calls")
	procs := fs.Int("procs", 1, "run each library in a child process, this many at a time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	builders := quality.Builders()
	if *only != "" {
		keep := strings.Split(*only, ",")
		var sel []quality.Builder
		for _, b := range builders {
			for _, k := range keep {
				if b.Name == k {
					sel = append(sel, b)
				}
			}
		}
		if len(sel) == 0 {
			return fmt.Errorf("-only %q matches no library", *only)
		}
		builders = sel
	}
	var rep quality.Report
	var err error
	if *procs > 1 {
		cfg.Procs = min(*procs, len(builders))
		rep, err = children(ctx, cfg, builders, *procs, stderr)
	} else {
		rep, err = quality.Run(ctx, cfg, builders, stderr)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	quality.Markdown(stdout, rep)
	return nil
}

// children runs each builder in a child process of this program, procs at
// a time, and merges their reports in the builders' order.
func children(ctx context.Context, cfg quality.Config, builders []quality.Builder, procs int, stderr io.Writer) (quality.Report, error) {
	self, err := os.Executable()
	if err != nil {
		return quality.Report{}, err
	}
	reps := make([]quality.Report, len(builders))
	errs := make([]error, len(builders))
	sem := make(chan struct{}, procs)
	var mu sync.Mutex // serializes the children's progress lines
	var wg sync.WaitGroup
	for i, b := range builders {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.CommandContext(ctx, self, "-json", "-only", b.Name,
				"-calls", strconv.Itoa(cfg.Calls), "-workers", strconv.Itoa(cfg.Workers))
			var out strings.Builder
			cmd.Stdout = &out
			cmd.Stderr = lockedWriter{&mu, stderr}
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("%s: %w", b.Name, err)
				return
			}
			errs[i] = json.Unmarshal([]byte(out.String()), &reps[i])
		})
	}
	wg.Wait()
	rep := quality.Report{Config: cfg}
	for i, r := range reps {
		if errs[i] != nil {
			return rep, errs[i]
		}
		rep.Stacks = append(rep.Stacks, r.Stacks...)
		rep.Results = append(rep.Results, r.Results...)
	}
	return rep, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
