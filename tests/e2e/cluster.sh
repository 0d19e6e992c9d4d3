#!/usr/bin/env bash
# cluster.sh - a REAL 3-member Patroni cluster on the Raft DCS (pysyncobj), on loopback,
# laid out like Charmed PostgreSQL (machine charm): member N (0..2) is "postgresql-N" with
#   REST API  http://127.0.0.1{1,2,3}:8008  (basic auth patroni/patroni-pass for writes)
#   Raft      127.0.0.1{1,2,3}:2222         (password raft-pass)
#   Postgres  127.0.0.1{1,2,3}:5432         (own unix socket dir; synchronous_mode on)
# If 127.0.0.1x cannot be bound, everything runs on 127.0.0.1 with REST 8008+N,
# Raft 2222+N, Postgres 5432+N (force with ADDR_MODE=single).
# Stereo mode (Charmed PostgreSQL 16: two database units and a postgresql-watcher unit):
# MEMBERS=2 WITNESS_PORT=2224 `up` adds a Raft-only witness, Patroni's own
# `patroni_raft_controller` (no PostgreSQL, no REST API), on 127.0.0.(IP_BASE+9):PORT
# (127.0.0.1:PORT in single mode), listed in every member's raft.partner_addrs. WITNESS_IP puts
# it on another address: two clusters whose witnesses share one host, as one postgresql-watcher
# unit serves several clusters (a Raft instance each, ports 2223 upward: tests/e2e/shared-watcher.sh).
#
# Usage: tests/e2e/cluster.sh COMMAND [ARGS]
#   up [--sync]          write configs, start the witness (WITNESS_PORT) and the MEMBERS
#                        members (default 3), wait for leader + MEMBERS-1 streaming (--sync:
#                        and every replica sync_standby) and, with a witness, for its own
#                        Raft status to say has_quorum; restarts a kept cluster
#   down [--keep] [--fast]  stop everything, the witness last (bounded, ~10 s: a sync
#                        standby waits for the primary to release it), then rm -rf DATA_DIR
#                        (--keep: keep it; --fast: SIGKILL patroni + immediate postgres
#                        shutdown, < 1 s)
#   status [N]           PIDs + roles, GET /cluster (JSON on stdout) from the first member
#                        that answers (N: from member N)
#   wait [--sync]        bounded wait (UP_TIMEOUT) until healthy again; fails at once if a
#                        member's patroni is not running
#   kill N [--patroni-only]  crash member N: SIGKILL patroni + immediate shutdown (SIGQUIT)
#                        of its postmaster (--patroni-only: postgres keeps running)
#   stop N               graceful: SIGTERM patroni (it stops postgres), SIGKILL after STOP_TIMEOUT
#   start N              start member N again (no-op when running)
#   raft N|w             syncobj_admin -status of member N (w: of the witness); rc 1 if it
#                        gave no status
#   witness start|stop|kill  the witness (a cluster made with WITNESS_PORT): start it again
#                        (no-op when running); stop: SIGTERM, SIGKILL after STOP_TIMEOUT;
#                        kill: SIGKILL
#   ctl ARGS...          patronictl -c <member 0 config> ARGS (timeout 60 s)
#   psql N [ARGS...]     psql as superuser over member N's unix socket
#   logs N|w [LINES]     tail of member N's patroni.log (w: the witness's log; default 50 lines)
#   pids                 patroni and postmaster PID of each member (and the witness's PID)
#   env                  shell-evaluable KEY='value' lines (addresses, credentials, paths;
#                        MEMBERS, and with a witness WITNESS_RAFT=host:port, WITNESS_CONFIG,
#                        WITNESS_LOG)
#
# Environment:
#   PATRONI_VERSION  matrix, 3.3.8 or 4.1.5 (default 4.1.5) -> VENV=$E2E_WORK/venv-VERSION
#   VENV             venv with patroni[raft] (built by scripts/install-deps.sh)
#   DATA_DIR         runtime data (default $E2E_WORK/cluster, E2E_WORK = <repo>/.work)
#   UP_TIMEOUT=120   STOP_TIMEOUT=45   ADDR_MODE=auto|multi|single   PG_OS_USER=pgtest
#   MEMBERS=3        (at `up`; remembered in DATA_DIR) the number of members, 1..8
#   WITNESS_PORT     (at `up`; remembered in DATA_DIR) a Raft-only witness voter on this port
#                    (not 2222: Charmed PostgreSQL's watcher-raft-port need not be it), as
#                    the charm's stereo mode: Patroni's `patroni_raft_controller` with a YAML
#                    of only `raft:` (self_addr, partner_addrs = every member, password,
#                    data_dir), run as PG_OS_USER; config, Raft data, PID file and log in
#                    DATA_DIR/witness. Its PID is signalled under the same rules as the
#                    members' (PID file + cmdline naming its config). tests/e2e/stereo.sh
#   WITNESS_IP       (multi mode, at `up`; remembered in DATA_DIR) the witness's loopback address
#                    instead of 127.0.0.(IP_BASE+9), e.g. 127.0.0.9 for the witnesses of two
#                    clusters (IP_BASE 11 and 21, WITNESS_PORT 2223 and 2224) on one host, as
#                    one postgresql-watcher unit serves both (tests/e2e/shared-watcher.sh)
#   MEMBER_GID_BASE  (as root, at `up`; remembered in DATA_DIR) member N's Patroni and Postgres
#                    run with the primary group MEMBER_GID_BASE+N (a bare number, no group
#                    entry needed), so nftables can tell the members' sockets apart with
#                    `meta skgid` although every member connects from 127.0.0.1 on loopback
#                    (tests/e2e/lab.sh, the partition lab)
#   MEMBER_FAKETIME_N  (at `up` or `start`; remembered in DATA_DIR, an empty value at `start`
#                    forgets it) member N's Patroni, and so its Postgres, runs under libfaketime
#                    (Debian's faketime) with FAKETIME=<value>, e.g. MEMBER_FAKETIME_2="+8s": its
#                    wall clock (time(), Date headers, commit timestamps) is off by that much;
#                    the monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC=1: a faked
#                    one stretches Python's timed waits by the offset), and a sitecustomize
#                    works around libfaketime 0.9.10 breaking Python's time.sleep() with it
#                    (EINVAL). tests/e2e/next-outage.sh (clock skew)
#   MEMBER_RAFT_PARTNERS_N  (at `start`; kept in member N's patroni.yml) member N's
#                    raft.partner_addrs, comma-separated host:port, instead of the other members:
#                    `MEMBER_RAFT_PARTNERS_2=127.0.0.11:2222 cluster.sh start 2` rewrites its
#                    config and starts it with that list; set but empty: the default list again
#                    (tests/e2e/lab.sh, voters that disagree). Patroni asks the listed partners
#                    for the members at start and takes theirs when one answers.
#   DCS=raft|etcd    (at `up`, in the configs) etcd: an `etcd3:` section with ETCD_HOSTS (host:port,
#                    ...; the etcd members are the caller's, e.g. pylab's EtcdCluster) and the lines
#                    ETCD3_YAML holds (`  protocol: https`...) instead of `raft:`; no witness
#   SCOPE=pg-test    REST_USER=patroni REST_PASS=patroni-pass  RAFT_PASS=raft-pass
#   IP_BASE=11       (multi mode) member N listens on 127.0.0.(IP_BASE+N): a second cluster
#                    next to the first, e.g. IP_BASE=21 (tests/e2e/standby.sh)
#   MEMBER_PREFIX=postgresql  member N is named MEMBER_PREFIX-N (a second cluster's names
#                    must differ: a standby leader named like a source replica would be taken
#                    for it in the source's synchronous_standby_names)
#   STANDBY_OF=HOST:PORT  (at `up`, in the bootstrap DCS) a standby cluster (`standby_cluster:`)
#                    replicating from the PostgreSQL at HOST:PORT (the source's primary):
#                    its leader is a standby_leader; `wait` expects one (tests/e2e/standby.sh)
#   STANDBY_APPLY_DELAY  (with STANDBY_OF) the standby cluster's recovery_min_apply_delay, e.g.
#                    10s: its leader replays WAL that long after the source committed it
#   LOOP_WAIT=10 TTL=30 RETRY_TIMEOUT=10
#   SYNC_NODE_COUNT  (bootstrap DCS) default MEMBERS-1 (at least 1): every replica synchronous,
#                    as Charmed PostgreSQL's default "all" (2 for 3 members, 1 for 2)
#   WAL_SEGSIZE      initdb --wal-segsize in MB (default 16; 1 = less WAL to write and delete)
#   TLS=1            (at `up`; remembered in DATA_DIR) the REST API on https with a fresh
#                    self-signed CA and `verify_client: required`, as Charmed PostgreSQL with a
#                    TLS relation. Made with openssl in DATA_DIR/tls: ca.pem, member-N.pem/-key
#                    (serverAuth+clientAuth, SAN = member IP), client.pem/-key (patronictl's
#                    `ctl` section), exporter-client.pem + exporter-client-key.pem (encrypted
#                    PKCS#8, passphrase in exporter-key-pass), exporter-server.pem/-key
#                    (127.0.0.1, for the exporter's own endpoint). `env` prints the paths.
#   TLS_VERIFY_CLIENT  (with TLS=1, at `up`; remembered) the members' `verify_client`: required
#                    (default), optional, or none: no `verify_client` key and so no client
#                    certificate asked, as Charmed PostgreSQL's patroni.yml.j2 has it
#                    (tests/e2e/charm-config.sh)
#
# Every wait is bounded. Only processes whose PID is in DATA_DIR/postgresql-N/patroni.pid or
# pgdata/postmaster.pid (or DATA_DIR/witness/witness.pid) AND whose /proc/PID/cmdline names
# that member's config / data directory (the witness's config) are ever signalled. As root, Patroni (and thus Postgres) runs as the
# unprivileged user PG_OS_USER (created once), via setsid + setpriv.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=paths.sh
source "$E2E_DIR/paths.sh"

