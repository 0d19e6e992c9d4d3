#!/usr/bin/env python3
"""check-links.py - every relative link of the Markdown files resolves: the file or directory
exists, and an anchor (`file.md#section`, `#section`) names a heading of that file, as GitHub
makes anchors of headings (lower case, punctuation dropped, spaces to hyphens, `-1`, `-2` for
repeated headings).

Why: the docs link to each other's sections (the README to docs/metrics.md#the-quorum-verdict,
the runbooks to docs/failure-modes.md#...), and a renamed heading breaks such a link silently.
Links in code blocks and inline code are not links; http(s), mailto and file:// links are not
checked (no network).

Usage: scripts/check-links.py [FILE.md...]   (default: every Markdown file git tracks)
       scripts/check-links.py --self-test
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def without_code(text, inline=True):
    """The text with fenced code blocks blanked and (`inline`) inline code removed, lines kept."""
    lines, fenced = [], None
    for line in text.split("\n"):
        fence = re.match(r"^\s*(```+|~~~+)", line)
        if fenced is None and fence:
            fenced = fence.group(1)[0] * 3
            lines.append("")
        elif fenced is not None:
            if line.strip().startswith(fenced):
                fenced = None
            lines.append("")
        else:
            lines.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line) if inline else line)
    return "\n".join(lines)


def slug(heading):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """Every anchor of a Markdown file."""
    if path not in cache:
        found, seen = set(), {}
        text = path.read_text(encoding="utf-8")
        for line in without_code(text, inline=False).split("\n"):
            match = HEADING.match(line)
            if match:
                base = slug(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ID.findall(text))
        cache[path] = found
    return cache[path]


def broken_links(path):
    """(line, link, why) for every relative link of `path` that does not resolve."""
    problems = []
    for number, line in enumerate(without_code(path.read_text(encoding="utf-8")).split("\n"), 1):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:, file:
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                problems.append((number, target, "no such file"))
            elif anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append((number, target, "no such heading"))
    return problems


def tracked_markdown():
    names = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return [ROOT / name for name in names]


def self_test():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        (base / "a.md").write_text(
            "# Title\n## The `quorum` verdict: 3.5 s\n## Same\n## Same\n"
            "[ok](b.md#stereo-mode-a-witness) [ok](#the-quorum-verdict-35-s) [ok](#same-1)\n"
            "[bad](b.md#nope) [bad](c.md) [bad](#same-2) [web](https://x/y#z)\n"
            "`[code](c.md)`\n```\n[code](c.md)\n```\n",
            encoding="utf-8",
        )
        (base / "b.md").write_text("## Stereo mode: a witness\n", encoding="utf-8")
        got = [(line, link) for line, link, _ in broken_links(base / "a.md")]
        want = [(6, "b.md#nope"), (6, "c.md"), (6, "#same-2")]
        if got != want:
            print(f"self-test failed: {got} != {want}", file=sys.stderr)
            return 1
    print("check-links self-test: passed")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if self_test():
        return 1
    files = [pathlib.Path(name).resolve() for name in argv] or tracked_markdown()
    failures = 0
    for path in files:
        for number, target, why in broken_links(path):
            print(f"{path.relative_to(ROOT)}:{number}: {target}: {why}")
            failures += 1
    print(f"check-links: {len(files)} files, {failures} broken links")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
