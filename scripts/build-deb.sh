#!/usr/bin/env bash
# build-deb.sh - the Debian package of the exporter (`make deb`), in target/debian/.
#
# Usage: scripts/build-deb.sh
#   DEB_BINARY=FILE   pack FILE, an exporter built elsewhere, instead of building the release
#                     binary: `make test` packs the debug build its e2e scenarios run (what the
#                     package test checks is the packaging; the release build with lto and one
#                     codegen unit was 624 CPU s, the tail of a 2-core CI run). `make deb` and a
#                     release's `make test` (CI=release) pack the release build.
#
# Builds the release binary, generates the man page and the bash, zsh and fish completions
# from its own clap definitions (the hidden --generate flag) into target/packaging/, and
# packs everything [package.metadata.deb] in Cargo.toml lists with cargo-deb (pinned,
# installed by scripts/install-deps.sh). Prints the path of the .deb on its last line.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=../tests/e2e/paths.sh
source tests/e2e/paths.sh
log() { printf '[build-deb] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v cargo-deb >/dev/null || die "cargo-deb missing: run scripts/install-deps.sh"
if [[ -n ${DEB_BINARY:-} ]]; then
  [[ -x $DEB_BINARY ]] || die "DEB_BINARY=$DEB_BINARY is not an executable"
  # cargo-deb reads an asset under target/release/ from the directory of the --profile it is
  # given; a profile name of our own (no such Cargo profile: nothing is built) keeps this copy
  # away from the release build's binary.
  profile="deb-binary"
  mkdir -p "$E2E_TARGET_DIR/$profile"
  cp -f "$DEB_BINARY" "$E2E_TARGET_DIR/$profile/patroni-raft-exporter"
  log "packing $DEB_BINARY (DEB_BINARY), not the release build"
else
  profile=release
  log "cargo build --release"
  cargo build --release --locked --bin patroni-raft-exporter
fi
binary="$E2E_TARGET_DIR/$profile/patroni-raft-exporter"

# Cargo.toml names these paths relative to the repository (not the target dir).
generated=target/packaging
rm -rf "$generated"
mkdir -p "$generated"
"$binary" --generate man | gzip -9n > "$generated/patroni-raft-exporter.1.gz"
"$binary" --generate complete-bash > "$generated/patroni-raft-exporter.bash"
"$binary" --generate complete-zsh > "$generated/_patroni-raft-exporter"
"$binary" --generate complete-fish > "$generated/patroni-raft-exporter.fish"
for file in "$generated"/*; do
  [[ -s $file ]] || die "generated $file is empty"
done
log "generated man page and completions in $generated/"

log "cargo deb"
deb=$(cargo deb --locked --no-build --profile "$profile" | tail -n 1)
[[ -f $deb ]] || die "cargo deb did not report a package (got: $deb)"
log "built $deb ($(du -h "$deb" | cut -f1))"
echo "$deb"
