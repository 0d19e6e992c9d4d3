#!/usr/bin/env python3
"""netshape.py - delay (with jitter) for chosen packets, without tc netem.

Test tooling for tests/e2e/links.sh, never part of the exporter. This machine's kernel has no
`netem` qdisc (nor `prio`, nor the `fw` filter), so the lab cannot shape a link with tc. Instead
nftables picks the packets (by address, port and the socket's group: `meta skgid`, see
MEMBER_GID_BASE in cluster.sh) and marks them; an iptables rule hands each mark to a userspace
queue (`-j NFQUEUE --queue-num N`: this kernel has the NFQUEUE target but not nftables' own
`queue` statement); this program holds each queued packet for its delay and then lets it go
(NF_ACCEPT). That is netem's delay, per packet, on the output hook: a packet's delay is
DELAY +- JITTER (uniform), kept in order within its flow (one direction of one TCP connection),
so jitter never reorders a connection's own segments. Loss needs no program: nftables drops a
share of the packets itself (`numgen random mod 100 < P drop`, tests/e2e/links.sh).

Why not a TCP proxy (toxiproxy's way): the exporter finds the members' REST URLs in GET /cluster
and the Raft nodes in Patroni's own config, and the members reach each other by the same
addresses; a proxy would need other addresses everywhere. Queued packets keep every address and
every connection as it is, and the same nftables rule shapes the exporter, a `curl` by hand and
pysyncobj's own client alike, which is what makes the hand-timed proof comparable.

Only the standard library: the nfnetlink_queue protocol (linux/netfilter/nfnetlink_queue.h) is
spoken over a raw netlink socket (libnetfilter_queue is not installed here). Root only (CAP_NET_ADMIN
in the network namespace it runs in).

Usage: netshape.py [--stats FILE] [--seed N] QUEUE:SPEC...
  SPEC   comma-separated: delay=MS, jitter=MS (each default 0), e.g.  1:delay=1500  2:delay=150,jitter=50
  --stats FILE  JSON counters per queue (packets, mean and largest added delay in ms),
         rewritten every second and at exit; "ready" is true once every queue is bound
  SIGTERM/SIGINT: every held packet is let go at once, the queues unbound, the stats written.
A queue with no program bound drops its packets (NFQUEUE without --queue-bypass): a shaper that
died makes its links fail loudly rather than pass unshaped.
"""

import argparse
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQNL_COPY_PACKET = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_PAYLOAD = 10
NF_ACCEPT = 1
COPY_RANGE = 64  # the IP and TCP headers: enough for the flow key
QUEUE_MAXLEN = 8192


def nla(kind, data):
    """One netlink attribute, padded to 4 bytes."""
    raw = struct.pack("=HH", 4 + len(data), kind) + data
    return raw + b"\0" * (-len(raw) % 4)


class Queues:
    """The netlink socket, bound to every queue number given."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((0, 0))
        self.seq = 0

    def send(self, msg, queue, attrs, flags=NLM_F_REQUEST):
        self.seq += 1
        body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack("!H", queue) + attrs
        head = struct.pack("=LHHLL", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, self.seq, 0)
        self.sock.send(head + body)

    def config(self, queue, attrs):
        """A config message, acknowledged: raise on the kernel's error."""
        self.send(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK)
        seq = self.seq
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for kind, _, mseq, payload in self.messages(self.sock.recv(1 << 16)):
                if kind == NLMSG_ERROR and mseq == seq:
                    err = struct.unpack("=i", payload[:4])[0]
                    if err:
                        raise OSError(-err, f"nfqueue config of queue {queue}: {os.strerror(-err)}")
                    return
        raise TimeoutError(f"nfqueue config of queue {queue}: no answer")

    def bind(self, queue):
        self.config(queue, nla(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))
        self.config(queue, nla(NFQA_CFG_PARAMS, struct.pack("!IB", COPY_RANGE, NFQNL_COPY_PACKET))
                    + nla(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)))

    def unbind(self, queue):
        self.send(NFQNL_MSG_CONFIG, queue, nla(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_UNBIND, 0)))

    def verdict(self, queue, packet_id, verdict):
        self.send(NFQNL_MSG_VERDICT, queue, nla(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id)))

    @staticmethod
    def messages(data):
        """(type, flags, seq, payload) of each netlink message in one datagram."""
        off = 0
        while off + 16 <= len(data):
            length, kind, flags, seq, _ = struct.unpack_from("=LHHLL", data, off)
            if length < 16:
                break
            yield kind, flags, seq, data[off + 16:off + length]
            off += (length + 3) & ~3

    @staticmethod
    def packet(payload):
        """(queue, packet id, first bytes of the packet) of an NFQNL_MSG_PACKET."""
        queue = struct.unpack_from("!H", payload, 2)[0]
        off, packet_id, head = 4, None, b""
        while off + 4 <= len(payload):
            length, kind = struct.unpack_from("=HH", payload, off)
            if length < 4:
                break
            data = payload[off + 4:off + length]
            kind &= 0x3FFF
            if kind == NFQA_PACKET_HDR:
                packet_id = struct.unpack_from("!I", data)[0]
            elif kind == NFQA_PAYLOAD:
                head = data
            off += (length + 3) & ~3
        return queue, packet_id, head


