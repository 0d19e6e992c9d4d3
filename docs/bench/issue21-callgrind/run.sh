#!/usr/bin/env bash
# Callgrind of the exporter and of the floor against one fleet-sim (N clusters), steady state only.
set -u
N=${N:-100}
OUT=${OUT:-/work/fleet21-out/callgrind}
mkdir -p "$OUT"; cd "$OUT" || exit 1
ulimit -n "$(ulimit -Hn)"
FLOOR=/work/fleet21-bin/after/floor
EXPORTER=${EXPORTER:-/work/fleet21-bin/after/patroni-raft-exporter}
/work/fleet21-bin/before/fleet-sim --clusters "$N" --duration 400s --poll-interval 10s --config-out cfg.yml --password-file pw > sim.out 2> sim.err &
SIM=$!
until grep -q ready sim.out; do sleep 1; done
measure() { # name command...
  local name=$1; shift
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/$name.cg" "$@" > "$name.stdout" 2> "$name.stderr" &
  local pid=$!
  sleep 25   # start-up and the first polls (key derivation) outside the measurement
  callgrind_control -i on "$pid" > /dev/null
  for _ in 1 2 3; do
    sleep 10
    if [[ $name == exporter* ]]; then curl -s -o /dev/null -H 'Accept-Encoding: gzip' http://127.0.0.1:19511/metrics; fi
  done
  callgrind_control -i off "$pid" > /dev/null
  if [[ $name == exporter* ]]; then curl -s http://127.0.0.1:19511/metrics > "$name.metrics.txt"; fi
  kill "$pid"; wait "$pid" 2>/dev/null
}
measure exporter "$EXPORTER" --config.file cfg.yml --web.listen-address 127.0.0.1:19511 --log.level warn
measure floor "$FLOOR" --config cfg.yml --duration 120s
kill "$SIM"
for f in exporter floor; do
  callgrind_annotate --inclusive=yes "$f.cg" 2>/dev/null | head -60 > "$f.inclusive.txt"
  callgrind_annotate "$f.cg" 2>/dev/null | head -60 > "$f.exclusive.txt"
done
echo "done" > "$OUT/done"
