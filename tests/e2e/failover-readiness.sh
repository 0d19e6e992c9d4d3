#!/usr/bin/env bash
# failover-readiness.sh - issue #12 section 1, "proof against Patroni itself": what
# patroni_cluster_failover_candidates says is what Patroni does when the leader dies.
# A real 3-member Patroni + Raft cluster, the exporter started as the README quick start
# (one --patroni.url + the Raft password file, --poll.interval 1s) and a real Prometheus that
# scrapes it every second and evaluates the SHIPPED alerts/patroni-raft.rules.yml unchanged,
# all in a network namespace of their own.
#
# Usage: tests/e2e/failover-readiness.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default
# 4.1.5). Root only (network namespace). ~3.5 min per version; several versions run in
# parallel, each in its own namespace (logs in $E2E_WORK/failover-readiness-VERSION.log,
# measurements in $E2E_WORK/failover-readiness-VERSION/results.tsv). EXPORTER_BIN defaults to
# the debug build.
#
#   1 healthy: candidates 2, no patroni_member_failover_excluded sample, no
#     PatroniNoFailoverCandidate in Prometheus. SIGKILL the leader (the one GET /cluster names):
#     another member becomes leader (metrics and its own GET /patroni) within 75 s (the dead
#     leader's key lives up to ttl 30 s). Restart it, wait healthy (sync).
#   2 both replicas tagged `nofailover: true` in their Patroni YAML + POST /reload: candidates 0,
#     each replica excluded with reason="nofailover", ALERTS{alertname="PatroniNoFailoverCandidate"}
#     pending in Prometheus (the shipped expression matches; its `for: 5m` is promtool's). SIGKILL
#     the leader: for ttl + 2 * loop_wait (and at least 2 * loop_wait after the leader key
#     expired) no member's own GET /patroni says primary/master, the exporter shows no other
#     leader and candidates stays 0; `patronictl list` (kept in the log) shows no leader.
#   3 tags removed + reload, the killed member started: healthy again (sync) with a leader,
#     candidates >= 1 (2), the alert gone.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

E2E_TOOLS=prometheus e2e_scenario failover-readiness "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the proof
export DATA_DIR="$E2E_WORK/cluster-fr-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
POLL=1                                        # exporter --poll.interval (s)
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
ALERT=PatroniNoFailoverCandidate

e2e_setup
e2e_log "=== failover readiness, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
# the members whose role is leader in the exporter's view (METRICS_TEXT of the last fetch)
metrics_leaders() {
  FETCH=0 metric_label patroni_member_role "$S"',role="leader",...' member 1 | paste -sd,
}
# prom_alert_states: "alertstate" of every ALERTS series of $ALERT in Prometheus (empty: none)
prom_alert_states() {
  curl -fsG -m 3 "$E2E_PROM/api/v1/query" --data-urlencode "query=ALERTS{alertname=\"$ALERT\"}" \
    | jq -r '[.data.result[].metric.alertstate] | sort | join(",")'
}
show_state() {
  e2e_show_metrics "the exporter's readiness view" \
    '^patroni_(cluster_(failover_candidates|leaders|members|sync_standbys)|member_(failover_|tag\{.*nofailover|role\{.* 1$|api_up))'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
  local n
  for n in 0 1 2; do echo "===== postgresql-$n own GET /patroni role: $(e2e_own_role "$n")"; done
}
ctl_list() { # ctl_list FILE: patronictl list into FILE and the log
  timeout 30 "$E2E_CLUSTER" ctl list >"$1" 2>&1 9>&- || echo "(patronictl rc=$?)" >>"$1"
  sed 's/^/    /' "$1" >&2
}
# tag / untag member N: a `tags:` section at the end of its YAML (cluster.sh writes none), then
# POST /reload (Patroni answers 202 and applies it at once)
TAG_MARK="# failover-readiness.sh: tags"
set_nofailover() { # set_nofailover N on|off
  local cfg="$DATA_DIR/postgresql-$1/patroni.yml" code body
  # rewritten in place (not sed -i): the file keeps its owner (Patroni's user) and mode 600
  body=$(sed "/^$TAG_MARK\$/,\$d" "$cfg")
  printf '%s\n' "$body" >"$cfg"
  if [[ $2 == on ]]; then printf '%s\ntags:\n  nofailover: true\n' "$TAG_MARK" >>"$cfg"; fi
  code=$(curl -s -o "$RUN_DIR/reload-$1.txt" -w '%{http_code}' -m 10 -u "$REST_USER:$REST_PASS" -X POST "$(e2e_rest "$1")/reload") || true
  [[ $code == 20[02] ]] || on_fail "POST /reload to postgresql-$1 answered $code: $(cat "$RUN_DIR/reload-$1.txt" 2>/dev/null)"
  e2e_log "postgresql-$1: nofailover $2, POST /reload answered $code"
}

