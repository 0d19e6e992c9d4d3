#!/usr/bin/env bash
# test.sh - every check of the project, with a summary at the end.
# This is what `make test` and CI (.ci/run) run. It installs what it needs (Debian
# packages, the Patroni venvs, promtool, cargo-deb, shellcheck) through scripts/install-deps.sh.
#
# Usage: scripts/test.sh [--no-e2e]
#   E2E_MATRICES="3.3.8 4.1.5"   run every end-to-end scenario on these Patroni versions (the
#                                whole matrix, about twice the CPU). Unset, each scenario runs
#                                on the versions written at its step (`on` below)
#   E2E_JOBS=N                   how many e2e scripts run at once (default 4; 1 = one after
#                                the other; not root: always 1, they share the host's loopback)
#   E2E_STAGGER=S                seconds between two e2e scripts' starts (default 30)
#   E2E_SLOTS_DIR=DIR            where the machine's E2E_JOBS e2e slots are claimed (default
#                                /tmp/patroni-raft-exporter-e2e-slots-UID): every run of this
#                                script on the machine shares them, so two runs side by side
#                                run E2E_JOBS e2e scripts at once, not twice as many
#   CI=release                   also the release build, which the package test then packs
#                                (else it packs the e2e debug build), and `cargo publish
#                                --dry-run` (as for a tag on HEAD;
#                                `make release-check` runs it alone)
#
# How it runs: the steps below are grouped in lanes, and the lanes run side by side. A lane's
# steps run one after the other; the e2e lane's steps run side by side (each script makes its
# own network namespaces), in the order written, at most E2E_JOBS at once. A step starts when
# the steps it --needs have passed (a lane's --needs hold for all of its steps); when one of
# them failed it is not run, and fails. Every step's output goes to its own log
# ($E2E_WORK/test-sh/), printed in one piece when the step ends, with its time and what it
# counted; the summary lists every step in the order written.
#   - the exporter's debug build starts at once, beside the installation, and the e2e lane
#     starts when the installation is done: a step with `--needs deps` (the partition lab, the
#     longest) brings its clusters up while cargo builds (lib.sh's E2E_BUILD_WAIT).
#   - the e2e scripts run a copy of that build ($E2E_WORK/bin/): `cargo test` later rebuilds
#     target/debug/patroni-raft-exporter with the test doubles (the testkit feature).
# One more e2e script: one `step` line in the e2e lane.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
# shellcheck source=../tests/e2e/paths.sh
source tests/e2e/paths.sh
RUN_E2E=1
[[ ${1:-} == --no-e2e ]] && RUN_E2E=0
E2E_MATRICES="${E2E_MATRICES:-}"
E2E_JOBS="${E2E_JOBS:-4}"
((EUID == 0)) || E2E_JOBS=1
E2E_SLOTS_DIR="${E2E_SLOTS_DIR:-/tmp/patroni-raft-exporter-e2e-slots-$EUID}"
LOGS="$E2E_WORK/test-sh"
START=$SECONDS

# the e2e scripts' exporter: a copy of the debug build, and the file its build writes its
# exit code to when it ends (tests/e2e/lib.sh: e2e_wait_build)
export EXPORTER_BIN="$E2E_WORK/bin/patroni-raft-exporter"
export E2E_BUILD_WAIT="$LOGS/exporter-built"

# ------------------------------------------------------------------ the steps' own commands
# shellcheck disable=SC2317  # the lanes run these
e2e_exporter_build() {
  local rc=0
  cargo build --locked --bin patroni-raft-exporter || rc=$?
  if ((rc == 0)); then
    mkdir -p "${EXPORTER_BIN%/*}" && cp -f "$E2E_TARGET_DIR/debug/patroni-raft-exporter" "$EXPORTER_BIN.tmp" \
      && mv -f "$EXPORTER_BIN.tmp" "$EXPORTER_BIN" || rc=$?
  fi
  echo "$rc" >"$E2E_BUILD_WAIT.tmp" && mv -f "$E2E_BUILD_WAIT.tmp" "$E2E_BUILD_WAIT"
  return "$rc"
}

# dpkg -i needs root; CI runs as root, a developer's machine may have sudo. A release packs its
# release build; any other run the e2e scenarios' debug build (scripts/build-deb.sh, DEB_BINARY).
# shellcheck disable=SC2317  # the lanes run it
package_e2e() {
  local binary=()
  is_release || binary=(DEB_BINARY="$EXPORTER_BIN")
  if ((EUID == 0)); then env "${binary[@]}" tests/e2e/package.sh 3.3.8; else sudo -n env "${binary[@]}" tests/e2e/package.sh 3.3.8; fi
}

