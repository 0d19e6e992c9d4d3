#!/usr/bin/env python3
"""No production function in src/ is longer than a screenful (100 lines, from its `fn` line to
its closing brace): a longer one mixes steps that deserve names of their own. Test code
(`#[cfg(test)]`, `#[cfg(feature = "testkit")]` items and modules) and src/bin (test tooling)
are not production code and are not measured.

A gate covers the one item that follows it (after further attributes, comments and blank
lines): `#[cfg(feature = "testkit")] pub mod fake;` leaves the `mod fernet;` on the next line
measured.

Usage: scripts/function-length.py [--top N] [--max LINES] [--self-test]
  (exit 1 when a function is longer; the self-test runs first on every call)
"""
import argparse
import pathlib
import re
import sys

GATE = re.compile(r'#\[cfg\((any\()?(test|feature = "testkit")')
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def code_of(line):
    """The line without strings, chars and comments: what its braces are counted on."""
    line = re.sub(r'b?r(#+)".*?"\1', '""', line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def gated_item(lines, i):
    """The line the gate on line i covers: the first after it that is no attribute, comment or
    blank line (None when the file ends first)."""
    for following in lines[i + 1:]:
        stripped = following.strip()
        if stripped and not stripped.startswith(("#[", "//")):
            return following
    return None


def gated_modules(files):
    """Files declared as modules under a test gate (`#[cfg(test)] mod tests;`), from
    {path: text}."""
    skipped = set()
    for path, text in files.items():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not GATE.search(line):
                continue
            m = re.match(r"\s*(pub(\(\w+\))? )?mod (\w+);", gated_item(lines, i) or "")
            if m:
                here = path.parent if path.name in ("mod.rs", "lib.rs", "main.rs") else path.parent / path.stem
                skipped |= {here / f"{m.group(3)}.rs", here / m.group(3) / "mod.rs"}
    return skipped


def production_lines(lines):
    """(line number, text) of the lines outside test-gated items."""
    skip_depth, pending, depth, in_raw = None, False, 0, False
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if in_raw:
            in_raw = '"#' not in line
            code = ""
        else:
            code = code_of(line)
            if re.search(r'b?r#"', code) and '"#' not in code.split('r#"', 1)[-1]:
                in_raw, code = True, code.split('r#"')[0]
        delta = code.count("{") - code.count("}")
        if skip_depth is None and GATE.match(stripped):
            pending = True
            continue
        if pending and skip_depth is None:
            if stripped.startswith("#[") or not stripped or stripped.startswith("//"):
                continue
            pending = False
            if delta > 0:
                skip_depth = depth
            depth += delta
            continue
        if skip_depth is not None:
            depth += delta
            if depth <= skip_depth:
                skip_depth = None
            continue
        depth += delta
        yield number, line


def function_lengths(files):
    """(length, where, name) of every production function, from {path below src/: text}."""
    skipped = gated_modules(files)
    for path in sorted(files):
        if path in skipped or "bin" in path.parts:
            continue
        source = files[path].splitlines()
        for number, text in production_lines(source):
            m = FN.match(text)
            if not m or text.rstrip().endswith(";"):
                continue
            indent = m.group(1)
            end = next((n for n in range(number, len(source) + 1) if source[n - 1].startswith(indent + "}")), number)
            yield end - number + 1, f"src/{path}:{number}", m.group(7)


def self_test():
    P = pathlib.PurePosixPath
    long_body = "fn long() {\n" + "    step();\n" * 3 + "}\n"
    files = {
        # a gate covers the next item only: `fernet` below the gated `fake` is production code
        P("raft/mod.rs"): '#[cfg(feature = "testkit")]\npub mod fake;\npub mod fernet;\n'
                          "#[cfg(test)]\n// the unit tests\n#[allow(dead_code)]\nmod tests;\n",
        P("raft/fake.rs"): long_body,
        P("raft/fernet.rs"): long_body,
        P("raft/tests.rs"): long_body,
        P("lib.rs"): '#[cfg(any(test, feature = "testkit"))]\npub fn render() {\n    a();\n}\n'
                     "pub fn served() {\n    b();\n}\n",
        P("bin/tool.rs"): long_body,
    }
    found = sorted((where, name, length) for length, where, name in function_lengths(files))
    assert found == [("src/lib.rs:5", "served", 3), ("src/raft/fernet.rs:1", "long", 5)], found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5, help="print the N longest (default 5)")
    parser.add_argument("--max", type=int, default=100, help="longest allowed, in lines (default 100)")
    parser.add_argument("--self-test", action="store_true", help="only the script's own test")
    args = parser.parse_args()
    self_test()
    if args.self_test:
        print("function-length: self-test passed")
        return 0
    root = pathlib.Path(__file__).resolve().parent.parent / "src"
    files = {path.relative_to(root): path.read_text() for path in root.rglob("*.rs")}
    lengths = sorted(function_lengths(files), reverse=True)
    if not lengths:
        print("function-length: no function found under src/", file=sys.stderr)
        return 2
    for length, where, name in lengths[:args.top]:
        print(f"{length:4} {where} {name}")
    too_long = [entry for entry in lengths if entry[0] > args.max]
    for length, where, name in too_long:
        print(f"function-length: {where} {name} is {length} lines (at most {args.max})", file=sys.stderr)
    print(f"{len(lengths)} production functions, the longest {lengths[0][0]} lines (at most {args.max})")
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
