#!/usr/bin/env bash
# shared-watcher.sh - one postgresql-watcher unit serving two stereo-mode clusters, against real
# Patroni + Raft. The watcher charm runs one Raft instance (Patroni's own
# `patroni_raft_controller`, no PostgreSQL, no REST API) per related cluster, on ports allocated
# upward from 2223, all on the watcher unit's one address. Here: cluster pg-a (members pga-0/1 on
# 127.0.0.11-12) with its witness on 127.0.0.9:2223 and cluster pg-b (pgb-0/1 on 127.0.0.21-22)
# with its witness on 127.0.0.9:2224 (cluster.sh MEMBERS=2 WITNESS_IP=127.0.0.9
# WITNESS_PORT=2223|2224), watched by ONE exporter through --config.file (both clusters,
# --poll.interval 2s); a real Prometheus (scrape and evaluation every 2 s) evaluates the SHIPPED
# alerts/patroni-raft.rules.yml unchanged. All in a network namespace of its own. Every verdict
# is checked against the ground truth: each Raft node's own status (`cluster.sh raft N|w`,
# syncobj_admin), each member's own GET /patroni.
#
# Usage: tests/e2e/shared-watcher.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# Root only (network namespace). ~3-4 min per version; several versions run in parallel, each in
# its own namespace (log $E2E_WORK/shared-watcher-VERSION.log; in $E2E_WORK/shared-watcher-VERSION/:
# results.tsv, `status` outputs status-*.txt, Raft statuses raft-*.txt). EXPORTER_BIN defaults to
# the debug build.
#
#   1 healthy, for each cluster C (pg-a, pg-b) with its witness W(C): verdict 1, voters 3,
#     members 2, margin 1; patroni_raft_node_info{scope=C,node=W(C),kind="witness"} 1, the two
#     members kind="member", one node_info per voter, none unknown, patroni_raft_witnesses 1;
#     W(C) on the shared host at its own port (2223 for pg-a, 2224 for pg-b); no series of C
#     names the other cluster's witness; W(C)'s own Raft status: has_quorum, its partners exactly
#     C's two members; `status --config.file` names each witness, exit 0. No zombie voter:
#     voters - witnesses = members for both scopes (the exporter's own families), and
#     PatroniRaftZombieVoter's expression empty and the alert never pending in Prometheus over the
#     window (ALERTS, polled), nothing else pending or firing either.
#   2 the shared host stopped: both witness processes SIGKILLed at once (a host that goes away
#     says no goodbye). For each cluster: margin 0, patroni_raft_up{node=W(C)} 0 (the only voter
#     down), voters 3, voters_with_quorum 2, W(C) still kind="witness", verdict 1 in every scrape
#     over the window, the members' own Raft status has_quorum, the primary still primary by its
#     own word; PatroniRaftQuorumNoMargin pending for both, PatroniRaftQuorumLost and
#     PatroniRaftZombieVoter never pending. Both witnesses started again: margin 1 for both.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

E2E_TOOLS="prometheus" e2e_scenario shared-watcher "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-sw-a-$PATRONI_VERSION"     # pg-a: cluster.sh's defaults but these
B_DATA="$E2E_WORK/cluster-sw-b-$PATRONI_VERSION"                # pg-b
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
export MEMBERS=2 SCOPE=pg-a MEMBER_PREFIX=pga
WATCHER_IP=127.0.0.9                          # the watcher unit's one address
export WITNESS_IP=$WATCHER_IP WITNESS_PORT=2223   # the first related cluster's Raft instance
B_WITNESS_PORT=2224                           # the second's: the next port up
POLL=2                                        # exporter --poll.interval (s)
HEALTHY_S=40                                  # phase 1: the window watched for alerts
DOWN_S=24                                     # phase 2: the window watched with the host down
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
SCOPES=(pg-a pg-b)
QL=PatroniRaftQuorumLost
NM=PatroniRaftQuorumNoMargin
ZV=PatroniRaftZombieVoter

