"""Raft membership changed on a live cluster as Charmed PostgreSQL changes it (issue #42, part 5).

Since canonical/postgresql-operator #1680/#1860 the charm reconfigures Raft membership with
`syncobj_admin -add/-remove` on every Juju leader change: a unit that leaves has its Patroni
stopped and its voter removed, a unit that joins has its voter added and its Patroni started
with the new partner list. This runs both on the cluster of `cluster.sh up --sync`, watched as
the charm's units watch it: two exporters, each as the README's quick start (one
`--patroni.url`, the Raft password file, `--poll.interval 2s`) on a member of its own
(postgresql-0 and postgresql-1), and a real Prometheus with the shipped rules.

  healthy      3 voters that agree
  stopped      postgresql-2's Patroni stopped (`cluster.sh stop 2`): its voter down, still a voter
  removed      its voter removed at the Raft leader (`syncobj_admin -conn LEADER -remove`):
               the scale-down done, 2 voters; held until its key expires and leaves /cluster,
               and 10 s more (the exporters still ask it, remembered as departed)
  added        its voter added back at the Raft leader (`-add`), its Patroni not started yet
  rejoined     its Patroni started with the new partner list (the two others, as the charm
               writes it: MEMBER_RAFT_PARTNERS_2), healthy again (sync)

cluster.sh makes its members at `up` (MEMBERS is remembered) and cannot add a fourth: the member
that joins is the one that left, re-added and started again, which is what the charm does when a
unit comes back (its data directory kept).

Ground truth: each Raft node's own `syncobj_admin -status` (itself and its partners: the voter
set it counts its majority against), read in the background with its time. In every scrape of
either exporter whose poll lies between two readings that agree, `patroni_raft_voters`,
`patroni_raft_node_info`'s nodes, `patroni_raft_voter_sets` and `patroni_raft_voter_set_differs`
are what the nodes said. Prometheus's alerts are read every second: nothing pending or firing
beyond what a step explains (ALLOWED, each with its reason).

Root, a network namespace of its own per version: `tests/e2e/pylab/run.sh test_membership.py
--patroni 3.3.8 4.1.5` runs both side by side.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2elab.checks import Checks, Results
from e2elab.cluster import PatroniCluster, running_cluster
from e2elab.exporter import Exporter
from e2elab.log import log
from e2elab.metrics import Sampler, Scrape, TruthSampler, wait_for
from e2elab.netns import Netns
from e2elab.paths import LabPaths
from e2elab.prom import Prometheus

SCENARIO = "membership"
S = {"scope": "pg-test"}
LEAVER = 2  # the member that leaves and comes back; the exporters watch the two others
WATCHED = (0, 1)

# What may be pending or firing, in which steps, and why; anything else fails the test, and so
# does any of these firing but the one `info` alert. Prometheus keeps an alert pending until an
# evaluation finds its expression empty: one that a step starts may be seen in the next.
AFTER_STOP = frozenset({"stopped", "removed", "added", "rejoined"})
ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    "PatroniRaftNodeUnreachable/pending": (AFTER_STOP, "postgresql-2's voter is down while it is one: stopped "
                                           "until -remove, added before its Patroni starts (for: 2m)"),
    "PatroniRaftQuorumNoMargin/pending": (AFTER_STOP, "margin 0: 3 voters with one down, or the 2 voters of the "
                                          "scale-down (2 voters can lose none) (for: 5m)"),
    "PatroniMemberNotRunning/pending": (AFTER_STOP, "postgresql-2's key says `stopped` until its ttl runs out, and "
                                        "not running yet when it comes back (for: 2m)"),
    "PatroniMemberApiUnreachable/pending": (AFTER_STOP, "postgresql-2 remembered for ttl after its API stopped "
                                            "answering, and asked again as a voter without a member once added "
                                            "(for: 2m)"),
    "PatroniRaftZombieVoter/pending": (frozenset({"added", "rejoined"}), "the voter is added before its Patroni "
                                       "starts: 3 voters, 2 members until it is in the view (for: 30m)"),
    "PatroniDcsViewsDiverge/pending": (AFTER_STOP, "a key that changes between two members' answers (the "
                                       "stopped member's, the leader's; the member that starts writes its own) "
                                       "makes the views read in one poll differ (for: 30s); the stopped member, "
                                       "unread but never differing, does not hold it"),
    "PatroniMemberRestSlow/pending": (frozenset({"rejoined"}), "the starting member's first answers are slow, "
                                      "above half the request timeout (for: 5m)"),
    "PatroniRaftPartnerDisconnected/pending": (frozenset({"rejoined"}), "the node that starts answers the "
                                               "exporter before its partners have reconnected to it (pysyncobj "
                                               "retries a partner every few seconds) (for: 5m)"),
    "PatroniPostgresRestarted/firing": (frozenset({"rejoined"}), "severity info, no for: the member that came back "
                                        "has a new postmaster start time"),
}
# Still there when the test ends, healthy again, and why: the info alert's 15m window. (The
# removed member, still listed in /cluster until its key expires, is asked as before: no
# api_url_not_allowed, no PatroniExporterPollErrors.)
AT_THE_END = {"PatroniPostgresRestarted/firing"}


# ------------------------------------------------------------------ Raft ground truth
@dataclass(frozen=True)
class RaftStatus:
    """A node's own word: itself, its partners (its voter set), its leader."""
    self_addr: str
    partners: frozenset[str]
    leader: str

    @property
    def voters(self) -> frozenset[str]:
        return self.partners | {self.self_addr}


