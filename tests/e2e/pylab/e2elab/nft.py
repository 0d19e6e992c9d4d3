"""nftables cuts of one member's own traffic. On loopback every member connects from 127.0.0.1,
so its sockets are told apart by group: cluster.sh's MEMBER_GID_BASE runs member N's Patroni and
PostgreSQL with the primary group BASE+N (`meta skgid`). Everything else (the exporter,
patronictl, etcdctl, the other members) keeps every path."""

from __future__ import annotations

import subprocess


class MemberFirewall:
    def __init__(self, table: str, gid_base: int) -> None:
        self.table = table
        self.gid_base = gid_base

    def _nft(self, *args: str) -> None:
        subprocess.run(["nft", *args], check=True, capture_output=True, text=True, timeout=30)

    def setup(self) -> MemberFirewall:
        self._nft("add", "table", "inet", self.table)
        self._nft("add", "chain", "inet", self.table, "out", "{ type filter hook output priority 0 ; }")
        return self

    def cut_port(self, member: int, port: int) -> None:
        """Member MEMBER's packets to tcp PORT dropped, its connections already open too (they
        hang; nothing is refused or reset)."""
        self._nft("add", "rule", "inet", self.table, "out", "meta", "skgid", str(self.gid_base + member),
                  "tcp", "dport", str(port), "drop")

    def heal(self) -> None:
        self._nft("flush", "chain", "inet", self.table, "out")

    def teardown(self) -> None:
        subprocess.run(["nft", "delete", "table", "inet", self.table], capture_output=True, timeout=30)