wait_own_tag() { # wait_own_tag N true|false TIMEOUT: member N's own GET /patroni has tags.nofailover
  local end=$(($(date +%s) + $3))
  while :; do
    curl -sf -m 3 "$(e2e_rest "$1")/patroni" 2>/dev/null \
      | jq -e --argjson want "$2" '(.tags.nofailover // false) == $want' >/dev/null 2>&1 && return 0
    (($(date +%s) < end)) || return 1
    sleep 0.5
  done
}

# ---- the cluster
cluster up --sync >&2 || on_fail "cluster up --sync"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, REST_USER, REST_PASS, RAFT_PASS, ...

# ---- the exporter, as the README quick start; Prometheus (every 1 s) with the shipped rules, unchanged
e2e_exporter "$POLL"
e2e_prometheus "$RUN_DIR" 127.0.0.1:9393 1s || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
E2E_PIDS+=("$E2E_PROM_PID")
check "Prometheus loaded the shipped rule $ALERT" e2e_prom_rule_loaded "$ALERT"

# ================================================================== 1. healthy, then failover
e2e_log "=== 1: healthy cluster; the leader killed"
expect_healthy 1
expect "1: failover candidates >= 1" patroni_cluster_failover_candidates "$S" '>=' 1 30
expect "1: failover candidates == 2 (both sync standbys)" patroni_cluster_failover_candidates "$S" == 2 30
fetch_metrics || on_fail "1: scrape"
excluded=$(FETCH=0 metric_lines patroni_member_failover_excluded)
ensure "1: no patroni_member_failover_excluded sample" \
  "1: patroni_member_failover_excluded samples on a healthy cluster: $excluded" test -z "$excluded"
