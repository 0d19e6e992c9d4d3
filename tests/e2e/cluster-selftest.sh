#!/usr/bin/env bash
# cluster-selftest.sh - exercise tests/e2e/cluster.sh against a real cluster (~2-3 min).
#
# Usage: tests/e2e/cluster-selftest.sh [VERSION...]    (default: 3.3.8 4.1.5). As root each
# version in a network namespace of its own, in parallel (logs $E2E_WORK/cluster-selftest-VERSION.log);
# else on the host's loopback, after any other user of the real cluster (one version a call).
#
# Per Patroni version (VENV from scripts/install-deps.sh): up --sync, status, raft 0,
# kill 0 + start 0 + wait --sync, quorum loss for QUORUM_LOSS_S=25 s (kill 1, kill 2: raft 0
# has_quorum False, member 0 demotes itself; start 1, start 2, wait --sync), down (no process
# left, ports free), up again, down --fast. Stereo mode: MEMBERS=2 WITNESS_PORT=2224 up --sync,
# raft w (the witness: has_quorum, 2 partners), env WITNESS_RAFT, witness kill / start, down
# (the witness stopped too, its port free).
# Prints the timings and 'N passed, N failed'; rc 1 if anything failed.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"
(($#)) || read -r -a versions <<<"$E2E_PATRONI_VERSIONS"
# as root each version in a network namespace of its own (in parallel), else on the host's
# loopback after any other user of the real cluster
E2E_NETNS=optional E2E_NO_EXPORTER=1 e2e_scenario cluster-selftest "${@:-${versions[@]}}"
export DATA_DIR="$E2E_WORK/cluster-selftest-$PATRONI_VERSION"
C=$E2E_CLUSTER
QUORUM_LOSS_S="${QUORUM_LOSS_S:-25}"   # how long members 1 and 2 stay dead

timed() { # timed LABEL CMD...: run CMD, record its duration (and rc) as a result; rc of CMD
  local label=$1 t0 rc=0
  shift
  t0=$(e2e_now)
  "$@" || rc=$?
  e2e_result "$PATRONI_VERSION" "$label (s, rc $rc)" "$(e2e_since "$t0")"
  return "$rc"
}
raft_field() { # raft_field N FIELD -> value from syncobj_admin -status (empty if none)
  "$C" raft "$1" 2>/dev/null | awk -v f="$2:" '$1 == f { print $2 }' || true
}
no_leftovers() { # nothing runs from DATA_DIR and our ports are free
  local data=${DATA_DIR:-$E2E_WORK/cluster} p cwd n st
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    [[ $cwd == "$data" || $cwd == "$data"/* ]] || continue
    st=$(awk '$1 == "State:" { print $2 }' "$p/status" 2>/dev/null) || continue
    if [[ -n $st && $st != Z && $st != X ]]; then
      e2e_log "leftover process ${p#/proc/} (cwd $cwd)"
      return 1
    fi
  done
  for n in 8008 2222 5432; do
    if ss -Hltn "sport = :$n" | grep -qE '127\.0\.0\.1[123]:'; then e2e_log "port $n still bound"; return 1; fi
  done
}

selftest() {
  local v=$1 t0 q role
  export PATRONI_VERSION=$v
  unset VENV
  eval "$("$C" env)"
  e2e_log "===== Patroni $v"
  if [[ -d ${DATA_DIR:-$E2E_WORK/cluster} ]]; then timed "down (leftover from before)" "$C" down || true; fi

  if ! timed "up --sync" "$C" up --sync; then fail "$v: up --sync"; dump_logs; return 1; fi
  pass "$v: up --sync"
  check "$v: status" "$C" status >/dev/null
  check "$v: raft 0 has_quorum True" [ "$(raft_field 0 has_quorum)" = True ]
  check "$v: ctl list" "$C" ctl list >/dev/null

  timed "kill 0" "$C" kill 0
  check "$v: member 0 gone after kill" bash -c "! '$C' pids | grep -q 'postgresql-0 patroni=[0-9]'"
  timed "start 0" "$C" start 0
  check "$v: kill 0 + start 0 -> wait --sync" timed "start 0 -> healthy (sync)" "$C" wait --sync

  # quorum loss: member 0 alone
  t0=$(e2e_now)
  "$C" kill 1 && "$C" kill 2
  q=""
  for _ in $(seq 1 20); do q=$(raft_field 0 has_quorum); [[ $q == False ]] && break; sleep 0.5; done
  e2e_result "$v" "kill 1,2 -> raft 0 has_quorum False (s)" "$(e2e_since "$t0")"
  check "$v: quorum loss: raft 0 has_quorum False (got '${q}')" [ "$q" = False ]
  check "$v: quorum loss: raft 1 gives no status" bash -c "! '$C' raft 1 >/dev/null 2>&1"
  # the survivor cannot write to the DCS and demotes itself after ~retry_timeout
  for _ in $(seq 1 $((QUORUM_LOSS_S * 2))); do
    role=$(curl -sf -m 2 "$MEMBER0_REST/patroni" | jq -r .role 2>/dev/null || true)
    [[ $role == replica ]] && break
    sleep 0.5
  done
  e2e_result "$v" "kill 1,2 -> survivor demoted (/patroni role) (s)" "$(e2e_since "$t0")"
  check "$v: quorum loss: survivor demoted to replica (role '$role')" [ "$role" = replica ]
  check "$v: quorum loss: survivor GET /cluster still 200 (stale)" curl -sf -m 3 -o /dev/null "$MEMBER0_REST/cluster"
  # hold the quorum loss for QUORUM_LOSS_S in total
  sleep "$(awk -v q="$QUORUM_LOSS_S" -v e="$(e2e_since "$t0")" 'BEGIN { x = q - e; print (x > 0) ? x : 0 }')"
  t0=$(e2e_now)
  "$C" start 1 && "$C" start 2
  for _ in $(seq 1 40); do q=$(raft_field 0 has_quorum); [[ $q == True ]] && break; sleep 0.5; done
  e2e_result "$v" "start 1,2 -> raft 0 has_quorum True (s)" "$(e2e_since "$t0")"
  check "$v: recovery: raft 0 has_quorum True" [ "$q" = True ]
  check "$v: recovery: wait --sync" timed "start 1,2 -> healthy (sync)" "$C" wait --sync
  e2e_result "$v" "start 1,2 -> healthy (sync), total (s)" "$(e2e_since "$t0")"

  check "$v: down" timed "down" "$C" down
  check "$v: no leftover process / port after down" no_leftovers
  check "$v: second up after down" timed "second up --sync" "$C" up --sync
  check "$v: second down --fast" timed "second down --fast" "$C" down --fast
  check "$v: no leftover process / port after second down" no_leftovers

  # stereo mode: two members and the Raft-only witness
  local w
  if ! timed "stereo: MEMBERS=2 WITNESS_PORT=2224 up --sync" env MEMBERS=2 WITNESS_PORT=2224 "$C" up --sync; then
    fail "$v: stereo up --sync"; dump_logs; return 1
  fi
  pass "$v: stereo up --sync"
  w=$("$C" env | sed -n "s/^WITNESS_RAFT='\(.*\)'$/\1/p")
  check "$v: stereo: env WITNESS_RAFT ($w) on port 2224" [ "${w##*:}" = 2224 ]
  check "$v: stereo: env MEMBERS 2" bash -c "'$C' env | grep -qx \"MEMBERS='2'\""
  check "$v: stereo: raft w has_quorum True" [ "$(raft_field w has_quorum)" = True ]
  check "$v: stereo: raft w 2 partners" [ "$(raft_field w partner_nodes_count)" = 2 ]
  check "$v: stereo: raft 0 lists the witness as a connected partner" \
    bash -c "'$C' raft 0 2>/dev/null | grep -qx 'partner_node_status_server_$w: 2'"
  check "$v: stereo: pids names the witness" bash -c "'$C' pids | grep -q '^witness pid=[0-9]'"
  check "$v: stereo: kill 2 refused (2 members)" bash -c "! '$C' kill 2 2>/dev/null"
  timed "stereo: witness kill" "$C" witness kill
  check "$v: stereo: raft w gives no status after witness kill" bash -c "! '$C' raft w >/dev/null 2>&1"
  check "$v: stereo: raft 0 has_quorum True without the witness" [ "$(raft_field 0 has_quorum)" = True ]
  timed "stereo: witness start" "$C" witness start
  for _ in $(seq 1 40); do q=$(raft_field w has_quorum); [[ $q == True ]] && break; sleep 0.5; done
  check "$v: stereo: raft w has_quorum True after witness start" [ "$q" = True ]
  check "$v: stereo: down" timed "stereo: down" "$C" down
  check "$v: stereo: no leftover process / port after down" no_leftovers
  check "$v: stereo: the witness's port is free after down" bash -c "! ss -Hltn 'sport = :2224' | grep -q ."
}

e2e_setup
selftest "$PATRONI_VERSION" || true
echo "---- timings"
e2e_results_print
e2e_summary
