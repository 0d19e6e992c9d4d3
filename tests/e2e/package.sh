#!/usr/bin/env bash
# package.sh - the Debian package installed on this machine like any exporter, and run the way
# its systemd unit runs it, against a REAL Patroni + Raft cluster; then purged without a trace.
#
# Usage: tests/e2e/package.sh [PATRONI_VERSION]     (default 3.3.8)
#
#   1. `scripts/build-deb.sh` (the release build, or DEB_BINARY's: `make test` packs its e2e
#      debug build, a release its release build; man page and completions, cargo-deb); lintian
#      with no error (overrides, each with its reason: packaging/deb/lintian-overrides)
#   2. `dpkg -i`: the system user (no shell, no home), /etc/patroni-raft-exporter
#      root:patroni-raft-exporter 0750, the conffiles, every documented path
#   3. the installed unit: `systemd-analyze verify`, and `systemd-analyze security` (score printed)
#   4. the operator's two edits: the Raft password file (root:group 0640) and the example
#      config's URL and scope pointed at the test cluster (nothing else of the file changes)
#   5. the INSTALLED binary run with the installed unit's own ExecStart, $ARGS expanded from
#      the installed /etc/default file as systemd does, in a clean environment, as the unit's
#      User= (setpriv, no capabilities, no new privileges), under the unit's NoExecPaths=/
#      and ExecPaths= (a mount namespace: everything noexec but those paths): the cluster's
#      quorum is confirmed (`patroni_raft_cluster_quorum 1`)
#   6. `dpkg --purge`: every path `dpkg -L` listed is gone (directories other packages own
#      excepted), so are the config directory with the operator's files, the user, the group,
#      and any file named after the package under /etc, /usr, /var/lib, /var/cache, /var/log
#      (man-db's cache of formatted man pages aside)
#
# Runs as root (dpkg). It enters a network namespace of its own (lib.sh's e2e_scenario) so that
# the cluster's fixed loopback addresses and the exporter's port :9393 never meet another test's.
# Refuses to run when the package or its user already exist (never touches an admin's
# installation). rc 1 if anything failed.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

# as root, in a network namespace of its own
E2E_DEFAULT_VERSION=3.3.8 E2E_NO_EXPORTER=1 E2E_TOOLS="lintian dpkg-deb systemd-analyze cargo-deb" \
  e2e_scenario package "$@"
PACKAGE=patroni-raft-exporter
SERVICE_USER=patroni-raft-exporter
UNIT=/usr/lib/systemd/system/$PACKAGE.service
DEFAULT_FILE=/etc/default/$PACKAGE
CONFIG_DIR=/etc/$PACKAGE
CONFIG_FILE=$CONFIG_DIR/exporter.yml
export DATA_DIR="${DATA_DIR:-$E2E_WORK/cluster-package-$PATRONI_VERSION}"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
export EXPORTER_URL="http://127.0.0.1:9393/metrics"   # the example's --web.listen-address=:9393
S='scope="pg-test"'
INSTALLED_BY_US=0

# the package is installed machine-wide: another run of the tests on this machine (a second
# clone's `make test`) waits for this one's purge rather than finding it installed
exec 7>"/tmp/$PACKAGE-package-e2e.lock"
flock -w 900 7 || { echo "another run's package test held /tmp/$PACKAGE-package-e2e.lock for 900 s" >&2; exit 2; }
if [[ $(dpkg-query -W -f='${db:Status-Status}' "$PACKAGE" 2>/dev/null || true) =~ ^(installed|config-files|half-.*|unpacked|triggers-.*)$ ]]; then
  echo "$PACKAGE is already installed here (dpkg): not touching it" >&2; exit 2
fi
if getent passwd "$SERVICE_USER" >/dev/null || getent group "$SERVICE_USER" >/dev/null || [[ -e $CONFIG_DIR ]]; then
  echo "user/group $SERVICE_USER or $CONFIG_DIR already exists: not touching it" >&2; exit 2
fi

e2e_setup
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() {
  e2e_stop_pid "$EXPORTER_PID"
  if ((INSTALLED_BY_US)); then
    e2e_log "cleanup: purging $PACKAGE (installed by this test)"
    dpkg --purge "$PACKAGE" >/dev/null 2>&1 || true
  fi
}

e2e_log "=== Debian package, Patroni $PATRONI_VERSION"

# ---------------------------------------------------------------- 1. build, lintian
t0=$(e2e_now)
deb=$("$E2E_REPO/scripts/build-deb.sh" | tail -n 1)
[[ -f $deb ]] || on_fail "1: make deb produced no package"
pass "1: built $(basename "$deb") ($(du -h "$deb" | cut -f1)) in $(e2e_since "$t0")s"
lintian_out="$RUN_DIR/lintian.txt"
if lintian --fail-on error "$deb" >"$lintian_out" 2>&1; then
  pass "1: lintian: no error ($(grep -c '^W: ' "$lintian_out" || true) warning(s))"
  sed 's/^/    lintian: /' "$lintian_out" | grep -v 'running with root privileges' >&2 || true
