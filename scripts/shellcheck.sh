#!/usr/bin/env bash
# shellcheck.sh - shellcheck (the Debian package) on every shell script of the repository: the
# tracked *.sh files and every tracked file whose first line is a sh/bash shebang (.ci/run,
# packaging/deb/postinst, ...). Settings in .shellcheckrc. Clean means no finding at any
# severity; where a finding is wrong, a `# shellcheck disable=SCnnnn  # reason` directive on the
# line before says why. `make test` runs it (scripts/test.sh).
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
shellcheck -x "$@"
