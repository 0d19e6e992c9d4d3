"""A real Prometheus (evaluating the shipped rules unchanged) and a real Alertmanager, in the
shape of lib.sh's e2e_prometheus / e2e_alertmanager (one receiver `log`, group_by alertname and
scope; scrape and evaluation every 2 s): Debian's `prometheus` and `prometheus-alertmanager`."""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .metrics import wait_for
from .proc import Daemon


def _get_json(url: str, timeout_s: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return json.loads(r.read(32 << 20))


def _ready(url: str) -> bool | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return 200 <= r.status < 300 or None
    except OSError:
        return None


class Alertmanager:
    def __init__(self, run_dir: Path, listen: str = "127.0.0.1:9093", group_wait: str = "10s",
                 group_by: str = "alertname, scope") -> None:
        self.url = f"http://{listen}"
        cfg = run_dir / "alertmanager.yml"
        cfg.write_text("\n".join(["route:", "  receiver: log", f"  group_by: [{group_by}]", f"  group_wait: {group_wait}",
                                  "receivers:", "  - name: log", ""]))
        self.daemon = Daemon(["prometheus-alertmanager", "--config.file", str(cfg), "--storage.path",
                              str(run_dir / "alertmanager-data"), "--web.listen-address", listen,
                              "--cluster.listen-address="], run_dir / "alertmanager.log")

    def start(self) -> Alertmanager:
        self.daemon.start()
        wait_for("Alertmanager ready", lambda: _ready(self.url + "/-/ready"), 60)
        return self

    def alerts(self, name: str | None = None) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds now (GET /api/v2/alerts), those named NAME."""
        got: list[dict[str, Any]] = _get_json(self.url + "/api/v2/alerts")
        return [a for a in got if name is None or a["labels"].get("alertname") == name]

    def stop(self) -> None:
        self.daemon.stop()


class Prometheus:
    def __init__(self, run_dir: Path, targets: Sequence[str], rules: Sequence[Path], every: str = "2s",
                 alertmanager: str | None = None, listen: str = "127.0.0.1:9090") -> None:
        self.url = f"http://{listen}"
        lines = ["global:", f"  scrape_interval: {every}", f"  evaluation_interval: {every}", "rule_files:",
                 *[f"  - {r}" for r in rules]]
        if alertmanager:
            lines += ["alerting:", "  alertmanagers:", "    - static_configs:",
                      f"        - targets: ['{alertmanager.removeprefix('http://')}']"]
        lines += ["scrape_configs:", "  - job_name: patroni-raft-exporter", "    static_configs:",
                  f"      - targets: [{', '.join(repr(t) for t in targets)}]", ""]
        cfg = run_dir / "prometheus.yml"
        cfg.write_text("\n".join(lines))
        self.daemon = Daemon(["prometheus", "--config.file", str(cfg), "--storage.tsdb.path",
                              str(run_dir / "prometheus-data"), "--web.listen-address", listen],
                             run_dir / "prometheus.log")

    def start(self) -> Prometheus:
        self.daemon.start()
        wait_for("Prometheus ready", lambda: _ready(self.url + "/-/ready"), 60)
        return self

    def rule_loaded(self, name: str) -> bool:
        groups = _get_json(self.url + "/api/v1/rules")["data"]["groups"]
        return sum(1 for g in groups for r in g["rules"] if r.get("name") == name) == 1

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts now (GET /api/v1/alerts)."""
        got: list[dict[str, Any]] = _get_json(self.url + "/api/v1/alerts")["data"]["alerts"]
        return got

    def alert_state(self, name: str, **labels: str) -> str:
        """'firing', 'pending' or '' for alert NAME (with LABELS among its labels)."""
        states = [a["state"] for a in self.alerts() if a["labels"].get("alertname") == name
                  and all(a["labels"].get(k) == v for k, v in labels.items())]
        return "firing" if "firing" in states else "pending" if states else ""

    def query(self, q: str) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = _get_json(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))["data"]["result"]
        return got

    def alerts_seen(self, since: float, name_regex: str = ".+") -> set[str]:
        """'Name/state' of every ALERTS series Prometheus had at any evaluation since SINCE
        (Unix time), as lib.sh's e2e_alerts_seen."""
        window = math.ceil(time.time() - since) + 1
        q = f'group by (alertname, alertstate) (last_over_time(ALERTS{{alertname=~"{name_regex}"}}[{window}s]))'
        return {f"{r['metric']['alertname']}/{r['metric']['alertstate']}" for r in self.query(q)}

    def stop(self) -> None:
        self.daemon.stop()