e2e_setup
# clu SCOPE ARGS...: cluster.sh on pg-a or pg-b (pg-b: its own data dir, addresses, names, port)
clu() {
  if [[ $1 == pg-a ]]; then shift; cluster "$@"; return; fi
  shift
  DATA_DIR=$B_DATA SCOPE=pg-b IP_BASE=21 MEMBER_PREFIX=pgb WITNESS_PORT=$B_WITNESS_PORT cluster "$@"
}
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it
e2e_cleanup_hook() { clu pg-b down --fast >>"$RUN_DIR/cleanup.log" 2>&1; }
clu pg-b down --fast >>"$RUN_DIR/cleanup.log" 2>&1 || true   # an interrupted run's leftovers
e2e_log "=== shared watcher, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
declare -A W=() OTHER=() PORT=() PRIMARY=()
PORT[pg-a]=$WITNESS_PORT PORT[pg-b]=$B_WITNESS_PORT
OTHER[pg-a]=pg-b OTHER[pg-b]=pg-a
sc() { echo "scope=\"$1\""; }
# raft SCOPE WHO NAME: the Raft status of member WHO (or w, the witness) of SCOPE, kept in
# raft-NAME.txt; rc 1 when it gave no status
raft() { clu "$1" raft "$2" >"$RUN_DIR/raft-$3.txt" 2>&1; }
raft_field() { awk -F': ' -v f="$2" '$1 == f { print $2 }' "$RUN_DIR/raft-$1.txt"; }
# raft_partners NAME: the partner addresses in raft-NAME.txt, sorted, comma-separated
raft_partners() { sed -n 's/^partner_node_status_server_\([^:]*:[0-9]*\): .*/\1/p' "$RUN_DIR/raft-$1.txt" | sort | paste -sd,; }
member_env() { clu "$1" env | sed -n "s/^MEMBER${2}_$3='\(.*\)'$/\1/p"; }
own_role() { curl -sf -m 2 "$(member_env "$1" "$2" REST)/patroni" 2>/dev/null | jq -r '.role // "?"' 2>/dev/null || echo down; }
is_primary_role() { [[ $1 == primary || $1 == master ]]; }
# status_names_witness NAME ADDR: `status` output status-NAME.txt has a line naming ADDR a witness
# shellcheck disable=SC2317  # check runs it
status_names_witness() { grep -F "$2" "$RUN_DIR/status-$1.txt" | grep -qi witness; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
# prom_count PROMQL: how many series the instant query returns ("?" when Prometheus does not answer)
prom_count() {
  curl -fs -m 5 "$E2E_PROM/api/v1/query" --data-urlencode "query=$1" 2>/dev/null | jq -r '.data.result | length' 2>/dev/null || echo '?'
}
# the shipped rule's expression, read from the rule file (the same text Prometheus evaluates)
rule_expr() {
  python3 - "$E2E_REPO/alerts/patroni-raft.rules.yml" "$1" <<'PY'
import sys
import yaml
for group in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for rule in group["rules"]:
        if rule.get("alert") == sys.argv[2]:
            print(rule["expr"])
PY
}
show_state() {
  e2e_show_metrics "the exporter's view" \
    '^patroni_(raft_(cluster_quorum|quorum_margin|up|voters|node_info|witnesses)|cluster_(members|leaders)|up\{)'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
  local s n
  for s in "${SCOPES[@]}"; do
    echo "===== $s: the witness ${W[$s]:-?} own Raft status:"; clu "$s" raft w 2>&1 | sed 's/^/    /' || true
    for n in 0 1 w; do echo "===== $s: logs $n"; clu "$s" logs "$n" 20 2>&1 | sed 's/^/    /' || true; done
  done
}

# ---- the two clusters, at once; their witnesses on the one watcher address
T_UP=$(e2e_now)
clu pg-a up --sync >"$RUN_DIR/up-pg-a.log" 2>&1 & UP_A=$!
clu pg-b up --sync >"$RUN_DIR/up-pg-b.log" 2>&1 & UP_B=$!
rc_a=0 rc_b=0
wait "$UP_A" || rc_a=$?
wait "$UP_B" || rc_b=$?
((rc_a == 0)) || { tail -n 30 "$RUN_DIR/up-pg-a.log" >&2; on_fail "pg-a: cluster up --sync (2 members, witness $WATCHER_IP:${PORT[pg-a]})"; }
((rc_b == 0)) || { tail -n 30 "$RUN_DIR/up-pg-b.log" >&2; on_fail "pg-b: cluster up --sync (2 members, witness $WATCHER_IP:${PORT[pg-b]})"; }
e2e_result setup "both clusters up --sync, 2 members + witness each (s)" "$(e2e_since "$T_UP")"
eval "$(cluster env)"   # pg-a's MEMBERn_*, RAFT_PASS (pg-b has the same password)
for s in "${SCOPES[@]}"; do
  W[$s]=$(clu "$s" env | sed -n "s/^WITNESS_RAFT='\(.*\)'$/\1/p")
  ensure "$s: its witness is ${W[$s]}, on the watcher's address at port ${PORT[$s]}" \
    "$s: witness ${W[$s]:-none}, want $WATCHER_IP:${PORT[$s]}" test "${W[$s]}" = "$WATCHER_IP:${PORT[$s]}"
  for n in 0 1; do
    grep -qF "'${W[$s]}'" "$(member_env "$s" "$n" CONFIG)" || on_fail "$s: ${W[$s]} not in member $n's raft.partner_addrs"
  done
done

# ---- ONE exporter, both clusters from --config.file; Prometheus with the shipped rules
# (e2e_exporter writes the password file these name, from RAFT_PASS)
cat >"$RUN_DIR/exporter.yml" <<EOF
clusters:
  - scope: pg-a
    patroni_urls: [$(member_env pg-a 0 REST)]
    raft_password_file: $RUN_DIR/raft-secret
  - scope: pg-b
    patroni_urls: [$(member_env pg-b 0 REST)]
    raft_password_file: $RUN_DIR/raft-secret
EOF
e2e_exporter "$POLL" --config.file "$RUN_DIR/exporter.yml"
e2e_prometheus_rules "$QL" "$NM" "$ZV"
T_PROM=$E2E_PROM_T0
ZV_EXPR=$(rule_expr "$ZV")
[[ -n $ZV_EXPR ]] || on_fail "cannot read $ZV's expr from the rule file"

# ================================================================== 1. healthy
e2e_log "=== 1: both stereo clusters healthy, one watcher host"
for s in "${SCOPES[@]}"; do
  S=$(sc "$s")
  expect "1: $s: verdict 1 (quorum confirmed)" patroni_raft_cluster_quorum "$S" == 1 60
  expect "1: $s: patroni_raft_voters 3 (2 members + its witness)" patroni_raft_voters "$S" == 3 30
  expect "1: $s: patroni_cluster_members 2" patroni_cluster_members "$S" == 2 30
  expect "1: $s: quorum margin 1" patroni_raft_quorum_margin "$S" == 1 30
  expect "1: $s: its witness answers Raft status (patroni_raft_up{node=${W[$s]}} 1)" patroni_raft_up "$S,node=\"${W[$s]}\"" == 1 30
  # a witness is recognised once it answered and its host has no REST API: up to a ttl of polls
  expect "1: $s: patroni_raft_node_info{node=${W[$s]},kind=witness} 1" patroni_raft_node_info "$S,node=\"${W[$s]}\",kind=\"witness\"" == 1 60
done
e2e_result 1 "exporter start -> both witnesses recognised (s)" "$(e2e_since "$T_PROM")"
fetch_metrics || on_fail "1: scrape"
for s in "${SCOPES[@]}"; do
  S=$(sc "$s")
  v=$(FETCH=0 metric_count patroni_raft_node_info "$S,kind=\"member\",..." 1)
  check "1: $s: patroni_raft_node_info kind=member 1 for both members (count $v)" test "$v" = 2
  v="$(FETCH=0 metric_count patroni_raft_node_info "$S,..." 1)/$(FETCH=0 metric_count patroni_raft_node_info "$S,kind=\"unknown\",..." 1)"
  check "1: $s: one patroni_raft_node_info per voter, none unknown (voters/unknown $v)" test "$v" = 3/0
  v=$(FETCH=0 metric_label patroni_raft_node_info "$S,kind=\"witness\",..." node 1 | paste -sd,)
  check "1: $s: its only witness is ${W[$s]}, port ${PORT[$s]} (witnesses: $v)" test "$v" = "${W[$s]}"
  v=$(FETCH=0 metric_value patroni_raft_witnesses "$S" 2>/dev/null || echo absent)
  check "1: $s: patroni_raft_witnesses 1 (is $v)" test "$v" = 1
  # neither sees the other's witness: no series of this scope names it
  o=${W[${OTHER[$s]}]}
  v=$(printf '%s\n' "$METRICS_TEXT" | grep -F "$S" | grep -cF "\"$o\"" || true)
  check "1: $s: no series of $s names ${OTHER[$s]}'s witness $o (found $v)" test "$v" = 0
  # no zombie: every voter is a member or the witness
  z=$(awk -v a="$(FETCH=0 metric_value patroni_raft_voters "$S")" -v b="$(FETCH=0 metric_value patroni_raft_witnesses "$S")" \
    -v c="$(FETCH=0 metric_value patroni_cluster_members "$S")" 'BEGIN { print a - b - c }')
  check "1: $s: voters - witnesses - members = 0 (no zombie voter; is $z)" test "$z" = 0
  # ground truth: the witness's own Raft status, its partners exactly this cluster's members
  raft "$s" w "healthy-$s-w" || on_fail "1: $s: the witness's own Raft status"
  want=$(printf '%s\n' "$(member_env "$s" 0 RAFT)" "$(member_env "$s" 1 RAFT)" | sort | paste -sd,)
  v="$(raft_field "healthy-$s-w" has_quorum)/$(raft_partners "healthy-$s-w")"
  check "1: $s: the witness's own status: has_quorum, partners its members only ($v)" test "$v" = "True/$want"
  for n in 0 1; do
    raft "$s" "$n" "healthy-$s-$n" || on_fail "1: $s: member $n's own Raft status"
    v=$(raft_partners "healthy-$s-$n")
    check "1: $s: member $n's own Raft partners: the other member and ${W[$s]}, not $o ($v)" \
      test "$v" = "$(printf '%s\n' "$(member_env "$s" $((1 - n)) RAFT)" "${W[$s]}" | sort | paste -sd,)"
  done
  PRIMARY[$s]=""
  for n in 0 1; do
    if is_primary_role "$(own_role "$s" "$n")"; then PRIMARY[$s]=$n; fi
  done
  ensure "1: $s: member ${PRIMARY[$s]} is the primary by its own GET /patroni" "1: $s: no member says primary" test -n "${PRIMARY[$s]}"
