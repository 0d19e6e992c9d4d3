#!/usr/bin/env bash
# soak.sh - an hour of churn against one exporter: flat memory, every series kept, no false
# page (issue #31, part 1). Not in CI: `make soak` (SOAK_MINUTES=60) or
# `SOAK_MINUTES=15 make soak`; `scripts/soak.sh 3.3.8 4.1.5` runs both versions at once, each in
# a network namespace of its own (the tests/e2e/lib.sh runner). Root only.
#
# Set-up, per version: a real 3-member Patroni + Raft cluster (tests/e2e/cluster.sh, synchronous
# mode), SOAK_SIM_CLUSTERS (10) simulated clusters (fleet-sim, 3 members + 3 Raft nodes each),
# ONE exporter (EXPORTER_BIN, default the debug build) with every cluster in its --config.file
# (poll interval 5 s, timeout 2 s: the defaults) and its endpoint on TLS (--web.config.file, a
# CA of the run's own), and a real Prometheus scraping it over TLS every 5 s and evaluating the
# shipped rules (alerts/*.rules.yml) unchanged.
#
# The schedule (times of a 60-minute run; every time scales with SOAK_MINUTES, holds too but
# never below the floor in brackets):
#   0-3 min    warm-up; window A (the 15 min after it) is quiet
#   18.5 min   quorum loss: the Raft port cut between the three members with nftables (REST,
#              replication and the exporter's own Raft queries stay open); the exporter
#              restarted 90 s [40 s] into it; healed 180 s [75 s] after the cut
#   23 min     a replica killed (`cluster.sh kill`: SIGKILL Patroni, immediate Postgres stop),
#              started again 180 s [45 s] later
#   33.5 min   a switchover (patronictl) to a streaming sync standby (Patroni refuses another in
#              synchronous mode), 10 min after the heal (PatroniLeaderChanged
#              looks back 10 min, so that its firing is the switchover's own)
#   35 min     a replica's REST frozen: nftables drops every packet to its REST port (its Patroni,
#              Raft node and Postgres run on: a hung API, not a dead member: requests time out,
#              nothing is refused), for 180 s [45 s]
#   39 min     a simulated cluster removed from --config.file + SIGHUP
#   40 min     a simulated cluster added (a second fleet-sim) + SIGHUP
#   41 min     the exporter's web certificate rotated (new files + SIGHUP; the new serial must be
#              served)
# The script runs the events in turn, each after the previous one has recovered: in a short run
# an event starts late rather than overlapping the one before.
#   45-60 min  window B, quiet
# Window A = [W, W+L], B = [D-L, D] with D the duration, W = D/20, L = D/4 (3 and 15 min of an
# hour). Every 5 s a sampler writes $RUN_DIR/soak.csv from the exporter's /metrics over TLS
# (time, series, poll errors, slowest poll, and its own RSS, open fds and CPU seconds: the
# process_* families) and its threads (/proc).
#
# scripts/soak-check.py then checks, and the run fails on any of: RSS or fds (mean of window
# B) off by more than 5 % from window A; a panic, or an exporter process other than the two
# scheduled, or a failed Prometheus scrape outside the restart; an alert (Prometheus' ALERTS)
# no scheduled event explains, or an expected one that did not fire; a counter that went down
# in Prometheus other than at the restart; a removed cluster's series still there one poll
# after the SIGHUP; a healthy (simulated) cluster losing a series at a scrape. It prints the
# event -> alerts table and draws $RUN_DIR/soak.png (matplotlib, venv $E2E_WORK/venv-plot).
#
# Environment: SOAK_MINUTES (60), SOAK_SIM_CLUSTERS (10), EXPORTER_BIN, PLOT_VENV.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e" && pwd)"
# shellcheck source=../tests/e2e/lib.sh
source "$E2E_DIR/lib.sh"

SOAK_MINUTES="${SOAK_MINUTES:-60}"
SIMS="${SOAK_SIM_CLUSTERS:-10}"
export SOAK_MINUTES SOAK_SIM_CLUSTERS="$SIMS"
FLEET_SIM="${FLEET_SIM:-$E2E_TARGET_DIR/debug/fleet-sim}"
PLOT_VENV="${PLOT_VENV:-$E2E_WORK/venv-plot}"
export FLEET_SIM PLOT_VENV

