#!/usr/bin/env bash
# demo.sh - the real thing on one machine: a 3-member Patroni + Raft cluster on loopback,
# the exporter, Prometheus with the project's alert rules, and Alertmanager.
#
# Usage: scripts/demo.sh up | down | status | kill N | start N | cluster ARGS... | import-help
#   PATRONI_VERSION=3.3.8 (default, what Charmed PostgreSQL ships) or 4.1.5
#   EXPORTER_BIN=path   use this exporter binary instead of building the release one
#   EXPORTER_ADDR, PROMETHEUS_ADDR, ALERTMANAGER_ADDR   (127.0.0.1:9393, :9090, :9093)
#   DEMO_DIR, DEMO_CLUSTER_DIR   where the demo keeps its files and the cluster its data
#                     ($E2E_WORK/demo, $E2E_WORK/cluster-demo): scripts/dashboards-png.sh uses others
#   DEMO_EXTRA_TARGETS="host:port ..."  more exporters for Prometheus to scrape in the same job
#                     (scripts/dashboards-png.sh: a second real cluster's and fleet-sim's)
#
# Then break things and watch: scripts/demo.sh kill 1; scripts/demo.sh kill 2 (Raft quorum
# lost: PatroniRaftQuorumLost reaches Alertmanager after about 70 s), scripts/demo.sh start 1 ...
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../tests/e2e/lib.sh
source "$REPO/tests/e2e/lib.sh"   # paths, and the one Prometheus/Alertmanager start
export PATRONI_VERSION="${PATRONI_VERSION:-3.3.8}"
DEMO="${DEMO_DIR:-$E2E_WORK/demo}"
export DATA_DIR="${DEMO_CLUSTER_DIR:-$E2E_WORK/cluster-demo}"
EXPORTER_ADDR="${EXPORTER_ADDR:-127.0.0.1:9393}"
PROMETHEUS_ADDR="${PROMETHEUS_ADDR:-127.0.0.1:9090}"
ALERTMANAGER_ADDR="${ALERTMANAGER_ADDR:-127.0.0.1:9093}"
E2E_PROM="http://$PROMETHEUS_ADDR" E2E_AM="http://$ALERTMANAGER_ADDR"
EXPORTER_BIN="${EXPORTER_BIN:-}"

