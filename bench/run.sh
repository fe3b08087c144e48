#!/usr/bin/env bash
# Runs the comparative benchmarks, the resilience-quality harness, the
# tail-latency harness and the inbound middleware under wrk, and writes
# bench/RESULTS.md. Run it from the repository root or from bench/:
#
#   bench/run.sh
#
# Settings (environment):
#   COUNT       samples per benchmark (default 6). The whole suite runs COUNT
#               times with -count 1, so a burst of noise hits every library
#               alike instead of all samples of one.
#   BENCHTIME   -benchtime per sample (default 200ms)
#   CPUS        -cpu list for the parallel runs (default 1,2); serial runs use -cpu 1,
#               runs of a fixed number of callers (run=callers-N) the last of the list
#   BENCH       -bench regexp of the groups to run (default . for all)
#   QUALITY     0 skips the resilience-quality harness (default 1)
#   TAIL        0 skips the tail-latency harness (default 1)
#   WRK         0 skips the inbound middleware under wrk, cmd/wrkload (default 1;
#               it needs wrk, which scripts/deps.sh installs)
#   BENCHSTAT   benchstat to run with go run (default golang.org/x/perf/cmd/benchstat@latest)
#
# On a 2-core machine the defaults take about 8 minutes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-200ms}
CPUS=${CPUS:-1,2}
BENCH=${BENCH:-.}
QUALITY=${QUALITY:-1}
TAIL=${TAIL:-1}
WRK=${WRK:-1}
BENCHSTAT=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@latest}

if [ "$COUNT" -lt 6 ]; then
  echo "run.sh: COUNT=$COUNT is too few samples for benchstat to say anything; use 6 or more" >&2
  exit 2
fi

if [ "$WRK" != 0 ] && ! command -v wrk >/dev/null 2>&1; then
  echo "run.sh: wrk is not installed: scripts/deps.sh installs it, WRK=0 skips its run" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "os: $(go env GOOS)/$(go env GOARCH), kernel $(uname -r)"
  echo "go: $(go version)"
  echo "load start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "benchtime: $BENCHTIME"
  echo "rounds: $COUNT"
  echo "cpus: $CPUS"
  go list -m -f 'module: {{.Path}} {{.Version}}' \
    github.com/sony/gobreaker/v2 \
    github.com/failsafe-go/failsafe-go \
    github.com/afex/hystrix-go \
    github.com/eapache/go-resiliency \
    github.com/hashicorp/go-retryablehttp \
    github.com/cenkalti/backoff/v5 \
    github.com/go-chi/httprate \
    github.com/go-chi/chi/v5 \
    golang.org/x/time
} >"$work/env.txt"

echo "== building the suite" >&2
go test -c -o "$work/bench.test" .

start=$SECONDS
for round in $(seq "$COUNT"); do
  echo "== round $round/$COUNT ($((SECONDS - start)) s so far)" >&2
  "$work/bench.test" -test.run '^$' -test.bench "($BENCH)/run=serial/" \
    -test.benchtime "$BENCHTIME" -test.count 1 -test.cpu 1 | tee -a "$work/bench.txt" >&2
  "$work/bench.test" -test.run '^$' -test.bench "($BENCH)/run=parallel/" \
    -test.benchtime "$BENCHTIME" -test.count 1 -test.cpu "$CPUS" | tee -a "$work/bench.txt" >&2
  "$work/bench.test" -test.run '^$' -test.bench "($BENCH)/run=callers-" \
    -test.benchtime "$BENCHTIME" -test.count 1 -test.cpu "${CPUS##*,}" | tee -a "$work/bench.txt" >&2
done

quality=()
if [ "$QUALITY" != 0 ]; then
  echo "== resilience quality" >&2
  go run ./cmd/quality -procs 5 -json >"$work/quality.json"
  quality=(-quality "$work/quality.json")
fi

tailargs=()
if [ "$TAIL" != 0 ]; then
  echo "== tail latency" >&2
  go run ./cmd/tail -json >"$work/tail.json"
  tailargs=(-tail "$work/tail.json")
fi

wrkargs=()
if [ "$WRK" != 0 ]; then
  echo "== the inbound middleware under wrk" >&2
  go run ./cmd/wrkload -json >"$work/wrk.json"
  wrkargs=(-wrk "$work/wrk.json")
fi

echo "== benchstat" >&2
statargs=()
: >"$work/benchstat.txt"
for g in $(sed -n 's|^Benchmark\([A-Za-z]*\)/.*|\1|p' "$work/bench.txt" | awk '!seen[$0]++'); do
  if ! go run "$BENCHSTAT" -col /lib -filter ".name:$g .unit:ns/op" "$work/bench.txt" >>"$work/benchstat.txt"; then
    echo "run.sh: benchstat failed; RESULTS.md will go without its tables" >&2
    : >"$work/benchstat.txt"
    break
  fi
  echo >>"$work/benchstat.txt"
done
if [ -s "$work/benchstat.txt" ]; then
  statargs=(-benchstat "$work/benchstat.txt")
fi

echo "load end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/env.txt"
go run ./cmd/report -bench "$work/bench.txt" ${quality[@]+"${quality[@]}"} ${tailargs[@]+"${tailargs[@]}"} \
  ${wrkargs[@]+"${wrkargs[@]}"} \
  ${statargs[@]+"${statargs[@]}"} -env "$work/env.txt" >"$work/RESULTS.md"
mv "$work/RESULTS.md" RESULTS.md
echo "== wrote $(pwd)/RESULTS.md in $((SECONDS - start)) s" >&2
