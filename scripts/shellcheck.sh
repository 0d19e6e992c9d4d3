#!/usr/bin/env bash
# scripts/shellcheck.sh - runs shellcheck (the Debian package) on every shell script of the repository:
# the tracked *.sh files and every tracked file whose first line is a sh/bash shebang (.ci/run,
# packaging/deb/postinst, ...). Settings in .shellcheckrc. Clean means no finding at any
# severity. Where a finding is wrong, a disable directive on the line before the code names its
# reason after a second '#' on the same line, as in lib.sh: "disable=SC2317  # the EXIT trap
# runs it"; a directive without a reason fails too. `make test` runs this (scripts/test.sh).
#
# Usage: scripts/shellcheck.sh [FILE...]   (default: every shell script git tracks)
set -euo pipefail

cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null || { echo "shellcheck missing: scripts/install-deps.sh" >&2; exit 2; }
if (($# == 0)); then
  mapfile -t files < <(git ls-files | while IFS= read -r f; do
    [[ -f $f ]] || continue
    if [[ $f == *.sh ]] || head -n1 "$f" | grep -qE '^#!.*\b(ba)?sh\b'; then echo "$f"; fi
  done)
  set -- "${files[@]}"
fi
echo "shellcheck $(shellcheck --version | awk '/^version:/ { print $2 }') on $# scripts"
rc=0
shellcheck -x "$@" || rc=$?
if grep -nE '#[[:space:]]*shellcheck[[:space:]]+disable=' "$@" | grep -vE 'disable=[A-Z0-9,]+ +# [^ ]'; then
  echo "shellcheck.sh: the directives above give no reason (# shellcheck disable=SC1234  # why)" >&2
  rc=1
fi
exit "$rc"