log() { printf '[demo %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# start NAME CMD...: run in the background, remember the PID, log to $DEMO/NAME.log
start() {
  local name=$1; shift
  "$@" >"$DEMO/$name.log" 2>&1 &
  echo $! >"$DEMO/$name.pid"
  log "$name started (pid $!, log $DEMO/$name.log)"
}

# stop NAME: only the PID we started, and only if it still runs the expected program.
stop() {
  local name=$1 pid
  [[ -f $DEMO/$name.pid ]] || return 0
  pid=$(cat "$DEMO/$name.pid")
  if kill -0 "$pid" 2>/dev/null && grep -qa -- "$2" "/proc/$pid/cmdline" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    log "$name stopped"
  fi
  rm -f "$DEMO/$name.pid"
}

up() {
  "$REPO/scripts/install-deps.sh" --patroni "$PATRONI_VERSION"
  if [[ -z $EXPORTER_BIN ]]; then
    (cd "$REPO" && cargo build --release --bin patroni-raft-exporter)
    EXPORTER_BIN="$E2E_TARGET_DIR/release/patroni-raft-exporter"
  fi
  mkdir -p "$DEMO"
  "$E2E_CLUSTER" up --sync

  ( umask 077; printf 'raft-pass\n' >"$DEMO/raft-password" )
  stop exporter patroni-raft-exporter
  # The README's quick start: one member's URL and the Raft password; the other members
  # and Raft voters are found through the Raft status.
  start exporter "$EXPORTER_BIN" \
    --patroni.url http://127.0.0.11:8008 --raft.password-file "$DEMO/raft-password" \
    --web.listen-address "$EXPORTER_ADDR"

  local extra_targets="" t   # DEMO_EXTRA_TARGETS: more exporters (scripts/dashboards-png.sh)
  for t in ${DEMO_EXTRA_TARGETS:-}; do extra_targets+=", '$t'"; done
  stop prometheus "$DEMO/prometheus.yml"
  stop alertmanager "$DEMO/alertmanager.yml"
  # lib.sh: Alertmanager (group_wait 10s), then Prometheus (every 5 s) sending it the shipped rules' alerts
  local am_ready=1 prom_ready=1
  e2e_alertmanager "$DEMO" || am_ready=0
  echo "$E2E_AM_PID" >"$DEMO/alertmanager.pid"
  ((am_ready)) || { log "Alertmanager not ready: $(tail -3 "$DEMO/alertmanager.log")"; return 1; }
  e2e_prometheus "$DEMO" "      - targets: ['$EXPORTER_ADDR'$extra_targets]" 5s || prom_ready=0
  echo "$E2E_PROM_PID" >"$DEMO/prometheus.pid"
  ((prom_ready)) || { log "Prometheus not ready: $(tail -3 "$DEMO/prometheus.log")"; return 1; }
  e2e_wait_http "http://$EXPORTER_ADDR/-/ready" 30 || { log "no answer from the exporter: $(tail -3 "$DEMO/exporter.log")"; return 1; }
  for name in exporter prometheus alertmanager; do
    kill -0 "$(cat "$DEMO/$name.pid")" 2>/dev/null || { log "$name exited: $(tail -3 "$DEMO/$name.log")"; return 1; }
  done
  cat <<EOF

Demo is running (Patroni $PATRONI_VERSION):
  exporter      http://$EXPORTER_ADDR/metrics
  Prometheus    http://$PROMETHEUS_ADDR/alerts      (rules: alerts/patroni-raft.rules.yml)
  Alertmanager  http://$ALERTMANAGER_ADDR/
  Patroni REST  http://127.0.0.11:8008/cluster  (.12, .13)
Try:  scripts/demo.sh kill 1; scripts/demo.sh kill 2      # lose Raft quorum
      curl -s http://$EXPORTER_ADDR/metrics | grep -E 'raft_cluster_quorum|role_mismatch'
      $EXPORTER_BIN status --patroni.url http://127.0.0.11:8008 --raft.password-file $DEMO/raft-password
      scripts/demo.sh start 1; scripts/demo.sh start 2    # recover
Stop: make demo-stop
EOF
  import_help
}

# How to put the dashboards into a Grafana the user already runs (the demo starts none).
import_help() {
  cat <<EOF

Grafana dashboards (import them into your Grafana; the demo does not run one):
  $REPO/dashboards/patroni-cluster.json   uid patroni-raft-cluster  "Patroni cluster"
  $REPO/dashboards/patroni-raft.json      uid patroni-raft-raft     "Patroni Raft"
  $REPO/dashboards/patroni-fleet.json     uid patroni-raft-fleet    "Patroni fleet" (every cluster, worst first)
  All have a data source variable named 'datasource' (type prometheus) and a 'scope' variable.
  UI:  Dashboards > New > Import > Upload dashboard JSON file; choose as 'Data source' the
       Prometheus that scrapes the exporter (this demo's: http://$PROMETHEUS_ADDR).
  API: jq '{dashboard: ., overwrite: true}' $REPO/dashboards/patroni-cluster.json |
         curl -u USER -H 'Content-Type: application/json' --data-binary @- http://GRAFANA/api/dashboards/db
  Provisioning: copy the files into the folder of a dashboard provider (options.path in
       provisioning/dashboards/*.yaml); the fixed uids keep links and bookmarks stable.
  Pictures of the dashboards during a real incident: docs/img/ (make dashboards-png).
EOF
}

down() {
  stop alertmanager "$DEMO/alertmanager.yml"
  stop prometheus "$DEMO/prometheus.yml"
  stop exporter patroni-raft-exporter
  "$E2E_CLUSTER" down
  rm -rf "$DEMO"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  import-help) import_help ;;
  status) "$E2E_CLUSTER" status; for n in exporter prometheus alertmanager; do [[ -f $DEMO/$n.pid ]] && echo "$n pid $(cat "$DEMO/$n.pid")"; done ;;
  kill|start) "$E2E_CLUSTER" "$1" "${2:?member number 0-2}" ;;
  cluster) shift; "$E2E_CLUSTER" "$@" ;;
  *) echo "usage: $0 up|down|status|kill N|start N|cluster ARGS...|import-help" >&2; exit 2 ;;
esac
