#!/usr/bin/env bash
# restart.sh - what one Raft node's term and commit index do across a restart and a crash, as
# the exporter reports them, and that the shipped rules raise no alert from it (issue #29).
#
# Usage: tests/e2e/restart.sh [PATRONI_VERSION...]   (3.3.8, 4.1.5, 3.3.8-0.3.12; default
# 3.3.8). Root, a network namespace of its own per version (several: in parallel); ~2.5 min.
#
# pysyncobj 0.3.16 persists currentTerm (.journal.meta), so a restarted node keeps its term;
# before (3.3.8-0.3.12) it reports term 0 until it hears a leader. 0.3.16 also reloads the
# commit index from the meta file (stored once a second) and clamps it to the journal end, so
# after a crash it can come back lower than the node last reported. The exporter (--poll.interval
# 1s, every member's URL) is sampled every 0.5 s into samples.tsv; a real Prometheus evaluates
# the shipped rules (scrape and evaluation every 1s). Five phases, each waiting for the node to
# be back with quorum and caught up with the leader's commit index:
#   follower-stop / follower-kill   `cluster.sh stop|kill N` of a Raft follower, then `start N`
#   follower-crash                  a crash that loses the journal's unsynced tail (an OS crash
#                                   or power loss; a process kill keeps the page cache): the
#                                   follower's journal copied, 15 s of Patroni's writes, `kill N`,
#                                   the old journal put back under the current .meta, `start N`
#                                   (raft_journal.py says what was restored)
#   leader-stop / leader-kill       the same on the Raft leader's member (a new Raft election)
# Measured per phase (results.tsv): the node's term and commit index before, the lowest of each
# while it was back but not caught up, after. Asserted: on pysyncobj >= 0.3.16 no sample after
# the restart has a term below the one before it; the restarted node rejoins at the leader's
# term and commit index; PatroniRaftApplyBacklog was never pending or firing;
# PatroniRaftFrequentLeaderChanges fired if and only if the exporter counted more than 3 Raft
# leader changes; no expression over the indexes went negative in Prometheus
# (`patroni_raft_leader_commit_index - patroni_raft_last_applied_index` of the dashboard).
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

E2E_DEFAULT_VERSION=3.3.8 E2E_TOOLS="prometheus" e2e_scenario restart "$@"

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-restart-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
SAMPLES="$RUN_DIR/samples.tsv"

e2e_setup
e2e_log "=== restarts, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

cluster up --sync >"$RUN_DIR/cluster-up.log" 2>&1 || { cat "$RUN_DIR/cluster-up.log" >&2; on_fail "cluster up"; }
eval "$(cluster env)"
PYSYNCOBJ=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pysyncobj"))')
# 0.3.16 and later persist the term: the restart must keep it
KEEPS_TERM=$(awk -v v="$PYSYNCOBJ" 'BEGIN { split(v, a, "."); print (a[1] > 0 || a[2] > 3 || (a[2] == 3 && a[3] >= 16)) ? 1 : 0 }')
e2e_result setup pysyncobj "$PYSYNCOBJ"
e2e_exporter 1 --patroni.url "$MEMBER1_REST" --patroni.url "$MEMBER2_REST"
e2e_prometheus "$RUN_DIR" 127.0.0.1:9393 1s || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
E2E_PIDS+=("$E2E_PROM_PID")
expect_healthy start

