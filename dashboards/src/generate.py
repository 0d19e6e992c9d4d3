"""Write dashboards/*.json from the builders in this folder (run by scripts/gen-dashboards.sh).

usage: generate.py OUTDIR
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.cog.encoder import JSONEncoder

import patroni_cluster
import patroni_fleet
import patroni_raft

DASHBOARDS = {
    "patroni-cluster.json": patroni_cluster.dashboard,
    "patroni-raft.json": patroni_raft.dashboard,
    "patroni-fleet.json": patroni_fleet.dashboard,
}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, build in DASHBOARDS.items():
        text = json.dumps(build(), cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False)
        (out / name).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
