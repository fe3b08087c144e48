#!/usr/bin/env bash
# Regenerates the pictures the README shows, under docs/:
#   docs/status-page.png          the status page of the client demo, taken by
#                                 headless Chromium during the demo's 5xx storm
#   docs/client-timeline.svg      the timeline the client demo draws of its run
#   docs/simulated-outage.svg     the timeline `breakwater simulate -svg` draws
# Chromium comes from scripts/deps.sh. Run it after changing the status page,
# the timeline or the demo, and commit what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v chromium >/dev/null 2>&1 || scripts/deps.sh

tmp=$(mktemp -d)
trap 'kill "${demo:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/client" ./examples/client
go build -o "$tmp/breakwater" ./cmd/breakwater

# The demo's phases last 3 s each: healthy, then a 5xx storm from 3 s; the
# breaker opens at about 3.5 s, and reopens for 2 s at about 4.5 s. The
# page is taken about a second after the sleep, Chromium's start included.
"$tmp/client" -svg docs/client-timeline.svg > "$tmp/client.out" &
demo=$!
for _ in $(seq 50); do
  url=$(sed -n 's|^status page \(http://[^ ,]*\),.*|\1|p' "$tmp/client.out")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "screenshots.sh: the demo printed no status page address" >&2; exit 1; }
sleep 3.8
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$tmp/profile" --hide-scrollbars --window-size=1280,1000 \
  --virtual-time-budget=1500 --screenshot=docs/status-page.png "$url" 2>/dev/null
wait "$demo"
demo=

# simulate's default callers (4, each 100 ms apart) and configuration.
"$tmp/breakwater" simulate -attempt-time 20ms \
  -healthy-for 10s -fail-for 20s -duration 60s \
  -title "breakwater simulate: 4 callers, 20 s of 502s after 10 s of health, default configuration" \
  -svg docs/simulated-outage.svg > /dev/null
echo "docs/status-page.png docs/client-timeline.svg docs/simulated-outage.svg"
