#!/usr/bin/env bash
# hung-members.sh - a poll keeps its interval while members hang (issue #35): the Patroni
# process of a member stopped by SIGSTOP (the kernel still accepts its REST and Raft
# connections; nothing answers), as a process stuck in swap, a frozen VM or a debugger does.
#
# Usage: tests/e2e/hung-members.sh [PATRONI_VERSION...]   (3.3.8, 4.1.5; default 4.1.5).
# Root, a network namespace of its own per version (several: in parallel); ~2.5 min.
#
# The exporter gets every member's URL, the hung ones first, and the Raft password:
#   defaults    --poll.interval 5s --poll.timeout 2s (the defaults, written out), the leader's
#               and one replica's Patroni stopped for 25 s (below ttl: no failover). Before,
#               `/cluster` was asked of the URLs in turn: 6 s polls every 5 s.
#   interval-2s --poll.interval 2s --poll.timeout 2s (what `--poll.interval 2s` alone gives),
#               one replica's Patroni stopped for 30 s. Before, 4 s polls and every other
#               interval skipped.
# Sampled every 0.5 s while the members hang: each poll's `patroni_exporter_poll_duration_seconds`
# (one per `patroni_exporter_last_poll_timestamp_seconds`). Asserted per phase: no poll longer
# than the interval, `patroni_exporter_polls_skipped_total` unchanged, and in every poll after
# the first that saw them hung, `patroni_member_api_up` 1 for each live member (its own
# `GET /patroni` read in that poll: its verdicts are fresh) and 0 for each hung one. Measured
# (results.tsv): the polls, the longest and the median poll, the skipped intervals.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

e2e_scenario hung-members "$@"

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-hung-members-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
STOPPED=()   # patroni processes we SIGSTOPped: always continued

sig_stop() { kill -STOP "$1"; STOPPED+=("$1"); }
continue_all() { local p; for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null || true; done; STOPPED=(); }
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it: a stopped Patroni would
# hold `cluster down` for its timeout
e2e_cleanup_hook() { continue_all; }

e2e_setup
e2e_log "=== hung members, Patroni $PATRONI_VERSION, run dir $RUN_DIR"
cluster up --sync >"$RUN_DIR/cluster-up.log" 2>&1 || { cat "$RUN_DIR/cluster-up.log" >&2; on_fail "cluster up"; }
eval "$(cluster env)"

patroni_pid_of() { cluster pids | awk -v m="postgresql-$1" '$1 == m { sub("patroni=", "", $2); print $2 }'; }
leader_index() { local leader; leader=$(e2e_cluster_leader) || return 1; echo "${leader#postgresql-}"; }

