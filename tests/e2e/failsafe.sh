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

export PATRONI_VERSION="${1:-${PATRONI_VERSION:-4.1.5}}"
EXPORTER_BIN="${EXPORTER_BIN:-$E2E_TARGET_DIR/debug/patroni-raft-exporter}"
export RUN_DIR="$E2E_WORK/failsafe-$PATRONI_VERSION"

# ------------------------------------------------------------------ several versions at once
# each in its own namespace (own addresses, lock, data dir and run dir), logs printed in order
if (($# > 1)); then
  declare -A FS_PIDS
  for v in "$@"; do
    "$0" "$v" >"$E2E_WORK/failsafe-$v.log" 2>&1 &
    FS_PIDS[$v]=$!
  done
  # a TERM/INT reaches every version's run, and each cleans up after itself
  trap 'kill -TERM "${FS_PIDS[@]}" 2>/dev/null; wait; exit 143' TERM INT
  rc=0 summary=()
  for v in "$@"; do
    vrc=0; wait "${FS_PIDS[$v]}" || vrc=$?
    ((vrc == 0)) || rc=1
    echo "==================== failsafe mode, Patroni $v (log $E2E_WORK/failsafe-$v.log)"
    cat "$E2E_WORK/failsafe-$v.log"
    summary+=("Patroni $v: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$E2E_WORK/failsafe-$v.log" | tail -n1 || echo "no summary (rc $vrc)") in $(awk -F'\t' '$2 == "total" { print $4 }' "$E2E_WORK/failsafe-$v/results.tsv" 2>/dev/null)s")
  done
  printf 'failsafe mode: %s\n' "${summary[@]}"
  exit "$rc"
fi

# ------------------------------------------------------------------ outer: the namespace
if [[ ${FS_IN_NETNS:-} != 1 ]]; then
  ((EUID == 0)) || { echo "failsafe.sh needs root (network namespace, nftables)" >&2; exit 2; }
  for c in ip nft setpriv jq curl prometheus; do
    command -v "$c" >/dev/null || { echo "$c missing: scripts/install-deps.sh" >&2; exit 2; }
  done
  [[ -x $EXPORTER_BIN ]] || { echo "no exporter binary at $EXPORTER_BIN (cargo build --bin patroni-raft-exporter)" >&2; exit 2; }
  # the venv is built outside: the namespace has no route to a package index
  [[ -x $(e2e_venv_dir "$PATRONI_VERSION")/bin/patroni ]] || "$E2E_REPO/scripts/install-deps.sh" --no-apt --no-cargo --patroni "$PATRONI_VERSION"
  NS="failsafe-${PATRONI_VERSION//./}-$$"
  ip netns add "$NS"
  outer_cleanup() {
    local pid
    # only processes inside our own namespace (started by this run) are left to stop
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true
  }
  trap outer_cleanup EXIT
  ip netns exec "$NS" ip link set lo up
  # in the background, so that a TERM/INT reaches it (its trap stops the cluster) before the
  # namespace goes (`ip netns exec` execs: the PID is the inner script's)
  ip netns exec "$NS" env FS_IN_NETNS=1 EXPORTER_BIN="$EXPORTER_BIN" "$0" "$PATRONI_VERSION" &
  INNER=$!
  trap 'kill -TERM "$INNER" 2>/dev/null; wait "$INNER"; exit 143' TERM INT
  rc=0
  wait "$INNER" || rc=$?
  exit "$rc"
fi

# ------------------------------------------------------------------ inner: the scenario
export DATA_DIR="$E2E_WORK/cluster-fs-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
GID_BASE="${FS_GID_BASE:-64000}"             # member N runs with the primary group GID_BASE+N
export MEMBER_GID_BASE=$GID_BASE
FW=failsafe                                   # the nftables table (in our namespace)
POLL=2                                        # exporter --poll.interval (s)
PROM=http://127.0.0.1:9090
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
RESULTS="$RUN_DIR/results.tsv"
S='scope="pg-test"'
QL=PatroniRaftQuorumLost
FA=PatroniFailsafeModeActive
CLUSTER="$E2E_DIR/cluster.sh"
# The cluster's daemons must not inherit the lock descriptor (fd 9), or it would outlive us.
cluster() { "$CLUSTER" "$@" 9>&-; }

exec 9>"$E2E_CLUSTER_LOCK"
flock -w 60 9 || { echo "lock $E2E_CLUSTER_LOCK held in our own namespace?" >&2; exit 2; }
rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR"
printf 'version\tphase\twhat\tvalue\n' >"$RESULTS"
PIDS=()
cleanup() {
  local rc=$? pid
  member_fw_teardown "$FW"
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cluster down --fast >>"$RUN_DIR/cleanup.log" 2>&1 || e2e_log "cluster down failed: see $RUN_DIR/cleanup.log"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

T_START=$(e2e_now)
e2e_log "=== failsafe mode, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
TIMES=()
result() { # result PHASE WHAT VALUE
  printf '%s\t%s\t%s\t%s\n' "$PATRONI_VERSION" "$1" "$2" "$3" >>"$RESULTS"
  TIMES+=("$(printf '%-6s %-70s %8s' "$1" "$2" "$3")")
  e2e_log "measured: $1: $2: $3"
}
rest_of() { local v="MEMBER${1}_REST"; echo "${!v}"; }
own_json() { curl -sf -m 2 "$(rest_of "$1")/patroni" 2>/dev/null || echo '{}'; }
# the leader GET /cluster names (first member that answers)
cluster_leader() {
  local n js
  for n in 0 1 2; do
    js=$(curl -sf -m 3 "$(rest_of "$n")/cluster" 2>/dev/null) || continue
    jq -r '[.members[] | select(.role == "leader") | .name][0] // ""' <<<"$js"
    return 0
  done
  return 1
}
# prom_alerts: Prometheus' /api/v1/alerts (pending and firing, annotations rendered)
prom_alerts() { curl -fs -m 3 "$PROM/api/v1/alerts" 2>/dev/null || echo '{}'; }
# alert_state JSON NAME [MEMBER]: pending/firing/"" of alert NAME (for MEMBER) in prom_alerts' JSON
alert_state() {
  jq -r --arg n "$2" --arg m "${3:-}" \
    '[(.data.alerts // [])[] | select(.labels.alertname == $n and ($m == "" or .labels.member == $m)) | .state] | sort | last // ""' <<<"$1"
}
prom_all_alerts() {
  prom_alerts | jq -r '[(.data.alerts // [])[] | "\(.labels.alertname)\(if .labels.member then "{\(.labels.member)}" else "" end)/\(.state)"] | sort | join(" ")'
}
show_state() {
  echo "===== the exporter's view"
  if fetch_metrics; then
    printf '%s\n' "$METRICS_TEXT" | grep -E '^patroni_(raft_(cluster_quorum|quorum_evidence\{.* 1$|up|has_quorum|voters)|config_failsafe_mode|member_(failsafe_active|api_up|reported_role\{.* 1$)|up\{)' || true
  else
    echo "(no answer from $EXPORTER_URL)"
  fi
  echo "===== Prometheus alerts: $(prom_all_alerts 2>/dev/null || echo '(no answer)')"
  local n
  for n in 0 1 2; do
    echo "===== postgresql-$n own GET /patroni: $(own_json "$n" | jq -c '{role, state, failsafe_mode_is_active}' 2>/dev/null)"
  done
  echo "===== nftables"; nft list table inet "$FW" 2>&1 | sed 's/^/    /' || true
}
# status NAME: `patroni-raft-exporter status` as the README shows it (from the run dir, the
# password file by its relative name), output in status-NAME.txt; prints the exit code
run_status() {
  local rc=0
  (cd "$RUN_DIR" && timeout 30 "$EXPORTER_BIN" status --patroni.url "$MEMBER0_REST" --raft.password-file raft-secret) \
    >"$RUN_DIR/status-$1.txt" 2>&1 9>&- || rc=$?
  echo "$rc" >"$RUN_DIR/status-$1.rc"
  sed 's/^/    /' "$RUN_DIR/status-$1.txt" >&2
  echo "$rc"
}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# ---- the cluster and the firewall (empty until the cut)
cluster down --fast >"$RUN_DIR/cleanup.log" 2>&1 || true   # leftovers of an interrupted run: start clean
member_fw_teardown "$FW"
member_fw_setup "$FW" "$GID_BASE" || on_fail "nftables table $FW"
cluster up --sync >&2 || on_fail "cluster up --sync"
result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, REST_USER, REST_PASS, RAFT_PASS, ...

# ---- the exporter, as the README quick start: one member's URL and the Raft password file
( umask 077; printf '%s\n' "$RAFT_PASS" >"$RUN_DIR/raft-secret" )
"$EXPORTER_BIN" --patroni.url "$MEMBER0_REST" --raft.password-file "$RUN_DIR/raft-secret" \
  --poll.interval "${POLL}s" --poll.timeout 1s --web.listen-address 127.0.0.1:9393 \
  >"$EXPORTER_LOG" 2>&1 9>&- &
EXPORTER_PID=$!
PIDS+=("$EXPORTER_PID")

# ---- Prometheus with the shipped rules, unchanged
cat >"$RUN_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - $E2E_REPO/alerts/patroni-raft.rules.yml
scrape_configs:
  - job_name: patroni-raft-exporter
    static_configs:
      - targets: ['127.0.0.1:9393']
EOF
prometheus --config.file "$RUN_DIR/prometheus.yml" --storage.tsdb.path "$RUN_DIR/prometheus-data" \
  --web.listen-address 127.0.0.1:9090 >"$RUN_DIR/prometheus.log" 2>&1 9>&- &
PIDS+=("$!")
deadline=$(($(date +%s) + 60))
until curl -fs -o /dev/null -m 2 "$PROM/-/ready"; do
  (($(date +%s) < deadline)) || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
  sleep 0.5
done
for a in "$QL" "$FA"; do
  check "Prometheus loaded the shipped rule $a" bash -c "curl -fs -m 3 '$PROM/api/v1/rules' | jq -e '[.data.groups[].rules[] | select(.name == \"$a\")] | length == 1' >/dev/null"
done

# ================================================================== 1. healthy, failsafe on
e2e_log "=== 1: healthy cluster; failsafe_mode on"
expect "1: exporter polls the cluster" patroni_up "$S" == 1 30
expect "1: verdict 1 (quorum confirmed)" patroni_raft_cluster_quorum "$S" == 1 30
expect "1: three members" patroni_cluster_members "$S" == 3 30
expect "1: two sync standbys" patroni_cluster_sync_standbys "$S" == 2 30
expect "1: failsafe_mode off at first" patroni_config_failsafe_mode "$S" == 0 10
rc=$(run_status healthy)
[[ $rc == 0 ]] && pass "1: status exit 0 (OK)" || on_fail "1: status exit $rc on a healthy cluster"
T_EDIT=$(e2e_now)
timeout 60 "$CLUSTER" ctl edit-config pg-test -s failsafe_mode=true --force >"$RUN_DIR/edit-config-on.txt" 2>&1 9>&- \
  || { cat "$RUN_DIR/edit-config-on.txt" >&2; on_fail "1: patronictl edit-config -s failsafe_mode=true"; }
expect "1: patroni_config_failsafe_mode 1 after edit-config" patroni_config_failsafe_mode "$S" == 1 30
result 1 "edit-config failsafe_mode=true -> patroni_config_failsafe_mode 1 (s)" "$(e2e_since "$T_EDIT")"
fetch_metrics || on_fail "1: scrape"
for n in 0 1 2; do
  v=$(FETCH=0 metric_value patroni_member_failsafe_active "$S,member=\"postgresql-$n\"" || echo absent)
  [[ $v == 0 ]] || on_fail "1: patroni_member_failsafe_active{postgresql-$n} is $v before the cut"
done
pass "1: patroni_member_failsafe_active 0 on every member"
leader=$(cluster_leader) && [[ -n $leader ]] || on_fail "1: GET /cluster names a leader"
leader_i=${leader##*-}
expect "1: $leader reports primary itself" patroni_member_reported_role "$S,member=\"$leader\",role=\"primary\"" == 1 10
states=$(prom_alerts)
[[ -z $(alert_state "$states" "$QL") && -z $(alert_state "$states" "$FA") ]] && pass "1: neither $QL nor $FA in Prometheus" \
  || on_fail "1: healthy, yet $(prom_all_alerts)"
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
      T_V0=$el; result 2 "cut -> verdict 0, evidence no_quorum (s)" "$T_V0"
    elif [[ -n $T_V0 && $q != 0 ]]; then
      verdict_after+=" $q@${el}s"
    fi
    for n in 0 1 2; do
      if [[ -z ${T_FS_ACTIVE[$n]:-} && $(FETCH=0 metric_value patroni_member_failsafe_active "$S,member=\"postgresql-$n\"" 2>/dev/null) == 1 ]]; then
        T_FS_ACTIVE[$n]=$el; result 2 "cut -> patroni_member_failsafe_active{postgresql-$n} 1 (s)" "$el"
      fi
    done
    rr=$(FETCH=0 metric_value patroni_member_reported_role "$S,member=\"$leader\",role=\"primary\"" 2>/dev/null || echo absent)
    [[ $rr == 1 ]] || reported_bad+=" $rr@${el}s"
    ru=$(FETCH=0 metric_lines patroni_raft_up "$S,..." | grep -c ' 1$' || true)
    ((ru == 3)) || raft_down+=" ${ru}@${el}s"
    au=$(FETCH=0 metric_lines patroni_member_api_up "$S,..." | grep -c ' 1$' || true)
    ((au == 3)) || api_down+=" ${au}@${el}s"
  else
    reported_bad+=" no-scrape@${el}s"
  fi
  # Prometheus
  js=$(prom_alerts)
  s_ql=$(alert_state "$js" "$QL")
  s_fa=$(alert_state "$js" "$FA" "$leader")
  if [[ -z $T_QL_PENDING && -n $s_ql ]]; then
    T_QL_PENDING=$el; result 2 "cut -> $QL pending (s)" "$el"
    ql_summary_pending=$(jq -r --arg n "$QL" '[.data.alerts[] | select(.labels.alertname == $n)][0].annotations.summary' <<<"$js")
    jq --arg n "$QL" '[.data.alerts[] | select(.labels.alertname == $n)]' <<<"$js" >"$RUN_DIR/alert-$QL-pending.json"
  fi
  if [[ -z $T_QL_FIRING && $s_ql == firing ]]; then
    T_QL_FIRING=$el; result 2 "cut -> $QL firing (s)" "$el"
    jq --arg n "$QL" '[.data.alerts[] | select(.labels.alertname == $n)]' <<<"$js" >"$RUN_DIR/alert-$QL-firing.json"
  fi
  if [[ -z $T_FA_PENDING && -n $s_fa ]]; then T_FA_PENDING=$el; result 2 "cut -> $FA{$leader} pending (s)" "$el"; fi
  if [[ -z $T_FA_FIRING && $s_fa == firing ]]; then
    T_FA_FIRING=$el; result 2 "cut -> $FA{$leader} firing (s)" "$el"
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
e2e_log "2: watched ${watched}s, $samples scrapes; Prometheus alerts now: $(prom_all_alerts)"
result 2 "watched after the cut (s)" "$watched"
fetch_metrics || true
result 2 "end of the window: patroni_cluster_leaders / failover_candidates" \
  "$(FETCH=0 metric_value patroni_cluster_leaders "$S" || echo '?') / $(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" || echo '?')"
result 2 "end of the window: $FA firing for" \
  "$(prom_alerts | jq -r --arg n "$FA" '[.data.alerts[] | select(.labels.alertname == $n and .state == "firing") | .labels.member] | sort | join(",")')"
# without a DCS quorum nobody can take the leader key: failover readiness says 0 (dcs_quorum)
cands=$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" || echo '?')
[[ $cands == 0 ]] && pass "2: failover candidates 0 while the quorum is lost" \
  || on_fail "2: failover candidates $cands while the quorum is lost (want 0)"
n_dcs=$(FETCH=0 metric_lines patroni_member_failover_excluded "$S,reason=\"dcs_quorum\",..." | grep -c . || true)
[[ $n_dcs == 2 ]] && pass "2: both replicas excluded with reason dcs_quorum" \
  || on_fail "2: $n_dcs replicas excluded with reason dcs_quorum (want 2)"
rc=$(run_status failsafe)
result 2 "status exit code during the cut" "$rc"
grep -q "If the leader dies now: nobody can take over" "$RUN_DIR/status-failsafe.txt" \
  && pass "2: status says nobody can take over" || on_fail "2: status does not say nobody can take over"
grep -q "failsafe mode active on" "$RUN_DIR/status-failsafe.txt" \
  && pass "2: status names the members in failsafe mode" || on_fail "2: status does not mention failsafe mode"
# what the cluster's own CLI says meanwhile (kept, not asserted: it reads its own Raft replica)
T_CTL=$(e2e_now) ctl_rc=0
timeout 20 "$CLUSTER" ctl list >"$RUN_DIR/patronictl-list-cut.txt" 2>&1 9>&- || ctl_rc=$?
result 2 "patronictl list during the cut: rc / seconds" "$ctl_rc / $(e2e_since "$T_CTL")"

[[ -z $lost_primary ]] && pass "2: $leader's own GET /patroni said primary in every sample for ${watched}s (ttl $TTL_S)" \
  || on_fail "2: $leader's own GET /patroni stopped saying primary:$lost_primary"
[[ -z $other_primary ]] && pass "2: no other member's own GET /patroni said primary" \
  || on_fail "2: another member said primary:$other_primary"
[[ -z $reported_bad ]] && pass "2: patroni_member_reported_role{$leader,primary} 1 in all $samples scrapes" \
  || on_fail "2: patroni_member_reported_role{$leader,primary} not 1:$reported_bad"
[[ -z $raft_down ]] && pass "2: the exporter reached all 3 Raft nodes (patroni_raft_up 1) in every scrape" \
  || on_fail "2: patroni_raft_up 1 on fewer than 3 nodes:$raft_down"
[[ -z $api_down ]] && pass "2: the exporter reached all 3 REST APIs (patroni_member_api_up 1) in every scrape" \
  || on_fail "2: patroni_member_api_up 1 on fewer than 3 members:$api_down"
[[ -n $T_V0 ]] && pass "2: verdict 0, evidence no_quorum, ${T_V0}s after the cut" || on_fail "2: verdict never 0 (no_quorum) within ${watched}s"
[[ -z $verdict_after ]] && pass "2: verdict stayed 0 once it was 0" || on_fail "2: verdict left 0 during the cut:$verdict_after"
[[ -n ${T_FS_ACTIVE[$leader_i]:-} ]] && pass "2: patroni_member_failsafe_active{$leader} 1, ${T_FS_ACTIVE[$leader_i]}s after the cut" \
  || on_fail "2: patroni_member_failsafe_active{$leader} never 1 within ${watched}s"
for n in 0 1 2; do
  ((n == leader_i)) && continue
  [[ -n ${T_FS_ACTIVE[$n]:-} ]] || result 2 "postgresql-$n: patroni_member_failsafe_active never 1 during the cut" "-"
done
[[ -n $T_QL_FIRING ]] && pass "2: $QL firing in Prometheus ${T_QL_FIRING}s after the cut" || on_fail "2: $QL not firing within ${watched}s"
[[ -n $T_FA_FIRING ]] && pass "2: $FA{member=$leader} firing in Prometheus ${T_FA_FIRING}s after the cut" || on_fail "2: $FA for $leader not firing within ${watched}s"
ql_summary=$(jq -r '.[0].annotations.summary' "$RUN_DIR/alert-$QL-firing.json")
description=$(jq -r '.[0].annotations.description' "$RUN_DIR/alert-$QL-firing.json")
e2e_log "2: $QL firing, summary: $ql_summary"
e2e_log "2: $QL firing, description: $description"
[[ $ql_summary == *"failsafe mode keeps the primary"* ]] && pass "2: $QL summary says 'failsafe mode keeps the primary'" \
  || on_fail "2: $QL summary lacks 'failsafe mode keeps the primary': $ql_summary"
[[ $description == *"Failsafe mode is active"* ]] && pass "2: $QL description says 'Failsafe mode is active'" \
  || on_fail "2: $QL description lacks 'Failsafe mode is active': $description"
[[ $ql_summary != *"demotes itself"* ]] && pass "2: $QL summary does not say 'the primary demotes itself'" \
  || on_fail "2: $QL summary says the primary demotes itself: $ql_summary"
# the annotations are rendered at each evaluation: before failsafe is active, the pending
# alert still says the other outcome (informational; notifications go out only when firing)
result 2 "$QL summary when it went pending" "$ql_summary_pending"
jq -e '.[0].labels.severity == "warning"' "$RUN_DIR/alert-$FA-firing.json" >/dev/null && pass "2: $FA is a warning" \
  || on_fail "2: $FA labels: $(jq -c '.[0].labels' "$RUN_DIR/alert-$FA-firing.json")"
[[ $rc == 2 ]] && pass "2: status exit 2 (CRITICAL) during the cut" || on_fail "2: status exit $rc during the cut (want 2)"

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
      T_V1=$el; result 3 "heal -> verdict 1 (s)" "$el"
    fi
    for n in 0 1 2; do
      if [[ -z ${T_FS_OFF[$n]:-} && $(FETCH=0 metric_value patroni_member_failsafe_active "$S,member=\"postgresql-$n\"" 2>/dev/null) == 0 ]]; then
        T_FS_OFF[$n]=$el; result 3 "heal -> patroni_member_failsafe_active{postgresql-$n} 0 (s)" "$el"
      fi
    done
    if [[ -z $T_ALL_OFF && -n ${T_FS_OFF[0]:-} && -n ${T_FS_OFF[1]:-} && -n ${T_FS_OFF[2]:-} ]]; then
      T_ALL_OFF=$el; result 3 "heal -> failsafe_active 0 on every member (s)" "$el"
    fi
  fi
  [[ -n $T_V1 && -n $T_ALL_OFF ]] && break
  sleep 1
done
[[ -n $T_V1 ]] && pass "3: verdict 1 ${T_V1}s after the heal" || on_fail "3: verdict not 1 within 150 s of the heal"
[[ -n $T_ALL_OFF ]] && pass "3: failsafe_active 0 on every member ${T_ALL_OFF}s after the heal" \
  || on_fail "3: failsafe_active not 0 on every member within 150 s of the heal"
expect "3: $leader still reports primary" patroni_member_reported_role "$S,member=\"$leader\",role=\"primary\"" == 1 10
UP_TIMEOUT=120 cluster wait --sync >&2 || on_fail "3: healthy (sync) within 120 s"
result 3 "heal -> healthy (sync) (s)" "$(e2e_since "$T_HEAL")"
deadline=$(($(date +%s) + 30))
while :; do
  js=$(prom_alerts)
  [[ -z $(alert_state "$js" "$QL") && -z $(alert_state "$js" "$FA") ]] && break
  (($(date +%s) < deadline)) || on_fail "3: $QL or $FA still in Prometheus 30 s after recovery: $(prom_all_alerts)"
  sleep 1
done
pass "3: $QL and $FA gone from Prometheus"
result 3 "heal -> both alerts gone from Prometheus (s)" "$(e2e_since "$T_HEAL")"
timeout 60 "$CLUSTER" ctl edit-config pg-test -s failsafe_mode=null --force >"$RUN_DIR/edit-config-off.txt" 2>&1 9>&- \
  || { cat "$RUN_DIR/edit-config-off.txt" >&2; on_fail "3: patronictl edit-config -s failsafe_mode=null"; }
expect "3: patroni_config_failsafe_mode 0 again" patroni_config_failsafe_mode "$S" == 0 30
expect "3: verdict 1" patroni_raft_cluster_quorum "$S" == 1 10

kill -0 "$EXPORTER_PID" 2>/dev/null && pass "exporter process still running" || on_fail "exporter process died"
grep -q panicked "$EXPORTER_LOG" && on_fail "exporter log shows a panic"

result total "run (s)" "$(e2e_since "$T_START")"
{
  echo "---- failsafe mode, Patroni $PATRONI_VERSION, $(date -u +%Y-%m-%d)"
  printf '  %s\n' "${TIMES[@]}"
} | tee "$RUN_DIR/results.txt"
e2e_summary | tee -a "$RUN_DIR/results.txt"
exit
}
