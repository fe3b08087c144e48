#!/usr/bin/env bash
# Runs the tests of every module in the repository (the root module, prom/,
# breakwatertest/ and the examples included, and each nested module with its own
# go.mod), with the race detector. Extra arguments go to every `go test`:
#
#   scripts/test.sh              # what CI runs
#   scripts/test.sh -run Breaker # a subset, in every module
#
# Tests that need redis-server or Chromium find them on PATH; scripts/deps.sh
# installs them. With CI set in the environment those tests fail instead of
# skipping when the programs are missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

status=0
for mod in $(git ls-files --cached --others --exclude-standard '*go.mod' | sort); do
  dir=$(dirname "$mod")
  echo "== go test -race $dir"
  (cd "$dir" && go test -race -count=1 "$@" ./...) || status=1
done
exit $status
