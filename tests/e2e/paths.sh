# shellcheck shell=bash
# paths.sh - where the e2e harness keeps its venvs and cluster data.
# Sourced by scripts/install-deps.sh, tests/e2e/cluster.sh and tests/e2e/lib.sh.
#
# Sets (unless already set in the environment):
#   E2E_REPO   repository root
#   E2E_WORK   work root: $E2E_REPO/.work when every parent directory is traversable by
#              other users, else /var/tmp/patroni-raft-exporter. Patroni and Postgres run as
#              an unprivileged user when we are root (Postgres refuses root), and that user
#              must reach the venv's interpreter and the data directories: a checkout under
#              /root (mode 0700) would fail with "Permission denied".
#   E2E_PATRONI_VERSIONS  the supported version matrices ("3.3.8 4.1.5")
#   E2E_TARGET_DIR  cargo's target directory: $CARGO_TARGET_DIR (relative to the repository
#              when relative, as cargo takes it from there), else $E2E_REPO/target
#   E2E_CLUSTER_LOCK  the lock a real cluster's user holds: the cluster owns fixed loopback
#              addresses, so one per network namespace (/tmp/real-cluster-net<inode>.lock);
#              a test in a namespace of its own does not wait for one on the host
# Functions:
#   e2e_venv_dir VERSION   -> $E2E_WORK/venv-VERSION
#   e2e_traversable DIR    -> 0 if every existing ancestor of DIR (and DIR) is o+x
#   e2e_charm_venv_dir     -> $E2E_WORK/venv-charm (Charmed PostgreSQL's library package)
#   e2e_charm_package_dir  -> its single_kernel_postgresql/ in that venv's site-packages

E2E_REPO="${E2E_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# shellcheck disable=SC2034  # for the scripts that source this file
E2E_PATRONI_VERSIONS="3.3.8 4.1.5"
E2E_TARGET_DIR="${CARGO_TARGET_DIR:-$E2E_REPO/target}"
[[ $E2E_TARGET_DIR == /* ]] || E2E_TARGET_DIR="$E2E_REPO/$E2E_TARGET_DIR"

e2e_traversable() {
  local d=$1 mode
  while :; do
    if [[ -d $d ]]; then
      mode=$(stat -L -c %A "$d" 2>/dev/null) || return 1
      [[ ${mode:9:1} == [xt] ]] || return 1
    fi
    [[ $d == / ]] && return 0
    d=$(dirname "$d")
  done
}

if [[ -z "${E2E_WORK:-}" ]]; then
  if [[ $EUID -ne 0 ]] || e2e_traversable "$E2E_REPO"; then
    E2E_WORK="$E2E_REPO/.work"
  else
    E2E_WORK=/var/tmp/patroni-raft-exporter
  fi
fi

if [[ -z "${E2E_CLUSTER_LOCK:-}" ]]; then
  E2E_NETNS_ID=$(readlink /proc/self/ns/net 2>/dev/null | tr -dc 0-9)
  E2E_CLUSTER_LOCK="/tmp/real-cluster-net${E2E_NETNS_ID:-0}.lock"
fi

e2e_venv_dir() { echo "$E2E_WORK/venv-$1"; }
e2e_charm_venv_dir() { echo "$E2E_WORK/venv-charm"; }
e2e_charm_package_dir() {
  local d
  for d in "$E2E_WORK"/venv-charm/lib/python3*/site-packages/single_kernel_postgresql; do
    echo "$d"; return 0
  done
}