leader=$(e2e_cluster_leader) || on_fail "1: GET /cluster names a leader"
leader_i=${leader##*-}
for i in 0 1 2; do
  ((i == leader_i)) && continue
  expect "1: postgresql-$i failover_eligible 1" patroni_member_failover_eligible "$S,member=\"postgresql-$i\"" == 1 10
done
deadline=$(($(date +%s) + 20))
until [[ $(curl -fsG -m 3 "$E2E_PROM/api/v1/query" --data-urlencode "query=patroni_cluster_failover_candidates{$S}" | jq -r '.data.result[0].value[1] // ""') == 2 ]]; do
  (($(date +%s) < deadline)) || on_fail "1: Prometheus scraped candidates 2"
  sleep 0.5
done
pass "1: Prometheus has scraped candidates 2"
if [[ -z $(prom_alert_states) ]]; then pass "1: healthy: no $ALERT in ALERTS"; else on_fail "1: healthy cluster, yet $ALERT: $(prom_alert_states)"; fi

fetch_metrics || on_fail "1: scrape before the kill"
cand_before=$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S") || on_fail "1: candidates before the kill"
e2e_result 1 "candidates just before killing leader $leader" "$cand_before"
e2e_log "1: SIGKILL the leader $leader (candidates $cand_before)"
T_KILL1=$(e2e_now)
cluster kill "$leader_i" >&2
new_leader="" seen_leaders=""
deadline=$(($(date +%s) + 75))
while (($(date +%s) < deadline)); do
  if fetch_metrics; then
    seen_leaders=$(metrics_leaders)
    if [[ $(FETCH=0 metric_value patroni_cluster_leaders "$S" 2>/dev/null) == 1 && -n $seen_leaders && $seen_leaders != *,* && $seen_leaders != "$leader" ]]; then
      new_leader=$seen_leaders; break
    fi
  fi
  sleep 0.5
done
[[ -n $new_leader ]] || on_fail "1: no new leader in the metrics within 75 s of killing $leader (leaders seen: '$seen_leaders')"
took=$(e2e_since "$T_KILL1")
pass "1: new leader $new_leader in the metrics (patroni_cluster_leaders 1) ${took}s after killing $leader"
e2e_result 1 "kill leader -> new leader $new_leader in metrics (s)" "$took"
role=$(e2e_own_role "${new_leader##*-}")
if [[ $role == primary || $role == master ]]; then pass "1: $new_leader's own GET /patroni says $role"
else on_fail "1: $new_leader's own GET /patroni says '$role'"; fi
fetch_metrics || true
e2e_result 1 "candidates after the failover (the killed member unreachable)" "$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" || echo '?')"
T_RESTART1=$(e2e_now)
cluster start "$leader_i" >&2 || on_fail "1: start postgresql-$leader_i"
UP_TIMEOUT=120 cluster wait --sync >&2 || on_fail "1: healthy (sync) again within 120 s of restarting $leader"
e2e_result 1 "restart killed member -> healthy (sync) (s)" "$(e2e_since "$T_RESTART1")"
expect "1: candidates 2 again" patroni_cluster_failover_candidates "$S" == 2 30

