#!/usr/bin/env bash
# bench.sh - measure the release exporter against a simulated fleet, and side by side with a
# real Patroni cluster. Results (CSV, raw wrk output, logs) go to $OUT; docs/performance.md
# quotes them.
#
# Usage: scripts/bench.sh [fleet|tls|collectors|real|plot|shards|rest-pool|cluster-cost|all]
#        (default: all: fleet, real, plot)
#   fleet   for N in $SIZES: fleet-sim with N clusters (3 members + 3 encrypted Raft nodes
#           each), the exporter polling them every $INTERVAL s; reports exporter CPU seconds
#           per poll cycle (/proc/PID/stat), RSS, poll durations (from /metrics), /metrics
#           size, encode time (the exporter's debug log), and /metrics latency under
#           $WRK_CONNS concurrent scrapers (wrk), with the exporter's CPU per scrape; then
#           the floor (benches/floor.rs: the same requests to the same fleet-sim with the
#           same HTTP stack, no parsing, snapshot or encoding) for as many cycles, and the
#           ratio of the exporter's CPU per cycle to the floor's.
#           With EXPORTER_B (another build, e.g. the last release's): both builds and the
#           floor in $ROUNDS (2) rounds, each window over $CYCLES intervals; as root all three at
#           once, each against a fleet-sim of its own in a network namespace of its own
#           (TOGETHER=1, the default there; TOGETHER=0: one after the other against one
#           fleet-sim, A and B taking turns): CPU per cycle and its ratio to the same round's
#           floor, RSS, series, encode CPU p50, and the requests per cluster and cycle by path
#           (the floor's must equal the exporter's), side by side, and each build's spread
#           over the rounds: $OUT/fleet-compare.csv and .txt. Run it after any change to the
#           poller, the requests or the encoder (CONTRIBUTING.md). ETCD_SHARE=P puts P % of each N on etcd (3 fake etcd members
#           each instead of the Raft nodes: fleet-sim --etcd-clusters), in both modes.
#           ETCD_SHARE_B=Q (at once only) gives B a fleet with Q % on etcd and a floor of its own
#           on the same fleet ("floorB"): with EXPORTER_B=$EXPORTER, the same build on two
#           fleet mixes in the same windows, each over its own floor.
#   real    a real 3-member Patroni + Raft cluster (tests/e2e/cluster.sh, locked with
#           the real-cluster lock): wrk on the exporter's /metrics (plain, then gzip) vs
#           Patroni's GET /metrics of member 0, each with the CPU seconds that the exporter,
#           that member's Patroni and its Postgres used meanwhile (/proc/PID/stat, less what
#           each used in a window as long with no requests), so the CPU µs per request of the
#           server and Patroni's ÷ the exporter's: $OUT/real-cpu.csv, columns added to real.csv;
#           when perf can sample (PERF=0: skip), one more plain run on the exporter under
#           `perf record -g`, top symbols and objects in $OUT/real/perf-exporter-*.txt; then one
#           Raft status query (cargo bench --bench raft_query) vs syncobj_admin -status
#           (hyperfine when installed, else a timed loop).
#   tls     for N in $SIZES, each against a fleet-sim of its own: the floor, the exporter over
#           http, over https with resumption (fleet-sim issues TLS 1.3 tickets, as Python's
#           ssl does), over https without (no tickets: every handshake full), and the floor
#           over https; CPU seconds per poll cycle, RSS, and the handshakes fleet-sim counted,
#           full and resumed, per cycle: $OUT/tls.csv (docs/performance.md, "Cost per cluster");
#           TLS_MODES picks some of "floor plain tls tls-noresume floor-tls" (all by default);
#           for the exporter also the series per cluster and, over $ENCODE_SCRAPES (100)
#           scrapes one after another after the CPU window, p50/p99 of each response's wall
#           time (send) and of the CPU of assembling it (encode_cpu); then
#           `collectors`. So one run gives docs/performance.md's cost table at N = 1, 100, 1000.
#   collectors  the series of one simulated 3-member cluster, with every collector and with
#           each switched off (--no-collector.NAME): $OUT/collectors.csv
#   plot    $OUT/fleet.png from $OUT/fleet.csv: cost against clusters (matplotlib in a venv,
#           $PLOT_VENV).
#   shards  $SHARD_CLUSTERS (2000) simulated clusters over $SHARDS (2) exporters, and a real
#           Prometheus scraping each scope's /probe through hashmod (docs/scaling.md):
#           $OUT/shards.csv
#   rest-pool  (root) a real 3-member Patroni 4.1.5 cluster with 0, 1 and 3 exporters (this
#           release build) polling every second, interleaved over rounds: the latency of one
#           replica's GET /patroni to the other (Patroni's leader race, 2 s deadline) and the
#           failover time after a primary kill (docs/bench/rest-pool/run.sh, its header):
#           $OUT/rest-pool.csv and the table $OUT/rest-pool.md. EXPORTER_BIN_B and
#           CONDITIONS="0 1 3 1-b 3-b" add another build's rows.
#   cluster-cost  (root) the CPU each member's Patroni and PostgreSQL spend answering the
#           exporter and Prometheus (docs/bench/cluster-cost/run.sh, its header: CONDITIONS,
#           WINDOW_S, EXPORTER_BIN_B, ...): $OUT/cluster-cost.csv and its tables
#
# Environment (defaults): SIZES="1 10 100 1000" INTERVAL=10 CYCLES=6 (poll cycles measured)
#   WRK_CONNS=50 WRK_THREADS=2 WRK_DURATION=10s (seconds) OUT=target/bench
#   EXPORTER, FLEET_SIM: release/... of $CARGO_TARGET_DIR, else of target
#   PORT=19393 (exporter, 127.0.0.1) E2E_WORK DATA_DIR PATRONI_VERSION=4.1.5
#   SIM_WORKERS=1 FLOOR (the floor client; none: skip the floor) PERF=1 PERF_FREQ=999 (real)
#   ETCD_SHARE=0 (percent of the fleet's clusters on etcd: fleet) ETCD_SHARE_B (B's, at once)
#   EXPORTER_B (a second build: fleet compares the two) ROUNDS=2 ENCODE_SCRAPES TOGETHER
#   SETTLE=$INTERVAL (s from ready to a compare window; the floor starts all N first polls at
#   once, and on a slow machine their tail ran into a window of one interval: its mix said so)
#   PLOT_VENV=$E2E_WORK/venv-plot EXPORTER_ARGS (extra flags of the fleet's exporter, e.g.
#   "--no-collector.views --no-collector.probes" to measure what those collectors cost)
# Everything runs on 127.0.0.1/8, every wait is bounded, and only processes started here
# are stopped (by PID).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=../tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"   # the /metrics reader (metric_values)
SIZES="${SIZES:-1 10 100 1000}"
INTERVAL="${INTERVAL:-10}"
CYCLES="${CYCLES:-6}"
WRK_CONNS="${WRK_CONNS:-50}"
WRK_THREADS="${WRK_THREADS:-2}"
WRK_DURATION="${WRK_DURATION:-10s}"
OUT="${OUT:-$ROOT/target/bench}"
EXPORTER="${EXPORTER:-$E2E_TARGET_DIR/release/patroni-raft-exporter}"   # lib.sh's paths.sh
FLEET_SIM="${FLEET_SIM:-$E2E_TARGET_DIR/release/fleet-sim}"
# The floor client: by default the build of benches/floor.rs (cargo bench --bench floor
# --no-run); FLOOR=none measures the exporter alone.
FLOOR="${FLOOR:-}"
PORT="${PORT:-19393}"
# fleet-sim's tokio workers: 2 keeps it answering within the poll timeout at N = 1000 when
# the machine is loaded (with 1, a starved simulator turns into poll timeouts).
SIM_WORKERS="${SIM_WORKERS:-1}"
ETCD_SHARE="${ETCD_SHARE:-0}"
# TOGETHER=1 (the default as root): the floor and both builds of `fleet` with EXPORTER_B are
# measured at the same time, each against a fleet-sim of its own in a network namespace of its
# own, rather than one after the other against one. A shared machine's speed moves by up to a
# quarter from one minute to the next, which moved a round's ratio by +-0.1 when the windows
# took turns; at once, the three see the same machine and the ratio holds to about +-0.02.
if [[ -z ${TOGETHER:-} ]]; then
  TOGETHER=0
  ((EUID == 0)) && command -v ip >/dev/null && TOGETHER=1
fi
# etcd_clusters N [SHARE]: how many of N clusters are on etcd (SHARE %, else $ETCD_SHARE %).
etcd_clusters() { echo $(($1 * ${2:-$ETCD_SHARE} / 100)); }
CLK_TCK="$(getconf CLK_TCK)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)" # absolute: the /metrics reader takes file:// URLs

