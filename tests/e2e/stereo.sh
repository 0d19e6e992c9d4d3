#!/usr/bin/env bash
# stereo.sh - Charmed PostgreSQL 16's stereo mode against real Patroni + Raft: two database
# members and a Raft-only witness (Patroni's own `patroni_raft_controller`, no PostgreSQL, no
# REST API, like the charm's postgresql-watcher unit) on a port other than 2222, listed in every
# member's raft.partner_addrs (cluster.sh MEMBERS=2 WITNESS_PORT=2224). The exporter is the
# README quick start (one --patroni.url of member 0 + the Raft password file, --poll.interval
# 2s), a real Prometheus (scrape and evaluation every 2 s) evaluates the SHIPPED
# alerts/patroni-raft.rules.yml unchanged; all in a network namespace of their own. Every
# verdict is checked against the ground truth: each member's own GET /patroni, each Raft node's
# own status (`cluster.sh raft N|w`, syncobj_admin), PostgreSQL itself (pg_is_in_recovery,
# pg_stat_replication, a write on the primary).
#
# Usage: tests/e2e/stereo.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# Root only (network namespace). ~10 min per version (PatroniRaftQuorumNoMargin's `for:` is
# 5m); several versions run in parallel, each in its own namespace (log
# $E2E_WORK/stereo-VERSION.log; in $E2E_WORK/stereo-VERSION/: the measurements results.tsv,
# `status` outputs status-*.txt, Raft statuses raft-*.txt). EXPORTER_BIN defaults to the debug
# build.
#
# P is the first primary (member 0, the bootstrap member), R the other member, W the witness.
#   1 healthy: verdict (patroni_raft_cluster_quorum) 1, patroni_raft_voters 3, margin 1,
#     patroni_cluster_members 2, one leader, one sync standby (PostgreSQL's pg_stat_replication
#     agrees), patroni_raft_up 1 on W; W is a witness: patroni_raft_node_info{node=W,
#     kind="witness"} 1, the members kind="member", patroni_raft_witnesses 1, `status` names W
#     as a witness; then nothing pending or firing in Prometheus for HEALTHY_S (150 s; in
#     particular not PatroniRaftZombieVoter), by polling its alerts and by ALERTS over the window.
#   2 R stopped (`cluster.sh stop`): verdict 1 in every scrape, margin 0, voters with quorum 2,
#     W's and P's own Raft status has_quorum, P still primary and writable;
#     PatroniRaftQuorumNoMargin pending, then firing after its `for:` (read from the rule file);
#     PatroniRaftQuorumLost never pending or firing. R started again: margin 1, NoMargin gone.
#   3 P's Patroni killed (`cluster.sh kill P`: SIGKILL + immediate shutdown of its postmaster):
#     R promoted by its own word (GET /patroni, pg_is_in_recovery false) with P's Raft node down,
#     so the leader key was written with the witness's vote (W's own status has_quorum, its
#     commit index moving on after the kill, R connected to it); the exporter follows although its one URL is P's: patroni_cluster_primaries
#     1, R reported primary, verdict 1; PatroniRaftQuorumLost never firing. P started again
#     (rejoins as a replica).
#   4 W stopped (`cluster.sh witness stop`): verdict 1 in every scrape, margin 0,
#     patroni_raft_up{node=W} 0 (the only voter down), W still kind="witness" and
#     patroni_raft_witnesses 1, `status` names W unreachable (whether it says "witness" is
#     recorded: one poll cannot know a down witness); the members' own Raft status has_quorum,
#     PatroniRaftQuorumLost never pending or firing. W started again: margin 1.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
E2E_TOOLS="prometheus $PGBIN/psql" e2e_scenario stereo "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-stereo-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
export MEMBERS=2
export WITNESS_PORT="${STEREO_WITNESS_PORT:-2224}"   # the charm's watcher-raft-port need not be 2222
POLL=2                                        # exporter --poll.interval (s)
HEALTHY_S=150                                 # phase 1: nothing pending or firing this long
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
QL=PatroniRaftQuorumLost
NM=PatroniRaftQuorumNoMargin
ZV=PatroniRaftZombieVoter
RULES="$E2E_REPO/alerts/patroni-raft.rules.yml"