# A network namespace of its own needs root.
# shellcheck disable=SC2317  # the lanes run it
mixin_job() {
  if ((EUID == 0)); then tests/e2e/mixin-job.sh; else sudo -n tests/e2e/mixin-job.sh; fi
}

# The golden file marks run-dependent values as <varies>, and read times as <this poll> or
# <earlier poll>; promtool needs numbers.
# shellcheck disable=SC2317  # the lanes run it
golden_promtool() { sed -E 's/ <(varies|this poll|earlier poll)>$/ 0/' tests/golden/metrics.txt | promtool check metrics; }

# Compiled at a lower priority (step --nice), run at the normal one: some tests time what they do.
# shellcheck disable=SC2317  # the lanes run it
cargo_test() { nice -n 10 cargo test --locked --no-run && cargo test --locked; }

# Every intra-doc link resolves, in the developers' documentation (private items too).
# shellcheck disable=SC2317  # the lanes run it
cargo_doc() { RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items --locked; }

# on VERSION...: the Patroni versions an e2e step runs on, E2E_MATRICES's when it is set.
# Each scenario runs its versions side by side, a cluster each, busy between its checks too
# (`ps` in a loaded run: each Patroni process 3-4 % of a core, each debug exporter 2 %, each
# Prometheus 5 %): on a 2-core machine every scenario on both versions, four scripts at once,
# held the load at 20-49 and timed out polls, etcd requests and the checks' own ground truth
# (2026-12-02; the partition lab alone took 1283 s on both versions there, 727 s unloaded).
# So a scenario runs on both versions where their behaviour differs or where the issue asks
# for both (the base scenarios, readiness by version, etcd), on 3.3.8 (what Charmed PostgreSQL
# ships) where the charm's setup is under test and for the partition lab (the longest, with
# seven exporters per version), and the others alternate, so that each version meets most
# kinds of failure.
on() { echo "${E2E_MATRICES:-$*}"; }

# A release: CI=release, or a tag on HEAD.
is_release() { [[ ${CI:-} == release ]] || git describe --exact-match --tags HEAD >/dev/null 2>&1; }

# ------------------------------------------------------------------ the runner
S_NAME=() S_LANE=() S_CMD=() S_ID=() S_NEEDS=() S_NICE=()
LANES=()
declare -A LANE_NEEDS=() LANE_JOBS=() LANE_STAGGER=() LANE_SLOTS=()
CUR_LANE=""

# lane NAME [--jobs N] [--stagger S] [--slots DIR] [--needs ID,...]: the steps that follow go to
# lane NAME; N at once, started at least S seconds apart; with DIR, each step also holds one of
# the machine's N slots in DIR while it runs (claim_slot)
lane() {
  CUR_LANE=$1
  shift
  LANES+=("$CUR_LANE")
  LANE_JOBS[$CUR_LANE]=1 LANE_NEEDS[$CUR_LANE]="" LANE_STAGGER[$CUR_LANE]=0 LANE_SLOTS[$CUR_LANE]=""
  while (($#)); do
    case $1 in
      --jobs) LANE_JOBS[$CUR_LANE]=$2; shift 2 ;;
      --stagger) LANE_STAGGER[$CUR_LANE]=$2; shift 2 ;;
      --slots) LANE_SLOTS[$CUR_LANE]=$2; shift 2 ;;
      --needs) LANE_NEEDS[$CUR_LANE]=$2; shift 2 ;;
      *) echo "lane: unknown option $1" >&2; exit 2 ;;
    esac
  done
}

# step [--id ID] [--needs ID,...] [--nice N] NAME CMD...: one check, in the current lane.
# --nice: CPU-bound work nothing waits for (compiling, shellcheck, jsonnet) yields the CPU to
# the real clusters, whose checks have deadlines.
step() {
  local id="" needs=${LANE_NEEDS[$CUR_LANE]} nice=0 cmd
  while [[ ${1:-} == --* ]]; do
    case $1 in
      --id) id=$2; shift 2 ;;
      --needs) needs=$2; shift 2 ;;   # instead of the lane's
      --nice) nice=$2; shift 2 ;;
      *) echo "step: unknown option $1" >&2; exit 2 ;;
    esac
  done
  printf -v cmd '%q ' "${@:2}"
  S_NAME+=("$1") S_LANE+=("$CUR_LANE") S_CMD+=("$cmd") S_ID+=("$id") S_NEEDS+=("$needs") S_NICE+=("$nice")
}

