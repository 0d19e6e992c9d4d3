#!/usr/bin/env bash
# failsafe.sh - issue #12, failsafe mode: "a leader that loses the Raft quorum but still reaches
# every member over REST stays primary: the quorum-loss alert must say which of the two
# happened". A real 3-member Patroni + Raft cluster with `failsafe_mode: true`, nftables
# dropping ONLY the Raft traffic (tcp 2222) between the members (REST, replication, and the
# exporter's own Raft and REST connections stay open), the exporter started as the README quick
# start (one --patroni.url of member 0 + the Raft password file, --poll.interval 2s) and a real
# Prometheus (scrape and evaluation every 2 s) evaluating the SHIPPED
# alerts/patroni-raft.rules.yml unchanged, all in a network namespace of their own.
#
# Usage: tests/e2e/failsafe.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# Root only (network namespace, nftables). ~3 min per version; several versions run in
# parallel, each in its own namespace (logs in $E2E_WORK/failsafe-VERSION.log, measurements in
# $E2E_WORK/failsafe-VERSION/results.tsv, `status` outputs in status-*.txt, the alerts'
# rendered annotations in alert-*.json). EXPORTER_BIN defaults to the debug build.
#
#   1 healthy: verdict (patroni_raft_cluster_quorum) 1, `status` exit 0; `patronictl
#     edit-config -s failsafe_mode=true`: patroni_config_failsafe_mode 1.
#   2 the Raft port cut between the members (REST open). Watched for ttl + 60 s (90 s), and
#     until both alerts fire (at most 45 s more): the exporter still reaches every Raft node
#     (patroni_raft_up 1) and every member's API (patroni_member_api_up 1); verdict 0 with
#     evidence no_quorum (never 1 again); patroni_member_failsafe_active 1 for the leader;
#     the leader's patroni_member_reported_role{role="primary"} 1 in every scrape, and its own
#     GET /patroni primary (master on 3.3.8) in every sample, no other member primary;
#     ALERTS in Prometheus: PatroniRaftQuorumLost firing with the summary "... failsafe mode
#     keeps the primary ..." and the description "Failsafe mode is active ...",
#     PatroniFailsafeModeActive firing for the leader; `status` exit 2. Detection times
#     (cut -> verdict 0, -> failsafe_active 1 per member, -> each alert pending and firing).
#   3 heal (nftables rules removed): verdict 1 and failsafe_active 0 on every member (bounded
#     150 s; the captures measured up to 76 s on 4.1.5), both alerts gone from Prometheus,
#     healthy (sync); failsafe_mode removed again: patroni_config_failsafe_mode 0.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

E2E_TOOLS="nft prometheus" e2e_scenario failsafe "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-fs-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
GID_BASE="${FS_GID_BASE:-64000}"             # member N runs with the primary group GID_BASE+N
export MEMBER_GID_BASE=$GID_BASE
FW=failsafe                                   # the nftables table (in our namespace)
POLL=2                                        # exporter --poll.interval (s)
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
QL=PatroniRaftQuorumLost
FA=PatroniFailsafeModeActive

e2e_setup
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() { member_fw_teardown "$FW"; }
e2e_log "=== failsafe mode, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
own_json() { curl -sf -m 2 "$(e2e_rest "$1")/patroni" 2>/dev/null || echo '{}'; }
show_state() {
  e2e_show_metrics "the exporter's view" \
    '^patroni_(raft_(cluster_quorum|quorum_evidence\{.* 1$|up|has_quorum|voters)|config_failsafe_mode|member_(failsafe_active|api_up|reported_role\{.* 1$)|up\{)'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
  local n
  for n in 0 1 2; do
    echo "===== postgresql-$n own GET /patroni: $(own_json "$n" | jq -c '{role, state, failsafe_mode_is_active}' 2>/dev/null)"
  done
  echo "===== nftables"; nft list table inet "$FW" 2>&1 | sed 's/^/    /' || true
}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# ---- the cluster and the firewall (empty until the cut)
member_fw_teardown "$FW"
member_fw_setup "$FW" "$GID_BASE" || on_fail "nftables table $FW"
cluster up --sync >&2 || on_fail "cluster up --sync"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, REST_USER, REST_PASS, RAFT_PASS, ...

