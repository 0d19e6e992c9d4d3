#!/usr/bin/env bash
# run.sh - the typed e2e layer's runner: the venvs, then pytest, one xdist worker per version.
# Usage: tests/e2e/pylab/run.sh TEST_FILE... --patroni VERSION... [PYTEST_ARG...]   (root)
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=../paths.sh
source ../paths.sh
versions=() args=("$@")
while (($#)); do
  if [[ $1 == --patroni ]]; then
    shift; while (($#)) && [[ $1 != -* ]]; do versions+=("$1"); shift; done
  else shift; fi
done
((${#versions[@]})) || versions=("${PATRONI_VERSION:-4.1.5}")
"$E2E_REPO/scripts/install-deps.sh" --no-apt --no-cargo --patroni "${versions[@]}" >&2
((${#versions[@]} == 1)) || args=(-n "${#versions[@]}" --dist loadgroup "${args[@]}")
exec "$(e2e_venv_dir pytest)/bin/python" -m pytest "${args[@]}"