done
rc=$(e2e_status healthy -- --config.file exporter.yml)
check "1: status --config.file exit 0 on both healthy clusters (exit $rc)" test "$rc" = 0
for s in "${SCOPES[@]}"; do
  check "1: status names ${W[$s]} as a witness" status_names_witness healthy "${W[$s]}"
done
# Prometheus over a window: the zombie expression empty while both scopes have its series,
# nothing pending or firing
e2e_log "1: watching Prometheus for ${HEALTHY_S}s"
seen_poll=""
while ! ge "$(e2e_since "$T_PROM")" "$HEALTHY_S"; do
  b=$(e2e_alerts_brief)
  [[ -z $b ]] || seen_poll+=" $b@$(e2e_since "$T_PROM")s"
  sleep 2
done
v=$(prom_count 'count by (scope) (patroni_raft_voters) * 0 + count by (scope) (patroni_raft_witnesses)')
check "1: Prometheus has the zombie expression's series for both scopes ($v scopes)" test "$v" = 2
v=$(prom_count "$ZV_EXPR")
check "1: $ZV's expression returns nothing ($v series)" test "$v" = 0
seen=$(e2e_alerts_seen "$T_PROM" "$ZV")
check "1: $ZV never pending or firing for $(e2e_since "$T_PROM")s (ALERTS: '$seen')" test -z "$seen"
seen=$(e2e_alerts_seen "$T_PROM" ".+")
check "1: nothing pending or firing in Prometheus (ALERTS: '$seen'; polled:${seen_poll:- none})" test -z "$seen$seen_poll"