e2e_setup
e2e_log "=== stereo mode, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
own_json() { curl -sf -m 2 "$(e2e_rest "$1")/patroni" 2>/dev/null || echo '{}'; }
is_primary_role() { [[ $1 == primary || $1 == master ]]; }
# pg N SQL: psql -At on member N, as its superuser over its unix socket
pg() {
  local n=$1 addr="MEMBER${1}_PG"
  shift
  timeout 20 "$PGBIN/psql" -X -At -q -h "$DATA_DIR/postgresql-$n/sock" -p "${!addr##*:}" -U operator -d postgres -c "$*" 9>&-
}
# raft WHO NAME: syncobj_admin -status of member WHO (or w, the witness), kept in raft-NAME.txt;
# rc 1 when it gave no status
raft() { cluster raft "$1" >"$RUN_DIR/raft-$2.txt" 2>&1; }
raft_field() { awk -F': ' -v f="$2" '$1 == f { print $2 }' "$RUN_DIR/raft-$1.txt"; }
# the `for:` of alert NAME in the shipped rules, in seconds
rule_for_s() {
  awk -v a="$1" '$0 ~ "alert: "a"$" { on = 1; next } on && /alert:/ { exit } on && /^ *for:/ { print $2; exit }' "$RULES" \
    | awk '{ v = $1; n = v + 0; if (v ~ /h$/) n *= 3600; else if (v ~ /m$/) n *= 60; print n }'
}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
show_state() {
  e2e_show_metrics "the exporter's view" \
    '^patroni_(raft_(cluster_quorum|quorum_margin|quorum_evidence\{.* 1$|up|has_quorum|voters|node_info|witnesses)|cluster_(members|leaders|primaries|sync_standbys)|member_(api_up|reported_role\{.* 1$)|up\{)'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
  local n
  for n in 0 1; do
    echo "===== postgresql-$n own GET /patroni: $(own_json "$n" | jq -c '{role, state, replication_state, sync_standby}' 2>/dev/null)"
  done
  echo "===== witness $WITNESS_RAFT own Raft status:"; cluster raft w 2>&1 | sed 's/^/    /' || true
}
# witness_kind PHASE: the witness is exported as what it is (the lead's interface:
# patroni_raft_node_info{scope,node,kind}, patroni_raft_witnesses{scope}); recorded, not fatal,
# so that the other checks of the phase still run
witness_kind() {
  local ph=$1 v
  fetch_metrics || true
  v=$(FETCH=0 metric_value patroni_raft_node_info "$S,node=\"$W\",kind=\"witness\"" 2>/dev/null || echo absent)
  check "$ph: patroni_raft_node_info{node=$W,kind=witness} 1 (is $v)" test "$v" = 1
  v=$(FETCH=0 metric_count patroni_raft_node_info "$S,kind=\"member\",..." 1)
  check "$ph: patroni_raft_node_info kind=member 1 for both members (count $v)" test "$v" = 2
  v="$(FETCH=0 metric_count patroni_raft_node_info "$S,..." 1)/$(FETCH=0 metric_count patroni_raft_node_info "$S,kind=\"unknown\",..." 1)"
  check "$ph: one patroni_raft_node_info per voter, none of kind unknown (voters/unknown $v)" test "$v" = 3/0
  v=$(FETCH=0 metric_value patroni_raft_witnesses "$S" 2>/dev/null || echo absent)
  check "$ph: patroni_raft_witnesses 1 (is $v)" test "$v" = 1
}
# leader_away PHASE RAFTFILE PRIMARY_N: record the exporter's patroni_raft_leader_away_from_primary
# next to the truth (the Raft leader in that node's own status vs the primary's Raft address)
leader_away() {
  local lead truth v
  lead=$(raft_field "$2" leader)
  if [[ $lead == "$(e2e_member "$3" RAFT)" ]]; then truth=0; else truth=1; fi
  v=$(metric_value patroni_raft_leader_away_from_primary "$S" 2>/dev/null || echo absent)
  e2e_result "$1" "patroni_raft_leader_away_from_primary / truth (Raft leader $lead, primary postgresql-$3)" "$v / $truth"
}
# status_names_witness NAME: `status` output has a line naming W's address as a witness
# shellcheck disable=SC2317  # check runs it
status_names_witness() { grep -F "$W" "$RUN_DIR/status-$1.txt" | grep -qi witness; }