# outside the namespace (it has no route out): the plotting venv, the binaries
if [[ ${E2E_IN_NETNS:-} != 1 ]]; then
  if ! [[ $SOAK_MINUTES =~ ^[0-9]+$ ]] || ((SOAK_MINUTES < 10)); then
    echo "SOAK_MINUTES must be a whole number >= 10 (got $SOAK_MINUTES)" >&2; exit 2
  fi
  [[ -x $FLEET_SIM ]] || { echo "no fleet-sim at $FLEET_SIM (cargo build --features testkit --bin fleet-sim)" >&2; exit 2; }
  # under a lock: each version's run (e2e_scenario runs this script once per version) and a
  # second `make soak` find the venv made, never half-made (install-deps.sh does the same)
  # shellcheck disable=SC2317  # e2e_locked runs it
  plot_venv() {
    if [[ ! -x $PLOT_VENV/bin/python ]] || ! "$PLOT_VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
      python3 -m venv --clear "$PLOT_VENV"
      "$PLOT_VENV/bin/pip" install --quiet 'matplotlib>=3.7,<4'
    fi
  }
  e2e_locked venv-plot plot_venv
fi

E2E_TOOLS="nft prometheus openssl" e2e_scenario soak "$@"

# ------------------------------------------------------------------ in the namespace
export DATA_DIR="$E2E_WORK/cluster-soak-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"
GID_BASE=64100
export MEMBER_GID_BASE=$GID_BASE
FW=soak_raft                    # nftables table of the Raft cut (lib.sh member_fw_*)
FW_REST=soak_rest               # nftables table of the REST freeze
PORT=9393
INTERVAL=5                      # the exporter's poll interval (its default) and the scrape interval
export EXPORTER_URL="https://127.0.0.1:$PORT/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
export EXPORTER_CURL_CONFIG="$RUN_DIR/curl.conf"
S='scope="pg-test"'
REMOVED=sim-0003
ADDED=extra-0000

D=$((SOAK_MINUTES * 60))
sc() { awk -v t="$1" -v d="$D" -v f="${2:-0}" 'BEGIN { v = int(t * d / 3600 + 0.5); if (v < f) v = f; print v }'; }
WARM=$(sc 180 30); WIN=$(sc 900)
T_QUORUM=$(sc 1110); H_RESTART=$(sc 90 40); H_QUORUM=$(sc 180 75)
T_KILL=$(sc 1380); H_KILL=$(sc 180 45)
T_SWITCH=$(sc 2010)
T_FREEZE=$(sc 2100); H_FREEZE=$(sc 180 45)
T_REMOVE=$(sc 2340); T_ADD=$(sc 2400); T_CERT=$(sc 2460)

e2e_setup
chmod 700 "$RUN_DIR"
EVENTS="$RUN_DIR/events.tsv"
printf 'event\tstart\tend\tdetail\n' >"$EVENTS"
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() { member_fw_teardown "$FW"; member_fw_teardown "$FW_REST"; }
e2e_log "=== soak, Patroni $PATRONI_VERSION, ${SOAK_MINUTES} min, run dir $RUN_DIR, exporter $EXPORTER_BIN"
# a hard bound whatever happens: the run, the set-up and the checks
( sleep $((D + 1200)); e2e_log "soak: time bound reached"; kill -TERM $$ ) 9>&- &
E2E_PIDS+=("$!")

show_state() {
  e2e_show_metrics "the exporter's view of pg-test" \
    '^patroni_(raft_(cluster_quorum|up)|up|member_api_up)\{scope="pg-test"'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
}
now() { date +%s.%N; }
event() { # event NAME START END DETAIL: one row of events.tsv
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$EVENTS"
  e2e_log "event: $1 ($4)"
}
sleep_until() { # sleep_until T_REL: until T0 + T_REL seconds
  local left
  left=$(awk -v t0="$T0" -v r="$1" -v n="$(now)" 'BEGIN { l = t0 + r - n; print (l > 0 ? l : 0) }')
  sleep "$left"
}
wait_true() { # wait_true TIMEOUT_S CMD...: poll CMD every 0.5 s; prints the seconds it took
  local t0 limit=$1
  shift
  t0=$(now)
  while ! "$@"; do
    awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a < l) }' || return 1
    sleep 0.5
  done
  e2e_since "$t0"
}