# phase NAME INTERVAL_S HANG_S HUNG...: the exporter on every URL (the hung members' first),
# INTERVAL_S and a 2 s timeout; the HUNG members' Patroni stopped for HANG_S
phase() {
  local name=$1 interval=$2 hang=$3 n urls=() live=() hung_pids=() skipped0 skipped1 t0 samples
  shift 3
  local hung=("$@")
  for n in "${hung[@]}"; do urls+=(--patroni.url "$(e2e_rest "$n")"); done
  for n in 0 1 2; do
    [[ " ${hung[*]} " == *" $n "* ]] && continue
    live+=("$n"); urls+=(--patroni.url "$(e2e_rest "$n")")
  done
  # e2e_exporter puts member 0's URL first: the URLs here replace it
  MEMBER0_REST=${urls[1]} E2E_POLL_TIMEOUT=2s e2e_exporter "$interval" "${urls[@]:2}"
  expect_healthy "$name"
  # one poll of the healthy cluster after the exporter's first: the member that answered
  # `/cluster` (the first URL) is the one it asks first from then on
  sleep "$interval"
  skipped0=$(metric_value patroni_exporter_polls_skipped_total "$S")
  samples="$RUN_DIR/samples-$name.tsv"
  printf 't\tpolled_at\tduration\tskipped' >"$samples"
  for n in 0 1 2; do printf '\tapi_up_%s' "$n" >>"$samples"; done
  printf '\n' >>"$samples"
  for n in "${hung[@]}"; do hung_pids+=("$(patroni_pid_of "$n")"); done
  e2e_log "=== $name: SIGSTOP of the Patroni of member(s) ${hung[*]} (${hung_pids[*]}) for ${hang}s, --poll.interval ${interval}s"
  for n in "${hung_pids[@]}"; do sig_stop "$n"; done
  t0=$(e2e_now)
  while (( $(awk -v a="$t0" -v b="$(e2e_now)" -v h="$hang" 'BEGIN { print (b - a < h) }') )); do
    if fetch_metrics; then
      FETCH=0
      {
        printf '%s\t%s\t%s\t%s' "$(e2e_since "$t0")" \
          "$(metric_value patroni_exporter_last_poll_timestamp_seconds "$S" || echo -)" \
          "$(metric_value patroni_exporter_poll_duration_seconds "$S" || echo -)" \
          "$(metric_value patroni_exporter_polls_skipped_total "$S" || echo -)"
        for n in 0 1 2; do
          printf '\t%s' "$(metric_value patroni_member_api_up "$S,member=\"postgresql-$n\"" || echo -)"
        done
        printf '\n'
      } >>"$samples"
      FETCH=1
    fi
    sleep 0.5
  done
  skipped1=$(metric_value patroni_exporter_polls_skipped_total "$S")
  continue_all
  # one row per poll: the samples of the same poll (same timestamp) agree
  local polls
  polls=$(awk -F'\t' 'NR > 1 && $2 != "-" && !seen[$2]++' "$samples")
  # the polls that started after the stop (finished more than one interval after it)
  local stop_epoch
  stop_epoch=$(awk -v t="$t0" 'BEGIN { printf "%.3f", t }')
  local during
  during=$(awk -F'\t' -v s="$stop_epoch" -v i="$interval" '$2 > s + i' <<<"$polls")
  local count longest median
  count=$(grep -c . <<<"$during" || true)
  longest=$(cut -f3 <<<"$during" | sort -g | tail -n1)
  median=$(cut -f3 <<<"$during" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  e2e_result "$name" "polls while hung (interval ${interval}s)" "$count"
  e2e_result "$name" "longest poll (s)" "$longest"
  e2e_result "$name" "median poll (s)" "$median"
  e2e_result "$name" "intervals skipped while hung" "$((skipped1 - skipped0))"
  check "$name: polls while hung: at least $((hang / interval - 2))" test "$count" -ge $((hang / interval - 2))
  check "$name: no poll longer than the ${interval}s interval (longest ${longest}s)" \
    awk -v l="$longest" -v i="$interval" 'BEGIN { exit !(l != "" && l < i) }'
  check "$name: no interval skipped (${skipped0} -> ${skipped1})" test "$skipped0" = "$skipped1"
  local bad=0 column
  for n in 0 1 2; do
    column=$((5 + n))
    if [[ " ${hung[*]} " == *" $n "* ]]; then
      bad=$((bad + $(awk -F'\t' -v c="$column" '$c != "0"' <<<"$during" | grep -c . || true)))
    else
      bad=$((bad + $(awk -F'\t' -v c="$column" '$c != "1"' <<<"$during" | grep -c . || true)))
    fi
  done
  check "$name: every poll read each live member's own /patroni (${live[*]}) and none of the hung (${hung[*]})" test "$bad" -eq 0
  e2e_exporter_survived
  kill "$EXPORTER_PID" 2>/dev/null || true
  wait "$EXPORTER_PID" 2>/dev/null || true
  EXPORTER_PID=""
  cluster wait --sync >>"$RUN_DIR/cluster.log" 2>&1 || on_fail "$name: the cluster is not healthy again"
}

leader=$(leader_index) || on_fail "no leader"
replicas=()
for n in 0 1 2; do [[ $n == "$leader" ]] || replicas+=("$n"); done
e2e_result setup "leader" "postgresql-$leader"
phase defaults 5 25 "$leader" "${replicas[0]}"
phase interval-2s 2 30 "${replicas[1]}"

e2e_finish "hung members"
}