# ---- the sampler: per Raft node, every 0.5 s, the exporter's view
# t node up term commit applied leader_commit has_quorum
sampler() {
  local body
  while :; do
    if body=$(curl -sf -m 2 "$EXPORTER_URL" 2>/dev/null); then
      T=$(date +%s.%N) awk '
        function node(l) { match(l, /node="[^"]+"/); return substr(l, RSTART + 6, RLENGTH - 7) }
        /^patroni_raft_(up|term|commit_index|last_applied_index|leader_commit_index|has_quorum)\{/ {
          n = node($0); split($0, f, "{"); v[n, f[1]] = $NF; seen[n] = 1 }
        END { for (n in seen) printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ENVIRON["T"], n,
          v[n, "patroni_raft_up"], v[n, "patroni_raft_term"], v[n, "patroni_raft_commit_index"],
          v[n, "patroni_raft_last_applied_index"], v[n, "patroni_raft_leader_commit_index"],
          v[n, "patroni_raft_has_quorum"] }' <<<"$body"
    fi
    sleep 0.5
  done
}
printf 't\tnode\tup\tterm\tcommit\tapplied\tleader_commit\thas_quorum\n' >"$SAMPLES"
sampler >>"$SAMPLES" 2>/dev/null &
E2E_PIDS+=("$!")

raft_leader_node() { FETCH=1 metric_label patroni_raft_state "$S"',state="leader",...' node 1 2>/dev/null | sort -u | head -n1; }
member_of_node() { local n; for n in 0 1 2; do [[ $(e2e_member "$n" RAFT) == "$1" ]] && { echo "$n"; return; }; done; return 1; }
node_value() { metric_value "$1" "$S,node=\"$2\"" 2>/dev/null || echo ""; }
# the lowest value of column COL in the samples of NODE answering (up 1) within [FROM, TO];
# when the node caught up before the sampler saw it back, its first sample after FROM
samples_min() { # samples_min NODE COL FROM TO
  awk -F'\t' -v n="$1" -v c="$2" -v a="$3" -v b="$4" '
    NR > 1 && $2 == n && $3 == 1 && $1 >= a && $c != "" {
      if ($1 <= b) { if (m == "" || $c + 0 < m) m = $c + 0 } else if (first == "") first = $c + 0 }
    END { print (m != "" ? m : first) }' "$SAMPLES"
}
# what a crash that loses the journal's unsynced tail leaves (an OS crash or power loss; a
# process kill keeps the page cache): the journal as it was SECONDS ago, the .meta (term,
# vote, commit index, stored every second) as it is now
raft_files() { echo "$DATA_DIR/$(name_of "$1")/raft/$(e2e_member "$1" RAFT)"; }   # Patroni: DATA_DIR/raft/HOST:PORT.journal
name_of() { echo "postgresql-$1"; }

phase() { # phase NAME ROLE(follower|leader) ACTION(stop|kill|kill-lost-tail)
  local name=$1 role=$2 action=$3 leader node n term0 commit0 changes0 t_down t_back t_caught term1 commit1 lt lc j
  leader=$(raft_leader_node) || true
  [[ -n $leader ]] || on_fail "$name: no Raft leader in the exporter's view"
  if [[ $role == leader ]]; then
    node=$leader
  else
    for n in 0 1 2; do [[ $(e2e_member "$n" RAFT) != "$leader" ]] && { node=$(e2e_member "$n" RAFT); break; }; done
  fi
  n=$(member_of_node "$node")
  fetch_metrics
  FETCH=0
  term0=$(node_value patroni_raft_term "$node"); commit0=$(node_value patroni_raft_commit_index "$node")
  changes0=$(metric_value patroni_raft_leader_changes_total "$S")
  FETCH=1
  if [[ $action == kill-lost-tail ]]; then
    j=$(raft_files "$n")
    cp -p "$j.journal" "$RUN_DIR/journal-$name"
    e2e_log "=== $name: journal of member $n kept; 15 s of Patroni's writes (a key per member every loop_wait)"
    sleep 15
    fetch_metrics
    FETCH=0
    term0=$(node_value patroni_raft_term "$node"); commit0=$(node_value patroni_raft_commit_index "$node")
    FETCH=1
  fi
  e2e_log "=== $name: $action member $n (Raft $role $node: term $term0, commit_idx $commit0)"
  cluster "${action%-lost-tail}" "$n" >>"$RUN_DIR/cluster.log" 2>&1
  expect "$name: the exporter sees $node down" patroni_raft_up "$S,node=\"$node\"" == 0 30
  t_down=$(e2e_now)
  if [[ $action == kill-lost-tail ]]; then
    cp -p "$RUN_DIR/journal-$name" "$j.journal"
    e2e_result "$name" "restored: the old journal, the current .meta" \
      "$("$VENV/bin/python" "$E2E_DIR/raft_journal.py" "$j.journal" 2>&1 || true)"
  fi
  sleep 3
  cluster start "$n" >>"$RUN_DIR/cluster.log" 2>&1
  expect "$name: $node answers again" patroni_raft_up "$S,node=\"$node\"" == 1 60
  t_back=$(e2e_now)
  expect "$name: $node has quorum again" patroni_raft_has_quorum "$S,node=\"$node\"" == 1 60
  # caught up: the node's commit index is the leader's (both from one scrape)
  local deadline=$((SECONDS + 60)) ok=0
  while ((SECONDS < deadline)); do
    fetch_metrics || { sleep 0.5; continue; }
    FETCH=0
    leader=$(metric_label patroni_raft_state "$S"',state="leader",...' node 1 2>/dev/null | sort -u | head -n1) || true
    if [[ -n $leader ]]; then
      lt=$(node_value patroni_raft_term "$leader"); lc=$(node_value patroni_raft_commit_index "$leader")
      term1=$(node_value patroni_raft_term "$node"); commit1=$(node_value patroni_raft_commit_index "$node")
      [[ -n $lt && $term1 == "$lt" && $commit1 == "$lc" ]] && { ok=1; FETCH=1; break; }
    fi
    FETCH=1
    sleep 0.5
  done
  t_caught=$(e2e_now)
  sleep 1   # the sampler's next round: a node caught up within half a second has a sample
  if ((ok)); then
    pass "$name: $node rejoined at the leader's term $lt and commit_idx $lc"
  else
    fail "$name: $node not at the leader's term/commit_idx within 60 s (node $term1/$commit1, leader ${lt:-?}/${lc:-?})"
  fi
  e2e_result "$name" "term before" "$term0"
  e2e_result "$name" "term lowest back (not caught up)" "$(samples_min "$node" 4 "$t_down" "$t_caught")"
  e2e_result "$name" "term after" "$term1"
  e2e_result "$name" "commit_idx before" "$commit0"
  e2e_result "$name" "commit_idx lowest back (not caught up)" "$(samples_min "$node" 5 "$t_down" "$t_caught")"
  e2e_result "$name" "last_applied lowest back (not caught up)" "$(samples_min "$node" 6 "$t_down" "$t_caught")"
  e2e_result "$name" "commit_idx after" "$commit1"
  e2e_result "$name" "back to caught up (s)" "$(awk -v a="$t_back" -v b="$t_caught" 'BEGIN { printf "%.1f", b - a }')"
  e2e_result "$name" "Raft leader changes counted" "$(( $(metric_value patroni_raft_leader_changes_total "$S") - changes0 ))"
  if ((KEEPS_TERM)); then
    local low
    low=$(samples_min "$node" 4 "$t_down" "$t_caught")
    if [[ -n $low ]] && awk -v l="$low" -v t="$term0" 'BEGIN { exit !(l >= t) }'; then
      pass "$name: pysyncobj $PYSYNCOBJ kept the term across the $action (lowest $low >= $term0)"
    else
      fail "$name: pysyncobj $PYSYNCOBJ: term ${low:-?} after the $action, below $term0"
    fi
  fi
  expect_healthy "$name"
}

T_PHASES=$(date +%s)
phase follower-stop follower stop
phase follower-kill follower kill
phase follower-crash follower kill-lost-tail
phase leader-stop leader stop
phase leader-kill leader kill
sleep 2

# ---- what Prometheus saw over the whole run, with the shipped rules
RANGE="$(( $(date +%s) - T_PHASES + 5 ))s"
prom_query() { curl -fsG -m 5 "$E2E_PROM/api/v1/query" --data-urlencode "query=$1" | jq -c '.data.result'; }
backlog=$(prom_query "count_over_time(ALERTS{alertname=\"PatroniRaftApplyBacklog\"}[$RANGE])")
if [[ $backlog == "[]" ]]; then
  pass "PatroniRaftApplyBacklog never pending or firing over the run ($RANGE)"
else
  fail "PatroniRaftApplyBacklog pending or firing: $backlog"
fi
# the leader changes are real (each restart may cost an election on 0.3.16+, where the
# restarted node comes back with its term and times out before it hears the leader): the
# alert must fire exactly when more than 3 were counted in its hour, never on 3
changes=$(metric_value patroni_raft_leader_changes_total "$S")
frequent=$(prom_query "count_over_time(ALERTS{alertname=\"PatroniRaftFrequentLeaderChanges\",alertstate=\"firing\"}[$RANGE])")
e2e_result run "Raft leader changes counted over the run" "$changes"
if ((changes > 3)) && [[ $frequent != "[]" ]]; then
  pass "PatroniRaftFrequentLeaderChanges fired on $changes Raft leader changes (more than 3)"
elif ((changes <= 3)) && [[ $frequent == "[]" ]]; then
  pass "PatroniRaftFrequentLeaderChanges silent on $changes Raft leader changes (not more than 3)"
else
  fail "PatroniRaftFrequentLeaderChanges on $changes Raft leader changes: firing samples $frequent"
fi
seen=$(prom_query "count by (alertname, alertstate) (count_over_time(ALERTS[$RANGE]))" \
  | jq -r '[.[] | "\(.metric.alertname)/\(.metric.alertstate)"] | sort | join(" ")')
e2e_result run "alerts pending or firing at some point (the node down)" "${seen:-none}"
negative=$(prom_query "min(min_over_time((patroni_raft_leader_commit_index - patroni_raft_last_applied_index)[$RANGE:1s]))" \
  | jq -r '.[0].value[1] // "none"')
e2e_result run "lowest leader_commit_index - last_applied_index" "$negative"
check "entries behind the leader never negative (lowest $negative)" awk -v v="$negative" 'BEGIN { exit !(v != "none" && v + 0 >= 0) }'
e2e_finish "restarts"
}