class RaftUnread(Exception):
    """syncobj_admin gave no output within its timeout."""


class Raft:
    """`syncobj_admin` of the version's venv (as cluster.sh's `raft N` runs it), bounded."""

    def __init__(self, venv: Path, password: str) -> None:
        self.admin = str(venv / "bin" / "syncobj_admin")
        self.password = password

    def _run(self, addr: str, *args: str, timeout_s: float = 10) -> str:
        try:
            r = subprocess.run([self.admin, "-conn", addr, "-pass", self.password, *args],
                               capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return ""
        return r.stdout + r.stderr

    def status(self, addr: str) -> RaftStatus | None:
        """The node's status, None when it gives none or was not read in time."""
        try:
            return self.reading(addr)
        except RaftUnread:
            return None

    def reading(self, addr: str) -> RaftStatus | None:
        """The node's own word for the ground truth: its status, or None when it answered
        without one (a node that is down: syncobj_admin prints "connection lost" or "None" and
        exits 0 either way). RaftUnread when syncobj_admin printed nothing within its timeout:
        on a loaded machine its Python start alone can take seconds, and no answer is not
        the node's word (the sampler skips it, and the scrapes around it go unjudged)."""
        out = self._run(addr, "-status", timeout_s=5)
        if not out.strip():
            raise RaftUnread(addr)
        fields: dict[str, str] = {}
        partners: set[str] = set()
        for line in out.splitlines():
            key, sep, value = line.partition(": ")
            if not sep:
                continue
            fields[key] = value.strip()
            if key.startswith("partner_node_status_server_"):
                partners.add(key.removeprefix("partner_node_status_server_"))
        if "self" not in fields or "has_quorum" not in fields:
            return None
        return RaftStatus(fields["self"], frozenset(partners), fields.get("leader", "None"))

    def change(self, leader: str, op: str, node: str) -> str:
        """-add / -remove NODE at the Raft LEADER; its answer."""
        out = self._run(leader, f"-{op}", node, timeout_s=20).strip()
        log(f"syncobj_admin -conn {leader} -{op} {node}: {out}")
        return out


def alert_log(prometheus: Prometheus) -> TruthSampler[frozenset[str]]:
    """Prometheus's pending and firing alerts (`NAME/state`) read every second, each reading
    stamped."""
    return TruthSampler(lambda: frozenset(f"{a['labels']['alertname']}/{a['state']}" for a in prometheus.alerts()),
                        every_s=1.0)


def poll_errors_it_counts(log: Path, rules: Path) -> list[str]:
    """The exporter's "poll failed" lines of the kinds PatroniExporterPollErrors counts (its
    expression in RULES), each cut at 300 characters."""
    expr = re.search(r'poll_errors_total\{kind=~"([^"]+)"\}', rules.read_text())
    assert expr is not None, f"PatroniExporterPollErrors's kinds in {rules}"
    kinds = set(expr.group(1).split("|"))
    if not log.exists():
        return []
    return [line[:300] for line in log.read_text(errors="replace").splitlines()
            if 'message="poll failed"' in line and (m := re.search(r" kind=(\w+)", line)) and m.group(1) in kinds]


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cluster(paths: LabPaths, patroni_version: str, run_dir: Path, netns: Netns,
            results: Results) -> Iterator[PatroniCluster]:
    with running_cluster(paths.cluster_sh, patroni_version, paths.work / f"cluster-{SCENARIO}-{patroni_version}",
                         run_dir, results) as c:
        yield c


@pytest.fixture(scope="module")
def exporters(paths: LabPaths, run_dir: Path, cluster: PatroniCluster) -> Iterator[list[Exporter]]:
    """The README's quick start on postgresql-0 and on postgresql-1."""
    secret = run_dir / "raft-password"
    secret.write_text(cluster.env_vars()["RAFT_PASS"] + "\n")
    secret.chmod(0o600)
    started: list[Exporter] = []
    try:
        for i, n in enumerate(WATCHED):
            started.append(Exporter(paths.exporter_bin, ["--patroni.url", cluster.rest(n), "--raft.password-file",
                                                         str(secret), "--poll.interval", "2s"],
                                    run_dir / f"exporter-{n}.log", listen=f"127.0.0.1:{9393 + i}").start())
        yield started
    finally:
        for e in started:
            e.stop()


@pytest.fixture(scope="module")
def prometheus(run_dir: Path, paths: LabPaths, exporters: list[Exporter]) -> Iterator[Prometheus]:
    p = Prometheus(run_dir, [e.listen for e in exporters], [paths.repo / "alerts" / "patroni-raft.rules.yml"]).start()
    yield p
    p.stop()


# ------------------------------------------------------------------ judging
def expected(statuses: dict[str, RaftStatus | None]) -> tuple[int, frozenset[str], int, frozenset[str]]:
    """What the voter-set families must say when the nodes said STATUSES: voters, the nodes of
    node_info, voter sets, the nodes whose set differs from the one most nodes have."""
    sets = [s.voters for s in statuses.values() if s is not None]
    union = frozenset().union(*sets) if sets else frozenset()
    distinct = set(sets)
    majority = max(distinct, key=sets.count) if distinct else frozenset()
    differs = frozenset(s.self_addr for s in statuses.values() if s is not None and s.voters != majority)
    return len(union), union, len(distinct), differs


def judge(s: Scrape, truth: dict[str, TruthSampler[RaftStatus | None]]) -> str | None:
    """'' when the scrape says what the nodes said around its poll, the difference otherwise;
    None when the nodes' word changed during the poll (or was not read on both sides)."""
    end = s.value("patroni_exporter_last_poll_timestamp_seconds", **S)
    took = s.value("patroni_exporter_poll_duration_seconds", **S)
    if end is None or took is None:
        return None
    said: dict[str, RaftStatus | None] = {}
    for node, t in truth.items():
        b = t.between(end - took, end)
        if b is None or b[0] != b[1]:
            return None
        said[node] = b[0]
    voters, nodes, sets, differs = expected(said)
    got_voters = s.value("patroni_raft_voters", **S)
    got_nodes = frozenset(x.labels["node"] for x in s.values("patroni_raft_node_info", **S) if x.value == 1)
    got_sets = s.value("patroni_raft_voter_sets", **S)
    got_differs = frozenset(x.labels["node"] for x in s.values("patroni_raft_voter_set_differs", **S) if x.value == 1)
    wrong = []
    if got_voters != voters:
        wrong.append(f"voters {got_voters} (nodes: {voters})")
    if got_nodes != nodes:
        wrong.append(f"node_info {sorted(got_nodes)} (nodes: {sorted(nodes)})")
    if got_sets != sets:
        wrong.append(f"voter_sets {got_sets} (nodes: {sets})")
    if got_differs != differs:
        wrong.append(f"voter_set_differs {sorted(got_differs)} (nodes: {sorted(differs)})")
    return "; ".join(wrong)


# ------------------------------------------------------------------ the scenario
def test_membership_changes_as_the_charm_makes_them(cluster: PatroniCluster, exporters: list[Exporter],
                                                     prometheus: Prometheus, paths: LabPaths, patroni_version: str,
                                                     run_dir: Path, results: Results, checks: Checks) -> None:
    env = cluster.env_vars()
    addrs = env["RAFT_ADDRS"].split(",")
    leaver = addrs[LEAVER]
    raft = Raft(paths.venv(patroni_version), env["RAFT_PASS"])
    for rule in ("PatroniRaftVoterSetsDiffer", "PatroniRaftZombieVoter", "PatroniRaftQuorumLost"):
        checks.check(f"Prometheus loaded the shipped rule {rule}", prometheus.rule_loaded(rule))
    t_ready = time.monotonic()
    for e in exporters:
        e.wait_value("healthy", "patroni_raft_voters", S, 3, 60)
        e.wait_value("healthy", "patroni_raft_cluster_quorum", S, 1, 30)
        e.wait_value("healthy", "patroni_cluster_sync_standbys", S, 2, 30)
    checks.reached(f"both exporters: 3 voters, quorum 1, 2 sync standbys ({time.monotonic() - t_ready:.1f}s)")

    truth = {a: TruthSampler(lambda a=a: raft.reading(a), every_s=1.0).start() for a in addrs}
    samplers = [Sampler(e.metrics_url, 1.0).start() for e in exporters]
    alerts = alert_log(prometheus).start()
    t0 = time.time()
    steps: list[tuple[str, float]] = [("healthy", t0)]

    def step(name: str) -> None:
        steps.append((name, time.time()))
        log(f"=== step {name} at +{time.time() - t0:.1f}s")

    def raft_leader() -> str | None:
        for a in addrs:
            if a == leaver and steps[-1][0] in ("stopped", "removed", "added"):
                continue
            st = raft.status(a)
            if st is not None and st.leader in addrs:
                return st.leader
        return None

    def nodes_say(want: frozenset[str], among: list[str]) -> bool | None:
        return all((st := raft.status(a)) is not None and st.voters == want for a in among) or None

    def exporters_say(voters: int) -> bool | None:
        return all(e.scrape().value("patroni_raft_voters", **S) == voters for e in exporters) or None

    stayers = [a for a in addrs if a != leaver]

    def leaver_listed() -> bool | None:
        """Whether postgresql-0's GET /cluster lists the leaver; None when it does not answer."""
        view = cluster.get(0, "/cluster")
        return None if view is None else any(m.get("name") == cluster.name(LEAVER) for m in view.get("members", []))

    def change_voters(leader: str, action: str, word: str, want: frozenset[str]) -> None:
        """`syncobj_admin -ACTION leaver` at the leader: the step `removed` or `added`, until
        the stayers' own voter sets and then both exporters say `want`."""
        name = {"remove": "removed", "add": "added"}[action]
        step(name)
        out = raft.change(leader, action, leaver)
        checks.check(f"syncobj_admin -{action} {leaver}: {out!r}", "SUCCESS" in out)
        _, took = wait_for(f"the two nodes' own voter set {word} it", lambda: nodes_say(want, stayers), 30)
        results.record(name, f"the nodes' own voter sets {word} it after -{action} (s)", f"{took:.1f}")
        _, took = wait_for(f"both exporters: {len(want)} voters", lambda: exporters_say(len(want)), 30)
        results.record(name, f"both exporters: {len(want)} voters after -{action} (s)", f"{took:.1f}")

    try:
        time.sleep(10)
        step("stopped")
        cluster.stop(LEAVER)
        _, took = wait_for(f"both exporters: {leaver} down", lambda: all(
            e.scrape().value("patroni_raft_up", **S, node=leaver) == 0 for e in exporters) or None, 30)
        results.record("stopped", "voter down in both exporters after the stop (s)", f"{took:.1f}")
        time.sleep(6)

        leader = raft_leader()
        checks.check(f"the Raft leader by the nodes' own word: {leader}", leader is not None and leader != leaver)
        assert leader is not None
        change_voters(leader, "remove", "without", frozenset(stayers))
        # The scale-down as it stays: the removed member's key expires (its ttl) and leaves
        # /cluster, and the exporters remember it as departed for a ttl more, still asking
        # it: never refused as api_url_not_allowed (its host, no longer named by Raft, was
        # once forgotten with the key while the member was still asked).
        _, took = wait_for(f"{cluster.name(LEAVER)}'s key expired: not in a stayer's GET /cluster",
                           lambda: leaver_listed() is False or None, 90)
        results.record("removed", "its key gone from /cluster after -remove (s)", f"{took:.1f}")
        time.sleep(10)

        leader = raft_leader()
        assert leader is not None
        change_voters(leader, "add", "with", frozenset(addrs))
        time.sleep(6)

        step("rejoined")
        cluster.env[f"MEMBER_RAFT_PARTNERS_{LEAVER}"] = ",".join(stayers)
        t_start = time.monotonic()
        cluster.start(LEAVER)
        checks.check("rejoined: healthy again (sync)", cluster.wait(sync=True))
        results.record("rejoined", "start to healthy again (sync) (s)", f"{time.monotonic() - t_start:.1f}")
        _, took = wait_for("every node's own voter set: all three", lambda: nodes_say(frozenset(addrs), addrs), 30)
        for e in exporters:
            e.wait_value("rejoined", "patroni_raft_up", {**S, "node": leaver}, 1, 30)
        time.sleep(10)
    finally:
        cluster.env.pop(f"MEMBER_RAFT_PARTNERS_{LEAVER}", None)
        t_end = time.time()
        scrapes = [smp.stop() for smp in samplers]
        for t in truth.values():
            t.stop()
        alerts.stop()
    results.record("total", "membership steps (s)", f"{t_end - t0:.1f}")

    def step_of(t: float) -> str:
        return ([name for name, since in steps if since <= t] or [steps[0][0]])[-1]

    # the nodes' own word as read (a reading that failed is not there)
    with (run_dir / "truth.tsv").open("w") as f:
        f.write("node\tt_before\tt_after\tself\tvoters\tleader\n")
        for node, t in truth.items():
            for r in t.readings:
                st = r.value
                f.write(f"{node}\t{r.t_before - t0:.1f}\t{r.t_after - t0:.1f}\t"
                        + (f"{st.self_addr}\t{','.join(sorted(st.voters))}\t{st.leader}\n" if st else "-\t-\t-\n"))

    # the voter-set families against the nodes' own word, per exporter and step
    with (run_dir / "samples.tsv").open("w") as f:
        f.write("exporter\tt\tstep\tvoters\tnode_info\tvoter_sets\tdiffers\tverdict\n")
        for e, got in zip(exporters, scrapes):
            judged: dict[str, int] = {name: 0 for name, _ in steps}
            bad: list[str] = []
            for s in got:
                verdict = judge(s, truth)
                nodes = ",".join(sorted(x.labels["node"] + ":" + x.labels.get("kind", "?")
                                        for x in s.values("patroni_raft_node_info", **S) if x.value == 1))
                differs = ",".join(sorted(x.labels["node"] for x in s.values("patroni_raft_voter_set_differs", **S)
                                          if x.value == 1))
                f.write(f"{e.listen}\t{s.t_before - t0:.1f}\t{step_of(s.t_before)}\t"
                        f"{s.value('patroni_raft_voters', **S)}\t{nodes}\t{s.value('patroni_raft_voter_sets', **S)}\t"
                        f"{differs or '-'}\t{'unjudged' if verdict is None else verdict or 'ok'}\n")
                if verdict is None:
                    continue
                judged[step_of(s.t_before)] += 1
                if verdict:
                    bad.append(f"+{s.t_before - t0:.1f}s {step_of(s.t_before)}: {verdict}")
            results.record("judged", f"scrapes of {e.listen} judged per step", " ".join(f"{k}={v}" for k, v in judged.items()))
            checks.check(f"{e.listen}: every scrape's voter-set families as the nodes' own status around its poll "
                         f"({sum(judged.values())} of {len(got)} judged, {len(bad)} bad: {bad[:4]})", not bad)
            thin = [name for name, n in judged.items() if name != "stopped" and n < 3]
            checks.check(f"{e.listen}: at least 3 judged scrapes in each step but the stop ({judged})", not thin)

    # nothing pages: per step, only what it explains
    seen: dict[str, set[str]] = {name: set() for name, _ in steps}
    with (run_dir / "alerts.tsv").open("w") as f:
        f.write("t\tstep\talerts\n")
        for r in alerts.readings:
            seen[step_of(r.t_before)] |= r.value
            f.write(f"{r.t_before - t0:.1f}\t{step_of(r.t_before)}\t{' '.join(sorted(r.value)) or '-'}\n")
    # what PatroniExporterPollErrors counts, as the exporters logged it: named when it is seen
    rules = paths.repo / "alerts" / "patroni-raft.rules.yml"
    alerting_errors = [line for n in WATCHED for line in poll_errors_it_counts(run_dir / f"exporter-{n}.log", rules)]
    results.record("total", "poll errors of the kinds PatroniExporterPollErrors counts", str(len(alerting_errors)))
    for name, got_alerts in seen.items():
        unexplained = sorted(a for a in got_alerts if a not in ALLOWED or name not in ALLOWED[a][0])
        explained = [f"{a}: {ALLOWED[a][1]}" for a in sorted(got_alerts) if a not in unexplained]
        why = f"; the exporters logged {alerting_errors[:3]}" if any(a.startswith("PatroniExporterPollErrors/")
                                                                      for a in unexplained) else ""
        results.record(name, "alerts seen", " ".join(sorted(got_alerts)) or "none")
        checks.check(f"step {name}: no alert pending or firing beyond what the step explains (unexplained "
                     f"{unexplained}; explained {explained}{why})", not unexplained)
    firing = sorted({a for r in alerts.readings for a in r.value if a.endswith("/firing")})
    checks.check(f"nothing fires but the info alert PatroniPostgresRestarted ({firing})",
                 set(firing) <= {"PatroniPostgresRestarted/firing"})
    last = alerts.readings[-1].value if alerts.readings else frozenset({"(never read)"})
    checks.check(f"healthy again at the end: nothing pending or firing but {sorted(AT_THE_END)} ({sorted(last)})",
                 last <= AT_THE_END)
    checks.check(f"Prometheus's alerts read {len(alerts.readings)} times", len(alerts.readings) >= (t_end - t0) / 3)
    checks.check("both exporters still running, no panic", all(e.alive() and not e.panicked() for e in exporters))
    checks.verify()

