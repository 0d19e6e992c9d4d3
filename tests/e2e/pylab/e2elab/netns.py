"""A network namespace made by the test itself (`ip netns add`), its loopback up, removed at the
end whatever happened.

The test process enters it (setns(2) on the calling thread): every process it starts afterwards
(cluster.sh, Patroni, etcd, the exporter, Prometheus) and every thread it starts (the samplers)
lives there, and every socket it opens binds and connects there. Nothing reaches the host's
loopback, and two versions run side by side with the same fixed addresses. Python 3.11 has no
os.setns, hence ctypes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from types import TracebackType

from .log import log

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class Netns:
    def __init__(self, name: str) -> None:
        self.name = name
        self._home_fd: int | None = None
        self._created = False

    def create(self) -> Netns:
        subprocess.run(["ip", "netns", "add", self.name], check=True, timeout=30)
        self._created = True
        self.run(["ip", "link", "set", "lo", "up"])
        return self

    def enter(self) -> None:
        """The calling thread (and what it starts from now on) moves into the namespace."""
        self._home_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)

    def leave(self) -> None:
        if self._home_fd is not None:
            _setns(self._home_fd)
            os.close(self._home_fd)
            self._home_fd = None

    def argv(self, argv: list[str]) -> list[str]:
        """ARGV run inside the namespace from a thread that is not in it."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv), check=True, capture_output=True, text=True, timeout=60)

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True, timeout=30)
        return [int(p) for p in out.stdout.split()]

    def remove(self) -> None:
        """Leave it, kill what is still running in it (only what this test started can be
        there: the namespace is its own), delete it."""
        self.leave()
        if not self._created:
            return
        left = self.pids()
        if left:
            log(f"netns {self.name}: killing {len(left)} leftover process(es) {left}")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", self.name], check=False, timeout=30)
        self._created = False

    def __enter__(self) -> Netns:
        self.create()
        self.enter()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.remove()
