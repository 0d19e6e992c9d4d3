#!/usr/bin/env python3
"""Split an exporter --config.file into M shards the way Prometheus' hashmod does.

Usage: shard-config.py exporter.yml M OUTDIR
Writes OUTDIR/exporter-0.yml .. exporter-(M-1).yml (each cluster in exactly one) and
OUTDIR/targets.json, a file_sd list of every scope with its shard, for /probe scraping
(docs/scaling.md). Every cluster entry must have a `scope`.

Prometheus' relabel action hashmod takes the MD5 of the joined source label values and
the last 8 bytes of the digest as a big-endian integer, modulo `modulus`; shard() does the
same, so `hashmod` on the scope label in Prometheus picks the exporter that polls it.
"""
import hashlib
import json
import os
import sys

import yaml  # PyYAML


def shard(scope: str, modulus: int) -> int:
    digest = hashlib.md5(scope.encode()).digest()
    return int.from_bytes(digest[8:], "big") % modulus


def main(path: str, modulus: int, outdir: str) -> None:
    with open(path) as handle:
        config = yaml.safe_load(handle)
    shards = [[] for _ in range(modulus)]
    targets = []
    for cluster in config["clusters"]:
        scope = cluster.get("scope")
        if not scope:
            sys.exit(f"every cluster needs a scope to be sharded: {cluster}")
        index = shard(scope, modulus)
        shards[index].append(cluster)
        targets.append(scope)
    os.makedirs(outdir, exist_ok=True)
    for index, clusters in enumerate(shards):
        with open(os.path.join(outdir, f"exporter-{index}.yml"), "w") as handle:
            yaml.safe_dump({"clusters": clusters}, handle, sort_keys=False)
        print(f"exporter-{index}.yml: {len(clusters)} clusters")
    with open(os.path.join(outdir, "targets.json"), "w") as handle:
        json.dump([{"targets": targets}], handle, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
