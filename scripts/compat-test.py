#!/usr/bin/env python3
"""Make alerts/tests/compat.test.yml: the promtool test of alerts/patroni-compat.rules.yml.

Input series: the exporter's golden /metrics (tests/golden/metrics.txt) of the clusters made from
the captures of a healthy cluster, one per Patroni version (scope "healthy-3-3-8":
tests/fixtures/patroni-3.3.8/cluster.json and patroni-m*.json; "healthy-4-1-5":
patroni-4.1.5/01-cluster-from-m0.json and 01-patroni-m*.json). Expected samples: Patroni's OWN
GET /metrics of the same three members, captured at the same moment (patroni-3.3.8/metrics-m*.txt,
patroni-4.1.5/01-metrics-m*.txt), scope renamed. So the test says: the recording rules give what
Patroni itself would have said, on both versions.

The exporter's series are fed twice, as two exporters scraped under two `instance`s would give them
(the recommended setup), with the Juju topology labels Charmed PostgreSQL's scrape adds to both
(juju_unit: each exporter's own unit): Patroni's samples are expected once per member, with those
labels, without instance/job, and with the member's own juju_unit (postgresql-0 -> postgresql/0), and
Charmed PostgreSQL's `sum by (juju_model, juju_application, juju_model_uuid, scope) (patroni_master)`
(its PatroniMultipleLeaders) is 1. A second test feeds the golden series of the captured cluster
whose members postgresql-0 and postgresql-2 did not answer their own GET /patroni
("quorum-lost-4-1-5"), as two exporters outside Juju give them: only postgresql-1 may have compat
series, one per recording rule, without a juju_unit, although GET /cluster still lists the other
two as streaming.

  scripts/compat-test.py           write alerts/tests/compat.test.yml
  scripts/compat-test.py --check   fail if it differs from what this script makes (CI)
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/golden/metrics.txt"
# scope in the golden output -> Patroni's own /metrics of its three members
CASES = {
    "healthy-3-3-8": [ROOT / f"tests/fixtures/patroni-3.3.8/metrics-m{i}.txt" for i in range(3)],
    "healthy-4-1-5": [ROOT / f"tests/fixtures/patroni-4.1.5/01-metrics-m{i}.txt" for i in range(3)],
}
RULES = ROOT / "alerts/patroni-compat.rules.yml"
OUT = ROOT / "alerts/tests/compat.test.yml"
# `\s*` before the labels: Patroni up to 3.3.10, 4.0.9 and 4.1.3 writes
# `patroni_postgres_server_version {...}` (the 3.3.8 capture); 3.3.11, 4.0.10, 4.1.4 and later do
# not (the 4.1.5 capture). The table is src/patroni/release.rs (Feature::TimelineGauge).
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s+(\S+)$')
# Patroni's samples that differ from the exporter's on purpose, with the reason.
SKIP: dict[str, str] = {}
# Patroni 4.2.0's names: no Patroni 4.2 /metrics was captured (4.2.0 is not released), so the
# expected samples are 4.2's definitions (api.py of release/v4.2.0, PRs #3534 and #3633) applied
# to the documents the golden clusters were made from: each member's own GET /patroni (its tags)
# and the /config served with them (tests/fixtures/patroni-4.1.5/01-config.json for both).
OWN = {"healthy-3-3-8": [ROOT / f"tests/fixtures/patroni-3.3.8/patroni-m{i}.json" for i in range(3)],
       "healthy-4-1-5": [ROOT / f"tests/fixtures/patroni-4.1.5/01-patroni-m{i}.json" for i in range(3)]}
CONFIG = ROOT / "tests/fixtures/patroni-4.1.5/01-config.json"
# the golden cluster in failsafe mode: its /config (failsafe_mode true) and the topology its
# GET /failsafe answers (tests/it/exporter.rs serves every member in it)
FAILSAFE = "failsafe-active-4-1-5"
# families the records read that a healthy golden cluster has none of, and why
ABSENT_WHEN_HEALTHY = {"patroni_member_failsafe_topology": "asked only while failsafe mode is on"}
FAILSAFE_CONFIG = ROOT / "tests/fixtures/patroni-4.1.5/states/failsafe-active/config.json"
FAILSAFE_TOPOLOGY = ("postgresql-0", "postgresql-1", "postgresql-2")


def truthy(value) -> bool:
    """Python's truth of a tag value, as Patroni reads tags ("false" is true)."""
    return bool(value) and value != 0


