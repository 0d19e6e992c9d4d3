#!/usr/bin/env bash
# Usage: run.sh EXPORTER OUT_DIR (fleet-sim path inside); the fresh-buffer run was made by hand
# with the same steps, 5 scrapes, with the binary of bf3d204 (before the buffer was reused).
# Page faults and CPU per rendering at N = 1000: one scrape at a time, so the previous
# rendering is not held by a response.
set -u
EXP=$1; OUT=$2; PORT=${PORT:-19521}
mkdir -p "$OUT"; cd "$OUT" || exit 1
ulimit -n "$(ulimit -Hn)"
nice -n 5 /work/fleet21-bin/before/fleet-sim --clusters 1000 --workers 2 --duration 180s --poll-interval 30s --config-out cfg.yml --password-file pw > sim.out 2> sim.err &
SIM=$!
until grep -q ready sim.out; do sleep 1; done
nice -n 5 "$EXP" --config.file cfg.yml --web.listen-address "127.0.0.1:$PORT" --log.level 'warn,patroni_raft_exporter::metrics::cache=debug' 2> exp.log &
P=$!
until curl -fs "127.0.0.1:$PORT"/-/ready > /dev/null; do sleep 1; done
sleep 35
for i in $(seq 1 "${SCRAPES:-10}"); do
  m0=$(awk '{print $10}' /proc/$P/stat)
  curl -s -o /dev/null "127.0.0.1:$PORT"/metrics
  m1=$(awk '{print $10}' /proc/$P/stat)
  echo "scrape $i: minor faults $((m1 - m0))"
  sleep 1
done > faults.txt
grep -o 'bytes=[0-9]* encode_seconds=[0-9.e-]* encode_cpu_seconds=[0-9.e-]*' exp.log | tail -10 > renders.txt
kill $P; kill $SIM
