#!/usr/bin/env bash
# run.sh - where the CPU goes at N clusters: `perf record` on the release exporter, or on the
# floor (benches/floor.rs), polling a fleet-sim of N clusters (ETCD_N of them on etcd) over
# http every 10 s, 60 s after 25 s of settling; then `perf script` into OUTDIR/script.txt for
# split.py, which compares an exporter's profile with the floor's (docs/bench/profile-n1000.md).
# Usage: docs/bench/profile/run.sh exporter|floor OUTDIR   (as root: a network namespace of its
#   own; N=1000 ETCD_N=0 WINDOW=60 FREQ=499 EXPORTER=target/release/patroni-raft-exporter
#   FLOOR=the floor of `cargo bench --bench floor --no-run` FLEET_SIM=target/release/fleet-sim;
#   build with CARGO_PROFILE_RELEASE_DEBUG=line-tables-only for the callers of inlined code)
# Only 127.0.0.0/8 inside its namespace; stops only the processes it started, by PID.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
what="${1:?usage: run.sh exporter|floor OUTDIR}"
out="${2:?usage: run.sh exporter|floor OUTDIR}"
N="${N:-1000}" ETCD_N="${ETCD_N:-0}" WINDOW="${WINDOW:-60}" FREQ="${FREQ:-499}"
EXPORTER="${EXPORTER:-$ROOT/target/release/patroni-raft-exporter}"
FLEET_SIM="${FLEET_SIM:-$ROOT/target/release/fleet-sim}"
if [[ $what == floor && -z ${FLOOR:-} ]]; then
  FLOOR=$(cd "$ROOT" && cargo bench --bench floor --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1)
fi
mkdir -p "$out"
ns="profile-$$"
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
pids=()
cleanup() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    timeout 10 tail --pid="${pids[i]}" -f /dev/null || kill -9 "${pids[i]}" 2>/dev/null || true
  done
  ip netns del "$ns"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
ip netns exec "$ns" "$FLEET_SIM" --clusters "$N" --etcd-clusters "$ETCD_N" --duration "$((WINDOW + 120))s" \
  --poll-interval 10s --workers 2 --config-out "$out/fleet.yml" --password-file "$out/raft-password" \
  >"$out/fleet-sim.out" 2>"$out/fleet-sim.err" &
pids+=("$!")
timeout 120 bash -c "until grep -q '^ready' '$out/fleet-sim.out'; do sleep 0.5; done"
if [[ $what == floor ]]; then
  ip netns exec "$ns" "$FLOOR" --config "$out/fleet.yml" --duration "$((WINDOW + 60))s" >"$out/floor.out" 2>&1 &
else
  ip netns exec "$ns" "$EXPORTER" --config.file "$out/fleet.yml" --web.listen-address 127.0.0.1:19396 \
    --log.level warn 2>"$out/exporter.log" &
fi
profiled=$!
pids+=("$profiled")
sleep 25
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/run.txt"
perf record -e cpu-clock -F "$FREQ" --call-graph dwarf,16384 -p "$profiled" -o "$out/perf.data" \
  -- sleep "$WINDOW" 2>"$out/perf.err"
{
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rss: $(awk '/VmRSS/ { print $2, $3 }' "/proc/$profiled/status")"
} >>"$out/run.txt"
perf script -i "$out/perf.data" --no-inline 2>/dev/null >"$out/script.txt"
echo "$(grep -c 'cpu-clock' "$out/script.txt") samples in ${WINDOW} s: $out/script.txt" >>"$out/run.txt"
cat "$out/run.txt"