# ================================================================== 2. no candidate: nobody promoted
e2e_log "=== 2: both replicas tagged nofailover; the leader killed"
leader=$(e2e_cluster_leader) || on_fail "2: GET /cluster names a leader"
leader_i=${leader##*-}
replicas=()
for i in 0 1 2; do ((i == leader_i)) || replicas+=("$i"); done
T_TAG=$(e2e_now)
for i in "${replicas[@]}"; do set_nofailover "$i" on; done
for i in "${replicas[@]}"; do
  ensure "2: postgresql-$i's own GET /patroni shows tags.nofailover true" \
    "2: postgresql-$i's own GET /patroni lacks tags.nofailover 15 s after the reload" wait_own_tag "$i" true 15
done
e2e_result 2 "reload -> both replicas' own GET /patroni show the tag (s)" "$(e2e_since "$T_TAG")"
expect "2: failover candidates 0" patroni_cluster_failover_candidates "$S" == 0 30
T_ZERO=$(e2e_now)
e2e_result 2 "reload with nofailover -> candidates 0 in metrics (s)" "$(e2e_since "$T_TAG")"
e2e_result 2 "candidates after tagging both replicas" "$(metric_value patroni_cluster_failover_candidates "$S" || echo '?')"
for i in "${replicas[@]}"; do
  m="member=\"postgresql-$i\""
  expect "2: postgresql-$i tag nofailover 1" patroni_member_tag "$S,$m,tag=\"nofailover\"" == 1 10
  expect "2: postgresql-$i excluded, reason nofailover" patroni_member_failover_excluded "$S,$m,reason=\"nofailover\"" == 1 10
  expect "2: postgresql-$i failover_eligible 0" patroni_member_failover_eligible "$S,$m" == 0 10
done
e2e_log "2: exclusions: $(metric_lines patroni_member_failover_excluded | paste -sd' ')"
expect "2: still one leader (the alert's second condition)" patroni_cluster_leaders "$S" == 1 5
states=""
deadline=$(($(date +%s) + 45))
while (($(date +%s) < deadline)); do
  states=$(prom_alert_states 2>/dev/null || true)
  [[ $states == *pending* || $states == *firing* ]] && break
  sleep 0.5
done
[[ $states == pending ]] || on_fail "2: ALERTS{alertname=\"$ALERT\"} pending within 45 s of tagging (seen '${states}')"
took=$(e2e_since "$T_TAG")
pass "2: ALERTS{alertname=\"$ALERT\",alertstate=\"pending\"} in Prometheus ${took}s after the reload"
e2e_result 2 "reload with nofailover -> $ALERT pending in Prometheus (s)" "$took"
e2e_result 2 "candidates 0 in metrics -> $ALERT pending in Prometheus (s)" "$(e2e_since "$T_ZERO")"
curl -fsG -m 3 "$E2E_PROM/api/v1/query" --data-urlencode "query=ALERTS{alertname=\"$ALERT\"}" | jq -c '.data.result[].metric' >&2 || true
ctl_list "$RUN_DIR/patronictl-list-tagged.txt"

# the leader dies: Patroni must promote nobody
fetch_metrics || on_fail "2: scrape"
TTL_S=$(FETCH=0 metric_value patroni_config_ttl_seconds "$S") || TTL_S=30
LOOP_S=$(FETCH=0 metric_value patroni_config_loop_wait_seconds "$S") || LOOP_S=10
TTL_S=${TTL_S%.*} LOOP_S=${LOOP_S%.*}
WATCH=$((TTL_S + 2 * LOOP_S))
e2e_log "2: SIGKILL the leader $leader; watching $WATCH s (ttl $TTL_S + 2 * loop_wait $LOOP_S), and at least $((2 * LOOP_S)) s after its key expired"
declare -A LOG_LINES
for i in "${replicas[@]}"; do LOG_LINES[$i]=$(wc -l <"$DATA_DIR/postgresql-$i/patroni.log"); done
T_KILL2=$(e2e_now)
cluster kill "$leader_i" >&2
T_EXPIRED="" promoted="" cand_max=0 other_leader="" roles_seen="" samples=0
deadline=$(($(date +%s) + WATCH))
hard_end=$(($(date +%s) + WATCH + 2 * LOOP_S + 15))
while :; do
  now_s=$(date +%s)
  ((now_s < deadline)) || break
  for i in "${replicas[@]}"; do
    r=$(e2e_own_role "$i")
    [[ " $roles_seen " == *" postgresql-$i:$r "* ]] || roles_seen+=" postgresql-$i:$r"
    [[ $r == primary || $r == master ]] && promoted+=" postgresql-$i@$(e2e_since "$T_KILL2")s"
  done
  if fetch_metrics; then
    samples=$((samples + 1))
    lv=$(FETCH=0 metric_value patroni_cluster_leaders "$S" 2>/dev/null || echo '?')
    ml=$(metrics_leaders)
    [[ -n $ml && $ml != "$leader" ]] && other_leader+=" $ml@$(e2e_since "$T_KILL2")s"
    if [[ $lv == 0 && -z $T_EXPIRED ]]; then
      T_EXPIRED=$(e2e_now)
      e2e_result 2 "kill -> dead leader's key expired (patroni_cluster_leaders 0) (s)" "$(e2e_since "$T_KILL2")"
      # Patroni's replicas get at least two HA loops without a leader key to (not) take over
      e=$(( $(date +%s) + 2 * LOOP_S ))
      ((e > deadline)) && deadline=$((e < hard_end ? e : hard_end))
    fi
    c=$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" 2>/dev/null || echo 0)
    awk -v c="$c" -v m="$cand_max" 'BEGIN { exit !(c > m) }' && cand_max=$c
  fi
  [[ -n $promoted ]] && break
  sleep 1
done
watched=$(e2e_since "$T_KILL2")
e2e_log "2: own roles seen:$roles_seen; $samples scrapes; Prometheus ALERTS now: $(e2e_alerts_brief)"
ctl_list "$RUN_DIR/patronictl-list-after-kill.txt"
refusals=()
for i in "${replicas[@]}"; do
  echo "    --- postgresql-$i patroni.log, last 4 lines" >&2
  tail -n 4 "$DATA_DIR/postgresql-$i/patroni.log" | sed 's/^/    /' >&2 || true
  # Patroni's own word, logged by each HA loop without a leader (ha.py, both versions)
  refusals+=("$(tail -n +"$((LOG_LINES[$i] + 1))" "$DATA_DIR/postgresql-$i/patroni.log" | grep -c 'not allowed to promote' || true)")
done
[[ -z $promoted ]] || on_fail "2: Patroni promoted a member although candidates was 0:$promoted"
pass "2: no member's own GET /patroni said primary/master for ${watched}s after killing $leader"
e2e_result 2 "watched: nobody promoted (s after the kill)" "$watched"
ensure "2: the exporter never showed a leader other than the dead $leader" \
  "2: the exporter showed another leader:$other_leader" test -z "$other_leader"
ensure "2: the dead leader's key expired (patroni_cluster_leaders 0) while watching" \
  "2: patroni_cluster_leaders never reached 0 within ${watched}s" test -n "$T_EXPIRED"
for k in "${!replicas[@]}"; do
  if ((refusals[k] > 0)); then
    pass "2: postgresql-${replicas[k]}'s log says '... I am not allowed to promote' (${refusals[k]} HA loops)"
  else
    on_fail "2: postgresql-${replicas[k]}'s log lacks 'not allowed to promote' since the kill"
  fi
done
ensure "2: candidates stayed 0 while nobody was promoted" \
  "2: candidates reached $cand_max after the kill, yet Patroni promoted nobody" awk -v m="$cand_max" 'BEGIN { exit !(m == 0) }'
if grep -qE '\| *(Leader|Standby Leader) *\|' "$RUN_DIR/patronictl-list-after-kill.txt"; then
  on_fail "2: patronictl list shows a leader after the kill"
elif grep -qE '\| *postgresql-[0-2] *\|' "$RUN_DIR/patronictl-list-after-kill.txt"; then
  pass "2: patronictl list shows members and no leader"
else
  on_fail "2: patronictl list gave no member table"
fi

# ================================================================== 3. undo
e2e_log "=== 3: tags removed, the killed member started"
T_UNDO=$(e2e_now)
for i in "${replicas[@]}"; do set_nofailover "$i" off; done
for i in "${replicas[@]}"; do
  wait_own_tag "$i" false 15 || on_fail "3: postgresql-$i still tagged nofailover 15 s after the reload"
done
cluster start "$leader_i" >&2 || on_fail "3: start postgresql-$leader_i"
UP_TIMEOUT=150 cluster wait --sync >&2 || on_fail "3: healthy (sync) within 150 s of removing the tags"
e2e_result 3 "untag + restart -> healthy (sync) (s)" "$(e2e_since "$T_UNDO")"
expect "3: one leader" patroni_cluster_leaders "$S" == 1 30
expect "3: failover candidates >= 1" patroni_cluster_failover_candidates "$S" '>=' 1 30
expect "3: failover candidates == 2" patroni_cluster_failover_candidates "$S" == 2 30
e2e_result 3 "leader after the undo" "$(e2e_cluster_leader || echo '?')"
expect "3: no patroni_member_failover_excluded sample" patroni_member_failover_excluded '...' absent - 10
deadline=$(($(date +%s) + 20))
while [[ -n $(prom_alert_states 2>/dev/null || echo '?') ]]; do
  (($(date +%s) < deadline)) || on_fail "3: $ALERT still in ALERTS 20 s after the recovery: $(prom_alert_states)"
  sleep 0.5
done
pass "3: $ALERT gone from ALERTS"

e2e_finish "failover readiness"
}