# ---- the cluster: two members and the witness
cluster up --sync >&2 || on_fail "cluster up --sync (MEMBERS=2, witness on port $WITNESS_PORT)"
e2e_result setup "cluster up --sync, 2 members + witness (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_*, RAFT_PASS, WITNESS_RAFT ...
W=$WITNESS_RAFT
[[ -n $W && $MEMBERS == 2 ]] || on_fail "cluster env: MEMBERS=$MEMBERS WITNESS_RAFT=$W"
[[ ${W##*:} != 2222 ]] || on_fail "the witness must not be on 2222 (is $W)"
{ grep -qF "'$W'" "$MEMBER0_CONFIG" && grep -qF "'$W'" "$MEMBER1_CONFIG"; } \
  || on_fail "the witness $W is not in every member's raft.partner_addrs"
pass "the witness $W is in both members' raft.partner_addrs"

# ---- the exporter, as the README quick start; Prometheus with the shipped rules, unchanged
e2e_exporter "$POLL"
e2e_prometheus_rules "$QL" "$NM" "$ZV"
T_PROM=$E2E_PROM_T0
NM_FOR=$(rule_for_s "$NM")
{ [[ $NM_FOR =~ ^[0-9]+$ ]] && ((NM_FOR > 0)); } || on_fail "cannot read the for: of $NM in $RULES"
e2e_log "$NM has for: ${NM_FOR}s in $RULES"

# ================================================================== 1. healthy
e2e_log "=== 1: healthy stereo cluster"
expect "1: exporter polls the cluster" patroni_up "$S" == 1 30
expect "1: verdict 1 (quorum confirmed)" patroni_raft_cluster_quorum "$S" == 1 30
expect "1: patroni_raft_voters 3 (2 members + the witness)" patroni_raft_voters "$S" == 3 30
expect "1: patroni_cluster_members 2" patroni_cluster_members "$S" == 2 30
expect "1: one leader" patroni_cluster_leaders "$S" == 1 30
expect "1: one sync standby" patroni_cluster_sync_standbys "$S" == 1 30
expect "1: quorum margin 1 (3 voters, 2 needed)" patroni_raft_quorum_margin "$S" == 1 30
expect "1: the witness answers Raft status (patroni_raft_up{node=$W} 1)" patroni_raft_up "$S,node=\"$W\"" == 1 30
leader=$(e2e_cluster_leader) || on_fail "1: GET /cluster names a leader"
P=${leader##*-}
R=$((1 - P))
e2e_log "1: primary postgresql-$P, replica postgresql-$R, witness $W"
# ground truth
role=$(e2e_own_role "$P")
ensure "1: postgresql-$P says primary itself ($role)" "1: postgresql-$P's own role is $role" is_primary_role "$role"
role=$(e2e_own_role "$R")
ensure "1: postgresql-$R says replica itself" "1: postgresql-$R's own role is $role" test "$role" = replica
v=$(pg "$P" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')" || echo '?')
ensure "1: PostgreSQL on postgresql-$P streams synchronously to one replica" "1: pg_stat_replication sync streaming: $v" test "$v" = 1
raft w healthy-witness || on_fail "1: the witness's own Raft status"
ensure "1: the witness's own Raft status: has_quorum, 2 partners" \
  "1: the witness's own status: has_quorum $(raft_field healthy-witness has_quorum), partners $(raft_field healthy-witness partner_nodes_count)" \
  test "$(raft_field healthy-witness has_quorum)/$(raft_field healthy-witness partner_nodes_count)" = True/2
for n in 0 1; do
  raft "$n" "healthy-$n" || on_fail "1: postgresql-$n's own Raft status"
  v=$(raft_field "healthy-$n" partner_nodes_count)
  ensure "1: postgresql-$n's own Raft status: 2 partners (the other member and the witness)" \
    "1: postgresql-$n's own Raft status: partner_nodes_count $v" test "$v" = 2
done
e2e_result 1 "Raft leader (its own status)" "$(raft_field healthy-witness leader)"
leader_away 1 healthy-witness "$P"
witness_kind 1
rc=$(e2e_status healthy)
check "1: status exit 0 (OK) on the healthy stereo cluster (exit $rc)" test "$rc" = 0
check "1: status names $W as a witness" status_names_witness healthy
# nothing pending or firing for HEALTHY_S since Prometheus started
e2e_log "1: watching Prometheus and the verdict for ${HEALTHY_S}s"
seen_poll="" verdict_bad=""
declare -A FIRST_SEEN=()
while ! ge "$(e2e_since "$T_PROM")" "$HEALTHY_S"; do
  for a in $(e2e_alerts_brief); do
    [[ -n ${FIRST_SEEN[$a]:-} ]] && continue
    FIRST_SEEN[$a]=$(e2e_since "$T_PROM"); seen_poll+=" $a@${FIRST_SEEN[$a]}s"
  done
  if fetch_metrics; then
    v=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null || echo absent)
    [[ $v == 1 ]] || verdict_bad+=" $v@$(e2e_since "$T_PROM")s"
  else
    verdict_bad+=" no-scrape@$(e2e_since "$T_PROM")s"
  fi
  sleep 2
done
seen=$(e2e_alerts_seen "$T_PROM")
life=$(e2e_since "$T_PROM")
e2e_result 1 "seconds of Prometheus without any alert (pending or firing)" "$([[ -z $seen$seen_poll ]] && echo "$life" || echo "alerts: $seen")"
check "1: nothing pending or firing in Prometheus for ${life}s (ALERTS over the window: '${seen}'; polled, first seen:${seen_poll:- none})" \
  test -z "$seen$seen_poll"
zv=$(e2e_alerts_seen "$T_PROM" "$ZV")
check "1: $ZV never pending or firing (seen: '$zv')" test -z "$zv"
check "1: verdict 1 in every scrape for ${life}s (other:${verdict_bad:- none})" test -z "$verdict_bad"

# ================================================================== 2. the replica stopped
e2e_log "=== 2: postgresql-$R (the replica) stopped; watching until $NM fires (for: ${NM_FOR}s)"
T2S=$(e2e_now)
cluster stop "$R" >&2 || on_fail "2: cluster stop $R"
e2e_result 2 "cluster stop postgresql-$R: the graceful stop took (s)" "$(e2e_since "$T2S")"
T2=$(e2e_now)   # times below: since the stop returned (its Raft node is gone)
T_M0="" T_NM_P="" T_NM_F="" NM_ACTIVE="" T_NM_F_ABS="" verdict_bad="" primary_lost="" ql="" samples=0 checked=0 rr="" wr=""
DEADLINE=$((NM_FOR + 90))
while :; do
  el=$(e2e_since "$T2")
  if fetch_metrics; then
    samples=$((samples + 1))
    v=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null || echo absent)
    [[ $v == 1 ]] || verdict_bad+=" $v@${el}s"
    m=$(FETCH=0 metric_value patroni_raft_quorum_margin "$S" 2>/dev/null || echo absent)
    if [[ -z $T_M0 && $m == 0 ]]; then T_M0=$el; e2e_result 2 "replica stop -> patroni_raft_quorum_margin 0 (s)" "$el"; fi
  else
    verdict_bad+=" no-scrape@${el}s"
  fi
  role=$(e2e_own_role "$P")
  is_primary_role "$role" || primary_lost+=" $role@${el}s"
  js=$(e2e_prom_alerts)
  s=$(e2e_alert_state "$js" "$QL")
  [[ -z $s ]] || ql+=" $s@${el}s"
  s=$(e2e_alert_state "$js" "$NM")
  if [[ -z $T_NM_P && -n $s ]]; then T_NM_P=$el; e2e_result 2 "replica stop -> $NM pending (s)" "$el"; fi
  if [[ -z $T_NM_F && $s == firing ]]; then
    T_NM_F=$el; T_NM_F_ABS=$(e2e_now); e2e_result 2 "replica stop -> $NM firing (s)" "$el"
    # when Prometheus itself saw the condition start (the alert's activeAt), exact to an evaluation
    NM_ACTIVE=$(jq -r --arg n "$NM" '[.data.alerts[] | select(.labels.alertname == $n)][0].activeAt' <<<"$js")
  fi
  # the ground truth once the margin is gone: the two voters left hold the quorum, the primary writes
  if [[ -n $T_M0 ]] && ((checked == 0)); then
    checked=1
    raft w stopped-witness || true
    raft "$P" stopped-primary || true
    if raft "$R" stopped-replica; then rr=answers; else rr=down; fi
    wr=$(pg "$P" "CREATE TABLE IF NOT EXISTS stereo_probe (t timestamptz); INSERT INTO stereo_probe VALUES (now()); SELECT pg_is_in_recovery()" 2>&1 || true)
  fi
  [[ -n $T_NM_F ]] && break
  ge "$el" "$DEADLINE" && break
  sleep 1
done
watched=$(e2e_since "$T2")
e2e_result 2 "watched with the replica stopped (s)" "$watched"
ensure "2: margin 0 ${T_M0}s after the replica stopped" "2: margin never 0 within ${watched}s" test -n "$T_M0"
fetch_metrics || true
v=$(FETCH=0 metric_value patroni_raft_voters "$S" || echo '?')
check "2: patroni_raft_voters still 3 (is $v)" test "$v" = 3
v=$(FETCH=0 metric_value patroni_raft_voters_with_quorum "$S" || echo '?')
check "2: patroni_raft_voters_with_quorum 2 (is $v)" test "$v" = 2
v=$(FETCH=0 metric_value patroni_raft_up "$S,node=\"$(e2e_member "$R" RAFT)\"" || echo '?')
check "2: patroni_raft_up{node=postgresql-$R's Raft} 0 (is $v)" test "$v" = 0
check "2: postgresql-$R's Raft node gives no status (ground truth)" test "$rr" = down
check "2: the witness's own Raft status says has_quorum" test "$(raft_field stopped-witness has_quorum)" = True
check "2: postgresql-$P's own Raft status says has_quorum" test "$(raft_field stopped-primary has_quorum)" = True
check "2: PostgreSQL on postgresql-$P takes a write and is not in recovery ($(tr '\n' ' ' <<<"$wr"))" test "$wr" = f
ensure "2: verdict 1 in all $samples scrapes over ${watched}s" "2: verdict not 1:$verdict_bad" test -z "$verdict_bad"
ensure "2: postgresql-$P said primary in every sample" "2: postgresql-$P's own role:$primary_lost" test -z "$primary_lost"
ensure "2: $NM pending ${T_NM_P}s after the replica stopped" "2: $NM not pending within ${watched}s" test -n "$T_NM_P"
ensure "2: $NM firing ${T_NM_F}s after the replica stopped (for: ${NM_FOR}s)" "2: $NM not firing within ${watched}s" test -n "$T_NM_F"
# Prometheus's own start of the condition: after the stop (not a margin already 0 before it)
active_s=$(date -d "$NM_ACTIVE" +%s.%N 2>/dev/null || echo 0)
v=$(awk -v a="$active_s" -v t="$T2" 'BEGIN { printf "%.1f", a - t }')
e2e_result 2 "replica stop -> $NM active in Prometheus (its activeAt) (s)" "$v"
v2=$(awk -v a="$active_s" -v f="${T_NM_F_ABS:-0}" 'BEGIN { printf "%.1f", f - a }')
check "2: $NM became active after the stop began ($v s after it returned) and was seen firing $v2 s later, no sooner than its for: ${NM_FOR}s" \
  awk -v a="$active_s" -v s="$T2S" -v d="$v2" -v n="$NM_FOR" 'BEGIN { exit !(a >= s && d >= n) }'
ql_seen=$(e2e_alerts_seen "$T2" "$QL")
ensure "2: $QL never pending or firing with the replica stopped (polled:${ql:- none}; ALERTS: '${ql_seen}')" \
  "2: $QL seen:$ql $ql_seen" test -z "$ql$ql_seen"
e2e_result 2 "alerts at the end of the window" "$(e2e_alerts_brief)"
# back
T2B=$(e2e_now)
cluster start "$R" >&2 || on_fail "2: cluster start $R"
cluster wait --sync >&2 || on_fail "2: healthy (sync) again after starting postgresql-$R"
e2e_result 2 "replica start -> healthy (sync) (s)" "$(e2e_since "$T2B")"
expect "2: margin 1 again" patroni_raft_quorum_margin "$S" == 1 30
e2e_result 2 "replica start -> margin 1 (s)" "$(e2e_since "$T2B")"
deadline=$(($(date +%s) + 30))
until [[ -z $(e2e_alert_state "$(e2e_prom_alerts)" "$NM") ]]; do
  (($(date +%s) < deadline)) || on_fail "2: $NM still in Prometheus 30 s after margin 1: $(e2e_alerts_brief)"
  sleep 1
done
pass "2: $NM resolved"
e2e_result 2 "replica start -> $NM gone from Prometheus (s)" "$(e2e_since "$T2B")"

# ================================================================== 3. the primary's Patroni killed
e2e_log "=== 3: postgresql-$P's Patroni killed (the primary); postgresql-$R must be promoted through the witness's vote"
raft w before-kill-witness || true
term0=$(raft_field before-kill-witness raft_term)
leader0=$(raft_field before-kill-witness leader)
T3=$(e2e_now)
cluster kill "$P" >&2 || on_fail "3: cluster kill $P"
# from here on P's Raft node is gone (SIGKILL): an entry commits only with R and W both
raft w after-kill-witness || true
commit0=$(raft_field after-kill-witness commit_idx)
T_OWN="" T_EXP="" verdicts="" last_v="" ql="" old_raft=""
while :; do
  el=$(e2e_since "$T3")
  if [[ -z $T_OWN ]] && is_primary_role "$(e2e_own_role "$R")"; then
    T_OWN=$el; e2e_result 3 "primary kill -> postgresql-$R primary by its own GET /patroni (s)" "$el"
    # the ground truth right at the promotion: P's Raft node is gone, so R's leader key
    # needed the witness's vote
    raft w promoted-witness || true
    raft "$R" promoted-replica || true
    if raft "$P" promoted-old; then old_raft=answers; else old_raft=down; fi
  fi
  if fetch_metrics; then
    v=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null || echo absent)
    [[ $v == "$last_v" ]] || { verdicts+=" $v@${el}s"; last_v=$v; }
    if [[ -z $T_EXP ]] \
      && [[ $(FETCH=0 metric_value patroni_cluster_primaries "$S" 2>/dev/null) == 1 ]] \
      && [[ $(FETCH=0 metric_value patroni_member_reported_role "$S,member=\"postgresql-$R\",role=\"primary\"" 2>/dev/null) == 1 ]] \
      && [[ $v == 1 ]]; then
      T_EXP=$el; e2e_result 3 "primary kill -> exporter: primaries 1 (postgresql-$R), verdict 1 (s)" "$el"
    fi
  fi
  s=$(e2e_alert_state "$(e2e_prom_alerts)" "$QL")
  [[ -z $s ]] || ql+=" $s@${el}s"
  [[ -n $T_OWN && -n $T_EXP ]] && break
  ge "$el" 150 && break
  sleep 1
done
e2e_result 3 "verdict changes after the kill" "${verdicts# }"
ensure "3: postgresql-$R promoted, by its own GET /patroni, ${T_OWN}s after the kill" \
  "3: postgresql-$R not primary within 150 s of the kill" test -n "$T_OWN"
v=$(pg "$R" "SELECT pg_is_in_recovery()" || echo '?')
ensure "3: PostgreSQL on postgresql-$R is out of recovery" "3: pg_is_in_recovery on postgresql-$R: $v" test "$v" = f
check "3: postgresql-$P's Raft node was down at the promotion" test "${old_raft:-?}" = down
check "3: the witness's own Raft status said has_quorum at the promotion" test "$(raft_field promoted-witness has_quorum)" = True
v=$(raft_field promoted-replica "partner_node_status_server_$W")
check "3: postgresql-$R's own Raft status: connected to the witness (partner status $v) and has_quorum" \
  test "$v/$(raft_field promoted-replica has_quorum)" = 2/True
e2e_result 3 "Raft leader before the kill -> at the promotion (witness's own status), term" \
  "$leader0 -> $(raft_field promoted-witness leader), $term0 -> $(raft_field promoted-witness raft_term)"
# the witness's commit index moving on after the kill (the leader key R took among those
# entries): each of them committed with the witness's acknowledgement, its vote in the DCS writes
commit1=$(raft_field promoted-witness commit_idx)
e2e_result 3 "the witness's commit_idx right after the kill -> at the promotion" "$commit0 -> $commit1"
check "3: the witness's commit index advanced after P's Raft node went ($commit0 -> $commit1)" \
  awk -v a="$commit0" -v b="$commit1" 'BEGIN { exit !(a ~ /^[0-9]+$/ && b ~ /^[0-9]+$/ && b > a) }'
ensure "3: the exporter follows: patroni_cluster_primaries 1, postgresql-$R reported primary, verdict 1, ${T_EXP}s after the kill" \
  "3: the exporter did not show postgresql-$R as the one primary with verdict 1 within 150 s" test -n "$T_EXP"
expect "3: one leader in the DCS view" patroni_cluster_leaders "$S" == 1 30
leader_away 3 promoted-witness "$R"
check "3: $QL never firing during the failover (polled:${ql:- none})" test -z "$(grep -o 'firing' <<<"$ql" || true)"
e2e_result 3 "$QL states during the failover (pending is allowed: a Raft re-election)" "${ql:- none}"
e2e_result 3 "alerts after the failover" "$(e2e_alerts_brief)"
T3B=$(e2e_now)
cluster start "$P" >&2 || on_fail "3: cluster start $P"
cluster wait --sync >&2 || on_fail "3: healthy (sync) again after starting postgresql-$P"
e2e_result 3 "old primary start -> healthy (sync), it rejoined as a replica (s)" "$(e2e_since "$T3B")"
role=$(e2e_own_role "$P")
check "3: postgresql-$P rejoined as a replica ($role)" test "$role" = replica
expect "3: margin 1 again" patroni_raft_quorum_margin "$S" == 1 30

# ================================================================== 4. the witness stopped
e2e_log "=== 4: the witness $W stopped"
T4=$(e2e_now)
cluster witness stop >&2 || on_fail "4: cluster witness stop"
expect "4: margin 0 with the witness down" patroni_raft_quorum_margin "$S" == 0 $((10 * POLL))
e2e_result 4 "witness stop -> patroni_raft_quorum_margin 0 (s)" "$(e2e_since "$T4")"
expect "4: patroni_raft_up{node=$W} 0" patroni_raft_up "$S,node=\"$W\"" == 0 $((10 * POLL))
e2e_result 4 "witness stop -> patroni_raft_up{witness} 0 (s)" "$(e2e_since "$T4")"
fetch_metrics || on_fail "4: scrape"
v=$(FETCH=0 metric_count patroni_raft_up "$S,..." 0)
check "4: the witness is the only voter down (patroni_raft_up 0 on $v nodes)" test "$v" = 1
v=$(FETCH=0 metric_count patroni_raft_up "$S,..." 1)
check "4: both members' Raft nodes answer (patroni_raft_up 1 on $v nodes)" test "$v" = 2
v=$(FETCH=0 metric_value patroni_raft_voters "$S" || echo '?')
check "4: patroni_raft_voters still 3 (is $v)" test "$v" = 3
witness_kind 4
rc=$(e2e_status witness-down)
e2e_result 4 "status exit code with the witness down" "$rc"
check "4: status names $W as the unreachable Raft node" grep -q "Raft node $W unreachable" "$RUN_DIR/status-witness-down.txt"
# one poll cannot tell a witness that is down from a removed member's voter (both: no member
# on the host, no REST, no Raft answer); the exporter can, from what it saw before: recorded
e2e_result 4 "status (one poll) calls the stopped witness a witness" "$(status_names_witness witness-down && echo yes || echo no)"
# ground truth
if raft w stopped-w; then wr=answers; else wr=down; fi
check "4: the witness gives no Raft status (ground truth)" test "$wr" = down
for n in 0 1; do
  raft "$n" "witness-down-$n" || true
  check "4: postgresql-$n's own Raft status says has_quorum" test "$(raft_field "witness-down-$n" has_quorum)" = True
done
# the verdict over a window of several polls, and no quorum-loss page
verdict_bad=""
while ! ge "$(e2e_since "$T4")" 30; do
  if fetch_metrics; then
    v=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null || echo absent)
    [[ $v == 1 ]] || verdict_bad+=" $v@$(e2e_since "$T4")s"
  fi
  sleep 1
done
ensure "4: verdict 1 in every scrape for $(e2e_since "$T4")s with the witness down" "4: verdict not 1:$verdict_bad" test -z "$verdict_bad"
role=$(e2e_own_role "$R")
check "4: postgresql-$R still primary by its own word ($role)" is_primary_role "$role"
ql_seen=$(e2e_alerts_seen "$T4" "$QL")
check "4: $QL never pending or firing with the witness down (ALERTS: '$ql_seen')" test -z "$ql_seen"
e2e_result 4 "alerts with the witness down" "$(e2e_alerts_brief)"
T4B=$(e2e_now)
cluster witness start >&2 || on_fail "4: cluster witness start"
expect "4: margin 1 again with the witness back" patroni_raft_quorum_margin "$S" == 1 30
e2e_result 4 "witness start -> margin 1 (s)" "$(e2e_since "$T4B")"
expect "4: verdict 1" patroni_raft_cluster_quorum "$S" == 1 10

e2e_finish "stereo mode"
}
