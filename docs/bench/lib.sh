# shellcheck shell=bash
# lib.sh - what the real-cluster benchmarks of docs/bench/ (cluster-cost/run.sh,
# rest-pool/run.sh) share, so that they run, schedule and record the same way: the run outside
# the namespaces (every Patroni version, one results file, the summary), the settings inside,
# the interleaved schedule of the conditions, and stopping what a condition started. Sourced
# by their run.sh; sources tests/e2e/lib.sh (e2e_scenario, cluster, E2E_WORK, ...).

# shellcheck source=../../tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/e2e/lib.sh"

# bench_outside NAME ROWS VERSION...: outside the namespaces, runs the calling script once per
# Patroni VERSION, all at once, each in a namespace of its own (BENCH_CHILD=1; log
# $E2E_WORK/NAME-VERSION.log), then writes OUT (default docs/bench/NAME.csv): HEADER and the
# rows of every version ($E2E_WORK/NAME-VERSION/ROWS; APPEND=1 adds them to OUT's rows), and
# prints the tables of the script's summary.py; then exits. In a run's own child it returns.
bench_outside() {
  [[ ${E2E_IN_NETNS:-} != 1 && ${BENCH_CHILD:-} != 1 ]] || return 0
  local name=$1 rows=$2 out v rc=0
  shift 2
  export EXPORTER_LABEL=${EXPORTER_LABEL:-$(git -C "$E2E_REPO" describe --always --dirty)}
  out=${OUT:-$E2E_REPO/docs/bench/$name.csv}
  local -A pids=()
  for v in "$@"; do
    BENCH_CHILD=1 "$0" "$v" >"$E2E_WORK/$name-$v.log" 2>&1 &
    pids[$v]=$!
  done
  trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait; exit 143' TERM INT
  for v in "$@"; do
    wait "${pids[$v]}" || { rc=1; echo "Patroni $v failed: see $E2E_WORK/$name-$v.log" >&2; }
  done
  ((rc == 0)) || exit 1
  [[ ${APPEND:-0} == 1 && -s $out ]] || echo "$HEADER" >"$out"
  for v in "$@"; do tail -n +2 "$E2E_WORK/$name-$v/$rows"; done >>"$out"
  echo "rows: $out" >&2
  python3 "$(dirname "$0")/summary.py" "$out"
  exit 0
}

# bench_settings NAME WINDOW_S ROUNDS: in the namespace, the settings every benchmark takes
# from the environment, with their defaults: DATA_DIR of this run and version, WAL_SEGSIZE 1,
# EXPORTER_LABEL, EXPORTER_BIN_B and EXPORTER_LABEL_B (the N-b conditions), WINDOW_S and ROUNDS
# (the defaults given), WARMUP_S 10.
bench_settings() {
  export DATA_DIR="$E2E_WORK/$1-data-$PATRONI_VERSION"
  export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"
  # shellcheck disable=SC2034  # read by the benchmarks that source this file
  {
    EXPORTER_LABEL=${EXPORTER_LABEL:-unnamed}
    EXPORTER_BIN_B=${EXPORTER_BIN_B:-$EXPORTER_BIN}
    EXPORTER_LABEL_B=${EXPORTER_LABEL_B:-b}
    WINDOW_S=${WINDOW_S:-$2}
    WARMUP_S=${WARMUP_S:-10}
    ROUNDS=${ROUNDS:-$3}
  }
}

# bench_schedule: the runs of the conditions, one "ROUND CONDITION NAME" line each: ROUNDS
# rounds, each running every one of CONDITIONS once, in an order rotated by one every round
# (so that none always follows the same one); NAME is the condition, or N@EXPORTER_LABEL_B for
# an N-b one (EXPORTER_BIN_B's).
bench_schedule() {
  local round k nc=${#CONDITIONS[@]} cond
  for ((round = 1; round <= ROUNDS; round++)); do
    for ((k = 0; k < nc; k++)); do
      cond=${CONDITIONS[$(((k + round - 1) % nc))]}
      if [[ $cond == *-b ]]; then
        echo "$round $cond ${cond%-b}@$EXPORTER_LABEL_B"
      else
        echo "$round $cond $cond"
      fi
    done
  done
}

# MON_PIDS: the PIDs of what the current condition started (exporters, a Prometheus), also
# in E2E_PIDS; bench_stop_monitors stops them.
MON_PIDS=()
bench_stop_monitors() {
  local p
  for p in "${MON_PIDS[@]}"; do e2e_stop_pid "$p"; done
  MON_PIDS=()
}
