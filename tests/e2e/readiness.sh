#!/usr/bin/env bash
# readiness.sh - issue #36 item 3, "readiness by version": GET /readiness of a replica held beyond
# maximum_lag_on_failover is 503 on Patroni 4.1.5 (from 4.1.0 a replica must stream and be within
# maximum_lag_on_failover) and 200 on 3.3.8 (its PostgreSQL runs and the DCS answers), and
# patroni_member_readiness says exactly what each Patroni answers. A real 3-member Patroni + Raft
# cluster and the exporter as the README quick start (one --patroni.url + the Raft password file,
# --poll.interval 2s), in a network namespace of their own.
#
# Usage: tests/e2e/readiness.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# Root only (network namespace, SIGSTOP of the cluster's own walreceiver). ~2-3 min per version;
# several versions run in parallel, each in its own namespace (log $E2E_WORK/readiness-VERSION.log,
# measurements in $E2E_WORK/readiness-VERSION/results.tsv, `status` outputs in status-*.txt).
#
#   1 healthy: every member's readiness 1 in the exporter and 200 from its own GET /readiness.
#   2 held: asynchronous replication and maximum_lag_on_failover 64 KiB (`patronictl
#     edit-config`), the walreceiver of replica R SIGSTOPped under a pgbench write load on the
#     leader, until GET /cluster gives R a lag beyond 64 KiB. Once R's own GET /readiness has
#     answered the same for 5 s: it is 503 on 4.x, 200 on 3.x; the exporter's
#     patroni_member_readiness{R} reaches the same answer (0 / 1) within the probe rotation (one
#     member per poll: 3 polls) and keeps it while Patroni keeps its own; `status` names R as not
#     ready on 4.x, with what readiness means there, and says nothing of R's readiness on 3.x.
#   3 released: SIGCONT, load stopped: R's own 200 and the exporter's 1 again.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
E2E_TOOLS="$PGBIN/psql $PGBIN/pgbench" e2e_scenario readiness "$@"

# ------------------------------------------------------------------ in the namespace: the proof
export DATA_DIR="$E2E_WORK/cluster-rd-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
POLL=2                                        # exporter --poll.interval (s): 1 s (a 900 ms timeout) timed out /cluster under CI load
MAX_LAG=65536                                 # maximum_lag_on_failover while R is held (bytes)
ROTATION=$((3 * 4 * POLL + 3))                # a member's /readiness is asked every 3 members x 4 turns of the rotation (READINESS_EVERY_TURNS), + slack
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
case $PATRONI_VERSION in
  3.*) WANT_CODE=200 WANT=1 ;;   # running and the DCS answers
  *)   WANT_CODE=503 WANT=0 ;;   # 4.1.0+: streaming and within maximum_lag_on_failover
esac

