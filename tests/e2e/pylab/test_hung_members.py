"""A poll keeps its interval while members hang (issue #35): the Patroni process of a member
stopped by SIGSTOP (the kernel still accepts its REST and Raft connections; nothing answers), as
a process stuck in swap, a frozen VM or a debugger does.

The exporter gets every member's URL, the hung ones first, and the Raft password:
  defaults     --poll.interval 5s --poll.timeout 2s (the defaults, written out), the leader's and
               one replica's Patroni stopped for 25 s (below ttl: no failover). Before, `/cluster`
               was asked of the URLs in turn: 6 s polls every 5 s.
  interval-2s  --poll.interval 2s --poll.timeout 2s (what `--poll.interval 2s` alone gives), one
               replica's Patroni stopped for 30 s. Before, 4 s polls and every other interval
               skipped.
Sampled every 0.5 s while the members hang: each poll's `patroni_exporter_poll_duration_seconds`
(one per `patroni_exporter_last_poll_timestamp_seconds`). Asserted per phase: no poll longer than
the interval, `patroni_exporter_polls_skipped_total` unchanged, and in every poll after the first
that saw them hung, `patroni_member_api_up` 1 for each live member (its own `GET /patroni` read in
that poll: its verdicts are fresh) and 0 for each hung one. Measured (results.tsv): the polls, the
longest and the median poll, the skipped intervals; samples-PHASE.tsv: every scrape.

Root, a network namespace of its own per version: `tests/e2e/pylab/run.sh test_hung_members.py
--patroni 3.3.8 4.1.5` runs both side by side.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2elab.checks import Checks, Results
from e2elab.cluster import PatroniCluster, running_cluster
from e2elab.exporter import Exporter
from e2elab.log import log
from e2elab.metrics import Sampler, Scrape
from e2elab.netns import Netns
from e2elab.paths import LabPaths

SCENARIO = "hung-members"
SCOPE = {"scope": "pg-test"}


class Hung:
    """The Patroni processes this test SIGSTOPped: always continued, also when the test fails."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def stop(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        self.pids.append(pid)

    def continue_all(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.pids = []


@pytest.fixture(scope="module")
def hung() -> Iterator[Hung]:
    h = Hung()
    yield h
    h.continue_all()


@pytest.fixture(scope="module")
def cluster(paths: LabPaths, patroni_version: str, run_dir: Path, netns: Netns, hung: Hung,
            results: Results) -> Iterator[PatroniCluster]:
    """The cluster of `cluster.sh up --sync` (results first: the run's time includes its start)."""
    with running_cluster(paths.cluster_sh, patroni_version, paths.work / f"cluster-{SCENARIO}-{patroni_version}",
                         run_dir, before_down=hung.continue_all) as c:
        yield c


@pytest.fixture(scope="module")
def leader_and_replicas(cluster: PatroniCluster, results: Results) -> tuple[int, list[int]]:
    leader = cluster.leader_index()
    results.record("setup", "leader", cluster.name(leader))
    return leader, [n for n in cluster.members if n != leader]


def expect_healthy(exporter: Exporter, checks: Checks, phase: str) -> None:
    """lib.sh's expect_healthy: the healthy cluster of `cluster.sh up --sync` (30 s each)."""
    for what, name, want in [("exporter polls the cluster", "patroni_up", 1),
                             ("verdict 1 (quorum confirmed)", "patroni_raft_cluster_quorum", 1),
                             ("three members", "patroni_cluster_members", 3),
                             ("one leader", "patroni_cluster_leaders", 1),
                             ("two sync standbys", "patroni_cluster_sync_standbys", 2)]:
        took = exporter.wait_value(f"{phase}: {what}", name, SCOPE, want, 30)
        checks.reached(f"{phase}: {what} ({took:.1f}s)")


def sample_row(s: Scrape, t0: float, members: list[str]) -> list[str]:
    def v(name: str, **labels: str) -> str:
        x = s.value(name, **labels)
        return "-" if x is None else f"{x:g}" if name != "patroni_exporter_last_poll_timestamp_seconds" else f"{x:.3f}"
    return [f"{s.t_before - t0:.1f}", v("patroni_exporter_last_poll_timestamp_seconds", **SCOPE),
            v("patroni_exporter_poll_duration_seconds", **SCOPE), v("patroni_exporter_polls_skipped_total", **SCOPE),
            *[v("patroni_member_api_up", **SCOPE, member=m) for m in members]]


def phase(name: str, interval_s: int, hang_s: int, hung_members: list[int], *, cluster: PatroniCluster,
          paths: LabPaths, run_dir: Path, results: Results, checks: Checks, hung: Hung) -> None:
    """The exporter on every URL (the hung members' first), INTERVAL_S and a 2 s timeout; the
    HUNG_MEMBERS' Patroni stopped for HANG_S."""
    live = [n for n in cluster.members if n not in hung_members]
    secret = run_dir / "raft-secret"
    secret.write_text(cluster.env_vars()["RAFT_PASS"] + "\n")
    secret.chmod(0o600)
    urls = [arg for n in hung_members + live for arg in ("--patroni.url", cluster.rest(n))]
    exporter = Exporter(paths.exporter_bin, [*urls, "--raft.password-file", str(secret),
                                             "--poll.interval", f"{interval_s}s", "--poll.timeout", "2s"],
                        run_dir / f"exporter-{name}.log").start()
    try:
        expect_healthy(exporter, checks, name)
        # one poll of the healthy cluster after the exporter's first: the member that answered
        # `/cluster` (the first URL) is the one it asks first from then on
        time.sleep(interval_s)
        skipped0 = exporter.scrape().value("patroni_exporter_polls_skipped_total", **SCOPE)
        hung_pids = [cluster.patroni_pid(n) for n in hung_members]
        log(f"=== {name}: SIGSTOP of the Patroni of member(s) {hung_members} ({hung_pids}) for {hang_s}s, "
            f"--poll.interval {interval_s}s")
        for pid in hung_pids:
            hung.stop(pid)
        t0 = time.time()
        sampler = Sampler(exporter.metrics_url, 0.5).start()
        time.sleep(hang_s)
        scrapes = sampler.stop()
        skipped1 = exporter.scrape().value("patroni_exporter_polls_skipped_total", **SCOPE)
        hung.continue_all()

        names = [cluster.name(n) for n in cluster.members]
        rows = [sample_row(s, t0, names) for s in scrapes]
        with (run_dir / f"samples-{name}.tsv").open("w") as f:
            f.write("\t".join(["t", "polled_at", "duration", "skipped", *[f"api_up_{n}" for n in cluster.members]]) + "\n")
            f.writelines("\t".join(r) + "\n" for r in rows)
        # one row per poll (the scrapes of one poll, same timestamp, agree), and of those the
        # polls that started after the stop (finished more than one interval after it)
        polls: dict[str, list[str]] = {}
        for r in rows:
            if r[1] != "-":
                polls.setdefault(r[1], r)
        during = [r for r in polls.values() if float(r[1]) > t0 + interval_s]
        durations = sorted(float(r[2]) for r in during if r[2] != "-")
        longest = durations[-1] if durations else None
        median = durations[(len(durations) + 1) // 2 - 1] if durations else None
        results.record(name, f"polls while hung (interval {interval_s}s)", len(during))
        results.record(name, "longest poll (s)", longest)
        results.record(name, "median poll (s)", median)
        skipped_delta = (skipped1 - skipped0) if skipped0 is not None and skipped1 is not None else None
        results.record(name, "intervals skipped while hung", skipped_delta)
        log(f"{name}: {len(scrapes)} scrapes ({sampler.failures} unanswered)")

        at_least = hang_s // interval_s - 2
        checks.check(f"{name}: polls while hung: at least {at_least} ({len(during)})", len(during) >= at_least)
        checks.check(f"{name}: no poll longer than the {interval_s}s interval (longest {longest}s)",
                     longest is not None and longest < interval_s)
        checks.check(f"{name}: no interval skipped ({skipped0} -> {skipped1})",
                     skipped0 is not None and skipped0 == skipped1)
        bad = [r for r in during for i, n in enumerate(cluster.members)
               if r[4 + i] != ("0" if n in hung_members else "1")]
        checks.check(f"{name}: every poll read each live member's own /patroni ({live}) and none of the hung "
                     f"({hung_members}) ({len(bad)} bad of {len(during)})", not bad)
        checks.check(f"{name}: exporter process still running", exporter.alive())
        checks.check(f"{name}: exporter log shows no panic", not exporter.panicked())
    finally:
        hung.continue_all()
        exporter.stop()
    checks.check(f"{name}: the cluster is healthy again", cluster.wait(sync=True))


def test_defaults_leader_and_a_replica_hung(cluster: PatroniCluster, leader_and_replicas: tuple[int, list[int]],
                                            paths: LabPaths, run_dir: Path, results: Results, checks: Checks,
                                            hung: Hung) -> None:
    leader, replicas = leader_and_replicas
    phase("defaults", 5, 25, [leader, replicas[0]], cluster=cluster, paths=paths, run_dir=run_dir,
          results=results, checks=checks, hung=hung)
    checks.verify()


def test_interval_2s_one_replica_hung(cluster: PatroniCluster, leader_and_replicas: tuple[int, list[int]],
                                      paths: LabPaths, run_dir: Path, results: Results, checks: Checks,
                                      hung: Hung) -> None:
    _, replicas = leader_and_replicas
    phase("interval-2s", 2, 30, [replicas[1]], cluster=cluster, paths=paths, run_dir=run_dir,
          results=results, checks=checks, hung=hung)
    checks.verify()