# ================================================================== 2. the shared host stopped
e2e_log "=== 2: the watcher host stopped: both witnesses killed at once"
T2=$(e2e_now)
clu pg-a witness kill >"$RUN_DIR/kill-pg-a.log" 2>&1 & K_A=$!
clu pg-b witness kill >"$RUN_DIR/kill-pg-b.log" 2>&1 & K_B=$!
wait "$K_A" || on_fail "2: pg-a: cluster.sh witness kill"
wait "$K_B" || on_fail "2: pg-b: cluster.sh witness kill"
e2e_result 2 "both witnesses killed in (s)" "$(e2e_since "$T2")"
for s in "${SCOPES[@]}"; do
  S=$(sc "$s")
  expect "2: $s: margin 0 with its witness down" patroni_raft_quorum_margin "$S" == 0 $((10 * POLL))
  e2e_result 2 "$s: host stop -> margin 0 (s)" "$(e2e_since "$T2")"
  expect "2: $s: patroni_raft_up{node=${W[$s]}} 0" patroni_raft_up "$S,node=\"${W[$s]}\"" == 0 $((10 * POLL))
done
# the window: every scrape's verdict, for both
bad="" samples=0
while ! ge "$(e2e_since "$T2")" "$DOWN_S"; do
  if fetch_metrics; then
    samples=$((samples + 1))
    for s in "${SCOPES[@]}"; do
      v=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$(sc "$s")" 2>/dev/null || echo absent)
      [[ $v == 1 ]] || bad+=" $s:$v@$(e2e_since "$T2")s"
    done
  else
    bad+=" no-scrape@$(e2e_since "$T2")s"
  fi
  sleep 1
