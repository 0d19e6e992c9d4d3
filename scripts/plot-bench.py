"""Plot the exporter's cost against the number of clusters from scripts/bench.sh's fleet.csv.

Usage: python plot-bench.py fleet.csv out.png [another-run.csv ...]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(source):
    with open(source, newline="") as handle:
        return list(csv.DictReader(handle))


def main(source, target, *more):
    rows = load(source)
    others = [load(path) for path in more]
    n = [int(r["clusters"]) for r in rows]

    def col(name, table=None):
        return [float(r[name]) for r in (table or rows)]

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = [
        (axes[0][0], "cpu_seconds_per_cycle", "CPU seconds per 10 s poll cycle", 2.5, "target: 25% of one core"),
        (axes[0][1], "rss_mib", "RSS (MiB)", 150, "target at 1000 clusters: 150 MiB"),
        (axes[1][0], "encode_max_ms", "/metrics encode time, max (ms)", 100, "target: 100 ms"),
        (axes[1][1], "poll_max_s", "slowest poll of a cluster (s)", 10, "interval: 10 s"),
    ]
    for ax, name, title, target_value, target_label in panels:
        values = col(name)
        ax.loglog(n, values, "o-", label="measured" if not others else "run 1")
        for index, table in enumerate(others, start=2):
            ax.loglog([int(r["clusters"]) for r in table], col(name, table), "s--", label=f"run {index}")
        # Linear reference through the largest fleet: cost proportional to clusters (not for
        # the poll duration, a per-cluster quantity that should not grow at all).
        if values[-1] > 0 and name != "poll_max_s":
            ax.loglog(n, [values[-1] * k / n[-1] for k in n], ":", color="grey", label="linear in N")
        ax.axhline(target_value, color="red", linestyle="--", linewidth=1, label=target_label)
        ax.set_title(title)
        ax.set_xlabel("clusters (3 members + 3 Raft nodes each)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("patroni-raft-exporter: cost against fleet size (release build, 2 cores, 10 s interval)")
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    print(f"wrote {target}")


if __name__ == "__main__":
    main(*sys.argv[1:])