PIDS=()
NETNS=()   # network namespaces made here (TOGETHER), removed by cleanup
NETNS_PREFIX="bench-$$"
cleanup() {
  # Newest first: the exporter stops before the peers it polls.
  local i pid
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    kill "$pid" 2>/dev/null || true
    timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  done
  PIDS=()
  for ((i = ${#NETNS[@]} - 1; i >= 0; i--)); do ip netns del "${NETNS[i]}" 2>/dev/null || true; done
  NETNS=()
}
trap cleanup EXIT

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds, or fail after SECONDS.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# cpu_ticks PID: utime + stime in clock ticks (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# tree_ticks PID: cpu_ticks of PID and of its children (a postmaster and its backends); a child
# that exits between the listing and the reading counts 0.
tree_ticks() {
  local files
  files=$(ps -o pid= --ppid "$1" | awk '{ printf "/proc/%s/stat\n", $1 }')
  # shellcheck disable=SC2086  # one path per word
  { cat "/proc/$1/stat" $files 2>/dev/null || true; } | awk '{ t += $14 + $15 } END { print t + 0 }'
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

ensure_release() {
  if [[ ! -x $EXPORTER || ! -x $FLEET_SIM ]]; then
    log "building release binaries"
    # Two invocations: in one, cargo would unify features and build the exporter with the
    # test doubles too; the exporter measured must be the one users run.
    cargo build --release --bin patroni-raft-exporter && cargo build --release --features testkit --bin fleet-sim
  fi
}

# The floor client's executable (built with the release profile, as the exporter).
ensure_floor() {
  [[ $FLOOR == none ]] && return 0
  if [[ -z $FLOOR ]]; then
    FLOOR=$(cargo bench --bench floor --no-run --message-format=json 2>/dev/null |
      sed -n 's/.*"executable":"\([^"]*\/floor-[^"]*\)".*/\1/p' | tail -1)
  fi
  [[ -x $FLOOR ]] || { log "no floor client (cargo bench --bench floor --no-run)"; return 1; }
}

# wrk_requests FILE: the number of requests wrk completed.
wrk_requests() { awk '/requests in/ { print $1 }' "$1"; }

# wrk_run URL FILE: wrk with latency distribution into FILE; prints "rps p50_ms p99_ms".
wrk_run() {
  local url=$1 file=$2
  shift 2
  timeout 120 wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$WRK_DURATION" --timeout 10s --latency "$@" "$url" >"$file" 2>&1 || true
  awk '
    function ms(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
      return v
    }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    $1 == "Requests/sec:" { rps = $2 }
    /Non-2xx/ { bad = $NF }
    END { printf "%s %s %s %s\n", rps + 0, p50 + 0, p99 + 0, bad + 0 }' "$file"
}

# encode_stats [FIELD] < log: "p50_ms max_ms count p99_ms" of FIELD in the exporter's debug log
# of each response (metrics::stream): by default send_seconds, the wall-clock time from its first
# frame to its last (assembling, compressing and waiting for the socket and a core);
# encode_cpu_seconds the CPU time of assembling it, gzip_cpu_seconds of compressing it.
# Binaries before the streamed body (metrics::cache) logged one line per rendering, with
# encode_seconds (wall) in place of send_seconds.
encode_stats() {
  { grep -oE "${1:-(send|encode)_seconds}=[0-9.e-]*" || true; } | cut -d= -f2 | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) printf "%.2f %.2f %d %.2f\n", v[int((NR + 1) / 2)] * 1000, v[NR] * 1000, NR, v[int(NR * 0.99 + 0.999)] * 1000; else print "0 0 0 0" }'
}

# percentiles_ms FIELD < log: "p50_ms p99_ms" of FIELD (encode_stats), "- -" when none.
percentiles_ms() {
  encode_stats "$1" | awk '{ if ($3 > 0) print $1, $4; else print "- -" }'
}

# fleet_health: "mean max" of the poll durations, then the sums of polls skipped, poll errors,
# patroni_up, patroni_raft_up and patroni_raft_cluster_quorum, from $EXPORTER_URL (lib.sh's reader)
fleet_health() {
  local name
  fetch_metrics || return 1
  FETCH=0 metric_values patroni_exporter_poll_duration_seconds \
    | awk '{ d = $1 + 0; sum += d; k++; if (d > max) max = d } END { printf "%.4f %.4f", (k ? sum / k : 0), max }'
  for name in patroni_exporter_polls_skipped_total patroni_exporter_poll_errors_total patroni_up patroni_raft_up \
    patroni_raft_cluster_quorum; do
    FETCH=0 metric_values "$name" | awk '{ s += $1 } END { printf " %d", s }'
  done
  echo
}

# ---------------------------------------------------------------------------------------
fleet_one() {
  local n=$1
  local dir="$OUT/fleet-$n"
  rm -rf "$dir"; mkdir -p "$dir"
  local wrk_secs=${WRK_DURATION%s}
  local run_for=$((60 + INTERVAL * (2 * CYCLES + 5) + 3 * wrk_secs + 120))
  log "N=$n: starting fleet-sim ($((n * 6)) listeners, $(etcd_clusters "$n") clusters on etcd, runs at most ${run_for}s)"
  "$FLEET_SIM" --clusters "$n" --etcd-clusters "$(etcd_clusters "$n")" --duration "${run_for}s" --poll-interval "${INTERVAL}s" --workers "$SIM_WORKERS" \
    --config-out "$dir/exporter.yml" --password-file "$dir/raft-password" \
    >"$dir/fleet-sim.out" 2>"$dir/fleet-sim.err" &
  local sim=$!
  PIDS+=("$sim")
  wait_for 120 grep -q '^ready' "$dir/fleet-sim.out" || { log "fleet-sim not ready"; cat "$dir/fleet-sim.err" >&2; return 1; }

  local started=$SECONDS
  # shellcheck disable=SC2086  # EXPORTER_ARGS: extra flags, one word each
  "$EXPORTER" --config.file "$dir/exporter.yml" --web.listen-address "127.0.0.1:$PORT" \
    --log.level 'warn,patroni_raft_exporter::metrics::stream=debug,patroni_raft_exporter::metrics::cache=debug' ${EXPORTER_ARGS:-} \
    2>"$dir/exporter.log" &
  local exporter=$!
  PIDS+=("$exporter")
  wait_for 120 curl -fsS "http://127.0.0.1:$PORT/-/ready" || { log "exporter not ready"; tail "$dir/exporter.log" >&2; return 1; }
  local ready_secs=$((SECONDS - started))
  local start_cpu; start_cpu=$(cpu_ticks "$exporter")
  log "N=$n: exporter ready after ${ready_secs}s (startup CPU $(awk -v t="$start_cpu" -v h="$CLK_TCK" 'BEGIN{printf "%.2f", t/h}') s); settling one interval"
  sleep "$INTERVAL"

  # Steady state: CYCLES poll intervals, with one scrape per interval as a Prometheus would.
  local t0 c0 t1 c1
  t0=$(date +%s.%N); c0=$(cpu_ticks "$exporter")
  local i
  for ((i = 0; i < CYCLES; i++)); do
    sleep "$INTERVAL"
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"
  done
  t1=$(date +%s.%N); c1=$(cpu_ticks "$exporter")
  local steady_log_lines; steady_log_lines=$(wc -l <"$dir/exporter.log")
  local rss hwm hwm_start
  rss=$(rss_kib "$exporter")
  # The peak so far (start-up and polling, before the concurrent scrapers), and the memory
  # map: where the RSS is (heap arenas, stacks, the binary).
  hwm_start=$(hwm_kib "$exporter")
  cp "/proc/$exporter/smaps_rollup" "$dir/smaps_rollup.txt" 2>/dev/null || true

  # Size, poll durations, health of the fleet as the exporter sees it.
  curl -fsS -o "$dir/metrics.txt" -w '%{time_total}\n' "http://127.0.0.1:$PORT/metrics" >"$dir/scrape-time.txt"
  local gz_bytes
  gz_bytes=$(curl -fsS -H 'Accept-Encoding: gzip' "http://127.0.0.1:$PORT/metrics" | wc -c)
  local stats
  stats=$(EXPORTER_URL="file://$dir/metrics.txt" fleet_health)
  local series bytes
  series=$(grep -vc '^#' "$dir/metrics.txt")
  bytes=$(wc -c <"$dir/metrics.txt")

  # Latency under concurrent scrapers: plain, then gzip (as Prometheus asks), with the
  # exporter's CPU over each run: less what polling costs in as long (the steady rate
  # above), per request served, is the CPU per scrape.
  local wrk_plain wrk_gzip w0 w1 w2
  w0=$(cpu_ticks "$exporter")
  wrk_plain=$(wrk_run "http://127.0.0.1:$PORT/metrics" "$dir/wrk-plain.txt")
  w1=$(cpu_ticks "$exporter")
  wrk_gzip=$(wrk_run "http://127.0.0.1:$PORT/metrics" "$dir/wrk-gzip.txt" -H 'Accept-Encoding: gzip')
  w2=$(cpu_ticks "$exporter")
  hwm=$(hwm_kib "$exporter")
  local scrape_ms scrape_gz_ms
  scrape_ms=$(awk -v t="$((w1 - w0))" -v h="$CLK_TCK" -v c="$((c1 - c0))" -v el="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v d="$wrk_secs" -v n="$(wrk_requests "$dir/wrk-plain.txt")" \
    'BEGIN { if (n > 0) printf "%.3f", 1000 * (t / h - d * c / h / el) / n; else print 0 }')
  scrape_gz_ms=$(awk -v t="$((w2 - w1))" -v h="$CLK_TCK" -v c="$((c1 - c0))" -v el="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v d="$wrk_secs" -v n="$(wrk_requests "$dir/wrk-gzip.txt")" \
    'BEGIN { if (n > 0) printf "%.3f", 1000 * (t / h - d * c / h / el) / n; else print 0 }')

  # Times logged per response (per rendering before): while scraped once per interval (steady), and
  # under the concurrent scrapers (load: competing with wrk and gzip for the 2 cores).
  local encode encode_load
  encode=$(head -n "$steady_log_lines" "$dir/exporter.log" | encode_stats)
  encode_load=$(tail -n +"$((steady_log_lines + 1))" "$dir/exporter.log" | encode_stats)
  local encode_cpu encode_cpu_load gzip_cpu_load
  encode_cpu=$(head -n "$steady_log_lines" "$dir/exporter.log" | encode_stats encode_cpu_seconds)
  encode_cpu_load=$(tail -n +"$((steady_log_lines + 1))" "$dir/exporter.log" | encode_stats encode_cpu_seconds)
  gzip_cpu_load=$(tail -n +"$((steady_log_lines + 1))" "$dir/exporter.log" | encode_stats gzip_cpu_seconds)

  # The floor: the exporter stops, the bare client sends the same requests to the same
  # fleet-sim for as many cycles.
  kill "$exporter"
  timeout 10 tail --pid="$exporter" -f /dev/null 2>/dev/null || kill -9 "$exporter" 2>/dev/null || true
  local floor_cpu=0
  if [[ $FLOOR != none ]]; then
    "$FLOOR" --config "$dir/exporter.yml" --duration "$((INTERVAL * (CYCLES + 2) + 5))s" \
      >"$dir/floor.out" 2>"$dir/floor.err" &
    local floor=$!
    PIDS+=("$floor")
    wait_for 60 grep -q '^ready' "$dir/floor.out" || { log "floor not ready"; cat "$dir/floor.err" >&2; return 1; }
    sleep "$INTERVAL"
    local f0 f1 ft0 ft1
    ft0=$(date +%s.%N); f0=$(cpu_ticks "$floor")
    sleep "$((INTERVAL * CYCLES))"
    ft1=$(date +%s.%N); f1=$(cpu_ticks "$floor")
    timeout 60 tail --pid="$floor" -f /dev/null 2>/dev/null || true
    log "N=$n: floor $(tail -1 "$dir/floor.out")"
    floor_cpu=$(awk -v c="$((f1 - f0))" -v h="$CLK_TCK" -v a="$ft0" -v b="$ft1" -v iv="$INTERVAL" 'BEGIN { print c / h / ((b - a) / iv) }')
  fi

  cleanup

  local cpu_s elapsed
  elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
  cpu_s=$(awk -v c="$((c1 - c0))" -v h="$CLK_TCK" 'BEGIN { print c / h }')
  # shellcheck disable=SC2086  # split into the fields it holds
  set -- $stats
  local poll_mean=$1 poll_max=$2 skipped=$3 errors=$4 up=$5 raft_up=$6 quorum=$7
  # shellcheck disable=SC2086  # split into the fields it holds
  set -- $wrk_plain
  local rps=$1 p50=$2 p99=$3 non2xx=$4
  # shellcheck disable=SC2086  # split into the fields it holds
  set -- $wrk_gzip
  local rps_gz=$1 p50_gz=$2 p99_gz=$3
  # shellcheck disable=SC2086  # split into the fields it holds
  set -- $encode
  local enc_p50=$1 enc_max=$2
  # shellcheck disable=SC2086  # split into the fields it holds
  set -- $encode_load
  local enc_load_p50=$1 enc_load_max=$2 renders=$3
  local row
  row=$(awk -v n="$n" -v cpu="$cpu_s" -v el="$elapsed" -v iv="$INTERVAL" -v rss="$rss" -v hwm="$hwm" \
    -v pm="$poll_mean" -v px="$poll_max" -v sk="$skipped" -v er="$errors" -v up="$up" -v ru="$raft_up" -v q="$quorum" \
    -v se="$series" -v by="$bytes" -v gz="$gz_bytes" -v e50="$enc_p50" -v emax="$enc_max" -v el50="$enc_load_p50" -v elmax="$enc_load_max" -v rn="$renders" \
    -v rps="$rps" -v p50="$p50" -v p99="$p99" -v bad="$non2xx" -v rpsg="$rps_gz" -v p50g="$p50_gz" -v p99g="$p99_gz" \
    -v ready="$ready_secs" -v sc="$start_cpu" -v h="$CLK_TCK" \
    -v sms="$scrape_ms" -v sgms="$scrape_gz_ms" -v fl="$floor_cpu" \
    -v ec50="${encode_cpu%% *}" -v ecmax="$(cut -d' ' -f2 <<<"$encode_cpu")" -v ecl50="${encode_cpu_load%% *}" -v gz50="${gzip_cpu_load%% *}" \
    -v hs="$hwm_start" \
    'BEGIN { cycles = el / iv;
      printf "%d,%.3f,%.4f,%.1f,%.1f,%.1f,%.4f,%.4f,%d,%d,%d,%d,%d,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%d,%.1f,%.2f,%.2f,%d,%.1f,%.2f,%.2f,%d,%.2f,%.3f,%.3f,%.4f,%.2f,%.2f,%.2f,%.2f,%.2f,%.1f\n",
        n, cpu, cpu / cycles, 100 * cpu / el, rss / 1024, hwm / 1024, pm, px, sk, er, up, ru, q,
        se, by, gz, e50, emax, el50, elmax, rn, rps, p50, p99, bad, rpsg, p50g, p99g, ready, sc / h,
        sms, sgms, fl, (fl > 0 ? cpu / cycles / fl : 0), ec50, ecmax, ecl50, gz50, hs / 1024 }')
  echo "$row" >>"$OUT/fleet.csv"
  log "N=$n: $row"
}

fleet() {
  ensure_release
  ensure_floor
  ulimit -n "$(ulimit -Hn)"
  log "file descriptor limit $(ulimit -n); CPUs $(nproc)"
  echo "clusters,cpu_seconds,cpu_seconds_per_cycle,cpu_percent_of_one_core,rss_mib,peak_rss_mib,poll_mean_s,poll_max_s,polls_skipped,poll_errors,patroni_up,raft_up,raft_quorum,series,metrics_bytes,metrics_gzip_bytes,encode_p50_ms,encode_max_ms,encode_under_load_p50_ms,encode_under_load_max_ms,renders_under_load,wrk_rps,wrk_p50_ms,wrk_p99_ms,wrk_non2xx,wrk_gzip_rps,wrk_gzip_p50_ms,wrk_gzip_p99_ms,ready_seconds,startup_cpu_seconds,cpu_ms_per_scrape,cpu_ms_per_gzip_scrape,floor_cpu_seconds_per_cycle,exporter_over_floor,encode_cpu_p50_ms,encode_cpu_max_ms,encode_cpu_under_load_p50_ms,gzip_cpu_under_load_p50_ms,peak_rss_before_wrk_mib" >"$OUT/fleet.csv"
  local n
  for n in $SIZES; do
    fleet_one "$n"
  done
  column -s, -t <"$OUT/fleet.csv" >&2 || cat "$OUT/fleet.csv" >&2
}

# ---------------------------------------------------------------------------------------
# Two builds side by side (EXPORTER_B set): per N, $ROUNDS rounds of three windows each, the
# floor and both builds. TOGETHER: the three at once, each against its own fleet-sim (the same
# simulator built three times), so that a change is judged on the same machine at the same
# moment. Else one fleet-sim, and the windows in turn (A then B, B then A in the next round:
# neither always follows the floor), at about the same load of the machine. A window: start the process, settle one interval, then
# $CYCLES intervals measured (CPU ticks from /proc, one /metrics scrape per interval as
# Prometheus would); for an exporter then its RSS, peak RSS, series, poll errors and the CPU of
# assembling $ENCODE_SCRAPES (20) responses one after another (p50). fleet-sim counts the
# requests by path in each window: the exporter's mix and the floor's, per cluster and cycle,
# must be the same (the floor is honest). Rows in $OUT/fleet-compare.csv, then the ratios of
# both builds side by side.

# request_mix FILE: fleet-sim's "requests /a=N /b=M" line of its --stats-out FILE, one
# "path count" a line.
request_mix() { sed -n 's/^requests //p' "$1" | tr ' ' '\n' | sed -n 's/=/ /p'; }

# mix_per_cycle BEFORE AFTER N CYCLES: the requests by path between two request_mix readings,
# per cluster and cycle: "/cluster=1.00 /patroni=3.00 ...".
mix_per_cycle() {
  awk -v n="$3" -v c="$4" 'NR == FNR { a[$1] = $2; next } { d = ($2 - a[$1]) / n / c; printf "%s%s=%.2f", sep, $1, d; sep = " " } END { print "" }' \
    <(echo "$1") <(echo "$2")
}

# compare_window DIR N NAME BINARY ROUND [NETNS]: one window (see above) of the build BINARY (or
# of the floor: NAME floor), inside the network namespace NETNS when given (TOGETHER, where
# DIR's fleet-sim runs); appends a row to $OUT/fleet-compare.csv.
compare_window() {
  local dir=$1 n=$2 name=$3 bin=$4 round=$5 pid started in_ns=()
  [[ -z ${6:-} ]] || in_ns=(ip netns exec "$6")
  started=$SECONDS
  if [[ $name == floor* ]]; then
    "${in_ns[@]}" "$bin" --config "$dir/exporter.yml" --duration "$((INTERVAL * (CYCLES + 3) + 60))s" \
      >"$dir/floor-$round.out" 2>"$dir/floor-$round.err" &
    pid=$!
    PIDS+=("$pid")
    wait_for 60 grep -q '^ready' "$dir/floor-$round.out" || { log "floor not ready"; return 1; }
  else
    # shellcheck disable=SC2086  # EXPORTER_ARGS: extra flags, one word each
    "${in_ns[@]}" "$bin" --config.file "$dir/exporter.yml" --web.listen-address "127.0.0.1:$PORT" \
      --log.level 'warn,patroni_raft_exporter::metrics::stream=debug' ${EXPORTER_ARGS:-} \
      2>"$dir/exporter-$name-$round.log" &
    pid=$!
    PIDS+=("$pid")
    wait_for 120 "${in_ns[@]}" curl -fsS "http://127.0.0.1:$PORT/-/ready" || { log "exporter $name not ready"; return 1; }
  fi
  local ready=$((SECONDS - started))
  sleep "${SETTLE:-$INTERVAL}"
  local t0 c0 t1 c1 m0 m1 i load
  t0=$(date +%s.%N); c0=$(cpu_ticks "$pid"); m0=$(request_mix "$dir/stats")
  for ((i = 0; i < CYCLES; i++)); do
    sleep "$INTERVAL"
    [[ $name == floor* ]] || "${in_ns[@]}" curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"
  done
  t1=$(date +%s.%N); c1=$(cpu_ticks "$pid"); m1=$(request_mix "$dir/stats")
  load=$(cut -d' ' -f1 /proc/loadavg)
  local rss hwm series=- errors=- encode_cpu=- cycles mix
  rss=$(rss_kib "$pid"); hwm=$(hwm_kib "$pid")
  cycles=$(awk -v a="$t0" -v b="$t1" -v iv="$INTERVAL" 'BEGIN { print (b - a) / iv }')
  mix=$(mix_per_cycle "$m0" "$m1" "$n" "$cycles")
  if [[ $name != floor* ]]; then
    "${in_ns[@]}" curl -fsS -o "$dir/metrics-$name-$round.txt" "http://127.0.0.1:$PORT/metrics"
    series=$(grep -vc '^#' "$dir/metrics-$name-$round.txt")
    errors=$(EXPORTER_URL="file://$dir/metrics-$name-$round.txt" fleet_health | awk '{ print $4 }')
    local before; before=$(wc -l <"$dir/exporter-$name-$round.log")
    for ((i = 0; i < ${ENCODE_SCRAPES:-20}; i++)); do "${in_ns[@]}" curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"; done
    encode_cpu=$(tail -n +"$((before + 1))" "$dir/exporter-$name-$round.log" | percentiles_ms encode_cpu_seconds | cut -d' ' -f1)
  fi
  kill "$pid" 2>/dev/null || true
  timeout 30 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  local row
  row=$(awk -v n="$n" -v r="$round" -v name="$name" -v c="$((c1 - c0))" -v h="$CLK_TCK" -v cy="$cycles" \
    -v rss="$rss" -v hwm="$hwm" -v series="$series" -v errors="$errors" -v enc="$encode_cpu" -v ready="$ready" \
    -v load="$load" -v mix="$mix" \
    'BEGIN { printf "%d,%d,%s,%.4f,%.1f,%.1f,%s,%s,%s,%d,%s,%s\n", n, r, name, c / h / cy, rss / 1024, hwm / 1024,
      series, errors, enc, ready, load, mix }')
  echo "$row" >>"$OUT/fleet-compare.csv"
  log "N=$n round $round $name: $row"
}

# start_sim DIR N SECONDS [NETNS] [SHARE]: a fleet-sim of N clusters (SHARE % on etcd, else
# $ETCD_SHARE %) for SECONDS (in NETNS), its exporter.yml and request counts in DIR; returns
# once it is ready.
start_sim() {
  local dir=$1 n=$2 in_ns=()
  [[ -z ${4:-} ]] || in_ns=(ip netns exec "$4")
  mkdir -p "$dir"
  "${in_ns[@]}" "$FLEET_SIM" --clusters "$n" --etcd-clusters "$(etcd_clusters "$n" "${5:-}")" --duration "${3}s" \
    --poll-interval "${INTERVAL}s" --workers "$SIM_WORKERS" --config-out "$dir/exporter.yml" \
    --password-file "$dir/raft-password" --stats-out "$dir/stats" >"$dir/fleet-sim.out" 2>"$dir/fleet-sim.err" &
  PIDS+=("$!")
  wait_for 120 grep -q '^ready' "$dir/fleet-sim.out" || { log "fleet-sim not ready"; cat "$dir/fleet-sim.err" >&2; return 1; }
  wait_for 10 grep -q '^requests' "$dir/stats" || { log "fleet-sim writes no request counts"; return 1; }
}

# fleet_compare N: the rounds of one N (see above).
fleet_compare() {
  local n=$1 rounds=${ROUNDS:-2}
  local dir="$OUT/compare-$n"
  rm -rf "$dir"; mkdir -p "$dir"
  if ((TOGETHER)); then
    fleet_compare_together "$n" "$rounds" "$dir"
    return
  fi
  local run_for=$((rounds * 3 * (INTERVAL * (CYCLES + 2) + 180) + 120))
  log "N=$n: fleet-sim ($((n * 6)) listeners, $(etcd_clusters "$n") clusters on etcd, at most ${run_for}s); $rounds rounds of floor, A, B"
  start_sim "$dir" "$n" "$run_for" || return 1
  local round order
  for ((round = 1; round <= rounds; round++)); do
    order="A B"
    ((round % 2 == 0)) && order="B A"
    compare_window "$dir" "$n" floor "$FLOOR" "$round"
    for build in $order; do
      if [[ $build == A ]]; then
        compare_window "$dir" "$n" A "$EXPORTER" "$round"
      else
        compare_window "$dir" "$n" B "$EXPORTER_B" "$round"
      fi
    done
  done
  cleanup
}

# fleet_compare_together N ROUNDS DIR: each round, the floor and both builds at once, each in a
# network namespace of its own with a fleet-sim of its own (DIR/floor, DIR/A, DIR/B, and
# DIR/floorB with ETCD_SHARE_B): whatever the machine does during a window, it does to all
# of them (TOGETHER above).
fleet_compare_together() {
  local n=$1 rounds=$2 dir=$3 name round
  local run_for=$((rounds * (INTERVAL * (CYCLES + 2) + 180) + 120))
  local -A binary=([floor]=$FLOOR [A]=$EXPORTER [B]=$EXPORTER_B [floorB]=$FLOOR)
  local -A share=([floor]=$ETCD_SHARE [A]=$ETCD_SHARE [B]=${ETCD_SHARE_B:-$ETCD_SHARE} [floorB]=${ETCD_SHARE_B:-})
  local names=(floor A B) b_share=""
  [[ -z ${ETCD_SHARE_B:-} ]] || { names+=(floorB); b_share=", $(etcd_clusters "$n" "$ETCD_SHARE_B") on B's and floorB's"; }
  log "N=$n: ${#names[@]} fleet-sims ($((n * 6)) listeners each, $(etcd_clusters "$n") clusters on etcd$b_share, at most ${run_for}s), one per namespace; $rounds rounds of ${names[*]} at once"
  for name in "${names[@]}"; do
    ip netns add "$NETNS_PREFIX-$name" && NETNS+=("$NETNS_PREFIX-$name")
    ip netns exec "$NETNS_PREFIX-$name" ip link set lo up
    start_sim "$dir/$name" "$n" "$run_for" "$NETNS_PREFIX-$name" "${share[$name]}" || return 1
  done
  local windows failed
  for ((round = 1; round <= rounds; round++)); do
    windows=()
    for name in "${names[@]}"; do
      # A subshell of its own, which stops the processes it started if it is cut short.
      # shellcheck disable=SC2030  # its own list of processes, on purpose
      (PIDS=(); NETNS=(); trap cleanup EXIT; compare_window "$dir/$name" "$n" "$name" "${binary[$name]}" "$round" "$NETNS_PREFIX-$name") &
      windows+=("$!")
    done
    failed=0
    for name in "${windows[@]}"; do wait "$name" || failed=1; done
    ((failed == 0)) || { log "round $round: a window failed"; return 1; }
  done
  cleanup
}

# compare_table: $OUT/fleet-compare.csv as one line per N and round, both builds side by side,
# each over the floor of its round (B over floorB when ETCD_SHARE_B gave it a fleet of its own).
compare_table() {
  awk -F, 'NR == 1 { next }
    { key = $1 "," $2; if (!(key in seen)) { seen[key] = 1; keys[++k] = key }
      cpu[key, $3] = $4; rss[key, $3] = $5; enc[key, $3] = $9; err[key, $3] = $8; mix[key, $3] = $12 }
    END {
      printf "%-6s %-5s %-8s %-14s %-14s %-9s %-9s %-11s %-11s %s\n", "N", "round", "floor_s", "A_s (A/floor)", "B_s (B/floor)", "A_MiB", "B_MiB", "A_enc_ms", "B_enc_ms", "errors A B"
      for (i = 1; i <= k; i++) {
        key = keys[i]; split(key, p, ","); f = cpu[key, "floor"]
        fb = ((key, "floorB") in cpu) ? cpu[key, "floorB"] : f
        printf "%-6s %-5s %-8.4f %-14s %-14s %-9s %-9s %-11s %-11s %s %s\n", p[1], p[2], f,
          sprintf("%.4f (%.2f)", cpu[key, "A"], f > 0 ? cpu[key, "A"] / f : 0),
          sprintf("%.4f (%.2f)", cpu[key, "B"], fb > 0 ? cpu[key, "B"] / fb : 0),
          rss[key, "A"], rss[key, "B"], enc[key, "A"], enc[key, "B"], err[key, "A"], err[key, "B"]
        if ((key, "floorB") in cpu) printf "       B over floorB, %.4f s per cycle on B'\''s fleet\n", fb
        printf "       requests per cluster and cycle: floor %s\n                                           A %s\n                                           B %s\n",
          mix[key, "floor"], mix[key, "A"], mix[key, "B"]
        if ((key, "floorB") in cpu) printf "                                      floorB %s\n", mix[key, "floorB"]
        if (f > 0 && fb > 0) { n = p[1]; rounds[n]++
          base["A"] = f; base["B"] = fb
          for (b = 1; b <= 2; b++) { name = b == 1 ? "A" : "B"
            ratio[n, name, rounds[n]] = cpu[key, name] / base[name]; sum[n, name] += cpu[key, name]
            floors[n, name] += base[name] } }
      }
      # Over the rounds of each N: a round moves with the machine (mostly the floor'\''s
      # window), so judge a change by both builds'\'' spread and their ratio of sums.
      for (n in rounds) for (b = 1; b <= 2; b++) {
        name = b == 1 ? "A" : "B"; lo = hi = ratio[n, name, 1]
        for (r = 2; r <= rounds[n]; r++) { x = ratio[n, name, r]; if (x < lo) lo = x; if (x > hi) hi = x }
        # What the build adds to the floor, per cluster and cycle: the ratio moves with the
        # kernel'\''s cost per request (the floor'\''s), this much less.
        printf "N=%s %s over %d rounds: %.2f-%.2f x the floor, %.2f x over all rounds, %.3f ms of its own per cluster and cycle\n", n, name, rounds[n], lo, hi, sum[n, name] / floors[n, name], 1000 * (sum[n, name] - floors[n, name]) / rounds[n] / n
      }
    }' "$OUT/fleet-compare.csv"
}

fleet_two_builds() {
  [[ -x $EXPORTER_B ]] || { log "EXPORTER_B=$EXPORTER_B is not an executable"; return 1; }
  [[ $FLOOR != none ]] || { log "comparing two builds needs the floor"; return 1; }
  [[ -z ${ETCD_SHARE_B:-} ]] || ((TOGETHER)) || { log "ETCD_SHARE_B needs the windows at once (TOGETHER=1, as root)"; return 1; }
  ensure_release
  ensure_floor
  ulimit -n "$(ulimit -Hn)"
  log "A=$EXPORTER B=$EXPORTER_B; CPUs $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "clusters,round,build,cpu_seconds_per_cycle,rss_mib,peak_rss_mib,series,poll_errors,encode_cpu_p50_ms,ready_seconds,load1,requests_per_cluster_and_cycle" >"$OUT/fleet-compare.csv"
  local n
  for n in $SIZES; do
    fleet_compare "$n"
  done
  compare_table | tee "$OUT/fleet-compare.txt" >&2
}

# ---------------------------------------------------------------------------------------
# real_run DIR "EXPORTER PATRONI POSTMASTER" NAME URL [WRK_ARG...]: one wrk run of `real` on URL
# (raw output DIR/wrk-NAME.txt; URL "-": no requests, a window as long as a wrk run), with the
# CPU seconds that the exporter, Patroni and its Postgres (the postmaster and its children) used
# meanwhile: a row of DIR/cpu-runs.csv. Prints wrk_run's "rps p50_ms p99_ms non2xx".
real_run() {
  local dir=$1 name=$3 url=$4 wrk="0 0 0 0" requests=0 t0 t1 c0 c1 p
  read -ra p <<<"$2"
  shift 4
  t0=$(date +%s.%N); c0="$(cpu_ticks "${p[0]}") $(cpu_ticks "${p[1]}") $(tree_ticks "${p[2]}")"
  if [[ $url == - ]]; then
    sleep "${WRK_DURATION%s}"
  else
    wrk=$(wrk_run "$url" "$dir/wrk-$name.txt" "$@")
    requests=$(wrk_requests "$dir/wrk-$name.txt")
  fi
  t1=$(date +%s.%N); c1="$(cpu_ticks "${p[0]}") $(cpu_ticks "${p[1]}") $(tree_ticks "${p[2]}")"
  awk -v n="$name" -v a="$t0" -v b="$t1" -v r="${requests:-0}" -v w="$wrk" -v c0="$c0" -v c1="$c1" -v h="$CLK_TCK" \
    'BEGIN { split(w, x, " "); split(c0, u, " "); split(c1, v, " ");
      printf "%s,%.2f,%d,%s,%s,%s,%s,%.2f,%.2f,%.2f\n", n, b - a, r, x[1], x[2], x[3], x[4],
        (v[1] - u[1]) / h, (v[2] - u[2]) / h, (v[3] - u[3]) / h }' >>"$dir/cpu-runs.csv"
  echo "$wrk"
}

# real_cpu_table RUNS_CSV: real_run's rows (the idle window first), each with the process that
# served it, that process's CPU seconds less what it used in as long idle, and so its CPU µs per
# request; for Patroni also with its Postgres's.
real_cpu_table() {
  awk -F, -v OFS=, '
    NR == 1 { print $0, "server", "server_cpu_s_less_idle", "server_us_per_request", "with_postgres_us_per_request"; next }
    $1 == "idle" { ie = $8 / $2; ip = $9 / $2; ig = $10 / $2; print $0, "-", "-", "-", "-"; next }
    {
      e = $8 - ie * $2; pa = $9 - ip * $2; pg = $10 - ig * $2
      if ($1 ~ /^patroni/) { srv = "patroni"; net = pa; both = pa + pg } else { srv = "exporter"; net = e; both = e }
      print $0, srv, sprintf("%.2f", net), ($3 > 0 ? sprintf("%.2f", 1e6 * net / $3) : "-"), ($3 > 0 ? sprintf("%.2f", 1e6 * both / $3) : "-")
    }' "$1"
}

# perf_tables DATA PREFIX: from perf.data DATA, PREFIX-symbols.txt (self % by object and
# symbol, >= 0.3 %), PREFIX-objects.txt (self % by object) and PREFIX-syscalls.txt (the
# system calls' share, inclusive, by the user-space function that made them: kernel stacks are
# exact, user-space ones without frame pointers are not).
perf_tables() {
  local tidy='/^#? *$/d; /^# (To display|\(Tip)/d; s/ +$//; s/\.{24,}/......................../'
  perf report -i "$1" --stdio --no-children --sort dso,sym -g none --percent-limit 0.3 2>/dev/null \
    | sed -E "$tidy" >"$2-symbols.txt" || true
  perf report -i "$1" --stdio --no-children --sort dso -g none 2>/dev/null | sed -E "$tidy" >"$2-objects.txt" || true
  perf report -i "$1" --stdio --children --sort sym -g caller,0.5,callee,function,percent \
    --symbol-filter=entry_SYSCALL_64_after_hwframe 2>/dev/null \
    | awk '/^ +[0-9.]+%/ { n++ } n <= 1' | sed -E "$tidy" >"$2-syscalls.txt" || true
}

# real_profile DIR "EXPORTER PATRONI POSTMASTER": when perf can sample (PERF=0: never), one more
# plain wrk run on the exporter (row exporter-perf of cpu-runs.csv, apart from the measured one:
# sampling costs CPU too) under `perf record -e cpu-clock -g` (a software clock: a VM may count no
# hardware events); the top of `perf report` by symbol and by object in DIR/perf-exporter-*.txt.
real_profile() {
  local dir=$1 data="$1/perf-exporter.data" perf_pid
  [[ ${PERF:-1} != 0 ]] && command -v perf >/dev/null || return 0
  if ! perf record -e cpu-clock -o "$dir/perf-check.data" -- true >"$dir/perf-check.log" 2>&1; then
    log "perf cannot sample here (no profile): $(tail -1 "$dir/perf-check.log")"
    return 0
  fi
  rm -f "$dir/perf-check.data"
  # not in PIDS: it ends by itself with the exporter, and is stopped here (SIGINT writes the data)
  perf record -e cpu-clock -F "${PERF_FREQ:-999}" -g -p "${2%% *}" -o "$data" >"$dir/perf-record.log" 2>&1 &
  perf_pid=$!
  sleep 1
  real_run "$dir" "$2" exporter-perf "http://127.0.0.1:$PORT/metrics" >/dev/null
  kill -INT "$perf_pid" 2>/dev/null || true
  timeout 60 tail --pid="$perf_pid" -f /dev/null 2>/dev/null || true
  perf_tables "$data" "$dir/perf-exporter"
  log "perf: $(grep -c % "$dir/perf-exporter-symbols.txt") symbols >= 0.3 % in $dir/perf-exporter-symbols.txt"
}

real() {
  ensure_release
  export E2E_WORK="${E2E_WORK:-$ROOT/.work}"
  export DATA_DIR="${DATA_DIR:-$E2E_WORK/cluster-bench}"
  # shellcheck source=../tests/e2e/paths.sh
  source "$ROOT/tests/e2e/paths.sh"   # E2E_CLUSTER_LOCK
  export PATRONI_VERSION="${PATRONI_VERSION:-4.1.5}"
  local cluster="$ROOT/tests/e2e/cluster.sh" dir="$OUT/real"
  rm -rf "$dir"; mkdir -p "$dir"

  log "building the raft_query benchmark"
  timeout 900 cargo bench --bench raft_query --no-run >"$dir/raft-bench-build.log" 2>&1
  exec 9>"$E2E_CLUSTER_LOCK"
  log "waiting for the real-cluster lock"
  timeout 1800 flock 9 || { log "lock not obtained"; return 1; }
  local deadline=$((SECONDS + 1800))
  while ss -ltn | grep -q '127.0.0.11:8008'; do
    ((SECONDS < deadline)) || { log "127.0.0.11:8008 stays busy"; return 1; }
    sleep 5
  done
  trap 'cleanup; "$cluster" down --fast >/dev/null 2>&1 || true; flock -u 9' EXIT
  "$cluster" up >"$dir/cluster-up.log" 2>&1 || { tail -30 "$dir/cluster-up.log" >&2; return 1; }
  eval "$("$cluster" env)"
  local password_file="$dir/raft-password"
  (umask 077; printf '%s\n' "$RAFT_PASS" >"$password_file")

  local urls=() url
  IFS=, read -ra urls <<<"$REST_URLS"
  local url_flags=()
  for url in "${urls[@]}"; do url_flags+=(--patroni.url "$url"); done
  "$EXPORTER" "${url_flags[@]}" --raft.password-file "$password_file" \
    --poll.interval "${INTERVAL}s" --web.listen-address "127.0.0.1:$PORT" --log.level warn \
    2>"$dir/exporter.log" &
  local exporter=$!
  # shellcheck disable=SC2031  # only the windows of fleet_compare_together change a copy of it
  PIDS+=("$exporter")
  wait_for 60 curl -fsS "http://127.0.0.1:$PORT/-/ready" || { log "exporter not ready"; return 1; }
  sleep "$INTERVAL"
  curl -fsS "http://127.0.0.1:$PORT/metrics" >"$dir/exporter-metrics.txt"
  curl -fsS "${MEMBER0_REST%/}/metrics" >"$dir/patroni-metrics.txt"
  # The processes that serve: the exporter; member 0's Patroni, whose REST API answers /metrics
  # in threads of its one Python process; and member 0's Postgres (postmaster and children), as
  # Patroni's /metrics runs a query on it for each request.
  local member patroni postmaster
  member=$("$cluster" pids 2>/dev/null | awk -v m="$MEMBER0_NAME" '$1 == m')
  patroni=$(sed -n 's/.* patroni=\([0-9][0-9]*\).*/\1/p' <<<"$member")
  postmaster=$(sed -n 's/.* postmaster=\([0-9][0-9]*\).*/\1/p' <<<"$member")
  [[ -n $patroni && -n $postmaster ]] || { log "no PIDs of $MEMBER0_NAME: $member"; return 1; }
  local pids="$exporter $patroni $postmaster"
  echo "run,seconds,requests,rps,p50_ms,p99_ms,non2xx,exporter_cpu_s,patroni_cpu_s,postgres_cpu_s" >"$dir/cpu-runs.csv"
  # first as long with no requests: what each uses meanwhile (polls, Patroni's loop and Raft,
  # WAL senders) is subtracted from the runs below
  real_run "$dir" "$pids" idle - >/dev/null
  local exporter_wrk exporter_gzip_wrk patroni_wrk rss
  exporter_wrk=$(real_run "$dir" "$pids" exporter "http://127.0.0.1:$PORT/metrics")
  # as Prometheus scrapes: it always asks for gzip (Patroni's server answers plain whatever asked)
  exporter_gzip_wrk=$(real_run "$dir" "$pids" exporter-gzip "http://127.0.0.1:$PORT/metrics" -H 'Accept-Encoding: gzip')
  patroni_wrk=$(real_run "$dir" "$pids" patroni "${MEMBER0_REST%/}/metrics")
  rss=$(rss_kib "$exporter")
  log "exporter /metrics: $exporter_wrk (rps p50 p99 non2xx); with gzip: $exporter_gzip_wrk; patroni /metrics: $patroni_wrk; exporter RSS ${rss} KiB"
  real_profile "$dir" "$pids"
  real_cpu_table "$dir/cpu-runs.csv" >"$OUT/real-cpu.csv"
  column -s, -t <"$OUT/real-cpu.csv" >&2 || cat "$OUT/real-cpu.csv" >&2
  # CPU per request of each server, and Patroni's ÷ the exporter's: how many requests the
  # exporter serves with the CPU Patroni spends on one, whoever else uses the cores
  local per_request
  per_request=$(awk -F, '$1 == "exporter" { e = $13 } $1 == "exporter-gzip" { g = $13 } $1 == "patroni" { p = $13; q = $14 }
    function ratio(a, b) { return b > 0 ? sprintf("%.1f", a / b) : "-" }
    END { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", e, g, p, q, ratio(p, e), ratio(p, g), ratio(q, e), ratio(q, g) }' "$OUT/real-cpu.csv")
  log "CPU µs per request: exporter http, gzip, Patroni, Patroni + Postgres; Patroni ÷ exporter http, gzip, with Postgres http, gzip: $per_request"

  log "Raft status query: native client (cargo bench --bench raft_query)"
  RAFT_NODE="$MEMBER0_RAFT" RAFT_PASSWORD_FILE="$password_file" ITERATIONS=500 \
    timeout 900 cargo bench --bench raft_query 2>"$dir/raft-bench.err" | tee "$dir/raft-bench.txt" >&2
  local admin=("$VENV/bin/syncobj_admin" -conn "$MEMBER0_RAFT" -pass "$RAFT_PASS" -status)
  if command -v hyperfine >/dev/null; then
    timeout 600 hyperfine -N --warmup 3 --runs 30 --export-json "$dir/syncobj_admin.json" \
      "${admin[*]}" >"$dir/syncobj_admin.txt" 2>&1 || true
    cat "$dir/syncobj_admin.txt" >&2
  else
    local t0 t1 k
    t0=$(date +%s.%N)
    for ((k = 0; k < 30; k++)); do timeout 20 "${admin[@]}" >/dev/null; done
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "syncobj_admin -status: mean %.1f ms over 30 runs (timed loop)\n", (b - a) * 1000 / 30 }' | tee "$dir/syncobj_admin.txt" >&2
  fi
  printf 'exporter_rps,exporter_p50_ms,exporter_p99_ms,exporter_non2xx,patroni_rps,patroni_p50_ms,patroni_p99_ms,patroni_non2xx,exporter_rss_kib,exporter_gzip_rps,exporter_gzip_p50_ms,exporter_gzip_p99_ms,exporter_gzip_non2xx,exporter_cpu_us_per_request,exporter_gzip_cpu_us_per_request,patroni_cpu_us_per_request,patroni_postgres_cpu_us_per_request,cpu_ratio_http,cpu_ratio_gzip,cpu_ratio_http_with_postgres,cpu_ratio_gzip_with_postgres\n%s,%s,%s,%s,%s\n' \
    "$(tr ' ' , <<<"$exporter_wrk")" "$(tr ' ' , <<<"$patroni_wrk")" "$rss" "$(tr ' ' , <<<"$exporter_gzip_wrk")" "$per_request" >"$OUT/real.csv"
  cat "$OUT/real.csv" >&2
  cleanup
  "$cluster" down >"$dir/cluster-down.log" 2>&1 || "$cluster" down --fast >/dev/null 2>&1 || true
  flock -u 9
  trap cleanup EXIT
}

# ---------------------------------------------------------------------------------------
# handshakes FILE: "full resumed" from fleet-sim's --stats-out file.
handshakes() {
  sed -n 's/^full_handshakes=\([0-9]*\) resumed_handshakes=\([0-9]*\)$/\1 \2/p' "$1"
}

# tls_one N MODE: one line of $OUT/tls.csv. MODE is floor, plain, tls, tls-noresume or
# floor-tls: a fleet-sim of N clusters (https unless plain or floor), then the exporter or the
# floor against it; after one settling interval, CPU and handshakes over $CYCLES intervals.
tls_one() {
  local n=$1 mode=$2
  local dir="$OUT/tls-$n-$mode"
  rm -rf "$dir"; mkdir -p "$dir"
  local sim_args=() run_for=$((120 + INTERVAL * (CYCLES + 3)))
  case $mode in
    tls | floor-tls) sim_args=(--tls-ca-out "$dir/ca.pem") ;;
    tls-noresume) sim_args=(--tls-ca-out "$dir/ca.pem" --tls-no-resumption) ;;
  esac
  "$FLEET_SIM" --clusters "$n" --duration "${run_for}s" --poll-interval "${INTERVAL}s" --workers "$SIM_WORKERS" \
    --config-out "$dir/exporter.yml" --password-file "$dir/raft-password" --stats-out "$dir/handshakes" \
    "${sim_args[@]}" >"$dir/fleet-sim.out" 2>"$dir/fleet-sim.err" &
  PIDS+=("$!")
  wait_for 120 grep -q '^ready' "$dir/fleet-sim.out" || { log "fleet-sim not ready"; cat "$dir/fleet-sim.err" >&2; return 1; }
  local started=$SECONDS pid
  case $mode in
    floor*)
      "$FLOOR" --config "$dir/exporter.yml" --duration "$((INTERVAL * (CYCLES + 2) + 5))s" \
        >"$dir/floor.out" 2>"$dir/floor.err" &
      pid=$!
      PIDS+=("$pid")
      wait_for 60 grep -q '^ready' "$dir/floor.out" || { log "floor not ready"; cat "$dir/floor.err" >&2; return 1; }
      ;;
    *)
      "$EXPORTER" --config.file "$dir/exporter.yml" --web.listen-address "127.0.0.1:$PORT" \
        --log.level 'warn,patroni_raft_exporter::metrics::stream=debug' 2>"$dir/exporter.log" &
      pid=$!
      PIDS+=("$pid")
      wait_for 120 curl -fsS "http://127.0.0.1:$PORT/-/ready" || { log "exporter not ready"; tail "$dir/exporter.log" >&2; return 1; }
      ;;
  esac
  local ready_secs=$((SECONDS - started))
  sleep "$INTERVAL"
  local t0 c0 h0 t1 c1 h1 i
  t0=$(date +%s.%N); c0=$(cpu_ticks "$pid"); h0=$(handshakes "$dir/handshakes")
  for ((i = 0; i < CYCLES; i++)); do
    sleep "$INTERVAL"
    [[ $mode == floor* ]] || curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"
  done
  t1=$(date +%s.%N); c1=$(cpu_ticks "$pid"); h1=$(handshakes "$dir/handshakes")
  local rss hwm health="0 0 0 0 0 0 0" series=- encode="- -" encode_cpu="- -"
  rss=$(rss_kib "$pid"); hwm=$(hwm_kib "$pid")
  if [[ $mode != floor* ]]; then
    curl -fsS -o "$dir/metrics.txt" "http://127.0.0.1:$PORT/metrics"
    health=$(EXPORTER_URL="file://$dir/metrics.txt" fleet_health)
    series=$(grep -vc '^#' "$dir/metrics.txt")
    # encode times: $ENCODE_SCRAPES scrapes one after another, after the CPU window (a real
    # Prometheus scrapes once per interval: these would inflate the CPU per cycle)
    local before; before=$(wc -l <"$dir/exporter.log")
    for ((i = 0; i < ${ENCODE_SCRAPES:-100}; i++)); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"; done
    encode=$(tail -n +"$((before + 1))" "$dir/exporter.log" | percentiles_ms send_seconds)
    encode_cpu=$(tail -n +"$((before + 1))" "$dir/exporter.log" | percentiles_ms encode_cpu_seconds)
  fi
  cleanup
  local row
  # shellcheck disable=SC2086  # $h0 $h1 $health: split into the fields they hold
  row=$(awk -v n="$n" -v mode="$mode" -v c="$((c1 - c0))" -v h="$CLK_TCK" -v a="$t0" -v b="$t1" -v iv="$INTERVAL" \
    -v rss="$rss" -v hwm="$hwm" -v ready="$ready_secs" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
    -v hs="$h0 $h1" -v health="$health" -v series="$series" -v encode="$encode $encode_cpu" \
    'BEGIN { split(hs, k, " "); split(health, f, " "); split(encode, e, " "); cycles = (b - a) / iv;
      per = (series == "-" ? "-" : sprintf("%.0f", series / n));
      printf "%d,%s,%.4f,%.1f,%.1f,%.1f,%.1f,%d,%d,%d,%d,%.2f,%s,%s,%s,%s,%s\n", n, mode, c / h / cycles, rss / 1024, hwm / 1024,
        (k[3] - k[1]) / cycles, (k[4] - k[2]) / cycles, f[4], f[5], f[6], ready, load, per, e[1], e[2], e[3], e[4] }')
  echo "$row" >>"$OUT/tls.csv"
  log "N=$n $mode: $row"
}