# ---------------------------------------------------------------- TLS of the exporter's endpoint
PKI="$RUN_DIR/pki"
mkdir -p "$PKI"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3 -subj /CN=soak-ca \
  -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null || on_fail "openssl: CA"
web_cert() { # web_cert N: web-N.pem (serial 1000+N) and web-N.key, for 127.0.0.1
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=soak-exporter-$1" \
    -keyout "$PKI/web-$1.key" -out "$PKI/web-$1.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >"$PKI/san.ext"
  openssl x509 -req -in "$PKI/web-$1.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -set_serial "$((1000 + $1))" \
    -days 2 -extfile "$PKI/san.ext" -out "$PKI/web-$1.pem" 2>/dev/null
}
web_cert 1 || on_fail "openssl: web certificate 1"
web_cert 2 || on_fail "openssl: web certificate 2"
cp "$PKI/web-1.pem" "$PKI/web.pem"; cp "$PKI/web-1.key" "$PKI/web.key"
printf 'tls_server_config:\n  cert_file: %s\n  key_file: %s\n' "$PKI/web.pem" "$PKI/web.key" >"$RUN_DIR/web.yml"
printf 'cacert = "%s"\n' "$PKI/ca.pem" >"$EXPORTER_CURL_CONFIG"
served_serial() { # the serial of the certificate the endpoint serves (hex, as openssl prints it)
  timeout 10 openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$PKI/ca.pem" </dev/null 2>/dev/null \
    | openssl x509 -noout -serial 2>/dev/null | sed 's/^serial=//'
}

# ---------------------------------------------------------------- the real cluster, the fleets
member_fw_teardown "$FW"; member_fw_teardown "$FW_REST"
member_fw_setup "$FW" "$GID_BASE" || on_fail "nftables table $FW"
nft -f - <<EOF || on_fail "nftables table $FW_REST"
table inet $FW_REST {
  chain out {
    type filter hook output priority 0; policy accept;
  }
}
EOF
cluster up --sync >&2 || on_fail "cluster up --sync"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"
( umask 077; printf '%s\n' "$RAFT_PASS" >"$RUN_DIR/raft-secret" )

SIM_LIFE=$((D + 1200))
"$FLEET_SIM" --clusters "$SIMS" --duration "${SIM_LIFE}s" --poll-interval "${INTERVAL}s" \
  --config-out "$RUN_DIR/fleet.yml" --password-file "$RUN_DIR/fleet-password" \
  >"$RUN_DIR/fleet-sim.out" 2>"$RUN_DIR/fleet-sim.err" 9>&- &
E2E_PIDS+=("$!")
"$FLEET_SIM" --clusters 1 --prefix extra --duration "${SIM_LIFE}s" --poll-interval "${INTERVAL}s" \
  --config-out "$RUN_DIR/extra.yml" --password-file "$RUN_DIR/extra-password" \
  >"$RUN_DIR/extra-sim.out" 2>"$RUN_DIR/extra-sim.err" 9>&- &
E2E_PIDS+=("$!")
wait_true 120 grep -q '^ready' "$RUN_DIR/fleet-sim.out" >/dev/null || on_fail "fleet-sim not ready"
wait_true 60 grep -q '^ready' "$RUN_DIR/extra-sim.out" >/dev/null || on_fail "fleet-sim (extra) not ready"

