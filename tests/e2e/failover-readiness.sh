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

export PATRONI_VERSION="${1:-${PATRONI_VERSION:-4.1.5}}"
EXPORTER_BIN="${EXPORTER_BIN:-$E2E_TARGET_DIR/debug/patroni-raft-exporter}"
export RUN_DIR="$E2E_WORK/failover-readiness-$PATRONI_VERSION"

# ------------------------------------------------------------------ several versions at once
# each in its own namespace (own addresses, lock, data dir and run dir), logs printed in order
if (($# > 1)); then
  declare -A FR_PIDS
  for v in "$@"; do
    "$0" "$v" >"$E2E_WORK/failover-readiness-$v.log" 2>&1 &
    FR_PIDS[$v]=$!
  done
  # a TERM/INT reaches every version's run, and each cleans up after itself
  trap 'kill -TERM "${FR_PIDS[@]}" 2>/dev/null; wait; exit 143' TERM INT
  rc=0 summary=()
  for v in "$@"; do
    vrc=0; wait "${FR_PIDS[$v]}" || vrc=$?
    ((vrc == 0)) || rc=1
    echo "==================== failover readiness, Patroni $v (log $E2E_WORK/failover-readiness-$v.log)"
    cat "$E2E_WORK/failover-readiness-$v.log"
    summary+=("Patroni $v: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$E2E_WORK/failover-readiness-$v.log" | tail -n1 || echo "no summary (rc $vrc)") in $(awk -F'\t' '$2 == "total" { print $4 }' "$E2E_WORK/failover-readiness-$v/results.tsv" 2>/dev/null)s")
  done
  printf 'failover readiness: %s\n' "${summary[@]}"
  exit "$rc"
fi

# ------------------------------------------------------------------ outer: the namespace
if [[ ${FR_IN_NETNS:-} != 1 ]]; then
  ((EUID == 0)) || { echo "failover-readiness.sh needs root (network namespace)" >&2; exit 2; }
  for c in ip setpriv jq curl prometheus; do
    command -v "$c" >/dev/null || { echo "$c missing: scripts/install-deps.sh" >&2; exit 2; }
  done
  [[ -x $EXPORTER_BIN ]] || { echo "no exporter binary at $EXPORTER_BIN (cargo build --bin patroni-raft-exporter)" >&2; exit 2; }
  # the venv is built outside: the namespace has no route to a package index
  [[ -x $(e2e_venv_dir "$PATRONI_VERSION")/bin/patroni ]] || "$E2E_REPO/scripts/install-deps.sh" --no-apt --no-cargo --patroni "$PATRONI_VERSION"
  NS="frproof-${PATRONI_VERSION//./}-$$"
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
  ip netns exec "$NS" env FR_IN_NETNS=1 EXPORTER_BIN="$EXPORTER_BIN" "$0" "$PATRONI_VERSION" &
  INNER=$!
  trap 'kill -TERM "$INNER" 2>/dev/null; wait "$INNER"; exit 143' TERM INT
  rc=0
  wait "$INNER" || rc=$?
  exit "$rc"
fi

# ------------------------------------------------------------------ inner: the proof
export DATA_DIR="$E2E_WORK/cluster-fr-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
POLL=1                                        # exporter --poll.interval (s)
PROM=http://127.0.0.1:9090
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
RESULTS="$RUN_DIR/results.tsv"
S='scope="pg-test"'
ALERT=PatroniNoFailoverCandidate
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
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cluster down --fast >>"$RUN_DIR/cleanup.log" 2>&1 || e2e_log "cluster down failed: see $RUN_DIR/cleanup.log"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

T_START=$(e2e_now)
e2e_log "=== failover readiness, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
TIMES=()
result() { # result PHASE WHAT VALUE
  printf '%s\t%s\t%s\t%s\n' "$PATRONI_VERSION" "$1" "$2" "$3" >>"$RESULTS"
  TIMES+=("$(printf '%-8s %-66s %8s' "$1" "$2" "$3")")
  e2e_log "measured: $1: $2: $3"
}
rest_of() { local v="MEMBER${1}_REST"; echo "${!v}"; }
own_role() { curl -sf -m 2 "$(rest_of "$1")/patroni" 2>/dev/null | jq -r '.role // "?"' 2>/dev/null || echo down; }
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
# the members whose role is leader in the exporter's view (METRICS_TEXT of the last fetch)
metrics_leaders() {
  FETCH=0 metric_lines patroni_member_role "$S"',role="leader",...' \
    | awk '/ 1$/ { match($0, /member="[^"]*"/); print substr($0, RSTART + 8, RLENGTH - 9) }' | paste -sd,
}
# prom_alert_states: "alertstate" of every ALERTS series of $ALERT in Prometheus (empty: none)
prom_alert_states() {
  curl -fsG -m 3 "$PROM/api/v1/query" --data-urlencode "query=ALERTS{alertname=\"$ALERT\"}" \
    | jq -r '[.data.result[].metric.alertstate] | sort | join(",")'
}
prom_all_alerts() {
  curl -fsG -m 3 "$PROM/api/v1/query" --data-urlencode 'query=ALERTS' \
    | jq -r '[.data.result[].metric | "\(.alertname)/\(.alertstate)"] | sort | join(" ")'
}
show_state() {
  echo "===== the exporter's readiness view"
  if fetch_metrics; then
    printf '%s\n' "$METRICS_TEXT" | grep -E '^patroni_(cluster_(failover_candidates|leaders|members|sync_standbys)|member_(failover_|tag\{.*nofailover|role\{.* 1$|api_up))' || true
  else
    echo "(no answer from $EXPORTER_URL)"
  fi
  echo "===== Prometheus ALERTS: $(prom_all_alerts 2>/dev/null || echo '(no answer)')"
  local n
  for n in 0 1 2; do echo "===== postgresql-$n own GET /patroni role: $(own_role "$n")"; done
}
ctl_list() { # ctl_list FILE: patronictl list into FILE and the log
  timeout 30 "$CLUSTER" ctl list >"$1" 2>&1 9>&- || echo "(patronictl rc=$?)" >>"$1"
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
  code=$(curl -s -o "$RUN_DIR/reload-$1.txt" -w '%{http_code}' -m 10 -u "$REST_USER:$REST_PASS" -X POST "$(rest_of "$1")/reload") || true
  [[ $code == 20[02] ]] || on_fail "POST /reload to postgresql-$1 answered $code: $(cat "$RUN_DIR/reload-$1.txt" 2>/dev/null)"
  e2e_log "postgresql-$1: nofailover $2, POST /reload answered $code"
}

wait_own_tag() { # wait_own_tag N true|false TIMEOUT: member N's own GET /patroni has tags.nofailover
  local end=$(($(date +%s) + $3))
  while :; do
    curl -sf -m 3 "$(rest_of "$1")/patroni" 2>/dev/null \
      | jq -e --argjson want "$2" '(.tags.nofailover // false) == $want' >/dev/null 2>&1 && return 0
    (($(date +%s) < end)) || return 1
    sleep 0.5
  done
}

# ---- the cluster
cluster down --fast >"$RUN_DIR/cleanup.log" 2>&1 || true   # leftovers of an interrupted run: start clean
cluster up --sync >&2 || on_fail "cluster up --sync"
result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, REST_USER, REST_PASS, RAFT_PASS, ...

# ---- the exporter, as the README quick start: one member's URL and the Raft password file
( umask 077; printf '%s\n' "$RAFT_PASS" >"$RUN_DIR/raft-password" )
"$EXPORTER_BIN" --patroni.url "$MEMBER0_REST" --raft.password-file "$RUN_DIR/raft-password" \
  --poll.interval "${POLL}s" --poll.timeout 1s --web.listen-address 127.0.0.1:9393 \
  >"$EXPORTER_LOG" 2>&1 9>&- &
EXPORTER_PID=$!
PIDS+=("$EXPORTER_PID")

# ---- Prometheus with the shipped rules, unchanged
cat >"$RUN_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
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
check "Prometheus loaded the shipped rule $ALERT" bash -c "curl -fs -m 3 '$PROM/api/v1/rules' | jq -e '[.data.groups[].rules[] | select(.name == \"$ALERT\")] | length == 1' >/dev/null"

# ================================================================== 1. healthy, then failover
e2e_log "=== 1: healthy cluster; the leader killed"
expect "1: exporter polls the cluster" patroni_up "$S" == 1 30
expect "1: three members" patroni_cluster_members "$S" == 3 30
expect "1: one leader" patroni_cluster_leaders "$S" == 1 30
expect "1: two sync standbys" patroni_cluster_sync_standbys "$S" == 2 30
expect "1: failover candidates >= 1" patroni_cluster_failover_candidates "$S" '>=' 1 30
expect "1: failover candidates == 2 (both sync standbys)" patroni_cluster_failover_candidates "$S" == 2 30
fetch_metrics || on_fail "1: scrape"
excluded=$(FETCH=0 metric_lines patroni_member_failover_excluded)
[[ -z $excluded ]] && pass "1: no patroni_member_failover_excluded sample" \
  || on_fail "1: patroni_member_failover_excluded samples on a healthy cluster: $excluded"
leader=$(cluster_leader) && [[ -n $leader ]] || on_fail "1: GET /cluster names a leader"
leader_i=${leader##*-}
for i in 0 1 2; do
  ((i == leader_i)) && continue
  expect "1: postgresql-$i failover_eligible 1" patroni_member_failover_eligible "$S,member=\"postgresql-$i\"" == 1 10
done
deadline=$(($(date +%s) + 20))
until [[ $(curl -fsG -m 3 "$PROM/api/v1/query" --data-urlencode "query=patroni_cluster_failover_candidates{$S}" | jq -r '.data.result[0].value[1] // ""') == 2 ]]; do
  (($(date +%s) < deadline)) || on_fail "1: Prometheus scraped candidates 2"
  sleep 0.5
done
pass "1: Prometheus has scraped candidates 2"
[[ -z $(prom_alert_states) ]] && pass "1: healthy: no $ALERT in ALERTS" || on_fail "1: healthy cluster, yet $ALERT: $(prom_alert_states)"

fetch_metrics || on_fail "1: scrape before the kill"
cand_before=$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S") || on_fail "1: candidates before the kill"
result 1 "candidates just before killing leader $leader" "$cand_before"
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
result 1 "kill leader -> new leader $new_leader in metrics (s)" "$took"
role=$(own_role "${new_leader##*-}")
[[ $role == primary || $role == master ]] && pass "1: $new_leader's own GET /patroni says $role" \
  || on_fail "1: $new_leader's own GET /patroni says '$role'"
fetch_metrics || true
result 1 "candidates after the failover (the killed member unreachable)" "$(FETCH=0 metric_value patroni_cluster_failover_candidates "$S" || echo '?')"
T_RESTART1=$(e2e_now)
cluster start "$leader_i" >&2 || on_fail "1: start postgresql-$leader_i"
UP_TIMEOUT=120 cluster wait --sync >&2 || on_fail "1: healthy (sync) again within 120 s of restarting $leader"
result 1 "restart killed member -> healthy (sync) (s)" "$(e2e_since "$T_RESTART1")"
expect "1: candidates 2 again" patroni_cluster_failover_candidates "$S" == 2 30

# ================================================================== 2. no candidate: nobody promoted
e2e_log "=== 2: both replicas tagged nofailover; the leader killed"
leader=$(cluster_leader) && [[ -n $leader ]] || on_fail "2: GET /cluster names a leader"
leader_i=${leader##*-}
replicas=()
for i in 0 1 2; do ((i == leader_i)) || replicas+=("$i"); done
T_TAG=$(e2e_now)
for i in "${replicas[@]}"; do set_nofailover "$i" on; done
for i in "${replicas[@]}"; do
  wait_own_tag "$i" true 15 && pass "2: postgresql-$i's own GET /patroni shows tags.nofailover true" \
    || on_fail "2: postgresql-$i's own GET /patroni lacks tags.nofailover 15 s after the reload"
done
result 2 "reload -> both replicas' own GET /patroni show the tag (s)" "$(e2e_since "$T_TAG")"
expect "2: failover candidates 0" patroni_cluster_failover_candidates "$S" == 0 30
T_ZERO=$(e2e_now)
result 2 "reload with nofailover -> candidates 0 in metrics (s)" "$(e2e_since "$T_TAG")"
result 2 "candidates after tagging both replicas" "$(metric_value patroni_cluster_failover_candidates "$S" || echo '?')"
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
result 2 "reload with nofailover -> $ALERT pending in Prometheus (s)" "$took"
result 2 "candidates 0 in metrics -> $ALERT pending in Prometheus (s)" "$(e2e_since "$T_ZERO")"
curl -fsG -m 3 "$PROM/api/v1/query" --data-urlencode "query=ALERTS{alertname=\"$ALERT\"}" | jq -c '.data.result[].metric' >&2 || true
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
    r=$(own_role "$i")
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
      result 2 "kill -> dead leader's key expired (patroni_cluster_leaders 0) (s)" "$(e2e_since "$T_KILL2")"
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
e2e_log "2: own roles seen:$roles_seen; $samples scrapes; Prometheus ALERTS now: $(prom_all_alerts 2>/dev/null || echo '?')"
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
result 2 "watched: nobody promoted (s after the kill)" "$watched"
[[ -z $other_leader ]] && pass "2: the exporter never showed a leader other than the dead $leader" \
  || on_fail "2: the exporter showed another leader:$other_leader"
[[ -n $T_EXPIRED ]] && pass "2: the dead leader's key expired (patroni_cluster_leaders 0) while watching" \
  || on_fail "2: patroni_cluster_leaders never reached 0 within ${watched}s"
for k in "${!replicas[@]}"; do
  if ((refusals[k] > 0)); then
    pass "2: postgresql-${replicas[k]}'s log says '... I am not allowed to promote' (${refusals[k]} HA loops)"
  else
    on_fail "2: postgresql-${replicas[k]}'s log lacks 'not allowed to promote' since the kill"
  fi
done
awk -v m="$cand_max" 'BEGIN { exit !(m == 0) }' && pass "2: candidates stayed 0 while nobody was promoted" \
  || on_fail "2: candidates reached $cand_max after the kill, yet Patroni promoted nobody"
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
result 3 "untag + restart -> healthy (sync) (s)" "$(e2e_since "$T_UNDO")"
expect "3: one leader" patroni_cluster_leaders "$S" == 1 30
expect "3: failover candidates >= 1" patroni_cluster_failover_candidates "$S" '>=' 1 30
expect "3: failover candidates == 2" patroni_cluster_failover_candidates "$S" == 2 30
result 3 "leader after the undo" "$(cluster_leader || echo '?')"
expect "3: no patroni_member_failover_excluded sample" patroni_member_failover_excluded '...' absent - 10
deadline=$(($(date +%s) + 20))
while [[ -n $(prom_alert_states 2>/dev/null || echo '?') ]]; do
  (($(date +%s) < deadline)) || on_fail "3: $ALERT still in ALERTS 20 s after the recovery: $(prom_alert_states)"
  sleep 0.5
done
pass "3: $ALERT gone from ALERTS"

kill -0 "$EXPORTER_PID" 2>/dev/null && pass "exporter process still running" || on_fail "exporter process died"
grep -q panicked "$EXPORTER_LOG" && on_fail "exporter log shows a panic"

result total "run (s)" "$(e2e_since "$T_START")"
{
  echo "---- failover readiness, Patroni $PATRONI_VERSION, $(date -u +%Y-%m-%d)"
  printf '  %s\n' "${TIMES[@]}"
} | tee "$RUN_DIR/results.txt"
e2e_summary | tee -a "$RUN_DIR/results.txt"
exit
}
