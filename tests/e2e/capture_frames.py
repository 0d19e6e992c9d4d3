#!/usr/bin/env python3
"""capture_frames.py - real pysyncobj status exchanges, byte-exact, as parser fixtures.

Run by tests/e2e/capture-frames.sh (inside a network namespace of its own, with the
interpreter of a venv that has the pysyncobj version under test). Starts a real 3-node
pysyncobj cluster on 127.0.0.1:6101-6103 (one process per node, journal files like Patroni's
Raft, encrypted with PASSWORD), writes a few entries, then runs the version's own
`syncobj_admin -status` through a recording TCP proxy and saves, per case directory:

  c2s_frameN.bin / s2c_frameN.bin      each frame as on the wire (i32 length + payload)
  c2s_frameN.zlib / s2c_frameN.zlib    the payload after Fernet decryption
  c2s_frameN.pickle / s2c_frameN.pickle  after zlib decompression
  expected_admin.txt                   syncobj_admin's stdout of that very exchange
  case.json                            password, version, description, reply_pickle, and whether
                                       the reply, rendered like syncobj_admin does, equals its
                                       stdout ("identical")

Cases (NAME_VERSION):
  enc_leader_V          the Raft leader of the healthy cluster
  enc_follower_V        a follower of it
  enc_restarted_alone_V every node stopped (SIGTERM) after the writes, node 1 started alone
                        with a long election timeout and captured before its first election:
                        what a status reader sees of the term after a restart (0 on pysyncobj
                        <= 0.3.15, the persisted term from 0.3.16 on)

Usage: capture_frames.py OUT_DIR [--cases leader,follower,restarted_alone]
       capture_frames.py --node INDEX DATA_DIR [--alone]     (internal: one node)
"""

import argparse
import importlib.metadata
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib

PASSWORD = "s3cret"
HOST = "127.0.0.1"
PORTS = [6101, 6102, 6103]
PROXY_PORT = 6199
WRITES = 5
ALONE_MIN_TIMEOUT = 20.0   # the restarted node must not start an election before the capture


def addr(i):
    return "%s:%d" % (HOST, PORTS[i])


# ------------------------------------------------------------------ one node (own process)
def run_node(index, data_dir, alone):
    from pysyncobj import SyncObj, SyncObjConf
    from pysyncobj.batteries import ReplCounter

    kw = dict(password=PASSWORD, dynamicMembershipChange=True, appendEntriesUseBatch=False,
              journalFile=os.path.join(data_dir, "node%d.journal" % index),
              fullDumpFile=os.path.join(data_dir, "node%d.dump" % index))
    if alone:
        kw.update(raftMinTimeout=ALONE_MIN_TIMEOUT, raftMaxTimeout=ALONE_MIN_TIMEOUT + 1,
                  connectionTimeout=ALONE_MIN_TIMEOUT + 2)
    counter = ReplCounter()
    partners = [addr(i) for i in range(len(PORTS)) if i != index]
    node = SyncObj(addr(index), partners, SyncObjConf(**kw), consumers=[counter])
    signal.signal(signal.SIGTERM, lambda *_: (node.destroy(), os._exit(0)))
    if index == 0 and not alone:
        while not node.isReady():
            time.sleep(0.1)
        for _ in range(WRITES):
            counter.inc(sync=True, timeout=10)
    while True:
        time.sleep(1)


# ------------------------------------------------------------------ the driver
def admin(target, timeout=10):
    exe = os.path.join(os.path.dirname(sys.executable), "syncobj_admin")
    r = subprocess.run([exe, "-conn", target, "-pass", PASSWORD, "-status"],
                       capture_output=True, text=True, timeout=timeout)
    return r.stdout


def parse_admin(text):
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(": ")
        if sep:
            out[k] = v
    return out


