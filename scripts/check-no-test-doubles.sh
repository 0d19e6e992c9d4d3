#!/usr/bin/env bash
# check-no-test-doubles.sh - the exporter binary users run contains no test double.
#
# Usage: scripts/check-no-test-doubles.sh [EXPORTER_BINARY]
#   default: the debug build at $CARGO_TARGET_DIR (or target)/debug/patroni-raft-exporter
#
# The fake pysyncobj node (src/raft/fake.rs), Patroni member (src/patroni/fake.rs) and etcd
# member (src/etcd/fake.rs) answer anything a test wants; they are built only with the
# `testkit` feature, which the tests, benchmarks and fleet-sim enable and the exporter's own
# build does not. This looks for their symbols in the binary, and, so that the check can
# fail, first finds them in fleet-sim (built with the feature).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tests/e2e/paths.sh
source tests/e2e/paths.sh
EXPORTER="${1:-$E2E_TARGET_DIR/debug/patroni-raft-exporter}"
PATTERN='(raft|patroni|etcd)::fake::'

cargo build --locked --quiet --features testkit --bin fleet-sim
control=$(nm -C --defined-only "$E2E_TARGET_DIR/debug/fleet-sim" | grep -Ec "$PATTERN" || true)
if (( control == 0 )); then
  echo "FAIL: no '$PATTERN' symbol even in fleet-sim: the check would not see a fake" >&2
  exit 1
fi
[[ -x $EXPORTER ]] || { echo "FAIL: no exporter binary at $EXPORTER" >&2; exit 1; }
found=$(nm -C --defined-only "$EXPORTER" | grep -Ec "$PATTERN" || true)
if (( found > 0 )); then
  echo "FAIL: $EXPORTER contains $found test-double symbols:" >&2
  { nm -C --defined-only "$EXPORTER" | grep -E "$PATTERN" | head -n 5 >&2; } || true
  exit 1
fi
echo "ok: $EXPORTER has no test double ($control '$PATTERN' symbols in fleet-sim, 0 in the exporter)"
