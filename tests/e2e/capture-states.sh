#!/usr/bin/env bash
# capture-states.sh - real captures of the member states the exporter parses (issue #12):
# brings up the real 3-member cluster (cluster.sh) in a network namespace of its own, puts it
# into each state below, and saves the raw bodies of GET /cluster, GET /config (both from the
# member that is leader at that moment) and each member's GET /patroni, byte-exact as served
# (`curl -s -o`), plus `patronictl list`, into
#   tests/fixtures/patroni-VERSION/states/STATE/
#     cluster.json config.json patroni-m0.json patroni-m1.json patroni-m2.json
#     patronictl-list.txt capture.txt (when, served by whom, curl exit codes, notes)
# A state is captured only when the captured files themselves show it (checked with jq);
# every wait is bounded and the script exits non-zero naming the state that did not appear.
#
# Usage: tests/e2e/capture-states.sh VERSION      (3.3.8 or 4.1.5; root only: namespace,
#        nftables; ~3 min). The states/README.md is hand-written and not touched.
#
# States (each undone before the next):
#   healthy                  the default cluster (synchronous_mode on, 2 sync standbys)
#   tags                     tags in the members' YAML + `patronictl reload`: member 0
#                            clonefrom; member 1 failover_priority 0 (+ sync_priority 2 on
#                            4.x); member 2 nofailover, nosync, noloadbalance, nostream
#   nofailover-all-replicas  members 1 and 2 `nofailover: true` (no failover candidate)
#   replay-paused            pg_wal_replay_pause() on member 1
#   pending-restart          edit-config max_connections=110 (postmaster context)
#   scheduled-restart        patronictl restart pg-test postgresql-1 --scheduled (+1 h)
#   async                    edit-config synchronous_mode=false
#   quorum                   edit-config synchronous_mode=quorum (4.x only)
#   quorum-any1              and synchronous_node_count=1: ANY 1 (...), sync_state quorum
#   failsafe-active          edit-config failsafe_mode=true, then nftables drops the Raft
#                            traffic (port 2222) between all members (REST 8008 stays open);
#                            captured once the leader's /patroni says failsafe_mode_is_active
#   failsafe-active-late     the same cut, captured ttl + 35 s after it (did the leader stay
#                            primary?); then the cut is healed and failsafe_mode removed
set -euo pipefail
{ # parsed whole before it runs

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"    # paths.sh, and the Raft cut between members (member_fw_*)

VERSION="${1:-}"
[[ $VERSION == 3.3.8 || $VERSION == 4.1.5 ]] || { echo "usage: $0 3.3.8|4.1.5" >&2; exit 2; }
export PATRONI_VERSION=$VERSION

# the data dir is named once, outside (this PID), and inherited inside the namespace
export DATA_DIR="${DATA_DIR:-/var/tmp/capstates-$VERSION-$$}"
E2E_NO_EXPORTER=1 E2E_TOOLS="nft python3 flock" e2e_scenario capture-states "$VERSION"

# ------------------------------------------------------------------ inner: in the namespace
GID_BASE="${CAPS_GID_BASE:-63000}"           # member N runs with primary group GID_BASE+N
export MEMBER_GID_BASE=$GID_BASE
export UP_TIMEOUT="${UP_TIMEOUT:-90}"
OUT="$E2E_REPO/tests/fixtures/patroni-$VERSION/states"
SCOPE=pg-test
MAJOR=${VERSION%%.*}
TTL=30                                      # cluster.sh's default ttl
T0=$(date +%s)

log() { printf '[capture-states %s %3ss] %s\n' "$VERSION" "$(($(date +%s) - T0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

TMP=$(mktemp -d)
e2e_lock

# shellcheck disable=SC2317  # the EXIT trap runs it
cleanup() {
  local rc=$? f
  # a state that did not show: its last attempt is kept next to the captures
  for f in "$TMP"/*/; do
    [[ -d $f ]] || continue
    f=${f%/}; rm -rf "${OUT:?}/${f##*/}.failed"; mv "$f" "$OUT/${f##*/}.failed"
  done
  member_fw_teardown caps
  cluster down --fast >/dev/null 2>&1 || log "cluster down failed"
  rm -rf "$TMP"
  ((rc == 0)) || log "FAILED (rc $rc); captures so far in $OUT"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

url() { echo "http://127.0.0.$((11 + $1)):8008"; }
cfg() { echo "$DATA_DIR/postgresql-$1/patroni.yml"; }
ctl() { cluster ctl "$@"; }
get() { curl -s --max-time 5 "$(url "$1")$2"; }   # for polling only (never saved)

# leader_idx: index of the member /cluster names leader (asked of every member in turn)
leader_idx() {
  local n name
  for n in 0 1 2; do
    name=$(get "$n" /cluster | jq -r '.members[] | select(.role == "leader") | .name' 2>/dev/null) || continue
    [[ $name == postgresql-[0-2] ]] && { echo "${name#postgresql-}"; return 0; }
  done
  return 1
}

# capture DIR: the raw bodies (+ patronictl list) into DIR; curl exit codes in DIR/capture.txt
capture() {
  local d=$1 n src rc
  rm -rf "$d"; mkdir -p "$d"
  src=$(leader_idx) || src=0
  {
    echo "patroni $VERSION; captured $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "GET /cluster and /config from postgresql-$src ($(url "$src"))"
  } >"$d/capture.txt"
  rc=0; curl -s --max-time 10 -o "$d/cluster.json" "$(url "$src")/cluster" || rc=$?
  echo "curl /cluster rc=$rc" >>"$d/capture.txt"
  rc=0; curl -s --max-time 10 -o "$d/config.json" "$(url "$src")/config" || rc=$?
  echo "curl /config rc=$rc" >>"$d/capture.txt"
  for n in 0 1 2; do
    rc=0; curl -s --max-time 10 -o "$d/patroni-m$n.json" "$(url "$n")/patroni" || rc=$?
    echo "curl postgresql-$n /patroni rc=$rc" >>"$d/capture.txt"
  done
  rc=0; timeout 20 "$E2E_CLUSTER" ctl list >"$d/patronictl-list.txt" 2>&1 9>&- || rc=$?
  echo "patronictl list rc=$rc" >>"$d/capture.txt"
}

# jqf FILE FILTER: FILTER true on FILE (a missing or non-JSON file is false)
# shellcheck disable=SC2317  # called from the chk_* functions (called by name)
jqf() { local f=$1 filter=$2; shift 2; [[ -s $f ]] && jq -e "$@" "$filter" "$f" >/dev/null 2>&1; }

# capture_when STATE TIMEOUT CHECK: capture into a scratch dir until CHECK (a shell function
# run with the capture dir as $1) holds on the captured files, then move it to OUT/STATE
capture_when() {
  local state=$1 timeout=$2 check=$3 d="$TMP/$1" deadline
  deadline=$(($(date +%s) + timeout))
  while :; do
    capture "$d"
    if "$check" "$d"; then
      rm -rf "${OUT:?}/$state"; mv "$d" "$OUT/$state"
      log "captured $state"
      return 0
    fi
    (($(date +%s) < deadline)) || die "state '$state' did not show within ${timeout}s (last attempt kept in $OUT/$state.failed)"
    sleep 2
  done
}

# wait_for TIMEOUT WHAT CMD...: bounded poll
wait_for() {
  local timeout=$1 what=$2 deadline; shift 2
  deadline=$(($(date +%s) + timeout))
  until "$@"; do
    (($(date +%s) < deadline)) || die "timed out after ${timeout}s waiting for: $what"
    sleep 1
  done
}
# live checks against the running cluster (for the undo steps)
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
live_cluster() { get "${2:-0}" /cluster | jq -e "$1" >/dev/null 2>&1; }
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
live_patroni() { get "$1" /patroni | jq -e "$2" >/dev/null 2>&1; }
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
all_patroni() { local n; for n in 0 1 2; do live_patroni "$n" "$1" || return 1; done; }
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
healthy_sync() { cluster wait --sync >/dev/null 2>&1; }
# clean: healthy (sync), and no member key in /cluster still carries a state of ours
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
clean() {
  healthy_sync && live_cluster '[.members[] | select((.tags // {} | length > 0) or has("pending_restart") or has("scheduled_restart"))] | length == 0'
}
# leader_json DIR: the captured /patroni of the member cluster.json names leader
# shellcheck disable=SC2317  # called from the chk_* functions (called by name)
leader_json() {
  local name
  name=$(jq -r '.members[] | select(.role == "leader") | .name' "$1/cluster.json" 2>/dev/null) || return 1
  [[ $name == postgresql-[0-2] ]] || return 1
  echo "$1/patroni-m${name#postgresql-}.json"
}
# leader_repl DIR SYNC_STATE: the leader reports 2 streaming replication connections, all SYNC_STATE
# shellcheck disable=SC2317  # called from the chk_* functions (called by name)
leader_repl() {
  local f
  f=$(leader_json "$1") || return 1
  # shellcheck disable=SC2016  # $s is a jq variable
  jqf "$f" '[.replication[]? | select(.state == "streaming" and .sync_state == $s)] | length == 2' --arg s "$2"
}

# ------------------------------------------------------------------ tags in the YAML
# set_tags N YAML: replace member N's `tags:` section (appended at the end) with YAML lines
set_tags() {
  local f tmp
  f=$(cfg "$1"); tmp="$TMP/tags.yml"
  sed '/^# capture-states tags$/,$d' "$f" >"$tmp"
  if [[ -n $2 ]]; then printf '# capture-states tags\ntags:\n%s\n' "$2" >>"$tmp"; fi
  cat "$tmp" >"$f"     # in place: keeps owner and mode
}
reload_all() { ctl reload "$SCOPE" --force >/dev/null; }

# ------------------------------------------------------------------ the firewall
# lib.sh: member N's new connections stamp its group into the conntrack mark; cut_raft drops
# the Raft traffic between members (their connections to any Raft port, and their Raft
# servers' replies on connections another member opened). patronictl (our gid) still reaches Raft.
member_fw_setup caps "$GID_BASE"
cut_raft() { member_fw_cut_raft caps "$GID_BASE" 2222; }
heal() { member_fw_heal caps; }

# ================================================================== run
mkdir -p "$OUT"
rm -rf "${OUT:?}"/*.failed
log "cluster up (data $DATA_DIR, namespace $(ip netns identify $$ 2>/dev/null || echo '?'))"
cluster up --sync >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log" >&2; die "cluster up failed"; }

# ---- 1 healthy
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_healthy() {
  jqf "$1/cluster.json" '[.members[] | select(.role == "leader" and .state == "running")] | length == 1' &&
  jqf "$1/cluster.json" '[.members[] | select(.role == "sync_standby" and .state == "streaming")] | length == 2' &&
  jqf "$1/config.json" '.synchronous_mode == true' && leader_repl "$1" sync
}
capture_when healthy 30 chk_healthy

# ---- 2 tags
set_tags 0 '  clonefrom: true'
if ((MAJOR >= 4)); then
  set_tags 1 $'  failover_priority: 0\n  sync_priority: 2'
else
  set_tags 1 '  failover_priority: 0'
fi
set_tags 2 $'  nofailover: true\n  nosync: true\n  noloadbalance: true\n  nostream: true'
reload_all
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_tags() {
  jqf "$1/cluster.json" '.members[] | select(.name == "postgresql-0") | .tags.clonefrom == true' &&
  jqf "$1/cluster.json" '.members[] | select(.name == "postgresql-1") | .tags.failover_priority == 0' &&
  jqf "$1/cluster.json" '.members[] | select(.name == "postgresql-2") | .tags | .nofailover == true and .nosync == true and .noloadbalance == true and .nostream == true' &&
  jqf "$1/cluster.json" '.members[] | select(.name == "postgresql-2") | .role == "replica"' &&
  jqf "$1/patroni-m0.json" '.tags.clonefrom == true' &&
  jqf "$1/patroni-m1.json" '.tags.failover_priority == 0' &&
  jqf "$1/patroni-m2.json" '.tags.nostream == true and .tags.nofailover == true'
}
capture_when tags 60 chk_tags
for n in 0 1 2; do set_tags "$n" ""; done
reload_all
wait_for 100 "clean after removing the tags" clean

# ---- 3 nofailover on both replicas
set_tags 1 '  nofailover: true'
set_tags 2 '  nofailover: true'
reload_all
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_nofailover() {
  jqf "$1/cluster.json" '[.members[] | select(.role != "leader") | .tags.nofailover == true] | length == 2 and all' &&
  jqf "$1/patroni-m1.json" '.tags.nofailover == true' && jqf "$1/patroni-m2.json" '.tags.nofailover == true'
}
capture_when nofailover-all-replicas 60 chk_nofailover
set_tags 1 ""; set_tags 2 ""
reload_all
wait_for 100 "clean after removing the tags" clean

# ---- 4 replay paused on member 1
cluster psql 1 -qAt -c 'SELECT pg_wal_replay_pause();' >/dev/null
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_paused() { jqf "$1/patroni-m1.json" '.xlog.paused == true'; }
capture_when replay-paused 30 chk_paused
cluster psql 1 -qAt -c 'SELECT pg_wal_replay_resume();' >/dev/null
wait_for 30 "replay resumed on member 1" live_patroni 1 '.xlog.paused == false'

# ---- 5 pending restart
ctl edit-config "$SCOPE" -p max_connections=110 --force >/dev/null
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_pending() {
  jqf "$1/patroni-m0.json" '.pending_restart == true' && jqf "$1/patroni-m1.json" '.pending_restart == true' &&
  jqf "$1/patroni-m2.json" '.pending_restart == true' &&
  jqf "$1/cluster.json" '[.members[] | select(.pending_restart == true)] | length == 3'
}
capture_when pending-restart 60 chk_pending
ctl edit-config "$SCOPE" -p max_connections=100 --force >/dev/null
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
not_pending() { all_patroni 'has("pending_restart") | not'; }
# (restoring the value and reloading normally clears the flag without a restart)
cleared=0
for _ in $(seq 1 40); do not_pending && { cleared=1; break; }; sleep 1; done
if ((!cleared)); then
  log "still pending_restart after restoring max_connections: restarting the members"
  ctl restart "$SCOPE" --force >/dev/null
  wait_for 60 "pending_restart cleared" not_pending
fi
wait_for 100 "clean after pending-restart" clean

# ---- 6 scheduled restart of member 1, one hour ahead
AT=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%S+00:00)
ctl restart "$SCOPE" postgresql-1 --scheduled "$AT" --force >/dev/null
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_scheduled() {
  jqf "$1/patroni-m1.json" '.scheduled_restart.schedule != null' &&
  jqf "$1/cluster.json" '.members[] | select(.name == "postgresql-1") | .scheduled_restart != null'
}
capture_when scheduled-restart 40 chk_scheduled
echo "scheduled with: patronictl restart $SCOPE postgresql-1 --scheduled $AT --force" >>"$OUT/scheduled-restart/capture.txt"
ctl flush "$SCOPE" restart --force >/dev/null
wait_for 60 "clean after the scheduled restart was flushed" clean

# back in synchronous mode: also the leader's pg_stat_replication says sync again
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
healthy_sync_repl() {
  local l
  healthy_sync && l=$(leader_idx) &&
  live_patroni "$l" '[.replication[]? | select(.state == "streaming" and .sync_state == "sync")] | length == 2'
}

# ---- 7 async
ctl edit-config "$SCOPE" -s synchronous_mode=false --force >/dev/null
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_async() {
  jqf "$1/config.json" '.synchronous_mode == false' &&
  jqf "$1/cluster.json" '[.members[] | select(.role == "replica" and .state == "streaming")] | length == 2' &&
  leader_repl "$1" async
}
capture_when async 60 chk_async
ctl edit-config "$SCOPE" -s synchronous_mode=true --force >/dev/null
wait_for 100 "healthy (sync) after async" healthy_sync_repl

# ---- 8 quorum (4.x)
if ((MAJOR >= 4)); then
  ctl edit-config "$SCOPE" -s synchronous_mode=quorum --force >/dev/null
  # shellcheck disable=SC2317  # called by name (capture_when, wait_for)
  chk_quorum() {
    jqf "$1/config.json" '.synchronous_mode == "quorum"' &&
    jqf "$1/cluster.json" '[.members[] | select(.role == "quorum_standby" and .state == "streaming")] | length == 2'
  }
  # with synchronous_node_count 2 of 2 replicas Patroni keeps synchronous_standby_names
  # '2 (...)' (the same as ANY 2): the leader's replication entries still say sync
  capture_when quorum 60 chk_quorum
  ctl edit-config "$SCOPE" -s synchronous_node_count=1 --force >/dev/null
  # shellcheck disable=SC2317  # called by name (capture_when, wait_for)
  chk_quorum1() {
    jqf "$1/config.json" '.synchronous_mode == "quorum" and .synchronous_node_count == 1' &&
    jqf "$1/cluster.json" '[.members[] | select(.role == "quorum_standby" and .state == "streaming")] | length == 2' &&
    leader_repl "$1" quorum
  }
  capture_when quorum-any1 60 chk_quorum1
  ctl edit-config "$SCOPE" -s synchronous_mode=true -s synchronous_node_count=2 --force >/dev/null
  wait_for 100 "healthy (sync) after quorum" healthy_sync_repl
else
  log "quorum: synchronous_mode quorum does not exist in $VERSION, skipped"
fi

# ---- 9 failsafe: the members lose Raft, REST stays reachable
ctl edit-config "$SCOPE" -s failsafe_mode=true --force >/dev/null
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
config_has() { get 0 /config | jq -e "$1" >/dev/null 2>&1; }
wait_for 30 "failsafe_mode in /config" config_has '.failsafe_mode == true'
L=$(leader_idx) || die "no leader before the Raft cut"
log "cutting Raft between the members (leader postgresql-$L)"
CUT_AT=$(date +%s)
cut_raft
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_failsafe() { jqf "$1/patroni-m$L.json" '.failsafe_mode_is_active == true'; }
# poll the leader's own /patroni (cheap) before taking the full capture
active_at=""
deadline=$((CUT_AT + 90))
while (($(date +%s) < deadline)); do
  if live_patroni "$L" '.failsafe_mode_is_active == true'; then active_at=$(date +%s); break; fi
  sleep 1
done
if [[ -n $active_at ]]; then
  log "failsafe active on postgresql-$L $((active_at - CUT_AT))s after the cut"
  capture_when failsafe-active 20 chk_failsafe
  {
    echo "Raft (tcp 2222) cut between all members at $(date -u -d "@$CUT_AT" +%H:%M:%SZ); failsafe_mode_is_active seen $((active_at - CUT_AT))s later"
    echo "leader before the cut: postgresql-$L; its /patroni role in this capture: $(jq -r .role "$OUT/failsafe-active/patroni-m$L.json" 2>/dev/null)"
  } >>"$OUT/failsafe-active/capture.txt"
else
  capture "$TMP/failsafe-active"
  echo "failsafe_mode_is_active NOT seen within 90 s of the Raft cut" >>"$TMP/failsafe-active/capture.txt"
  die "failsafe did not become active within 90 s (capture kept in $OUT/failsafe-active.failed)"
fi
# hold the cut well past the leader key's TTL: does the leader stay primary?
LATE=$((CUT_AT + TTL + 35))
while (($(date +%s) < LATE)); do sleep 1; done
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
chk_any() { [[ -s $1/patroni-m$L.json ]]; }
capture_when failsafe-active-late 20 chk_any
{
  echo "Raft cut at $(date -u -d "@$CUT_AT" +%H:%M:%SZ), this capture $(($(date +%s) - CUT_AT))s later (ttl $TTL)"
  echo "leader before the cut: postgresql-$L; its /patroni now: role $(jq -r .role "$OUT/failsafe-active-late/patroni-m$L.json" 2>/dev/null), failsafe_mode_is_active $(jq -r '.failsafe_mode_is_active // "absent"' "$OUT/failsafe-active-late/patroni-m$L.json" 2>/dev/null)"
} >>"$OUT/failsafe-active-late/capture.txt"
log "$(tail -n1 "$OUT/failsafe-active-late/capture.txt")"
heal
HEAL_AT=$(date +%s)
log "Raft healed; waiting for recovery"
# shellcheck disable=SC2317  # called by name (capture_when, wait_for)
raft_ok() { cluster raft 0 2>/dev/null | grep -q '^has_quorum: True'; }
since_heal() { echo "$1 $(($(date +%s) - HEAL_AT))s after healing the cut" | tee -a "$OUT/failsafe-active-late/capture.txt" >&2; }
wait_for 60 "Raft quorum back" raft_ok
since_heal "Raft has_quorum True (syncobj_admin, member 0)"
wait_for 120 "failsafe no longer active on any member" all_patroni '.failsafe_mode_is_active != true'
since_heal "failsafe_mode_is_active gone from every member's /patroni"
wait_for 120 "clean after failsafe" clean
since_heal "healthy again (leader + 2 sync standbys streaming)"
ctl edit-config "$SCOPE" -s failsafe_mode=null --force >/dev/null
wait_for 30 "failsafe_mode gone from /config" config_has 'has("failsafe_mode") | not'

done_states=("$OUT"/*/); done_states=("${done_states[@]%/}")
log "done: ${done_states[*]##*/}"
exit 0
}
