#!/usr/bin/env bash
# charm-monitoring.sh - issue #29 item 6: Charmed PostgreSQL's own Patroni alert rules and Patroni
# dashboard, UNCHANGED, on the exporter's compat records (alerts/patroni-compat.rules.yml).
# The files are read where scripts/install-deps.sh installed the charm's library package
# (postgresql-charms-single-kernel, pinned in tests/e2e/requirements-charm.txt, into
# $E2E_WORK/venv-charm): single_kernel_postgresql/payloads/vm/prometheus_alert_rules/
# patroni_rules.yaml and payloads/vm/grafana_dashboards/postgresql-patroni-metrics.json. Never
# copied into the repository; their sha256 is in results.tsv.
#
# A real 3-member Patroni + Raft cluster, TWO exporters (the README's recommended setup: one
# started from member 0's URL on :9393, one from member 1's on :9394, --poll.interval 2s) and TWO
# real Prometheus, both scraping and evaluating every 2 s, with the Juju topology labels
# (juju_model, juju_model_uuid, juju_application, juju_unit) the charm's COS scrape adds:
#   A (:9090) scrapes both exporters (job patroni-raft-exporter; juju_unit exporter/0 and
#     exporter/1, as two units) and evaluates our compat rules and the charm's Patroni rule file;
#   B (:9091) scrapes every member's OWN Patroni GET /metrics (job patroni, plus juju_unit per
#     member) and evaluates the charm's Patroni rule file: the reference, what the charm sees
#     today. They are two Prometheus because both sides have the same metric names.
#
#   1 healthy, watched HEALTHY_S (150 s): no charm alert pending or firing in A (nor in B);
#     in A every sample has sum by (scope) (patroni_master) 1, the charm's own
#     sum by (juju_model, juju_application, juju_model_uuid, scope) (patroni_master) 1 and 3
#     patroni_master series (one per member, not one per member and exporter).
#   2 the charm's Patroni dashboard: its template variables (label_values(patroni_version, scope)
#     and (patroni_version, service_name)) as Grafana asks them (/api/v1/label/L/values with
#     match[]=patroni_version) in A and in B; every panel query that reads a patroni_* name, its
#     variables substituted with those values, run in A (instant query) must return data, and in
#     B too (else the panel is empty with Patroni's own metrics as well, listed with the reason),
#     with as many series as in B and the same juju_unit values (the panels' legends).
#   3 the primary killed (cluster kill: Patroni SIGKILL, PostgreSQL immediate shutdown): until a
#     new primary is up and both Prometheus are quiet again (bounded FAILOVER_S), then the
#     ALERTS series of both, read back as a range query (step 1 s), must agree: the same charm
#     alerts, firing and resolved within TOLERANCE_S (10 s: the exporter's poll, 2 s + its 1 s
#     timeout, comes on top of the 2 s scrape and 2 s evaluation both sides share; the measured
#     differences are in results.tsv). Patroni 4.x's own /metrics has no patroni_master (only
#     patroni_primary), which the charm's PatroniHasNoLeader reads: with Patroni's own metrics
#     that rule cannot fire on 4.x, with the compat records it does; the script checks that
#     B has no patroni_master then, and expects exactly that one difference. While the killed
#     member is still listed by GET /cluster, A must have no compat series for it (its own
#     /patroni does not answer), like B whose scrape of it fails.
#   4 the member started again: cluster healthy (sync), no charm alert in A or B, A's
#     sum by (scope) (patroni_master) 1 over 3 members.
#   5 a switchover (patronictl), read back as in 3: PatroniMultipleLeaders and
#     PatroniPrimaryAndStandbyLeader never fire on the records (two exporters that polled before
#     the demotion and after the promotion must not make two primaries: the records take the
#     latest poll's view; on Patroni's own metrics the scrapes' skew can, recorded); PatroniPostgresqlDown (the
#     demoted primary's restart) fires on the records when GET /cluster (sampled each second by
#     the test: the DCS, where the records read the state, written once per HA loop) showed it
#     down for 6 s or more, within loop_wait + 10 s of Patroni's own metrics; never when GET
#     /cluster never showed it (a restart inside one HA loop: Patroni's own may); PatroniHasNoLeader (the real moment without a primary) recorded, not compared.
#
# Usage: tests/e2e/charm-monitoring.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# HEALTHY_S (150), FAILOVER_S (150) bound the phases; COMPAT_RULES names another compat rule file.
# Root only (network namespace). ~6 min per version; several versions run in parallel, each in
# its own namespace (logs in $E2E_WORK/charm-monitoring-VERSION.log, measurements in
# $E2E_WORK/charm-monitoring-VERSION/results.tsv, the dashboard queries and their answers in
# dashboard.tsv, the ALERTS read back in alerts-A.json/alerts-B.json).
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