# the exporter's --config.file: the real cluster as an operator lists it (its REST URLs and the
# Raft password; the Raft nodes found from the members), then the simulated ones
write_config() { # write_config WITH_REMOVED WITH_ADDED
  {
    echo "clusters:"
    printf "  - scope: pg-test\n    patroni_urls: ['%s', '%s', '%s']\n    raft_password_file: %s\n" \
      "$MEMBER0_REST" "$MEMBER1_REST" "$MEMBER2_REST" "$RUN_DIR/raft-secret"
    awk -v drop="$([[ $1 == 1 ]] || echo "$REMOVED")" '
      /^clusters:/ { next }
      /^  - / { skip = (drop != "" && $0 ~ ("scope: " drop "$")) }
      !skip' "$RUN_DIR/fleet.yml"
    [[ $2 == 0 ]] || grep -v '^clusters:' "$RUN_DIR/extra.yml"
  } >"$RUN_DIR/exporter.yml.new"
  mv "$RUN_DIR/exporter.yml.new" "$RUN_DIR/exporter.yml"
}
write_config 1 0
grep -q "scope: $REMOVED\$" "$RUN_DIR/exporter.yml" || on_fail "$REMOVED not in the config"

start_exporter() {
  "$EXPORTER_BIN" --config.file "$RUN_DIR/exporter.yml" --web.config.file "$RUN_DIR/web.yml" \
    --web.listen-address "127.0.0.1:$PORT" >>"$EXPORTER_LOG" 2>&1 9>&- &
  EXPORTER_PID=$!
  E2E_PIDS+=("$EXPORTER_PID")
  echo "$EXPORTER_PID" >"$RUN_DIR/exporter.pid"
  echo "$EXPORTER_PID" >>"$RUN_DIR/exporter.pids"
}
: >"$RUN_DIR/exporter.pids"
start_exporter
expect "setup: the exporter over TLS" patroni_exporter_build_info '...' present - 30

# ---------------------------------------------------------------- Prometheus over TLS
PROM_DIR="$RUN_DIR/prometheus"
mkdir -p "$PROM_DIR"
E2E_PROM_RULES="$(echo "$E2E_REPO"/alerts/*.rules.yml)" E2E_PROM_CA="$PKI/ca.pem" \
  e2e_prometheus "$PROM_DIR" "127.0.0.1:$PORT" "${INTERVAL}s" || on_fail "Prometheus not ready (log $PROM_DIR/prometheus.log)"
E2E_PIDS+=("$E2E_PROM_PID")
check "Prometheus loaded the shipped rule PatroniRaftQuorumLost" e2e_prom_rule_loaded PatroniRaftQuorumLost
expect_healthy setup

# ---------------------------------------------------------------- the sampler
CSV="$RUN_DIR/soak.csv"
LOST="$RUN_DIR/lost-series.txt"
: >"$LOST"
# The exporter's RSS (KiB), open fds and CPU seconds from its own process_* families in a saved
# /metrics body (text format), as "rss_kib,fds,cpu_s"; a figure it does not report is empty.
process_figures() {
  awk '$1 == "process_resident_memory_bytes" { rss = sprintf("%d", $2 / 1024) }
       $1 == "process_open_fds" { fds = $2 + 0 }
       $1 == "process_cpu_seconds_total" { cpu = sprintf("%.2f", $2) }
       END { print rss "," fds "," cpu }' "$1"
}
sampler() {
  local pid figures rss fds cpu thr body="$RUN_DIR/sample.prom" prev="$RUN_DIR/sample.prev" cur="$RUN_DIR/sample.cur" \
    last_pid="" tt series errors pmax t
  echo "t,epoch,pid,rss_kib,fds,threads,cpu_s,scrape_s,series,poll_errors,poll_max_s" >"$CSV"
  while :; do
    t=$(now)
    pid=$(<"$RUN_DIR/exporter.pid")
    thr=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    series="" errors="" pmax="" figures=",,"
    if tt=$(curl -s -f -m 5 -K "$EXPORTER_CURL_CONFIG" -o "$body" -w '%{time_total}' "$EXPORTER_URL" 2>/dev/null); then
      figures=$(process_figures "$body")
      series=$(grep -vc '^#' "$body" || true)
      errors=$(awk '/^patroni_exporter_poll_errors_total/ { s += $NF } END { print s + 0 }' "$body")
      pmax=$(awk '/^patroni_exporter_poll_duration_seconds/ { if ($NF > m) m = $NF } END { print m + 0 }' "$body")
      # the series of every simulated cluster: one that a scrape had and the next lacks is lost
      grep -v '^#' "$body" | sed 's/ [^ ]*$//' | grep -E 'scope="(sim|extra)-' | sort >"$cur" || true
      if [[ -s $prev && $pid == "$last_pid" ]]; then
        comm -23 "$prev" "$cur" | awk -v t="$t" '{ print t "\t" $0 }' >>"$LOST"
      fi
      mv "$cur" "$prev"
      last_pid=$pid
    else
      tt=""
    fi
    IFS=, read -r rss fds cpu <<<"$figures"
    echo "$(awk -v a="$T0" -v b="$t" 'BEGIN { printf "%.1f", b - a }'),$t,$pid,$rss,$fds,${thr:-},$cpu,$tt,$series,$errors,$pmax" >>"$CSV"
    sleep_until "$(awk -v a="$T0" -v b="$t" -v i="$INTERVAL" 'BEGIN { printf "%.3f", b - a + i }')"
  done
}
T0=$(now)
printf '%s\n' "$T0" >"$RUN_DIR/t0"
sampler 9>&- &
E2E_PIDS+=("$!")
e2e_log "=== schedule (s from now): warm-up $WARM, window A $WARM-$((WARM + WIN)), quorum loss $T_QUORUM (restart +$H_RESTART, heal +$H_QUORUM), kill $T_KILL (+$H_KILL), switchover $T_SWITCH, REST freeze $T_FREEZE (+$H_FREEZE), remove $T_REMOVE, add $T_ADD, certificate $T_CERT, window B $((D - WIN))-$D"

