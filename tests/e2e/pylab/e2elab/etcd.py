"""A real 3-member etcd v3 cluster (Debian's etcd-server 3.4, or the `etcd` and `etcdctl` of
another release in `bin_dir`) on 127.0.0.31-33, client port 2379, peer port 2380, in the test's
network namespace; data directories under the run directory.

Ground truth comes from etcd itself: `etcdctl --write-out=json endpoint status` (each member's
own word on its Raft term, index, leader and revision) and `endpoint health` (a quorum read
through that member), each read stamped with when it was read.

With `EtcdTls` the members serve clients on https only and ask them a certificate of the CA
(`--client-cert-auth`); etcdctl then presents the client certificate given, and, once the test
enabled etcd's auth, the user of `ctl_user` (`user:password`, passed in etcdctl's environment).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .checks import Results
from .log import log
from .metrics import Stamped, stamped, wait_for
from .proc import Daemon


@dataclass(frozen=True)
class EndpointStatus:
    endpoint: str
    member_id: int
    leader_id: int
    raft_term: int
    raft_index: int
    revision: int

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


@dataclass(frozen=True)
class EtcdTls:
    """Clients on https with `--client-cert-auth`: the CA, member N's server certificate and key
    at `member_cert(n)`/`member_key(n)` (its IP in the SAN), and the client certificate etcdctl
    presents."""
    ca: Path
    dir: Path
    client_cert: Path
    client_key: Path

    def member_cert(self, n: int) -> Path:
        return self.dir / f"etcd-{n}.pem"

    def member_key(self, n: int) -> Path:
        return self.dir / f"etcd-{n}-key.pem"


class EtcdCluster:
    def __init__(self, run_dir: Path, ip_base: int = 31, size: int = 3, log_prefix: str = "etcd",
                 tls: EtcdTls | None = None, bin_dir: Path = Path("/usr/bin"), extra_args: tuple[str, ...] = ()) -> None:
        self.run_dir = run_dir
        self.extra_args = extra_args  # more flags of every member (`--quota-backend-bytes N`)
        self.bin_dir = bin_dir
        self.size = size
        self.ips = [f"127.0.0.{ip_base + n}" for n in range(size)]
        self.log_prefix = log_prefix
        self.members: list[Daemon | None] = [None] * size
        self.tls = tls
        # `user:password` etcdctl authenticates as once auth is on (None: no user)
        self.ctl_user: str | None = None

    def name(self, n: int) -> str:
        return f"etcd-{n}"

    def client_url(self, n: int) -> str:
        return f"{'https' if self.tls else 'http'}://{self.ips[n]}:2379"

    def peer_url(self, n: int) -> str:
        return f"http://{self.ips[n]}:2380"

    @property
    def hosts(self) -> str:
        """host:port,... (Patroni's etcd3.hosts)."""
        return ",".join(f"{ip}:2379" for ip in self.ips)

    @property
    def endpoints(self) -> list[str]:
        return [self.client_url(n) for n in range(self.size)]

    def _data_dir(self, n: int) -> Path:
        return self.run_dir / f"{self.name(n)}.data"

    def _argv(self, n: int, state: str) -> list[str]:
        cluster = ",".join(f"{self.name(i)}={self.peer_url(i)}" for i in range(self.size))
        return [str(self.bin_dir / "etcd"), "--name", self.name(n), "--data-dir", str(self._data_dir(n)),
                "--listen-client-urls", self.client_url(n), "--advertise-client-urls", self.client_url(n),
                "--listen-peer-urls", self.peer_url(n), "--initial-advertise-peer-urls", self.peer_url(n),
                "--initial-cluster", cluster, "--initial-cluster-state", state,
                "--initial-cluster-token", "pylab", "--logger", "zap", *self._tls_args(n), *self.extra_args]

    def _tls_args(self, n: int) -> list[str]:
        if self.tls is None:
            return []
        return ["--client-cert-auth", "--trusted-ca-file", str(self.tls.ca),
                "--cert-file", str(self.tls.member_cert(n)), "--key-file", str(self.tls.member_key(n))]

    def version(self) -> str:
        """What `etcd --version` says of itself (`3.5.1`)."""
        out = subprocess.run([str(self.bin_dir / "etcd"), "--version"], capture_output=True, text=True, timeout=10)
        first = out.stdout.splitlines()[0] if out.stdout else ""
        return first.removeprefix("etcd Version:").strip() or f"? ({out.stderr.strip()[:200]})"

    def up(self, timeout_s: float = 60) -> None:
        """Fresh data directories, all members started, until every member answers healthy."""
        for n in range(self.size):
            shutil.rmtree(self._data_dir(n), ignore_errors=True)
            self.members[n] = Daemon(self._argv(n, "new"), self.run_dir / f"{self.log_prefix}-{n}.log").start()
        _, took = wait_for("etcd: every member healthy", lambda: all(self.health().values()) or None, timeout_s)
        log(f"etcd up on {self.hosts} in {took:.1f}s, leader {self.leader()}")

    def start(self, n: int) -> None:
        """Starts member N again on its data directory (no-op when it runs)."""
        d = self.members[n]
        if d is not None and d.alive():
            return
        self.members[n] = Daemon(self._argv(n, "existing"), self.run_dir / f"{self.log_prefix}-{n}.log").start()

    def stop(self, n: int) -> None:
        """Graceful: SIGTERM (SIGKILL after 10 s), reaped."""
        d = self.members[n]
        if d is not None:
            d.stop(10)

    def kill(self, n: int) -> None:
        d = self.members[n]
        if d is not None and d.alive():
            d.signal(signal.SIGKILL)
            d.stop(5)

    def sigstop(self, n: int) -> None:
        d = self.members[n]
        assert d is not None and d.alive(), f"{self.name(n)} not running"
        d.signal(signal.SIGSTOP)

    def sigcont(self, n: int) -> None:
        d = self.members[n]
        if d is not None:
            d.signal(signal.SIGCONT)

    def down(self) -> None:
        for n in range(self.size):
            self.sigcont(n)
            self.stop(n)

    def pid(self, n: int) -> int:
        d = self.members[n]
        assert d is not None
        return d.pid

    def ctl(self, *args: str, endpoints: list[str] | None = None, timeout_s: float = 10,
            user: str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """etcdctl ARGS as `user` (`name:password`; "" for none), else as `ctl_user`; STDIN
        its input (a password for `--interactive=false`, never in an argv)."""
        env = {"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"}
        if self.tls is not None:
            env |= {"ETCDCTL_CACERT": str(self.tls.ca), "ETCDCTL_CERT": str(self.tls.client_cert),
                    "ETCDCTL_KEY": str(self.tls.client_key)}
        who = self.ctl_user if user is None else user
        if who:
            env["ETCDCTL_USER"] = who
        return subprocess.run([str(self.bin_dir / "etcdctl"), "--endpoints", ",".join(endpoints or self.endpoints),
                               "--dial-timeout", "1s", "--command-timeout", "2s", *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout_s, env=env)

    def endpoint_status(self) -> Stamped[dict[str, EndpointStatus]]:
        """Each member's own status, stamped; a member that does not answer is absent."""
        def read() -> dict[str, EndpointStatus]:
            out: dict[str, EndpointStatus] = {}
            for ep in self.endpoints:  # one at a time: one dead member must not hide the others
                r = self.ctl("--write-out=json", "endpoint", "status", endpoints=[ep])
                if r.returncode != 0 or not r.stdout.strip():
                    continue
                for e in json.loads(r.stdout):
                    st, hdr = e["Status"], e["Status"]["header"]
                    out[e["Endpoint"]] = EndpointStatus(e["Endpoint"], int(hdr["member_id"]), int(st["leader"]),
                                                        int(st["raftTerm"]), int(st["raftIndex"]), int(hdr["revision"]))
            return out
        return stamped(read)

    def health(self) -> dict[str, bool]:
        """endpoint -> healthy (a quorum read through it answered)."""
        out: dict[str, bool] = {}
        for ep in self.endpoints:
            r = self.ctl("--write-out=json", "endpoint", "health", endpoints=[ep])
            try:
                out[ep] = bool(json.loads(r.stdout)[0]["health"]) if r.stdout.strip() else False
            except (ValueError, KeyError, IndexError):
                out[ep] = False
        return out

    def leader(self) -> str | None:
        """The client URL of the member every answering member names leader (None: no leader,
        or they disagree)."""
        st = self.endpoint_status().value
        leaders = {s.leader_id for s in st.values()}
        if len(leaders) != 1 or 0 in leaders:
            return None
        lid = leaders.pop()
        return next((ep for ep, s in st.items() if s.member_id == lid), None)

    def keys(self, prefix: str) -> list[str]:
        r = self.ctl("get", "--prefix", "--keys-only", prefix)
        if r.returncode != 0:
            raise RuntimeError(f"etcdctl get --prefix {prefix}: {r.stderr.strip()}")
        return [k for k in r.stdout.splitlines() if k]


@contextmanager
def running_etcd(run_dir: Path, bin_dir: Path, release: str, results: Results, ip_base: int = 31,
                 tls: EtcdTls | None = None) -> Iterator[EtcdCluster]:
    """A scenario's etcd: the binaries of `bin_dir`, which must say they are `release` (3.4 is
    Debian's 3.4.x), up on fresh data directories (how long recorded), down at the end."""
    e = EtcdCluster(run_dir, ip_base=ip_base, tls=tls, bin_dir=bin_dir)
    got = e.version()
    results.record("setup", "etcd release", got)
    assert got == release or got.startswith(release + "."), f"{bin_dir}/etcd says {got}, not {release}"
    try:
        t0 = time.monotonic()
        e.up()
        results.record("setup", "etcd up, every member healthy (s)", f"{time.monotonic() - t0:.1f}")
        yield e
    finally:
        e.down()

