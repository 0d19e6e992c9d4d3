#!/usr/bin/env bash
# What monitoring costs a real cluster: the CPU that each member's Patroni and its PostgreSQL
# spend, per second, under each of four conditions, measured in the same run:
#   none        nothing asks the cluster anything (the baseline: the HA loop, Raft, replication)
#   prometheus  a real Prometheus scraping every member's own GET /metrics every 15 s
#   prometheus0 the same Prometheus scraping nothing (its rules evaluated as often): what a busy
#               neighbour changes in the members' CPU, to subtract from `prometheus`
#   exporter1   one exporter at its defaults (README quick start: --patroni.url of member 0 and
#               the Raft password file, nothing else)
#   exporter2   two such exporters (two Prometheus replicas, each with its own exporter)
#   NAMEx10     the same requests ten times as often (Prometheus every 1.5 s, exporters polling
#               every 0.5 s): the cost of one scrape or poll stands ten times higher above the
#               noise of the baseline (summary.py divides it by ten)
#   NAME-noraft (exporters) with --raft.disabled (and the members' hosts allowed): what the REST
#               requests cost without the Raft status queries
#   NAME-b      (exporters; last) run EXPORTER_BIN_B instead, e.g. the build before a change:
#               rows named NAME@EXPORTER_LABEL_B
# The conditions are interleaved: ROUNDS rounds, each running every condition once for WINDOW_S
# seconds (after WARMUP_S seconds of it running), in an order rotated by one every round.
#
# CPU: each member's Patroni and its postmaster go into cgroups v2 of their own (the unified
# hierarchy, /sys/fs/cgroup or /sys/fs/cgroup/unified), postmaster's running children with it;
# the backends it forks later, and whatever Patroni runs, are born there. `usage_usec` of
# cpu.stat counts every task of the group, ended ones too. CPU time, not wall time: the cores
# are shared with whatever else runs.
# Requests: nftables counters in the run's namespace count the SYNs to each member's REST port
# (Patroni closes every connection after its answer, so one connection is one request) and to
# its Raft port (the exporter opens one connection per status query; the members' own Raft
# links are long-lived).
#
# Usage (root; not in CI), several versions run at once, each in a namespace of its own:
#   docs/bench/cluster-cost/run.sh [PATRONI_VERSION...]      (default: 3.3.8 4.1.5)
# Environment: WINDOW_S=100 WARMUP_S=10 ROUNDS=3, EXPORTER_BIN (default the debug build),
#   EXPORTER_LABEL (the `exporter` column: default `git describe --always --dirty`),
#   EXPORTER_BIN_B and EXPORTER_LABEL_B (the NAME-b conditions),
#   CONDITIONS (default "none prometheus exporter1 exporter2"), OUT (default
#   docs/bench/cluster-cost.csv: the rows of every version; APPEND=1 adds them to its rows, e.g.
#   another build's), then summary.py's tables on stdout. About 23 min with the defaults.
# Per version: log in $E2E_WORK/cluster-cost-VERSION.log, rows in
# $E2E_WORK/cluster-cost-VERSION/cost.csv.
set -euo pipefail
{ # parsed whole before it runs

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$HERE/../lib.sh"
HEADER=exporter,patroni_version,round,condition,member,role,window_s,patroni_cpu_ms,postgres_cpu_ms,rest_requests,raft_connections

# ---- outside the namespaces: every version at once, then one results file and the tables
(($# > 0)) || set -- 3.3.8 4.1.5
bench_outside cluster-cost cost.csv "$@"

E2E_TOOLS="nft prometheus" e2e_scenario cluster-cost "$@"

# ------------------------------------------------------------------ in the namespace
bench_settings cluster-cost 100 3
read -r -a CONDITIONS <<<"${CONDITIONS:-none prometheus exporter1 exporter2}"
CSV="$RUN_DIR/cost.csv"
FW=cluster_cost
CG=""

e2e_setup
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() {
  nft delete table inet "$FW" 2>/dev/null || true
  [[ -n $CG ]] || return 0
  # the members first (e2e_cleanup does it again): a postmaster forks into its group until then
  cluster down --fast >>"$RUN_DIR/cleanup.log" 2>&1 || true
  local g _
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    for g in "$CG"/*/; do rmdir "$g" 2>/dev/null || true; done
    rmdir "$CG" 2>/dev/null && break
    sleep 0.3
  done
  [[ ! -d $CG ]] || e2e_log "cgroup $CG left behind: $(cat "$CG"/*/cgroup.procs 2>/dev/null | paste -sd' ')"
  umount "$CG_ROOT" 2>/dev/null || true
}

# ---- the cgroup v2 hierarchy: `ip netns exec` mounts a sysfs of the namespace's own on /sys,
# without /sys/fs/cgroup, so mount the (single, system-wide) v2 hierarchy in this mount
# namespace, which is the run's own and goes with it
CG_ROOT="$RUN_DIR/cgroup2"
mkdir -p "$CG_ROOT"
mount -t cgroup2 none "$CG_ROOT" || on_fail "mount -t cgroup2 (cgroups v2 are needed)"
[[ -w $CG_ROOT/cgroup.procs ]] || on_fail "no writable cgroup v2 hierarchy at $CG_ROOT"

cluster up --sync >&2 || on_fail "cluster up --sync"
eval "$(cluster env)"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"

# ---- each member's Patroni and postmaster (with its children) into groups of their own
CG="$CG_ROOT/cluster-cost-${PATRONI_VERSION//./}-$$"
mkdir "$CG"
declare -a NAMES=() ROLES=() REST=() RAFT=()
n=0
while read -r name patroni postmaster; do
  patroni=${patroni#patroni=}
  postmaster=${postmaster#postmaster=}
  [[ $patroni =~ ^[0-9]+$ && $postmaster =~ ^[0-9]+$ ]] || on_fail "pids of $name: $patroni $postmaster"
  mkdir "$CG/patroni-$n" "$CG/postgres-$n"
  echo "$patroni" >"$CG/patroni-$n/cgroup.procs"
  echo "$postmaster" >"$CG/postgres-$n/cgroup.procs"
  for child in $(ps -o pid= --ppid "$postmaster"); do
    echo "$child" >"$CG/postgres-$n/cgroup.procs" 2>/dev/null || true   # may have ended since
  done
  NAMES+=("$name")
  rest_var="MEMBER${n}_REST" raft_var="MEMBER${n}_RAFT"
  REST+=("${!rest_var#*://}")
  RAFT+=("${!raft_var}")
  n=$((n + 1))
done < <(cluster pids | grep -v '^witness')
e2e_log "cgroups in $CG: $(cd "$CG" && echo -- */)"

# the roles, once before the windows (the script's own requests are outside every window)
cluster_json=$(curl -sf -m 5 "$MEMBER0_REST/cluster") || on_fail "GET /cluster"
for n in "${!NAMES[@]}"; do
  ROLES+=("$(jq -r --arg m "${NAMES[$n]}" '.members[] | select(.name == $m) | .role' <<<"$cluster_json")")
done
e2e_log "roles: ${NAMES[*]} = ${ROLES[*]}"

# ---- request counters: SYNs to each member's REST and Raft ports
{
  echo "table inet $FW {"
  for n in "${!NAMES[@]}"; do echo "  counter rest$n {}"; echo "  counter raft$n {}"; done
  echo "  chain in {"
  echo "    type filter hook input priority 0; policy accept;"
  for n in "${!NAMES[@]}"; do
    echo "    ip daddr ${REST[$n]%:*} tcp dport ${REST[$n]##*:} tcp flags & (syn | ack) == syn counter name rest$n"
    echo "    ip daddr ${RAFT[$n]%:*} tcp dport ${RAFT[$n]##*:} tcp flags & (syn | ack) == syn counter name raft$n"
  done
  echo "  }"
  echo "}"
} | nft -f - || on_fail "nftables counters"

usage_usec() { awk '$1 == "usage_usec" { print $2 }' "$CG/$1/cpu.stat"; }
packets() { nft list counter inet "$FW" "$1" | awk '/packets/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'; }
# snapshot -> one line: per member patroni_usec postgres_usec rest raft
snapshot() {
  local n line=""
  for n in "${!NAMES[@]}"; do
    line+="$(usage_usec "patroni-$n") $(usage_usec "postgres-$n") $(packets "rest$n") $(packets "raft$n") "
  done
  echo "$line"
}

( umask 077; printf '%s\n' "$RAFT_PASS" >"$RUN_DIR/raft-secret" )
start_condition() {
  local base=${1%-b} bin=$EXPORTER_BIN every=15s poll=5000 raft=(--raft.password-file "$RUN_DIR/raft-secret")
  MON_PIDS=()
  [[ $1 == *-b ]] && bin=$EXPORTER_BIN_B
  if [[ $base == *-noraft ]]; then
    # without an authenticated Raft status no member's api_url is trusted: allow the members' hosts
    local hosts="" r
    for r in "${REST[@]}"; do hosts+="${hosts:+,}${r%:*}"; done
    base=${base%-noraft}; raft=(--raft.disabled --patroni.allow-api-url-hosts "$hosts")
  fi
  if [[ $base == *x10 ]]; then base=${base%x10}; every=1500ms; poll=500; fi
  case $base in
    none) ;;
    prometheus|prometheus0)
      rm -rf "$RUN_DIR/prometheus"; mkdir -p "$RUN_DIR/prometheus"
      local targets="" r
      [[ $base == prometheus0 ]] || for r in "${REST[@]}"; do targets+="${targets:+, }'$r'"; done
      e2e_prometheus "$RUN_DIR/prometheus" "      - targets: [$targets]" "$every" || on_fail "prometheus"
      MON_PIDS+=("$E2E_PROM_PID"); E2E_PIDS+=("$E2E_PROM_PID") ;;
    exporter1|exporter2)
      local i count=${base#exporter} interval=()
      ((poll == 5000)) || interval=(--poll.interval "${poll}ms")   # else the default, 5 s
      for ((i = 0; i < count; i++)); do
        "$bin" --patroni.url "$MEMBER0_REST" "${raft[@]}" "${interval[@]}" \
          --web.listen-address "127.0.0.1:$((9393 + i))" >>"$RUN_DIR/exporter-$i.log" 2>&1 9>&- &
        MON_PIDS+=("$!"); E2E_PIDS+=("$!")
      done ;;
    *) on_fail "unknown condition $1" ;;
  esac
}
echo "$HEADER" >"$CSV"
mapfile -t RUNS < <(bench_schedule)
for run in "${RUNS[@]}"; do
  read -r round cond name <<<"$run"
  start_condition "$cond"
  sleep "$WARMUP_S"
  t0=$(e2e_now); read -r -a a <<<"$(snapshot)"
  sleep "$WINDOW_S"
  t1=$(e2e_now); read -r -a b <<<"$(snapshot)"
  bench_stop_monitors
  for n in "${!NAMES[@]}"; do
    i=$((n * 4))
    awk -v e="$EXPORTER_LABEL" -v v="$PATRONI_VERSION" -v r="$round" -v c="$name" -v m="${NAMES[$n]}" -v role="${ROLES[$n]}" \
      -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
      -v p=$((b[i] - a[i])) -v q=$((b[i + 1] - a[i + 1])) -v rq=$((b[i + 2] - a[i + 2])) -v rf=$((b[i + 3] - a[i + 3])) \
      'BEGIN { printf "%s,%s,%s,%s,%s,%s,%s,%.1f,%.1f,%d,%d\n", e, v, r, c, m, role, w, p / 1000, q / 1000, rq, rf }' >>"$CSV"
  done
  e2e_log "round $round $cond: $(tail -n "${#NAMES[@]}" "$CSV" | cut -d, -f5,8-11 | paste -sd' ')"
  sleep 2   # the stopped monitors' last connections close outside the next window
done

# the roles must not have changed during the run: a failover would mix two layouts
cluster_json=$(curl -sf -m 5 "$MEMBER0_REST/cluster") || on_fail "GET /cluster at the end"
for n in "${!NAMES[@]}"; do
  role=$(jq -r --arg m "${NAMES[$n]}" '.members[] | select(.name == $m) | .role' <<<"$cluster_json")
  check "${NAMES[$n]} kept its role (${ROLES[$n]})" test "$role" == "${ROLES[$n]}"
done
check "every window has its rows" test "$(($(wc -l <"$CSV") - 1))" -eq $((${#RUNS[@]} * ${#NAMES[@]}))
e2e_finish "cluster cost, Patroni $PATRONI_VERSION"
}
