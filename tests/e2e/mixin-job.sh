#!/usr/bin/env bash
# mixin-job.sh - issue #22: the rules rendered from the mixin for another job name work in a
# real Prometheus. No Patroni needed: PatroniExporterDown is about the scrape target.
#
#   tests/e2e/mixin-job.sh        (root: a network namespace of its own; ~30 s)
#
# 1. jsonnet renders mixin/rules.jsonnet with _config.jobSelector 'job="pg-ha"' (and, so that
#    the test does not wait 5 min, forDurations.PatroniExporterDown '10s'); promtool checks it;
#    only the selector, that for: and the "for 10s" of its description differ from the
#    shipped file (diff).
# 2. A real Prometheus (Debian's) in the namespace, on 127.0.0.1:9090, evaluates the rendered
#    rules every 2 s and scrapes job pg-ha: itself (up) and 127.0.0.1:9399 (nothing listens).
#    Asserts: the loaded rule is up{job="pg-ha"} == 0 for 10 s; PatroniExporterDown goes
#    pending, then firing, for instance 127.0.0.1:9399 with job="pg-ha" (and not for the
#    target that is up); the shipped selector up{job=~".*patroni.*"} == 0 matches nothing in
#    this Prometheus: the default rules are blind to this job, the rendered ones are not.
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"

if [[ ${E2E_IN_NETNS:-} != 1 ]]; then
  ((EUID == 0)) || { echo "mixin-job.sh needs root (network namespace)" >&2; exit 2; }
  e2e_netns_run mixin-job "$0" "$@"
  exit $?
fi

RUN_DIR="$E2E_WORK/mixin-job"
rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR"
DOWN_TARGET=127.0.0.1:9399
cleanup() {
  [[ -n $E2E_PROM_PID ]] && kill "$E2E_PROM_PID" 2>/dev/null && wait "$E2E_PROM_PID" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# ---- 1. render
RULES="$RUN_DIR/pg-ha.rules.yml"
if jsonnet -S --tla-code 'config={jobSelector: "job=\"pg-ha\"", forDurations+: {PatroniExporterDown: "10s"}}' \
     "$E2E_REPO/mixin/rules.jsonnet" >"$RULES" 2>"$RUN_DIR/jsonnet.err"; then
  pass "jsonnet renders mixin/rules.jsonnet with jobSelector job=\"pg-ha\""
else
  fail "jsonnet render: $(cat "$RUN_DIR/jsonnet.err")"; e2e_summary; exit 1
fi
check "promtool check rules accepts the rendered file" promtool check rules "$RULES"
# the whole difference: the selector, the for: and the description's "for <duration>"
changed=$(diff "$E2E_REPO/alerts/patroni-raft.rules.yml" "$RULES" | grep '^[<>]' | sed 's/^\(.\) */\1 /' | sort)
# shellcheck disable=SC2016  # the Go templates are literal
want='< expr: up{job=~".*patroni.*"} == 0
< for: 5m
< Scrape target {{ $labels.instance }} of job {{ $labels.job }} has been down for 5m
> expr: up{job="pg-ha"} == 0
> for: 10s
> Scrape target {{ $labels.instance }} of job {{ $labels.job }} has been down for 10s'
want=$(sort <<<"$want")
if [[ $changed == "$want" ]]; then
  pass "only PatroniExporterDown's selector, for: and the description's duration differ from the shipped file"
else
  fail "the rendered file differs from the shipped one otherwise: $changed"
fi
check "the rendered PatroniExporterDown selects job=\"pg-ha\"" grep -qxF '        expr: up{job="pg-ha"} == 0' "$RULES"

# ---- 2. a real Prometheus with the rendered rules, job pg-ha
cat >"$RUN_DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - $RULES
scrape_configs:
  - job_name: pg-ha
    static_configs:
      - targets: ['${E2E_PROM#http://}', '$DOWN_TARGET']
YAML
prometheus --config.file "$RUN_DIR/prometheus.yml" --storage.tsdb.path "$RUN_DIR/prometheus-data" \
  --web.listen-address "${E2E_PROM#http://}" >"$RUN_DIR/prometheus.log" 2>&1 &
E2E_PROM_PID=$!
deadline=$(($(date +%s) + 60))
until curl -fs -o /dev/null -m 2 "$E2E_PROM/-/ready"; do
  if (($(date +%s) >= deadline)); then
    fail "Prometheus ready within 60 s"; tail -20 "$RUN_DIR/prometheus.log" >&2; e2e_summary; exit 1
  fi
  sleep 0.5
done
pass "Prometheus $(prometheus --version 2>&1 | awk 'NR==1 {print $3}') ready on $E2E_PROM"

rule=$(curl -fs -m 3 "$E2E_PROM/api/v1/rules" | jq -c '[.data.groups[].rules[] | select(.name == "PatroniExporterDown") | {query, duration}] | first')
check "Prometheus loaded PatroniExporterDown as up{job=\"pg-ha\"} == 0, for 10 s ($rule)" \
  test "$rule" = '{"query":"up{job=\"pg-ha\"} == 0","duration":10}'

alert_state() { # alert_state INSTANCE -> pending|firing|"" of PatroniExporterDown{job="pg-ha",instance=INSTANCE}
  e2e_prom_alerts | jq -r --arg i "$1" '[(.data.alerts // [])[] | select(.labels.alertname == "PatroniExporterDown"
    and .labels.job == "pg-ha" and .labels.instance == $i) | .state] | first // ""'
}
t0=$(e2e_now); seen_pending=0; state=""
while :; do
  state=$(alert_state "$DOWN_TARGET")
  [[ $state == pending ]] && seen_pending=1
  [[ $state == firing ]] && break
  (($(date +%s) - ${t0%.*} > 60)) && break
  sleep 0.5
done
elapsed=$(e2e_since "$t0")
check "PatroniExporterDown went pending for instance $DOWN_TARGET, job pg-ha" test "$seen_pending" = 1
check "PatroniExporterDown fires for instance $DOWN_TARGET, job pg-ha (${elapsed} s after Prometheus was ready)" \
  test "$state" = firing
check "no PatroniExporterDown for the pg-ha target that is up (${E2E_PROM#http://})" \
  test "$(alert_state "${E2E_PROM#http://}")" = ""
e2e_prom_alerts | jq '.data.alerts' >"$RUN_DIR/alerts.json"
up_down=$(curl -fs -m 3 "$E2E_PROM/api/v1/query" --data-urlencode 'query=up{job="pg-ha"} == 0' | jq '.data.result | length')
shipped=$(curl -fs -m 3 "$E2E_PROM/api/v1/query" --data-urlencode 'query=up{job=~".*patroni.*"} == 0' | jq '.data.result | length')
check "one pg-ha target is down (up{job=\"pg-ha\"} == 0: $up_down series)" test "$up_down" = 1
check "the shipped selector up{job=~\".*patroni.*\"} == 0 matches nothing here ($shipped series): only the rendered rules see job pg-ha" \
  test "$shipped" = 0

e2e_summary
