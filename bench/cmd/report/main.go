// Command report writes RESULTS.md from what bench/run.sh collected: the
// benchmark output (several rounds appended), the quality and tail-latency
// harnesses' JSON and cmd/wrkload's,
// benchstat's output and a description of the machine.
//
//	go run ./cmd/report -bench bench.txt -quality quality.json \
//		-tail tail.json -wrk wrk.json -benchstat benchstat.txt -env env.txt > RESULTS.md
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-go/breakwater/bench/internal/quality"
	"github.com/breakwater-go/breakwater/bench/internal/tail"
	"github.com/breakwater-go/breakwater/bench/internal/wrkload"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	benchFile := fs.String("bench", "", "go test -bench output")
	qualityFile := fs.String("quality", "", "cmd/quality -json output")
	tailFile := fs.String("tail", "", "cmd/tail -json output")
	wrkFile := fs.String("wrk", "", "cmd/wrkload -json output")
	benchstatFile := fs.String("benchstat", "", "benchstat output (optional)")
	envFile := fs.String("env", "", "key: value lines describing the run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*benchFile)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := parseBench(f)
	if err != nil {
		return err
	}
	var q quality.Report
	if *qualityFile != "" {
		b, err := os.ReadFile(*qualityFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &q); err != nil {
			return fmt.Errorf("%s: %w", *qualityFile, err)
		}
	}
	var tr tail.Report
	if *tailFile != "" {
		b, err := os.ReadFile(*tailFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &tr); err != nil {
			return fmt.Errorf("%s: %w", *tailFile, err)
		}
	}
	var wr wrkload.Report
	if *wrkFile != "" {
		b, err := os.ReadFile(*wrkFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &wr); err != nil {
			return fmt.Errorf("%s: %w", *wrkFile, err)
		}
	}
	env, err := readEnv(*envFile)
	if err != nil {
		return err
	}
	var stat string
	if *benchstatFile != "" {
		b, err := os.ReadFile(*benchstatFile)
		if err != nil {
			return err
		}
		stat = string(b)
	}
	w := bufio.NewWriter(stdout)
	write(w, res, q, tr, wr, env, stat)
	return w.Flush()
}

// key identifies one benchmark configuration.
type key struct {
	group, run, lib string
	cpu             int
}

// sample is one run's figures.
// cpu is the process's CPU time per operation (cpu-ns/op), 0 when the
// run did not report it; overhead a paired run's overhead-%, as a
// fraction; xPing50 and xPing99 a paired tail run's p50 and p99 as
// multiples of the bare PING's; xRedisRate a paired shared admission
// run's throughput as a multiple of redis_rate's; ops, p50, p99 and
// redisCPU a shared admission run's throughput per second, latency
// percentiles (ns) and redis-server CPU per admission (ns).
type sample struct {
	ns, bytes, allocs, cpu, overhead, xPing50, xPing99, xRedisRate float64
	ops, p50, p99, redisCPU                                        float64
}

// metrics maps each unit a benchmark reports to its field of a sample, and
// the factor its value is stored with.
var metrics = map[string]struct {
	field func(*sample) *float64
	scale float64
}{
	"ns/op":           {func(s *sample) *float64 { return &s.ns }, 1},
	"B/op":            {func(s *sample) *float64 { return &s.bytes }, 1},
	"allocs/op":       {func(s *sample) *float64 { return &s.allocs }, 1},
	"cpu-ns/op":       {func(s *sample) *float64 { return &s.cpu }, 1},
	"overhead-%":      {func(s *sample) *float64 { return &s.overhead }, 1.0 / 100},
	"x-ping-p50":      {func(s *sample) *float64 { return &s.xPing50 }, 1},
	"x-ping-p99":      {func(s *sample) *float64 { return &s.xPing99 }, 1},
	"x-redis_rate":    {func(s *sample) *float64 { return &s.xRedisRate }, 1},
	"ops/s":           {func(s *sample) *float64 { return &s.ops }, 1},
	"p50-ns":          {func(s *sample) *float64 { return &s.p50 }, 1},
	"p99-ns":          {func(s *sample) *float64 { return &s.p99 }, 1},
	"redis-cpu-ns/op": {func(s *sample) *float64 { return &s.redisCPU }, 1},
}

// results holds the samples of every configuration, in the order first
// seen.
type results struct {
	order   []key
	samples map[key][]sample
	failed  []string // benchmarks that failed in a round, once per failure
}

var cpuSuffix = regexp.MustCompile(`-(\d+)$`)

