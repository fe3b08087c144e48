#!/usr/bin/env bash
# Mutation testing of the root module's core files with gremlins (pinned
# below). Each mutant is one operator changed in one place (< for <=, + for -,
# == for != …); the tests of the mutated file's package run against it and
# should fail.
#
#   scripts/mutation.sh                        # every core file, whole (long: hours on 2 cores)
#   scripts/mutation.sh policy.go retry.go     # these files, whole (a path from the root)
#   scripts/mutation.sh -diff [BASE]           # only the lines changed since BASE (default HEAD~1)
#
# A whole-file run prints each file's score, killed / (killed + survived), and
# every survivor, and fails when a file scores below MUTATION_MIN (95). A diff
# run fails when any mutant on a changed line survives: kill it with a test, or
# list it in scripts/mutation-equivalent.txt with the reason no test can tell
# it apart (the format is in internal/tools/mutants). Equivalent mutants are
# left out of every score.
#
# Environment: MUTATION_WORKERS (1: mutants tested at once), MUTATION_TIMEOUT
# (gremlins' timeout coefficient, 5: a mutant times out after that many times
# the coverage run, and counts as killed), MUTATION_OUT (a directory to keep
# gremlins' JSON report in), MUTATION_MIN (95).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

gremlins_version=v0.6.0

# The core: the breaker and its policies and windows, classification, the
# timeouts, the retry loop, the keyed registry, the rate and concurrency
# limiters, the congestion limit and pause gates, and the admission paths of
# the inbound middleware.
core=(
  adaptive.go admission.go attempt.go backoff.go body.go breaker.go cadence.go
  breakeroptions.go breakers.go classify.go clientratelimit.go concurrency.go
  congestion.go deadlinectx.go deadlineshare.go handlertimeout.go middleware.go overloadhold.go
  pausegate.go pausehold.go policy.go ratelimit.go requestpolicy.go retry.go
  routebreaker.go shedder.go timeout.go transport.go
  internal/gcra/gcra.go internal/hints/retryafter.go
  internal/keyed/hot.go internal/keyed/keyed.go internal/window/window.go
)

