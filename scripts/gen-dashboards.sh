#!/usr/bin/env bash
# Regenerate the Grafana dashboards dashboards/*.json from dashboards/src/*.py
# (Grafana's typed builder, PyPI grafana-foundation-sdk, pinned in dashboards/requirements.txt)
# and validate them: metric names, datasource variable, uids, and the schema of the SDK's typed
# models (scripts/dashboard_schema.py).
#
#   scripts/gen-dashboards.sh           regenerate dashboards/*.json, then validate
#   scripts/gen-dashboards.sh --check   regenerate into a temp dir, validate, fail if the
#                                       committed dashboards/*.json differ (for CI)
#
# Validation includes panel coverage: every metric family of the golden /metrics output is used
# by some panel's query, or docs/metrics.md gives the reason in "Not on a dashboard panel".
# No rate()/irate()/increase()/resets() over a family that is not a counter, no
# deriv()/delta()/idelta()/predict_linear() over a Raft term or index (they go down after a
# restart or crash): scripts/metric_names.py function_misuse, also used by scripts/check-alerts.sh.
#
# The venv is created from /usr/bin/python3 in .work/venv-dash (VENV= to override) when missing
# or when dashboards/requirements.txt changed; it needs PyPI the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/check-option.sh "$@"   # sets CHECK

VENV="${VENV:-.work/venv-dash}"
PY="${PYTHON:-/usr/bin/python3}"
REQ=dashboards/requirements.txt
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQ" "$VENV/.requirements.txt"; then
  command -v "$PY" >/dev/null || { echo "error: $PY not found (install python3 and python3-venv)" >&2; exit 1; }
  echo "creating venv $VENV ($PY, $REQ)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" || { echo "error: '$PY -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
  cp "$REQ" "$VENV/.requirements.txt"
fi

if [ "$CHECK" = 1 ]; then
  OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT
else
  OUT=dashboards
fi
VENV_PY="$(cd "$VENV" && pwd)/bin/python"   # absolute: VENV may be given either way
(cd dashboards/src && "$VENV_PY" generate.py "$( [ "$OUT" = dashboards ] && echo .. || echo "$OUT")")

# ---- validation: JSON parses, stable uid, variables, every panel inside the 24 columns and
#      none overlapping, datasource on every panel/target/annotation,
#      every metric name used in an expression is one the exporter exposes, no function misused
#      on its type (function_misuse).
"$VENV/bin/python" - "$OUT" <<'PYEOF'
import json, re, sys
from pathlib import Path
sys.path.insert(0, "scripts")
from metric_names import exposed, used_in as metrics_in, types, function_misuse
out = Path(sys.argv[1])
known = exposed()
family_types = types()
want_uids = {"patroni-cluster.json": "patroni-raft-cluster", "patroni-raft.json": "patroni-raft-raft",
             "patroni-fleet.json": "patroni-raft-fleet"}
DS = "${datasource}"
errors, nexpr = [], 0
for name, uid in want_uids.items():
    f = out / name
    try:
        d = json.loads(f.read_text())
    except Exception as ex:
        errors.append(f"{f}: not valid JSON: {ex}"); continue
    if d.get("uid") != uid:
        errors.append(f"{name}: uid {d.get('uid')!r}, expected {uid!r}")
    var_names = [v.get("name") for v in d.get("templating", {}).get("list", [])]
    for v in ("datasource", "scope"):
        if v not in var_names:
            errors.append(f"{name}: template variable {v!r} missing")
    panels = list(d.get("panels", []))
    for p in list(panels):
        panels.extend(p.get("panels", []) or [])
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        errors.append(f"{name}: duplicate panel ids")
    # layout: the builder places panels left to right and wraps only once a row is full, so a
    # panel wider than what is left of its row sticks out of the 24 columns (Grafana then moves
    # it where the source did not put it); none may overlap another either
    boxes = [(p, p.get("gridPos") or {}) for p in panels]
    for p, g in boxes:
        if g.get("x", 0) + g.get("w", 0) > 24:
            errors.append(f"{name}: panel {p.get('id')} {p.get('title')!r}: x {g.get('x')} + w {g.get('w')} > 24 columns")
    for i, (p, g) in enumerate(boxes):
        for q, h in boxes[i + 1:]:
            if (g["x"] < h["x"] + h["w"] and h["x"] < g["x"] + g["w"]
                    and g["y"] < h["y"] + h["h"] and h["y"] < g["y"] + g["h"]):
                errors.append(f"{name}: panels {p.get('title')!r} and {q.get('title')!r} overlap")
    items = [(f"panel {p.get('id')} {p.get('title')!r}", p) for p in panels if p.get("type") != "row"]
    items += [(f"annotation {a.get('name')!r}", a) for a in d.get("annotations", {}).get("list", [])]
    for what, p in items:
        if (p.get("datasource") or {}).get("uid") != DS:
            errors.append(f"{name}: {what}: datasource is not {DS}")
        exprs = [p["expr"]] if "expr" in p else []
        for t in p.get("targets", []) or []:
            if (t.get("datasource") or {}).get("uid") != DS:
                errors.append(f"{name}: {what} target {t.get('refId')}: datasource is not {DS}")
            exprs.append(t.get("expr", ""))
        if p.get("type") not in (None, "row") and not exprs:
            errors.append(f"{name}: {what}: no query")
        for e in exprs:
            nexpr += 1
            if "$scope" not in e:
                errors.append(f"{name}: {what}: expression ignores $scope: {e}")
            for m in metrics_in(e) - known - {"up"}:
                errors.append(f"{name}: {what}: unknown metric {m} in {e}")
            errors += [f"{name}: {what}: {x} in {e}" for x in function_misuse(e, family_types)]
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, str) and v.get("type") == "query":
            for m in metrics_in(q) - known:
                errors.append(f"{name}: variable {v.get('name')}: unknown metric {m}")
# panel coverage (issue #22): every exposed family on a panel, or a reason in docs/metrics.md
from metric_names import coverage_errors
cov_errors, n_on, n_reason = coverage_errors(
    [json.loads((out / name).read_text()) for name in want_uids if (out / name).exists()])
errors += cov_errors
if errors:
    print("\n".join("error: " + e for e in errors), file=sys.stderr); sys.exit(1)
print(f"dashboards valid: {len(want_uids)} files, {nexpr} expressions, metric names all known")
print(f"panel coverage: {n_on} families on a panel, {n_reason} with a reason in docs/metrics.md, none left")
PYEOF

# ---- schema: decode into grafana-foundation-sdk's typed models, enums and scalar types valid,
#      no key the schema does not know (scripts/dashboard_schema.py says how, and self-tests).
"$VENV/bin/python" scripts/dashboard_schema.py "$OUT"/*.json

if [ "$CHECK" = 1 ]; then
  rc=0
  for f in "$OUT"/*.json; do
    b="dashboards/$(basename "$f")"
    if ! cmp -s "$f" "$b"; then
      echo "error: $b is not up to date with dashboards/src (run scripts/gen-dashboards.sh)" >&2
      diff -u "$b" "$f" | head -20 >&2 || true
      rc=1
    fi
  done
  [ "$rc" = 0 ] && echo "dashboards/*.json up to date"
  exit "$rc"
fi
