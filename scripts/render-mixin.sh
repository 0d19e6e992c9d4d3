#!/usr/bin/env bash
# Render the shipped alert rules alerts/patroni-raft.rules.yml from the mixin (mixin/), with
# the defaults of mixin/config.libsonnet, and the recording rules of Patroni's own /metrics
# names alerts/patroni-compat.rules.yml (mixin/compat.libsonnet).
#
#   scripts/render-mixin.sh            write both files
#   scripts/render-mixin.sh --check    fail if a shipped file differs from the rendering by a
#                                      single byte (CI: scripts/check-alerts.sh runs this)
#
# Both modes also check that the rendered texts (what Prometheus loads) and the mixin's data
# (prometheusAlerts and prometheusRules, what mixin tooling such as mixtool takes) are the same
# rules, and that the dashboards of grafanaDashboards are the generated dashboards/*.json.
# Needs jsonnet (Debian package: jsonnet) and python3 with PyYAML (Debian: python3-yaml).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/check-option.sh "$@"   # sets CHECK
JSONNET="${JSONNET:-$(command -v jsonnet || true)}"
[ -n "$JSONNET" ] || { echo "error: jsonnet not found (apt-get install jsonnet)" >&2; exit 1; }
RULES=alerts/patroni-raft.rules.yml
COMPAT=alerts/patroni-compat.rules.yml

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$JSONNET" -S mixin/rules.jsonnet >"$tmp/rules.yml"
"$JSONNET" -e '(import "mixin/mixin.libsonnet").prometheusAlerts' >"$tmp/alerts.json"
"$JSONNET" -e '(import "mixin/mixin.libsonnet").grafanaDashboards' >"$tmp/dashboards.json"
"$JSONNET" -S mixin/compat-rules.jsonnet >"$tmp/compat.yml"
"$JSONNET" -e '(import "mixin/mixin.libsonnet").prometheusRules' >"$tmp/records.json"

python3 - "$tmp" <<'PYEOF'
import json, sys, yaml
from pathlib import Path
tmp = Path(sys.argv[1])
text = yaml.safe_load((tmp / "rules.yml").read_text())
data = json.loads((tmp / "alerts.json").read_text())
if text != data:
    sys.exit("error: the rendered rules file and the mixin's prometheusAlerts differ")
dash = json.loads((tmp / "dashboards.json").read_text())
for name, d in dash.items():
    if d != json.loads(Path("dashboards", name).read_text()):
        sys.exit(f"error: grafanaDashboards[{name!r}] is not dashboards/{name}")
if yaml.safe_load((tmp / "compat.yml").read_text()) != json.loads((tmp / "records.json").read_text()):
    sys.exit("error: the rendered compat rules file and the mixin's prometheusRules differ")
n = sum(len(g["rules"]) for g in data["groups"])
records = json.loads((tmp / "records.json").read_text())
nr = sum(len(g["rules"]) for g in records["groups"])
print(f"mixin: {len(data['groups'])} groups, {n} rules, text = data; {nr} recording rules, text = data; {len(dash)} dashboards")
PYEOF

for pair in "rules.yml:$RULES" "compat.yml:$COMPAT"; do
  rendered="$tmp/${pair%%:*}" shipped="${pair#*:}"
  if [ "$CHECK" = 1 ]; then
    if ! cmp -s "$rendered" "$shipped"; then
      echo "error: $shipped is not what mixin/ renders (edit mixin/, then run scripts/render-mixin.sh)" >&2
      diff -u "$shipped" "$rendered" | head -40 >&2 || true
      exit 1
    fi
    echo "$shipped: byte-identical to the mixin's rendering"
  else
    cp "$rendered" "$shipped"
    echo "wrote $shipped"
  fi
done
