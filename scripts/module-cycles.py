#!/usr/bin/env python3
"""module-cycles.py - fails when two top-level modules of src/ import each other, directly or
through others.

Why: data flows one way (sources -> poller -> snapshot -> metrics -> HTTP), and an import
circle is where that breaks first (issue #23: the per-cluster encoding had made snapshot and
metrics import each other). Counts every `crate::<module>` path in the production code of a
module's files (a file's `#[cfg(test)]` part and src/bin are left out: tests may reach across).

Usage: scripts/module-cycles.py [--self-test]
"""
import glob
import os
import re
import sys

PATH = re.compile(r"\bcrate::(\w+)")


def edges(files):
    """{module: {modules it names}} from {path below src/: text}."""
    graph = {}
    for rel, text in files.items():
        parts = rel[:-3].split("/")
        if parts[0] in ("bin", "lib", "main"):
            continue
        production = text.split("#[cfg(test)]", 1)[0]
        for used in PATH.findall(production):
            if used != parts[0]:
                graph.setdefault(parts[0], set()).add(used)
    return graph


def circles(graph):
    """Every import circle, each once, as a list of modules starting at its smallest."""
    found = set()

    def walk(start, node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.add(tuple(path))
            elif nxt not in path and nxt > start:
                walk(start, nxt, path + [nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return sorted(found)


def self_test():
    bad = {"a.rs": "use crate::b::X;", "b/mod.rs": "use crate::c::Y;", "c.rs": "crate::a::z()"}
    ok = dict(bad, **{"c.rs": "#[cfg(test)]\nmod t { use crate::a::z; }"})
    assert circles(edges(bad)) == [("a", "b", "c")], circles(edges(bad))
    assert circles(edges(ok)) == [], circles(edges(ok))


def main():
    self_test()
    if sys.argv[1:] == ["--self-test"]:
        print("module-cycles: self-test passed")
        return 0
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    files = {os.path.relpath(p, root): open(p, encoding="utf-8").read()
             for p in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)}
    graph = edges(files)
    found = circles(graph)
    for circle in found:
        print("import circle: " + " -> ".join(list(circle) + [circle[0]]))
    n = sum(len(v) for v in graph.values())
    print(f"module-cycles: {len(graph)} modules, {n} imports between them, {len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
