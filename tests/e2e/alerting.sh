#!/usr/bin/env bash
# alerting.sh - the whole chain with real components: a real Patroni + Raft cluster, the
# exporter, a real Prometheus evaluating alerts/patroni-raft.rules.yml, and a real
# Alertmanager. Proves that losing Raft quorum pages (PatroniRaftQuorumLost reaches
# Alertmanager), that a healthy cluster pages nobody, and that the page resolves on recovery.
#
# Usage: tests/e2e/alerting.sh [PATRONI_VERSION...]   (default 3.3.8). As root in a network
# namespace of its own (several versions: in parallel), else on the host's loopback.
# Uses scripts/demo.sh on ports 29393/29090/29093 (files in $E2E_WORK/alerting-VERSION, the
# cluster in $E2E_WORK/cluster-alerting-VERSION); EXPORTER_BIN defaults to the debug build.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

# as root in a network namespace of its own, else on the host's loopback after any other user
E2E_DEFAULT_VERSION=3.3.8 E2E_NETNS=optional E2E_TOOLS="prometheus prometheus-alertmanager" \
  e2e_scenario alerting "$@"
export EXPORTER_BIN
export EXPORTER_ADDR=127.0.0.1:29393 PROMETHEUS_ADDR=127.0.0.1:29090 ALERTMANAGER_ADDR=127.0.0.1:29093
export EXPORTER_URL="http://$EXPORTER_ADDR/metrics"
export DEMO_DIR="$RUN_DIR" DEMO_CLUSTER_DIR="$E2E_WORK/cluster-alerting-$PATRONI_VERSION"
demo() { "$E2E_REPO/scripts/demo.sh" "$@" 9>&-; }

e2e_lock
trap 'demo down >/dev/null 2>&1 || true' EXIT

# alerts_firing [SEVERITY]: names of the alerts Alertmanager holds (active ones), sorted.
alerts_firing() {
  curl -fs --max-time 5 "http://$ALERTMANAGER_ADDR/api/v2/alerts?active=true&silenced=false&inhibited=false" |
    jq -r --arg s "${1:-}" '.[] | select($s == "" or .labels.severity == $s) | .labels.alertname' | sort -u
}

# wait_alert NAME TIMEOUT: until Alertmanager holds NAME; prints the elapsed seconds.
wait_alert() {
  local t0 deadline
  t0=$(e2e_now)
  deadline=$(( $(date +%s) + $2 ))
  while (( $(date +%s) < deadline )); do
    if alerts_firing | grep -qx "$1"; then e2e_since "$t0"; return 0; fi
    sleep 2
  done
  return 1
}

e2e_log "=== alerting chain, Patroni $PATRONI_VERSION"
demo down >/dev/null 2>&1 || true
demo up >&2 || { fail "demo up"; e2e_summary; exit 1; }

check "exporter scraped by Prometheus" bash -c "sleep 12; curl -fs 'http://$PROMETHEUS_ADDR/api/v1/query?query=up' | jq -e '.data.result[] | select(.metric.job == \"patroni-raft-exporter\" and .value[1] == \"1\")' >/dev/null"
check "Prometheus loaded the project's rules" bash -c "curl -fs 'http://$PROMETHEUS_ADDR/api/v1/rules' | jq -e '[.data.groups[].rules[]] | length > 10' >/dev/null"

# A healthy cluster pages nobody (give the shortest 'for' of a critical rule time to pass).
sleep 40
critical=$(alerts_firing critical || true)
if [[ -z $critical ]]; then pass "healthy cluster: no critical alert"; else fail "healthy cluster pages: $critical"; fi

e2e_log "killing members 1 and 2"
t0=$(e2e_now)
demo kill 1 >&2
demo kill 2 >&2
fired=0
if took=$(wait_alert PatroniRaftQuorumLost 150); then
  fired=1
  pass "PatroniRaftQuorumLost reached Alertmanager ${took}s after the kill (for: 1m)"
else
  fail "PatroniRaftQuorumLost did not reach Alertmanager within 150 s (active: $(alerts_firing | tr '\n' ' '))"
  DATA_DIR=$DEMO_CLUSTER_DIR dump_logs "$RUN_DIR/exporter.log" >&2 || true
fi
e2e_log "active alerts: $(alerts_firing | tr '\n' ' ')"

demo start 1 >&2
demo start 2 >&2
deadline=$(( $(date +%s) + 180 ))
while (( $(date +%s) < deadline )) && alerts_firing | grep -qx PatroniRaftQuorumLost; do sleep 3; done
if (( ! fired )); then
  fail "recovery: nothing to resolve, the page never fired"
elif alerts_firing | grep -qx PatroniRaftQuorumLost; then
  fail "PatroniRaftQuorumLost still active 180 s after recovery"
else
  pass "PatroniRaftQuorumLost resolved $(e2e_since "$t0")s after the kill, on recovery"
fi
e2e_summary
