#!/bin/bash
# The CPU per /metrics request at N = 1 (fleet-sim, release builds), plain and gzip (wrk -t2
# -c50 -d10s each; the exporter's utime + stime), then `perf record` of a third, gzip run and
# where its samples are (classify.py). As root, in a network namespace of its own:
#   unshare -n docs/bench/gzip-profile/run.sh
# Output in $OUT (default target/bench/gzip-profile/); its summary.txt is what
# docs/performance.md quotes (docs/bench/gzip-profile/request-cpu-n1.txt).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE/../../.."
D="${OUT:-$PWD/target/bench/gzip-profile}"
URL=http://127.0.0.1:19393/metrics
mkdir -p "$D"
ip link set lo up
target/release/fleet-sim --clusters 1 --duration 300s --poll-interval 10s --workers 1 \
  --config-out "$D/exporter.yml" --password-file "$D/raft-password" >"$D/sim.out" 2>"$D/sim.err" &
SIM=$!
for _ in $(seq 100); do grep -q '^ready' "$D/sim.out" && break; sleep 0.2; done
target/release/patroni-raft-exporter --config.file "$D/exporter.yml" \
  --web.listen-address 127.0.0.1:19393 --log.level warn 2>"$D/exporter.log" &
EXP=$!
trap 'kill "$EXP" "$SIM" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs -o /dev/null "${URL%/metrics}/-/ready" && break; sleep 0.2; done
sleep 3
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
{
  echo "body bytes: plain $(curl -s "$URL" | wc -c), gzip $(curl -s -H 'Accept-Encoding: gzip' "$URL" | wc -c)"
  for mode in plain gzip; do
    header=(); [[ $mode == gzip ]] && header=(-H 'Accept-Encoding: gzip')
    c0=$(ticks "$EXP")
    wrk -t2 -c50 -d10s "${header[@]}" "$URL" >"$D/wrk-$mode.txt"
    c1=$(ticks "$EXP")
    requests=$(awk '/requests in/ { print $1 }' "$D/wrk-$mode.txt")
    awk -v m="$mode" -v c=$((c1 - c0)) -v r="$requests" \
      'BEGIN { printf "%s: %d requests, exporter CPU %.2f s, %.1f us per request\n", m, r, c / 100, c * 10000 / r }'
  done
} | tee "$D/summary.txt"
perf record -e cpu-clock -F 999 -g -p "$EXP" -o "$D/perf-gzip.data" -- sleep 10 >/dev/null 2>&1 &
PERF=$!
sleep 0.5
wrk -t2 -c50 -d9s -H 'Accept-Encoding: gzip' "$URL" >"$D/wrk-gzip-perf.txt"
wait "$PERF" || true
perf report -i "$D/perf-gzip.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -8 >"$D/objects.txt"
perf report -i "$D/perf-gzip.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 >"$D/symbols.txt"
perf script -i "$D/perf-gzip.data" 2>/dev/null >"$D/script.txt"
python3 "$HERE/classify.py" "$D/script.txt" | tee -a "$D/summary.txt"