tls() {
  ensure_release
  ensure_floor
  ulimit -n "$(ulimit -Hn)"
  log "file descriptor limit $(ulimit -n); CPUs $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "clusters,mode,cpu_seconds_per_cycle,rss_mib,peak_rss_mib,full_handshakes_per_cycle,resumed_handshakes_per_cycle,poll_errors,patroni_up,raft_up,ready_seconds,load1,series_per_cluster,send_p50_ms,send_p99_ms,encode_cpu_p50_ms,encode_cpu_p99_ms" >"$OUT/tls.csv"
  local n mode
  for n in $SIZES; do
    for mode in ${TLS_MODES:-floor plain tls tls-noresume floor-tls}; do
      tls_one "$n" "$mode"
    done
  done
  column -s, -t <"$OUT/tls.csv" >&2 || cat "$OUT/tls.csv" >&2
  collectors
}

# collectors: the series of one simulated 3-member cluster with every collector, then with
# each one switched off (--no-collector.NAME): $OUT/collectors.csv.
collectors() {
  local dir="$OUT/collectors" off all=""
  rm -rf "$dir"; mkdir -p "$dir"
  "$FLEET_SIM" --clusters 1 --duration "$((60 + 6 * 8))s" --poll-interval 1s --workers "$SIM_WORKERS" \
    --config-out "$dir/exporter.yml" --password-file "$dir/raft-password" >"$dir/fleet-sim.out" 2>"$dir/fleet-sim.err" &
  PIDS+=("$!")
  wait_for 60 grep -q '^ready' "$dir/fleet-sim.out" || { log "fleet-sim not ready"; return 1; }
  echo "collectors_off,series,series_less_than_all" >"$OUT/collectors.csv"
  for off in none history config views probes failsafe; do
    local flags=() pid n
    [[ $off == none ]] || flags=("--no-collector.$off")
    "$EXPORTER" --config.file "$dir/exporter.yml" --web.listen-address "127.0.0.1:$PORT" --poll.interval 1s \
      --log.level warn "${flags[@]}" 2>"$dir/exporter-$off.log" &
    pid=$!
    PIDS+=("$pid")
    wait_for 30 curl -fsS "http://127.0.0.1:$PORT/-/ready" || { log "exporter not ready"; return 1; }
    sleep 3.5 # a few polls: the rotating requests (/config, probes) have come round every member
    curl -fsS -o "$dir/metrics-$off.txt" "http://127.0.0.1:$PORT/metrics"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    n=$(grep -vc '^#' "$dir/metrics-$off.txt")
    [[ $off == none ]] && all=$n
    echo "$off,$n,$((all - n))" >>"$OUT/collectors.csv"
  done
  cleanup
  column -s, -t <"$OUT/collectors.csv" >&2 || cat "$OUT/collectors.csv" >&2
}

