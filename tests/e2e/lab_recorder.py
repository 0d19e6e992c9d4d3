#!/usr/bin/env python3
"""lab_recorder.py - the partition lab's flight recorder (tests/e2e/lab.sh).

Polls, every --interval seconds, and appends one JSON line per CHANGE to --out:
  {"t": epoch, "src": "prom", "alert": NAME, "labels": {...}, "state": "pending|firing|inactive"}
      Prometheus's /api/v1/alerts (the shipped rules as Prometheus evaluates them)
  {"t": epoch, "src": "am", "alert": NAME, "labels": {...}, "state": "active|resolved"}
      Alertmanager's /api/v2/alerts (active, not silenced, not inhibited)
  {"t": epoch, "src": "exp", "exp": NAME, "series": 'family{labels}', "value": V or null,
   "dcs": {"views": V, "unread": [MEMBER..]}}
      the selected families of each exporter's /metrics (null: the series disappeared), with
      what that same scrape said of the members' DCS views (patroni_cluster_dcs_views, and the
      members whose patroni_member_dcs_view_read is 0): agreement is claimed only by views 1
      with the member read, two series that no single change event holds
  {"t": epoch, "src": "member", "member": N, "role": R, "state": S}
      each member's own GET /patroni (ground truth for "what Patroni did"; the recorder's
      sockets belong to no member and no exporter, so the lab's nftables rules never drop them)
  {"t": epoch, "src": "cluster", "member": N, "leader": [..], "members": [..], "timelines": {..}}
      each member's own GET /cluster (its Raft replica's DCS view: the leader key's holder, the
      members with a key, each one's timeline; {"error": ...} when it does not answer)
  {"t": epoch, "src": "raft", "node": ADDR, "has_quorum": B, "state": S, "leader": ADDR,
   "term": T, "partners": {ADDR: 2|0}}
      each Raft node's own status (pysyncobj's `status` command, exactly what syncobj_admin
      -status sends; the password is read from --raft-password-file, never from argv), every
      --raft-interval seconds in a thread of its own so that a hung node cannot stall the rest;
      {"error": ...} when it does not answer. Needs pysyncobj: run with the Patroni venv's python.

Why a recorder: the lab's scenarios overlap their waits (the alert rules' `for:` cannot be
shortened), so several detections run at once; timestamps of every transition, written as
they happen, let lab.sh measure each one afterwards against the fault's injection time.
Every event is stamped with the time its answer was read (all events of one /metrics scrape
with that scrape's), not the time it was written; a member's request that failed, with the
time it was sent: it answered nothing from then on (a primary whose REST API hangs while it
demotes stops answering "primary" when it is asked, not when the timeout ends). The members' own GET /patroni and
GET /cluster (the ground truth) are read in a thread of their own, every --interval, so that
slow exporters or Prometheus on a loaded machine do not make the ground truth late (a loop of
every source took seconds there, and the truth was read that much after the exporters').
Every HTTP call has a timeout (--timeout); a failed call changes nothing (no event).
"""

import argparse
import json
import re
import signal
import sys
import threading
import time
import urllib.request