# ---- the exporter, as the README quick start; Prometheus with the shipped rules, unchanged
e2e_exporter "$POLL"
e2e_prometheus "$RUN_DIR" || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
E2E_PIDS+=("$E2E_PROM_PID")
for a in "$QL" "$FA"; do
  check "Prometheus loaded the shipped rule $a" e2e_prom_rule_loaded "$a"
done

# ================================================================== 1. healthy, failsafe on
e2e_log "=== 1: healthy cluster; failsafe_mode on"
expect_healthy 1
expect "1: failsafe_mode off at first" patroni_config_failsafe_mode "$S" == 0 10
rc=$(e2e_status healthy)
ensure "1: status exit 0 (OK)" "1: status exit $rc on a healthy cluster" test "$rc" = 0
T_EDIT=$(e2e_now)
e2e_edit_config "$RUN_DIR/edit-config-on.txt" failsafe_mode=true \
  || on_fail "1: patronictl edit-config -s failsafe_mode=true"
expect "1: patroni_config_failsafe_mode 1 after edit-config" patroni_config_failsafe_mode "$S" == 1 30
e2e_result 1 "edit-config failsafe_mode=true -> patroni_config_failsafe_mode 1 (s)" "$(e2e_since "$T_EDIT")"
fetch_metrics || on_fail "1: scrape"
for n in 0 1 2; do
  v=$(FETCH=0 metric_value patroni_member_failsafe_active "$S,member=\"postgresql-$n\"" || echo absent)
  [[ $v == 0 ]] || on_fail "1: patroni_member_failsafe_active{postgresql-$n} is $v before the cut"
