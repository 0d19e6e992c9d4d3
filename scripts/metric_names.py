"""The metric names the exporter exposes, and the ones a PromQL expression uses.

One extractor for every check that must fail when a metric is renamed: the dashboards
(scripts/gen-dashboards.sh) and the alert rules (scripts/check-alerts.sh). The names come
from the golden `/metrics` output (tests/golden/metrics.txt), which a Rust test compares with
what the encoder writes, so a renamed family changes the golden file and then fails every
dashboard or rule that still uses the old name.

    python3 scripts/metric_names.py      # prints the exposed names, one per line

Panel coverage (issue #22): every exposed family is on a dashboard panel, or docs/metrics.md
says why not in its section "Not on a dashboard panel" (`- \`name\`: reason` lines);
coverage_errors() is what scripts/gen-dashboards.sh fails on.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "metrics.txt"
METRICS_MD = ROOT / "docs" / "metrics.md"
NOT_ON_A_PANEL = "## Not on a dashboard panel"


def exposed(golden=GOLDEN):
    """Every sample name in the golden output (counters with their `_total`)."""
    names = set()
    for line in Path(golden).read_text().splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def used_in(expr):
    """The `patroni_*` and `process_*` metric names (and Prometheus' own `up`) an expression
    uses; label names in `{...}` and in by/without/on/ignoring/group_* lists, and strings, are
    not."""
    e = re.sub(r"\{[^}]*\}", "{}", expr)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r'"[^"]*"', '""', e)
    names = set(re.findall(r"\b((?:patroni|process)_[a-zA-Z0-9_:]*)", e))
    if re.search(r"\bup\b", e):
        names.add("up")
    return names


def panel_exprs(dashboard):
    """Every query of every panel of a dashboard (JSON), rows' nested panels included;
    annotations and template variables are not panels."""
    panels = list(dashboard.get("panels", []))
    for p in list(panels):
        panels.extend(p.get("panels", []) or [])
    return [t.get("expr", "") for p in panels for t in (p.get("targets") or [])]


def not_on_a_panel(md=METRICS_MD):
    """{family: reason} from the section NOT_ON_A_PANEL of docs/metrics.md."""
    text = Path(md).read_text()
    if NOT_ON_A_PANEL not in text:
        return {}
    section = text.split(NOT_ON_A_PANEL, 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^- `([a-zA-Z_:][a-zA-Z0-9_:]*)`:?(.*)$", section, re.M)}


def coverage_errors(dashboards, golden=GOLDEN, md=METRICS_MD):
    """Families neither on a panel of `dashboards` (parsed JSON) nor given a reason; reasons
    for families that are on a panel after all, or that the exporter does not expose."""
    on_panel = set()
    for d in dashboards:
        for e in panel_exprs(d):
            on_panel |= used_in(e)
    families, reasons = exposed(golden), not_on_a_panel(md)
    errors = [f"{f}: on no dashboard panel and no reason in docs/metrics.md '{NOT_ON_A_PANEL[3:]}'"
              for f in sorted(families - on_panel - set(reasons))]
    errors += [f"{f}: docs/metrics.md gives a reason for leaving it off the panels, but it is on one"
               for f in sorted(set(reasons) & on_panel)]
    errors += [f"{f}: docs/metrics.md '{NOT_ON_A_PANEL[3:]}' names a family the exporter does not expose"
               for f in sorted(set(reasons) - families)]
    errors += [f"{f}: no reason given" for f, r in sorted(reasons.items()) if not r]
    return errors, len(families & on_panel), len(reasons)


# Functions that read a series as a counter: a decrease is taken for a reset, so on a gauge
# that goes down they invent an increase (rate, irate, increase) or count resets that are not.
COUNTER_FUNCTIONS = ("rate", "irate", "increase", "resets")
# Functions that give a slope: fine on a gauge, but a negative slope of these families is no
# rate of anything. pysyncobj lets each of them go down on one node: raft_term reads 0 after a
# restart until the node hears a leader (<= 0.3.15), commit_idx is clamped to the journal end
# after a crash (>= 0.3.16), log_len shrinks at compaction, match/next index restart on a new
# leader (captures: tests/fixtures/pysyncobj/enc_restarted_alone_*; alerts/tests/restart.test.yml).
SLOPE_FUNCTIONS = ("deriv", "delta", "idelta", "predict_linear")
GAUGES_THAT_GO_DOWN = {
    "patroni_raft_term", "patroni_raft_commit_index", "patroni_raft_last_applied_index",
    "patroni_raft_leader_commit_index", "patroni_raft_log_entries", "patroni_raft_match_index",
    "patroni_raft_next_index",
}


def types(golden=GOLDEN):
    """{family: type} from the `# TYPE` lines of the golden output (counters with `_total`)."""
    return {m.group(1): m.group(2)
            for m in re.finditer(r"^# TYPE (\S+) (\S+)$", Path(golden).read_text(), re.M)}


def _calls(expr, functions):
    """(function, argument text) of every call of one of `functions` in `expr`."""
    for m in re.finditer(r"\b(%s)\s*\(" % "|".join(functions), expr):
        depth, i = 1, m.end()
        while i < len(expr) and depth:
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            i += 1
        yield m.group(1), expr[m.end():i - 1]


def function_misuse(expr, family_types):
    """What `expr` does wrong with a family's type: a counter function over a series that is
    not a counter, a slope over a gauge pysyncobj lets go down."""
    errors = []
    for f, arg in _calls(expr, COUNTER_FUNCTIONS):
        for m in sorted(used_in(arg)):
            if family_types.get(m, "counter") != "counter":
                errors.append(f"{f}() over {m}, a {family_types[m]}: a decrease reads as a counter reset")
    for f, arg in _calls(expr, SLOPE_FUNCTIONS):
        for m in sorted(used_in(arg) & GAUGES_THAT_GO_DOWN):
            errors.append(f"{f}() over {m}: it goes down after a restart or crash, the slope is no rate")
    return errors


if __name__ == "__main__":
    sys.stdout.write("".join(f"{name}\n" for name in sorted(exposed())))
