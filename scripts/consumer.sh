#!/usr/bin/env bash
# Builds and runs a program that uses the modules as a user would: a module
# of its own, outside the repository, with no replace, that requires
# redisstore and otelbw at VERSION (and so breakwater, through them) and
# gets them from a module proxy on the file system made from HEAD
# (internal/tools/modproxy, the zips a tag would give). The program
# (internal/tools/modproxy/testdata/consumer) makes one call through each
# module: breakwater to an httptest server, redisstore's shared rate limit
# on a redis-server this script starts on a free loopback port (and stops),
# otelbw's metrics.
#
#   scripts/consumer.sh            # VERSION: the one the nested modules require
#   scripts/consumer.sh v0.2.0
#
# The modules of the repository come from the file-system proxy only: the
# module cache is a temporary one (a cached copy of the same version would
# hide a change), and the checksum database is not asked about them
# (GONOSUMDB). Third-party modules come from the machine's module cache, and
# from $(go env GOPROXY) when missing there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS

root=github.com/breakwater-go/breakwater
version=${1:-$(cd redisstore && go list -m -f '{{.Version}}' "$root")}
command -v redis-server >/dev/null 2>&1 || scripts/deps.sh

tmp=$(mktemp -d)
redis=
cleanup() {
  if [ -n "$redis" ]; then kill "$redis" 2>/dev/null || true; wait "$redis" 2>/dev/null || true; fi
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

upstream_proxy=$(go env GOPROXY)
cache=$(go env GOMODCACHE)/cache/download
mapfile -t modules < <(scripts/release.sh -list)
echo "== a module proxy at $version: ${modules[*]}"
go run ./internal/tools/modproxy -version "$version" -out "$tmp/proxy" "${modules[@]}"

mkdir "$tmp/consumer"
cp internal/tools/modproxy/testdata/consumer/main.go "$tmp/consumer/"
cat > "$tmp/consumer/go.mod" <<EOF
module example.com/consumer

go 1.25.0

require (
	$root/otelbw $version
	$root/redisstore $version
)
EOF
# Third-party sums as the modules pin them, so that the checksum database
# is not asked about them either.
cat go.sum redisstore/go.sum otelbw/go.sum | sort -u > "$tmp/consumer/go.sum"

export GOPROXY="file://$tmp/proxy,file://$cache,$upstream_proxy"
export GONOSUMDB=$root GOMODCACHE=$tmp/modcache GOWORK=off GOFLAGS=-mod=mod
echo "== the consumer: go mod tidy, go build (GOPROXY=file://…/proxy,file://…/cache/download,$upstream_proxy)"
# (go mod tidy downloads the tests' modules of every dependency: not listed.)
(cd "$tmp/consumer" && go mod tidy 2>&1 | { grep -v '^go: downloading' || true; } && go build -o consumer .)
resolved=$(cd "$tmp/consumer" && go list -m -f '{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}}{{end}}' "$root" "$root/redisstore" "$root/otelbw")
echo "$resolved" | sed 's/^/  /'
if [ "$(echo "$resolved" | grep -c " $version\$")" -ne 3 ]; then
  echo "consumer.sh: the consumer did not get every module at $version" >&2
  exit 1
fi

echo "== redis-server on a free loopback port"
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 40000))
  : > "$tmp/redis.log"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$tmp" --logfile "$tmp/redis.log" &
  redis=$!
  for _ in $(seq 100); do
    grep -q 'Ready to accept connections' "$tmp/redis.log" && break
    kill -0 "$redis" 2>/dev/null || break
    sleep 0.05
  done
  grep -q 'Ready to accept connections' "$tmp/redis.log" && break
  kill "$redis" 2>/dev/null || true
  wait "$redis" 2>/dev/null || true
  redis=
done
[ -n "$redis" ] || { echo "consumer.sh: redis-server did not start:" >&2; cat "$tmp/redis.log" >&2; exit 1; }

echo "== the consumer's calls (redis-server on 127.0.0.1:$port)"
"$tmp/consumer/consumer" -redis "127.0.0.1:$port" | sed 's/^/  /'
echo "consumer.sh: ok in $((SECONDS - start))s"
