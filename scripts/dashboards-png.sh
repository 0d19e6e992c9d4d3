#!/usr/bin/env bash
# dashboards-png.sh - pictures of the Grafana dashboards from real data (make dashboards-png):
# a scripted incident on the real demo (scripts/demo.sh: 3 Patroni members on Raft, the
# exporter, Prometheus with the shipped rules, Alertmanager), then scripts/render-dashboards.py
# draws docs/img/<dashboard>.png from Prometheus' query_range over the incident, and
# docs/img/<dashboard>-paged.png as the dashboards look 20 s after the page.
#
# Incident (about 8 minutes): healthy -> switchover (Patroni REST POST /switchover) -> the new
# leader and one replica killed (Raft quorum lost; waits until Alertmanager has
# PatroniRaftQuorumLost) -> both restarted -> healthy again.
# The fleet (docs/img/patroni-fleet*.png): beside the demo's cluster pg-test (Patroni 3.3.8), a
# second real cluster pg-other (Patroni 4.1.5, tests/e2e/cluster.sh ADDR_MODE=single: 127.0.0.1,
# ports 8008+N, in the same namespace) with its own exporter on 127.0.0.1:9394, one replica of
# it killed at the switchover and restarted with the others; a standby cluster pg-dr (Patroni
# 4.1.5, standby_cluster: streaming from pg-other's member 0, 127.0.0.21-23), paired with pg-other
# in that exporter's --config.file (`standby_of: pg-other`), for the fleet's "Standby clusters"
# row; and FLEET_SIM_CLUSTERS (default 4) fleet-sim clusters (healthy fakes, for numbers) with
# their own exporter on 127.0.0.1:9395.
#
# Usage: scripts/dashboards-png.sh [--render-only]
#   --render-only   only render, from a Prometheus already holding the incident (PNG_PROM_URL,
#                   PNG_EVENTS=file of "epoch<TAB>label" lines, PNG_START/PNG_END epochs)
#   PNG_SCOPE=pg-test  the cluster the per-cluster dashboards show (the fleet shows every one)
#   PNG_OUT=docs/img     where the PNGs go
#   PNG_KEEP=1      leave the demo running afterwards (with PNG_NETNS_OK=1, to re-render)
#   PNG_HEALTHY=75 PNG_AFTER_SWITCHOVER=60 PNG_RECOVERED=75   seconds held in each phase
#
# Runs in a network namespace of its own (the cluster's loopback addresses are fixed): as root
# it re-executes itself under `unshare --net` after the parts that need the network (deps,
# release build, render venv); otherwise run it inside one yourself (PNG_NETNS_OK=1).
# Not run by CI (too long); the PNGs it writes are committed.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
# shellcheck source=../tests/e2e/paths.sh
source tests/e2e/paths.sh
export PATRONI_VERSION="${PATRONI_VERSION:-3.3.8}"
OUT="${PNG_OUT:-$REPO/docs/img}"
WORK="$E2E_WORK/dashboards-png"
RENDER_VENV="${RENDER_VENV:-$E2E_WORK/venv-render}"
RENDER_REQ=dashboards/render-requirements.txt
PROM=127.0.0.1:9090
AM=127.0.0.1:9093
OTHER_VERSION=4.1.5
OTHER_EXPORTER=127.0.0.1:9394
FLEET_EXPORTER=127.0.0.1:9395