sync_standby() { # a streaming synchronous standby that GET /cluster names: its index (a switchover's candidate)
  local n js
  for n in 0 1 2; do
    js=$(curl -sf -m 3 "$(e2e_rest "$n")/cluster" 2>/dev/null) || continue
    jq -er '[.members[] | select(.role == "sync_standby" and .state == "streaming") | .name][0] // empty' <<<"$js" \
      | sed 's/.*-//'
    return
  done
  return 1
}
replica() { # a member that is not the leader: its index
  local leader n
  leader=$(e2e_cluster_leader) || return 1
  for n in 0 1 2; do
    [[ postgresql-$n == "$leader" ]] || { echo "$n"; return 0; }
  done
  return 1
}
# shellcheck disable=SC2317  # the predicates wait_true runs
{
verdict_lost() { # the exporter's verdict: quorum lost, on the evidence no_quorum
  fetch_metrics || return 1
  [[ $(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null) == 0 ]] \
    && [[ $(FETCH=0 metric_value patroni_raft_quorum_evidence "$S,evidence=\"no_quorum\"" 2>/dev/null) == 1 ]]
}
verdict_held() { [[ $(metric_value patroni_raft_cluster_quorum "$S" 2>/dev/null) == 1 ]]; }
quorum_of() { [[ $(metric_value patroni_raft_cluster_quorum "scope=\"$1\"" 2>/dev/null) == 1 ]]; }
api_up() { [[ $(metric_value patroni_member_api_up "$S,member=\"postgresql-$1\"" 2>/dev/null) == 1 ]]; }
leader_named() { e2e_cluster_leader >/dev/null; }
cluster_healthy() { cluster wait --sync >/dev/null 2>&1; }
is_primary() { [[ $(e2e_own_role "$1") =~ ^(primary|master)$ ]]; }
serial_is() { [[ $(served_serial) == "$1" ]]; }
scope_absent() { fetch_metrics && ! grep -q "scope=\"$1\"" <<<"$METRICS_TEXT"; }
}

# ================================================================== quorum loss + restart
sleep_until "$T_QUORUM"
ts=$(now)
member_fw_cut_raft "$FW" "$GID_BASE" 2222 || on_fail "quorum: nftables rules"
if el=$(wait_true "$H_RESTART" verdict_lost); then
  e2e_result quorum "cut -> verdict 0, evidence no_quorum (s)" "$el"
