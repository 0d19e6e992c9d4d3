#!/usr/bin/env python3
"""The tables of docs/performance.md ("What the exporter costs the cluster") from run.sh's CSV.

Per run (the `exporter` column), Patroni version, member and condition: the median over the
rounds of Patroni's and PostgreSQL's CPU (ms per second of the window) and of the REST requests
and Raft connections per second, and the cost of the condition: its CPU less that of `none` in
the same round (the conditions are interleaved, so each pair shares the machine's load), median
and range over the rounds. A condition NAMEx10 sent ten times the requests of NAME: its rates
and costs are divided by ten (the cost at NAME's rate), and its cost per request is its own.
Prometheus's cost is taken against Prometheus scraping nothing (prometheus0) when that ran: a
busy neighbour alone changes the members' CPU.
Usage: summary.py [--compact] docs/bench/cluster-cost.csv [CSV...]
--compact: one table per run, a row per version and member, a column per condition: the cost
(Patroni + PostgreSQL, ms/s, medians) at the rates (REST requests/s + Raft status queries/s),
the table of docs/performance.md.
"""
import csv
import statistics
import sys
from collections import defaultdict

LABEL = {
    "none": "no monitoring",
    "prometheus0": "Prometheus scraping nothing",
    "prometheus": "Prometheus, each member's /metrics every 15 s",
    "exporter1": "one exporter, defaults",
    "exporter2": "two exporters, defaults",
}


def describe(condition):
    """A condition's name for people, and the factor of its rates."""
    name, _, build = condition.partition("@")
    noraft = name.endswith("-noraft")
    name = name.removesuffix("-noraft")
    factor = 1
    if name.endswith("x10"):
        name, factor = name[:-3], 10
    text = LABEL.get(name, name)
    if noraft:
        text += ", --raft.disabled"
    if factor != 1:
        text += f" (x{factor}, divided by {factor})"
    if build:
        text += f", build {build}"
    return text, factor


def order(condition):
    name = condition.partition("@")[0].removesuffix("-noraft").removesuffix("x10")
    keys = list(LABEL)
    # another build's first, then this run's, then variants
    return (keys.index(name) if name in keys else len(keys), "@" not in condition,
            "-noraft" in condition, condition)


def spread(values):
    """'median (min..max)' of values, two decimals."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}..{max(values):.2f})"


def main(args):
    compact = args[:1] == ["--compact"]
    paths = args[1:] if compact else args
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            rows.extend(csv.DictReader(f))
    # (run, version) -> member -> condition -> round -> (patroni ms/s, postgres ms/s, rest/s, raft/s)
    data = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    roles = {}
    for r in rows:
        w = float(r["window_s"])
        run = (r["exporter"], r["patroni_version"])
        roles[r["member"]] = r["role"]
        data[run][r["member"]][r["condition"]][r["round"]] = (
            float(r["patroni_cpu_ms"]) / w,
            float(r["postgres_cpu_ms"]) / w,
            int(r["rest_requests"]) / w,
            int(r["raft_connections"]) / w,
        )
    if compact:
        return print_compact(data, roles)
    for run in sorted(data):
        print(f"\nrun {run[0]}, Patroni {run[1]}: CPU in ms per second (1 ms/s = 0.1 % of a core),"
              " median (min..max) over the rounds")
        print("\n| member | condition | REST req/s | Raft conn/s | Patroni | PostgreSQL "
              "| cost: Patroni | cost: PostgreSQL | µs per request |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for member in sorted(data[run]):
            per = data[run][member]
            for cond in sorted(per, key=order):
                text, factor = describe(cond)
                # Prometheus less Prometheus scraping nothing, when that ran at the same rate
                control = cond.replace("prometheus", "prometheus0", 1)
                if cond.startswith("prometheus") and control != cond and control in per:
                    base = per[control]
                    text += ", less scraping nothing"
                else:
                    base = per.get("none", {})
                rounds = per[cond]
                pat = [x[0] for x in rounds.values()]
                pg = [x[1] for x in rounds.values()]
                rest = statistics.median(x[2] for x in rounds.values())
                raft = statistics.median(x[3] for x in rounds.values())
                paired = [r for r in rounds if r in base]
                cost = ("", "", "")
                if cond != "none" and paired:
                    dpat = [(rounds[r][0] - base[r][0]) / factor for r in paired]
                    dpg = [(rounds[r][1] - base[r][1]) / factor for r in paired]
                    both = statistics.median(a + b for a, b in zip(dpat, dpg))
                    per_req = f"{both * factor * 1000 / rest:.0f}" if rest > 0 else ""
                    cost = (spread(dpat), spread(dpg), per_req)
                print(f"| {member} ({roles[member]}) | {text} | {rest / factor:.3f} | {raft / factor:.3f} "
                      f"| {spread(pat)} | {spread(pg)} | {cost[0]} | {cost[1]} | {cost[2]} |")


def cost(per, cond):
    """(Patroni cost, PostgreSQL cost, REST/s, Raft/s) of cond, medians, at its real rate."""
    _, factor = describe(cond)
    control = cond.replace("prometheus", "prometheus0", 1)
    base = per[control] if cond.startswith("prometheus") and control in per else per["none"]
    rounds = [r for r in per[cond] if r in base]
    med = statistics.median
    return (
        med((per[cond][r][0] - base[r][0]) / factor for r in rounds),
        med((per[cond][r][1] - base[r][1]) / factor for r in rounds),
        med(per[cond][r][2] / factor for r in rounds),
        med(per[cond][r][3] / factor for r in rounds),
    )


def print_compact(data, roles):
    for label in sorted({run[0] for run in data}):
        runs = [run for run in sorted(data) if run[0] == label]
        conds = sorted({c for run in runs for m in data[run] for c in data[run][m]
                        if c != "none" and not c.startswith("prometheus0")}, key=order)
        print(f"\nrun {label}: cost in ms/s, Patroni + PostgreSQL, at REST requests/s + Raft queries/s")
        print("\n| Patroni | member | idle, ms/s | " + " | ".join(describe(c)[0] for c in conds) + " |")
        print("|---|---|---:|" + "---:|" * len(conds))
        for run in runs:
            for member in sorted(data[run]):
                per = data[run][member]
                idle = per["none"].values()
                cells = [f"{statistics.median(x[0] for x in idle):.1f} + "
                         f"{statistics.median(x[1] for x in idle):.1f}"]
                for c in conds:
                    if c not in per:
                        cells.append("")
                        continue
                    pat, pg, rest, raft = cost(per, c)
                    rates = f"{rest:.2f}" + (f" + {raft:.2f}" if raft else "")
                    cells.append(f"{pat:.2f} + {pg:.2f} @ {rates}")
                print(f"| {run[1]} | {member} ({roles[member]}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