e2e_setup
STOPPED=()   # postgres processes we SIGSTOPped: always continued
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() { local pid; for pid in "${STOPPED[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done; }
e2e_log "=== readiness by version, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
name() { echo "postgresql-$1"; }
ml() { echo "$S,member=\"postgresql-$1\""; }         # the label set of member N
pg() { # pg N SQL: psql -At on member N, as its superuser over its unix socket
  local n=$1 addr="MEMBER${1}_PG"
  shift
  timeout 20 "$PGBIN/psql" -X -At -q -h "$DATA_DIR/postgresql-$n/sock" -p "${!addr##*:}" -U operator -d postgres -c "$*" 9>&-
}
walreceiver_pid() { # the walreceiver of member N: one of OUR cluster's postgres processes
  local pid ppid postmaster
  pid=$(pg "$1" "SELECT pid FROM pg_stat_wal_receiver") || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  postmaster=$(head -n1 "$DATA_DIR/postgresql-$1/pgdata/postmaster.pid" 2>/dev/null) || return 1
  ppid=$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ') || return 1
  [[ $ppid == "$postmaster" ]] && echo "$pid"
}
own_readiness() { curl -s -o /dev/null -w '%{http_code}' -m 3 "$(e2e_rest "$1")/readiness" 2>/dev/null || true; }
cluster_lag() { # the lag GET /cluster (of the leader) gives member N, in bytes ("" when none)
  curl -sf -m 3 "$(e2e_rest "$L")/cluster" 2>/dev/null \
    | jq -r --arg m "$(name "$1")" '.members[] | select(.name == $m) | .lag // "" | tostring' 2>/dev/null || true
}
# own_steady N SECONDS TIMEOUT: member N's own GET /readiness, once it answered the same for SECONDS
own_steady() {
  local code last="" since end=$(($(date +%s) + $3))
  since=$(date +%s)
  while (($(date +%s) < end)); do
    code=$(own_readiness "$1")
    if [[ $code != "$last" ]]; then last=$code since=$(date +%s); fi
    if (($(date +%s) - since >= $2)); then echo "$code"; return 0; fi
    sleep 0.5
  done
  return 1
}
show_state() {
  e2e_show_metrics "the exporter's readiness view" '^patroni_member_(readiness|liveness|lag_bytes|patroni_info)\{'
  local n
  for n in 0 1 2; do echo "===== $(name "$n") own GET /readiness: $(own_readiness "$n")"; done
}

# ================================================================== 1. healthy
cluster up --sync >&2 || on_fail "cluster up --sync"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, MEMBERn_PG, REST_USER, RAFT_PASS, ...
e2e_exporter "$POLL"
printf '%s\n' "INSERT INTO readiness_load (pad) VALUES (repeat(md5(random()::text), 32));" >"$RUN_DIR/load.sql"

e2e_log "=== 1: healthy"
expect "1: exporter polls the cluster" patroni_up "$S" == 1 30
leader=$(e2e_cluster_leader) || on_fail "1: GET /cluster names a leader"
L=${leader##*-}
R=$(( (L + 1) % 3 ))
pg "$L" "CREATE TABLE readiness_load (id bigserial PRIMARY KEY, pad text)" >/dev/null || on_fail "1: CREATE TABLE"
for n in 0 1 2; do
  expect "1: $(name "$n") readiness 1" patroni_member_readiness "$(ml "$n")" == 1 $((ROTATION + 5))
  code=$(own_readiness "$n")
  ensure "1: $(name "$n")'s own GET /readiness 200" "1: $(name "$n")'s own GET /readiness answered $code" test "$code" = 200
done

# ================================================================== 2. a replica held beyond maximum_lag_on_failover
e2e_log "=== 2: $(name "$R") held beyond maximum_lag_on_failover ($MAX_LAG B), load on $(name "$L")"
e2e_edit_config "$RUN_DIR/edit-config.txt" synchronous_mode=false "maximum_lag_on_failover=$MAX_LAG" \
  || on_fail "2: edit-config"
expect "2: asynchronous (no sync standby)" patroni_cluster_sync_standbys "$S" == 0 40
expect "2: maximum_lag_on_failover $MAX_LAG in the exporter's /config" patroni_config_maximum_lag_on_failover_bytes "$S" == "$MAX_LAG" 150
W=""; for _ in {1..40}; do W=$(walreceiver_pid "$R") && break; sleep 0.5; done  # restarted by the edit
[[ -n $W ]] || on_fail "2: no walreceiver on $(name "$R") within 20 s"
kill -STOP "$W"; STOPPED+=("$W")
T_HOLD=$(e2e_now)
"$PGBIN/pgbench" -n -c 2 -R 200 -T 90 -f "$RUN_DIR/load.sql" -h "$DATA_DIR/postgresql-$L/sock" \
  -p "$(e2e_member "$L" PG | sed 's/.*://')" -U operator postgres >"$RUN_DIR/pgbench.txt" 2>&1 9>&- &
LOAD_PID=$!
E2E_PIDS+=("$LOAD_PID")
lag="" deadline=$(($(date +%s) + 60))
until [[ $lag =~ ^[0-9]+$ ]] && ((lag > MAX_LAG)); do
  (($(date +%s) < deadline)) || on_fail "2: GET /cluster gives $(name "$R") no lag beyond $MAX_LAG within 60 s (last '$lag')"
  sleep 0.5
  lag=$(cluster_lag "$R")
done
pass "2: GET /cluster: $(name "$R") lags $lag B > maximum_lag_on_failover $MAX_LAG ($(e2e_since "$T_HOLD")s after the SIGSTOP)"
e2e_result 2 "SIGSTOP -> GET /cluster lag of R beyond maximum_lag_on_failover (s)" "$(e2e_since "$T_HOLD")"
own=$(own_steady "$R" 5 40) || on_fail "2: $(name "$R")'s own GET /readiness did not settle within 40 s"
e2e_result 2 "$(name "$R")'s own GET /readiness, held beyond maximum_lag_on_failover" "$own"
ensure "2: Patroni $PATRONI_VERSION's own GET /readiness of the held replica: $WANT_CODE" \
  "2: Patroni $PATRONI_VERSION's own GET /readiness of the held replica answered $own, want $WANT_CODE" test "$own" = "$WANT_CODE"
expect "2: the exporter's readiness{$(name "$R")} $WANT, as Patroni answers" patroni_member_readiness "$(ml "$R")" == "$WANT" "$ROTATION"
e2e_result 2 "Patroni's own answer settled -> the exporter's readiness $WANT (s)" "$E2E_ELAPSED"
# the same moment, three times a rotation apart: the exporter's value and Patroni's own answer
# absent_why N: why the exporter has no readiness of member N, by its own word: its last poll
# failed (patroni_up 0), or its last request of N's /readiness did (its log); exit 1 for neither
absent_why() {
  local last
  [[ $(metric_value patroni_up "$S" 2>/dev/null) == 0 ]] && { echo "its poll failed (patroni_up 0)"; return 0; }
  last=$(grep -F "target=\"readiness of $(name "$1")\"" "$EXPORTER_LOG" | tail -n 1 || true)
  [[ $last == *'message="poll failed"'* ]] && { echo "its request failed (${last##*kind=})"; return 0; }
  return 1
}
for i in 1 2 3; do
  before=$(own_readiness "$R")
  if ! value=$(metric_value patroni_member_readiness "$(ml "$R")"); then
    # on a loaded machine a poll or the probe can time out (seen in a pair run: every /cluster
    # candidate past --poll.timeout): the exporter must say so, and the sample is the next
    # poll's value
    why=$(absent_why "$R") || on_fail "2: readiness{$(name "$R")} absent, and the exporter says no poll or request of it failed"
    e2e_result 2 "sample $i: readiness{$(name "$R")} absent: $why; the next poll's value is the sample" "-"
    wait_for_metric patroni_member_readiness "$(ml "$R")" present "" "$ROTATION" >/dev/null \
      || on_fail "2: readiness{$(name "$R")} absent for a rotation ($ROTATION s) after: $why"
    value=$(metric_value patroni_member_readiness "$(ml "$R")") || on_fail "2: readiness{$(name "$R")} absent"
  fi
  after=$(own_readiness "$R")
  e2e_result 2 "sample $i: own GET /readiness before / exporter / after" "$before / $value / $after"
  if [[ $before == "$WANT_CODE" && $after == "$WANT_CODE" ]]; then
    check "2: sample $i: exporter $value where Patroni answers $WANT_CODE" test "$value" = "$WANT"
  else
    on_fail "2: sample $i: Patroni's own answer changed during the hold ($before, $after)"
  fi
  sleep "$ROTATION"
done
lag=$(cluster_lag "$R")
if ! [[ $lag =~ ^[0-9]+$ ]] || ((lag <= MAX_LAG)); then
  on_fail "2: $(name "$R") no longer beyond maximum_lag_on_failover at the end of the samples (lag '$lag')"
fi
e2e_result 2 "GET /cluster lag of R after the samples (B)" "$lag"
# the quick start's status, with lib.sh's deadline (E2E_STATUS_TIMEOUT)
e2e_status held -- --patroni.url "$MEMBER0_REST" --raft.password-file raft-secret >/dev/null || true
if ((WANT == 0)); then
  check "2: status names $(name "$R") not ready, with 4.1's meaning" \
    grep -q "$(name "$R") is not ready.*streams.*maximum_lag_on_failover" "$RUN_DIR/status-held.txt"
else
  check "2: status reports the cluster and says nothing of $(name "$R")'s readiness (ready on 3.x)" \
    bash -c "grep -q '^Cluster: pg-test' '$RUN_DIR/status-held.txt' && ! grep -q 'not ready' '$RUN_DIR/status-held.txt'"
fi

# ================================================================== 3. released
e2e_log "=== 3: released"
kill -CONT "$W"; STOPPED=()
e2e_stop_pid "$LOAD_PID"
T_CONT=$(e2e_now)
own=$(own_steady "$R" 3 60) || on_fail "3: $(name "$R")'s own GET /readiness did not settle within 60 s"
ensure "3: $(name "$R")'s own GET /readiness 200 again" "3: $(name "$R")'s own GET /readiness $own after SIGCONT" test "$own" = 200
expect "3: the exporter's readiness{$(name "$R")} 1 again" patroni_member_readiness "$(ml "$R")" == 1 "$ROTATION"
e2e_result 3 "SIGCONT -> exporter's readiness 1 (s)" "$(e2e_since "$T_CONT")"

e2e_finish "readiness by version"
}