else
  fail "quorum: no verdict 0 within ${H_RESTART}s of the cut"
fi
losses_before=$(metric_value patroni_raft_quorum_losses_total "$S" 2>/dev/null || echo absent)
sleep_until "$(awk -v a="$T0" -v b="$ts" -v h="$H_RESTART" 'BEGIN { print b - a + h }')"
tr=$(now)
e2e_stop_pid "$EXPORTER_PID"
start_exporter
if el=$(wait_true $((4 * INTERVAL)) verdict_lost); then
  e2e_result quorum "exporter restart -> verdict 0, evidence no_quorum (s)" "$el"
  if awk -v e="$el" -v i="$INTERVAL" 'BEGIN { exit !(e <= 2 * i) }'; then
    pass "quorum: after the restart the verdict is right within two polls (${el}s)"
  else
    fail "quorum: after the restart the verdict took ${el}s (> two polls of ${INTERVAL}s)"
  fi
else
  fail "quorum: no verdict 0 within $((4 * INTERVAL))s of the restart"
fi
fetch_metrics || true
printf '%s\n' "$METRICS_TEXT" >"$RUN_DIR/metrics-after-restart.txt"
losses_after=$(FETCH=0 metric_value patroni_raft_quorum_losses_total "$S" 2>/dev/null || echo absent)
e2e_result quorum "patroni_raft_quorum_losses_total before / after the restart" "$losses_before/$losses_after"
event exporter-restart "$tr" "$(now)" "pid $(sed -n 1p "$RUN_DIR/exporter.pids") -> $EXPORTER_PID"
sleep_until "$(awk -v a="$T0" -v b="$ts" -v h="$H_QUORUM" 'BEGIN { print b - a + h }')"
member_fw_heal "$FW"
te=$(now)
event quorum-loss "$ts" "$te" "Raft port cut between the 3 members for $(e2e_since "$ts")s"
if el=$(FETCH=1 wait_true 300 verdict_held); then e2e_result quorum "heal -> verdict 1 (s)" "$el"
else fail "quorum: no verdict 1 within 300s of the heal"; fi
if el=$(wait_true 300 leader_named); then e2e_result quorum "heal -> a leader in /cluster (s)" "$el"
else fail "quorum: no leader within 300s of the heal"; fi

# ================================================================== a member killed
sleep_until "$T_KILL"
n=$(replica) || on_fail "kill: no replica"
ts=$(now)
cluster kill "$n" >"$RUN_DIR/kill.log" 2>&1 || fail "kill: cluster.sh kill $n"
sleep_until "$(awk -v a="$T0" -v b="$ts" -v h="$H_KILL" 'BEGIN { print b - a + h }')"
cluster start "$n" >>"$RUN_DIR/kill.log" 2>&1 || fail "kill: cluster.sh start $n"
event member-kill "$ts" "$(now)" "postgresql-$n killed, started again"
if el=$(wait_true 180 cluster_healthy); then e2e_result kill "start -> cluster healthy, sync (s)" "$el"
else fail "kill: the cluster not healthy within 180s of the start"; fi

# ================================================================== switchover
sleep_until "$T_SWITCH"
wait_true 120 cluster_healthy >/dev/null || fail "switchover: the cluster not healthy (sync) within 120s"
leader=$(e2e_cluster_leader) || on_fail "switchover: no leader"
n=$(sync_standby) || on_fail "switchover: no streaming sync standby"
ts=$(now)
cluster ctl switchover pg-test --leader "$leader" --candidate "postgresql-$n" --force >"$RUN_DIR/switchover.txt" 2>&1 \
  || fail "switchover: patronictl switchover"
event switchover "$ts" "$(now)" "$leader -> postgresql-$n"
if el=$(wait_true 120 is_primary "$n"); then
  e2e_result switchover "switchover -> postgresql-$n primary (s)" "$el"
else fail "switchover: postgresql-$n not primary within 120s"; fi

