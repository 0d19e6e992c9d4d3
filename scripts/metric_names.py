"""The metric names the exporter exposes, and the ones a PromQL expression uses.

One extractor for every check that must fail when a metric is renamed: the dashboards
(scripts/gen-dashboards.sh) and the alert rules (scripts/check-alerts.sh). The names come
from the golden `/metrics` output (tests/golden/metrics.txt), which a Rust test compares with
what the encoder writes, so a renamed family changes the golden file and then fails every
dashboard or rule that still uses the old name.

    python3 scripts/metric_names.py      # prints the exposed names, one per line
"""
import re
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "metrics.txt"


def exposed(golden=GOLDEN):
    """Every sample name in the golden output (counters with their `_total`)."""
    names = set()
    for line in Path(golden).read_text().splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def used_in(expr):
    """The `patroni_*` metric names (and Prometheus' own `up`) an expression uses; label
    names in `{...}` and in by/without/on/ignoring/group_* lists, and strings, are not."""
    e = re.sub(r"\{[^}]*\}", "{}", expr)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r'"[^"]*"', '""', e)
    names = set(re.findall(r"\b(patroni_[a-zA-Z0-9_:]*)", e))
    if re.search(r"\bup\b", e):
        names.add("up")
    return names


if __name__ == "__main__":
    sys.stdout.write("".join(f"{name}\n" for name in sorted(exposed())))