else
  cat "$lintian_out" >&2
  on_fail "1: lintian reports errors"
fi

# ---------------------------------------------------------------- 2. dpkg -i
INSTALLED_BY_US=1
dpkg -i "$deb" >"$RUN_DIR/dpkg-install.log" 2>&1 || { cat "$RUN_DIR/dpkg-install.log" >&2; on_fail "2: dpkg -i"; }
[[ $(dpkg-query -W -f='${db:Status-Status}' "$PACKAGE") == installed ]] || on_fail "2: dpkg does not list $PACKAGE as installed"
mapfile -t installed_paths < <(dpkg -L "$PACKAGE")
pass "2: dpkg -i: installed, ${#installed_paths[@]} paths"

IFS=: read -r _ _ uid gid _ home shell < <(getent passwd "$SERVICE_USER") || on_fail "2: no user $SERVICE_USER"
if [[ $shell == /usr/sbin/nologin && $home == /nonexistent && ! -e /nonexistent ]]; then pass "2: system user $SERVICE_USER (uid $uid, shell $shell, home $home not created)"
else on_fail "2: user $SERVICE_USER: shell $shell, home $home"; fi
[[ $uid -lt 1000 && $(getent group "$SERVICE_USER" | cut -d: -f3) == "$gid" ]] \
  || on_fail "2: $SERVICE_USER is not a system user with its own group (uid $uid gid $gid)"
