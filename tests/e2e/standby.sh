#!/usr/bin/env bash
# standby.sh - issue #22 item 4, standby clusters: a second REAL Patroni + Raft cluster
# (pg-dr, members dr-0..2 on 127.0.0.21-23) with `standby_cluster:` pointing at the primary of
# the first (pg-test, postgresql-0..2 on 127.0.0.11-13), `recovery_min_apply_delay` 10 s (a
# delayed DR standby: under a write load the lag is real and measurable on loopback). One
# exporter watches both from a --config.file that names pg-test as pg-dr's source
# (`standby_of: pg-test`), --poll.interval 2s; a real Prometheus (scrape and evaluation every
# 2 s) evaluates the SHIPPED alerts/patroni-raft.rules.yml unchanged. Everything in a network
# namespace of its own.
#
# Usage: tests/e2e/standby.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# Root only. ~2-3 min per version; several versions run in parallel, each in its own namespace
# (logs in $E2E_WORK/standby-VERSION.log, measurements in $E2E_WORK/standby-VERSION/results.tsv,
# samples.tsv, `status` outputs in status-*.txt).
#
#   1 at rest: patroni_cluster_standby 1 for pg-dr, 0 for pg-test; dr-0's
#     patroni_standby_leader_streaming 1 (its own GET /patroni: standby_leader, streaming);
#     patroni_standby_source_info{source_scope="pg-test"}; patroni_standby_lag_bytes within
#     64 KiB of the ground truth pg_wal_lsn_diff(pg_current_wal_lsn() on the source primary,
#     pg_last_wal_replay_lsn() on dr-0); `status --config.file` shows the pair, exit 0.
#   2 a write load on the source primary (~20 s): the lag rises (over 1 MiB) and follows the
#     ground truth read right after each scrape within the WAL of two poll intervals; load
#     stopped: the lag comes back to within 64 KiB (time measured).
#   3 the source primary stopped (`cluster.sh stop 0`): dr-0 stops streaming by its own word,
#     patroni_standby_leader_streaming 0, PatroniStandbyLeaderNotStreaming pending then firing
#     in Prometheus (times measured), `status` exit 1 saying so; started again (a replica of
#     the new source leader now: dr-0 streams from it, cascaded): streaming 1, the alert gone.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

E2E_TOOLS="prometheus" e2e_scenario standby "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-sb-$PATRONI_VERSION"          # the source, pg-test
DR_DATA="$E2E_WORK/cluster-sb-dr-$PATRONI_VERSION"                # the standby cluster, pg-dr
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
POLL=2                                        # exporter --poll.interval (s)
APPLY_DELAY=10                                # pg-dr's recovery_min_apply_delay (s)
LOAD_S=20                                     # the write load (s)
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
SRC='scope="pg-test"'
DR='scope="pg-dr"'
LAG="$DR,source_scope=\"pg-test\""
NS=PatroniStandbyLeaderNotStreaming
SAMPLES="$RUN_DIR/samples.tsv"

e2e_setup
# the standby cluster: cluster.sh with its own data dir, addresses, names and standby_cluster
dr() {
  DATA_DIR=$DR_DATA SCOPE=pg-dr IP_BASE=21 MEMBER_PREFIX=dr STANDBY_OF="${MEMBER0_PG:-}" \
    STANDBY_APPLY_DELAY="${APPLY_DELAY}s" cluster "$@"
}
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() { dr down --fast >>"$RUN_DIR/cleanup.log" 2>&1; }
dr down --fast >>"$RUN_DIR/cleanup.log" 2>&1 || true   # an interrupted run's leftovers
e2e_log "=== standby cluster, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
DL="$DR,member=\"dr-0\""
sql() { "$@" -X -At -q -c "$SQL" 2>/dev/null; }   # sql CLUSTER_FN psql N   (statement in SQL)
src_lsn() { SQL="SELECT pg_current_wal_lsn()" sql cluster psql "$1"; }
dr_replayed() { SQL="SELECT pg_last_wal_replay_lsn()" sql dr psql 0; }
lsn_diff() { SQL="SELECT pg_wal_lsn_diff('$1', '$2')::bigint" sql cluster psql "$3"; }
truth() { # truth SRC_N: pg_wal_lsn_diff(source current, dr-0 replayed), in bytes
  local a b
  a=$(src_lsn "$1") && b=$(dr_replayed) && [[ -n $a && -n $b ]] || return 1
  lsn_diff "$a" "$b" "$1"
}
dr_own() { curl -sf -m 2 "$DR0_REST/patroni" 2>/dev/null || echo '{}'; }
# capture STATE: pg-dr's GET /cluster and /config and each member's own GET /patroni, byte-exact,
# in $RUN_DIR/capture/STATE (the unit tests' fixtures: tests/fixtures/patroni-*/states/standby*)
capture() {
  local dir="$RUN_DIR/capture/$1" n url
  mkdir -p "$dir"
  for n in 0 1 2; do
    url=$(dr env | sed -n "s/^MEMBER${n}_REST='\(.*\)'$/\1/p")
    curl -s -m 3 -o "$dir/patroni-m$n.json" "$url/patroni" || true
  done
  curl -s -m 3 -o "$dir/cluster.json" "$DR0_REST/cluster" || true
  curl -s -m 3 -o "$dir/config.json" "$DR0_REST/config" || true
}
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
abs() { awk -v a="$1" 'BEGIN { printf "%d", (a < 0 ? -a : a) }'; }
lag() { metric_value patroni_standby_lag_bytes "$LAG" | awk '{ printf "%d", $1 }'; }   # integer bytes
show_state() {
  e2e_show_metrics "the exporter's view" '^patroni_(cluster_standby|standby_|up\{)'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
  echo "===== dr-0 own GET /patroni: $(dr_own | jq -c '{role, state, replication_state, xlog}' 2>/dev/null)"
  DUMP_LINES=20 dump_logs "$EXPORTER_LOG"
  dr logs 0 30 2>/dev/null || true
}

