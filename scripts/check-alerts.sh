#!/usr/bin/env bash
# Check the Prometheus alert rules, their unit tests, the Alertmanager example and the runbooks.
#
#   scripts/check-alerts.sh
#
# Needs promtool and amtool on PATH (or PROMTOOL=/AMTOOL=), and jsonnet. It installs nothing; on Debian:
#   apt-get install -y --no-install-recommends prometheus prometheus-alertmanager jsonnet python3-yaml
# Checks:
#   0. alerts/patroni-raft.rules.yml and alerts/patroni-compat.rules.yml are byte for byte what the
#      mixin renders (scripts/render-mixin.sh --check); alerts/tests/compat.test.yml is what
#      scripts/compat-test.py makes from the golden /metrics and Patroni's own captured /metrics
#   1. promtool check rules alerts/*.rules.yml
#   2. promtool test rules alerts/tests/*.yml        (prints "N passed, 0 failed")
#   3. amtool check-config alerts/alertmanager.example.yml, and routing: critical -> pager
#   4. every alert: severity in critical|warning|info, summary, description, runbook_url
#      = .../docs/runbooks.md#<alertname lowercased>, a "## <AlertName>" section in
#      docs/runbooks.md, at least one firing expectation in the tests, only known metric names,
#      no rate()/irate()/increase()/resets() over a non-counter and no deriv()/delta()/idelta()/
#      predict_linear() over a Raft term or index (scripts/metric_names.py: function_misuse)
set -euo pipefail
cd "$(dirname "$0")/.."

PROMTOOL="${PROMTOOL:-$(command -v promtool || true)}"
AMTOOL="${AMTOOL:-$(command -v amtool || true)}"
missing=""
[ -n "$PROMTOOL" ] || missing="$missing promtool (Debian package: prometheus)"
[ -n "$AMTOOL" ] || missing="$missing amtool (Debian package: prometheus-alertmanager)"
command -v "${JSONNET:-jsonnet}" >/dev/null || missing="$missing jsonnet (Debian package: jsonnet)"
if [ -n "$missing" ]; then
  echo "error: missing tool(s):$missing" >&2
  echo "  install: apt-get install -y --no-install-recommends prometheus prometheus-alertmanager jsonnet" >&2
  exit 1
fi
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || { echo "error: python3 not found" >&2; exit 1; }