PATRONI_VERSION="${PATRONI_VERSION:-4.1.5}"
VENV="${VENV:-$(e2e_venv_dir "$PATRONI_VERSION")}"
DATA="${DATA_DIR:-$E2E_WORK/cluster}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
OS_USER="${PG_OS_USER:-pgtest}"
SCOPE="${SCOPE:-pg-test}"
IP_BASE="${IP_BASE:-11}"
MEMBER_PREFIX="${MEMBER_PREFIX:-postgresql}"
STANDBY_OF="${STANDBY_OF:-}"
DCS="${DCS:-raft}" ETCD_HOSTS="${ETCD_HOSTS:-}" ETCD3_YAML="${ETCD3_YAML:-}"
STANDBY_APPLY_DELAY="${STANDBY_APPLY_DELAY:-}"
NAMESPACE="${NAMESPACE:-/db/}"
NMEMBERS=3                                  # resolve_members: DATA_DIR/.members, else MEMBERS
WITNESS_PORT_SET="${WITNESS_PORT:-}"        # resolve_members: DATA_DIR/.witness_port, else this
WITNESS_PORT=""
WITNESS_IP_SET="${WITNESS_IP:-}"            # resolve_members: DATA_DIR/.witness_ip, else this
WITNESS_IP=""
BOOTSTRAP_MEMBER="${BOOTSTRAP_MEMBER:-0}"   # only this member gets a bootstrap: section
REST_USER="${REST_USER:-patroni}"
REST_PASS="${REST_PASS:-patroni-pass}"
RAFT_PASS="${RAFT_PASS:-raft-pass}"
SU_USER=operator      SU_PASS="${SU_PASS:-operator-pass}"
REPL_USER=replication REPL_PASS="${REPL_PASS:-replication-pass}"
REWIND_USER=rewind    REWIND_PASS="${REWIND_PASS:-rewind-pass}"
LOOP_WAIT="${LOOP_WAIT:-10}"
TTL="${TTL:-30}"
RETRY_TIMEOUT="${RETRY_TIMEOUT:-10}"
SYNC_NODE_COUNT="${SYNC_NODE_COUNT:-}"      # empty: MEMBERS-1 (Charmed default "all" == units - 1)
UP_TIMEOUT="${UP_TIMEOUT:-120}"
WAL_SEGSIZE="${WAL_SEGSIZE:-}"              # MB; empty = initdb default 16 (as the charm)
STOP_TIMEOUT="${STOP_TIMEOUT:-45}"
ADDR_MODE="${ADDR_MODE:-auto}"

# resolve symlinks: the unprivileged user must be able to traverse the real path
VENV="$(readlink -f "$VENV" 2>/dev/null || echo "$VENV")"
PATRONI="$VENV/bin/patroni"
PATRONICTL="$VENV/bin/patronictl"
SYNCOBJ_ADMIN="$VENV/bin/syncobj_admin"
RAFT_CONTROLLER="$VENV/bin/patroni_raft_controller"
MARKER=".e2e-cluster"                       # DATA_DIR is only ever rm -rf'ed when it has this
TLS_DIR="$DATA/tls"
KEY_PASS="${KEY_PASS:-tls-key-passphrase}"   # not a substring of any path (argv is checked for it)
REST_SCHEME=http
CURL_TLS=()

