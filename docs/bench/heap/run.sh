#!/usr/bin/env bash
# run.sh - where the exporter's memory goes at N = 1000: heaptrack on the release exporter
# (symbols kept, no debug info: functions inlined by LTO are shown as their callers) polling
# a fleet-sim of N clusters over http every 30 s, scraped once per interval as Prometheus
# does, for $CYCLES intervals after one of settling; then its memory map (/proc/PID/smaps_rollup
# and the largest mappings) and heaptrack_print's peak and top allocators.
# Usage: docs/bench/heap/run.sh OUTDIR   (N=1000 INTERVAL=30 CYCLES=3 PORT=19395
#   EXPORTER=target/release/patroni-raft-exporter FLEET_SIM=target/release/fleet-sim
#   EXPORTER_ENV: environment of the exporter, e.g. "MALLOC_ARENA_MAX=1"; SIGNAL=TERM: how the
#   exporter is stopped. SIGNAL=KILL stops it where it stands, so heaptrack's "leaks" are the
#   heap in use at that moment, by the place that allocated it: heaptrack-live.txt, and split
#   by the exporter's module in heap-split.txt, what docs/performance.md quotes)
# Only 127.0.0.0/8; stops only the processes it started, by PID.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
out="${1:?usage: run.sh OUTDIR}"
N="${N:-1000}" INTERVAL="${INTERVAL:-30}" CYCLES="${CYCLES:-3}" PORT="${PORT:-19395}"
EXPORTER="${EXPORTER:-$ROOT/target/release/patroni-raft-exporter}"
FLEET_SIM="${FLEET_SIM:-$ROOT/target/release/fleet-sim}"
mkdir -p "$out"
ulimit -n "$(ulimit -Hn)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
"$FLEET_SIM" --clusters "$N" --duration "$((INTERVAL * (CYCLES + 4) + 120))s" --poll-interval "${INTERVAL}s" \
  --workers 2 --config-out "$out/exporter.yml" --password-file "$out/raft-password" >"$out/fleet-sim.out" 2>&1 &
pids+=("$!")
timeout 120 bash -c "until grep -q '^ready' '$out/fleet-sim.out'; do sleep 0.5; done"
# shellcheck disable=SC2086  # EXPORTER_ENV: NAME=VALUE words
env ${EXPORTER_ENV:-} heaptrack -o "$out/heaptrack" "$EXPORTER" --config.file "$out/exporter.yml" \
  --web.listen-address "127.0.0.1:$PORT" --log.level warn >"$out/heaptrack.out" 2>&1 &
pids+=("$!")
timeout 120 bash -c "until curl -fsS -o /dev/null 'http://127.0.0.1:$PORT/-/ready'; do sleep 0.5; done"
exporter=$(pgrep -n -f "^$EXPORTER --config.file $out/exporter.yml")
sleep "$INTERVAL"
for ((i = 0; i < CYCLES; i++)); do
  sleep "$INTERVAL"
  curl -fsS -o /dev/null -H 'Accept-Encoding: gzip' "http://127.0.0.1:$PORT/metrics"
done
cat "/proc/$exporter/smaps_rollup" >"$out/smaps_rollup.txt"
awk '/^[0-9a-f]+-[0-9a-f]+ / { name = $6 } /^Rss:/ { rss[name == "" ? "[anon]" : name] += $2 }
  END { for (n in rss) printf "%8d KiB  %s\n", rss[n], n }' "/proc/$exporter/smaps" | sort -rn | head -15 >"$out/smaps-by-mapping.txt"
grep -E '^(VmRSS|VmHWM|RssAnon|RssFile|Threads)' "/proc/$exporter/status" >"$out/status.txt"
kill -s "${SIGNAL:-TERM}" "$exporter"
timeout 60 tail --pid="$exporter" -f /dev/null || true
sleep 2
heaptrack_print --print-peaks 1 --print-allocators 0 --print-temporary 0 --print-leaks 0 \
  --peak-limit 25 --sub-peak-limit 3 "$out"/heaptrack*.zst >"$out/heaptrack-print.txt" 2>&1 || true
if [[ ${SIGNAL:-TERM} == KILL ]]; then
  heaptrack_print --print-peaks 0 --print-allocators 0 --print-temporary 0 --print-leaks 1 \
    --peak-limit 60 --sub-peak-limit 12 "$out"/heaptrack*.zst >"$out/heaptrack-live.txt" 2>&1 || true
  # the heap in use by the part of the exporter that allocated it (split.py; names the frames
  # LTO inlined only when the build has line tables)
  heaptrack_print --flamegraph-cost-type leaked -F "$out/leaked-stacks.txt" "$out"/heaptrack*.zst >/dev/null 2>&1 || true
  python3 "$ROOT/docs/bench/heap/split.py" "$out/leaked-stacks.txt" "$ROOT/src" >"$out/heap-split.txt" || true
fi
cat "$out/status.txt" "$out/smaps-by-mapping.txt"
# The heap over time (MiB, the largest of each second), from heaptrack's massif export.
heaptrack_print --print-peaks 0 --print-allocators 0 --print-temporary 0 --print-leaks 0 \
  -M "$out/massif.out" "$out"/heaptrack*.zst >/dev/null 2>&1 || true
awk '/^time=/ { t = substr($0, 6) } /^mem_heap_B=/ { s = int(t); v = substr($0, 12) / 1048576; if (!(s in m) || v > m[s]) m[s] = v }
  END { for (k in m) printf "%d %.1f\n", k, m[k] }' "$out/massif.out" | sort -n >"$out/heap-max-per-second.txt"
grep -E '^(peak heap memory|peak RSS|total memory leaked|calls to allocation)' "$out/heaptrack-print.txt" || true