# ---- the two clusters
cluster up >&2 || on_fail "source cluster up"
eval "$(cluster env)"   # MEMBERn_REST, MEMBERn_PG, RAFT_PASS, ... of the source
e2e_result setup "source pg-test up (s since start)" "$(e2e_since "$T_START")"
T_DR=$(e2e_now)
dr up >&2 || on_fail "standby cluster up (standby_cluster: host ${MEMBER0_PG%:*} port ${MEMBER0_PG##*:})"
e2e_result setup "standby cluster pg-dr up: standby leader + 2 streaming (s)" "$(e2e_since "$T_DR")"
DR0_REST=$(dr env | sed -n "s/^MEMBER0_REST='\(.*\)'$/\1/p")
DR_REST_URLS=$(dr env | sed -n "s/^REST_URLS='\(.*\)'$/\1/p")

# ---- the exporter: one --config.file with both clusters, pg-dr naming its source (the
# password file is the one e2e_exporter writes)
cat >"$RUN_DIR/exporter.yml" <<EOF
clusters:
  - scope: pg-test
    patroni_urls: [${REST_URLS//,/, }]
    raft_password_file: $RUN_DIR/raft-secret
  - scope: pg-dr
    patroni_urls: [${DR_REST_URLS%%,*}]
    raft_password_file: $RUN_DIR/raft-secret
    standby_of: pg-test
EOF
e2e_exporter "$POLL" --config.file "$RUN_DIR/exporter.yml"
e2e_prometheus "$RUN_DIR" || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
E2E_PIDS+=("$E2E_PROM_PID")
check "Prometheus loaded the shipped rule $NS" e2e_prom_rule_loaded "$NS"

# ================================================================== 1. at rest
e2e_log "=== 1: both clusters healthy, at rest"
expect "1: patroni_cluster_standby 1 for pg-dr" patroni_cluster_standby "$DR" == 1 30
expect "1: patroni_cluster_standby 0 for pg-test" patroni_cluster_standby "$SRC" == 0 10
expect "1: dr-0 streams from its source" patroni_standby_leader_streaming "$DL" == 1 30
if [[ $(dr_own | jq -r '.role + "/" + (.replication_state // "none")') == standby_leader/streaming ]]; then
  pass "1: dr-0's own GET /patroni: standby_leader, replication_state streaming"
else on_fail "1: dr-0's own GET /patroni: $(dr_own | jq -c '{role, replication_state}')"; fi
expect "1: patroni_standby_source_info names pg-test" patroni_standby_source_info "$LAG" == 1 10
expect "1: patroni_standby_archive_recovery 0" patroni_standby_leader_archive_recovery "$DL" == 0 10
expect "1: lag within 64 KiB at rest" patroni_standby_lag_bytes "$LAG" '<=' 65536 30
x=$(lag) || x=""
[[ -n $x ]] || on_fail "1: no lag sample"
t=$(truth 0) || on_fail "1: ground truth (psql)"
e2e_result 1 "at rest: exporter lag / ground truth (bytes)" "$x / $t"
if (($(abs "$((x - t))") <= 65536)); then pass "1: lag $x B = ground truth $t B within 64 KiB"
else on_fail "1: lag $x B, ground truth $t B"; fi
capture standby
rc=$(e2e_status rest -- --config.file exporter.yml)
ensure "1: status exit 0 (OK)" "1: status exit $rc on two healthy clusters" test "$rc" = 0
ensure "1: status shows the pair (pg-dr, standby cluster of pg-test, dr-0 streaming)" "1: status does not show the pair" \
  grep -q 'Standby cluster of pg-test: standby leader dr-0 streaming' "$RUN_DIR/status-rest.txt"

# ================================================================== 2. write load, lag rises and comes back
e2e_log "=== 2: write load on the source primary for ${LOAD_S}s (pg-dr replays ${APPLY_DELAY}s late)"
# autovacuum off on it: its ANALYZE after the load would be one more commit that pg-dr replays
# only APPLY_DELAY later
SQL="CREATE TABLE standby_load (id bigserial PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)" sql cluster psql 0 >/dev/null \
  || on_fail "2: CREATE TABLE on postgresql-0"
SAMPLE_SOURCE="$RUN_DIR/source-flushed.txt" SAMPLE_DR="$RUN_DIR/dr-replayed.txt"
# shellcheck disable=SC2317  # run by e2e_sample
src_flushed() { SQL="SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::bigint" sql cluster psql 0; }
# shellcheck disable=SC2317  # run by e2e_sample
dr_replayed_bytes() { SQL="SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint" sql dr psql 0; }
e2e_sample "$SAMPLE_SOURCE" src_flushed; SAMPLER_SOURCE=$E2E_SAMPLE_PID
e2e_sample "$SAMPLE_DR" dr_replayed_bytes; SAMPLER_DR=$E2E_SAMPLE_PID
deadline=$(($(date +%s) + 30))
until [[ -s $SAMPLE_SOURCE && -s $SAMPLE_DR ]]; do
  (($(date +%s) < deadline)) || on_fail "2: no reading of the source's or dr-0's position within 30 s"
  sleep 0.2
done
LOOPS=$((LOAD_S * 9))        # ~0.11 s a loop: within cluster.sh psql's 30 s timeout
SQL="DO \$\$ BEGIN FOR i IN 1..$LOOPS LOOP
       INSERT INTO standby_load (pad) SELECT repeat(md5(random()::text), 32) FROM generate_series(1, 40);
       COMMIT; PERFORM pg_sleep(0.1); END LOOP; END \$\$" sql cluster psql 0 >"$RUN_DIR/load.txt" 2>&1 &
LOAD_PID=$!
E2E_PIDS+=("$LOAD_PID")
T_LOAD=$(e2e_now)
LSN0=$(src_lsn 0)
printf 'seconds\texporter_lag_bytes\tground_truth_bytes (under the load: [low, high] around the poll)\n' >"$SAMPLES"
# Each poll's lag against PostgreSQL's own positions bracketing the two readings it pairs: the
# source primary's flush position (Patroni's xlog.location) during the source's poll named by
# patroni_standby_source_position_timestamp_seconds, and dr-0's replayed position during
# pg-dr's poll. Both only grow, so the lag lies between (source before - dr-0 after) and
# (source after - dr-0 before), 0 at least, however long polls, scrapes and psql take.
# Polls: "SEEN DR_END DR_DURATION LAG SOURCE_END SOURCE_DURATION SOURCE_POSITION_END" lines.
POLLS="$RUN_DIR/polls.txt"
: >"$POLLS"
while kill -0 "$LOAD_PID" 2>/dev/null; do
  if fetch_metrics && p=$(FETCH=0 metric_value patroni_exporter_last_poll_timestamp_seconds "$DR") \
    && d=$(FETCH=0 metric_value patroni_exporter_poll_duration_seconds "$DR") \
    && x=$(FETCH=0 lag) && ps=$(FETCH=0 metric_value patroni_exporter_last_poll_timestamp_seconds "$SRC") \
    && ds=$(FETCH=0 metric_value patroni_exporter_poll_duration_seconds "$SRC") \
    && pos=$(FETCH=0 metric_value patroni_standby_source_position_timestamp_seconds "$LAG"); then
    echo "$(e2e_now) $p $d $x $ps $ds $pos" >>"$POLLS"
  fi
  sleep 0.3
done
wait "$LOAD_PID" || on_fail "2: the write load failed: $(tail -n 3 "$RUN_DIR/load.txt")"
LOAD_S_REAL=$(e2e_since "$T_LOAD")
WAL=$(lsn_diff "$(src_lsn 0)" "$LSN0" 0)
RATE=$(awk -v w="$WAL" -v s="$LOAD_S_REAL" 'BEGIN { printf "%d", w / s }')
# readings made wholly after the last poll seen, then the samplers stop
last_end=$(awk '{ print ($2 > $5 ? $2 : $5) }' "$POLLS" | sort -g | tail -n 1)
e2e_await_reading "$SAMPLE_SOURCE" "$last_end" || true   # a poll without one fails below
e2e_await_reading "$SAMPLE_DR" "$last_end" || true
e2e_stop_pid "$SAMPLER_SOURCE"; e2e_stop_pid "$SAMPLER_DR"
FIRST_READ=$(awk 'NR == 1 { print $2 }' "$SAMPLE_SOURCE" "$SAMPLE_DR" | sort -g | tail -n 1)
e2e_result 2 "load: WAL written (bytes) / seconds / bytes per second" "$WAL / $LOAD_S_REAL / $RATE"
SLACK=65536
n=0 n_out=0 n_free=0 n_unread=0 max_x=0 max_width=0 max_dev=0 worst=""
# each pg-dr poll once, as first seen; those that started before both samplers had read are
# not judged (the load started after); any other without readings around it fails
while read -r _ p d x _ _ pos; do
  # the source's poll that read the position: its duration as seen, else the deadline's bound
  # (a poll lasts at most one interval)
  dpos=$(awk -v t="$pos" '$5 == t { print $6; exit }' "$POLLS")
  [[ -n $dpos ]] || { dpos=$POLL; n_free=$((n_free + 1)); }
  if awk -v a="$(minus "$p" "$d")" -v b="$(minus "$pos" "$dpos")" -v f="$FIRST_READ" 'BEGIN { exit !(a < f || b < f) }'; then
    continue
  fi
  if ! s_range=$(e2e_bracket "$SAMPLE_SOURCE" "$(minus "$pos" "$dpos")" "$pos") \
    || ! r_range=$(e2e_bracket "$SAMPLE_DR" "$(minus "$p" "$d")" "$p"); then
    n_unread=$((n_unread + 1)); worst+=" the poll ending at $p without readings around it;"; continue
  fi
  read -r s_lo s_hi <<<"$s_range"
  read -r r_lo r_hi <<<"$r_range"
  n=$((n + 1))
  read -r dev width lo hi < <(awk -v x="$x" -v s_lo="$s_lo" -v s_hi="$s_hi" -v r_lo="$r_lo" -v r_hi="$r_hi" 'BEGIN {
    lo = s_lo - r_hi; if (lo < 0) lo = 0
    hi = s_hi - r_lo; if (hi < 0) hi = 0
    d = 0; if (x < lo) d = lo - x; if (x > hi) d = x - hi
    printf "%d %d %d %d\n", d, hi - lo, lo, hi }')
  printf '%s\t%s\t[%s, %s]\n' "$(minus "$p" "$T_LOAD")" "$x" "$lo" "$hi" >>"$SAMPLES"
  ((x > max_x)) && max_x=$x
  ((width > max_width)) && max_width=$width
  ((dev > max_dev)) && max_dev=$dev
  if ((dev > SLACK)); then n_out=$((n_out + 1)); worst+=" $x not in [$lo, $hi];"; fi
done < <(awk '!seen[$2]++' "$POLLS")
e2e_result 2 "under load: pg-dr polls judged / their source polls whose duration was not seen (bounded by the interval)" "$n / $n_free"
e2e_result 2 "under load: max exporter lag / widest bracket (bytes)" "$max_x / $max_width"
e2e_result 2 "under load: max distance of the lag outside its bracket (bytes; slack $SLACK)" "$max_dev"
ensure "2: the lag rose under the load (max $max_x B)" "2: the lag did not rise over 1 MiB (max $max_x B)" \
  test "$max_x" -gt 1048576
((n_unread == 0)) || on_fail "2: $n_unread pg-dr polls under the load without readings of PostgreSQL around them:$worst"
((n >= 3)) || on_fail "2: only $n pg-dr polls seen under the load with readings of PostgreSQL around them (polls.txt)"
if ((n_out == 0)); then pass "2: under load, the lag of each of $n polls between PostgreSQL's own positions around them (widest bracket $max_width B)"
else on_fail "2: under load, the lag outside [source before - dr-0 after, source after - dr-0 before] in $n_out of $n polls:$worst (samples.tsv)"; fi
T_STOP=$(e2e_now)
# load stopped: sampled until the exporter and PostgreSQL agree on a lag within 64 KiB in the
# same sample (the exporter's source position is one poll old, and pg-dr replays each commit
# ${APPLY_DELAY} s after it: either can reach 0 first)
deadline=$(($(date +%s) + APPLY_DELAY + 40))
T_X="" T_T="" back=""
while (($(date +%s) < deadline)); do
  if x=$(lag) && t=$(truth 0) && [[ -n $x && -n $t ]]; then
    el=$(e2e_since "$T_STOP")
    printf '%s\t%s\t%s\n' "$(e2e_since "$T_LOAD")" "$x" "$t" >>"$SAMPLES"
    [[ -z $T_X ]] && ((x <= 65536)) && T_X=$el
    [[ -z $T_T ]] && ((t <= 65536)) && T_T=$el
    ((x <= 65536 && t <= 65536)) && { back="$x / $t"; break; }
  fi
  sleep 1
done
e2e_result 2 "load stopped -> exporter lag <= 64 KiB / ground truth <= 64 KiB (s; replay delay ${APPLY_DELAY} s)" "${T_X:-never} / ${T_T:-never}"
ensure "2: the lag came back: exporter / ground truth $back B after $(e2e_since "$T_STOP")s" \
  "2: the lag did not come back within 64 KiB (exporter / ground truth in samples.tsv)" test -n "$back"
e2e_result 2 "after the load: exporter lag / ground truth (bytes)" "$back"

# ================================================================== 3. the source primary stopped
e2e_log "=== 3: the source primary postgresql-0 stopped"
states=$(e2e_prom_alerts)
ensure "3: $NS not in Prometheus before" "3: $NS before the stop" test -z "$(e2e_alert_state "$states" "$NS")"
T_CUT=$(e2e_now)
cluster stop 0 >&2 || on_fail "3: cluster.sh stop 0"
e2e_result 3 "cluster.sh stop 0 (graceful) took (s)" "$(e2e_since "$T_CUT")"
T_OWN="" T_X0="" T_PEND="" T_FIRE=""
while (($(date +%s) < ${T_CUT%.*} + 150)); do
  el=$(e2e_since "$T_CUT")
  [[ -z $T_OWN && $(dr_own | jq -r '.replication_state // "none"') != streaming ]] \
    && { T_OWN=$el; e2e_result 3 "stop -> dr-0's own replication_state not streaming (s)" "$el"; }
  [[ -z $T_X0 && $(metric_value patroni_standby_leader_streaming "$DL" 2>/dev/null) == 0 ]] \
    && { T_X0=$el; e2e_result 3 "stop -> patroni_standby_leader_streaming 0 (s)" "$el"; }
  s=$(e2e_alert_state "$(e2e_prom_alerts)" "$NS" dr-0)
  [[ -z $T_PEND && -n $s ]] && { T_PEND=$el; e2e_result 3 "stop -> $NS pending (s)" "$el"; }
  [[ -z $T_FIRE && $s == firing ]] && { T_FIRE=$el; e2e_result 3 "stop -> $NS firing (s)" "$el"; break; }
  sleep 1
done
ensure "3: patroni_standby_leader_streaming 0 after ${T_X0}s (own word after ${T_OWN:-?}s)" \
  "3: dr-0 still streaming by the exporter" test -n "$T_X0"
capture standby-not-streaming
ensure "3: $NS pending after ${T_PEND}s, firing after ${T_FIRE}s" "3: $NS not firing within 150 s" test -n "$T_FIRE"
rc=$(e2e_status stopped -- --config.file exporter.yml)
# (exit 1 or 2: pg-test has a member down, or is failing over, too)
if [[ $rc == [12] ]] && grep -q 'WARNING standby leader dr-0 does not stream from its source (pg-test)' "$RUN_DIR/status-stopped.txt"; then
  pass "3: status exit $rc, pg-dr WARNING: dr-0 does not stream from its source"
else on_fail "3: status exit $rc (want 1 or 2 and the warning)"; fi

e2e_log "=== 3: postgresql-0 started again (a replica of the new source leader: dr-0 cascades from it)"
T_BACK=$(e2e_now)
cluster start 0 >&2 || on_fail "3: cluster.sh start 0"
expect "3: dr-0 streams again" patroni_standby_leader_streaming "$DL" == 1 120
e2e_result 3 "start 0 -> patroni_standby_leader_streaming 1 (s)" "$(e2e_since "$T_BACK")"
deadline=$(($(date +%s) + 30))
until [[ -z $(e2e_alert_state "$(e2e_prom_alerts)" "$NS") ]] || (($(date +%s) > deadline)); do sleep 1; done
ensure "3: $NS resolved" "3: $NS still active" test -z "$(e2e_alert_state "$(e2e_prom_alerts)" "$NS")"

e2e_finish "standby cluster"
}
