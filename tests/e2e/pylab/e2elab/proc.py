"""Processes the lab starts: one daemon with its log file, stopped by its own PID only."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class Daemon:
    """A background process of ours: its output in LOG, its PID, stopped by that PID (TERM, KILL
    after a grace period) and reaped."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.env, cwd=self.cwd)
        return self

    @property
    def pid(self) -> int:
        assert self._proc is not None, "not started"
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, grace_s: float = 5.0) -> int | None:
        """TERM, KILL after GRACE_S, reaped; its exit status (None if never started)."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGCONT)  # a stopped process never handles TERM
            self._proc.terminate()
            try:
                self._proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        return self._proc.returncode

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def now() -> float:
    return time.time()
