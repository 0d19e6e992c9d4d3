#!/usr/bin/env bash
# package-check.sh - the crate as crates.io would get it (Cargo.toml `include`) holds every
# file its build needs.
#
# Usage: scripts/package-check.sh              the file list (seconds; every push: scripts/test.sh)
#        scripts/package-check.sh --dry-run    `cargo publish --dry-run`: the packaged crate
#                                              built from its files alone (minutes: a whole
#                                              build of its own; `make release-check`, and
#                                              scripts/test.sh for a release: CI=release or a
#                                              tag on HEAD)
#
# The file list: `cargo package --list` must hold
#   - Cargo.toml, Cargo.lock, the build script, the readme and the license file the manifest
#     names, the source file of the library and of every binary that is shipped (a binary
#     with required-features, a test tool such as fleet-sim, is left out on purpose);
#   - every src/**/*.rs outside src/bin/ (a new module directory missing from `include`);
#   - every file rustc and the build script read to build the shipped binary, from cargo's
#     dep-info of that build (target/debug/patroni-raft-exporter.d): `include_str!`,
#     `#[path]` modules and the like, whatever their directory.
# What only the dry run proves: that the packaged build script and sources compile with no
# checkout around them (no .git, no file outside the package).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tests/e2e/paths.sh
source tests/e2e/paths.sh
ROOT=$PWD

if [[ ${1:-} == --dry-run ]]; then
  # Its own target dir: the packaged copy has the same unit hashes as the checkout, and built
  # in the shared one, its build script and library (dep-info pointing into target/package/)
  # would stand in for the checkout's in later builds, whatever is edited since.
  exec cargo publish --dry-run --locked --allow-dirty --target-dir "$E2E_TARGET_DIR/publish-dry-run"
fi
[[ $# == 0 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

fail=0
packaged=$(cargo package --list --locked --allow-dirty 2>/dev/null) \
  || { cargo package --list --locked --allow-dirty >/dev/null; exit 1; }
in_package() { grep -qxF -- "$1" <<<"$packaged"; }
need() { # need WHY FILE...: each FILE (relative to the repository) must be packaged
  local why=$1 f
  shift
  for f in "$@"; do
    if in_package "$f"; then
      checked+=("$f")
    else
      echo "FAIL: $f ($why) is not in the packaged crate: add it to Cargo.toml's include" >&2
      fail=1
    fi
  done
}
checked=()

# 1. what the manifest names
meta=$(cargo metadata --no-deps --locked --format-version 1)
mapfile -t named < <(jq -r --arg root "$ROOT/" '
  .packages[0] as $p
  | ([$p.readme, $p.license_file] | map(select(. != null))),
    ($p.targets[]
      | select(.kind | index("lib") or index("bin") or index("custom-build"))
      | select((.["required-features"] // []) | length == 0)
      | .src_path | ltrimstr($root))
  | if type == "array" then .[] else . end' <<<"$meta")
need "the manifest" Cargo.toml Cargo.lock
need "a shipped target, the readme or the license" "${named[@]}"

# 2. every module source outside the test tools
mapfile -t sources < <(find src -name '*.rs' -not -path 'src/bin/*' | sort)
need "a module under src/" "${sources[@]}"

# 3. what the build of the shipped binary read (the build is a no-op when it is up to date)
cargo build --locked --quiet --bin patroni-raft-exporter
depinfo="$E2E_TARGET_DIR/debug/patroni-raft-exporter.d"
[[ -s $depinfo ]] || { echo "FAIL: no dep-info at $depinfo" >&2; exit 1; }
mapfile -t read_by_build < <(sed 's/^[^:]*: //' "$depinfo" | tr ' ' '\n' | grep -v '^$' \
  | while read -r f; do [[ $f == "$ROOT"/* ]] && echo "${f#"$ROOT"/}"; done \
  | grep -Ev '^(\.git|target)/' | sort -u)
((${#read_by_build[@]} > 10)) || { echo "FAIL: only ${#read_by_build[@]} files in $depinfo" >&2; exit 1; }
need "read by the build of the exporter" "${read_by_build[@]}"

mapfile -t unique < <(printf '%s\n' "${checked[@]}" | sort -u)
if ((fail)); then exit 1; fi
echo "packaged crate: all ${#unique[@]} files the build needs are in it ($(wc -l <<<"$packaged") files packaged)"