log() { printf '[dashboards-png %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

render_venv() {
  if [[ ! -x $RENDER_VENV/bin/python ]] || ! cmp -s "$RENDER_REQ" "$RENDER_VENV/.requirements.txt"; then
    log "creating $RENDER_VENV ($RENDER_REQ)"
    rm -rf "$RENDER_VENV"
    /usr/bin/python3 -m venv "$RENDER_VENV"
    "$RENDER_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$RENDER_REQ"
    cp "$RENDER_REQ" "$RENDER_VENV/.requirements.txt"
  fi
}

render() { # render PROM_URL START END EVENTS
  local page
  mkdir -p "$OUT"
  # the whole incident: <dashboard>.png; the fleet with every cluster, the per-cluster
  # dashboards for the demo's cluster (as its link from the fleet opens them: var-scope)
  render_one "$1" "$2" "$3" "$4" "" ""
  # what the paged operator sees: up to 20 s after the page reached Alertmanager
  page=$(awk -F'\t' '/PatroniRaftQuorumLost/ {print int($1) + 20; exit}' "$4")
  if [[ -n $page ]]; then
    render_one "$1" "$2" "$page" "$4" -paged "   (20 s after the page: what the on-call sees)"
  fi
}
render_one() { # render_one PROM_URL START END EVENTS SUFFIX CAPTION
  "$RENDER_VENV/bin/python" scripts/render-dashboards.py --prometheus "$1" --start "$2" --end "$3" \
    --events "$4" --out "$OUT" --suffix="$5" --caption "$6" dashboards/patroni-fleet.json
  "$RENDER_VENV/bin/python" scripts/render-dashboards.py --prometheus "$1" --start "$2" --end "$3" \
    --events "$4" --out "$OUT" --suffix="$5" --caption "$6" --var scope="${PNG_SCOPE:-pg-test}" \
    dashboards/patroni-cluster.json dashboards/patroni-raft.json
}

if [[ ${1:-} == --render-only ]]; then
  render_venv
  render "${PNG_PROM_URL:-http://$PROM}" "${PNG_START:?}" "${PNG_END:?}" "${PNG_EVENTS:-/dev/null}"
  exit 0
fi

# ---- outside the namespace: everything that needs the network or a long build
if [[ -z ${PNG_IN_NETNS:-} ]]; then
  scripts/install-deps.sh --patroni "$PATRONI_VERSION" "$OTHER_VERSION"
  cargo build --release --bin patroni-raft-exporter
  cargo build --release --features testkit --bin fleet-sim
  render_venv
  if [[ ${PNG_NETNS_OK:-} == 1 ]]; then
    exec env PNG_IN_NETNS=1 "$REPO/scripts/dashboards-png.sh" "$@"
  fi
  [[ $EUID -eq 0 ]] || die "run as root (for unshare --net), or inside a network namespace of your own with PNG_NETNS_OK=1"
  log "entering a new network namespace (unshare --net)"
  exec unshare --net env PNG_IN_NETNS=1 "$REPO/scripts/dashboards-png.sh" "$@"
fi

# ---- inside the namespace
ip link set lo up 2>/dev/null || true
export DEMO_DIR="$WORK/demo" DEMO_CLUSTER_DIR="$WORK/cluster"
export EXPORTER_BIN="$E2E_TARGET_DIR/release/patroni-raft-exporter"
export PROMETHEUS_ADDR=$PROM ALERTMANAGER_ADDR=$AM
export DEMO_EXTRA_TARGETS="$OTHER_EXPORTER $FLEET_EXPORTER"
FLEET_SIM="$E2E_TARGET_DIR/release/fleet-sim"
OTHER_DIR="$WORK/cluster-other"
# the second real cluster: its own data, scope and addresses (127.0.0.1, ports 8008+N)
other() { env PATRONI_VERSION=$OTHER_VERSION SCOPE=pg-other ADDR_MODE=single DATA_DIR="$OTHER_DIR" tests/e2e/cluster.sh "$@"; }
DR_DIR="$WORK/cluster-dr"
# the standby cluster of pg-other: its own data, scope, names and addresses (127.0.0.21-23)
dr() { env PATRONI_VERSION=$OTHER_VERSION SCOPE=pg-dr IP_BASE=21 MEMBER_PREFIX=dr DATA_DIR="$DR_DIR" STANDBY_OF="${OTHER_PG:-}" tests/e2e/cluster.sh "$@"; }
FLEET_PIDS=()
DEMO=scripts/demo.sh
EVENTS="$WORK/events.tsv"
mkdir -p "$WORK"
: >"$EVENTS"

cleanup() {
  local rc=$?
  (( rc == 0 )) || log "failed (exit $rc)"
  if [[ ${PNG_KEEP:-} == 1 ]]; then
    log "PNG_KEEP=1: the demo keeps running in this namespace; re-render with PNG_START=$START PNG_END=${END:-} PNG_EVENTS=$EVENTS $0 --render-only"
    exit "$rc"
  fi
  log "stopping the demo, the second cluster, fleet-sim and their exporters"
  "$DEMO" down >/dev/null 2>&1 || log "demo down failed (see $DEMO_DIR)"
  local pid
  for pid in "${FLEET_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${FLEET_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  dr down --fast >/dev/null 2>&1 || log "pg-dr down failed (see $DR_DIR)"
  other down --fast >/dev/null 2>&1 || log "pg-other down failed (see $OTHER_DIR)"
  exit "$rc"
}
trap cleanup EXIT

mark() { printf '%s\t%s\n' "$(date +%s)" "$1" >>"$EVENTS"; log "event: $1"; }
hold() { log "holding $1 s ($2)"; sleep "$1"; }

# eval'd lines of `cluster.sh env` (REST_USER, REST_PASS, MEMBERn_REST, ...)
cluster_env() { "$DEMO" cluster env; }

cluster_json() { # GET /cluster from the first member that answers, or nothing
  curl -fs --max-time 3 "$MEMBER0_REST/cluster" 2>/dev/null \
    || curl -fs --max-time 3 "$MEMBER1_REST/cluster" 2>/dev/null \
    || curl -fs --max-time 3 "$MEMBER2_REST/cluster" 2>/dev/null || true
}

alert_firing() { # alert_firing NAME: 0 when Alertmanager holds an active alert NAME
  curl -fs --max-time 3 "http://$AM/api/v2/alerts?active=true" 2>/dev/null \
    | jq -e --arg n "$1" 'any(.[]; .labels.alertname == $n)' >/dev/null
}

START=$(date +%s) END=
# ---- the fleet around the demo: pg-other (real) and fleet-sim, each with its own exporter
other up
OTHER_PG=$(other env | sed -n "s/^MEMBER0_PG='\(.*\)'$/\1/p")
dr up
DR_URL=$(dr env | sed -n "s/^MEMBER0_REST='\(.*\)'$/\1/p")
( umask 077; printf 'raft-pass\n' >"$WORK/raft-password" )
cat >"$WORK/exporter-other.yml" <<EOF
clusters:
  - scope: pg-other
    patroni_urls: [http://127.0.0.1:8008]
    raft_password_file: $WORK/raft-password
  - scope: pg-dr
    patroni_urls: [$DR_URL]
    raft_password_file: $WORK/raft-password
    standby_of: pg-other
EOF
"$EXPORTER_BIN" --config.file "$WORK/exporter-other.yml" \
  --web.listen-address "$OTHER_EXPORTER" >"$WORK/exporter-other.log" 2>&1 &
FLEET_PIDS+=($!)
"$FLEET_SIM" --clusters "${FLEET_SIM_CLUSTERS:-4}" --duration 3600s --poll-interval 5s --prefix fleet-sim \
  --config-out "$WORK/fleet.yml" --password-file "$WORK/fleet-password" >"$WORK/fleet-sim.out" 2>"$WORK/fleet-sim.err" &
FLEET_PIDS+=($!)
deadline=$(( $(date +%s) + 60 ))
until grep -q '^ready' "$WORK/fleet-sim.out" 2>/dev/null; do
  (( $(date +%s) < deadline )) || die "fleet-sim not ready: $(tail -3 "$WORK/fleet-sim.err")"
  sleep 0.5
done
"$EXPORTER_BIN" --config.file "$WORK/fleet.yml" --web.listen-address "$FLEET_EXPORTER" \
  >"$WORK/exporter-fleet.log" 2>&1 &
FLEET_PIDS+=($!)

"$DEMO" up
eval "$(cluster_env)"
mark "demo up"
hold "${PNG_HEALTHY:-75}" healthy

# ---- switchover: the leader hands over to a sync standby (Patroni REST, basic auth on stdin)
CLUSTER_JSON=$(cluster_json)
OLD_LEADER=$(jq -r '.members[] | select(.role == "leader") | .name' <<<"$CLUSTER_JSON")
CANDIDATE=$(jq -r '[.members[] | select(.role == "sync_standby" or .role == "replica") | .name][0]' <<<"$CLUSTER_JSON")
[[ -n $OLD_LEADER && -n $CANDIDATE && $CANDIDATE != null ]] || die "no leader/candidate in GET /cluster: $CLUSTER_JSON"
mark "switchover $OLD_LEADER -> $CANDIDATE; pg-other: a replica killed"
OTHER_REPLICA=$(other status 2>/dev/null | jq -r '[.members[] | select(.role != "leader") | .name][0] | ltrimstr("postgresql-")')
[[ $OTHER_REPLICA =~ ^[0-9]$ ]] || die "no replica in pg-other's GET /cluster"
other kill "$OTHER_REPLICA"
printf 'user = "%s:%s"\n' "$REST_USER" "$REST_PASS" \
  | curl -fsS --max-time 60 -K - -H 'Content-Type: application/json' \
      -d "{\"leader\": \"$OLD_LEADER\", \"candidate\": \"$CANDIDATE\"}" "$MEMBER0_REST/switchover" >&2
echo >&2
deadline=$(( $(date +%s) + 90 ))
until [[ $(jq -r '.members[] | select(.role == "leader") | .name' <<<"$(cluster_json)" 2>/dev/null) == "$CANDIDATE" ]]; do
  (( $(date +%s) < deadline )) || die "$CANDIDATE did not become leader within 90 s"
  sleep 1
done
log "$CANDIDATE leads"
"$DEMO" cluster wait --sync >/dev/null
hold "${PNG_AFTER_SWITCHOVER:-60}" "after the switchover"

# ---- two of three members crash: the new leader and one replica (Raft quorum lost)
num_of() { # member number of a member name
  local n var
  for n in 0 1 2; do var="MEMBER${n}_NAME"; [[ ${!var} == "$1" ]] && { echo "$n"; return 0; }; done
  die "no member named $1"
}
KILL_A=$(num_of "$CANDIDATE")
KILL_B=$(num_of "$OLD_LEADER")
mark "members $CANDIDATE and $OLD_LEADER killed"
"$DEMO" kill "$KILL_A"
"$DEMO" kill "$KILL_B"
deadline=$(( $(date +%s) + 240 ))
until alert_firing PatroniRaftQuorumLost; do
  (( $(date +%s) < deadline )) || die "PatroniRaftQuorumLost did not reach Alertmanager within 240 s"
  sleep 2
done
mark "PatroniRaftQuorumLost in Alertmanager"
curl -fs --max-time 3 "http://$AM/api/v2/alerts?active=true" \
  | jq -r '.[] | "  alert firing: \(.labels.alertname) \(.labels.scope // "") \(.labels.node // .labels.member // "")"' >&2 || true
hold 20 "quorum lost"

# ---- recovery
mark "members restarted (and pg-other's)"
"$DEMO" start "$KILL_A"
"$DEMO" start "$KILL_B"
other start "$OTHER_REPLICA"
"$DEMO" cluster wait --sync >/dev/null || die "the cluster did not become healthy again"
other wait >/dev/null || die "pg-other did not become healthy again"
mark "healthy again"
hold "${PNG_RECOVERED:-75}" recovered
END=$(date +%s)
log "incident took $((END - START)) s; rendering"

render "http://$PROM" "$START" "$END" "$EVENTS"
cp "$EVENTS" "$OUT/incident-events.tsv"
pngs=("$OUT"/*.png)
log "done: ${pngs[*]}"
