"""The heap in use when the exporter was stopped (heaptrack's "leaked" bytes of a run stopped by
SIGKILL: run.sh with SIGNAL=KILL), split by the part of the exporter that allocated it.

Reads heaptrack_print's collapsed stacks (`--flamegraph-cost-type leaked -F FILE`) of a build
with line tables, so that the frames LTO inlined are named. A frame is the exporter's when its
function is defined (`fn NAME`) in a source file of that name under src/; each stack goes to
the module of the exporter's frame nearest to the allocation, or to "tasks" when a tokio spawn
is nearer (a task's future, allocated by the runtime).

Usage: python3 split.py STACKS [SRC_DIR]"""
import collections
import pathlib
import re
import sys

FRAME = re.compile(r"^(?P<fn>[A-Za-z_][A-Za-z0-9_]*)(<>)? \((?P<file>[\w.]+\.rs)\)$")
SPAWN = re.compile(r"^spawn(_inner)?<> \(spawn\.rs\)$")
# Functions of src/ whose file and function name a library has too (tokio's task/mod.rs `run`,
# hyper's and reqwest's `new`): the collapsed stacks carry the file's name without its folder.
LIBRARY_NAMES = {("mod.rs", "run"), ("mod.rs", "new"), ("mod.rs", "poll"), ("mod.rs", "from"),
                 ("client.rs", "new"), ("lib.rs", "new")}
# An async fn of a mod.rs: of the serving exporter's src/, only poller/mod.rs has async fns (run,
# run_until, poll_once; status/mod.rs's are the one-shot `status` subcommand's).
POLLER_ASYNC = re.compile(r"^\{async_fn#\d+\}(<>)? \(mod\.rs\)$")
ALLOCATOR = re.compile(r"GlobalAlloc5alloc|__rdl_alloc|GlobalAlloc7realloc|__rdl_realloc|^malloc |^realloc ")


def own_functions(src: pathlib.Path) -> dict:
    """(file name, fn name) -> module path (metrics, poller, snapshot, ...) of every fn in src/."""
    own = {}
    for path in src.rglob("*.rs"):
        module = re.sub(r"/mod$", "", str(path.relative_to(src).with_suffix("")))
        for name in re.findall(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", path.read_text()):
            own.setdefault((path.name, name), module)
    return own


def part_of(module: str) -> str:
    top = module.split("/")[0]
    return {
        "metrics": "metrics: the encoded chunks (one exact-size text per cluster and family)",
        "snapshot": "snapshot: the judgements kept in each snapshot (views, voter sets, quorum, failover)",
        "poller": "poller: what the poll builds and its memory across polls (members, discovery, hosts)",
        "patroni": "patroni: parsed REST answers kept in the snapshots",
        "raft": "raft: parsed Raft statuses kept in the snapshots",
        "tls": "tls: the client's TLS config and session cache",
        "config": "config: the resolved clusters",
        "app": "app: the fleet, the store and the per-cluster channels",
    }.get(top, f"{top}")


def main(stacks: str, src: str) -> None:
    own = own_functions(pathlib.Path(src))
    split = collections.Counter()
    by_module = collections.Counter()
    for line in open(stacks):
        stack, _, cost = line.rstrip("\n").rpartition(" ")
        what = "other: the runtime and libraries (no exporter frame)"
        frames = [f.strip() for f in stack.split(";")]
        # heaptrack lists the physical frames root first, but the frames inlined into one of
        # them innermost first: after the allocator's own frame come the frames inlined into
        # its caller, from the allocation outwards; the frames before it, the other way round.
        alloc = max((i for i, f in enumerate(frames) if ALLOCATOR.search(f)), default=len(frames))
        for frame in frames[alloc + 1:] + list(reversed(frames[:alloc])):
            if SPAWN.match(frame):
                what = "tasks: the pollers' futures (tokio spawn)"
                break
            if POLLER_ASYNC.match(frame):
                what = part_of("poller")
                by_module["poller::{async fn run, run_until or poll_once}"] += int(cost)
                break
            m = FRAME.match(frame)
            if m and (m["file"], m["fn"]) in own and not (m["file"], m["fn"]) in LIBRARY_NAMES:
                module = own[(m["file"], m["fn"])]
                what = part_of(module)
                by_module[f"{module}::{m['fn']}"] += int(cost)
                break
        split[what] += int(cost)
    total = sum(split.values())
    print(f"heap in use: {total / 1048576:.2f} MiB")
    for what, cost in split.most_common():
        print(f"{cost / 1048576:7.2f} MiB {100 * cost / total:5.1f} %  {what}")
    print("\nby the exporter's function nearest to the allocation (the 20 largest):")
    for where, cost in by_module.most_common(20):
        print(f"{cost / 1048576:7.2f} MiB  {where}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "src")