CHARM_PKG=$(e2e_charm_package_dir || true)
if [[ ${E2E_IN_NETNS:-} != 1 && ! -d $CHARM_PKG ]]; then
  "$E2E_REPO/scripts/install-deps.sh" --no-apt --no-cargo --patroni "${1:-4.1.5}" >&2
  CHARM_PKG=$(e2e_charm_package_dir || true)
fi
E2E_TOOLS="prometheus python3" e2e_scenario charm-monitoring "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-charm-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
POLL=2                                        # exporters' --poll.interval (s)
HEALTHY_S=${HEALTHY_S:-150}
FAILOVER_S=${FAILOVER_S:-150}
TOLERANCE_S=10
# the compat rules under test (another file: to see this test fail on an earlier version of them)
COMPAT_RULES=${COMPAT_RULES:-$E2E_REPO/alerts/patroni-compat.rules.yml}
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter-a.log"
EXPORTER_B_LOG="$RUN_DIR/exporter-b.log"
PROM_A=http://127.0.0.1:9090
PROM_B=http://127.0.0.1:9091
S='scope="pg-test"'
CHARM_RULES="$CHARM_PKG/payloads/vm/prometheus_alert_rules/patroni_rules.yaml"
CHARM_DASHBOARD="$CHARM_PKG/payloads/vm/grafana_dashboards/postgresql-patroni-metrics.json"
CHARM_ALERTS='PatroniPostgresqlDown|PatroniMultipleLeaders|PatroniPrimaryAndStandbyLeader|PatroniHasNoLeader'
TOPOLOGY="{juju_model: pg, juju_model_uuid: 00000000-0000-4000-8000-000000000000, juju_application: postgresql}"

e2e_setup
e2e_log "=== Charmed PostgreSQL's monitoring on the compat records, Patroni $PATRONI_VERSION, run dir $RUN_DIR"
[[ -f $CHARM_RULES && -f $CHARM_DASHBOARD ]] || on_fail "the charm's files are not in $CHARM_PKG (scripts/install-deps.sh)"
CHARM_VERSION=$("$(e2e_charm_venv_dir)/bin/python" -c 'import importlib.metadata as m; print(m.version("postgresql-charms-single-kernel"))')
e2e_result setup "postgresql-charms-single-kernel" "$CHARM_VERSION"
e2e_result setup "compat rules" "$COMPAT_RULES"
e2e_result setup "rules: ${CHARM_RULES#"$CHARM_PKG"/} sha256" "$(sha256sum "$CHARM_RULES" | cut -c1-16)"
e2e_result setup "dashboard: ${CHARM_DASHBOARD#"$CHARM_PKG"/} sha256" "$(sha256sum "$CHARM_DASHBOARD" | cut -c1-16)"

