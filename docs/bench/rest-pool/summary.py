#!/usr/bin/env python3
"""The table of docs/performance.md ("Patroni's REST pool") from run.sh's CSV.

One row per build (the `exporter` column), Patroni version and condition: the rounds' probe
samples pooled by their medians (p50, p99 and max of each round: median over the rounds, and
the range), the probe's timeouts (over the 2 s deadline of Patroni's fetch_node_status) summed,
each round's failover time after the primary's kill, and the survivors' fetch_node_status of
each other during those races (Patroni's own log: answered / failed), summed. Load is the 1-minute load average at each window's start.
Usage: summary.py docs/bench/rest-pool.csv [CSV...]
"""
import csv
import statistics
import sys
from collections import defaultdict


def spread(values, digits=1):
    """'median (min–max)' of values, or the value alone when all are equal."""
    med, low, high = statistics.median(values), min(values), max(values)
    if low == high:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def main():
    rows = []
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    groups = defaultdict(list)
    for row in rows:
        groups[(row["exporter"], row["patroni_version"], row["condition"])].append(row)
    print("| build | Patroni | exporters at 1 s | GET /patroni p50 ms | p99 ms | max ms | over 2 s "
          "| failover s (each round) | race: peer's /patroni answered / failed | load1 | rounds × samples |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def key(item):
        (build, version, condition), _ = item
        name, _, other = condition.partition("@")
        return (version, other or build, int(name))

    for (build, version, condition), group in sorted(groups.items(), key=key):
        name, _, other = condition.partition("@")
        num = lambda field: [float(r[field]) for r in group]  # noqa: E731
        failovers = " / ".join(f"{float(r['failover_s']):.1f}" for r in sorted(group, key=lambda r: int(r["round"])))
        print(f"| {other or build} | {version} | {name} | {spread(num('p50_ms'))} | {spread(num('p99_ms'))} "
              f"| {spread(num('max_ms'))} | {sum(int(r['timeouts']) for r in group)} | {failovers} "
              f"| {sum(int(r['fetch_answers']) for r in group)} / {sum(int(r['fetch_failures']) for r in group)} "
              f"| {spread(num('load1'))} "
              f"| {len(group)} × {round(statistics.mean(num('samples')))} |")


if __name__ == "__main__":
    main()