# needs_state I: 0 when every step I needs has passed, 1 while one has not ended, 2 if one failed
needs_state() {
  local id j state=0 rc
  for id in ${S_NEEDS[$1]//,/ }; do
    for j in "${!S_ID[@]}"; do
      [[ ${S_ID[$j]} == "$id" ]] || continue
      if [[ ! -e $LOGS/$j.done ]]; then state=1; continue; fi
      read -r rc _ <"$LOGS/$j.done"
      [[ $rc == 0 ]] || return 2
    done
  done
  return "$state"
}

# claim_slot DIR N PID: one of the machine's N slots in DIR for process PID (its number on
# stdout); rc 1 while all are held. A slot is a file naming its holder; one whose holder is gone
# (a run killed) is free again. Under a lock, so two runs never take one slot.
claim_slot() {
  local dir=$1 n=$2 pid=$3
  mkdir -p "$dir"
  (
    flock 9
    for ((k = 1; k <= n; k++)); do
      holder=$(cat "$dir/slot-$k" 2>/dev/null || true)
      if [[ -z $holder ]] || ! kill -0 "$holder" 2>/dev/null; then
        echo "$pid" >"$dir/slot-$k"
        echo "$k"
        exit 0
      fi
    done
    exit 1
  ) 9>"$dir/lock"
}

# The CPU a step used, its own and every process it started (the clusters' daemons too): a
# cgroup v1 cpuacct group per step where the machine lets us make one (root), else none ("-").
# What decides how long `make test` takes on 2 cores is the sum of these, not the wall clocks.
CPU_CGROUPS=/sys/fs/cgroup/cpuacct
[[ -w $CPU_CGROUPS && -f $CPU_CGROUPS/cpuacct.usage ]] || CPU_CGROUPS=""
cpu_cgroup() { echo "$CPU_CGROUPS/patroni-raft-exporter-test-$$-$1"; }
cpu_seconds() { # cpu_seconds I: step I's CPU seconds, "-" without its group
  local usage
  if [[ -z $CPU_CGROUPS ]] || ! read -r usage 2>/dev/null <"$(cpu_cgroup "$1")/cpuacct.usage"; then
    echo -
    return
  fi
  echo $((usage / 1000000000))
}

run_one() { # run_one I: step I, its output in $LOGS/I.log; "rc seconds start cpu" in $LOGS/I.done
  local t0=$SECONDS rc=0 slots=${LANE_SLOTS[${S_LANE[$1]}]}
  [[ -z $CPU_CGROUPS ]] || mkdir -p "$(cpu_cgroup "$1")" 2>/dev/null || true
  (
    [[ -z $CPU_CGROUPS ]] || echo "$BASHPID" >"$(cpu_cgroup "$1")/cgroup.procs" 2>/dev/null || true
    if [[ -n $slots ]]; then
      me=$BASHPID   # this step's process (inside $(...) BASHPID would name the substitution's)
      until slot=$(claim_slot "$slots" "${LANE_JOBS[${S_LANE[$1]}]}" "$me"); do sleep 1; done
      # shellcheck disable=SC2064  # the slot's file, now
      trap "rm -f '$slots/slot-$slot'" EXIT
      ((SECONDS - t0 < 2)) || echo "waited $((SECONDS - t0))s for one of the machine's ${LANE_JOBS[${S_LANE[$1]}]} e2e slots (another run of the tests held them)"
    fi
    ((S_NICE[$1] == 0)) || renice -n "${S_NICE[$1]}" -p "$BASHPID" >/dev/null
    eval "${S_CMD[$1]}"
  ) >"$LOGS/$1.log" 2>&1 </dev/null || rc=$?
  echo "$rc $((SECONDS - t0)) $((t0 - START)) $(cpu_seconds "$1")" >"$LOGS/$1.tmp" && mv "$LOGS/$1.tmp" "$LOGS/$1.done"
  [[ -z $CPU_CGROUPS ]] || rmdir "$(cpu_cgroup "$1")" 2>/dev/null || true
}

not_run() { # not_run I: a step it needs failed
  echo "not run: a step it needs (${S_NEEDS[$1]}) failed" >"$LOGS/$1.log"
  echo "3 0 $((SECONDS - START))" >"$LOGS/$1.done"
}

# run_lane LANE: its steps, at most LANE_JOBS at once, each as soon as what it needs passed
# and LANE_STAGGER seconds after the lane's last start (one at a time: in the order written)
run_lane() {
  local i st now max=${LANE_JOBS[$1]} stagger=${LANE_STAGGER[$1]} last=-1000000 queue=() running=() still=() blocked moved pids=()
  for i in "${!S_NAME[@]}"; do [[ ${S_LANE[$i]} == "$1" ]] && queue+=("$i"); done
  while ((${#queue[@]} + ${#running[@]})); do
    still=() moved=0
    for i in "${running[@]}"; do
      if [[ -e $LOGS/$i.done ]]; then wait "${pids[i]}"; moved=1; else still+=("$i"); fi
    done
    # one clock per pass: read per step, a second that ticks during a slow pass (a loaded
    # machine) let a step late in the order start before the ones written above it
    running=("${still[@]}") still=() blocked=0 now=$SECONDS
    for i in "${queue[@]}"; do
      if ((blocked)); then still+=("$i"); continue; fi
      st=0; needs_state "$i" || st=$?
      if ((st == 2)); then
        not_run "$i"
      elif ((st == 0 && ${#running[@]} < max && now - last >= stagger)); then
        run_one "$i" &
        pids[i]=$!
        running+=("$i")
        last=$now
      else
        still+=("$i")
        ((max > 1)) || blocked=1
      fi
    done
    queue=("${still[@]}")
    ((moved)) || sleep 0.2
  done
}

counts_of() { # counts_of LOG: what the step's own output says it counted
  awk '
    /test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed/ { match($0, /[0-9]+ passed/); cp += substr($0, RSTART, RLENGTH - 7) + 0; cargo = 1 }
    /(^|[^0-9])[0-9]+ passed, [0-9]+ failed *$/ { match($0, /[0-9]+ passed/); p += substr($0, RSTART, RLENGTH - 7) + 0; n++ }
    /^shellcheck .* on [0-9]+ scripts/ { s = $(NF - 1) " scripts" }
    /^promtool: .* alert checks/ { a = $0; sub(/^promtool: /, "", a) }
    /^packaged crate: all [0-9]+ files/ { f = $4 " files the build needs" }
    END {
      out = ""
      if (cargo) out = cp " tests passed"
      if (n) out = out (out ? "; " : "") p " passed"
      if (s) out = out (out ? "; " : "") s
      if (a) out = out (out ? "; " : "") a
      if (f) out = out (out ? "; " : "") f
      print out
    }' "$1" 2>/dev/null
}

# failures_of LOG: the lines that say why a step failed (e2e FAIL lines, cargo's panics and
# failed tests, compiler errors, not-run reasons), at most 12, each cut at 300 characters
failures_of() {
  grep -E 'FAIL: |^FAIL  |panicked at|^---- .* ----$|^test .* FAILED$|^error(\[|:)|^not run: |^never ran' "$1" 2>/dev/null \
    | awk '!seen[$0]++' | head -n 12 | cut -c1-300 | sed 's/^/    /'
  grep -qE 'FAIL: |^FAIL  |panicked at|FAILED$|^error(\[|:)|^not run: |^never ran' "$1" 2>/dev/null \
    || { echo "    (no failure line; its last lines:)"; tail -n 5 "$1" | cut -c1-300 | sed 's/^/    /'; }
}

RESULTS=() CPU_TOTAL=0
report() { # report I: the step's block, when it ended
  local rc secs start cpu verdict counts
  read -r rc secs start cpu <"$LOGS/$1.done"
  verdict=PASS; [[ $rc == 0 ]] || verdict=FAIL
  counts=$(counts_of "$LOGS/$1.log")
  printf '\n\033[1m==> %s\033[0m  (lane %s, +%ss)\n' "${S_NAME[$1]}" "${S_LANE[$1]}" "$start"
  cat "$LOGS/$1.log"
  printf '%s  %s  %ss, CPU %ss%s\n' "$verdict" "${S_NAME[$1]}" "$secs" "${cpu:--}" "${counts:+  ($counts)}"
  RESULTS[$1]=$(printf '%s  %-56s %5ss %5ss %5ss  %s' "$verdict" "${S_NAME[$1]}" "+$start" "$secs" "${cpu:--}" "$counts")
  [[ ${cpu:--} == - ]] || CPU_TOTAL=$((CPU_TOTAL + cpu))
}

LANE_PIDS=()
# shellcheck disable=SC2317  # the traps run it
# stop_lanes: TERM to the process group of every lane still running (each lane leads its own)
stop_lanes() {
  local pid
  for pid in "${LANE_PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  return 0
}

run_all() {
  local lane i id left printed=()
  for i in "${!S_NAME[@]}"; do
    for id in ${S_NEEDS[$i]//,/ }; do
      [[ " ${S_ID[*]} " == *" $id "* ]] || { echo "test.sh: step '${S_NAME[$i]}' needs '$id': no step has that --id" >&2; exit 2; }
    done
  done
  rm -rf "$LOGS"; mkdir -p "$LOGS"
  rm -f "$EXPORTER_BIN"
  # Each lane in a process group of its own (set -m), its steps with it: a TERM or INT to this
  # script (HUP too), or its exit before the lanes ended, stops its own lanes' groups by PID (the e2e
  # scripts stop what they started), and nothing else of the caller's group.
  trap 'trap - TERM INT HUP; stop_lanes; wait; exit 143' TERM INT HUP
  trap stop_lanes EXIT
  set -m
  for lane in "${LANES[@]}"; do run_lane "$lane" & LANE_PIDS+=("$!"); done
  set +m
  while :; do
    left=0
    for i in "${!S_NAME[@]}"; do
      [[ -n ${printed[i]:-} ]] && continue
      if [[ -e $LOGS/$i.done ]]; then report "$i"; printed[i]=1; else left=$((left + 1)); fi
    done
    ((left)) || break
    if [[ -z $(jobs -rp) ]]; then   # every lane ended, some step never did
      for i in "${!S_NAME[@]}"; do
        [[ -n ${printed[i]:-} ]] || { echo "9 0 0" >"$LOGS/$i.done"; echo "never ran" >"$LOGS/$i.log"; report "$i"; }
      done
      break
    fi
    sleep 1
  done
  wait
  LANE_PIDS=()
  trap - TERM INT HUP EXIT
}

# ------------------------------------------------------------------ the steps
lane setup
step --id deps "install dependencies (apt, Patroni venvs, promtool, cargo-deb)" scripts/install-deps.sh

lane checks --needs deps
step --nice 10 "shellcheck (every shell script)" scripts/shellcheck.sh
step "lib.sh selftest (the /metrics text reader, no cluster)" tests/e2e/lib-selftest.sh
step "no import circle between the modules of src/" scripts/module-cycles.py
step "no production function longer than 100 lines" scripts/function-length.py
step "every relative link and anchor of the Markdown files resolves" scripts/check-links.py
step "rustfmt --check" cargo fmt --all -- --check
step --nice 10 "cargo doc -D warnings (every intra-doc link resolves)" cargo_doc
step "promtool check metrics (golden /metrics)" golden_promtool
step --nice 10 "alert rules: promtool check/test, amtool" scripts/check-alerts.sh
step --nice 10 "dashboards up to date and valid" scripts/gen-dashboards.sh --check

# cargo, in two lanes: the debug profile (the e2e scripts' exporter first, then the checks
# nothing waits for) and, for a release, the release profile (what the package ships). Cargo
# locks each profile's directory on its own, so both build at once: a release build with lto and
# one codegen unit spends minutes on one core (624 CPU s, the last step of a 2-core CI run, when
# every run made it: any other run's package step packs the debug build).
lane build
if (( RUN_E2E )); then
  step --id exporter "cargo build (exporter binary for e2e)" e2e_exporter_build
fi
# what `cargo publish` packs holds every file the build reads (the dry run below builds it)
step --needs deps "packaged crate: every file the build needs is in it" scripts/package-check.sh
step --nice 10 "clippy -D warnings" cargo clippy --all-targets --locked -- -D warnings
step "cargo test" cargo_test
# last in the lane: niced beside the clusters it took 959 s there (its fleet-sim build), and
# clippy and the tests waited for it (2026-12-02)
if (( RUN_E2E )); then
  step --needs deps,exporter --nice 10 "the exporter binary holds no test double" scripts/check-no-test-doubles.sh "$EXPORTER_BIN"
fi
if (( RUN_E2E )) && is_release; then
  lane release
  step --id release --nice 10 "cargo build --release (the binary the package ships)" cargo build --release --locked --bin patroni-raft-exporter
  # the release build the package ships (built here, packed by the package step): no fake node in it
  step --needs deps,release --nice 10 "the packaged release binary holds no test double" \
    scripts/check-no-test-doubles.sh "$E2E_TARGET_DIR/release/patroni-raft-exporter"
fi
# The crate as crates.io would get it builds from its packaged files alone (a whole build of
# its own): for a release; the file list above covers it on every push.
if is_release; then
  step --nice 10 "cargo publish --dry-run (packaged crate builds)" scripts/package-check.sh --dry-run
fi

if (( RUN_E2E )); then
  # Side by side, each in network namespaces of its own; the longest first. The exporter's
  # debug build (--needs exporter, the lane's) ends before a script starts, but for the lab:
  # it brings its clusters up meanwhile and waits for the build at `cluster up`.
  # Started 30 s apart: a script's first half minute brings up its cluster per version (initdb,
  # base backups, Patroni's imports: the CPU-heavy part); several at once starve each other and
  # the rest. (At 60 s, with every scenario on both versions, the 21 starts alone took 20 min.)
  lane e2e --jobs "$E2E_JOBS" --stagger "${E2E_STAGGER:-30}" --slots "$E2E_SLOTS_DIR" --needs deps,exporter
  # partitions (nftables in a network namespace of its own per version, the versions in
  # parallel): quorum verdict, shipped alerts, two vantage points, 150 s healthy check, and the
  # split views of issue #19 (two primaries, one member's Raft cut off, a partner list that
  # differs); ~12 min wall clock (727 s / 716 s, 2026-11-24)
  # shellcheck disable=SC2046  # one word per version
  step --needs deps "e2e partition lab, Patroni $(on 3.3.8)" tests/e2e/lab.sh $(on 3.3.8)
  # Patroni on etcd v3 (the typed layer): a real 3-member etcd (Debian's 3.4) and the cluster on
  # it, Patroni 4.1.5 and 3.3.11 side by side; healthy 150 s (the README's etcd quick start, a
  # real Prometheus), one etcd down, a failover, one member's stale view named, the leader cut
  # off from etcd (primaries against the members' own word), the majority down with failsafe
  # (PatroniEtcdQuorumLost at a real Alertmanager); ~7 min (418 s, 2026-11-29). By hand on etcd
  # 3.5.1 too: add --etcd-for 4.1.5=3.5.1 (14 passed, 419 s)
  step "e2e Patroni on etcd, Patroni 4.1.5 3.3.11" tests/e2e/pylab/run.sh test_etcd_lab.py --patroni 4.1.5 3.3.11
  # stereo mode (Charmed PostgreSQL 16): two members and a Raft-only witness
  # (patroni_raft_controller) on port 2224; healthy (nothing pending for 150 s), the replica
  # stopped (PatroniRaftQuorumNoMargin fires after its for: 5m, no quorum-loss page), the
  # primary killed (promoted through the witness's vote), the witness stopped. A network
  # namespace of its own per version, the versions in parallel; ~10 min wall clock (585-604 s)
  # shellcheck disable=SC2046  # one word per version
  step "e2e stereo mode, Patroni $(on 3.3.8)" tests/e2e/stereo.sh $(on 3.3.8)
  # one postgresql-watcher unit serving two stereo clusters: their witnesses on one host at
  # ports 2223 and 2224, one exporter through --config.file; each cluster names its own witness,
  # no zombie voter, the quorum of both right with the shared host stopped. A network namespace
  # of its own per version, the versions in parallel; ~3 min wall clock (149-210 s, 2026-11-27)
  # shellcheck disable=SC2046  # one word per version
  step "e2e shared watcher (two stereo clusters), Patroni $(on 4.1.5)" tests/e2e/shared-watcher.sh $(on 4.1.5)
  # Charmed PostgreSQL's own Patroni rules and dashboard unchanged (from the pinned library
  # package, tests/e2e/requirements-charm.txt) on the compat records: two exporters on one
  # cluster, no charm alert for 150 s, every dashboard query returns data, a killed primary and
  # a switchover seen as Patroni's own /metrics show them (~5.5 min)
  # shellcheck disable=SC2046  # one word per version
  step "e2e Charmed PostgreSQL's monitoring, Patroni $(on 3.3.8)" tests/e2e/charm-monitoring.sh $(on 3.3.8)
  # the mixin's rules rendered for job="pg-ha": PatroniExporterDown fires in a real
  # Prometheus (a network namespace of its own, no Patroni; ~20 s)
  step --needs deps "mixin: rules for job pg-ha fire in a real Prometheus" mixin_job
  # how close the next outage is, against PostgreSQL's and Patroni's own word: quorum
  # margin (a replica killed), data at risk (pg_wal_lsn_diff, walreceivers stopped, async/sync),
  # replay lag seconds (replay paused), a stalled HA loop (SIGSTOP of the heartbeat connection's
  # backend), clock skew (libfaketime, PatroniLeaderClockSkew firing). A network namespace of its
  # own per version, the versions in parallel; ~4 min wall clock
  # shellcheck disable=SC2046  # one word per version
  step "e2e next outage, Patroni $(on 4.1.5)" tests/e2e/next-outage.sh $(on 4.1.5)
  # as root each version in a network namespace of its own, in parallel (~3 min wall clock);
  # otherwise one after the other on the host's loopback (the real-cluster lock)
  # shellcheck disable=SC2046  # one word per version
  step "e2e scenarios, Patroni $(on 3.3.8 4.1.5)" tests/e2e/scenarios.sh $(on 3.3.8 4.1.5)
  # proof against Patroni itself: candidates >= 1 -> a leader kill gives a
  # new leader; both replicas nofailover -> candidates 0, PatroniNoFailoverCandidate pending in
  # a real Prometheus, and a leader kill promotes nobody. A network namespace of its own per
  # version, the versions in parallel; ~3 min wall clock
  # shellcheck disable=SC2046  # one word per version
  step "e2e failover readiness, Patroni $(on 3.3.8)" tests/e2e/failover-readiness.sh $(on 3.3.8)
  # readiness by version: a replica held beyond maximum_lag_on_failover (walreceiver SIGSTOPped
  # under pgbench) is not ready on 4.1.5 and ready on 3.3.8, patroni_member_readiness as each
  # Patroni's own GET /readiness answers. A network namespace of its own per version, the
  # versions in parallel; ~2-3 min wall clock
  # shellcheck disable=SC2046  # one word per version
  step "e2e readiness by version, Patroni $(on 3.3.8 4.1.5) 3.3.11" tests/e2e/readiness.sh $(on 3.3.8 4.1.5) 3.3.11
  # failsafe mode: Raft cut between the members (REST open), failsafe_mode on: the
  # leader stays primary beyond ttl, PatroniRaftQuorumLost fires saying "failsafe mode keeps
  # the primary", PatroniFailsafeModeActive fires; heal. A network namespace of its own per
  # version, the versions in parallel; ~3 min wall clock
  # shellcheck disable=SC2046  # one word per version
  step "e2e failsafe mode, Patroni $(on 4.1.5)" tests/e2e/failsafe.sh $(on 4.1.5)
  # standby clusters: a second real Patroni + Raft cluster with standby_cluster:
  # pointing at the first; the standby lag against pg_wal_lsn_diff under a write load and back,
  # the source primary stopped: PatroniStandbyLeaderNotStreaming firing. A network namespace of
  # its own per version, the versions in parallel; ~2.5 min wall clock (125-168 s, 2026-11-25)
  # shellcheck disable=SC2046  # one word per version
  step "e2e standby cluster, Patroni $(on 3.3.8)" tests/e2e/standby.sh $(on 3.3.8)
  # pysyncobj 0.3.16+ keeps a restarted node's term and may lower its commit index after a
  # crash: follower and leader stopped, killed and crashed; no false alert, no negative
  # entries behind the leader (~2.5 min)
  # shellcheck disable=SC2046  # one word per version
  step "e2e restarts and crashes of a Raft node, Patroni $(on 4.1.5)" tests/e2e/restart.sh $(on 4.1.5)
  # members hung (their Patroni stopped by SIGSTOP): at the defaults with the first two of three
  # URLs hung, and at --poll.interval 2s with one member hung, no poll longer than the interval,
  # none skipped, every live member's own /patroni read in every poll. A network namespace of
  # its own per version, in parallel (the typed layer tests/e2e/pylab: one xdist worker per
  # version); ~2 min (110 s, 2026-11-29)
  # shellcheck disable=SC2046  # one word per version
  step "e2e hung members, Patroni $(on 4.1.5)" tests/e2e/pylab/run.sh test_hung_members.py --patroni $(on 4.1.5)
  # Raft membership changed as Charmed PostgreSQL changes it (syncobj_admin -remove, then -add and
  # the member started again) under two exporters and the shipped rules in a real Prometheus: the
  # voter-set families follow each node's own status, nothing fires but the info
  # PatroniPostgresRestarted. A namespace per version, in parallel; ~1.7 min (98 s, 2026-11-29)
  # shellcheck disable=SC2046  # one word per version
  step "e2e Raft membership changes, Patroni $(on 3.3.8)" tests/e2e/pylab/run.sh test_membership.py --patroni $(on 3.3.8)
  # slow and lossy links without tc netem (nftables marks, iptables NFQUEUE, tests/e2e/netshape.py
  # holds the packets; nftables drops a share): one member's REST and Raft delayed below and above
  # the poll timeout as the exporter sees them, 25 % loss on its Raft links with the other members;
  # every figure right, round trips within 20 % of the same request timed by hand, no poll overrun,
  # no quorum alert. A network namespace of its own per version, in parallel; ~3.5 min (216-227 s)
  # shellcheck disable=SC2046  # one word per version
  step "e2e slow and lossy links, Patroni $(on 4.1.5)" tests/e2e/links.sh $(on 4.1.5)
  step "e2e alerting: real Prometheus + Alertmanager page on quorum loss" tests/e2e/alerting.sh 3.3.8
  # https + verify_client + the exporter's own TLS and basic auth + no secret leaks: on the
  # version Charmed PostgreSQL ships only (one more cluster start, ~1 min)
  step "e2e TLS, auth and secrets, Patroni 3.3.8" tests/e2e/tls.sh 3.3.8
  # the charm's patroni.yml.j2 rendered with jinja2 (stereo mode: the watcher in
  # partner_addrs) as the exporter's only configuration: both members over https with the
  # peer CA, every voter, the watcher a witness (~1 min)
  # shellcheck disable=SC2046  # one word per version
  step "e2e Charmed PostgreSQL's patroni.yml as the only configuration, Patroni $(on 3.3.8) 3.3.11" tests/e2e/charm-config.sh $(on 3.3.8) 3.3.11
  # Patroni on an etcd with TLS, client certificates and auth (the typed layer): Patroni's etcd3
  # with https, cacert, cert, key, user; the exporter by the README's flags with the
  # least-privileged role of docs/security.md and by Patroni's YAML; a role without the prefix
  # (forbidden), a wrong password and a certificate with a CommonName (auth), no password in
  # argv, logs or /metrics, no alert in a real Prometheus; ~90 s (83-92 s, 2026-11-29). One
  # version: both side by side (4.1.5 on etcd 3.5.1, 3.3.11 on 3.4: --patroni 4.1.5 3.3.11
  # --etcd-for 4.1.5=3.5.1, 10 passed each in 75 s alone) timed out etcd's TLS and bcrypt-auth
  # requests at the 2 s poll beside a second clean-clone run (load ~25 on 2 cores). After the
  # long ones: started beside the clusters' bring-ups and the builds (+330 s), its etcd
  # requests (TLS, bcrypt auth) timed out in three clean-clone runs here (2026-12-02)
  step "e2e etcd over TLS and auth, Patroni 4.1.5" tests/e2e/pylab/run.sh test_etcd_secure.py --patroni 4.1.5
  # etcd's reads (the typed layer): the exporter alone on a real 3-member etcd nothing else
  # writes to: 8 polls leave every member's raftIndex where it was (no alarm GET, a Raft
  # proposal), a filled quota's NOSPACE read from the statuses and PatroniEtcdAlarm firing in a
  # real Prometheus (~30 s)
  step "e2e etcd's reads propose nothing, NOSPACE from the status, Patroni 4.1.5" tests/e2e/pylab/run.sh test_etcd_reads.py --patroni 4.1.5
  # make deb (a release: the release build above; any other run: the e2e scripts' debug
  # build), lintian, dpkg -i, the unit's ExecStart as its user against a real cluster,
  # dpkg --purge leaves nothing (~1 min)
  if is_release; then
    step --needs deps,release "e2e Debian package (the release build): install, run as the unit does, purge" package_e2e
  else
    step "e2e Debian package (the e2e debug build): install, run as the unit does, purge" package_e2e
  fi
fi

run_all
# A step's group outlives it when a process it started still runs (a daemon its cleanup missed):
# named here, moved to the root group, and the group removed, so no run leaves groups behind.
if [[ -n $CPU_CGROUPS ]]; then
  for group in "$CPU_CGROUPS/patroni-raft-exporter-test-$$-"*; do
    [[ -d $group ]] || continue
    left=$(while read -r pid; do printf '%s(%s) ' "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)"; done <"$group/cgroup.procs")
    [[ -z $left ]] || echo "step ${group##*-} (${S_NAME[${group##*-}]}) left processes behind: $left" >&2
    while read -r pid; do echo "$pid" >"$CPU_CGROUPS/cgroup.procs" 2>/dev/null || true; done <"$group/cgroup.procs"
    rmdir "$group" 2>/dev/null || true
  done
fi
FAILED=0
for r in "${RESULTS[@]}"; do [[ $r == PASS* ]] || FAILED=$((FAILED + 1)); done
printf '\n\033[1mSummary\033[0m (%ss, CPU %s; each step: started at +s, took s, CPU s, what it counted)\n' \
  $((SECONDS - START)) "$([[ -n $CPU_CGROUPS ]] && echo "${CPU_TOTAL}s" || echo "not measured")"
printf '  %s\n' "${RESULTS[@]}"
# a CI page often keeps only the tail of the output: each failed step's own failure lines last
for i in "${!RESULTS[@]}"; do
  [[ ${RESULTS[i]} == PASS* ]] && continue
  printf '\033[1mwhy "%s" failed\033[0m (%s):\n' "${S_NAME[i]}" "$LOGS/$i.log"
  failures_of "$LOGS/$i.log"
done
(( FAILED == 0 )) && echo "all checks passed" || echo "$FAILED check(s) failed"
exit $(( FAILED > 0 ))