def patroni_42(status: dict, config: dict, topology: tuple[str, ...]) -> dict[str, int]:
    """Patroni 4.2's values of its new names for the member whose own GET /patroni is `status`."""
    tags = status.get("tags", {})
    priority = 0 if truthy(tags.get("nofailover")) else int(tags.get("failover_priority", 1))
    name = status.get("name") or status["patroni"]["name"]
    return {"patroni_failover_priority": priority,
            "patroni_failsafe_mode_enabled": int(bool(config.get("failsafe_mode", False))),
            "patroni_failsafe_member": int(bool(config.get("failsafe_mode")) and name in topology)}
# the golden scope whose members postgresql-0 and postgresql-2 did not answer GET /patroni
UNANSWERED = "quorum-lost-4-1-5"
# two exporters watching the same cluster; the target labels Juju's scrape adds to both
# (juju_unit: each exporter's own unit, as a Juju scrape labels its targets)
EXPORTERS = ('instance="exporter-a:9933",job="patroni-raft",juju_unit="exporter/0"',
             'instance="exporter-b:9933",job="patroni-raft",juju_unit="exporter/1"')
TOPOLOGY = 'juju_model="pg",juju_model_uuid="00000000-0000-4000-8000-000000000000",juju_application="postgresql"'
# a switchover: exporter a polled before the demotion, b after the promotion
SWITCHOVER = ((EXPORTERS[0].split(",juju_unit=")[0], {"postgresql-0": "primary", "postgresql-1": "replica"}),
              (EXPORTERS[1].split(",juju_unit=")[0], {"postgresql-0": "replica", "postgresql-1": "primary"}))
CHARM_SUM = "sum by (juju_model, juju_application, juju_model_uuid, scope) (patroni_master)"


def samples(path: Path):
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = SAMPLE.match(line)
        if m:
            yield m.group(1), m.group(2) or "{}", m.group(3)


