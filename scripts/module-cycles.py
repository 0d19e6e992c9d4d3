#!/usr/bin/env python3
"""module-cycles.py - fails when two top-level modules of src/ import each other, directly or
through others, and when two files of one module folder (src/snapshot/quorum.rs and
src/snapshot/split.rs, say) do.

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


USE_GROUP = re.compile(r"\b(?:super|crate::(\w+))::\{([^}]*)\}")
USE_PATH = re.compile(r"\b(?:super|crate::(\w+))::(\w+)")
COMMENT = re.compile(r"//[^\n]*")
REEXPORT = re.compile(r"\bpub use (\w+)::(?:\{([^}]*)\}|(\w+));")


def folder_edges(files):
    """{folder: {file module: {sibling file modules it names}}} for every folder module of src/
    (a directory with a mod.rs): `super::x::`, `crate::folder::x::`, and names that the folder's
    mod.rs re-exports from a sibling (`pub use x::{Name}`), each counted as an import of x."""
    result = {}
    for rel in files:
        parts = rel[:-3].split("/")
        if len(parts) != 2 or parts[1] != "mod":
            continue
        folder = parts[0]
        siblings = {r[:-3].split("/")[1] for r in files
                    if r.startswith(folder + "/") and r.count("/") == 1 and not r.endswith("/mod.rs")}
        siblings |= {r.split("/")[1] for r in files
                     if r.startswith(folder + "/") and r.count("/") == 2 and r.endswith("/mod.rs")}
        exported = {}
        for module, group, single in REEXPORT.findall(files[rel]):
            if module in siblings:
                for name in (group.split(",") if group else [single]):
                    name = name.strip().split(" as ")[0].strip()
                    if name:
                        exported[name] = module
        graph = {}
        for other, text in files.items():
            oparts = other[:-3].split("/")
            if oparts[0] != folder or len(oparts) < 2 or other == rel:
                continue
            me = oparts[1]
            if me == "mod" or me not in siblings:
                continue
            production = COMMENT.sub("", text.split("#[cfg(test)]", 1)[0])

            def named(item, top):
                if top and top != folder:
                    return None
                head = item.strip().split("::")[0].strip()
                if head in siblings:
                    return head
                return exported.get(head)

            for top, group in USE_GROUP.findall(production):
                for item in group.split(","):
                    target = named(item, top)
                    if target and target != me:
                        graph.setdefault(me, set()).add(target)
            for top, name in USE_PATH.findall(production):
                target = named(name, top)
                if target and target != me:
                    graph.setdefault(me, set()).add(target)
        result[folder] = graph
    return result


def self_test():
    bad = {"a.rs": "use crate::b::X;", "b/mod.rs": "use crate::c::Y;", "c.rs": "crate::a::z()"}
    ok = dict(bad, **{"c.rs": "#[cfg(test)]\nmod t { use crate::a::z; }"})
    assert circles(edges(bad)) == [("a", "b", "c")], circles(edges(bad))
    assert circles(edges(ok)) == [], circles(edges(ok))
    folder = {
        "s/mod.rs": "mod q;\nmod v;\npub use q::{Verdict, assess};\npub use v::Voters;",
        "s/q.rs": "use super::split::X;\nuse super::{Voters, Node};",
        "s/v.rs": "use super::{Node, Verdict};\n/// [`super::split::X`] in a comment is no import",
        "s/split.rs": "fn f() {}",
    }
    assert circles(folder_edges(folder)["s"]) == [("q", "v")], folder_edges(folder)
    folder["s/v.rs"] = "use super::Node;\n#[cfg(test)]\nmod t { use super::super::Verdict; }"
    assert circles(folder_edges(folder)["s"]) == [], folder_edges(folder)


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
    inner = 0
    for folder, fgraph in sorted(folder_edges(files).items()):
        for circle in circles(fgraph):
            inner += 1
            print(f"import circle in src/{folder}/: " + " -> ".join(list(circle) + [circle[0]]))
        n = sum(len(v) for v in fgraph.values())
        print(f"module-cycles: src/{folder}/: {n} imports between its files")
    print(f"module-cycles: {inner} circle(s) between the files of a folder")
    return 1 if found or inner else 0


if __name__ == "__main__":
    sys.exit(main())