# ---- helpers
# pq URL EXPR: the instant query's JSON result array ('null' when Prometheus does not answer)
pq() { curl -fs -m 5 "$1/api/v1/query" --data-urlencode "query=$2" 2>/dev/null | jq -c '.data.result' 2>/dev/null || echo null; }
# pv URL EXPR: the values of the instant query, one per line as "labels value"
pv() { pq "$1" "$2" | jq -r '.[]? | "\(.metric | del(.__name__) | to_entries | map("\(.key)=\(.value)") | join(",")) \(.value[1])"'; }
charm_alerts() { # charm_alerts URL -> "Name/state ..." of the charm's alerts active there
  curl -fs -m 3 "$1/api/v1/alerts" 2>/dev/null \
    | jq -r --arg re "^($CHARM_ALERTS)\$" '[(.data.alerts // [])[] | select(.labels.alertname | test($re)) | "\(.labels.alertname)/\(.state)"] | sort | join(" ")' \
    2>/dev/null || echo "?"
}
show_state() {
  echo "===== A (compat): $(charm_alerts "$PROM_A"); patroni_master: $(pv "$PROM_A" patroni_master | tr '\n' ';')"
  echo "===== B (Patroni's own): $(charm_alerts "$PROM_B"); patroni_primary: $(pv "$PROM_B" patroni_primary | tr '\n' ';')"
  e2e_show_metrics "exporter a" '^patroni_member_(api_up|reported_role\{.* 1$)'
}
start_prometheus() { # start_prometheus NAME URL SCRAPE_CONFIG RULE_FILE...
  local name=$1 url=$2 scrape=$3 dir="$RUN_DIR/prometheus-$1" pid
  shift 3
  mkdir -p "$dir"
  {
    printf '%s\n' 'global:' '  scrape_interval: 2s' '  evaluation_interval: 2s' 'rule_files:'
    printf '  - %s\n' "$@"
    printf '%s\n' 'scrape_configs:' "$scrape"
  } >"$dir/prometheus.yml"
  prometheus --config.file "$dir/prometheus.yml" --storage.tsdb.path "$dir/data" \
    --web.listen-address "${url#http://}" >"$dir/prometheus.log" 2>&1 9>&- &
  pid=$!
  E2E_PIDS+=("$pid")
  e2e_wait_http "$url/-/ready" 60 || on_fail "Prometheus $name not ready within 60 s (log $dir/prometheus.log)"
}
# compare_alerts PHASE EVENT T0 T1: the charm's alerts from T0 - 5 to T1 (epoch s) in A and in
# B, read back from the TSDB (step 1 s), and checked against each other. The reference is what
# the charm's rules give on Patroni's own metrics: B's ALERTS where Patroni's /metrics has
# patroni_master (3.x); on 4.x, which has only patroni_primary, the charm's expressions with
# patroni_master read as patroni_primary, run on B (ALERTS of B are recorded too). Every rule is
# `for: 0m`, so an alert's span is the span of its expression. Sets FIRED_A, FIRED_REF.
compare_alerts() {
  local phase=$1 event=$2 t0=$3 t1=$4 out off key a b ref d
  out="$RUN_DIR/alerts-$phase.tsv"
  python3 - "$PROM_A" "$PROM_B" "$CHARM_RULES" "$t0" "$t1" "$CHARM_ALERTS" >"$out" <<'PYEOF' || on_fail "$phase: reading the alerts back"
import json, sys, urllib.parse, urllib.request
import yaml
prom_a, prom_b, rules, t0, t1, names = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
def series(url, expr):
    q = urllib.parse.urlencode({"query": expr, "start": t0 - 5, "end": t1, "step": 1})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=10) as r:
        return json.load(r)["data"]["result"]
def span(results):
    ts = [float(t) - t0 for s in results for t, _ in s["values"]]
    return "%.0f..%.0f" % (min(ts), max(ts)) if ts else "-"
def alerts(url):
    out = {}
    for s in series(url, f'ALERTS{{alertname=~"{names}",alertstate="firing"}}'):
        out.setdefault(s["metric"]["alertname"], []).append(s)
    return {k: span(v) for k, v in out.items()}
a, b = alerts(prom_a), alerts(prom_b)
own_master = bool(series(prom_b, "patroni_master"))
for group in yaml.safe_load(open(rules))["groups"]:
    for rule in group["rules"]:
        name = rule["alert"]
        expr = rule["expr"] if own_master else rule["expr"].replace("patroni_master", "patroni_primary")
        ref = b.get(name, "-") if own_master else span(series(prom_b, expr))
        print(f"{name}\t{a.get(name, '-')}\t{b.get(name, '-')}\t{ref}")
