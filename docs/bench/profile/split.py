#!/usr/bin/env python3
"""What the exporter adds to the floor, by the part of it that spends the CPU.

Usage: split.py [--allocations] EXPORTER/script.txt FLOOR/script.txt   (both from run.sh, same N
       and machine)

Each sample goes to the first part, in the order below, that one of its frames belongs to
(so JSON parsed inside a judgement counts as JSON); samples whose innermost frame is the
kernel's go to "kernel". The columns are sample counts at run.sh's frequency, and the
exporter's extra over the floor as a share of all its samples.

With --allocations: the samples spent in the allocator and in memcpy/memmove, whatever the
part, by the first frame above them that is neither the allocator nor the standard library
(the code that asked for the memory): where cutting allocations would pay.
"""
import collections
import re
import sys

PARTS = [
    ("encoding /metrics", r"metrics::|encode_families|FamilyWriter"),
    ("decoding Raft statuses (Fernet, inflate, pickle)",
     r"decode_payload|raft::pickle|raft::zlib|zlib_rs::|flate2::|miniz_oxide::inflate|fernet|aes::|hmac|sha2::"),
    ("parsing etcd's JSON", r"etcd::model|(?=.*\betcd::).*serde_json"),
    ("parsing Patroni's JSON", r"patroni::model|parse_cluster|parse_member_status|parse_dynamic_config|serde_json"),
    ("judging, the snapshot", r"poller::record|snapshot::|poller::changes|poller::members|Recorder"),
    ("the HTTP requests (reqwest, hyper)",
     r"reqwest::|hyper::|hyper_util|get_answer|EtcdClient::send|floor::get|EtcdCluster::post|read_body"),
    ("the Raft exchange", r"raft::client|query_raw"),
    ("the poller's own work", r"poller::|app::run_cluster|floor::poll"),
    ("tokio's runtime", r"tokio::"),
]
ALLOCATOR = re.compile(
    r"^(_int_malloc|malloc|malloc_consolidate|cfree|free|_int_free|unlink_chunk|realloc|"
    r"_int_realloc|__libc_calloc|__posix_memalign|_int_memalign|__memmove|__memcpy|"
    r"_?mi_)")  # mimalloc's functions (the allocator since c9fb930)
STANDARD = re.compile(r"^(<?alloc::|<?core::|<?std::|__rust|hashbrown|\[unknown\])")
FRAME = re.compile(r"\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def samples(path):
    """The stacks of a `perf script` output, innermost frame first: [(function, object)]."""
    stack = []
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                if stack:
                    yield stack
                stack = []
                continue
            frame = FRAME.match(line)
            if frame:
                stack.append((frame.group(1), frame.group(2)))
    if stack:
        yield stack


def part(stack):
    if "kernel" in stack[0][1]:
        return "kernel"
    functions = " ".join(function for function, _ in stack)
    for name, pattern in PARTS:
        if re.search(pattern, functions):
            return name
    return "other (libc, allocator, std)"


def allocating_site(stack):
    """The code that asked for the memory of an allocator sample; None for other samples."""
    if not ALLOCATOR.match(stack[0][0]):
        return None
    for function, _ in stack[1:]:
        function = re.sub(r"\+0x[0-9a-f]+$", "", function)
        if not ALLOCATOR.match(function) and not STANDARD.match(function):
            return function[:110]
    return "?"


def allocations(exporter_path, floor_path, top=20):
    exporter = collections.Counter(filter(None, map(allocating_site, samples(exporter_path))))
    floor = collections.Counter(filter(None, map(allocating_site, samples(floor_path))))
    total = sum(1 for _ in samples(exporter_path))
    print(f"allocator and memcpy: {sum(exporter.values())} samples of the exporter's {total}, "
          f"{sum(floor.values())} of the floor's")
    print("| asked by | exporter | floor |")
    print("|---|---:|---:|")
    for site in sorted(set(exporter) | set(floor), key=lambda site: floor[site] - exporter[site])[:top]:
        print(f"| `{site}` | {exporter[site]} | {floor[site]} |")


def main():
    if sys.argv[1] == "--allocations":
        allocations(sys.argv[2], sys.argv[3])
        return
    exporter = collections.Counter(part(stack) for stack in samples(sys.argv[1]))
    floor = collections.Counter(part(stack) for stack in samples(sys.argv[2]))
    total, floor_total = sum(exporter.values()), sum(floor.values())
    print("| part | exporter | floor | extra | extra, % of the exporter's |")
    print("|---|---:|---:|---:|---:|")
    for name in sorted(set(exporter) | set(floor), key=lambda name: floor[name] - exporter[name]):
        extra = exporter[name] - floor[name]
        print(f"| {name} | {exporter[name]} | {floor[name]} | {extra} | {100 * extra / total:.1f} |")
    print(f"| **all** | {total} | {floor_total} | {total - floor_total} | "
          f"{100 * (total - floor_total) / total:.1f} |")


if __name__ == "__main__":
    main()
