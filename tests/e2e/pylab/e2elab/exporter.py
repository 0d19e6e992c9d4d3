"""The exporter binary under test ($EXPORTER_BIN, else the debug build), started with the flags a
scenario gives it, its output in a log file, stopped by its own PID."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from .log import log
from .metrics import Scrape, scrape, wait_for
from .proc import Daemon


def wait_build(binary: Path) -> None:
    """scripts/test.sh starts e2e steps while cargo may still build EXPORTER_BIN; the file named
    by E2E_BUILD_WAIT appears with cargo's exit code when it ends (lib.sh's e2e_wait_build)."""
    marker = os.environ.get("E2E_BUILD_WAIT")
    if marker:
        deadline = time.monotonic() + float(os.environ.get("E2E_BUILD_WAIT_S", "1800"))
        while not (Path(marker).exists() and Path(marker).read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the exporter's build ({marker}) did not end in time")
            time.sleep(1)
        if Path(marker).read_text().strip() != "0":
            raise RuntimeError("the exporter's build failed: no exporter to test")
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"no exporter binary at {binary} (cargo build --bin patroni-raft-exporter)")


class Exporter:
    def __init__(self, binary: Path, args: Sequence[str], log_path: Path, listen: str = "127.0.0.1:9393") -> None:
        self.binary = binary
        self.args = list(args)
        self.listen = listen
        self.daemon = Daemon([str(binary), *self.args, "--web.listen-address", listen], log_path)

    @property
    def metrics_url(self) -> str:
        return f"http://{self.listen}/metrics"

    def start(self) -> Exporter:
        wait_build(self.binary)
        log(f"exporter: {' '.join(self.args)} on {self.listen}")
        self.daemon.start()
        return self

    def scrape(self) -> Scrape:
        return scrape(self.metrics_url)

    def wait_value(self, what: str, name: str, labels: dict[str, str], want: float, timeout_s: float = 30) -> float:
        """Waits until NAME{LABELS} (the whole label set) is WANT; the seconds it took."""
        def probe() -> bool:
            return self.scrape().value(name, **labels) == want
        _, took = wait_for(f"{what}: {name}{labels} == {want:g}", probe, timeout_s)
        return took

    def alive(self) -> bool:
        return self.daemon.alive()

    def panicked(self) -> bool:
        return "panicked" in self.daemon.log_text()

    def stop(self) -> None:
        self.daemon.stop()
