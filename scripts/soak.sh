#!/usr/bin/env bash
# Runs the chaos soak (soak_test.go, build tag soak) under the race
# detector: 32 goroutines against a hostile loopback upstream (5xx, 429 and
# 503 with Retry-After, resets, hangs, slow headers and bodies) with random
# caller deadlines and cancellations, checking that every call ends with a
# response or a documented error no later than its deadline + 50 ms, and
# that afterwards no goroutine or connection is left and the heap stayed
# flat.
#
#   scripts/soak.sh        # 60 seconds, what CI runs (.ci/run)
#   scripts/soak.sh 30m    # as long as asked
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

duration=${1:-60s}
go test -tags soak -race -count=1 -v -run '^TestChaosSoak$' -soak.duration "$duration" -timeout 0 .
