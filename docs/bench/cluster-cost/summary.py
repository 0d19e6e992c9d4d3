#!/usr/bin/env python3
"""The tables of docs/performance.md ("What the exporter costs the cluster") from run.sh's CSV.

Per Patroni version, member and condition: the median over the rounds of Patroni's and
PostgreSQL's CPU (ms per second of the window) and of the REST requests and Raft connections per
second, and the cost of the condition: its CPU less that of `none` in the same round (the
conditions are interleaved, so each round's pair shares the machine's load), median and range
over the rounds. Usage: summary.py docs/bench/cluster-cost.csv [CSV...]
"""
import csv
import statistics
import sys
from collections import defaultdict

ORDER = ["none", "prometheus", "exporter1", "exporter2"]
LABEL = {
    "none": "no monitoring",
    "prometheus": "Prometheus on each member's /metrics, 15 s",
    "exporter1": "one exporter, defaults",
    "exporter2": "two exporters, defaults",
}


def spread(values):
    """'median (min..max)' of values, one decimal."""
    return f"{statistics.median(values):.1f} ({min(values):.1f}..{max(values):.1f})"


def main(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            rows.extend(csv.DictReader(f))
    # (version, member) -> condition -> round -> (patroni ms/s, postgres ms/s, rest/s, raft/s)
    data = defaultdict(lambda: defaultdict(dict))
    roles = {}
    for r in rows:
        w = float(r["window_s"])
        key = ((r["exporter"], r["patroni_version"]), r["member"])
        roles[key] = r["role"]
        data[key][r["condition"]][r["round"]] = (
            float(r["patroni_cpu_ms"]) / w,
            float(r["postgres_cpu_ms"]) / w,
            int(r["rest_requests"]) / w,
            int(r["raft_connections"]) / w,
        )
    for version in sorted({v for v, _ in data}):
        print(f"\nexporter {version[0]}, Patroni {version[1]}: CPU in ms per second (= 0.1 % of a core), median (min..max) over the rounds")
        print("\n| member | condition | REST req/s | Raft conn/s | Patroni | PostgreSQL "
              "| cost: Patroni | cost: PostgreSQL | cost per request, µs |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for v, member in sorted(data):
            if v != version:
                continue
            per = data[(v, member)]
            base = per.get("none", {})
            for cond in [c for c in ORDER if c in per] + [c for c in per if c not in ORDER]:
                rounds = per[cond]
                pat = [x[0] for x in rounds.values()]
                pg = [x[1] for x in rounds.values()]
                rest = statistics.median(x[2] for x in rounds.values())
                raft = statistics.median(x[3] for x in rounds.values())
                paired = [r for r in rounds if r in base]
                if cond != "none" and paired:
                    dpat = [rounds[r][0] - base[r][0] for r in paired]
                    dpg = [rounds[r][1] - base[r][1] for r in paired]
                    dall = statistics.median(a + b for a, b in zip(dpat, dpg))
                    per_req = f"{dall * 1000 / rest:.0f}" if rest > 0 else ""
                    cost = (spread(dpat), spread(dpg), per_req)
                else:
                    cost = ("", "", "")
                print(f"| {member} ({roles[(v, member)]}) | {LABEL.get(cond, cond)} | {rest:.2f} "
                      f"| {raft:.2f} | {spread(pat)} | {spread(pg)} | {cost[0]} | {cost[1]} | {cost[2]} |")


if __name__ == "__main__":
    main(sys.argv[1:])