def flow_key(head):
    """One direction of one connection: addresses, protocol and ports of an IPv4/IPv6 packet."""
    if head and head[0] >> 4 == 4 and len(head) >= 20:
        ihl = (head[0] & 15) * 4
        return head[9], head[12:20], head[ihl:ihl + 4]
    if head and head[0] >> 4 == 6 and len(head) >= 40:
        return head[6], head[8:40], head[40:44]
    return head[:40]


def parse_spec(text):
    queue, _, rest = text.partition(":")
    spec = {"delay": 0.0, "jitter": 0.0}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in spec:
            raise argparse.ArgumentTypeError(f"unknown setting {key!r} in {text!r}")
        spec[key] = float(value)
    if spec["jitter"] > spec["delay"]:
        raise argparse.ArgumentTypeError(f"jitter above delay in {text!r}")
    return int(queue), spec


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stats")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("queues", nargs="+", type=parse_spec, metavar="QUEUE:SPEC")
    args = parser.parse_args()
    specs = dict(args.queues)
    rng = random.Random(args.seed)
    stats = {q: {"packets": 0, "added_ms_sum": 0.0, "added_ms_max": 0.0} for q in specs}
    held = []        # heap of (release time, sequence, queue, packet id)
    last = {}        # flow -> release time of its last packet (order kept within a flow)
    order = 0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    def write_stats(ready):
        if not args.stats:
            return
        out = {"ready": ready, "queues": {}}
        for q, s in stats.items():
            n = s["packets"]
            out["queues"][str(q)] = dict(specs[q], packets=n, max_added_ms=round(s["added_ms_max"], 2),
                                         mean_added_ms=round(s["added_ms_sum"] / n, 2) if n else 0.0)
        tmp = args.stats + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(out, handle)
        os.replace(tmp, args.stats)

    queues = Queues()
    for q in specs:
        queues.bind(q)
    write_stats(True)
    print(f"netshape: bound {', '.join(f'{q}={s}' for q, s in specs.items())}", file=sys.stderr, flush=True)
    next_stats = time.monotonic() + 1
    while not stop:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, _, q, pid = heapq.heappop(held)
            queues.verdict(q, pid, NF_ACCEPT)
        if now >= next_stats:
            write_stats(True)
            next_stats = now + 1
        wait = min(next_stats, held[0][0] if held else next_stats) - now
        try:
            readable, _, _ = select.select([queues.sock], [], [], max(wait, 0))
        except InterruptedError:
            continue
        if not readable:
            continue
        try:
            data = queues.sock.recv(1 << 16)
        except OSError as err:  # ENOBUFS: the kernel dropped messages; the rest carry on
            print(f"netshape: recv: {err}", file=sys.stderr, flush=True)
            continue
        now = time.monotonic()
        for kind, _, _, payload in queues.messages(data):
            if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                continue
            q, pid, head = queues.packet(payload)
            if pid is None or q not in specs:
                continue
            spec, st = specs[q], stats[q]
            st["packets"] += 1
            delay = spec["delay"] + (rng.uniform(-spec["jitter"], spec["jitter"]) if spec["jitter"] else 0.0)
            if delay <= 0:
                queues.verdict(q, pid, NF_ACCEPT)
                continue
            key = (q, flow_key(head))
            release = max(now + delay / 1000, last.get(key, 0.0))
            last[key] = release
            st["added_ms_sum"] += (release - now) * 1000
            st["added_ms_max"] = max(st["added_ms_max"], (release - now) * 1000)
            order += 1
            heapq.heappush(held, (release, order, q, pid))
        if len(last) > 4096:  # flows whose last packet has long gone
            last = {k: t for k, t in last.items() if t > now}
    for _, _, q, pid in held:
        queues.verdict(q, pid, NF_ACCEPT)
    for q in specs:
        queues.unbind(q)
    write_stats(False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