if [[ $(stat -c '%U:%G %a' "$CONFIG_DIR") == "root:$SERVICE_USER 750" ]]; then pass "2: $CONFIG_DIR root:$SERVICE_USER 0750"
else on_fail "2: $CONFIG_DIR is $(stat -c '%U:%G %a' "$CONFIG_DIR")"; fi
conffiles=$(dpkg-query -W -f='${Conffiles}' "$PACKAGE" | awk 'NF { print $1 }' | sort | tr '\n' ' ')
if [[ $conffiles == "$DEFAULT_FILE $CONFIG_FILE " ]]; then pass "2: conffiles: $conffiles"; else on_fail "2: conffiles are: $conffiles"; fi
expected_paths=(
  "/usr/bin/$PACKAGE" "$UNIT" "$DEFAULT_FILE" "$CONFIG_FILE"
  "/usr/share/$PACKAGE/alerts/patroni-raft.rules.yml" "/usr/share/$PACKAGE/alerts/alertmanager.example.yml"
  "/usr/share/$PACKAGE/alerts/patroni-compat.rules.yml"
  "/usr/share/$PACKAGE/dashboards/patroni-cluster.json" "/usr/share/$PACKAGE/dashboards/patroni-raft.json"
  "/usr/share/man/man1/$PACKAGE.1.gz" "/usr/share/bash-completion/completions/$PACKAGE"
  "/usr/share/zsh/vendor-completions/_$PACKAGE" "/usr/share/fish/vendor_completions.d/$PACKAGE.fish"
  "/usr/share/doc/$PACKAGE/copyright" "/usr/share/doc/$PACKAGE/changelog.Debian.gz"
  "/usr/share/doc/$PACKAGE/README.md"
)
missing=()
for path in "${expected_paths[@]}"; do [[ -s $path ]] || missing+=("$path"); done
if ((${#missing[@]} == 0)); then pass "2: the ${#expected_paths[@]} documented paths are there"; else on_fail "2: missing: ${missing[*]}"; fi
# The generated man page and completions describe the installed binary's flags.
if zcat /usr/share/man/man1/$PACKAGE.1.gz | grep -q 'raft.password\\-file' \
  && grep -q -- '--raft.password-file' /usr/share/bash-completion/completions/$PACKAGE \
  && bash -n /usr/share/bash-completion/completions/$PACKAGE; then pass "2: man page and completions name --raft.password-file; the bash completion parses"
else on_fail "2: man page or completions"; fi
[[ $(/usr/bin/$PACKAGE --version) == "$PACKAGE 0.1.0"* ]] || on_fail "2: /usr/bin/$PACKAGE --version: $(/usr/bin/$PACKAGE --version)"

# ---------------------------------------------------------------- 3. the unit
if systemd-analyze verify "$UNIT" >"$RUN_DIR/verify.txt" 2>&1 && ! grep -q . "$RUN_DIR/verify.txt"; then
  pass "3: systemd-analyze verify $UNIT: clean"
else
  cat "$RUN_DIR/verify.txt" >&2
  on_fail "3: systemd-analyze verify"
fi
systemd-analyze security --offline=true "$UNIT" >"$RUN_DIR/security.txt" 2>&1 || true
score=$(grep -o 'Overall exposure level for .*' "$RUN_DIR/security.txt" || true)
if [[ -n $score ]]; then pass "3: systemd-analyze security: $score"
else { cat "$RUN_DIR/security.txt" >&2; on_fail "3: systemd-analyze security printed no score"; }; fi

# ---------------------------------------------------------------- 4. the operator's edits
cluster up >&2 || on_fail "4: cluster up"
eval "$(cluster env)"   # MEMBER0_REST, RAFT_PASS, SCOPE, ...
# The password file as the example config's comment says to make it.
install -m 0640 -o root -g "$SERVICE_USER" /dev/null "$CONFIG_DIR/raft-password"
printf '%s\n' "$RAFT_PASS" >"$CONFIG_DIR/raft-password"
cp "$CONFIG_FILE" "$RUN_DIR/exporter.yml.installed"
sed -i -e "s#^\(    patroni_urls: \)\[http://192.0.2.10:8008\]#\1[$MEMBER0_REST]#" \
       -e "s#^\(  - scope: \)pg-main #\1$SCOPE #" "$CONFIG_FILE"
changed=$(diff "$RUN_DIR/exporter.yml.installed" "$CONFIG_FILE" | grep -c '^>' || true)
if [[ $changed -eq 2 ]]; then pass "4: example config: URL -> $MEMBER0_REST, scope -> $SCOPE (2 lines), Raft password file 0640"
else on_fail "4: editing the example config changed $changed lines (expected 2): has its example URL or scope changed?"; fi

# ---------------------------------------------------------------- 5. ExecStart as the unit runs it
# The unit's ExecStart (continuation lines joined) and User=.
exec_start=$(awk '/^ExecStart=/ { line = $0; while (line ~ /\\$/ && (getline next_line) > 0) { sub(/\\$/, "", line); line = line next_line } sub(/^ExecStart=/, "", line); print line }' "$UNIT")
unit_user=$(sed -n 's/^User=//p' "$UNIT")
[[ $(grep -c '^ExecStart=' "$UNIT") -eq 1 && -n $exec_start && $unit_user == "$SERVICE_USER" ]] \
  || on_fail "5: unit: ExecStart '$exec_start', User '$unit_user'"
[[ $exec_start != [-@:+!]* ]] || on_fail "5: ExecStart has a prefix this test does not model: $exec_start"
# The environment systemd builds from EnvironmentFile=-/etc/default/...: KEY=VALUE lines,
# comments and blank lines skipped, surrounding quotes removed.
grep -q "^EnvironmentFile=-$DEFAULT_FILE\$" "$UNIT" || on_fail "5: the unit does not read $DEFAULT_FILE"
declare -A unit_env=()
while IFS= read -r line; do
  [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
  [[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || on_fail "5: $DEFAULT_FILE: not KEY=VALUE: $line"
  key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
  [[ $value =~ ^\"(.*)\"$ || $value =~ ^\'(.*)\'$ ]] && value=${BASH_REMATCH[1]}
  unit_env[$key]=$value
done <"$DEFAULT_FILE"
# systemd.service(5): "$VAR" as a whole word is split at whitespace into words; "${VAR}"
# inside a word is substituted as is.
argv=()
read -r -a words <<<"$exec_start"
for word in "${words[@]}"; do
  if [[ $word =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
    read -r -a split <<<"${unit_env[${BASH_REMATCH[1]}]:-}"
    argv+=("${split[@]}")
  else
    while [[ $word =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
      word=${word/"${BASH_REMATCH[0]}"/"${unit_env[${BASH_REMATCH[1]}]:-}"}
    done
    argv+=("$word")
  fi
done
[[ ${argv[0]} == /usr/bin/$PACKAGE && " ${argv[*]} " == *" --config.file=$CONFIG_FILE "* ]] \
  || on_fail "5: ExecStart expands to: ${argv[*]}"
pass "5: ExecStart expands to: ${argv[*]}"
env_args=()
for key in "${!unit_env[@]}"; do env_args+=("$key=${unit_env[$key]}"); done
# The unit's NoExecPaths=/ + ExecPaths= as systemd applies them: in a mount namespace of the
# exporter's own, every mount noexec except bind mounts of the ExecPaths entries ("-": may be
# missing), so an entry the binary needs (its loader, its libraries) and lacks fails here as
# it would under systemd. env and setpriv, which start it, are bound executable too.
grep -qx 'NoExecPaths=/' "$UNIT" || on_fail "5: the unit has no NoExecPaths=/ (this test models it)"
exec_paths=$(sed -n 's/^ExecPaths=//p' "$UNIT")
[[ -n $exec_paths ]] || on_fail "5: the unit has no ExecPaths="
# shellcheck disable=SC2016  # expanded by the bash -c that runs it, not here
sandbox='
  set -e
  mount --make-rprivate /
  for path in $EXEC_PATHS /usr/bin/env /usr/bin/setpriv; do
    optional=0
    if [[ $path == -* ]]; then path=${path#-}; optional=1; fi
    if [[ -e $path ]]; then mount --bind "$path" "$path"
    elif ((!optional)); then echo "ExecPaths: $path does not exist" >&2; exit 97; fi
  done
  # every mount of the namespace noexec, the bind mounts above excepted (listed last, kept)
  while read -r target; do
    mount -o remount,bind,noexec "$target" 2>/dev/null || true
  done < <(findmnt -rn -o TARGET | grep -vxF -f <(for path in $EXEC_PATHS /usr/bin/env /usr/bin/setpriv; do realpath -m "${path#-}"; done))
  exec "$@"'
EXEC_PATHS=$exec_paths unshare -m bash -c "$sandbox" sandbox \
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env_args[@]}" \
  setpriv --reuid="$SERVICE_USER" --regid="$SERVICE_USER" --init-groups --no-new-privs \
    --inh-caps=-all --bounding-set=-all -- "${argv[@]}" >"$EXPORTER_LOG" 2>&1 9>&- &
EXPORTER_PID=$!
E2E_PIDS+=("$EXPORTER_PID")
e2e_log "installed exporter pid $EXPORTER_PID as $SERVICE_USER, NoExecPaths=/ ExecPaths=$exec_paths (log $EXPORTER_LOG)"
if wait_for_metric patroni_raft_cluster_quorum "$S" == 1 60 >/dev/null; then
  pass "5: patroni_raft_cluster_quorum{$S} 1 after ${E2E_ELAPSED}s"
else
  on_fail "5: the installed exporter never confirmed the cluster's quorum"
fi
metric_lines patroni_raft_cluster_quorum | sed 's/^/    /' >&2
if [[ $(metric_value patroni_up "$S,...") == 1 ]]; then pass "5: patroni_up{$S} 1"; else on_fail "5: patroni_up"; fi
if [[ $(ps -o user= -p "$EXPORTER_PID") == "$SERVICE_USER" ]]; then pass "5: the exporter runs as $SERVICE_USER"
else on_fail "5: the exporter runs as $(ps -o user= -p "$EXPORTER_PID")"; fi
e2e_stop_pid "$EXPORTER_PID"
cluster down --fast >/dev/null 2>&1 || true

# ---------------------------------------------------------------- 6. purge
dpkg --purge "$PACKAGE" >"$RUN_DIR/dpkg-purge.log" 2>&1 || { cat "$RUN_DIR/dpkg-purge.log" >&2; on_fail "6: dpkg --purge"; }
INSTALLED_BY_US=0
status=$(dpkg-query -W -f='${db:Status-Status}' "$PACKAGE" 2>/dev/null || true)
[[ -z $status || $status == not-installed ]] || on_fail "6: dpkg still lists $PACKAGE as $status"
left=()
for path in "${installed_paths[@]}"; do
  [[ -e $path || -L $path ]] || continue
  # A directory another package owns (/usr/bin, /etc/default, /usr/share/man/man1, ...) stays.
  [[ -d $path && ! -L $path ]] && dpkg-query -S "$path" >/dev/null 2>&1 && continue
  left+=("$path")
done
if ((${#left[@]} == 0)); then pass "6: dpkg --purge: none of the ${#installed_paths[@]} listed paths is left (shared directories aside)"
else on_fail "6: left after purge: ${left[*]}"; fi
if [[ ! -e $CONFIG_DIR ]]; then pass "6: $CONFIG_DIR gone, with the operator's raft-password"
else on_fail "6: $CONFIG_DIR left: $(ls -A "$CONFIG_DIR")"; fi
if ! getent passwd "$SERVICE_USER" >/dev/null && ! getent group "$SERVICE_USER" >/dev/null; then pass "6: user and group $SERVICE_USER removed"
else on_fail "6: user or group $SERVICE_USER left"; fi
# Not counted: /usr/local (an admin's own install) and man-db's cache of formatted pages
# (/var/cache/man/cat1/*.gz, written when someone runs man(1) while the package is installed;
# man-db's daily job expires it; no package removes it).
mapfile -t stray < <(find /etc /usr /var/lib /var/cache /var/log \( -path /usr/local -o -path /var/cache/man \) -prune \
  -o -name "*$PACKAGE*" -print 2>/dev/null)
if ((${#stray[@]} == 0)); then pass "6: no file named *$PACKAGE* under /etc /usr /var/lib /var/cache /var/log"
else on_fail "6: left: ${stray[*]}"; fi

e2e_summary