def main() -> int:
    rules = yaml.safe_load(RULES.read_text())
    records = [r["record"] for g in rules["groups"] for r in g["rules"]]
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    used = set(re.findall(r"\bpatroni_(?:member|cluster|config)_[a-z_]+\b", exprs))
    scopes = tuple(f'scope="{scope}"' for scope in [*CASES, UNANSWERED, FAILSAFE])
    golden = [(n, l, v) for n, l, v in samples(GOLDEN)
              if n in used and any(s in l for s in scopes) and v != "<varies>"]
    for scope in CASES:
        missing = used - ABSENT_WHEN_HEALTHY.keys() - {n for n, l, _ in golden if f'scope="{scope}"' in l}
        if missing:
            sys.exit(f"error: the golden output of {scope} has no {sorted(missing)}")
    answered = {l.split('member="')[1].split('"')[0]: v for n, l, v in golden
                if n == "patroni_member_api_up" and f'scope="{UNANSWERED}"' in l}
    if sorted(answered.items()) != [("postgresql-0", "0"), ("postgresql-1", "1"), ("postgresql-2", "0")]:
        sys.exit(f"error: the golden {UNANSWERED} no longer has postgresql-0 and -2 unanswered: {answered}")

    def fed(name: str, labels: str, value: str, juju: bool = True) -> list[dict]:
        """The sample as each of the two exporters gives it, with the target labels (Juju's or none)."""
        targets = [f"{e},{TOPOLOGY}" if juju else e.split(",juju_unit=")[0] for e in EXPORTERS]
        return [{"series": f"{name}{{{labels[1:-1]},{target}}}", "values": f"{value}x2"} for target in targets]

    def polled(scopes: list[str], juju: bool = True) -> list[dict]:
        """Both exporters' last poll, at the same time (the golden output has none: it varies)."""
        return [s for scope in scopes for s in fed("patroni_exporter_last_poll_timestamp_seconds",
                                                   f'{{scope="{scope}"}}', "1795312075", juju)]

    def with_topology(labels: str) -> str:
        """Patroni's labels with the target labels a Juju scrape of the member would add."""
        name = re.search(r'name="([^"]+)"', labels)
        unit = f',juju_unit="{name.group(1).rsplit("-", 1)[0]}/{name.group(1).rsplit("-", 1)[1]}"' if name else ""
        return f"{{{labels[1:-1]},{TOPOLOGY}{unit}}}"

    expected: dict[str, list[tuple[str, str]]] = {}
    for scope, paths in CASES.items():
        for path in paths:
            for name, labels, value in samples(path):
                if name in SKIP:
                    continue
                if name not in records:
                    sys.exit(f"error: {path.name}: Patroni's {name} has no recording rule and no reason in SKIP")
                labels = labels.replace('scope="pg-test"', f'scope="{scope}"')
                expected.setdefault(name, []).append((with_topology(labels), value))
    config = json.loads(CONFIG.read_text())
    captured = set(expected)
    for scope, paths in OWN.items():
        for path in paths:
            status = json.loads(path.read_text())
            name = status.get("name") or status["patroni"]["name"]
            for record, value in patroni_42(status, config, ()).items():
                if record in captured:
                    sys.exit(f"error: {record} is in Patroni's captured /metrics: compare with it")
                expected.setdefault(record, []).append(
                    (with_topology(f'{{name="{name}",scope="{scope}"}}'), str(value)))
    for name in records:
        if name not in expected:
            sys.exit(f"error: recording rule {name}: Patroni's captured /metrics has no such series")
    # a name only one version has (patroni_master: 3.x; patroni_quorum_standby,
    # patroni_postgres_state: 4.x): the rule gives it for the other version too, so only the
    # version that has it is compared
    compared = {name: sorted({l.split('scope="')[1].split('"')[0] for l, _ in expected[name]})
                for name in records}

    def number(v: str) -> float | int:
        f = float(v)
        return int(f) if f.is_integer() and abs(f) < 2**53 else f

    healthy = [sample for sample in golden if f'scope="{UNANSWERED}"' not in sample[1]
               and f'scope="{FAILSAFE}"' not in sample[1]]
    failsafe = [sample for sample in golden if f'scope="{FAILSAFE}"' in sample[1]]
    failsafe_config = json.loads(FAILSAFE_CONFIG.read_text())
    failsafe_names = ("patroni_failsafe_mode_enabled", "patroni_failsafe_member")
    unanswered = [sample for sample in golden if f'scope="{UNANSWERED}"' in sample[1]]
    survivor = f'{{name="postgresql-1",scope="{UNANSWERED}"}}'   # no Juju labels: none added
    test = {
        "rule_files": ["../patroni-compat.rules.yml"],
        "evaluation_interval": "15s",
        "tests": [{
            "name": "Patroni's own /metrics of the captured 3.3.8 and 4.1.5 clusters, from the golden series of two exporters",
            "interval": "15s",
            "input_series": [s for n, l, v in healthy for s in fed(n, l, v)] + polled(list(CASES)),
            "promql_expr_test": [
                {"expr": name if len(compared[name]) == len(CASES)
                         else f'{name}{{scope=~"{"|".join(compared[name])}"}}',
                 "eval_time": "15s",
                 "exp_samples": [{"labels": f"{name}{l}", "value": number(v)}
                                 for l, v in sorted(expected[name])]}
                for name in records
            ] + [
                # Charmed PostgreSQL's PatroniMultipleLeaders counts each member once
                {"expr": CHARM_SUM, "eval_time": "15s",
                 "exp_samples": [{"labels": with_topology(f'{{scope="{scope}"}}'), "value": 1} for scope in CASES]},
            ],
        }, {
            "name": "members whose own GET /patroni did not answer have no compat series (golden quorum-lost-4-1-5, two exporters without Juju labels)",
            "interval": "15s",
            "input_series": [s for n, l, v in unanswered for s in fed(n, l, v, juju=False)] + polled([UNANSWERED], juju=False),
            "promql_expr_test": [
                {"expr": f'count by (name) ({{scope="{UNANSWERED}",name!=""}})', "eval_time": "15s",
                 "exp_samples": [{"labels": '{name="postgresql-1"}', "value": len(records)}]},
                {"expr": f'patroni_postgres_running{{scope="{UNANSWERED}"}}', "eval_time": "15s",
                 "exp_samples": [{"labels": "patroni_postgres_running" + survivor, "value": 1}]},
            ],
        }, {
            "name": "Patroni 4.2's failsafe names in failsafe mode (golden failsafe-active-4-1-5, two exporters): one series per member",
            "interval": "15s",
            "input_series": [s for n, l, v in failsafe for s in fed(n, l, v, juju=False)] + polled([FAILSAFE], juju=False),
            "promql_expr_test": [
                {"expr": f'{record}{{scope="{FAILSAFE}"}}', "eval_time": "15s",
                 "exp_samples": [{"labels": f'{record}{{name="{member}",scope="{FAILSAFE}"}}',
                                  "value": patroni_42({"name": member}, failsafe_config, FAILSAFE_TOPOLOGY)[record]}
                                 for member in FAILSAFE_TOPOLOGY]}
                for record in failsafe_names
            ],
        }, {
            # measured in tests/e2e/charm-monitoring.sh (switchovers on 3.3.8 and 4.1.5): exporter a
            # polled before the old primary demoted, exporter b after the new one promoted. Merged
            # with max that made two primaries, with min none: b's view, the latest, is the one
            "name": "a switchover seen by two exporters at different moments: the latest poll's view",
            "interval": "15s",
            "input_series": [
                {"series": f'{n}{{scope="sw",member="{m}",{e}}}', "values": f"{v}x2"}
                for e, views in SWITCHOVER
                for m in views
                for n, v in (("patroni_member_api_up", "1"), ("patroni_member_server_version", "150018"))
            ] + [
                {"series": f'patroni_member_reported_role{{scope="sw",member="{m}",role="{r}",{e}}}',
                 "values": f'{1 if r == role else 0}x2'}
                for e, views in SWITCHOVER
                for m, role in views.items()
                for r in ("primary", "replica", "standby_leader")
            ] + [
                {"series": f'patroni_exporter_last_poll_timestamp_seconds{{scope="sw",{e}}}', "values": f"{t}x2"}
                for (e, _), t in zip(SWITCHOVER, (1795312075, 1795312077))
            ],
            "promql_expr_test": [
                {"expr": 'patroni_master{scope="sw"} == 1', "eval_time": "15s",
                 "exp_samples": [{"labels": 'patroni_master{name="postgresql-1",scope="sw"}', "value": 1}]},
                {"expr": 'sum by (scope) (patroni_master{scope="sw"})', "eval_time": "15s",
                 "exp_samples": [{"labels": '{scope="sw"}', "value": 1}]},
            ],
        }],
    }
    inputs = healthy + unanswered + failsafe
    header = ("# Generated by scripts/compat-test.py from tests/golden/metrics.txt (the exporter) and\n"
              "# tests/fixtures/patroni-3.3.8/metrics-m*.txt, patroni-4.1.5/01-metrics-m*.txt (Patroni's own\n"
              "# /metrics): do not edit.\n"
              f"# Not compared: {'; '.join(f'{k} ({v})' for k, v in SKIP.items()) or 'none'}.\n")
    text = header + yaml.safe_dump(test, sort_keys=False, width=200)
    if sys.argv[1:] == ["--check"]:
        if OUT.read_text() != text:
            sys.exit(f"error: {OUT.relative_to(ROOT)} is not what scripts/compat-test.py makes: run it")
        print(f"{OUT.relative_to(ROOT)}: up to date ({len(records)} recording rules, {len(inputs)} input series)")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(records)} recording rules, {len(inputs)} input series)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
