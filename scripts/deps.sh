#!/usr/bin/env bash
# Installs the programs the tests start for real, from Debian's packages, when
# they are missing: redis-server (cluster tests), chromium (status page and
# timeline tests) and wrk (the load generator of bench/cmd/wrkload). Runs
# `apt-get update` once, and only when something is missing.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "scripts/deps.sh: installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
