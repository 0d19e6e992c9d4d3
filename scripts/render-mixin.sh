#!/usr/bin/env bash
# Render the shipped alert rules alerts/patroni-raft.rules.yml from the mixin (mixin/), with
# the defaults of mixin/config.libsonnet.
#
#   scripts/render-mixin.sh            write alerts/patroni-raft.rules.yml
#   scripts/render-mixin.sh --check    fail if the shipped file differs from the rendering by a
#                                      single byte (CI: scripts/check-alerts.sh runs this)
#
# Both modes also check that the rendered text (what Prometheus loads) and the mixin's data
# (prometheusAlerts, what mixin tooling such as mixtool takes) are the same rules, and that the
# dashboards of grafanaDashboards are the generated dashboards/*.json.
# Needs jsonnet (Debian package: jsonnet) and python3 with PyYAML (Debian: python3-yaml).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/check-option.sh "$@"   # sets CHECK
JSONNET="${JSONNET:-$(command -v jsonnet || true)}"
[ -n "$JSONNET" ] || { echo "error: jsonnet not found (apt-get install jsonnet)" >&2; exit 1; }
RULES=alerts/patroni-raft.rules.yml

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$JSONNET" -S mixin/rules.jsonnet >"$tmp/rules.yml"
"$JSONNET" -e '(import "mixin/mixin.libsonnet").prometheusAlerts' >"$tmp/alerts.json"
"$JSONNET" -e '(import "mixin/mixin.libsonnet").grafanaDashboards' >"$tmp/dashboards.json"

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
n = sum(len(g["rules"]) for g in data["groups"])
print(f"mixin: {len(data['groups'])} groups, {n} rules, text = data; {len(dash)} dashboards")
PYEOF

if [ "$CHECK" = 1 ]; then
  if ! cmp -s "$tmp/rules.yml" "$RULES"; then
    echo "error: $RULES is not what mixin/ renders (edit mixin/alerts.libsonnet, then run scripts/render-mixin.sh)" >&2
    diff -u "$RULES" "$tmp/rules.yml" | head -40 >&2 || true
    exit 1
  fi
  echo "$RULES: byte-identical to the mixin's rendering"
else
  cp "$tmp/rules.yml" "$RULES"
  echo "wrote $RULES"
fi