done
pass "1: patroni_member_failsafe_active 0 on every member"
leader=$(e2e_cluster_leader) || on_fail "1: GET /cluster names a leader"
leader_i=${leader##*-}
expect "1: $leader reports primary itself" patroni_member_reported_role "$S,member=\"$leader\",role=\"primary\"" == 1 10
states=$(e2e_prom_alerts)
if [[ -z $(e2e_alert_state "$states" "$QL") && -z $(e2e_alert_state "$states" "$FA") ]]; then pass "1: neither $QL nor $FA in Prometheus"
else on_fail "1: healthy, yet $(e2e_alerts_brief)"; fi
TTL_S=$(FETCH=0 metric_value patroni_config_ttl_seconds "$S") || TTL_S=30
TTL_S=${TTL_S%.*}

# ================================================================== 2. the Raft port cut
WATCH=$((TTL_S + 60))         # well beyond ttl: without failsafe the leader would have demoted
HARD=$((WATCH + 45))          # ... and longer while an alert is not firing yet (for: 1m)
e2e_log "=== 2: Raft (tcp 2222) cut between the members; leader $leader; watching ${WATCH}s (ttl $TTL_S + 60)"
T_CUT=$(e2e_now)
member_fw_cut_raft "$FW" "$GID_BASE" 2222 || on_fail "2: nftables rules"
declare -A T_FS_ACTIVE
T_V0="" T_QL_PENDING="" T_QL_FIRING="" T_FA_PENDING="" T_FA_FIRING=""
lost_primary="" other_primary="" verdict_after="" raft_down="" api_down="" reported_bad="" samples=0
ql_summary_pending=""
while :; do
  el=$(e2e_since "$T_CUT")
  # the ground truth: every member's own GET /patroni
  for n in 0 1 2; do
    js=$(own_json "$n")
    r=$(jq -r '.role // "?"' <<<"$js")
    if ((n == leader_i)); then
      [[ $r == primary || $r == master ]] || lost_primary+=" $r@${el}s"
    else
      [[ $r == primary || $r == master ]] && other_primary+=" postgresql-$n@${el}s"
    fi
  done
  # the exporter
  if fetch_metrics; then
    samples=$((samples + 1))
    q=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null || echo absent)
    ev=$(FETCH=0 metric_value patroni_raft_quorum_evidence "$S,evidence=\"no_quorum\"" 2>/dev/null || echo absent)
    if [[ -z $T_V0 && $q == 0 && $ev == 1 ]]; then
      T_V0=$el; e2e_result 2 "cut -> verdict 0, evidence no_quorum (s)" "$T_V0"
    elif [[ -n $T_V0 && $q != 0 ]]; then
      verdict_after+=" $q@${el}s"
    fi
    for n in 0 1 2; do
      if [[ -z ${T_FS_ACTIVE[$n]:-} && $(FETCH=0 metric_value patroni_member_failsafe_active "$S,member=\"postgresql-$n\"" 2>/dev/null) == 1 ]]; then
        T_FS_ACTIVE[$n]=$el; e2e_result 2 "cut -> patroni_member_failsafe_active{postgresql-$n} 1 (s)" "$el"
      fi
    done
    rr=$(FETCH=0 metric_value patroni_member_reported_role "$S,member=\"$leader\",role=\"primary\"" 2>/dev/null || echo absent)
    [[ $rr == 1 ]] || reported_bad+=" $rr@${el}s"
    ru=$(FETCH=0 metric_count patroni_raft_up "$S,..." 1)
    ((ru == 3)) || raft_down+=" ${ru}@${el}s"
    au=$(FETCH=0 metric_count patroni_member_api_up "$S,..." 1)
    ((au == 3)) || api_down+=" ${au}@${el}s"
  else
    reported_bad+=" no-scrape@${el}s"
  fi
  # Prometheus
  js=$(e2e_prom_alerts)
  s_ql=$(e2e_alert_state "$js" "$QL")
  s_fa=$(e2e_alert_state "$js" "$FA" "$leader")
  if [[ -z $T_QL_PENDING && -n $s_ql ]]; then
    T_QL_PENDING=$el; e2e_result 2 "cut -> $QL pending (s)" "$el"
    ql_summary_pending=$(jq -r --arg n "$QL" '[.data.alerts[] | select(.labels.alertname == $n)][0].annotations.summary' <<<"$js")
    jq --arg n "$QL" '[.data.alerts[] | select(.labels.alertname == $n)]' <<<"$js" >"$RUN_DIR/alert-$QL-pending.json"
  fi
  if [[ -z $T_QL_FIRING && $s_ql == firing ]]; then
    T_QL_FIRING=$el; e2e_result 2 "cut -> $QL firing (s)" "$el"
    jq --arg n "$QL" '[.data.alerts[] | select(.labels.alertname == $n)]' <<<"$js" >"$RUN_DIR/alert-$QL-firing.json"
  fi
  if [[ -z $T_FA_PENDING && -n $s_fa ]]; then T_FA_PENDING=$el; e2e_result 2 "cut -> $FA{$leader} pending (s)" "$el"; fi
  if [[ -z $T_FA_FIRING && $s_fa == firing ]]; then
    T_FA_FIRING=$el; e2e_result 2 "cut -> $FA{$leader} firing (s)" "$el"
    jq --arg n "$FA" '[.data.alerts[] | select(.labels.alertname == $n)]' <<<"$js" >"$RUN_DIR/alert-$FA-firing.json"
  fi
  # stop early when the leader lost its role: the scenario failed, the logs say why
  [[ -z $lost_primary ]] || break
  if ge "$el" "$WATCH"; then
    [[ -n $T_QL_FIRING && -n $T_FA_FIRING ]] && break
    ge "$el" "$HARD" && break
  fi
  sleep 1
done
watched=$(e2e_since "$T_CUT")
e2e_log "2: watched ${watched}s, $samples scrapes; Prometheus alerts now: $(e2e_alerts_brief)"
e2e_result 2 "watched after the cut (s)" "$watched"
fetch_metrics || true
e2e_result 2 "end of the window: patroni_cluster_leaders / failover_candidates" \
  "$(FETCH=0 metric_value patroni_cluster_leaders "$S" || echo '?') / $(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" || echo '?')"
e2e_result 2 "end of the window: $FA firing for" \
  "$(e2e_prom_alerts | jq -r --arg n "$FA" '[.data.alerts[] | select(.labels.alertname == $n and .state == "firing") | .labels.member] | sort | join(",")')"