usage() { sed -n '7,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

mode=whole base=
files=()
while [ $# -gt 0 ]; do
  case $1 in
    -diff) mode=diff; shift; if [ $# -gt 0 ] && [[ $1 != -* ]]; then base=$1; shift; fi ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) files+=("$1"); shift ;;
  esac
done

is_core() { local f; for f in "${core[@]}"; do [ "$f" = "$1" ] && return 0; done; return 1; }

if [ "$mode" = diff ]; then
  base=${base:-HEAD~1}
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    echo "mutation: no commit $base to compare with; nothing to test"
    exit 0
  fi
  # Only the core files the change touches; none, and there is nothing to do
  # (gremlins would otherwise take an empty diff for "everything").
  while IFS= read -r f; do
    is_core "$f" && files+=("$f")
  done < <(git diff --merge-base --name-only --diff-filter=d "$base" -- "${core[@]}")
  if [ ${#files[@]} -eq 0 ]; then
    echo "mutation: no core file changed since $(git rev-parse --short "$base"); nothing to test"
    exit 0
  fi
  echo "mutation: lines changed since $(git rev-parse --short "$base") in ${files[*]}"
elif [ ${#files[@]} -eq 0 ]; then
  files=("${core[@]}")
else
  for f in "${files[@]}"; do
    is_core "$f" || { echo "mutation: $f is not a core file (see core= in $0)" >&2; exit 2; }
  done
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${MUTATION_OUT:-$tmp}
mkdir -p "$out"

GOBIN="$tmp/bin" go install "github.com/go-gremlins/gremlins/cmd/gremlins@$gremlins_version"
module=$(go list -m)
real_go=$(command -v go)
all_go=$(git ls-files --cached --others --exclude-standard '*.go' | grep -v '_test\.go$')

# unleash runs gremlins over the files given, writing its report to $1. A
# file of the root package is tested by the root package's tests; one of an
# internal package by the whole module's (gremlins' integration mode): the
# root package's tests exercise it more than its own do.
unleash() {
  local report=$1; shift
  local sel=("$@") extra=()
  [[ ${sel[0]} == */* ]] && extra=(-i)

  # gremlins runs only the mutants whose position its coverage profile marks
  # as reached, but Go's cover tool puts no counters on switch case
  # expressions or constant declarations, so gremlins reports those mutants
  # NOT COVERED and never runs them (go-gremlins/gremlins#298). This shim
  # stands in for go on PATH and, after gremlins' coverage run, marks the
  # selected files reached from top to bottom, so that every mutant in them
  # runs; one that no test reaches survives, as it should.
  rm -rf "$tmp/shim" && mkdir -p "$tmp/shim"
  {
    echo '#!/usr/bin/env bash'
    echo "\"$real_go\" \"\$@\" || exit"
    echo 'profile=; prev=; for a in "$@"; do [ "$prev" = -coverprofile ] && profile=$a; prev=$a; done'
    echo '[ -n "$profile" ] || exit 0'
    for f in "${sel[@]}"; do
      echo "echo '$module/$f:1.1,1000000.1 1 1' >> \"\$profile\""
    done
  } > "$tmp/shim/go"
  chmod +x "$tmp/shim/go"

  # Exclude everything but the selected files, in every directory: gremlins
  # takes only exclusions, and names files by their path in the repository.
  local excludes=() f s keep
  for f in $all_go; do
    keep=
    for s in "${sel[@]}"; do [ "$s" = "$f" ] && keep=1; done
    [ -n "$keep" ] || excludes+=(-E "^${f//./\\.}\$")
  done

  local args=(unleash "${extra[@]}" --workers "${MUTATION_WORKERS:-1}" --timeout-coefficient "${MUTATION_TIMEOUT:-5}"
    -o "$report" "${excludes[@]}")
  if [ "$mode" = diff ]; then
    args+=(-D "$base" -S ltk)
  else
    args+=(-S ltkvc)
  fi

  # -short and -vet=off keep each mutant's test run short. -count=1 makes the
  # coverage run, whose length sets the mutants' timeout, really run. The
  # diff settings make git print hunks without context, which gremlins' diff
  # reader needs to see every changed line (it takes a hunk's added lines to
  # be contiguous).
  local start; start=$(date +%s)
  PATH="$tmp/shim:$PATH" GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1 -vet=off -short" \
    GIT_CONFIG_COUNT=3 \
    GIT_CONFIG_KEY_0=diff.context GIT_CONFIG_VALUE_0=0 \
    GIT_CONFIG_KEY_1=diff.noprefix GIT_CONFIG_VALUE_1=false \
    GIT_CONFIG_KEY_2=diff.mnemonicPrefix GIT_CONFIG_VALUE_2=false \
    "$tmp/bin/gremlins" "${args[@]}" .
  echo "mutation: gremlins took $(( $(date +%s) - start ))s for ${sel[*]}"
}

root=() internal=() reports=()
for f in "${files[@]}"; do
  if [[ $f == */* ]]; then internal+=("$f"); else root+=("$f"); fi
done
if [ ${#root[@]} -gt 0 ]; then
  unleash "$out/gremlins.json" "${root[@]}"
  reports+=("$out/gremlins.json")
fi
if [ ${#internal[@]} -gt 0 ]; then
  unleash "$out/gremlins-internal.json" "${internal[@]}"
  reports+=("$out/gremlins-internal.json")
fi

if [ "$mode" = diff ]; then
  go run ./internal/tools/mutants -equivalent scripts/mutation-equivalent.txt -fail-on-survivor "${reports[@]}"
else
  go run ./internal/tools/mutants -equivalent scripts/mutation-equivalent.txt -min "${MUTATION_MIN:-95}" "${reports[@]}"
fi
