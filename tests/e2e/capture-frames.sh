#!/usr/bin/env bash
# capture-frames.sh - real pysyncobj status frames for the parser fixtures
# (tests/fixtures/pysyncobj/CASE_VERSION/, read by src/raft/tests.rs).
#
# Usage: tests/e2e/capture-frames.sh PYSYNCOBJ_VERSION [CASES]   (root; ~30 s)
#   CASES: comma-separated, default leader,follower,restarted_alone (see capture_frames.py)
#
# Builds a throwaway venv $E2E_WORK/venv-pysyncobj-VERSION (pysyncobj==VERSION and the
# cryptography of the e2e matrices, from the package registry; kept for the next run), then,
# in a network namespace of its own, runs tests/e2e/capture_frames.py with it: a real 3-node
# pysyncobj cluster on 127.0.0.1:6101-6103 with journal files and a Raft password, the
# version's own `syncobj_admin -status` through a recording proxy, every frame saved byte-exact
# with its decrypted and decompressed forms and syncobj_admin's stdout. Overwrites the case
# directories it captures; their case.json says which script captured them.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"    # paths.sh, e2e_netns_run

VERSION="${1:-}"
CASES="${2:-leader,follower,restarted_alone}"
[[ $VERSION =~ ^0\.3\.[0-9]+$ ]] || { echo "usage: $0 PYSYNCOBJ_VERSION [CASES]  (e.g. 0.3.15)" >&2; exit 2; }
OUT="$E2E_REPO/tests/fixtures/pysyncobj"
VENV="$E2E_WORK/venv-pysyncobj-$VERSION"
# the cryptography the e2e venvs pin (pysyncobj's Fernet); one source of truth
CRYPTO=$(grep -E '^cryptography==' "$E2E_DIR/requirements-4.1.5.txt")

if [[ ${E2E_IN_NETNS:-} != 1 ]]; then
  ((EUID == 0)) || { echo "$(basename "$0") needs root (a network namespace of its own)" >&2; exit 2; }
  if [[ ! -x $VENV/bin/syncobj_admin ]] \
     || [[ $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pysyncobj"))') != "$VERSION" ]]; then
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "pysyncobj==$VERSION" "$CRYPTO"
  fi
  e2e_netns_run "capture-frames-${VERSION//./}" "$0" "$VERSION" "$CASES"
  exit
fi

DATA=$(mktemp -d /tmp/capture-frames.XXXXXX)
trap 'rm -rf "$DATA"' EXIT
"$VENV/bin/python" "$E2E_DIR/capture_frames.py" "$OUT" --cases "$CASES" --data-dir "$DATA"