# ================================================================== REST frozen
sleep_until "$T_FREEZE"
n=$(replica) || on_fail "freeze: no replica"
hostport=$(e2e_rest "$n"); hostport=${hostport#*://}
ts=$(now)
nft add rule inet "$FW_REST" out ip daddr "${hostport%:*}" tcp dport "${hostport##*:}" drop || fail "freeze: nftables"
sleep_until "$(awk -v a="$T0" -v b="$ts" -v h="$H_FREEZE" 'BEGIN { print b - a + h }')"
nft flush chain inet "$FW_REST" out
event rest-freeze "$ts" "$(now)" "postgresql-$n's REST ($hostport) dropped by nftables"
if el=$(wait_true 60 api_up "$n"); then
  e2e_result freeze "thaw -> patroni_member_api_up 1 (s)" "$el"
else fail "freeze: postgresql-$n's API not up within 60s of the thaw"; fi

# ================================================================== a cluster removed, one added
# reload_with ARGS: write_config ARGS, then SIGHUP the exporter; RELOADED_AT: when (epoch s)
reload_with() { write_config "$@"; RELOADED_AT=$(now); kill -HUP "$EXPORTER_PID"; }
sleep_until "$T_REMOVE"
reload_with 0 0
if el=$(wait_true 30 scope_absent "$REMOVED"); then
  e2e_result config "SIGHUP -> no series of the removed $REMOVED (s)" "$el"
  if awk -v e="$el" -v i="$INTERVAL" 'BEGIN { exit !(e <= i) }'; then pass "config: the removed cluster's series gone within one poll (${el}s)"
  else fail "config: the removed cluster's series took ${el}s (> one poll of ${INTERVAL}s)"; fi
else fail "config: series of $REMOVED still there 30s after the SIGHUP"; fi
event cluster-removed "$RELOADED_AT" "$(now)" "$REMOVED removed from --config.file, SIGHUP"

sleep_until "$T_ADD"
reload_with 0 1
if el=$(wait_true 30 quorum_of "$ADDED"); then
  e2e_result config "SIGHUP -> the added $ADDED polled, quorum 1 (s)" "$el"
else fail "config: $ADDED not polled within 30s of the SIGHUP"; fi
event cluster-added "$RELOADED_AT" "$(now)" "$ADDED added to --config.file, SIGHUP"

# ================================================================== the web certificate rotated
sleep_until "$T_CERT"
old=$(served_serial)
cp "$PKI/web-2.pem" "$PKI/web.pem.new"; mv "$PKI/web.pem.new" "$PKI/web.pem"
cp "$PKI/web-2.key" "$PKI/web.key.new"; mv "$PKI/web.key.new" "$PKI/web.key"
want=$(openssl x509 -noout -serial -in "$PKI/web-2.pem" | sed 's/^serial=//')
ts=$(now)
kill -HUP "$EXPORTER_PID"
if el=$(wait_true 15 serial_is "$want"); then
  e2e_result cert "SIGHUP -> the new certificate (serial $want, was $old) served (s)" "$el"
  pass "cert: the rotated certificate is served"
else fail "cert: still serving serial $(served_serial) 15s after the SIGHUP (want $want)"; fi
event cert-rotated "$ts" "$(now)" "web certificate serial $old -> $want, SIGHUP"

# ================================================================== to the end, then the checks
sleep_until "$D"
e2e_log "=== the run is over: checks"
if grep -q panicked "$EXPORTER_LOG"; then fail "a panic in the exporter's log"; else pass "no panic in the exporter's log"; fi
if kill -0 "$EXPORTER_PID" 2>/dev/null; then pass "the exporter still runs (pid $EXPORTER_PID)"
else fail "the exporter is gone"; fi
check "soak criteria (scripts/soak-check.py)" "$PLOT_VENV/bin/python" "$E2E_REPO/scripts/soak-check.py" \
  --run-dir "$RUN_DIR" --prom "$E2E_PROM" --duration "$D" --warm "$WARM" --window "$WIN" \
  --interval "$INTERVAL" --removed "$REMOVED" --added "$ADDED" --title "Patroni $PATRONI_VERSION, ${SOAK_MINUTES} min"
e2e_finish "soak (${SOAK_MINUTES} min)"
}
