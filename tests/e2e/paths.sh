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
#   e2e_locked LOCK CMD...  CMD in a subshell holding an exclusive flock (fd 7) on LOCK: a name
#                          ($E2E_WORK/.lock-NAME) or an absolute path (a machine-wide lock,
#                          /run/lock/...); waits up to E2E_SETUP_LOCK_S (1800 s), rc 2 when not
#                          obtained; rc of CMD. Shared set-up (a venv, the Debian packages) is
#                          made by one run at a time, whatever runs in parallel (scripts/test.sh's
#                          steps, soak.sh's two versions, two clones' .ci/run): the next one in
#                          finds it made. CMD runs under the caller's `set -e`; call it plainly,
#                          not in a condition

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
e2e_locked() {
  local lock=$1
  shift
  [[ $lock == /* ]] || { mkdir -p "$E2E_WORK"; lock="$E2E_WORK/.lock-$lock"; }
  (
    if ! flock -n 7; then
      echo "[e2e_locked] waiting for $lock: another run is making the same thing" >&2
      flock -w "${E2E_SETUP_LOCK_S:-1800}" 7 || { echo "[e2e_locked] no lock on $lock within ${E2E_SETUP_LOCK_S:-1800}s" >&2; exit 2; }
    fi
    "$@"
  ) 7>"$lock"
}