done
check "2: verdict 1 for both clusters in all $samples scrapes over $(e2e_since "$T2")s with the watcher host down (other:${bad:- none})" test -z "$bad"
fetch_metrics || on_fail "2: scrape"
for s in "${SCOPES[@]}"; do
  S=$(sc "$s")
  v="$(FETCH=0 metric_count patroni_raft_up "$S,..." 0)/$(FETCH=0 metric_count patroni_raft_up "$S,..." 1)"
  check "2: $s: its witness the only voter down (patroni_raft_up 0/1 on $v nodes)" test "$v" = 1/2
  v="$(FETCH=0 metric_value patroni_raft_voters "$S" || echo '?')/$(FETCH=0 metric_value patroni_raft_voters_with_quorum "$S" || echo '?')"
  check "2: $s: voters 3, voters_with_quorum 2 (is $v)" test "$v" = 3/2
  v=$(FETCH=0 metric_value patroni_raft_node_info "$S,node=\"${W[$s]}\",kind=\"witness\"" 2>/dev/null || echo absent)
  check "2: $s: ${W[$s]} still kind=witness while down (is $v)" test "$v" = 1
  v=$(FETCH=0 metric_value patroni_raft_witnesses "$S" 2>/dev/null || echo absent)
  check "2: $s: patroni_raft_witnesses 1 (is $v)" test "$v" = 1
  # ground truth
  if raft "$s" w "down-$s-w"; then v=answers; else v=down; fi
  check "2: $s: its witness gives no Raft status (ground truth: $v)" test "$v" = down
  for n in 0 1; do
    raft "$s" "$n" "down-$s-$n" || true
    check "2: $s: member $n's own Raft status says has_quorum" test "$(raft_field "down-$s-$n" has_quorum)" = True
  done
  r=$(own_role "$s" "${PRIMARY[$s]}")
  check "2: $s: member ${PRIMARY[$s]} still primary by its own word ($r)" is_primary_role "$r"
done
rc=$(e2e_status host-down -- --config.file exporter.yml)
e2e_result 2 "status --config.file exit code with the watcher host down" "$rc"
for s in "${SCOPES[@]}"; do
  check "2: status names ${W[$s]} unreachable" grep -q "Raft node ${W[$s]} unreachable" "$RUN_DIR/status-host-down.txt"
done
seen=$(e2e_alerts_seen "$T2" "$QL")
check "2: $QL never pending or firing with the watcher host down (ALERTS: '$seen')" test -z "$seen"
# the rules do evaluate both scopes (so an empty ALERTS above is an answer): no margin, for both
seen=$(e2e_alerts_seen "$T2" "$NM")
check "2: $NM pending for both clusters (ALERTS: '$seen')" test "$seen" = "$NM{pg-a}/pending $NM{pg-b}/pending"
seen=$(e2e_alerts_seen "$T_PROM" "$ZV")
check "2: $ZV never pending or firing over the whole run, $(e2e_since "$T_PROM")s (ALERTS: '$seen')" test -z "$seen"
e2e_result 2 "alerts with the watcher host down" "$(e2e_alerts_brief)"
# back
T2B=$(e2e_now)
clu pg-a witness start >>"$RUN_DIR/kill-pg-a.log" 2>&1 || on_fail "2: pg-a: cluster.sh witness start"
clu pg-b witness start >>"$RUN_DIR/kill-pg-b.log" 2>&1 || on_fail "2: pg-b: cluster.sh witness start"
for s in "${SCOPES[@]}"; do
  expect "2: $s: margin 1 again with the watcher host back" patroni_raft_quorum_margin "$(sc "$s")" == 1 30
done
e2e_result 2 "watcher host back -> margin 1 for both (s)" "$(e2e_since "$T2B")"

e2e_finish "shared watcher"
}
