"""What the exporter's reads cost etcd, and the alarms it reads, against a real 3-member etcd with
nothing else writing to it (Debian's etcd-server 3.4 on 127.0.0.51-53, a 256 KiB quota): the
exporter alone (`--patroni.scope`, one `--etcd.endpoint`, a `--patroni.url` nobody answers,
`--poll.interval 1s`), in the test's own network namespace:

  reads propose nothing   over 8 polls every member's own raftIndex (`etcdctl endpoint status`,
                          read before and after) stays where it was, and the exporter's
                          `patroni_etcd_raft_index` is etcd's. An alarm GET is a Raft
                          proposal (+1 on every member), so the alarms come from the status.
  NOSPACE from the status the quota filled with `etcdctl put` until etcd refuses (`database
                          space exceeded`): the exporter's `patroni_etcd_alarms{alarm="NOSPACE"}`
                          is what `etcdctl alarm list` lists (read from the statuses' errors[]),
                          its raftIndex still stays put over 5 polls (no alarm GET while an
                          alarm is active either), and PatroniEtcdAlarm fires in a real
                          Prometheus with the shipped rules.

Root: `tests/e2e/pylab/run.sh test_etcd_reads.py --patroni 4.1.5` (no Patroni runs; the
version only names the run).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2elab.checks import Checks, Results
from e2elab.etcd import EtcdCluster
from e2elab.exporter import Exporter
from e2elab.log import log
from e2elab.metrics import wait_for
from e2elab.netns import Netns
from e2elab.paths import DEBIAN_ETCD, LabPaths
from e2elab.prom import Prometheus

SCENARIO = "etcd-reads"
SCOPE = "quiet"
S = {"scope": SCOPE}
QUOTA = 256 * 1024


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def etcd(run_dir: Path, results: Results, netns: Netns) -> Iterator[EtcdCluster]:
    # running_etcd with a quota: the same start, checks and teardown
    e = EtcdCluster(run_dir, ip_base=51, extra_args=("--quota-backend-bytes", str(QUOTA)))
    got = e.version()
    results.record("setup", "etcd release", got)
    assert got.startswith(DEBIAN_ETCD), f"etcd says {got}, not {DEBIAN_ETCD}"
    try:
        e.up()
        results.record("setup", "etcd's raftIndex settled before the exporter starts", f"{settled_indexes(e)}")
        yield e
    finally:
        e.down()


@pytest.fixture(scope="module")
def exporter(paths: LabPaths, run_dir: Path, etcd: EtcdCluster) -> Iterator[Exporter]:
    e = Exporter(paths.exporter_bin, ["--patroni.scope", SCOPE, "--patroni.url", "http://127.0.0.59:8008",
                                      "--etcd.endpoint", etcd.client_url(0), "--poll.interval", "1s"],
                 run_dir / "exporter.log").start()
    yield e
    e.stop()


@pytest.fixture(scope="module")
def prometheus(run_dir: Path, paths: LabPaths, exporter: Exporter) -> Iterator[Prometheus]:
    p = Prometheus(run_dir, [exporter.listen], [paths.repo / "alerts" / "patroni-raft.rules.yml"], every="1s").start()
    yield p
    p.stop()


# ------------------------------------------------------------------ ground truth
def raft_indexes(etcd: EtcdCluster) -> dict[str, int]:
    """Each member's own committed Raft index (`etcdctl endpoint status`)."""
    return {ep: st.raft_index for ep, st in etcd.endpoint_status().value.items()}


def settled_indexes(etcd: EtcdCluster, timeout_s: float = 30) -> dict[str, int]:
    """The members' indexes once two readings 2 s apart agree (etcd's own start-up entries
    committed: its election, the cluster version), before anything else asks it."""
    def probe() -> dict[str, int] | None:
        first = raft_indexes(etcd)
        time.sleep(2)
        again = raft_indexes(etcd)
        return again if len(again) == etcd.size and again == first else None
    got, _ = wait_for("etcd's Raft index settled", probe, timeout_s, every_s=0)
    return got