// parseBench reads go test -bench output: lines like
// "BenchmarkGroup/run=serial/lib=name-2  N  12.3 ns/op  0 B/op  0 allocs/op".
func parseBench(r io.Reader) (results, error) {
	res := results{samples: map[key][]sample{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && strings.HasPrefix(f[0], "Benchmark") && f[1] == "---" {
			res.failed = append(res.failed, f[0]) // "BenchmarkX-2 --- FAIL: BenchmarkX-2": its reason follows
			continue
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		k := key{cpu: 1}
		if m := cpuSuffix.FindStringSubmatch(name); m != nil {
			k.cpu, _ = strconv.Atoi(m[1])
			name = name[:len(name)-len(m[0])]
		}
		parts := strings.Split(name, "/")
		k.group = parts[0]
		for _, p := range parts[1:] {
			switch k2, v, _ := strings.Cut(p, "="); k2 {
			case "run":
				k.run = v
			case "lib":
				k.lib = v
			}
		}
		if k.run == "" || k.lib == "" {
			continue
		}
		var s sample
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return res, fmt.Errorf("%q: %w", sc.Text(), err)
			}
			if m, ok := metrics[f[i+1]]; ok {
				*m.field(&s) = v * m.scale
			}
		}
		if _, ok := res.samples[k]; !ok {
			res.order = append(res.order, k)
		}
		res.samples[k] = append(res.samples[k], s)
	}
	return res, sc.Err()
}

// median returns the median of each figure of k's samples, and the spread
// of ns/op: (max - min) / median.
func (r results) median(k key) (m sample, spread float64, n int, ok bool) {
	ss := r.samples[k]
	if len(ss) == 0 {
		return m, 0, 0, false
	}
	v := make([]float64, len(ss))
	for _, m2 := range metrics {
		for i := range ss {
			v[i] = *m2.field(&ss[i])
		}
		slices.Sort(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		*m2.field(&m) = med
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		lo, hi = min(lo, s.ns), max(hi, s.ns)
	}
	if m.ns > 0 {
		spread = (hi - lo) / m.ns
	}
	return m, spread, len(ss), true
}

// variants returns the (run, cpu) pairs measured in group, in order.
func (r results) variants(group string) []key {
	var out []key
	for _, k := range r.order {
		v := key{group: group, run: k.run, cpu: k.cpu}
		if k.group == group && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(a, b key) int {
		if ra, rb := runRank(a.run), runRank(b.run); ra != rb {
			return ra - rb
		}
		return a.cpu - b.cpu
	})
	return out
}

// runRank orders runs: serial, then parallel, then callers-N by N.
func runRank(run string) int {
	switch run {
	case "serial":
		return -2
	case "parallel":
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(run, "callers-"))
	return n
}

// libs returns the libraries measured in group, in order.
func (r results) libs(group string) []string {
	var out []string
	for _, k := range r.order {
		if k.group == group && !slices.Contains(out, k.lib) {
			out = append(out, k.lib)
		}
	}
	return out
}

func (r results) ns(group, run, lib string, cpu int) (float64, bool) {
	m, _, _, ok := r.median(key{group, run, lib, cpu})
	return m.ns, ok
}

// cpuNS is ns for the process's CPU time per operation; false when the
// runs did not report it.
func (r results) cpuNS(group, run, lib string, cpu int) (float64, bool) {
	m, _, _, ok := r.median(key{group, run, lib, cpu})
	return m.cpu, ok && m.cpu > 0
}

// paired returns lib's median overhead-% in group, as a fraction, per
// setting.
func (r results) paired(group, lib string) []float64 {
	var out []float64
	for _, v := range r.variants(group) {
		if m, _, _, ok := r.median(key{group, v.run, lib, v.cpu}); ok {
			out = append(out, m.overhead)
		}
	}
	return out
}

// xPing returns lib's median p50 and p99 in group as multiples of the
// PING's, per setting.
func (r results) xPing(group, lib string) (p50, p99 []float64) {
	for _, v := range r.variants(group) {
		if m, _, _, ok := r.median(key{group, v.run, lib, v.cpu}); ok && m.xPing99 > 0 {
			p50, p99 = append(p50, m.xPing50), append(p99, m.xPing99)
		}
	}
	return p50, p99
}

// timePerRedisRate returns, for each variant of group's runs of lib,
// breakwater's time per admission as a multiple of redis_rate's (the
// reciprocal of their median x-redis_rate).
func (r results) timePerRedisRate(group, lib string) []float64 {
	var got []float64
	for _, v := range r.variants(group) {
		if m, _, _, ok := r.median(key{group, v.run, lib, v.cpu}); ok && m.xRedisRate > 0 {
			got = append(got, 1/m.xRedisRate)
		}
	}
	return got
}

// hasCPU reports whether group's runs reported CPU time.
func (r results) hasCPU(group string) bool {
	for _, k := range r.order {
		if k.group == group {
			if m, _, _, ok := r.median(k); ok && m.cpu > 0 {
				return true
			}
		}
	}
	return false
}

func variantName(v key) string {
	if v.run == "serial" {
		return "serial"
	}
	if n, ok := strings.CutPrefix(v.run, "callers-"); ok {
		if n == "1" {
			return "1 caller"
		}
		return n + " callers"
	}
	return fmt.Sprintf("parallel, %d CPU", v.cpu)
}

func readEnv(path string) ([][2]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var env [][2]string
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			env = append(env, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return env, nil
}

func lookup(env [][2]string, k string) string {
	for _, kv := range env {
		if kv[0] == k {
			return kv[1]
		}
	}
	return "?"
}

func all(env [][2]string, k string) []string {
	var out []string
	for _, kv := range env {
		if kv[0] == k {
			out = append(out, kv[1])
		}
	}
	return out
}
