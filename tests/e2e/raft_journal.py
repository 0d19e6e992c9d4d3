#!/usr/bin/env python3
"""raft_journal.py - read-only: a pysyncobj journal's last index and its .meta commit index.

Usage: raft_journal.py JOURNAL_FILE   (run with the venv's python: the .meta is pysyncobj's
pickle). Prints `meta commit_idx C, journal end E`. Used by tests/e2e/restart.sh to say what a
crash that lost the journal's tail left; pysyncobj's own FileJournal would open the file for
writing, this only reads it.
"""
import struct
import sys

from pysyncobj import pickle

# pysyncobj/journal.py FileJournal: name (24 b) + version (8 b) + format (4 b) + last record
# offset (4 b), then records of size (4 b) + idx (8 b) + term (8 b) + command + size (4 b)
LAST_RECORD_OFFSET_OFFSET = 24 + 8 + 4
FIRST_RECORD_OFFSET = LAST_RECORD_OFFSET_OFFSET + 4


def journal_end(path):
    with open(path, "rb") as f:
        data = f.read()
    last = struct.unpack_from("<I", data, LAST_RECORD_OFFSET_OFFSET)[0]
    offset, idx = FIRST_RECORD_OFFSET, None
    while offset < last:
        size = struct.unpack_from("<I", data, offset)[0]
        idx = struct.unpack_from("<Q", data, offset + 4)[0]
        offset += size + 8
    return idx


def main():
    path = sys.argv[1]
    with open(path + ".meta", "rb") as f:
        meta = pickle.loads(f.read())
    print("meta commit_idx %s, journal end %s" % (meta.get("raftCommitIndex"), journal_end(path)))


if __name__ == "__main__":
    main()