def polls_after(exporter: Exporter, n: int, timeout_s: float = 60) -> None:
    """Until the exporter finished N more polls of the cluster."""
    def last() -> float:
        return exporter.scrape().value("patroni_exporter_last_poll_timestamp_seconds", **S) or 0.0
    seen, done = last(), 0
    t_end = time.monotonic() + timeout_s
    while done < n:
        assert time.monotonic() < t_end, f"{done} of {n} polls in {timeout_s} s"
        time.sleep(0.2)
        now = last()
        if now != seen:
            seen, done = now, done + 1


# ------------------------------------------------------------------ scenarios
def test_reads_propose_nothing(etcd: EtcdCluster, exporter: Exporter, results: Results, checks: Checks) -> None:
    took = exporter.wait_value("first reading", "patroni_etcd_members_answering", S, 3, 30)
    results.record("reads", "3 members answering after the start (s)", f"{took:.1f}")
    before = raft_indexes(etcd)
    polls_after(exporter, 8)
    after = raft_indexes(etcd)
    s = exporter.scrape()
    said = {ep: s.value("patroni_etcd_raft_index", scope=SCOPE, endpoint=ep) for ep in etcd.endpoints}
    results.record("reads", "raftIndex before and after 8 polls", f"{before} {after}")
    checks.check(f"8 polls: every member's raftIndex where it was ({before} -> {after})",
                 len(after) == etcd.size and after == before)
    checks.check(f"the exporter's raft index is etcd's own ({said})",
                 all(said[ep] == after.get(ep) for ep in etcd.endpoints))
    checks.check("no alarm, read from the statuses (0, not absent)",
                 s.value("patroni_etcd_alarms", scope=SCOPE, alarm="NOSPACE") == 0
                 and s.value("patroni_etcd_unreadable", scope=SCOPE, fact="alarms") == 0)
    checks.verify()


def test_nospace_from_the_status(etcd: EtcdCluster, exporter: Exporter, prometheus: Prometheus, results: Results,
                                 checks: Checks) -> None:
    assert prometheus.rule_loaded("PatroniEtcdAlarm"), "the shipped rules have no PatroniEtcdAlarm"
    refused = None
    for i in range(64):
        r = etcd.ctl("put", f"/fill/{i}", "x" * 40_000)
        if "database space exceeded" in r.stderr:
            refused = i
            break
    checks.check(f"etcd refused a put once its {QUOTA} B quota was reached (put {refused})", refused is not None)
    alarms = etcd.ctl("alarm", "list")
    listed = [line for line in alarms.stdout.splitlines() if "NOSPACE" in line]
    log(f"etcdctl alarm list: {alarms.stdout.strip()!r}")
    checks.check(f"etcdctl alarm list names NOSPACE ({len(listed)})", alarms.returncode == 0 and len(listed) >= 1)
    took = exporter.wait_value("NOSPACE", "patroni_etcd_alarms", {**S, "alarm": "NOSPACE"}, len(listed), 30)
    results.record("nospace", "patroni_etcd_alarms NOSPACE as etcdctl lists after the refusal (s)", f"{took:.1f}")
    before = raft_indexes(etcd)
    polls_after(exporter, 5)
    after = raft_indexes(etcd)
    checks.check(f"5 polls with the alarm active: raftIndex where it was ({before} -> {after})", after == before)
    fired, took = wait_for("PatroniEtcdAlarm firing",
                           lambda: prometheus.alert_state("PatroniEtcdAlarm", scope=SCOPE, alarm="NOSPACE") == "firing"
                           or None, 30)
    results.record("nospace", "PatroniEtcdAlarm firing (s)", f"{took:.1f}")
    checks.check("PatroniEtcdAlarm fires in a real Prometheus", bool(fired))
    checks.verify()
