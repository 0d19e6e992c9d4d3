"""A real Patroni cluster, made and driven by tests/e2e/cluster.sh: this class only calls the
script (one harness for bash and Python), with the environment a scenario gives it (DATA_DIR,
WAL_SEGSIZE, MEMBER_GID_BASE, DCS=etcd ...)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import Results
from .log import log


@dataclass(frozen=True)
class MemberPids:
    patroni: int | None
    postmaster: int | None


class ClusterError(Exception):
    pass


class PatroniCluster:
    def __init__(self, script: Path, version: str, data_dir: Path, log_path: Path,
                 env: Mapping[str, str] | None = None) -> None:
        self.script = script
        self.version = version
        self.data_dir = data_dir
        self.log_path = log_path
        self.env = {**os.environ, "PATRONI_VERSION": version, "DATA_DIR": str(data_dir), **(env or {})}
        self._env_cache: dict[str, str] | None = None

    def sh(self, *args: str, timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        """cluster.sh ARGS; its stderr (progress) appended to the cluster log, stdout returned."""
        with self.log_path.open("a") as err:
            err.write(f"---- cluster.sh {' '.join(args)}\n")
            err.flush()
            r = subprocess.run([str(self.script), *args], env=self.env, stdout=subprocess.PIPE, stderr=err,
                               text=True, timeout=timeout_s)
        if check and r.returncode != 0:
            raise ClusterError(f"cluster.sh {' '.join(args)}: exit {r.returncode} (log {self.log_path})")
        return r

    def up(self, sync: bool = True) -> None:
        log(f"cluster up{' --sync' if sync else ''} (Patroni {self.version}, {self.data_dir})")
        self.sh("up", *(["--sync"] if sync else []))
        self._env_cache = None

    def down(self, fast: bool = True, keep_logs: Path | None = None) -> None:
        """Everything stopped and DATA_DIR removed; each member's patroni.log first copied to
        KEEP_LOGS/patroni-MEMBER.log."""
        if keep_logs is not None:
            for log_file in self.data_dir.glob("*/patroni.log"):
                shutil.copyfile(log_file, keep_logs / f"patroni-{log_file.parent.name}.log")
        self.sh("down", *(["--fast"] if fast else []), check=False)

    def wait(self, sync: bool = True) -> bool:
        return self.sh("wait", *(["--sync"] if sync else []), check=False).returncode == 0

    def kill(self, n: int) -> None:
        self.sh("kill", str(n))

    def stop(self, n: int) -> None:
        self.sh("stop", str(n))

    def start(self, n: int) -> None:
        self.sh("start", str(n))

    def ctl(self, *args: str) -> str:
        return self.sh("ctl", *args).stdout

    def psql(self, n: int, sql: str) -> str:
        return self.sh("psql", str(n), "-XAtc", sql).stdout.strip()

    def env_vars(self) -> dict[str, str]:
        """`cluster.sh env`: MEMBER0_REST, REST_PASS, RAFT_PASS, ..."""
        if self._env_cache is None:
            out: dict[str, str] = {}
            for line in self.sh("env").stdout.splitlines():
                key, _, value = line.partition("=")
                out[key] = shlex.split(value)[0] if value else ""
            self._env_cache = out
        return self._env_cache

    @property
    def members(self) -> list[int]:
        return list(range(int(self.env_vars()["MEMBERS"])))

    def rest(self, n: int) -> str:
        return self.env_vars()[f"MEMBER{n}_REST"]

    def name(self, n: int) -> str:
        return self.env_vars()[f"MEMBER{n}_NAME"]

    def pids(self) -> dict[str, MemberPids]:
        """`cluster.sh pids`: member name -> its patroni and postmaster PID (None: not running)."""
        out: dict[str, MemberPids] = {}
        for line in self.sh("pids").stdout.splitlines():
            name, *fields = line.split()
            kv = dict(f.split("=", 1) for f in fields)
            def pid(key: str) -> int | None:
                v = kv.get(key, "-")
                return int(v) if v.isdigit() else None
            out[name] = MemberPids(pid("patroni"), pid("postmaster"))
        return out

    def patroni_pid(self, n: int) -> int:
        pid = self.pids()[self.name(n)].patroni
        if pid is None:
            raise ClusterError(f"{self.name(n)}: patroni not running")
        return pid

    def get(self, n: int, path: str, timeout_s: float = 3) -> Any:
        """Member N's own REST answer to GET PATH (JSON), or None when it does not answer."""
        try:
            with urllib.request.urlopen(self.rest(n) + path, timeout=timeout_s) as r:
                return json.loads(r.read(8 << 20))
        except (OSError, ValueError):
            return None

    def leader_index(self) -> int:
        """The member GET /cluster names leader, asking the members in turn (the first that
        answers tells, as lib.sh's e2e_cluster_leader)."""
        for n in self.members:
            js = self.get(n, "/cluster")
            if js is None:
                continue
            names = [m["name"] for m in js.get("members", []) if m.get("role") == "leader"]
            if not names:
                break
            return next(i for i in self.members if self.name(i) == names[0])
        raise ClusterError("GET /cluster names no leader")


@contextmanager
def running_cluster(script: Path, version: str, data_dir: Path, run_dir: Path, results: Results | None = None,
                    env: Mapping[str, str] | None = None, setup_label: str = "cluster up --sync (s)",
                    before_down: Callable[[], None] | None = None) -> Iterator[PatroniCluster]:
    """A scenario's cluster: an interrupted run's leftovers removed, `up --sync` (its time
    recorded under `setup_label`), and at the end `before_down` (e.g. resume stopped members,
    which would hold `down` for its timeout), then `down` with each member's log kept in
    RUN_DIR. The environment has WAL_SEGSIZE (1 MiB unless set) before `env`."""
    c = PatroniCluster(script, version, data_dir, run_dir / "cluster.log",
                       env={"WAL_SEGSIZE": os.environ.get("WAL_SEGSIZE", "1"), **(env or {})})
    c.down()
    t0 = time.monotonic()
    try:
        c.up(sync=True)
        if results is not None:
            results.record("setup", setup_label, f"{time.monotonic() - t0:.1f}")
        yield c
    finally:
        if before_down is not None:
            before_down()
        c.down(keep_logs=run_dir)