def wait_for(what, fn, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    sys.exit("capture: timed out waiting for " + what)


class Recorder:
    """One proxied connection: client -> PROXY_PORT -> target, every byte kept per direction."""

    def __init__(self, target_port):
        self.streams = {"c2s": bytearray(), "s2c": bytearray()}
        self.srv = socket.create_server((HOST, PROXY_PORT), reuse_port=False)
        self.target_port = target_port
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _pump(self, src, dst, key):
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            self.streams[key] += b
            dst.sendall(b)

    def _run(self):
        c, _ = self.srv.accept()
        s = socket.create_connection((HOST, self.target_port), timeout=10)
        t = threading.Thread(target=self._pump, args=(s, c, "s2c"), daemon=True)
        t.start()
        self._pump(c, s, "c2s")
        t.join(10)
        c.close()
        s.close()
        self.srv.close()


def split_frames(buf):
    frames = []
    while buf:
        n = int.from_bytes(buf[:4], "little", signed=True)
        assert 0 <= n <= len(buf) - 4, "truncated frame in the capture"
        frames.append(bytes(buf[:4 + n]))
        buf = buf[4 + n:]
    return frames


def render_like_admin(reply):
    return "\n".join("%s: %s" % (k, v) for k, v in sorted(reply.items()))


def capture(out_dir, name, target_index, description):
    from pysyncobj.encryptor import getEncryptor

    rec = Recorder(PORTS[target_index])
    stdout = admin("%s:%d" % (HOST, PROXY_PORT))
    rec.thread.join(15)
    assert "has_quorum" in stdout, "syncobj_admin through the proxy: %r" % stdout
    enc = getEncryptor(PASSWORD)
    case_dir = os.path.join(out_dir, name)
    os.makedirs(case_dir, exist_ok=True)
    reply_pickle = None
    for direction in ("c2s", "s2c"):
        for n, frame in enumerate(split_frames(rec.streams[direction]), start=1):
            stem = os.path.join(case_dir, "%s_frame%d" % (direction, n))
            compressed = enc.decrypt(frame[4:])
            pickled = zlib.decompress(compressed)
            for ext, data in ((".bin", frame), (".zlib", compressed), (".pickle", pickled)):
                with open(stem + ext, "wb") as f:
                    f.write(data)
            if direction == "s2c":
                reply_pickle = "s2c_frame%d.pickle" % n
    with open(os.path.join(case_dir, "expected_admin.txt"), "w") as f:
        f.write(stdout)
    # the last server frame is the reply: (client's random key, status dict)
    with open(os.path.join(case_dir, reply_pickle), "rb") as f:
        _, reply = pickle.loads(f.read())
    same = render_like_admin(reply) == stdout.rstrip("\n")
    case = {
        "password": PASSWORD,
        "pysyncobj_version": importlib.metadata.version("pysyncobj"),
        "description": description,
        "reply_pickle": reply_pickle,
        "matches_captured_syncobj_admin_stdout": "identical" if same else "differs",
        "captured_by": "tests/e2e/capture-frames.sh",
    }
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print("capture: %s: raft_term %s, commit_idx %s, last_applied %s, leader %s (%s)" % (
        name, reply["raft_term"], reply["commit_idx"], reply["last_applied"],
        reply["leader"], case["matches_captured_syncobj_admin_stdout"]), file=sys.stderr)
    assert same, name + ": the reply rendered like syncobj_admin differs from its stdout"


def start_node(i, data_dir, alone=False):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--node", str(i), data_dir]
                            + (["--alone"] if alone else []))


def stop(procs):
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def driver(out_dir, cases, data_dir):
    version = importlib.metadata.version("pysyncobj")
    procs = [start_node(i, data_dir) for i in range(len(PORTS))]
    try:
        def healthy():
            sts = [parse_admin(admin(addr(i))) for i in range(len(PORTS))]
            ok = all(s.get("has_quorum") == "True" and s.get("leader") not in (None, "None")
                     and int(s.get("commit_idx", -1)) >= WRITES + 1
                     and s.get("commit_idx") == s.get("last_applied")
                     and len({x.get("commit_idx") for x in sts}) == 1
                     and all(v == "2" for k, v in s.items() if k.startswith("partner_node_status"))
                     for s in sts)
            return ok and sts[0]["leader"]
        leader = wait_for("a healthy cluster with %d writes applied everywhere" % WRITES, healthy, 60)
        li = [addr(i) for i in range(len(PORTS))].index(leader)
        fi = (li + 1) % len(PORTS)
        if "leader" in cases:
            capture(out_dir, "enc_leader_" + version, li,
                    "leader of 3 plain pysyncobj nodes (journal files), %d writes" % WRITES)
        if "follower" in cases:
            capture(out_dir, "enc_follower_" + version, fi,
                    "follower of 3 plain pysyncobj nodes (journal files), %d writes" % WRITES)
        if "restarted_alone" in cases:
            before = parse_admin(admin(addr(1)))
            stop(procs)
            procs = [start_node(1, data_dir, alone=True)]
            wait_for("node 1 answering after its restart", lambda: "has_quorum" in admin(addr(1)), 10)
            capture(out_dir, "enc_restarted_alone_" + version, 1,
                    "node 1 restarted alone (partners stopped), before its first election; "
                    "before the restart: raft_term %s, commit_idx %s" % (before["raft_term"], before["commit_idx"]))
    finally:
        stop(procs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", type=int)
    ap.add_argument("--alone", action="store_true")
    ap.add_argument("dir")
    ap.add_argument("--cases", default="leader,follower,restarted_alone")
    ap.add_argument("--data-dir")
    a = ap.parse_args()
    if a.node is not None:
        run_node(a.node, a.dir, a.alone)
    else:
        driver(a.dir, a.cases.split(","), a.data_dir)


if __name__ == "__main__":
    main()
