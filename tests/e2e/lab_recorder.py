#!/usr/bin/env python3
"""lab_recorder.py - the partition lab's flight recorder (tests/e2e/lab.sh).

Polls, every --interval seconds, and appends one JSON line per CHANGE to --out:
  {"t": epoch, "src": "prom", "alert": NAME, "labels": {...}, "state": "pending|firing|inactive"}
      Prometheus's /api/v1/alerts (the shipped rules as Prometheus evaluates them)
  {"t": epoch, "src": "am", "alert": NAME, "labels": {...}, "state": "active|resolved"}
      Alertmanager's /api/v2/alerts (active, not silenced, not inhibited)
  {"t": epoch, "src": "exp", "exp": NAME, "series": 'family{labels}', "value": V or null}
      the selected families of each exporter's /metrics (null: the series disappeared)
  {"t": epoch, "src": "member", "member": N, "role": R, "state": S}
      each member's own GET /patroni (ground truth for "what Patroni did"; the recorder's
      sockets belong to no member and no exporter, so the lab's nftables rules never drop them)

Why a recorder: the lab's scenarios overlap their waits (the alert rules' `for:` cannot be
shortened), so several detections run at once; timestamps of every transition, written as
they happen, let lab.sh measure each one afterwards against the fault's injection time.
Every HTTP call has a timeout (--timeout); a failed call changes nothing (no event).
"""

import argparse
import json
import re
import signal
import sys
import time
import urllib.request

FAMILIES = {
    "patroni_raft_cluster_quorum", "patroni_raft_quorum_evidence", "patroni_raft_voters",
    "patroni_raft_voters_answering", "patroni_raft_voters_with_quorum",
    "patroni_raft_voters_unanswered", "patroni_raft_up", "patroni_raft_has_quorum",
    "patroni_raft_state", "patroni_raft_leader", "patroni_raft_partner_connected",
    "patroni_raft_cluster_leaders", "patroni_member_api_up", "patroni_member_role",
    "patroni_member_reported_role", "patroni_member_role_mismatch", "patroni_member_state",
    "patroni_cluster_leaders", "patroni_up",
}
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)")


def get(url, timeout):
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read().decode("utf-8", "replace")


def label_key(labels):
    return json.dumps(labels, sort_keys=True)


class Recorder:
    def __init__(self, args):
        self.args = args
        self.out = open(args.out, "a", buffering=1, encoding="utf-8")
        self.prom = {}      # label key -> state
        self.am = set()
        self.exp = {}       # (exporter, series) -> value
        self.members = {}   # member -> (role, state)

    def emit(self, event):
        event["t"] = round(time.time(), 3)
        self.out.write(json.dumps(event, sort_keys=True) + "\n")

    def poll_prometheus(self):
        try:
            alerts = json.loads(get(self.args.prom + "/api/v1/alerts", self.args.timeout))["data"]["alerts"]
        except Exception:  # noqa: BLE001 - a missed poll is no event
            return
        seen = {}
        for alert in alerts:
            seen[label_key(alert["labels"])] = (alert["labels"], alert["state"])
        for key, (labels, state) in seen.items():
            if self.prom.get(key) != state:
                self.emit({"src": "prom", "alert": labels.get("alertname"), "labels": labels, "state": state})
                self.prom[key] = state
        for key in [k for k in self.prom if k not in seen]:
            labels = json.loads(key)
            self.emit({"src": "prom", "alert": labels.get("alertname"), "labels": labels, "state": "inactive"})
            del self.prom[key]

    def poll_alertmanager(self):
        try:
            alerts = json.loads(get(self.args.am + "/api/v2/alerts?active=true&silenced=false&inhibited=false",
                                    self.args.timeout))
        except Exception:  # noqa: BLE001
            return
        seen = {label_key(a["labels"]): a["labels"] for a in alerts}
        for key, labels in seen.items():
            if key not in self.am:
                self.emit({"src": "am", "alert": labels.get("alertname"), "labels": labels, "state": "active"})
                self.am.add(key)
        for key in [k for k in self.am if k not in seen]:
            labels = json.loads(key)
            self.emit({"src": "am", "alert": labels.get("alertname"), "labels": labels, "state": "resolved"})
            self.am.discard(key)

    def poll_exporter(self, name, url):
        try:
            text = get(url, self.args.timeout)
        except Exception:  # noqa: BLE001
            return
        seen = {}
        for line in text.splitlines():
            match = SAMPLE.match(line)
            if match and match.group(1) in FAMILIES:
                seen[match.group(1) + (match.group(2) or "")] = match.group(3)
        for series, value in seen.items():
            if self.exp.get((name, series)) != value:
                self.emit({"src": "exp", "exp": name, "series": series, "value": value})
                self.exp[(name, series)] = value
        for (exp, series) in [k for k in self.exp if k[0] == name and k[1] not in seen]:
            self.emit({"src": "exp", "exp": exp, "series": series, "value": None})
            del self.exp[(exp, series)]

    def poll_member(self, name, url):
        try:
            body = json.loads(get(url + "/patroni", self.args.timeout))
            now = (body.get("role"), body.get("state"))
        except Exception:  # noqa: BLE001 - no answer is a state of its own
            now = ("unreachable", "unreachable")
        if self.members.get(name) != now:
            self.emit({"src": "member", "member": name, "role": now[0], "state": now[1]})
            self.members[name] = now

    def run(self):
        while True:
            started = time.time()
            self.poll_prometheus()
            self.poll_alertmanager()
            for spec in self.args.exporter:
                name, url = spec.split("=", 1)
                self.poll_exporter(name, url)
            for spec in self.args.member:
                name, url = spec.split("=", 1)
                self.poll_member(name, url)
            time.sleep(max(0.0, self.args.interval - (time.time() - started)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--prom", required=True, help="Prometheus base URL")
    parser.add_argument("--am", required=True, help="Alertmanager base URL")
    parser.add_argument("--exporter", action="append", default=[], help="NAME=METRICS_URL")
    parser.add_argument("--member", action="append", default=[], help="NAME=REST_BASE_URL")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    Recorder(args).run()


if __name__ == "__main__":
    main()