log()     { printf '[cluster.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()     { log "ERROR: $*"; exit 1; }
now()     { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
usage()   { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
members() { seq 0 $((NMEMBERS - 1)); }

# resolve_members: the number of members and the witness's port, as `up` remembered them in
# DATA_DIR (a later command's environment cannot change a running cluster's shape), else
# MEMBERS / WITNESS_PORT (at `up`)
resolve_members() {
  if [[ -f $DATA/.members ]]; then NMEMBERS=$(<"$DATA/.members"); else NMEMBERS=${MEMBERS:-3}; fi
  [[ $NMEMBERS =~ ^[1-8]$ ]] || die "MEMBERS must be 1..8 (got '$NMEMBERS')"
  if [[ -f $DATA/.members ]]; then
    WITNESS_PORT=$(cat "$DATA/.witness_port" 2>/dev/null || true)
    WITNESS_IP=$(cat "$DATA/.witness_ip" 2>/dev/null || true)
  else
    WITNESS_PORT=$WITNESS_PORT_SET
    WITNESS_IP=$WITNESS_IP_SET
  fi
  if [[ -n $WITNESS_IP ]]; then
    [[ $WITNESS_IP =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "WITNESS_IP must be a loopback IPv4 address (got '$WITNESS_IP')"
  fi
  if [[ -n $WITNESS_PORT ]]; then
    { [[ $WITNESS_PORT =~ ^[0-9]+$ ]] && ((WITNESS_PORT > 0 && WITNESS_PORT < 65536)); } \
      || die "WITNESS_PORT must be a TCP port (got '$WITNESS_PORT')"
  fi
  [[ -n $SYNC_NODE_COUNT ]] || SYNC_NODE_COUNT=$((NMEMBERS > 1 ? NMEMBERS - 1 : 1))
}
has_witness() { [[ -n $WITNESS_PORT ]]; }

# ------------------------------------------------------------------ addressing
resolve_mode() {
  if [[ -f $DATA/.addr_mode ]]; then MODE=$(<"$DATA/.addr_mode"); return 0; fi
  case $ADDR_MODE in
    multi|single) MODE=$ADDR_MODE ;;
    auto)
      # single only when a bind fails: a probe that is merely slow (python's start on a loaded
      # machine) must not move the cluster onto 127.0.0.1, where a second cluster of the same
      # test (IP_BASE) would collide with it
      local rc=0
      timeout 120 python3 -c '
import socket
import sys
addrs = ["127.0.0.%d" % (int(sys.argv[1]) + i) for i in range(int(sys.argv[2]))]
if sys.argv[3]:
    addrs.append(sys.argv[4] or "127.0.0.%d" % (int(sys.argv[1]) + 9))
for a in addrs:
    s = socket.socket(); s.bind((a, 0)); s.close()' \
        "$IP_BASE" "$NMEMBERS" "$WITNESS_PORT" "$WITNESS_IP" 2>/dev/null || rc=$?
      ((rc != 124)) || die "the address probe (bind 127.0.0.$IP_BASE..) did not end within 120 s"
      if ((rc == 0)); then MODE=multi; else MODE=single; fi ;;
    *) die "ADDR_MODE must be auto, multi or single" ;;
  esac
}
ip_of()     { if [[ $MODE == multi ]]; then echo "127.0.0.$((IP_BASE + $1))"; else echo 127.0.0.1; fi; }
rest_port() { if [[ $MODE == multi ]]; then echo 8008; else echo $((8008 + $1)); fi; }
raft_port() { if [[ $MODE == multi ]]; then echo 2222; else echo $((2222 + $1)); fi; }
pg_port()   { if [[ $MODE == multi ]]; then echo 5432; else echo $((5432 + $1)); fi; }
rest_url()  { echo "$REST_SCHEME://$(ip_of "$1"):$(rest_port "$1")"; }
raft_addr() { echo "$(ip_of "$1"):$(raft_port "$1")"; }
name_of()   { echo "$MEMBER_PREFIX-$1"; }
mdir()      { echo "$DATA/$MEMBER_PREFIX-$1"; }
cfg_of()    { echo "$(mdir "$1")/patroni.yml"; }
pgdata_of() { echo "$(mdir "$1")/pgdata"; }
check_n()   { { [[ ${1:-} =~ ^[0-9]+$ ]] && (($1 < NMEMBERS)); } || die "member index must be 0..$((NMEMBERS - 1)) (got '${1:-}')"; }
# the witness: its own loopback address (IP_BASE+9, past any member's) in multi mode
witness_ip() {
  if [[ $MODE != multi ]]; then echo 127.0.0.1; elif [[ -n $WITNESS_IP ]]; then echo "$WITNESS_IP"; else echo "127.0.0.$((IP_BASE + 9))"; fi
}
witness_addr() { echo "$(witness_ip):$WITNESS_PORT"; }
wdir()         { echo "$DATA/witness"; }
wcfg()         { echo "$(wdir)/witness.yml"; }
check_witness() { has_witness || die "this cluster has no witness (made without WITNESS_PORT)"; }

# ------------------------------------------------------------------ TLS
# resolve_tls: TLS on when DATA_DIR says so (set at `up` from TLS=1)
resolve_tls() {
  if [[ -f $DATA/.tls ]]; then
    REST_SCHEME=https
    CURL_TLS=(--cacert "$TLS_DIR/ca.pem" --cert "$TLS_DIR/client.pem" --key "$TLS_DIR/client-key.pem")
  fi
}
# tls_leaf NAME CN EKU [IP]: a key and a certificate signed by the test CA
tls_leaf() {
  local name=$1 cn=$2 eku=$3 ip=${4:-} ext
  ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$eku"
  [[ -n $ip ]] && ext+=$'\n'"subjectAltName=IP:$ip,DNS:localhost"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$TLS_DIR/$name-key.pem" -out "$TLS_DIR/$name.csr" -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$TLS_DIR/$name.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca-key.pem" \
    -CAcreateserial -days 7 -sha256 -out "$TLS_DIR/$name.pem" -extfile <(printf '%s\n' "$ext") 2>/dev/null
  rm -f "$TLS_DIR/$name.csr"
}
gen_tls() {
  local n
  [[ -f $TLS_DIR/ca.pem ]] && return 0
  command -v openssl >/dev/null || die "openssl required for TLS=1"
  mkdir -p "$TLS_DIR"
  ( umask 077
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
      -keyout "$TLS_DIR/ca-key.pem" -out "$TLS_DIR/ca.pem" -subj "/CN=e2e test CA" 2>/dev/null
    for n in $(members); do
      tls_leaf "member-$n" "$(name_of "$n")" serverAuth,clientAuth "$(ip_of "$n")"
    done
    tls_leaf client patronictl clientAuth
    tls_leaf exporter-client patroni-raft-exporter clientAuth
    tls_leaf exporter-server patroni-raft-exporter serverAuth 127.0.0.1
    printf '%s\n' "$KEY_PASS" >"$TLS_DIR/exporter-key-pass"
    openssl pkcs8 -topk8 -v2 aes-256-cbc -in "$TLS_DIR/exporter-client-key.pem" \
      -out "$TLS_DIR/exporter-client-key.enc.pem" -passout "file:$TLS_DIR/exporter-key-pass"
    mv "$TLS_DIR/exporter-client-key.enc.pem" "$TLS_DIR/exporter-client-key.pem"
  ) || die "generating the test certificates failed"
  # members (run as $OS_USER) read their own certificates and keys; the CA key and the
  # exporter's files stay private to us
  chmod 755 "$TLS_DIR"
  chmod 644 "$TLS_DIR"/*.pem
  chmod 600 "$TLS_DIR"/*-key.pem "$TLS_DIR"/exporter-key-pass
  own "$TLS_DIR"
  log "TLS: test CA and certificates in $TLS_DIR"
}
# the REST API's TLS settings (and patronictl's client certificate) for member N
tls_config() {
  [[ -f $DATA/.tls ]] || return 0
  cat <<EOF
  certfile: $TLS_DIR/member-$1.pem
  keyfile: $TLS_DIR/member-$1-key.pem
  cafile: $TLS_DIR/ca.pem
$(verify=$(<"$DATA/.tls"); [[ ${verify:-required} == none ]] || echo "  verify_client: ${verify:-required}")

ctl:
  certfile: $TLS_DIR/client.pem
  keyfile: $TLS_DIR/client-key.pem
  cacert: $TLS_DIR/ca.pem
EOF
}

# ------------------------------------------------------------------ processes
# alive PID: exists and is not a zombie (killed daemons are reparented to init, which may
# reap them late, so /proc/PID alone is not enough)
alive() {
  local st
  [[ -r /proc/$1/stat ]] || return 1
  st=$(sed -E 's/.*\) ([A-Za-z]) .*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st && $st != Z && $st != X ]]
}
# pid_matches PID SUBSTRING: alive and its cmdline contains SUBSTRING
pid_matches() {
  [[ $1 =~ ^[0-9]+$ ]] && alive "$1" || return 1
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}
wait_gone() { # wait_gone PID SECONDS
  local end=$(($(date +%s) + $2))
  while alive "$1" && (($(date +%s) < end)); do sleep 0.1; done
  ! alive "$1"
}
patroni_pid() { # patroni_pid N -> PID of our patroni for member N
  local f pid
  f="$(mdir "$1")/patroni.pid"
  [[ -f $f ]] || return 1
  pid=$(head -n1 "$f" 2>/dev/null) || return 1
  pid_matches "$pid" "$(cfg_of "$1")" && pid_matches "$pid" patroni || return 1
  echo "$pid"
}
witness_pid() { # witness_pid -> PID of our patroni_raft_controller
  local f pid
  f="$(wdir)/witness.pid"
  [[ -f $f ]] || return 1
  pid=$(head -n1 "$f" 2>/dev/null) || return 1
  pid_matches "$pid" "$(wcfg)" && pid_matches "$pid" patroni_raft_controller || return 1
  echo "$pid"
}
postmaster_pid() { # postmaster_pid N -> PID of member N's postmaster
  local f pid
  f="$(pgdata_of "$1")/postmaster.pid"
  [[ -f $f ]] || return 1
  pid=$(head -n1 "$f" 2>/dev/null) || return 1
  pid_matches "$pid" "$(pgdata_of "$1")" || return 1
  echo "$pid"
}
# leftover_pids: any live process whose cwd is inside DATA (patroni runs in its member dir,
# postgres and all its children in pgdata). Used to verify `down`; never signalled.
leftover_pids() {
  local p cwd
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    [[ $cwd == "$DATA" || $cwd == "$DATA"/* ]] || continue
    alive "${p#/proc/}" && echo "${p#/proc/}"
  done
  return 0
}

# ------------------------------------------------------------------ prerequisites
RUN_AS=()
OS_HOME=
setup_user() {
  if ((EUID == 0)); then
    if ! id "$OS_USER" >/dev/null 2>&1; then
      # under a lock, and asked again inside it: clusters that start at once (each test in a
      # network namespace of its own) would otherwise all add the user, and all but the first
      # useradd fail ("user already exists")
      ( flock -w 60 8 || die "no lock on /tmp/patroni-raft-exporter-useradd.lock within 60 s"
        id "$OS_USER" >/dev/null 2>&1 && exit 0
        log "creating unprivileged user $OS_USER (postgres refuses to run as root)"
        useradd -m -s /bin/bash "$OS_USER" || die "useradd $OS_USER failed"
      ) 8>/tmp/patroni-raft-exporter-useradd.lock || exit 1
    fi
    command -v setpriv >/dev/null || die "setpriv (util-linux) required"
    # setpriv execs in place (runuser forks a watching parent), so PIDs stay exact
    RUN_AS=(setpriv --reuid="$(id -u "$OS_USER")" --regid="$(id -g "$OS_USER")" --init-groups)
    OS_HOME=$(getent passwd "$OS_USER" | cut -d: -f6)
  else
    OS_USER=$(id -un); OS_HOME=$HOME; RUN_AS=()
  fi
}
check_prereqs() {
  local c
  [[ -x $PATRONI && -x $PATRONICTL && -x $SYNCOBJ_ADMIN && -x $RAFT_CONTROLLER ]] \
    || die "patroni not found in $VENV: run scripts/install-deps.sh --patroni $PATRONI_VERSION"
  [[ -x $PGBIN/postgres && -x $PGBIN/initdb ]] || die "postgres binaries not found in $PGBIN (scripts/install-deps.sh)"
  for c in curl jq ss setsid timeout; do command -v "$c" >/dev/null || die "$c required (scripts/install-deps.sh)"; done
  setup_user
  if ((EUID == 0)); then
    # a venv built from a pyenv python under /root (0700) is not executable by $OS_USER: that
    # fails at once. Bounded for a hang only: patroni's imports take a second of CPU, and
    # far longer when other clusters start on a loaded machine.
    local rc=0
    timeout 300 "${RUN_AS[@]}" env -i "$PATRONI" --version >/dev/null 2>&1 || rc=$?
    ((rc != 124)) || die "$OS_USER: $PATRONI --version did not end within 300 s"
    ((rc == 0)) || die "$OS_USER cannot run $PATRONI (interpreter $(readlink -f "$VENV/bin/python3")); build the venv with /usr/bin/python3 in a directory other users can traverse"
    [[ -d $DATA ]] && ! timeout 10 "${RUN_AS[@]}" test -x "$DATA" \
      && die "$OS_USER cannot traverse $DATA: use a DATA_DIR whose parents are world-executable"
  fi
  return 0
}
own() { if ((EUID == 0)); then chown -R "$OS_USER:" "$@"; fi; }

# ------------------------------------------------------------------ config
write_config() {
  local n=$1 d ip partners="" j var="MEMBER_RAFT_PARTNERS_$1" list=()
  d=$(mdir "$n"); ip=$(ip_of "$n")
  if [[ -n ${!var:-} ]]; then
    IFS=, read -ra list <<<"${!var}"
    for j in "${list[@]}"; do partners+="  - '$j'"$'\n'; done
  else
    for j in $(members); do
      ((j == n)) || partners+="  - '$(raft_addr "$j")'"$'\n'
    done
    # stereo mode: the charm adds the watcher's ip:port to every member's partner_addrs
    if has_witness; then partners+="  - '$(witness_addr)'"$'\n'; fi
  fi
  mkdir -p "$d/raft" "$d/sock"
  chmod 700 "$d/sock"
  {
    cat <<EOF
# generated by tests/e2e/cluster.sh -- $(name_of "$n")
scope: $SCOPE
namespace: $NAMESPACE
name: $(name_of "$n")

log:
  level: INFO
  dateformat: "%Y-%m-%d %H:%M:%S %Z"
  format: "%(asctime)s [%(process)d]: %(levelname)s: %(message)s "

restapi:
  listen: '$ip:$(rest_port "$n")'
  connect_address: '$ip:$(rest_port "$n")'
  authentication:
    username: $REST_USER
    password: $REST_PASS
$(tls_config "$n")

$(if [[ $DCS == etcd ]]; then printf 'etcd3:\n  hosts: %s\n%s\n' "'$ETCD_HOSTS'" "$ETCD3_YAML"; else cat <<RAFT
raft:
  data_dir: $d/raft
  self_addr: '$(raft_addr "$n")'
  # pysyncobj binds 0.0.0.0:<port> unless bind_addr is set: with 3 members on one host only
  # the first could bind and the others would hang silently in Raft init.
  bind_addr: '$(raft_addr "$n")'
  password: $RAFT_PASS
  partner_addrs:
$partners
RAFT
fi)

EOF
    # only the bootstrap member may initdb: deterministic first leader postgresql-0
    if ((n == BOOTSTRAP_MEMBER)); then
      cat <<EOF
bootstrap:
  dcs:
    ttl: $TTL
    loop_wait: $LOOP_WAIT
    retry_timeout: $RETRY_TIMEOUT
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    synchronous_node_count: $SYNC_NODE_COUNT
$(standby_config)
    postgresql:
      use_pg_rewind: true
      remove_data_directory_on_rewind_failure: false
      remove_data_directory_on_diverged_timelines: false
      parameters:
        archive_mode: 'on'
        archive_command: /bin/true
        wal_level: logical
        max_connections: 100
        shared_buffers: 32MB
        fsync: true
        full_page_writes: true
        log_checkpoints: 'on'
        log_replication_commands: 'on'
        logging_collector: 'on'
        log_directory: log
        log_filename: 'postgresql-%a.log'
  initdb:
  - encoding: UTF8
  - data-checksums
  - locale: C.UTF-8
$([[ -n $WAL_SEGSIZE ]] && echo "  - wal-segsize: '$WAL_SEGSIZE'")

EOF
    fi
    cat <<EOF
postgresql:
  listen: '$ip:$(pg_port "$n")'
  connect_address: '$ip:$(pg_port "$n")'
  bin_dir: $PGBIN
  data_dir: $(pgdata_of "$n")
  pgpass: $d/pgpass
  parameters:
    unix_socket_directories: '$d/sock'
    archive_command: /bin/true
  pg_hba:
  - local all all trust
  - host replication $REPL_USER 127.0.0.0/8 scram-sha-256
  - host all all 127.0.0.0/8 scram-sha-256
  authentication:
    superuser:
      username: $SU_USER
      password: $SU_PASS
    replication:
      username: $REPL_USER
      password: $REPL_PASS
    rewind:
      username: $REWIND_USER
      password: $REWIND_PASS
use_unix_socket: true
EOF
  } >"$(cfg_of "$n")"
  chmod 600 "$(cfg_of "$n")"
  own "$d"
}

# write_witness_config: the witness's YAML as the charm's watcher has it: only `raft:` (and a
# log level), partner_addrs = every member
write_witness_config() {
  local d j partners=""
  d=$(wdir)
  for j in $(members); do partners+="  - '$(raft_addr "$j")'"$'\n'; done
  mkdir -p "$d/raft"
  cat >"$(wcfg)" <<EOF
# generated by tests/e2e/cluster.sh -- the Raft-only witness (patroni_raft_controller)
log:
  level: INFO
  dateformat: "%Y-%m-%d %H:%M:%S %Z"
  format: "%(asctime)s [%(process)d]: %(levelname)s: %(message)s "

raft:
  data_dir: $d/raft
  self_addr: '$(witness_addr)'
  # as the members: without bind_addr pysyncobj binds 0.0.0.0:<port>
  bind_addr: '$(witness_addr)'
  password: $RAFT_PASS
  partner_addrs:
$partners
EOF
  chmod 600 "$(wcfg)"
  own "$d"
}

# the bootstrap DCS's standby_cluster section when STANDBY_OF is set (Patroni ignores
# synchronous_mode in a standby cluster); the standby leader streams from HOST:PORT with this
# cluster's replication user, which the source has too (same credentials)
standby_config() {
  [[ -n $STANDBY_OF ]] || return 0
  cat <<EOF
    standby_cluster:
      host: ${STANDBY_OF%:*}
      port: ${STANDBY_OF##*:}
      create_replica_methods:
      - basebackup
$([[ -n $STANDBY_APPLY_DELAY ]] && echo "      recovery_min_apply_delay: $STANDBY_APPLY_DELAY")
EOF
}

# ------------------------------------------------------------------ start / stop
# faketime_env N -> FAKE_ENV: the libfaketime variables member N runs with (MEMBER_FAKETIME_N,
# remembered in its member dir; set but empty: forgotten)
FAKE_ENV=()
faketime_env() {
  local var="MEMBER_FAKETIME_$1" f lib
  f="$(mdir "$1")/.faketime"
  FAKE_ENV=()
  if [[ -n ${!var+x} ]]; then
    if [[ -n ${!var} ]]; then printf '%s\n' "${!var}" >"$f"; else rm -f "$f"; fi
  fi
  [[ -s $f ]] || return 0
  lib=$(compgen -G '/usr/lib/*/faketime/libfaketime.so.1' | head -n1)
  [[ -n $lib ]] || { log "libfaketime.so.1 not found: scripts/install-deps.sh installs faketime"; return 1; }
  # libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 shifts the absolute CLOCK_MONOTONIC
  # deadline of clock_nanosleep(TIMER_ABSTIME) like a wall-clock one (EINVAL), and Python 3.11's
  # time.sleep() is exactly that call (Patroni then dies at its first sleep): a sitecustomize on
  # PYTHONPATH makes time.sleep() wait with select()'s relative timeout instead
  mkdir -p "$(mdir "$1")/faketime"
  cat >"$(mdir "$1")/faketime/sitecustomize.py" <<'PY'
import select
import time


def _sleep(secs):
    if secs < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], secs)


time.sleep = _sleep
PY
  FAKE_ENV=(LD_PRELOAD="$lib" FAKETIME="$(<"$f")" FAKETIME_DONT_FAKE_MONOTONIC=1 PYTHONPATH="$(mdir "$1")/faketime")
  log "$(name_of "$1") runs under libfaketime, FAKETIME=$(<"$f")"
}
start_member() {
  local n=$1 d pid pidfile logf run_as
  d=$(mdir "$n"); pidfile="$d/patroni.pid"; logf="$d/patroni.log"
  if pid=$(patroni_pid "$n"); then log "$(name_of "$n") already running (patroni pid $pid)"; return 0; fi
  local partners_var="MEMBER_RAFT_PARTNERS_$n"
  if [[ ! -f $(cfg_of "$n") || -n ${!partners_var+x} ]]; then
    write_config "$n"
    [[ -n ${!partners_var:-} ]] && log "$(name_of "$n"): raft.partner_addrs ${!partners_var}"
  fi
  rm -f "$pidfile"
  own "$d"
  run_as=("${RUN_AS[@]}")
  if ((EUID == 0)) && [[ -f $DATA/.member_gid_base ]]; then
    # a primary group of its own per member: its sockets carry that gid (nft `meta skgid`)
    run_as=(setpriv --reuid="$(id -u "$OS_USER")" --regid="$(($(<"$DATA/.member_gid_base") + n))" --init-groups)
  fi
  faketime_env "$n" || return 1
  # setsid: own session (survives us, escapes a caller's `timeout`); env -i: no PATRONI_*
  # variables of the caller leak into the configuration; the inner sh writes its own PID
  # and execs patroni, so the PID file is exact.
  # shellcheck disable=SC2016  # $$ and $0..$2 are the inner sh's
  (cd "$d" && exec setsid "${run_as[@]}" env -i HOME="$OS_HOME" USER="$OS_USER" LOGNAME="$OS_USER" \
    LANG=C.UTF-8 PATH="$VENV/bin:$PGBIN:/usr/local/bin:/usr/bin:/bin" "${FAKE_ENV[@]}" \
    /bin/sh -c 'echo $$ > "$0"; exec "$1" "$2"' "$pidfile" "$PATRONI" "$(cfg_of "$n")" \
    </dev/null >>"$logf" 2>&1) &
  for _ in $(seq 1 50); do
    if pid=$(patroni_pid "$n"); then log "started $(name_of "$n") patroni pid $pid (log $logf)"; return 0; fi
    sleep 0.1
  done
  log "WARNING: $(name_of "$n") did not come up; last log lines:"
  tail -n 20 "$logf" >&2 || true
  return 1
}