RULES=(alerts/*.rules.yml)
TESTS=(alerts/tests/*.yml)
AM=alerts/alertmanager.example.yml
RUNBOOK=docs/runbooks.md

echo "== mixin: the shipped rules are its rendering"
scripts/render-mixin.sh --check
"$PY" scripts/compat-test.py --check

echo "== promtool check rules"
"$PROMTOOL" check rules "${RULES[@]}"

echo "== promtool test rules"
out="$(mktemp)"; trap 'rm -f "$out"' EXIT
set +e
"$PROMTOOL" test rules "${TESTS[@]}" >"$out" 2>&1
rc=$?
set -e
cat "$out"
nfiles="${#TESTS[@]}"

echo "== amtool check-config"
"$AMTOOL" check-config "$AM"
route() { "$AMTOOL" config routes test --config.file="$AM" "$@" 2>/dev/null; }
[ "$(route severity=critical alertname=PatroniRaftQuorumLost scope=pg-test)" = pager ] \
  || { echo "error: critical alerts do not route to the pager receiver" >&2; exit 1; }
[ "$(route severity=warning alertname=PatroniRoleMismatch scope=pg-test)" != pager ] \
  || { echo "error: warnings route to the pager receiver" >&2; exit 1; }
echo "routing: critical -> pager, warning -> not pager: OK"

echo "== alert metadata, runbooks, test coverage, metric names"
"$PY" - "$RUNBOOK" "${RULES[@]}" -- "${TESTS[@]}" <<'PYEOF'
import re, sys
sys.path.insert(0, "scripts")
from metric_names import exposed, used_in, types, function_misuse
args = sys.argv[1:]
runbook = args[0]
sep = args.index("--")
rules, tests = args[1:sep], args[sep + 1:]
try:
    import yaml
except ImportError:
    yaml = None
BASE = "file:///usr/share/doc/patroni-raft-exporter/docs/runbooks.md#"
known = exposed() | {"up"}
family_types = types()
# the function check must be able to fail: a counter function and a slope over Raft gauges
assert function_misuse("sum(rate(patroni_raft_commit_index[5m]))", family_types), "function_misuse self-test"
assert function_misuse("deriv(patroni_raft_term{x=\"y\"}[10m])", family_types), "function_misuse self-test"
assert not function_misuse("increase(patroni_raft_leader_changes_total[1h])", family_types), "function_misuse self-test"
headings = set(re.findall(r"^## (\S+)\s*$", open(runbook).read(), re.M))
test_text = "".join(open(t).read() for t in tests)
errors, alerts = [], []
for rf in rules:
    if yaml:
        doc = yaml.safe_load(open(rf))
        rs = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
        for r in (r for g in doc["groups"] for r in g["rules"] if "record" in r):
            for m in used_in(r["expr"]) - known:
                errors.append(f"recording rule {r['record']}: unknown metric {m}")
            errors += [f"recording rule {r['record']}: {e}" for e in function_misuse(r["expr"], family_types)]
    else:  # minimal fallback: names only
        rs = [{"alert": a} for a in re.findall(r"^\s*- alert:\s*(\S+)", open(rf).read(), re.M)]
    for r in rs:
        a = r["alert"]; alerts.append(a)
        if yaml:
            labels, ann = r.get("labels", {}), r.get("annotations", {})
            if labels.get("severity") not in ("critical", "warning", "info"):
                errors.append(f"{a}: severity must be critical|warning|info, got {labels.get('severity')!r}")
            for k in ("summary", "description", "runbook_url"):
                if not str(ann.get(k, "")).strip():
                    errors.append(f"{a}: annotation {k} missing")
            if "\n" in str(ann.get("summary", "")).strip():
                errors.append(f"{a}: summary must be one line")
            if ann.get("runbook_url") != BASE + a.lower():
                errors.append(f"{a}: runbook_url must be {BASE + a.lower()}")
            if "$labels" not in str(ann.get("description", "")) or "$value" not in str(ann.get("description", "")):
                errors.append(f"{a}: description must show labels and $value")
            for m in used_in(r["expr"]) - known:
                errors.append(f"{a}: unknown metric {m}")
            errors += [f"{a}: {e}" for e in function_misuse(r["expr"], family_types)]
            # A query's series come back in no fixed order: a template that lists several of
            # them must sort them, or the text changes between evaluations (it made the promtool
            # tests fail 1 run in 6, and Alertmanager sees a changed annotation as a new one).
            for k, text in ann.items():
                text = str(text)
                for act in re.finditer(r"\{\{-?\s*(range|with)\s+(.*?)\s*-?\}\}", text):
                    verb, pipe = act.groups()
                    if not re.search(r"\|\s*query\b", pipe) or "sortByLabel" in pipe:
                        continue
                    body = re.split(r"\{\{-?\s*(?:end|else)\b", text[act.end():], maxsplit=1)[0]
                    if verb == "range" or re.search(r"\{\{-?\s*range\s+(?:\$\w+\s*,\s*)?(?:\$\w+\s*:=\s*)?\.\s*-?\}\}", body):
                        errors.append(f"{a}: {k} lists the series of a query unsorted (add | sortByLabel \"label\"): {pipe}")
        if a not in headings:
            errors.append(f"{a}: no '## {a}' section in {runbook}")
        if not re.search(rf"alertname: {a}\b[^\n]*\n\s*exp_alerts:\s*\n\s*- exp_labels", test_text):
            errors.append(f"{a}: no test expects it to fire")
        if not re.search(rf"alertname: {a}, exp_alerts: \[\]|alertname: {a}\s*\n\s*exp_alerts: \[\]", test_text):
            errors.append(f"{a}: no test expects it to stay silent")
if len(set(alerts)) != len(alerts):
    errors.append("duplicate alert names")
if errors:
    print("\n".join("error: " + e for e in errors), file=sys.stderr); sys.exit(1)
print(f"{len(alerts)} alerts: metadata, runbook sections, firing and silent tests, metric names OK"
      + ("" if yaml else " (PyYAML missing: only names/runbooks/tests checked)"))
PYEOF

ngroups="$(cat "${TESTS[@]}" | grep -cE '^  - name:' || true)"
nchecks="$(cat "${TESTS[@]}" | grep -cE '^\s*- (eval_time:|\{eval_time:)' || true)"
if [ "$rc" != 0 ]; then
  nfailed="$(grep -E '^\s*name: ' "$out" | sort -u | wc -l)"
  [ "$nfailed" -gt 0 ] || nfailed="$nfiles"
  echo "promtool test rules failed" >&2
  echo "alert tests: $((ngroups - nfailed)) passed, $nfailed failed"
  exit 1
fi
echo "promtool: $nfiles test files, $ngroups test groups, $nchecks alert checks"
echo "alert tests: $ngroups passed, 0 failed"