FAMILIES = {
    "patroni_raft_cluster_quorum", "patroni_raft_quorum_evidence", "patroni_raft_voters",
    "patroni_raft_voters_answering", "patroni_raft_voters_with_quorum",
    "patroni_raft_voters_unanswered", "patroni_raft_up", "patroni_raft_has_quorum",
    "patroni_raft_state", "patroni_raft_leader", "patroni_raft_partner_connected",
    "patroni_raft_cluster_leaders", "patroni_member_api_up", "patroni_member_role",
    "patroni_member_reported_role", "patroni_member_role_mismatch", "patroni_member_state",
    "patroni_cluster_leaders", "patroni_up", "patroni_cluster_primaries", "patroni_member_in_dcs",
    "patroni_cluster_dcs_views", "patroni_member_dcs_view_differs", "patroni_member_dcs_view_read",
    "patroni_raft_voter_sets",
    "patroni_raft_voter_set_differs",
    # each poll's own duration (a change every poll): how late a poll may publish what it read,
    # on the exporter's clock, not on ours
    "patroni_exporter_poll_duration_seconds",
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
        self.views = {}     # member -> its GET /cluster, as recorded
        self.nodes = {}     # Raft node -> its status, as recorded
        self.lock = threading.Lock()

    def emit(self, event, read_at=None):
        """Writes `event`, stamped with `read_at`: when its answer was read (default: now)."""
        with self.lock:
            event["t"] = round(time.time() if read_at is None else read_at, 3)
            self.out.write(json.dumps(event, sort_keys=True) + "\n")

    def poll_prometheus(self):
        try:
            alerts = json.loads(get(self.args.prom + "/api/v1/alerts", self.args.timeout))["data"]["alerts"]
        except Exception:  # noqa: BLE001 - a missed poll is no event
            return
        seen, annotations = {}, {}
        for alert in alerts:
            seen[label_key(alert["labels"])] = (alert["labels"], alert["state"])
            annotations[label_key(alert["labels"])] = alert.get("annotations", {})
        for key, (labels, state) in seen.items():
            if self.prom.get(key) != state:
                self.emit({"src": "prom", "alert": labels.get("alertname"), "labels": labels, "state": state,
                           "annotations": annotations.get(key, {})})
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
        annotations = {label_key(a["labels"]): a.get("annotations", {}) for a in alerts}
        for key, labels in seen.items():
            if key not in self.am:
                self.emit({"src": "am", "alert": labels.get("alertname"), "labels": labels, "state": "active",
                           "annotations": annotations[key]})
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
        read_at = time.time()
        seen = {}
        for line in text.splitlines():
            match = SAMPLE.match(line)
            if match and match.group(1) in FAMILIES:
                seen[match.group(1) + (match.group(2) or "")] = match.group(3)
        views = next((v for s, v in seen.items() if s.startswith("patroni_cluster_dcs_views{")), None)
        unread = sorted(re.search(r'member="([^"]*)"', s).group(1) for s, v in seen.items()
                        if s.startswith("patroni_member_dcs_view_read{") and v == "0")
        dcs = {"views": views, "unread": unread}
        for series, value in seen.items():
            if self.exp.get((name, series)) != value:
                self.emit({"src": "exp", "exp": name, "series": series, "value": value, "dcs": dcs}, read_at)
                self.exp[(name, series)] = value
        for (exp, series) in [k for k in self.exp if k[0] == name and k[1] not in seen]:
            self.emit({"src": "exp", "exp": exp, "series": series, "value": None, "dcs": dcs}, read_at)
            del self.exp[(exp, series)]

    def poll_member(self, name, url):
        sent_at = time.time()
        try:
            body = json.loads(get(url + "/patroni", self.args.timeout))
            now = (body.get("role"), body.get("state"))
            read_at = time.time()
        except Exception:  # noqa: BLE001 - no answer is a state of its own
            now, read_at = ("unreachable", "unreachable"), sent_at
        if self.members.get(name) != now:
            self.emit({"src": "member", "member": name, "role": now[0], "state": now[1]}, read_at)
            self.members[name] = now

    def poll_view(self, name, url):
        sent_at = time.time()
        try:
            body = json.loads(get(url + "/cluster", self.args.timeout))
            members = body.get("members") or []
            now = {
                "leader": sorted(m.get("name") for m in members if m.get("role") in ("leader", "standby_leader")),
                "members": sorted(m.get("name") for m in members),
                "timelines": {m.get("name"): m.get("timeline") for m in members},
            }
            read_at = time.time()
        except Exception as error:  # noqa: BLE001 - no answer is a state of its own
            now, read_at = {"error": type(error).__name__}, sent_at
        if self.views.get(name) != now:
            self.emit(dict(now, src="cluster", member=name), read_at)
            self.views[name] = now

    def poll_raft(self, node, encryptor):
        # pysyncobj's own client, as syncobj_admin uses it; only the `status` command is sent
        from pysyncobj.utility import TcpUtility  # pylint: disable=import-outside-toplevel
        utility = TcpUtility(None, self.args.timeout)
        utility._TcpUtility__connection.encryptor = encryptor  # pylint: disable=protected-access
        try:
            status = utility.executeCommand(node, ["status"])
        except Exception as error:  # noqa: BLE001
            status, failure = None, type(error).__name__
        else:
            failure = "no answer"
        if isinstance(status, dict):
            partners = {k[len("partner_node_status_server_"):]: v for k, v in status.items()
                        if k.startswith("partner_node_status_server_")}
            now = {"has_quorum": bool(status.get("has_quorum")), "state": status.get("state"),
                   "leader": None if status.get("leader") is None else str(status.get("leader")),
                   "term": status.get("raft_term"), "partners": partners}
        else:
            now = {"error": failure}
        read_at = time.time()
        if self.nodes.get(node) != now:
            self.emit(dict(now, src="raft", node=node), read_at)
            self.nodes[node] = now

    def run_raft(self):
        from pysyncobj.encryptor import getEncryptor  # pylint: disable=import-outside-toplevel
        with open(self.args.raft_password_file, encoding="utf-8") as handle:
            encryptor = getEncryptor(handle.read().strip())
        while True:
            started = time.time()
            for node in self.args.raft:
                self.poll_raft(node, encryptor)
            time.sleep(max(0.0, self.args.raft_interval - (time.time() - started)))

    def run_members(self):
        while True:
            started = time.time()
            for spec in self.args.member:
                name, url = spec.split("=", 1)
                self.poll_member(name, url)
                self.poll_view(name, url)
            time.sleep(max(0.0, self.args.interval - (time.time() - started)))

    def run(self):
        if self.args.raft:
            threading.Thread(target=self.run_raft, daemon=True).start()
        threading.Thread(target=self.run_members, daemon=True).start()
        while True:
            started = time.time()
            self.poll_prometheus()
            self.poll_alertmanager()
            for spec in self.args.exporter:
                name, url = spec.split("=", 1)
                self.poll_exporter(name, url)
            time.sleep(max(0.0, self.args.interval - (time.time() - started)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--prom", required=True, help="Prometheus base URL")
    parser.add_argument("--am", required=True, help="Alertmanager base URL")
    parser.add_argument("--exporter", action="append", default=[], help="NAME=METRICS_URL")
    parser.add_argument("--member", action="append", default=[], help="NAME=REST_BASE_URL")
    parser.add_argument("--raft", action="append", default=[], help="Raft node HOST:PORT")
    parser.add_argument("--raft-password-file", help="the Raft password (first line)")
    parser.add_argument("--raft-interval", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    Recorder(args).run()


if __name__ == "__main__":
    main()