start_witness() {
  local d pid pidfile logf
  d=$(wdir); pidfile="$d/witness.pid"; logf="$d/witness.log"
  if pid=$(witness_pid); then log "witness already running (pid $pid)"; return 0; fi
  [[ -f $(wcfg) ]] || write_witness_config
  rm -f "$pidfile"
  own "$d"
  # as a member: setsid, env -i, the unprivileged user, an exact PID file
  # shellcheck disable=SC2016  # $$ and $0..$2 are the inner sh's
  (cd "$d" && exec setsid "${RUN_AS[@]}" env -i HOME="$OS_HOME" USER="$OS_USER" LOGNAME="$OS_USER" \
    LANG=C.UTF-8 PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" \
    /bin/sh -c 'echo $$ > "$0"; exec "$1" "$2"' "$pidfile" "$RAFT_CONTROLLER" "$(wcfg)" \
    </dev/null >>"$logf" 2>&1) &
  for _ in $(seq 1 50); do
    if pid=$(witness_pid); then log "started the witness $(witness_addr), pid $pid (log $logf)"; return 0; fi
    sleep 0.1
  done
  log "WARNING: the witness did not come up; last log lines:"
  tail -n 20 "$logf" >&2 || true
  return 1
}
# stop_witness MODE   term: SIGTERM, SIGKILL after STOP_TIMEOUT; kill: SIGKILL
stop_witness() {
  local pid
  if ! pid=$(witness_pid); then log "witness not running"; return 0; fi
  if [[ $1 == term ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    if wait_gone "$pid" "$STOP_TIMEOUT"; then log "witness $pid stopped (SIGTERM)"; return 0; fi
    log "witness $pid still alive after ${STOP_TIMEOUT}s -> SIGKILL"
  fi
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid" 5 || log "WARNING: witness $pid survived SIGKILL"
  [[ $1 == term ]] || log "witness $pid killed (SIGKILL)"
}
# wait_witness_quorum: bounded wait until the witness's own Raft status says has_quorum
wait_witness_quorum() {
  local t0 deadline out
  t0=$(now); deadline=$(($(date +%s) + UP_TIMEOUT))
  while (($(date +%s) < deadline)); do
    if ! witness_pid >/dev/null; then
      log "the witness is not running; last log lines:"; tail -n 20 "$(wdir)/witness.log" >&2 || true
      return 1
    fi
    if out=$(raft_status "$(witness_addr)" 2>/dev/null) && grep -q '^has_quorum: True' <<<"$out"; then
      log "witness $(witness_addr) has_quorum after $(elapsed "$t0")s ($(grep -c '^partner_node_status_server_' <<<"$out") partners)"
      return 0
    fi
    sleep 1
  done
  log "TIMEOUT after ${UP_TIMEOUT}s waiting for the witness's has_quorum"
  return 1
}

# stop_member N MODE   term: SIGTERM patroni (it stops postgres), SIGKILL after STOP_TIMEOUT
#                      kill: SIGKILL patroni + immediate shutdown (SIGQUIT) of its postmaster
#                      patroni-only: SIGKILL patroni, postgres keeps running
stop_member() {
  local n=$1 mode=$2 pid ppid
  if pid=$(patroni_pid "$n"); then
    if [[ $mode == term ]]; then
      kill -TERM "$pid" 2>/dev/null || true
      if wait_gone "$pid" "$STOP_TIMEOUT"; then
        log "$(name_of "$n") patroni $pid stopped (SIGTERM)"
      else
        log "$(name_of "$n") patroni $pid still alive after ${STOP_TIMEOUT}s -> SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" 5 || log "WARNING: patroni $pid survived SIGKILL"
      fi
    else
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || log "WARNING: patroni $pid survived SIGKILL"
      log "$(name_of "$n") patroni $pid killed (SIGKILL)"
    fi
  else
    log "$(name_of "$n") patroni not running"
  fi
  [[ $mode == patroni-only ]] && return 0
  if ppid=$(postmaster_pid "$n"); then
    # left behind by a SIGKILLed patroni (or one that failed to stop it): immediate shutdown
    kill -QUIT "$ppid" 2>/dev/null || true
    if wait_gone "$ppid" 15; then
      log "$(name_of "$n") postmaster $ppid stopped (SIGQUIT, immediate)"
    else
      kill -KILL "$ppid" 2>/dev/null || true
      wait_gone "$ppid" 5 || true
      log "$(name_of "$n") postmaster $ppid SIGKILLed"
    fi
  fi
  return 0
}

# ------------------------------------------------------------------ health
cluster_json() { # prints "N<TAB>json" of GET /cluster from the first member that answers
  local n out
  for n in $(members); do
    if out=$(curl -sf -m 3 "${CURL_TLS[@]}" "$(rest_url "$n")/cluster" 2>/dev/null) && [[ -n $out ]]; then
      printf '%s\t%s\n' "$n" "$out"
      return 0
    fi
  done
  return 1
}
summary() { jq -c '[.members[] | {name, role, state, timeline, lag}]'; }

# members_agree JSON WANT_SYNC: every member's own GET /patroni confirms the (possibly stale:
# keys of a dead member live until ttl) GET /cluster view: the leader is primary/running
# ("master" on 3.x), the others stream (and are sync_standby with WANT_SYNC=1)
members_agree() {
  local js=$1 want_sync=$2 n role mine
  for n in $(members); do
    role=$(jq -r --arg m "$(name_of "$n")" '.members[] | select(.name == $m) | .role' <<<"$js")
    mine=$(curl -sf -m 3 "${CURL_TLS[@]}" "$(rest_url "$n")/patroni" 2>/dev/null) || return 1
    if [[ $role == leader ]]; then
      jq -e '(.role == "primary" or .role == "master") and .state == "running"' <<<"$mine" >/dev/null || return 1
    elif [[ $role == standby_leader ]]; then
      jq -e '.role == "standby_leader" and .state == "running"' <<<"$mine" >/dev/null || return 1
    else
      jq -e --argjson s "$want_sync" '.state == "running" and .replication_state == "streaming"
        and ($s == 0 or .sync_standby == true)' <<<"$mine" >/dev/null || return 1
    fi
  done
}

# wait_healthy [--sync]: 1 leader running + NMEMBERS-1 streaming (+ all sync_standby)
wait_healthy() {
  local want_sync=0 t0 deadline line js leaders streaming syncs n
  [[ ${1:-} == --sync ]] && want_sync=1
  t0=$(now); deadline=$(($(date +%s) + UP_TIMEOUT))
  while (($(date +%s) < deadline)); do
    # a member whose patroni is not running can never become healthy: fail fast
    for n in $(members); do
      if ! patroni_pid "$n" >/dev/null; then
        log "$(name_of "$n"): patroni is not running (start it, or see its log below)"
        tail -n 20 "$(mdir "$n")/patroni.log" >&2 2>/dev/null || true
        return 1
      fi
    done
    if line=$(cluster_json); then
      js=${line#*$'\t'}
      read -r leaders streaming syncs < <(jq -r '[
          ([.members[] | select((.role == "leader" and .state == "running")
            or (.role == "standby_leader" and (.state == "running" or .state == "streaming")))] | length),
          ([.members[] | select(.role != "leader" and .role != "standby_leader" and .state == "streaming")] | length),
          ([.members[] | select(.role == "sync_standby" and .state == "streaming")] | length)
        ] | @tsv' <<<"$js" 2>/dev/null || echo "0 0 0")
      if ((leaders == 1 && streaming == NMEMBERS - 1)) && ((want_sync == 0 || syncs == NMEMBERS - 1)) \
        && members_agree "$js" "$want_sync"; then
        log "cluster healthy$( ((want_sync)) && echo ' (sync)') after $(elapsed "$t0")s: $(summary <<<"$js")"
        return 0
      fi
    fi
    sleep 1
  done
  log "TIMEOUT after ${UP_TIMEOUT}s waiting for a healthy cluster$( ((want_sync)) && echo ' (sync)')"
  if line=$(cluster_json); then summary <<<"${line#*$'\t'}" >&2; fi
  return 1
}

# ports_busy: our REST/Raft/PG addresses already bound by something (members, and the
# witness, not running)
ports_busy() {
  local n p busy="" addrs
  for n in $(members); do
    patroni_pid "$n" >/dev/null && continue
    addrs+=" $(ip_of "$n"):$(rest_port "$n") $(raft_addr "$n") $(ip_of "$n"):$(pg_port "$n")"
  done
  if has_witness && ! witness_pid >/dev/null; then addrs+=" $(witness_addr)"; fi
  for p in $addrs; do
    if ss -Hltn "sport = :${p##*:}" 2>/dev/null | awk '{print $4}' \
      | grep -qE "^(${p%:*}|0\.0\.0\.0|\*|\[::\]):${p##*:}$"; then busy+=" $p"; fi
  done
  echo "$busy"
}

# ------------------------------------------------------------------ commands
cmd_up() {
  local t0 n busy
  t0=$(now)
  check_prereqs
  if [[ -f $DATA/.venv && $(<"$DATA/.venv") != "$VENV" ]]; then
    die "$DATA was created with $(<"$DATA/.venv"), not $VENV: run '$0 down' first"
  fi
  [[ $DCS == raft || ( $DCS == etcd && -n $ETCD_HOSTS && -z $WITNESS_PORT ) ]] || die "DCS=etcd needs ETCD_HOSTS and no witness"
  if [[ -f $DATA/.members ]]; then
    [[ -z ${MEMBERS:-} || $MEMBERS == "$NMEMBERS" ]] \
      || die "$DATA was created with $NMEMBERS members, not $MEMBERS: run '$0 down' first"
    [[ -z $WITNESS_PORT_SET || $WITNESS_PORT_SET == "$WITNESS_PORT" ]] \
      || die "$DATA was created with WITNESS_PORT='$WITNESS_PORT', not $WITNESS_PORT_SET: run '$0 down' first"
    [[ -z $WITNESS_IP_SET || $WITNESS_IP_SET == "$WITNESS_IP" ]] \
      || die "$DATA was created with WITNESS_IP='$WITNESS_IP', not $WITNESS_IP_SET: run '$0 down' first"
  fi
  mkdir -p "$DATA"
  chmod 755 "$DATA"
  touch "$DATA/$MARKER"
  echo "$VENV" >"$DATA/.venv"
  resolve_mode
  echo "$MODE" >"$DATA/.addr_mode"
  if has_witness; then
    for n in $(members); do
      [[ $(witness_addr) != "$(raft_addr "$n")" ]] || die "WITNESS_PORT $WITNESS_PORT is $(name_of "$n")'s Raft port"
    done
  fi
  echo "$NMEMBERS" >"$DATA/.members"
  if has_witness; then echo "$WITNESS_PORT" >"$DATA/.witness_port"; fi
  if has_witness && [[ -n $WITNESS_IP ]]; then echo "$WITNESS_IP" >"$DATA/.witness_ip"; fi
  if [[ ${TLS:-0} == 1 ]]; then
    [[ ${TLS_VERIFY_CLIENT:-required} =~ ^(required|optional|none)$ ]] \
      || die "TLS_VERIFY_CLIENT must be required, optional or none (got '$TLS_VERIFY_CLIENT')"
    echo "${TLS_VERIFY_CLIENT:-required}" >"$DATA/.tls"
    gen_tls
  fi
  resolve_tls
  log "patroni $("$PATRONI" --version | awk '{print $2}') from $VENV; data $DATA; address mode $MODE;" \
    "$NMEMBERS members$(has_witness && echo ", witness $(witness_addr)")"
  busy=$(ports_busy)
  [[ -z $busy ]] || die "ports already in use:$busy"
  own "$DATA"
  for n in $(members); do [[ -f $(cfg_of "$n") ]] || write_config "$n"; done
  if has_witness; then [[ -f $(wcfg) ]] || write_witness_config; fi
  if [[ -n ${MEMBER_GID_BASE:-} ]]; then
    { [[ $MEMBER_GID_BASE =~ ^[0-9]+$ ]] && ((EUID == 0)); } || die "MEMBER_GID_BASE needs a number and root"
    echo "$MEMBER_GID_BASE" >"$DATA/.member_gid_base"
  fi
  # the witness first: with two members, the bootstrap member and the witness are a quorum
  if has_witness; then start_witness || die "failed to start the witness"; fi
  start_member "$BOOTSTRAP_MEMBER" || die "failed to start the bootstrap member"
  for n in $(members); do
    ((n == BOOTSTRAP_MEMBER)) || start_member "$n" || die "failed to start member $n"
  done
  if wait_healthy "$@" && { ! has_witness || wait_witness_quorum; }; then
    log "up finished in $(elapsed "$t0")s"
  else
    log "up FAILED after $(elapsed "$t0")s; log tails:"
    for n in $(members); do echo "--- $(name_of "$n")" >&2; tail -n 15 "$(mdir "$n")/patroni.log" >&2 || true; done
    if has_witness; then echo "--- witness" >&2; tail -n 15 "$(wdir)/witness.log" >&2 || true; fi
    return 1
  fi
}

cmd_down() {
  local keep=0 mode=term n t0 left busy a
  for a in "$@"; do
    case $a in
      --keep) keep=1 ;;
      --fast) mode="kill" ;;
      *) die "down: unknown option $a" ;;
    esac
  done
  [[ -d $DATA ]] || { log "nothing to do ($DATA absent)"; return 0; }
  [[ -f $DATA/$MARKER ]] || die "$DATA has no $MARKER marker: not a cluster.sh data dir, refusing"
  t0=$(now)
  resolve_mode
  for n in $(members); do stop_member "$n" "$mode" & done
  wait
  for n in $(members); do
    if patroni_pid "$n" >/dev/null || postmaster_pid "$n" >/dev/null; then stop_member "$n" kill; fi
  done
  # the witness last: a member that stops gracefully still writes to the DCS (its quorum)
  if has_witness; then stop_witness "$mode"; fi
  # postgres children exit shortly after their postmaster; give them a bounded moment
  for _ in $(seq 1 50); do left=$(leftover_pids); [[ -z $left ]] && break; sleep 0.1; done
  if [[ -n $left ]]; then
    log "ERROR: processes still running in $DATA, not removing it:"
    ps -o pid,user,stat,args -p "$(tr '\n' ',' <<<"$left" | sed 's/,$//')" >&2 || true
    return 1
  fi
  busy=$(ports_busy)
  [[ -z $busy ]] || log "WARNING: ports still bound after down:$busy"
  if ((keep)); then
    log "down in $(elapsed "$t0")s; kept $DATA"
  else
    rm -rf "$DATA"
    log "down in $(elapsed "$t0")s; removed $DATA"
  fi
}

cmd_status() {
  local n line
  resolve_mode
  if [[ -n ${1:-} ]]; then
    check_n "$1"
    curl -sf -m 5 "${CURL_TLS[@]}" "$(rest_url "$1")/cluster" | jq . || { log "$(name_of "$1") did not answer"; return 1; }
    return 0
  fi
  for n in $(members); do
    printf '%s patroni=%s postmaster=%s rest=%s raft=%s\n' "$(name_of "$n")" "$(patroni_pid "$n" || echo -)" \
      "$(postmaster_pid "$n" || echo -)" "$(rest_url "$n")" "$(raft_addr "$n")" >&2
  done
  if has_witness; then printf 'witness pid=%s raft=%s\n' "$(witness_pid || echo -)" "$(witness_addr)" >&2; fi
  if line=$(cluster_json); then
    log "GET /cluster answered by $(name_of "${line%%$'\t'*}"): $(summary <<<"${line#*$'\t'}")"
    jq . <<<"${line#*$'\t'}"
  else
    log "no member answered GET /cluster"
    return 1
  fi
}

cmd_pids() {
  local n
  resolve_mode
  for n in $(members); do
    echo "$(name_of "$n") patroni=$(patroni_pid "$n" || echo -) postmaster=$(postmaster_pid "$n" || echo -)"
  done
  if has_witness; then echo "witness pid=$(witness_pid || echo -)"; fi
}

# raft_status HOST:PORT: syncobj_admin -status of that node on stdout; rc 1 if it gave none
raft_status() {
  local out rc=0
  [[ -x $SYNCOBJ_ADMIN ]] || die "$SYNCOBJ_ADMIN missing"
  # syncobj_admin exits 0 even on failure ("connection lost": dead node, wrong password)
  # and hangs (900 s) on a port that is not Raft: bound it and parse the output.
  out=$(timeout 20 "$SYNCOBJ_ADMIN" -conn "$1" -pass "$RAFT_PASS" -status 2>&1) || rc=$?
  printf '%s\n' "$out"
  ((rc == 0)) || { log "syncobj_admin rc=$rc (124 = timed out)"; return "$rc"; }
  grep -q '^has_quorum:' <<<"$out" || { log "no Raft status from $1"; return 1; }
}
cmd_raft() {
  resolve_mode
  if [[ ${1:-} == w ]]; then check_witness; raft_status "$(witness_addr)"; return; fi
  check_n "${1:-}"
  raft_status "$(raft_addr "$1")"
}

cmd_ctl() {
  local n cfg=""
  resolve_mode
  for n in $(members); do [[ -f $(cfg_of "$n") ]] && { cfg=$(cfg_of "$n"); break; }; done
  [[ -n $cfg ]] || die "no config found; run up first"
  # patronictl waits forever for a Raft leader without quorum: always bounded
  timeout 60 "$PATRONICTL" -c "$cfg" "$@"
}

cmd_psql() {
  local n
  check_n "${1:-}"
  n=$1; shift
  resolve_mode
  setup_user
  timeout 30 "${RUN_AS[@]}" env PGPASSWORD="$SU_PASS" "$PGBIN/psql" -h "$(mdir "$n")/sock" \
    -p "$(pg_port "$n")" -U "$SU_USER" -d postgres "$@"
}

# kv KEY VALUE...: shell-evaluable KEY='VALUE' lines
kv() { while (($# >= 2)); do printf "%s='%s'\n" "$1" "${2//\'/\'\\\'\'}"; shift 2; done; }
cmd_env() {
  local n
  resolve_mode
  kv PATRONI_VERSION "$PATRONI_VERSION" VENV "$VENV" DATA_DIR "$DATA" SCOPE "$SCOPE" \
    NAMESPACE "$NAMESPACE" ADDR_MODE "$MODE" REST_USER "$REST_USER" REST_PASS "$REST_PASS" \
    RAFT_PASS "$RAFT_PASS" REST_SCHEME "$REST_SCHEME" \
    REST_URLS "$(for n in $(members); do rest_url "$n"; done | paste -sd,)" \
    RAFT_ADDRS "$(for n in $(members); do raft_addr "$n"; done | paste -sd,)" MEMBERS "$NMEMBERS"
  if has_witness; then
    kv WITNESS_RAFT "$(witness_addr)" WITNESS_CONFIG "$(wcfg)" WITNESS_LOG "$(wdir)/witness.log"
  fi
  for n in $(members); do
    kv "MEMBER${n}_NAME" "$(name_of "$n")" "MEMBER${n}_REST" "$(rest_url "$n")" \
      "MEMBER${n}_RAFT" "$(raft_addr "$n")" "MEMBER${n}_PG" "$(ip_of "$n"):$(pg_port "$n")" \
      "MEMBER${n}_CONFIG" "$(cfg_of "$n")" "MEMBER${n}_LOG" "$(mdir "$n")/patroni.log"
  done
  if [[ -f $DATA/.tls ]]; then
    kv TLS_DIR "$TLS_DIR" TLS_CA "$TLS_DIR/ca.pem" \
      TLS_CLIENT_CERT "$TLS_DIR/client.pem" TLS_CLIENT_KEY "$TLS_DIR/client-key.pem" \
      EXPORTER_CLIENT_CERT "$TLS_DIR/exporter-client.pem" EXPORTER_CLIENT_KEY "$TLS_DIR/exporter-client-key.pem" \
      EXPORTER_KEY_PASS_FILE "$TLS_DIR/exporter-key-pass" KEY_PASS "$(cat "$TLS_DIR/exporter-key-pass")" \
      EXPORTER_SERVER_CERT "$TLS_DIR/exporter-server.pem" EXPORTER_SERVER_KEY "$TLS_DIR/exporter-server-key.pem"
  fi
}

main() {
  local cmd=${1:-help}
  shift || true
  resolve_tls
  resolve_members
  case $cmd in
    up)     cmd_up "$@" ;;
    down)   cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    wait)   resolve_mode; wait_healthy "$@" ;;
    kill)   check_n "${1:-}"; resolve_mode
            if [[ ${2:-} == --patroni-only ]]; then stop_member "$1" patroni-only; else stop_member "$1" kill; fi ;;
    stop)   check_n "${1:-}"; resolve_mode; stop_member "$1" term ;;
    start)  check_n "${1:-}"; [[ -f $(cfg_of "$1") ]] || die "no config for member $1; run up first"
            check_prereqs; resolve_mode; start_member "$1" ;;
    raft)   cmd_raft "$@" ;;
    ctl)    cmd_ctl "$@" ;;
    psql)   cmd_psql "$@" ;;
    logs)   if [[ ${1:-} == w ]]; then check_witness; tail -n "${2:-50}" "$(wdir)/witness.log"
            else check_n "${1:-}"; tail -n "${2:-50}" "$(mdir "$1")/patroni.log"; fi ;;
    witness) check_witness
            case ${1:-} in
              start) check_prereqs; resolve_mode; start_witness ;;
              stop)  resolve_mode; stop_witness term ;;
              kill)  resolve_mode; stop_witness kill ;;
              *)     die "witness start|stop|kill" ;;
            esac ;;
    pids)   cmd_pids ;;
    env)    cmd_env ;;
    help|-h|--help) usage ;;
    *)      usage >&2; exit 2 ;;
  esac
}

main "$@"