PYEOF
  FIRED_A="" FIRED_REF="" DIFF=()
  while IFS=$'\t' read -r key a b ref; do
    d=$(awk -v a="$a" -v b="$ref" 'BEGIN { if (a == "-" || b == "-") { print "-"; exit }
      split(a, x, /\.\./); split(b, y, /\.\./); print (x[1] - y[1]) "/" (x[2] - y[2]) }')
    e2e_result "$phase" "$key, s after $event: A (compat) / B ALERTS / own metrics (ref) / A-ref start/end" "$a / $b / $ref / $d"
    [[ $a == - ]] || FIRED_A+=${FIRED_A:+ }$key
    [[ $ref == - ]] || FIRED_REF+=${FIRED_REF:+ }$key
    DIFF[$key]=$d
  done <"$out"
}
# late KEY TOLERANCE_S: rc 0 when the alert KEY fired in both and started or ended more than
# TOLERANCE_S apart (DIFF of the last compare_alerts)
late() { [[ ${DIFF[$1]:--} != - ]] && awk -v d="${DIFF[$1]}" -v tol="$2" 'BEGIN { split(d, x, "/"); exit !(x[1] > tol || x[1] < -tol || x[2] > tol || x[2] < -tol) }'; }
declare -A DIFF=()
within() { awk -v a="$(e2e_since "$1")" -v b="$2" 'BEGIN { exit !(a < b) }'; }   # within T0 S: less than S s since T0
# wait_quiet LIMIT_S CMD...: run CMD every second until it has held (rc 0) for 10 s running, so
# that what is read back next is the end of the event, not a pause in it; rc 1 when LIMIT_S
# pass first
wait_quiet() {
  local limit=$1 t0 since=""
  shift
  t0=$(e2e_now)
  while within "$t0" "$limit"; do
    if "$@"; then
      since=${since:-$(e2e_now)}
      within "$since" 10 || return 0
    else
      since=""
    fi
    sleep 1
  done
  return 1
}
# shellcheck disable=SC2317  # run by the conditions wait_quiet runs
charms_quiet() { [[ -z $(charm_alerts "$PROM_A") && -z $(charm_alerts "$PROM_B") ]]; }
hostport() { local u=${1#*://}; echo "${u%%/*}"; }

# ---- the cluster, two exporters, two Prometheus
cluster up --sync >&2 || on_fail "cluster up --sync"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, RAFT_PASS, ...
e2e_exporter "$POLL"
"$EXPORTER_BIN" --patroni.url "$MEMBER1_REST" --raft.password-file "$RUN_DIR/raft-secret" \
  --poll.interval "${POLL}s" --poll.timeout 1s --web.listen-address 127.0.0.1:9394 \
  >"$EXPORTER_B_LOG" 2>&1 9>&- &
EXPORTER_B_PID=$!
E2E_PIDS+=("$EXPORTER_B_PID")
# each exporter with its own juju_unit, as a Juju scrape of two units labels them
start_prometheus A "$PROM_A" "$(printf '%s\n' '  - job_name: patroni-raft-exporter' '    static_configs:' \
  "      - targets: ['127.0.0.1:9393']" "        labels: {juju_unit: exporter/0, ${TOPOLOGY#\{}" \
  "      - targets: ['127.0.0.1:9394']" "        labels: {juju_unit: exporter/1, ${TOPOLOGY#\{}")" \
  "$COMPAT_RULES" "$CHARM_RULES"
own_targets=""
for n in 0 1 2; do
  own_targets+="      - targets: ['$(hostport "$(e2e_rest "$n")")']"$'\n'"        labels: {juju_unit: postgresql/$n, ${TOPOLOGY#\{}"$'\n'
done
start_prometheus B "$PROM_B" "$(printf '%s\n' '  - job_name: patroni' '    static_configs:' "$own_targets")" "$CHARM_RULES"
for a in PatroniPostgresqlDown PatroniMultipleLeaders PatroniPrimaryAndStandbyLeader PatroniHasNoLeader; do
  E2E_PROM=$PROM_A check "A loaded the charm's rule $a" e2e_prom_rule_loaded "$a"
  E2E_PROM=$PROM_B check "B loaded the charm's rule $a" e2e_prom_rule_loaded "$a"
done

# ================================================================== 1. healthy, two exporters
e2e_log "=== 1: healthy cluster, two exporters: the charm's rules quiet for ${HEALTHY_S}s"
expect_healthy 1
T1=$(e2e_now)
until [[ $(pv "$PROM_A" 'count by (scope) (patroni_master)') == "scope=pg-test 3" \
         && $(pv "$PROM_B" 'count by (scope) (patroni_version)') == "scope=pg-test 3" ]]; do
  within "$T1" 60 || on_fail "1: A has no patroni_master of 3 members or B no patroni_version of 3 within 60 s"
  sleep 1
done
e2e_result 1 "Prometheus A and B have every member (s)" "$(e2e_since "$T1")"
# B's rules may still show an evaluation made before its last member's first scrape (the charm's
# `for: 0m` PatroniHasNoLeader fired there at the window's start on a loaded machine): the window
# starts when the reference is quiet too (A, the records under test, is not waited for)
until [[ -z $(charm_alerts "$PROM_B") ]]; do
  within "$T1" 90 || on_fail "1: B (Patroni's own /metrics) not quiet within 90 s: $(charm_alerts "$PROM_B")"
  sleep 1
done
e2e_result 1 "B quiet (s)" "$(e2e_since "$T1")"
T1=$(e2e_now) samples=0 bad_alert="" bad_sum="" bad_count="" b_alert=""
while within "$T1" "$HEALTHY_S"; do
  el=$(e2e_since "$T1")
  a=$(charm_alerts "$PROM_A"); [[ -z $a ]] || bad_alert+=" [$a]@${el}s"
  b=$(charm_alerts "$PROM_B"); [[ -z $b ]] || b_alert+=" [$b]@${el}s"
  v=$(pv "$PROM_A" 'sum by (scope) (patroni_master)'); [[ $v == "scope=pg-test 1" ]] || bad_sum+=" [$v]@${el}s"
  v=$(pv "$PROM_A" 'sum by (juju_model, juju_application, juju_model_uuid, scope) (patroni_master)')
  [[ $v == "juju_application=postgresql,juju_model=pg,juju_model_uuid=00000000-0000-4000-8000-000000000000,scope=pg-test 1" ]] \
    || bad_sum+=" [charm's sum: $v]@${el}s"
  v=$(pv "$PROM_A" 'count(patroni_master)'); [[ $v == " 3" ]] || bad_count+=" [$v]@${el}s"
  samples=$((samples + 1))
  sleep 2
done
e2e_result 1 "samples over ${HEALTHY_S}s" "$samples"
check "1: no charm alert pending or firing in A over ${HEALTHY_S}s ($samples samples)${bad_alert:+: $bad_alert}" test -z "$bad_alert"
check "1: sum by (scope) (patroni_master) 1, and the charm's sum by (juju_*, scope) 1, in every sample${bad_sum:+: $bad_sum}" test -z "$bad_sum"
check "1: 3 patroni_master series (one per member, not per exporter) in every sample${bad_count:+: $bad_count}" test -z "$bad_count"
check "1: no charm alert in B (Patroni's own /metrics) either${b_alert:+: $b_alert}" test -z "$b_alert"

# ================================================================== 2. the charm's dashboard
e2e_log "=== 2: the charm's Patroni dashboard, every patroni_* query"
# Grafana's label_values(METRIC, LABEL): /api/v1/label/LABEL/values?match[]=METRIC
label_values() { # label_values URL METRIC LABEL -> the values, comma-separated
  local js
  js=$(curl -fsG -m 5 "$1/api/v1/label/$3/values" --data-urlencode "match[]=$2") || on_fail "2: label values of $3 in $1"
  jq -r '.data // [] | join(",")' <<<"$js"
}
python3 - "$CHARM_DASHBOARD" >"$RUN_DIR/dashboard-queries.tsv" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for v in d["templating"]["list"]:
    q = v.get("query")
    q = q.get("query") if isinstance(q, dict) else q
    if isinstance(q, str) and "patroni_" in q:
        print(f"var\t{v['name']}\t{q}")
def walk(panels):
    for p in panels:
        for t in p.get("targets") or []:
            if "patroni_" in (t.get("expr") or ""):
                print(f"panel\t{p.get('title')} (id {p.get('id')}, {t.get('refId')})\t{t['expr']}")
        walk(p.get("panels") or [])
walk(d["panels"])
PYEOF
declare -A VAR_A VAR_B
while IFS=$'\t' read -r kind name q; do
  [[ $kind == var ]] || continue
  [[ $q =~ ^label_values\(([a-z_]+),\ *([a-z_]+)\)$ ]] || on_fail "2: template variable $name: a query this script does not read: $q"
  metric=${BASH_REMATCH[1]} label=${BASH_REMATCH[2]}
  VAR_A[$name]=$(label_values "$PROM_A" "$metric" "$label") || on_fail "2: template variable $name in A"
  VAR_B[$name]=$(label_values "$PROM_B" "$metric" "$label") || on_fail "2: template variable $name in B"
  e2e_result 2 "variable $name = $q: A / B" "'${VAR_A[$name]}' / '${VAR_B[$name]}'"
  if [[ -n ${VAR_B[$name]} ]]; then
    check "2: variable $name has B's values in A ('${VAR_A[$name]}')" test "${VAR_A[$name]}" = "${VAR_B[$name]}"
  else
    # no scrape puts this label on Patroni's own series either: Grafana then substitutes ''
    check "2: variable $name is empty in A as in B (no such label in either)" test -z "${VAR_A[$name]}"
  fi
done <"$RUN_DIR/dashboard-queries.tsv"
check "2: variable scope_name has a value in A (${VAR_A[scope_name]:-})" test -n "${VAR_A[scope_name]:-}"
printf 'panel\tquery\tA series\tB series\n' >"$RUN_DIR/dashboard.tsv"
n_queries=0 empty_a="" empty_both="" differ="" units=""
while IFS=$'\t' read -r kind name q; do
  [[ $kind == panel ]] || continue
  qa=$q qb=$q
  for v in "${!VAR_A[@]}"; do
    qa=${qa//"\${$v}"/${VAR_A[$v]}}; qa=${qa//"\$$v"/${VAR_A[$v]}}
    qb=${qb//"\${$v}"/${VAR_B[$v]}}; qb=${qb//"\$$v"/${VAR_B[$v]}}
  done
  [[ $qa != *'$'* ]] || on_fail "2: $name: a variable left in $qa"
  na=$(pq "$PROM_A" "$qa" | jq 'length'); nb=$(pq "$PROM_B" "$qb" | jq 'length')
  printf '%s\t%s\t%s\t%s\n' "$name" "$qa" "$na" "$nb" >>"$RUN_DIR/dashboard.tsv"
  n_queries=$((n_queries + 1))
  if [[ $na == 0 && $nb == 0 ]]; then empty_both+=" [$name: $qa]"
  elif [[ $na == 0 ]]; then empty_a+=" [$name: $qa]"; fi
  # one series per member in both, with the member's own unit (the legends: {{juju_unit}})
  [[ $na == "$nb" ]] || differ+=" [$name: A $na, B $nb]"
  ua=$(pq "$PROM_A" "$qa" | jq -c '[.[].metric.juju_unit] | sort'); ub=$(pq "$PROM_B" "$qb" | jq -c '[.[].metric.juju_unit] | sort')
  [[ $ua == "$ub" ]] || units+=" [$name: A $ua, B $ub]"
done <"$RUN_DIR/dashboard-queries.tsv"
e2e_result 2 "patroni_* panel queries" "$n_queries"
e2e_result 2 "empty in A and in B (Patroni's own)" "${empty_both:-none}"
check "2: the dashboard has patroni_* panel queries ($n_queries)" test "$n_queries" -gt 10
check "2: every panel query has as many series in A as in B${differ:+:$differ}" test -z "$differ"
check "2: every panel query has the juju_unit values of B (the legends)${units:+:$units}" test -z "$units"
check "2: every patroni_* panel query returns data in A${empty_a:+ (empty:$empty_a)}${empty_both:+ (empty with the members own metrics too:$empty_both)}" \
  test -z "$empty_a$empty_both"

# ================================================================== 3. the primary killed
leader=$(e2e_cluster_leader) || on_fail "3: GET /cluster names a leader"
leader_i=${leader##*-}
own_master=$(pv "$PROM_B" 'count(patroni_master)')
e2e_log "=== 3: the primary $leader killed; B's patroni_master series: '${own_master:-none}'"
T_KILL=$(date +%s)
cluster kill "$leader_i" >&2 || on_fail "3: cluster kill $leader_i"
# while GET /cluster still lists it, the killed member has no compat series in A
T3=$(e2e_now) gone=""
while within "$T3" 20; do
  if [[ -z $(pv "$PROM_A" "{__name__=~\"patroni_.+\",name=\"$leader\"}") ]]; then gone=$(e2e_since "$T3"); break; fi
  sleep 0.5
done
listed=$(metric_value patroni_member_in_dcs "$S,member=\"$leader\"" 2>/dev/null || echo absent)
e2e_result 3 "kill -> no compat series of $leader in A (s); its patroni_member_in_dcs then" "${gone:-never} ; $listed"
check "3: the killed $leader has no compat series in A within 20 s (GET /cluster lists it: in_dcs $listed)" test -n "$gone"
T3=$(e2e_now) new=""
# shellcheck disable=SC2317  # run by wait_quiet
failed_over() {
  if [[ -z $new ]]; then
    l=$(e2e_cluster_leader 2>/dev/null || true)
    if [[ -n $l && $l != "$leader" && $(e2e_own_role "${l##*-}") =~ ^(primary|master)$ ]]; then
      new=$l; e2e_result 3 "kill -> $new primary (s)" "$(e2e_since "$T3")"
    fi
  fi
  [[ -n $new ]] && charms_quiet && [[ $(pv "$PROM_A" 'sum(patroni_master)') == " 1" ]]
}
wait_quiet "$FAILOVER_S" failed_over || true   # read back as it is: the alerts say the rest
[[ -n $new ]] || on_fail "3: no new primary within ${FAILOVER_S}s"
T_END=$(date +%s)
e2e_result 3 "kill -> both Prometheus quiet 10 s (s)" "$((T_END - T_KILL))"
compare_alerts 3 "the kill" "$T_KILL" "$T_END"
check "3: the charm's rules fire on the compat records as on Patroni's own metrics ('${FIRED_A:-none}' vs '${FIRED_REF:-none}')" \
  test "$FIRED_A" = "$FIRED_REF"
off=""
for a in "${!DIFF[@]}"; do if late "$a" "$TOLERANCE_S"; then off+=" $a ${DIFF[$a]}"; fi; done
check "3: each starts and ends within ${TOLERANCE_S}s of the reference${off:+ (off:$off)}" test -z "$off"
check "3: Patroni's own metrics saw the failover: the charm's rules fire on them (${FIRED_REF:-none})" test -n "$FIRED_REF"

# ================================================================== 4. the member back
e2e_log "=== 4: $leader started again"
cluster start "$leader_i" >&2 || on_fail "4: cluster start $leader_i"
cluster wait --sync >&2 || on_fail "4: cluster wait --sync"
T4=$(e2e_now)
# shellcheck disable=SC2317  # run by wait_quiet
healthy_again() {
  [[ $(pv "$PROM_A" 'count(patroni_master)') == " 3" && $(pv "$PROM_A" 'sum by (scope) (patroni_master)') == "scope=pg-test 1" ]] \
    && charms_quiet
}
# quiet for 10 s, so that what phase 5 reads back is the switchover's own
wait_quiet 90 healthy_again \
  || on_fail "4: A: $(pv "$PROM_A" 'sum by (scope) (patroni_master)') over $(pv "$PROM_A" 'count(patroni_master)') members; alerts A [$(charm_alerts "$PROM_A")] B [$(charm_alerts "$PROM_B")]"
pass "4: healthy again: 3 members, sum by (scope) (patroni_master) 1, no charm alert in A or B for 10 s ($(e2e_since "$T4")s)"

# ================================================================== 5. a switchover
leader=$(e2e_cluster_leader) || on_fail "5: GET /cluster names a leader"
candidate=postgresql-$(( (${leader##*-} + 1) % 3 ))
e2e_log "=== 5: switchover $leader -> $candidate"
# the ground truth of the records: the demoted primary's state in GET /cluster (the DCS, where the
# records read it; Patroni writes it once per HA loop, so a restart inside one loop never shows
# there), sampled each second by the test itself: "epoch state" lines
# shellcheck disable=SC2317  # run in the background
dcs_states() {
  local n st
  while :; do
    st=absent
    for n in 0 1 2; do
      st=$(curl -sf -m 2 "$(e2e_rest "$n")/cluster" 2>/dev/null \
        | jq -er --arg m "$1" '[.members[] | select(.name == $m) | .state][0] // "absent"' 2>/dev/null) && break
      st=unread
    done
    echo "$(date +%s) $st"
    sleep 1
  done
}
dcs_states "$leader" >"$RUN_DIR/dcs-states-5.txt" 2>/dev/null &
DCS_SAMPLER=$!
E2E_PIDS+=("$DCS_SAMPLER")
T_SW=$(date +%s)
cluster ctl switchover pg-test --leader "$leader" --candidate "$candidate" --force >"$RUN_DIR/switchover.txt" 2>&1 \
  || { cat "$RUN_DIR/switchover.txt" >&2; on_fail "5: patronictl switchover"; }
# shellcheck disable=SC2317  # run by wait_quiet
switched_over() {
  [[ $(e2e_cluster_leader 2>/dev/null || true) == "$candidate" ]] && charms_quiet \
    && [[ $(pv "$PROM_A" "patroni_master{name=\"$candidate\"}") == *" 1" && $(pv "$PROM_A" 'sum(patroni_master)') == " 1" ]]
}
wait_quiet 90 switched_over || on_fail "5: $candidate not the leader with both Prometheus quiet within 90 s"
T_END=$(date +%s)
kill "$DCS_SAMPLER" 2>/dev/null || true
e2e_result 5 "switchover -> $candidate leader, both Prometheus quiet 10 s (s)" "$((T_END - T_SW))"
compare_alerts 5 "the switchover" "$T_SW" "$T_END"
# the longest run of samples in which GET /cluster showed the demoted primary not running (s)
DCS_DOWN_S=$(awk '$2 == "unread" { next } $2 ~ /^(running|streaming|absent)$/ { run = 0; next }
  { if (!run) first = $1; run = 1; if ($1 - first + 1 > max) max = $1 - first + 1 } END { print max + 0 }' "$RUN_DIR/dcs-states-5.txt")
e2e_result 5 "$leader not running in GET /cluster: longest stretch (s; dcs-states-5.txt)" "$DCS_DOWN_S"
# never two primaries, never a primary and a standby leader: neither alert may fire on the
# records. On Patroni's own metrics the members are scraped at different moments, and an old
# primary scraped before its demotion next to a new one scraped after its promotion does make
# two for an evaluation (seen on 4.1.5, charm's expression on patroni_primary): recorded only
for a in PatroniMultipleLeaders PatroniPrimaryAndStandbyLeader; do
  check "5: $a did not fire on the compat records ('${FIRED_A:-none}')" test -z "$(grep -ow "$a" <<<"$FIRED_A" || true)"
  e2e_result 5 "$a on Patroni's own metrics (scrape skew)" "$(grep -ow "$a" <<<"$FIRED_REF" >/dev/null && echo fired || echo no)"
done
# the demoted primary's PostgreSQL restarts. The records read its state from GET /cluster, which
# Patroni writes once per HA loop: a restart within one loop shows on Patroni's own metrics (a
# scrape during it) and never in the DCS. So the records are held to the DCS: shown there for a
# poll, a scrape and an evaluation (3 x 2 s), the records fire, and within loop_wait + 10 s of
# Patroni's own metrics when those fire too; never shown there, they do not fire.
pd=PatroniPostgresqlDown
e2e_result 5 "$pd fired: records / Patroni's own metrics" \
  "$(grep -ow "$pd" <<<"$FIRED_A" || echo no) / $(grep -ow "$pd" <<<"$FIRED_REF" || echo no)"
if ((DCS_DOWN_S >= 3 * POLL)); then
  check "5: $pd (the demoted primary's restart, ${DCS_DOWN_S}s in GET /cluster) fired on the compat records" test -n "$(grep -ow "$pd" <<<"$FIRED_A" || true)"
elif ((DCS_DOWN_S == 0)); then
  check "5: $pd not fired on the compat records: GET /cluster never showed $leader down" test -z "$(grep -ow "$pd" <<<"$FIRED_A" || true)"
fi
if [[ " $FIRED_REF " == *" $pd "* && " $FIRED_A " == *" $pd "* ]]; then
  # shellcheck disable=SC2317  # run by check
  pd_close() { [[ ${DIFF[$pd]:--} != - ]] && ! late "$pd" $((10 + TOLERANCE_S)); }
  check "5: $pd on the records starting and ending within loop_wait + ${TOLERANCE_S}s of Patroni's own (${DIFF[$pd]:--})" pd_close
fi
# the moment without a primary (demote, then promote) is real: either side may sample it or not
e2e_result 5 "PatroniHasNoLeader (a moment without primary) fired: A / own" \
  "$(grep -ow PatroniHasNoLeader <<<"$FIRED_A" || echo no) / $(grep -ow PatroniHasNoLeader <<<"$FIRED_REF" || echo no)"

kill -0 "$EXPORTER_B_PID" 2>/dev/null || on_fail "exporter b died"
if grep -q panicked "$EXPORTER_B_LOG"; then on_fail "exporter b's log shows a panic"; fi
e2e_finish "Charmed PostgreSQL's monitoring on the compat records"
}