# without a DCS quorum nobody can take the leader key: failover readiness says 0 (dcs_quorum)
cands=$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" || echo '?')
ensure "2: failover candidates 0 while the quorum is lost" "2: failover candidates $cands while the quorum is lost (want 0)" test "$cands" = 0
n_dcs=$(FETCH=0 metric_count patroni_member_failover_excluded "$S,reason=\"dcs_quorum\",...")
ensure "2: both replicas excluded with reason dcs_quorum" "2: $n_dcs replicas excluded with reason dcs_quorum (want 2)" test "$n_dcs" = 2
rc=$(e2e_status failsafe)
e2e_result 2 "status exit code during the cut" "$rc"
ensure "2: status says nobody can take over" \
  "2: status does not say nobody can take over" grep -q "If the leader dies now: nobody can take over" "$RUN_DIR/status-failsafe.txt"
ensure "2: status names the members in failsafe mode" \
  "2: status does not mention failsafe mode" grep -q "failsafe mode active on" "$RUN_DIR/status-failsafe.txt"
# what the cluster's own CLI says meanwhile (kept, not asserted: it reads its own Raft replica)
T_CTL=$(e2e_now) ctl_rc=0
timeout 20 "$E2E_CLUSTER" ctl list >"$RUN_DIR/patronictl-list-cut.txt" 2>&1 9>&- || ctl_rc=$?
e2e_result 2 "patronictl list during the cut: rc / seconds" "$ctl_rc / $(e2e_since "$T_CTL")"

ensure "2: $leader's own GET /patroni said primary in every sample for ${watched}s (ttl $TTL_S)" \
  "2: $leader's own GET /patroni stopped saying primary:$lost_primary" test -z "$lost_primary"
ensure "2: no other member's own GET /patroni said primary" "2: another member said primary:$other_primary" test -z "$other_primary"
ensure "2: patroni_member_reported_role{$leader,primary} 1 in all $samples scrapes" \
  "2: patroni_member_reported_role{$leader,primary} not 1:$reported_bad" test -z "$reported_bad"
ensure "2: the exporter reached all 3 Raft nodes (patroni_raft_up 1) in every scrape" \
  "2: patroni_raft_up 1 on fewer than 3 nodes:$raft_down" test -z "$raft_down"
ensure "2: the exporter reached all 3 REST APIs (patroni_member_api_up 1) in every scrape" \
  "2: patroni_member_api_up 1 on fewer than 3 members:$api_down" test -z "$api_down"
ensure "2: verdict 0, evidence no_quorum, ${T_V0}s after the cut" "2: verdict never 0 (no_quorum) within ${watched}s" test -n "$T_V0"
ensure "2: verdict stayed 0 once it was 0" "2: verdict left 0 during the cut:$verdict_after" test -z "$verdict_after"
ensure "2: patroni_member_failsafe_active{$leader} 1, ${T_FS_ACTIVE[$leader_i]:-}s after the cut" \
  "2: patroni_member_failsafe_active{$leader} never 1 within ${watched}s" test -n "${T_FS_ACTIVE[$leader_i]:-}"
for n in 0 1 2; do
  ((n == leader_i)) && continue
  [[ -n ${T_FS_ACTIVE[$n]:-} ]] || e2e_result 2 "postgresql-$n: patroni_member_failsafe_active never 1 during the cut" "-"
done
ensure "2: $QL firing in Prometheus ${T_QL_FIRING}s after the cut" "2: $QL not firing within ${watched}s" test -n "$T_QL_FIRING"
ensure "2: $FA{member=$leader} firing in Prometheus ${T_FA_FIRING}s after the cut" \
  "2: $FA for $leader not firing within ${watched}s" test -n "$T_FA_FIRING"
