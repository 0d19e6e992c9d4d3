"""What a scenario asserts and what it measures, as the bash scripts record them: every check is
recorded (a failed one does not hide the ones after it) and the test fails at its end with the
list; measurements go to results.tsv (version, phase, what, value) in the run directory."""

from __future__ import annotations

from pathlib import Path

from .log import log


class Checks:
    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: list[str] = []

    def check(self, what: str, ok: bool) -> bool:
        (self.passed if ok else self.failed).append(what)
        log(f"{'PASS' if ok else 'FAIL'}: {what}")
        return ok

    def reached(self, what: str) -> None:
        """Records, among the passed checks, a state that a `wait_for` just before waited for:
        the wait is the check (it raised TimeoutError, failing the test, had the state not come)."""
        self.passed.append(what)
        log(f"PASS (waited): {what}")

    def verify(self) -> None:
        """Fails the test when a check failed, naming every one."""
        assert not self.failed, f"{len(self.failed)} check(s) failed: " + "; ".join(self.failed)


class Results:
    def __init__(self, path: Path, version: str) -> None:
        self.path = path
        self.version = version
        path.write_text("version\tphase\twhat\tvalue\n")

    def record(self, phase: str, what: str, value: object) -> None:
        with self.path.open("a") as f:
            f.write(f"{self.version}\t{phase}\t{what}\t{value}\n")
        log(f"measured: {phase}: {what}: {value}")