# ---------------------------------------------------------------------------------------
# shards: docs/scaling.md's recipe 2, measured. fleet-sim with $SHARD_CLUSTERS clusters, split by
# scripts/shard-config.py into $SHARDS exporter configs, one exporter per shard, and a real
# Prometheus scraping every scope's /probe with the hashmod relabeling of docs/scaling.md (plus a
# `shard` label kept for the checks). After $SHARD_SCRAPES scrape intervals: every scope up, from
# the exporter of its shard (another exporter answers 404: up 0); each exporter's CPU per poll
# cycle and RSS; the scrape durations. Results in $OUT/shards.csv and $OUT/shards/.
shards() {
  ensure_release
  ulimit -n "$(ulimit -Hn)"
  local n=${SHARD_CLUSTERS:-2000} m=${SHARDS:-2} scrapes=${SHARD_SCRAPES:-4} dir="$OUT/shards"
  local prom_port=$((PORT + 90)) run_for=$((300 + INTERVAL * (CYCLES + scrapes + 4)))
  rm -rf "$dir"; mkdir -p "$dir/sd"
  log "shards: fleet-sim with $n clusters ($((n * 6)) listeners), $m exporters"
  "$FLEET_SIM" --clusters "$n" --duration "${run_for}s" --poll-interval "${INTERVAL}s" \
    --config-out "$dir/fleet.yml" --password-file "$dir/raft-password" \
    >"$dir/fleet-sim.out" 2>"$dir/fleet-sim.err" &
  PIDS+=("$!")
  wait_for 300 grep -q '^ready' "$dir/fleet-sim.out" || { log "fleet-sim not ready"; cat "$dir/fleet-sim.err" >&2; return 1; }
  python3 "$ROOT/scripts/shard-config.py" "$dir/fleet.yml" "$m" "$dir/sd" >"$dir/shard-config.txt"
  local k relabel="" exporters=()
  for ((k = 0; k < m; k++)); do
    "$EXPORTER" --config.file "$dir/sd/exporter-$k.yml" --web.listen-address "127.0.0.1:$((PORT + 1 + k))" \
      --log.level warn 2>"$dir/exporter-$k.log" &
    exporters+=("$!"); PIDS+=("$!")
    relabel+="      - source_labels: [__tmp_shard]
        regex: '$k'
        target_label: __address__
        replacement: 127.0.0.1:$((PORT + 1 + k))
"
  done
  for ((k = 0; k < m; k++)); do
    wait_for 300 curl -fsS "http://127.0.0.1:$((PORT + 1 + k))/-/ready" || { log "exporter $k not ready"; return 1; }
  done
  {
    echo "global:"
    echo "  scrape_interval: ${INTERVAL}s"
    echo "  scrape_timeout: ${INTERVAL}s"
    echo "scrape_configs:"
    echo "  - job_name: patroni-cluster"
    echo "    metrics_path: /probe"
    echo "    file_sd_configs:"
    echo "      - files: ['$dir/sd/targets.json']"
    echo "    relabel_configs:"
    echo "      - source_labels: [__address__]"
    echo "        target_label: __param_scope"
    echo "      - source_labels: [__address__]"
    echo "        target_label: instance"
    echo "      - source_labels: [__address__]"
    echo "        modulus: $m"
    echo "        action: hashmod"
    echo "        target_label: __tmp_shard"
    echo "      # kept as a label for the checks (docs/scaling.md does not need it)"
    echo "      - source_labels: [__tmp_shard]"
    echo "        target_label: shard"
    printf '%s' "$relabel"
    echo "  - job_name: prometheus"
    echo "    static_configs:"
    echo "      - targets: ['127.0.0.1:$prom_port']"
  } >"$dir/prometheus.yml"
  promtool check config "$dir/prometheus.yml" >"$dir/promtool.txt" 2>&1 || { cat "$dir/promtool.txt" >&2; return 1; }
  prometheus --config.file "$dir/prometheus.yml" --storage.tsdb.path "$dir/prometheus-data" \
    --web.listen-address "127.0.0.1:$prom_port" >"$dir/prometheus.log" 2>&1 &
  local prom=$!
  PIDS+=("$prom")
  local api="http://127.0.0.1:$prom_port/api/v1/query"
  wait_for 120 curl -fsS "http://127.0.0.1:$prom_port/-/ready" || { log "prometheus not ready"; return 1; }
  log "shards: Prometheus scrapes $n /probe targets every ${INTERVAL}s; waiting $scrapes intervals"
  sleep $((INTERVAL * scrapes))

  local c0=() c1=() t0 t1 prom_c0 prom_c1
  t0=$(date +%s.%N); prom_c0=$(cpu_ticks "$prom")
  for ((k = 0; k < m; k++)); do c0+=("$(cpu_ticks "${exporters[k]}")"); done
  sleep $((INTERVAL * CYCLES))
  t1=$(date +%s.%N); prom_c1=$(cpu_ticks "$prom")
  for ((k = 0; k < m; k++)); do c1+=("$(cpu_ticks "${exporters[k]}")"); done

  local up_total up_ok down scrape_p50 scrape_p99 series per_shard
  up_total=$(prom_query "$api" 'count(up{job="patroni-cluster"})')
  up_ok=$(prom_query "$api" 'count(up{job="patroni-cluster"} == 1)')
  down=$(prom_query "$api" 'count(up{job="patroni-cluster"} == 0) or vector(0)')
  scrape_p50=$(prom_query "$api" 'quantile(0.5, scrape_duration_seconds{job="patroni-cluster"})')
  scrape_p99=$(prom_query "$api" 'quantile(0.99, scrape_duration_seconds{job="patroni-cluster"})')
  series=$(prom_query "$api" 'prometheus_tsdb_head_series')
  per_shard=$(curl -fsS -m 20 "$api" --data-urlencode 'query=count by (shard) (patroni_up == 1)' \
    | jq -r '[.data.result[] | "\(.metric.shard)=\(.value[1])"] | sort | join(" ")')
  local row="$n,$m,$up_total,$up_ok,$down,$per_shard,$scrape_p50,$scrape_p99,$series"
  for ((k = 0; k < m; k++)); do
    row+=",$(awk -v a="${c0[k]}" -v b="${c1[k]}" -v h="$CLK_TCK" -v c="$CYCLES" 'BEGIN { printf "%.2f", (b - a) / h / c }')"
    row+=",$(awk -v r="$(rss_kib "${exporters[k]}")" 'BEGIN { printf "%.0f", r / 1024 }')"
  done
  row+=",$(awk -v a="$prom_c0" -v b="$prom_c1" -v h="$CLK_TCK" -v c="$CYCLES" 'BEGIN { printf "%.2f", (b - a) / h / c }')"
  row+=",$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }'),$(uptime | sed 's/.*load average: //; s/,//g')"
  {
    printf 'clusters,shards,targets,targets_up,targets_down,patroni_up_by_shard,scrape_p50_s,scrape_p99_s,prometheus_series'
    for ((k = 0; k < m; k++)); do printf ',exporter%d_cpu_s_per_cycle,exporter%d_rss_mib' "$k" "$k"; done
    printf ',prometheus_cpu_s_per_cycle,measured_s,load_1_5_15\n%s\n' "$row"
  } >"$OUT/shards.csv"
  cat "$dir/shard-config.txt" >&2
  column -s, -t <"$OUT/shards.csv" >&2 || cat "$OUT/shards.csv" >&2
  cleanup
  [[ $up_total == "$n" && $up_ok == "$n" ]] || { log "shards: $up_ok of $up_total targets up, want $n"; return 1; }
}