ql_summary=$(jq -r '.[0].annotations.summary' "$RUN_DIR/alert-$QL-firing.json")
description=$(jq -r '.[0].annotations.description' "$RUN_DIR/alert-$QL-firing.json")
e2e_log "2: $QL firing, summary: $ql_summary"
e2e_log "2: $QL firing, description: $description"
if [[ $ql_summary == *"failsafe mode keeps the primary"* ]]; then pass "2: $QL summary says 'failsafe mode keeps the primary'"
else on_fail "2: $QL summary lacks 'failsafe mode keeps the primary': $ql_summary"; fi
if [[ $description == *"Failsafe mode is active"* ]]; then pass "2: $QL description says 'Failsafe mode is active'"
else on_fail "2: $QL description lacks 'Failsafe mode is active': $description"; fi
if [[ $ql_summary != *"demotes itself"* ]]; then pass "2: $QL summary does not say 'the primary demotes itself'"
else on_fail "2: $QL summary says the primary demotes itself: $ql_summary"; fi
# the annotations are rendered at each evaluation: before failsafe is active, the pending
# alert still says the other outcome (informational; notifications go out only when firing)
e2e_result 2 "$QL summary when it went pending" "$ql_summary_pending"
if jq -e '.[0].labels.severity == "warning"' "$RUN_DIR/alert-$FA-firing.json" >/dev/null; then pass "2: $FA is a warning"
else on_fail "2: $FA labels: $(jq -c '.[0].labels' "$RUN_DIR/alert-$FA-firing.json")"; fi
ensure "2: status exit 2 (CRITICAL) during the cut" "2: status exit $rc during the cut (want 2)" test "$rc" = 2

# ================================================================== 3. heal
e2e_log "=== 3: nftables rules removed"
T_HEAL=$(e2e_now)
member_fw_heal "$FW" || on_fail "3: nft flush"
T_V1="" T_ALL_OFF=""
declare -A T_FS_OFF
deadline=$(($(date +%s) + 150))
while (($(date +%s) < deadline)); do
  el=$(e2e_since "$T_HEAL")
  if fetch_metrics; then
    if [[ -z $T_V1 && $(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null) == 1 ]]; then
      T_V1=$el; e2e_result 3 "heal -> verdict 1 (s)" "$el"
    fi
    for n in 0 1 2; do
      if [[ -z ${T_FS_OFF[$n]:-} && $(FETCH=0 metric_value patroni_member_failsafe_active "$S,member=\"postgresql-$n\"" 2>/dev/null) == 0 ]]; then
        T_FS_OFF[$n]=$el; e2e_result 3 "heal -> patroni_member_failsafe_active{postgresql-$n} 0 (s)" "$el"
      fi
    done
    if [[ -z $T_ALL_OFF && -n ${T_FS_OFF[0]:-} && -n ${T_FS_OFF[1]:-} && -n ${T_FS_OFF[2]:-} ]]; then
      T_ALL_OFF=$el; e2e_result 3 "heal -> failsafe_active 0 on every member (s)" "$el"
    fi
  fi
  [[ -n $T_V1 && -n $T_ALL_OFF ]] && break
  sleep 1
done
ensure "3: verdict 1 ${T_V1}s after the heal" "3: verdict not 1 within 150 s of the heal" test -n "$T_V1"
ensure "3: failsafe_active 0 on every member ${T_ALL_OFF}s after the heal" \
  "3: failsafe_active not 0 on every member within 150 s of the heal" test -n "$T_ALL_OFF"
expect "3: $leader still reports primary" patroni_member_reported_role "$S,member=\"$leader\",role=\"primary\"" == 1 10
UP_TIMEOUT=120 cluster wait --sync >&2 || on_fail "3: healthy (sync) within 120 s"
e2e_result 3 "heal -> healthy (sync) (s)" "$(e2e_since "$T_HEAL")"
deadline=$(($(date +%s) + 30))
while :; do
  js=$(e2e_prom_alerts)
  [[ -z $(e2e_alert_state "$js" "$QL") && -z $(e2e_alert_state "$js" "$FA") ]] && break
  (($(date +%s) < deadline)) || on_fail "3: $QL or $FA still in Prometheus 30 s after recovery: $(e2e_alerts_brief)"
  sleep 1
done
pass "3: $QL and $FA gone from Prometheus"
e2e_result 3 "heal -> both alerts gone from Prometheus (s)" "$(e2e_since "$T_HEAL")"
e2e_edit_config "$RUN_DIR/edit-config-off.txt" failsafe_mode=null \
  || on_fail "3: patronictl edit-config -s failsafe_mode=null"
expect "3: patroni_config_failsafe_mode 0 again" patroni_config_failsafe_mode "$S" == 0 30
expect "3: verdict 1" patroni_raft_cluster_quorum "$S" == 1 10

e2e_finish "failsafe mode"
}
