#!/usr/bin/env bash
# What exporters polling every second do to Patroni's REST pool, seen from the cluster's own
# leader race. Patroni 3.3.9+, 4.0.8+, 4.1.1+ serve the REST API from a fixed pool (restapi.thread_pool_size,
# default and minimum 5: 6 workers), shared by every client: the members' own fetch_node_status
# (GET /patroni of each other member during the leader race, 2 s deadline, no retry), failsafe's
# POST /failsafe, HAProxy's checks, the watcher's GET /cluster, and every exporter. Each
# condition runs N exporters (README quick start: --patroni.url of member 0 and the Raft password
# file) at --poll.interval 1s against a real 3-member cluster (tests/e2e/cluster.sh), and measures:
#   latency  one replica's GET /patroni to the other replica (probe.py: from the asking member's
#            address, a new connection each time, 2 s deadline, every PROBE_INTERVAL s for
#            WINDOW_S s, after WARMUP_S s of the exporters running): p50, p99, max, timeouts
#   failover the primary killed (`cluster.sh kill`: SIGKILL of Patroni + immediate shutdown of
#            its postmaster) with the exporters still polling; the time until a survivor says
#            primary in its own GET /patroni (asked every 0.1 s), and in the survivors' logs their
#            fetch_node_status of each other: "Got response from" (answers) and "Request failed
#            to" (failures: a member counted unhealthy in the race)
# Then the exporters stop, the old primary starts again (a replica) and the cluster is healthy
# (sync) before the next condition. The conditions are interleaved: ROUNDS rounds, each running
# every condition once, in an order rotated by one every round.
#
# Conditions (CONDITIONS, default "0 1 3"): N = N exporters of EXPORTER_BIN; N-b = N exporters of
# EXPORTER_BIN_B (another build, e.g. one that limits its requests per member): rows named
# N@EXPORTER_LABEL_B.
#
# Usage (root; not in CI): docs/bench/rest-pool/run.sh [PATRONI_VERSION]   (default 4.1.5)
#   or scripts/bench.sh rest-pool. Environment: ROUNDS=2 WINDOW_S=45 WARMUP_S=10
#   PROBE_INTERVAL=0.1, EXPORTER_BIN (default the debug build; measure a release build),
#   EXPORTER_LABEL (default `git describe --always --dirty`), EXPORTER_BIN_B, EXPORTER_LABEL_B,
#   OUT (default docs/bench/rest-pool.csv; APPEND=1 adds to its rows). Then summary.py's table.
# Log in $E2E_WORK/rest-pool-VERSION.log; in $E2E_WORK/rest-pool-VERSION/: rows.csv, the probe's
# samples (probe-ROUND-CONDITION.tsv), the exporters' logs.
set -euo pipefail
{ # parsed whole before it runs

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$HERE/../lib.sh"
HEADER=exporter,patroni_version,round,condition,exporters,load1,samples,p50_ms,p99_ms,max_ms,timeouts,errors,failover_s,fetch_failures,fetch_answers,source,target,killed,new_primary

# ---- outside the namespace: the run (one version: latency is measured, no neighbour), then
# one results file and the table
bench_outside rest-pool rows.csv "${1:-4.1.5}"

E2E_TOOLS="" e2e_scenario rest-pool "$@"

# ------------------------------------------------------------------ in the namespace
bench_settings rest-pool 45 2
PROBE_INTERVAL=${PROBE_INTERVAL:-0.1}
read -r -a CONDITIONS <<<"${CONDITIONS:-0 1 3}"
CSV="$RUN_DIR/rows.csv"

e2e_setup
cluster up --sync >&2 || on_fail "cluster up --sync"
eval "$(cluster env)"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
( umask 077; printf '%s\n' "$RAFT_PASS" >"$RUN_DIR/raft-secret" )
pool=$(grep -h 'REST API thread_pool_size' "$DATA_DIR"/postgresql-*/patroni.log | tail -n1 | sed 's/.*thread_pool_size = \([0-9]*\).*/\1/')
e2e_result setup "the members' REST API thread_pool_size (their own log)" "${pool:-not logged}"

rest_of() { e2e_member "$1" REST; }
role_of() { curl -sf -m 1 "$(rest_of "$1")/patroni" 2>/dev/null | jq -r '.role // "?"' 2>/dev/null || echo down; }
is_primary_role() { [[ $1 == primary || $1 == master ]]; }
# primary_now: the member whose own GET /patroni says primary (rc 1: none)
primary_now() {
  local n
  for n in 0 1 2; do
    if is_primary_role "$(role_of "$n")"; then echo "$n"; return 0; fi
  done
  return 1
}
log_lines() { wc -l <"$(e2e_member "$1" LOG)"; }

start_exporters() { # start_exporters CONDITION
  local count=${1%-b} bin=$EXPORTER_BIN i
  [[ $1 == *-b ]] && bin=$EXPORTER_BIN_B
  MON_PIDS=()
  for ((i = 0; i < count; i++)); do
    "$bin" --patroni.url "$MEMBER0_REST" --raft.password-file "$RUN_DIR/raft-secret" --poll.interval 1s \
      --web.listen-address "127.0.0.1:$((9393 + i))" >>"$RUN_DIR/exporter-$1-$i.log" 2>&1 9>&- &
    MON_PIDS+=("$!"); E2E_PIDS+=("$!")
  done
}
echo "$HEADER" >"$CSV"
mapfile -t RUNS < <(bench_schedule)
for run in "${RUNS[@]}"; do
  read -r round cond name <<<"$run"
  p=$(primary_now) || on_fail "round $round $cond: no primary"
  others=()
  for n in 0 1 2; do ((n == p)) || others+=("$n"); done
  src=${others[0]} dst=${others[1]}
  start_exporters "$cond"
  sleep "$WARMUP_S"
  # the exporters must be polling: each one's own /metrics says the cluster is up
  for ((i = 0; i < ${cond%-b}; i++)); do
    EXPORTER_URL="http://127.0.0.1:$((9393 + i))/metrics" wait_for_metric patroni_up 'scope="pg-test"' == 1 30 >/dev/null \
      || on_fail "round $round $cond: exporter $i does not poll"
  done
  load1=$(cut -d' ' -f1 /proc/loadavg)
  samples="$RUN_DIR/probe-$round-$cond.tsv"
  src_ip=$(e2e_member "$src" REST); src_ip=${src_ip#*://}; src_ip=${src_ip%:*}
  python3 "$HERE/probe.py" "$src_ip" "$(rest_of "$dst")/patroni" "$WINDOW_S" "$PROBE_INTERVAL" "$samples" \
    || on_fail "round $round $cond: probe"
  # the leader race, with the exporters still polling
  l1=$(log_lines "$src") l2=$(log_lines "$dst")
  T0=$(e2e_now)
  cluster kill "$p" >>"$RUN_DIR/kill.log" 2>&1 || on_fail "round $round $cond: cluster kill $p"
  failover="" new=""
  while ! awk -v a="$T0" -v b="$(e2e_now)" 'BEGIN { exit !(b - a > 120) }'; do
    for n in "$src" "$dst"; do
      if is_primary_role "$(role_of "$n")"; then failover=$(e2e_since "$T0"); new=$n; break 2; fi
    done
    sleep 0.1
  done
  [[ -n $failover ]] || on_fail "round $round $cond: no new primary within 120 s of the kill"
  # a survivor's fetch_node_status of the other survivor that failed (those of the killed
  # primary fail by design)
  fetch_fail=$(( $(tail -n +"$((l1 + 1))" "$(e2e_member "$src" LOG)" | grep -c "Request failed to $(e2e_member "$dst" NAME):" || true) \
    + $(tail -n +"$((l2 + 1))" "$(e2e_member "$dst" LOG)" | grep -c "Request failed to $(e2e_member "$src" NAME):" || true) ))
  fetch_ok=$(( $(tail -n +"$((l1 + 1))" "$(e2e_member "$src" LOG)" | grep -c "Got response from $(e2e_member "$dst" NAME) " || true) \
    + $(tail -n +"$((l2 + 1))" "$(e2e_member "$dst" LOG)" | grep -c "Got response from $(e2e_member "$src" NAME) " || true) ))
  bench_stop_monitors
  python3 - "$samples" "$EXPORTER_LABEL" "$PATRONI_VERSION" "$round" "$name" "${cond%-b}" "$load1" \
    "$failover" "$fetch_fail" "$fetch_ok" "$(e2e_member "$src" NAME)" "$(e2e_member "$dst" NAME)" \
    "$(e2e_member "$p" NAME)" "$(e2e_member "$new" NAME)" >>"$CSV" <<'PY'
import sys
samples, *fields = sys.argv[1:]
label, version, rnd, name, count, load1, failover, fetch_fail, fetch_ok, src, dst, killed, new = fields
rows = [line.rstrip("\n").split("\t") for line in open(samples, encoding="utf-8") if line.strip()]
lat = sorted(float(r[1]) * 1000 for r in rows)
def rank(q):  # nearest rank
    return lat[max(0, min(len(lat) - 1, int(q * len(lat) + 0.999999) - 1))]
timeouts = sum(r[2] == "timeout" for r in rows)
errors = sum(r[2] not in ("ok", "timeout") for r in rows)
print(",".join([label, version, rnd, name, count, load1, str(len(lat)), f"{rank(0.5):.1f}", f"{rank(0.99):.1f}",
                f"{lat[-1]:.1f}", str(timeouts), str(errors), failover, fetch_fail, fetch_ok, src, dst, killed, new]))
PY
  e2e_log "round $round $cond: $(tail -n1 "$CSV")"
  cluster start "$p" >>"$RUN_DIR/kill.log" 2>&1 || on_fail "round $round $cond: cluster start $p"
  cluster wait --sync >>"$RUN_DIR/kill.log" 2>&1 || on_fail "round $round $cond: healthy (sync) again"
done
check "every condition has its rows" test "$(($(wc -l <"$CSV") - 1))" -eq "${#RUNS[@]}"
e2e_finish "REST pool, Patroni $PATRONI_VERSION"
}