# prom_query API PROMQL: the first sample's value, or "none".
prom_query() { curl -fsS -m 20 "$1" --data-urlencode "query=$2" | jq -r '.data.result[0].value[1] // "none"'; }

# ---------------------------------------------------------------------------------------
plot() {
  local venv="${PLOT_VENV:-${E2E_WORK:-$ROOT/.work}/venv-plot}"
  if [[ ! -x $venv/bin/python ]]; then
    log "creating $venv with matplotlib"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'matplotlib>=3.7,<4'
  fi
  "$venv/bin/python" "$ROOT/scripts/plot-bench.py" "$OUT/fleet.csv" "$OUT/fleet.png"
}

# rest-pool / cluster-cost: the real-cluster measurements of docs/bench/, on the release build
# ensure_exporter: the release exporter only (the real-cluster modes need no fleet-sim)
ensure_exporter() {
  [[ -x $EXPORTER ]] || cargo build --release --bin patroni-raft-exporter
}
rest_pool() {
  ensure_exporter
  EXPORTER_BIN=$EXPORTER OUT="$OUT/rest-pool.csv" "$ROOT/docs/bench/rest-pool/run.sh" "${PATRONI_VERSION:-4.1.5}" \
    | tee "$OUT/rest-pool.md"
}
cluster_cost() {
  ensure_exporter
  EXPORTER_BIN=$EXPORTER OUT="$OUT/cluster-cost.csv" "$ROOT/docs/bench/cluster-cost/run.sh" "$@" \
    | tee "$OUT/cluster-cost.md"
}

case "${1:-all}" in
  fleet) if [[ -n ${EXPORTER_B:-} ]]; then fleet_two_builds; else fleet; fi ;;
  rest-pool) rest_pool ;;
  cluster-cost) shift; cluster_cost "$@" ;;
  real) real ;;
  plot) plot ;;
  shards) shards ;;
  tls) tls ;;
  collectors) ensure_release; collectors ;;
  all) fleet; real; plot ;;
  *) sed -n '2,73p' "$0" >&2; exit 2 ;;
esac
