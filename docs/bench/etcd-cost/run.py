"""What one cluster on etcd costs, per poll: the exporter's CPU with its etcd reading and without
it (--raft.disabled: the same REST requests, nothing asked of etcd), and what the readings cost the
etcd members themselves (their CPU beside the same window with no exporter).

A real 3-member etcd (Debian's 3.4.23) and a real 3-member Patroni cluster on it in a network
namespace of its own (the typed e2e layer's EtcdCluster and cluster.sh DCS=etcd), one exporter at
--poll.interval 0.5s (ten times the default rate, so that a poll's cost stands above the members'
own); conditions interleaved over ROUNDS rounds of WINDOW_S seconds each (after WARMUP_S):
  none     nothing polls
  etcd     the README's quick start on etcd (one --patroni.url, one --etcd.endpoint)
  rest     the same exporter with --raft.disabled and the members' hosts allowed (no DCS asked,
           the same REST requests): the REST part alone
  etcd-b   with EXPORTER_BIN_B set: that build as `etcd` (two builds judged in one run)
CPU from /proc/PID/task/*/schedstat (nanoseconds on the CPU, every thread) of the exporter and of
each etcd member: CPU time, not wall time (the cores are shared with whatever else runs).

Usage (root; not in CI): python3 docs/bench/etcd-cost/run.py [PATRONI_VERSION]   (default 4.1.5)
Environment: EXPORTER_BIN (default target/release/patroni-raft-exporter), EXPORTER_BIN_B (none),
WINDOW_S=60 WARMUP_S=5 ROUNDS=2. Prints one CSV row per condition and round, then the per-poll figures.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e" / "pylab"))

from e2elab.cluster import PatroniCluster  # noqa: E402
from e2elab.etcd import EtcdCluster  # noqa: E402
from e2elab.exporter import Exporter  # noqa: E402
from e2elab.netns import Netns  # noqa: E402
from e2elab.paths import lab_paths  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """The process's CPU time in nanoseconds' resolution (/proc/PID/schedstat; /proc/PID/stat
    counts 10 ms ticks, coarser than one poll), its threads summed."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def main() -> None:
    version = sys.argv[1] if len(sys.argv) > 1 else "4.1.5"
    window, warmup, rounds = (float(os.environ.get("WINDOW_S", 60)), float(os.environ.get("WARMUP_S", 5)),
                              int(os.environ.get("ROUNDS", 2)))
    paths = lab_paths()
    binary = Path(os.environ.get("EXPORTER_BIN", paths.target_dir / "release" / "patroni-raft-exporter"))
    binary_b = Path(os.environ["EXPORTER_BIN_B"]) if os.environ.get("EXPORTER_BIN_B") else None
    conditions = ["none", "etcd", "rest"] + (["etcd-b"] if binary_b else [])
    run_dir = paths.work / f"etcd-cost-{version}"
    run_dir.mkdir(parents=True, exist_ok=True)
    netns = Netns(f"etcdcost-{os.getpid()}")
    netns.__enter__()
    etcd = EtcdCluster(run_dir)
    cluster = PatroniCluster(paths.cluster_sh, version, paths.work / f"cluster-etcd-cost-{version}",
                             run_dir / "cluster.log",
                             env={"DCS": "etcd", "ETCD_HOSTS": etcd.hosts, "NAMESPACE": "/service/"})
    rows: list[tuple[str, int, float, float, float]] = []
    try:
        etcd.up()
        cluster.up(sync=True)
        etcd_pids = [etcd.pid(n) for n in range(etcd.size)]
        args = {"etcd": ["--etcd.endpoint", etcd.client_url(0)], "etcd-b": ["--etcd.endpoint", etcd.client_url(0)],
                # the members the etcd keys name, allowed by hand: the same REST requests
                "rest": ["--raft.disabled", "--patroni.allow-api-url-hosts", "127.0.0.0/24"], "none": []}
        for r in range(rounds):
            for condition in (conditions if r % 2 == 0 else conditions[::-1]):
                exporter = None
                if condition != "none":
                    exporter = Exporter(binary_b if condition == "etcd-b" else binary, ["--patroni.url", cluster.rest(0), "--poll.interval", "0.5s",
                                                 *args[condition]], run_dir / f"exporter-{condition}.log").start()
                time.sleep(warmup)
                e0 = sum(cpu_seconds(p) for p in etcd_pids)
                x0 = cpu_seconds(exporter.daemon.pid) if exporter else 0.0
                t0 = time.monotonic()
                time.sleep(window)
                took = time.monotonic() - t0
                e1 = sum(cpu_seconds(p) for p in etcd_pids)
                x1 = cpu_seconds(exporter.daemon.pid) if exporter else 0.0
                polls = took / 0.5
                rows.append((condition, r, polls, (x1 - x0) / polls * 1e3, (e1 - e0) / took * 1e3))
                print(f"{condition},{r},{polls:.0f},{(x1 - x0) / polls * 1e3:.3f},{(e1 - e0) / took * 1e3:.1f}", flush=True)
                if exporter:
                    exporter.stop()
    finally:
        cluster.down(fast=True)
        etcd.down()
        netns.remove()
    by = lambda c, i: statistics.median(row[i] for row in rows if row[0] == c)  # noqa: E731
    print(f"exporter CPU per poll: with etcd {by('etcd', 3):.2f} ms, REST only {by('rest', 3):.2f} ms: "
          f"the etcd reading {by('etcd', 3) - by('rest', 3):.2f} ms")
    print(f"etcd members' CPU (3 together): nothing polling {by('none', 4):.1f} ms/s, the exporter at 2 polls/s "
          f"{by('etcd', 4):.1f} ms/s: {(by('etcd', 4) - by('none', 4)) / 2:.2f} ms per poll")
    if binary_b:
        print(f"build B ({binary_b}): exporter {by('etcd-b', 3):.2f} ms per poll, etcd members "
              f"{by('etcd-b', 4):.1f} ms/s: {(by('etcd-b', 4) - by('none', 4)) / 2:.2f} ms per poll")


if __name__ == "__main__":
    main()
