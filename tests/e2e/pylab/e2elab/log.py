"""One progress log per run: timestamped lines on stderr (pytest shows them for a failed test)
and in the run directory's lab.log (kept after the run)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

_log_file: Path | None = None


def log_to(path: Path | None) -> None:
    global _log_file
    _log_file = path


def log(message: str) -> None:
    line = f"[lab {time.strftime('%H:%M:%S')}] {message}"
    print(line, file=sys.stderr, flush=True)
    if _log_file is not None:
        with _log_file.open("a") as f:
            f.write(line + "\n")
