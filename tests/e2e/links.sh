#!/usr/bin/env bash
# links.sh - issue #31 part 2, slow and lossy links: a real 3-member Patroni + Raft cluster, the
# exporter as the README quick start (member 0's URL + the Raft password file, --poll.interval 3s,
# --poll.timeout 1s: a poll asks in two rounds, so one member slow beyond the timeout costs it
# two timeouts, within the interval) and a real Prometheus (every 2 s) evaluating the SHIPPED
# alerts/patroni-raft.rules.yml unchanged, all in a network namespace of their own. This kernel has
# no `tc netem`: nftables picks the packets (address, port, the socket's group: MEMBER_GID_BASE)
# and either marks them for iptables' NFQUEUE target, which hands them to netshape.py to hold for
# a delay (DELAY +- JITTER ms, uniform, in order within a connection), or drops a share of them
# itself (`numgen random`). The delays are added to the packets going TO the shaped member, so one
# network round trip gains one delay: a GET /patroni on a fresh connection gains two (connect,
# request), a Raft status with a password three (connect, key exchange, status).
#
# Usage: tests/e2e/links.sh [PATRONI_VERSION...]   (3.3.8 and/or 4.1.5; default 4.1.5).
# Root only (network namespace, nftables, iptables). ~3.5 min; several versions run in parallel,
# each in its own namespace (logs in $E2E_WORK/links-VERSION.log, measurements in
# $E2E_WORK/links-VERSION/results.tsv, the shaper's counters in shaper.json, samples in
# samples-*.tsv). Settings (environment): LINKS_POLL (3) and LINKS_TIMEOUT (1), the exporter's
# --poll.interval and --poll.timeout in whole seconds; DELAY_B, JITTER_B (150, 50 ms); DELAY_A
# (the timeout + 500 ms); LOSS (25 %) for LOSS_S (60 s); SAMPLES (16 polls per phase: the means
# compared in b vary by ~4 %).
#
#   0 healthy; the REST and Raft round trips of member SLOW (2) and of member 1, exported and by
#     hand (curl %{time_total}; pysyncobj's own client TcpUtility, timed in Python), unshaped.
#   b SLOW's REST and Raft, as the exporter (and any client outside the cluster) sees them, delayed
#     DELAY_B +- JITTER_B ms (below the poll timeout). Proof first: by hand, SLOW against member 1.
#     Then SAMPLES polls: verdict 1, 3 members, 1 leader, every API and Raft node up, each
#     member's role as its own GET /patroni says, each replica's lag as the members' own
#     GET /patroni give it (primary's xlog.location - the replica's replayed, within 1 MiB), no
#     poll overran; the exported round trips of SLOW within 20 % of the same request timed by
#     hand through the same shaping (means over the samples), and their rise over phase 0 within
#     20 % of the rise by hand.
#   a the same links delayed DELAY_A ms (above the poll timeout): SLOW reported down, then the
#     proof by hand (curl, TcpUtility: 2 and 3 delays) while the exporter polls on;
#     SLOW's API and Raft node down (patroni_member_api_up 0, patroni_raft_up 0) in SAMPLES
#     polls, the others up with a round trip in every poll, the poll timestamp advancing every
#     poll, the poll duration below the interval and no poll skipped; verdict 1; PatroniRaftQuorumLost,
#     ...QuorumNotVisible, ...NoLeader, PatroniClusterUnreachable, PatroniNoLeader never pending.
#     Healed: SLOW up again.
#   c LOSS % of the packets of SLOW's Raft traffic with the other members dropped (both
#     directions; the exporter's own Raft connections untouched) for LOSS_S s. Proof: nftables'
#     counters (the share dropped) and TcpUtility statuses timed from SLOW's socket group against
#     the same from member 1's group (to node 0). Every ~1.3 s each node's own Raft status
#     (TcpUtility) beside the exporter's verdict: where the nodes' own statuses held one verdict
#     for the last 4 samples (~5 s: a poll interval and its poll; a leader with has_quorum: 1; no
#     node with has_quorum: 0), the exporter says the same;
#     the quorum alerts above never pending while the leader held its quorum. What Raft did
#     (leaders, terms, SLOW's has_quorum) is recorded. Healed: healthy.
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

E2E_TOOLS="nft iptables prometheus" e2e_scenario links "$@"   # each version in a namespace of its own

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-links-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"       # initdb --wal-segsize 1: `down --fast` in < 1 s
GID_BASE="${LINKS_GID_BASE:-64100}"          # member N runs with the primary group GID_BASE+N
export MEMBER_GID_BASE=$GID_BASE
FW=links                                      # the nftables table (in our namespace)
POLL=${LINKS_POLL:-3}                         # --poll.interval (s)
TIMEOUT=${LINKS_TIMEOUT:-1}                   # --poll.timeout (s)
export E2E_POLL_TIMEOUT="${TIMEOUT}s"
SLOW=2                                        # the shaped member (a replica: member 0 bootstraps)
DELAY_B=${DELAY_B:-150} JITTER_B=${JITTER_B:-50}   # ms per packet; REST +2, Raft +3 delays < 1 s
DELAY_A=${DELAY_A:-$((TIMEOUT * 1000 + 500))}  # ms: a connect alone outlasts the timeout
LOSS=${LOSS:-25} LOSS_S=${LOSS_S:-60}
SAMPLES=${SAMPLES:-16}
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
S='scope="pg-test"'
VENV=$(e2e_venv_dir "$PATRONI_VERSION")
QUORUM_ALERTS=(PatroniRaftQuorumLost PatroniRaftQuorumNotVisible PatroniRaftNoLeader PatroniClusterUnreachable PatroniNoLeader)

e2e_setup
# shellcheck disable=SC2317  # e2e_cleanup (the EXIT trap) runs it: rules first, the shaper after
e2e_cleanup_hook() {
  local q
  for q in 1 2; do iptables -w -D OUTPUT -m mark --mark "$q" -j NFQUEUE --queue-num "$q" 2>/dev/null || true; done
  nft delete table inet "$FW" 2>/dev/null || true
}
e2e_log "=== slow and lossy links, Patroni $PATRONI_VERSION, run dir $RUN_DIR"

# ---- helpers
mean() { awk '{ s += $1 } END { if (NR == 0) exit 1; printf "%.4f\n", s / NR }'; }
# within PCT % of B: |A - B| <= PCT/100 * |B|
# shellcheck disable=SC2317  # called through check
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; exit !(d <= p / 100 * b) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
own_json() { curl -sf -m 2 "$(e2e_rest "$1")/patroni" 2>/dev/null || echo '{}'; }
curl_time() { curl -s -o /dev/null -m "${2:-5}" -w '%{time_total}' "$(e2e_rest "$1")/patroni"; }
show_state() {
  e2e_show_metrics "the exporter's view" \
    '^patroni_(raft_(cluster_quorum|quorum_evidence\{.* 1$|up|has_quorum)|member_(api_up|reported_role\{.* 1$|rest_round_trip)|exporter_(poll|last)|up\{)'
  echo "===== Prometheus alerts: $(e2e_alerts_brief)"
  echo "===== shaper: $(cat "$RUN_DIR/shaper.json" 2>/dev/null)"
  echo "===== nftables"; nft list table inet "$FW" 2>&1 | sed 's/^/    /' || true
  echo "===== iptables"; iptables -w -S OUTPUT 2>&1 | sed 's/^/    /' || true
}

# raft_py MODE ARGS: pysyncobj's own client (TcpUtility, as syncobj_admin uses it), timed in Python
#   time NODE N      N statuses of NODE, one 0.2 s apart: the seconds each took ("x" for a failure)
#   own NODE...      each node's own status, one JSON object per node
raft_py() {
  "$VENV/bin/python" - "$RUN_DIR/raft-secret" "$@" <<'PY'
import json, sys, time
from pysyncobj.encryptor import getEncryptor
from pysyncobj.utility import TcpUtility
secret, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(secret, encoding="utf-8") as handle:
    encryptor = getEncryptor(handle.read().strip())
def status(node, timeout):
    utility = TcpUtility(None, timeout)
    utility._TcpUtility__connection.encryptor = encryptor  # pylint: disable=protected-access
    try:
        answer = utility.executeCommand(node, ["status"])
    except Exception:  # pylint: disable=broad-except  # a timeout or a refused connect
        return None
    return answer if isinstance(answer, dict) else None
if mode == "time":
    took = []
    for _ in range(int(args[1])):
        started = time.monotonic()
        answer = status(args[0], 8)
        took.append(f"{time.monotonic() - started:.4f}" if answer else "x")
        time.sleep(0.2)
    print(" ".join(took))
else:
    for node in args:
        answer = status(node, 2) or {}
        leader = answer.get("leader")
        print(json.dumps({"node": node, "answered": bool(answer), "state": answer.get("state"),
                          "has_quorum": answer.get("has_quorum"), "term": answer.get("raft_term"),
                          "leader": None if leader is None else str(leader)}))
PY
}

# ---- the firewall: one table, its `shape` chain empty until a phase fills it. Runs before
# iptables' filter chain (priority mangle), so a mark it sets is what iptables queues.
links_fw_setup() {
  local g=$GID_BASE
  nft -f - <<EOF
table inet $FW {
  chain shape {}
  chain out {
    type filter hook output priority mangle; policy accept;
    ct state new meta skgid $g ct mark set $g
    ct state new meta skgid $((g + 1)) ct mark set $((g + 1))
    ct state new meta skgid $((g + 2)) ct mark set $((g + 2))
    jump shape
  }
}
EOF
}
links_clear() { nft flush chain inet "$FW" shape; }
# links_view MARK: the packets to SLOW's REST and Raft ports from any socket that is not a
# member's (the exporter, curl, TcpUtility), marked for queue MARK
links_view() {
  local g=$GID_BASE
  nft add rule inet "$FW" shape meta skgid != "{ $g, $((g + 1)), $((g + 2)) }" ip daddr "$SLOW_HOST" \
    tcp dport "{ $SLOW_REST_PORT, $SLOW_RAFT_PORT }" counter meta mark set "$1"
}
# links_loss PCT: PCT % of the packets between SLOW's Raft node and the other members' dropped,
# both ways: SLOW's own connections to a Raft port and its node's replies to the other members'
# connections; the other members' connections to SLOW's node and their replies to SLOW's. Each
# kind counted (all, then dropped). The exporter's and our own connections carry no member's mark.
links_loss() {
  local g=$GID_BASE s=$((GID_BASE + SLOW)) others rule
  others="{ $(for n in 0 1 2; do ((n == SLOW)) || printf '%s, ' $((g + n)); done | sed 's/, $//') }"
  for rule in "meta skgid $s ct mark $s tcp dport $SLOW_RAFT_PORT" \
              "meta skgid $s ct mark $others tcp sport $SLOW_RAFT_PORT" \
              "meta skgid $others ct mark $others ip daddr $SLOW_HOST tcp dport $SLOW_RAFT_PORT" \
              "meta skgid $others ct mark $s tcp sport $SLOW_RAFT_PORT"; do
    # shellcheck disable=SC2086  # the rule's words
    nft add rule inet "$FW" shape $rule counter
    # shellcheck disable=SC2086  # the rule's words
    nft add rule inet "$FW" shape $rule numgen random mod 100 '<' "$1" counter drop
  done
}
# the shape chain's counters: "packets dropped" of the loss rules (every other rule's packets
# are the ones seen, the drop rules' the ones dropped)
links_loss_counts() {
  nft list chain inet "$FW" shape | awk '/counter packets/ { for (i = 1; i <= NF; i++) if ($i == "packets") n = $(i + 1)
    if (/drop/) d += n; else a += n } END { print a + 0, d + 0 }'
}

# sample_figures PHASE: one poll's figures against the members' own word; fails the phase on a
# wrong one. Every member's own GET /patroni, then /metrics.
sample_figures() {
  local phase=$1 n own role exp lag_own lag_exp primary_loc="" js
  declare -A roles=() replayed=()
  for n in 0 1 2; do
    js=$(own_json "$n")
    role=$(jq -r '.role // "down"' <<<"$js")
    [[ $role == master ]] && role=primary
    roles[$n]=$role
    if [[ $role == primary ]]; then primary_loc=$(jq -r '.xlog.location // empty' <<<"$js")
    else replayed[$n]=$(jq -r '.xlog.replayed_location // empty' <<<"$js"); fi
  done
  fetch_metrics || on_fail "$phase: /metrics answers"
  for n in 0 1 2; do
    exp=$(FETCH=0 metric_label patroni_member_reported_role "$S,member=\"postgresql-$n\",..." role 1 | head -1)
    [[ $exp == "${roles[$n]}" ]] || { fail "$phase: postgresql-$n reported role '$exp' where its own GET /patroni says '${roles[$n]}'"; return 1; }
    [[ $exp == primary ]] && continue
    lag_exp=$(FETCH=0 metric_value patroni_member_lag_bytes "$S,member=\"postgresql-$n\"") \
      || { fail "$phase: postgresql-$n has no patroni_member_lag_bytes"; return 1; }
    [[ -n $primary_loc && -n ${replayed[$n]} ]] || { fail "$phase: own xlog positions missing"; return 1; }
    lag_own=$((primary_loc - replayed[$n])); ((lag_own < 0)) && lag_own=0
    awk -v a="$lag_exp" -v b="$lag_own" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1048576) }' \
      || { fail "$phase: postgresql-$n lag $lag_exp exported, $lag_own by the members' own GET /patroni"; return 1; }
  done
  for want in "patroni_raft_cluster_quorum 1" "patroni_cluster_members 3" "patroni_cluster_leaders 1" "patroni_up 1"; do
    read -r name value <<<"$want"
    [[ $(FETCH=0 metric_value "$name" "$S") == "$value" ]] || { fail "$phase: $name is not $value"; return 1; }
  done
  [[ $(FETCH=0 metric_count patroni_member_api_up "$S,..." 1) == 3 ]] || { fail "$phase: not every API up"; return 1; }
  [[ $(FETCH=0 metric_count patroni_raft_up "$S,..." 1) == 3 ]] || { fail "$phase: not every Raft node up"; return 1; }
  lt "$(FETCH=0 metric_value patroni_exporter_poll_duration_seconds "$S")" "$POLL" || { fail "$phase: a poll overran"; return 1; }
  return 0
}
# quorum_alerts_quiet: rc 0 when none of QUORUM_ALERTS is pending or firing
quorum_alerts_quiet() {
  local js a
  js=$(e2e_prom_alerts)
  for a in "${QUORUM_ALERTS[@]}"; do [[ -z $(e2e_alert_state "$js" "$a") ]] || return 1; done
}

# ---- the cluster, the firewall (empty), the exporter, Prometheus, the shaper
links_fw_setup || on_fail "nftables table $FW"
cluster up --sync >&2 || on_fail "cluster up --sync"
e2e_result setup "cluster up --sync (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, MEMBERn_RAFT, RAFT_PASS, ...
SLOW_RAFT=$(e2e_member "$SLOW" RAFT) REF_RAFT=$(e2e_member 1 RAFT)
SLOW_HOST=${SLOW_RAFT%:*} SLOW_RAFT_PORT=${SLOW_RAFT##*:}
SLOW_REST_PORT=$(e2e_rest "$SLOW" | sed -E 's#^https?://[^:/]+:([0-9]+).*#\1#')
[[ $(e2e_rest "$SLOW") == *"//$SLOW_HOST:"* ]] || on_fail "member $SLOW's REST and Raft on one address (single address mode cannot be shaped per member)"
RAFT_NODES=("$MEMBER0_RAFT" "$MEMBER1_RAFT" "$MEMBER2_RAFT")

e2e_exporter "$POLL"
e2e_prometheus "$RUN_DIR" || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
E2E_PIDS+=("$E2E_PROM_PID")
for a in "${QUORUM_ALERTS[@]}"; do check "Prometheus loaded the shipped rule $a" e2e_prom_rule_loaded "$a"; done
"$VENV/bin/python" "$E2E_DIR/netshape.py" --stats "$RUN_DIR/shaper.json" --seed 31 \
  "1:delay=$DELAY_A" "2:delay=$DELAY_B,jitter=$JITTER_B" 2>"$RUN_DIR/shaper.log" &
E2E_PIDS+=("$!")
for _ in $(seq 1 50); do [[ -s $RUN_DIR/shaper.json ]] && break; sleep 0.1; done
jq -e .ready "$RUN_DIR/shaper.json" >/dev/null 2>&1 || on_fail "netshape.py bound its queues (log $RUN_DIR/shaper.log)"
for q in 1 2; do iptables -w -A OUTPUT -m mark --mark "$q" -j NFQUEUE --queue-num "$q" || on_fail "iptables NFQUEUE $q"; done

# ================================================================== 0. healthy, unshaped
e2e_log "=== 0: healthy, unshaped"
expect_healthy 0
expect "0: postgresql-$SLOW's round trip exported" patroni_member_rest_round_trip_seconds "$S,member=\"postgresql-$SLOW\"" present - 15
base_rest="" base_raft="" base_hrest=""
for ((k = 0; k < 5; k++)); do
  sleep "$POLL"; fetch_metrics || on_fail "0: /metrics answers"
  base_rest+="$(FETCH=0 metric_value patroni_member_rest_round_trip_seconds "$S,member=\"postgresql-$SLOW\"")"$'\n'
  base_raft+="$(FETCH=0 metric_value patroni_raft_status_round_trip_seconds "$S,node=\"$SLOW_RAFT\"")"$'\n'
  base_hrest+="$(curl_time "$SLOW")"$'\n'
done
B_REST=$(grep . <<<"$base_rest" | mean) B_RAFT=$(grep . <<<"$base_raft" | mean) B_HREST=$(grep . <<<"$base_hrest" | mean)
B_HRAFT=$(raft_py time "$SLOW_RAFT" 5 | tr ' ' '\n' | grep -v x | mean) || on_fail "0: TcpUtility read node $SLOW_RAFT"
e2e_result 0 "postgresql-$SLOW GET /patroni round trip unshaped, mean exported / curl (s)" "$B_REST / $B_HREST"
e2e_result 0 "node $SLOW_RAFT status round trip unshaped, mean exported / TcpUtility (s)" "$B_RAFT / $B_HRAFT"

# ================================================================== b. delay below the timeout
e2e_log "=== b: postgresql-$SLOW's REST and Raft delayed ${DELAY_B} +- ${JITTER_B} ms per packet (the exporter's view)"
links_view 2
# the proof, by hand: the shaped member against member 1, the same requests
p_s=$(for _ in 1 2 3 4 5; do curl_time "$SLOW"; echo; done | mean)
p_r=$(for _ in 1 2 3 4 5; do curl_time 1; echo; done | mean)
e2e_result b "proof: GET /patroni by curl, mean of 5, postgresql-$SLOW (shaped) / postgresql-1 (s)" "$p_s / $p_r"
p_rs=$(raft_py time "$SLOW_RAFT" 5 | tr ' ' '\n' | grep -v x | mean) || p_rs=x
p_rr=$(raft_py time "$REF_RAFT" 5 | tr ' ' '\n' | grep -v x | mean) || p_rr=x
e2e_result b "proof: Raft status by TcpUtility, mean of 5, node $SLOW_RAFT (shaped) / $REF_RAFT (s)" "$p_rs / $p_rr"
# two delays of at least DELAY-JITTER each; member 1 untouched
check "b: proof: the shaped GET /patroni takes >= 2 x $((DELAY_B - JITTER_B)) ms, member 1's < 0.1 s" \
  awk -v s="$p_s" -v r="$p_r" -v m="$(((DELAY_B - JITTER_B) * 2))" 'BEGIN { exit !(s * 1000 >= m && r < 0.1) }'
check "b: proof: the shaped Raft status takes >= 3 x $((DELAY_B - JITTER_B)) ms, node $REF_RAFT's < 0.1 s" \
  awk -v s="$p_rs" -v r="$p_rr" -v m="$(((DELAY_B - JITTER_B) * 3))" 'BEGIN { exit !(s * 1000 >= m && r < 0.1) }'
sleep "$POLL"
exp_rest="" exp_raft="" hand_rest="" hand_raft="" bad=0 max_poll=0
printf 'phase\tt\texported_rest\tcurl\texported_raft\ttcputility\tpoll_duration\n' >"$RUN_DIR/samples-b.tsv"
for ((k = 0; k < SAMPLES; k++)); do
  t0=$(e2e_now)
  sample_figures b || bad=$((bad + 1))
  er=$(FETCH=0 metric_value patroni_member_rest_round_trip_seconds "$S,member=\"postgresql-$SLOW\"") || er=""
  ef=$(FETCH=0 metric_value patroni_raft_status_round_trip_seconds "$S,node=\"$SLOW_RAFT\"") || ef=""
  pd=$(FETCH=0 metric_value patroni_exporter_poll_duration_seconds "$S")
  lt "$max_poll" "$pd" && max_poll=$pd
  hr=$(curl_time "$SLOW")
  hf=$(raft_py time "$SLOW_RAFT" 1)
  printf 'b\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(e2e_since "$T_START")" "$er" "$hr" "$ef" "$hf" "$pd" >>"$RUN_DIR/samples-b.tsv"
  exp_rest+="$er"$'\n' exp_raft+="$ef"$'\n' hand_rest+="$hr"$'\n'
  [[ $hf == x ]] || hand_raft+="$hf"$'\n'
  sleep "$(awk -v p="$POLL" -v e="$(e2e_since "$t0")" 'BEGIN { s = p - e; print (s > 0.1 ? s : 0.1) }')"
done
check "b: every figure right in $SAMPLES polls (roles, lag, verdict, members, leader, APIs and Raft nodes up, no overrun)" test "$bad" = 0
n_er=$(grep -c . <<<"$exp_rest" || true) n_ef=$(grep -c . <<<"$exp_raft" || true)
check "b: postgresql-$SLOW's round trips exported in every poll ($n_er REST, $n_ef Raft of $SAMPLES)" test "$n_er$n_ef" = "$SAMPLES$SAMPLES"
E_REST=$(grep . <<<"$exp_rest" | mean) || E_REST=0
E_RAFT=$(grep . <<<"$exp_raft" | mean) || E_RAFT=0
H_REST=$(grep . <<<"$hand_rest" | mean) || H_REST=0
H_RAFT=$(grep . <<<"$hand_raft" | mean) || H_RAFT=0
e2e_result b "postgresql-$SLOW GET /patroni round trip, mean exported / curl (s)" "$E_REST / $H_REST"
e2e_result b "node $SLOW_RAFT status round trip, mean exported / TcpUtility (s)" "$E_RAFT / $H_RAFT"
e2e_result b "largest poll duration (s; interval $POLL)" "$max_poll"
e2e_result b "shaper queue 2: packets, mean / largest added delay (ms)" \
  "$(jq -r '.queues["2"] | "\(.packets), \(.mean_added_ms) / \(.max_added_ms)"' "$RUN_DIR/shaper.json")"
check "b: exported REST round trip $E_REST s within 20 % of curl's $H_REST s" within "$E_REST" "$H_REST" 20
check "b: exported Raft round trip $E_RAFT s within 20 % of TcpUtility's $H_RAFT s" within "$E_RAFT" "$H_RAFT" 20
rise_e=$(awk -v a="$E_REST" -v b="$B_REST" 'BEGIN { printf "%.4f", a - b }') rise_h=$(awk -v a="$H_REST" -v b="$B_HREST" 'BEGIN { printf "%.4f", a - b }')
e2e_result b "rise of the REST round trip over phase 0, exported / curl (s)" "$rise_e / $rise_h"
check "b: the exported REST round trip rose by $rise_e s, within 20 % of curl's rise $rise_h s" within "$rise_e" "$rise_h" 20
rise_e=$(awk -v a="$E_RAFT" -v b="$B_RAFT" 'BEGIN { printf "%.4f", a - b }') rise_h=$(awk -v a="$H_RAFT" -v b="$B_HRAFT" 'BEGIN { printf "%.4f", a - b }')
e2e_result b "rise of the Raft round trip over phase 0, exported / TcpUtility (s)" "$rise_e / $rise_h"
check "b: the exported Raft round trip rose by $rise_e s, within 20 % of TcpUtility's rise $rise_h s" within "$rise_e" "$rise_h" 20
check "b: no quorum alert pending or firing" quorum_alerts_quiet
links_clear

# ================================================================== a. delay above the timeout
e2e_log "=== a: postgresql-$SLOW's REST and Raft delayed ${DELAY_A} ms per packet (above the ${TIMEOUT} s poll timeout)"
skipped0=$(metric_value patroni_exporter_polls_skipped_total "$S") || skipped0=0
links_view 1
T_A=$(e2e_now)
expect "a: postgresql-$SLOW's API reported down" patroni_member_api_up "$S,member=\"postgresql-$SLOW\"" == 0 $((3 * POLL))
e2e_result a "shaping -> patroni_member_api_up{postgresql-$SLOW} 0 (s)" "$(e2e_since "$T_A")"
expect "a: node $SLOW_RAFT's Raft reported down" patroni_raft_up "$S,node=\"$SLOW_RAFT\"" == 0 $((3 * POLL))
e2e_result a "shaping -> patroni_raft_up{$SLOW_RAFT} 0 (s)" "$(e2e_since "$T_A")"
# the proof, by hand, while the exporter keeps polling
p_s=$(curl_time "$SLOW" 8) p_r=$(curl_time 1)
e2e_result a "proof: GET /patroni by curl, postgresql-$SLOW (shaped) / postgresql-1 (s)" "$p_s / $p_r"
p_rs=$(raft_py time "$SLOW_RAFT" 1) p_rr=$(raft_py time "$REF_RAFT" 1)
e2e_result a "proof: Raft status by TcpUtility, node $SLOW_RAFT (shaped) / $REF_RAFT (s)" "$p_rs / $p_rr"
check "a: proof: the shaped GET /patroni takes >= 2 x $DELAY_A ms, member 1's < 0.1 s" \
  awk -v s="$p_s" -v r="$p_r" -v m="$((DELAY_A * 2))" 'BEGIN { exit !(s * 1000 >= m && r < 0.1) }'
check "a: proof: the shaped Raft status takes >= 3 x $DELAY_A ms, node $REF_RAFT's < 0.1 s" \
  awk -v s="$p_rs" -v r="$p_rr" -v m="$((DELAY_A * 3))" 'BEGIN { exit !(s * 1000 >= m && r < 0.1) }'
bad="" last_ts=0 stale=0 max_poll=0 loud=""
for ((k = 0; k < SAMPLES; k++)); do
  sleep "$POLL"
  fetch_metrics || on_fail "a: /metrics answers"
  ts=$(FETCH=0 metric_value patroni_exporter_last_poll_timestamp_seconds "$S")
  lt "$last_ts" "$ts" || stale=$((stale + 1))
  last_ts=$ts
  pd=$(FETCH=0 metric_value patroni_exporter_poll_duration_seconds "$S")
  lt "$max_poll" "$pd" && max_poll=$pd
  lt "$pd" "$POLL" || bad+=" poll_duration=$pd"
  [[ $(FETCH=0 metric_value patroni_raft_cluster_quorum "$S") == 1 ]] || bad+=" verdict@$k"
  [[ $(FETCH=0 metric_value patroni_member_api_up "$S,member=\"postgresql-$SLOW\"") == 0 ]] || bad+=" slow_api_up@$k"
  [[ $(FETCH=0 metric_value patroni_raft_up "$S,node=\"$SLOW_RAFT\"") == 0 ]] || bad+=" slow_raft_up@$k"
  for n in 0 1 2; do
    ((n == SLOW)) && continue
    [[ $(FETCH=0 metric_value patroni_member_api_up "$S,member=\"postgresql-$n\"") == 1 ]] || bad+=" api_up$n@$k"
    FETCH=0 metric_value patroni_member_rest_round_trip_seconds "$S,member=\"postgresql-$n\"" >/dev/null || bad+=" rtt$n@$k"
    [[ $(FETCH=0 metric_value patroni_raft_up "$S,node=\"${RAFT_NODES[$n]}\"") == 1 ]] || bad+=" raft_up$n@$k"
  done
  quorum_alerts_quiet || loud+=" $(e2e_alerts_brief)@$k"
done
skipped1=$(FETCH=0 metric_value patroni_exporter_polls_skipped_total "$S") || skipped1=0
e2e_result a "largest poll duration (s; interval $POLL, timeout $TIMEOUT)" "$max_poll"
e2e_result a "polls skipped in the phase / the phase's length (s)" "$((${skipped1%.*} - ${skipped0%.*})) / $(e2e_since "$T_A")"
e2e_result a "alerts at the end of the phase" "$(e2e_alerts_brief)"
check "a: in $SAMPLES polls: $SLOW down, the others up and fresh, verdict 1, no poll overran${bad:+ (saw:$bad)}" test -z "$bad"
check "a: the poll timestamp advanced at every sample (stale $stale of $SAMPLES)" test "$stale" = 0
check "a: no poll skipped" test "${skipped1%.*}" = "${skipped0%.*}"
check "a: no quorum alert pending or firing${loud:+ (saw:$loud)}" test -z "$loud"
links_clear
T_H=$(e2e_now)
expect "a: healed: postgresql-$SLOW's API up again" patroni_member_api_up "$S,member=\"postgresql-$SLOW\"" == 1 $((4 * POLL))
expect "a: healed: node $SLOW_RAFT up again" patroni_raft_up "$S,node=\"$SLOW_RAFT\"" == 1 $((4 * POLL))
e2e_result a "healed -> API and Raft of postgresql-$SLOW up (s)" "$(e2e_since "$T_H")"

# ================================================================== c. loss on SLOW's Raft links
e2e_log "=== c: ${LOSS} % of postgresql-$SLOW's Raft packets with the other members dropped, ${LOSS_S} s"
links_loss "$LOSS"
T_C=$(e2e_now)
# the proof: statuses from SLOW's socket group to node 0 (a lossy member link) against the same
# from member 1's group (untouched); setpriv changes the group only
PROOF_PIDS=()
# (in the background, beside the samples below)
for g in "$SLOW" 1; do
  setpriv --regid $((GID_BASE + g)) --clear-groups -- bash -c "$(declare -f raft_py); VENV=$VENV RUN_DIR=$RUN_DIR raft_py time $MEMBER0_RAFT 10" \
    >"$RUN_DIR/proof-c-$g.txt" 2>/dev/null &
  PROOF_PIDS+=("$!")
done
printf 'phase\tt\ttruth\texporter\tevidence\tnodes\n' >"$RUN_DIR/samples-c.tsv"
compared=0 mismatch="" loud="" truths="" slow_noq=0 samples=0 leaders="" terms=""
while lt "$(e2e_since "$T_C")" "$LOSS_S"; do
  own=$(raft_py own "${RAFT_NODES[@]}")
  truth=$(jq -rs 'if any(.[]; .state == 2 and .has_quorum == true) then "1"
    elif all(.[]; .answered) and all(.[]; .has_quorum != true) then "0" else "?" end' <<<"$own")
  fetch_metrics || on_fail "c: /metrics answers"
  v=$(FETCH=0 metric_value patroni_raft_cluster_quorum "$S" || echo absent)
  ev=$(FETCH=0 metric_label patroni_raft_quorum_evidence "$S,..." evidence 1 | head -1)
  nodes=$(jq -rs 'map("\(.node)=\(.state // "-")/\(.has_quorum // "-")/t\(.term // "-")") | join(" ")' <<<"$own")
  printf 'c\t%s\t%s\t%s\t%s\t%s\n' "$(e2e_since "$T_C")" "$truth" "$v" "$ev" "$nodes" >>"$RUN_DIR/samples-c.tsv"
  samples=$((samples + 1))
  [[ $(jq -r --arg n "$SLOW_RAFT" 'select(.node == $n) | .has_quorum' <<<"$own") == true ]] || slow_noq=$((slow_noq + 1))
  leaders+=$(jq -r 'select(.state == 2) | " \(.node)"' <<<"$own")
  terms+=$(jq -r '" \(.term // empty)"' <<<"$own")
  truths="${truth:0:1}${truths:0:3}"  # the last four, newest first
  if [[ $truths =~ ^(1111|0000)$ ]]; then
    compared=$((compared + 1))
    [[ $v == "${truth:0:1}" ]] || mismatch+=" truth=${truth:0:1},exporter=$v@$(e2e_since "$T_C")s"
  fi
  if [[ ${truth:0:1} == 1 ]] && ! quorum_alerts_quiet; then loud+=" $(e2e_alerts_brief)@$(e2e_since "$T_C")s"; fi
  sleep 1
done
read -r seen dropped <<<"$(links_loss_counts)"
for pid in "${PROOF_PIDS[@]}"; do wait "$pid" || true; done
m0=$(cat "$RUN_DIR/proof-c-$SLOW.txt") m1=$(cat "$RUN_DIR/proof-c-1.txt")
f0=$(tr ' ' '\n' <<<"$m0" | grep -c x || true) f1=$(tr ' ' '\n' <<<"$m1" | grep -c x || true)
a0=$(tr ' ' '\n' <<<"$m0" | grep -v x | mean || echo x) a1=$(tr ' ' '\n' <<<"$m1" | grep -v x | mean || echo x)
e2e_result c "proof: 10 Raft statuses of node $MEMBER0_RAFT from postgresql-$SLOW's group / postgresql-1's: mean s (failed)" "$a0 ($f0) / $a1 ($f1)"
e2e_result c "proof: the slowest of them (s), from postgresql-$SLOW's group / postgresql-1's" \
  "$(tr ' ' '\n' <<<"$m0" | grep -v x | sort -g | tail -1) / $(tr ' ' '\n' <<<"$m1" | grep -v x | sort -g | tail -1)"
check "c: proof: the lossy member link's statuses slower on average than the untouched one's (or some failed)" \
  awk -v a="$a0" -v b="$a1" -v f="$f0" 'BEGIN { exit !(f > 0 || a > b) }'
e2e_result c "nftables: packets on postgresql-$SLOW's member Raft links / dropped (share)" \
  "$seen / $dropped ($(awk -v a="$seen" -v d="$dropped" 'BEGIN { printf "%.1f %%", a ? 100 * d / a : 0 }'))"
check "c: proof: $dropped of $seen packets dropped, within $((LOSS - 8))-$((LOSS + 8)) %" \
  awk -v a="$seen" -v d="$dropped" -v l="$LOSS" 'BEGIN { exit !(a >= 100 && 100 * d / a >= l - 8 && 100 * d / a <= l + 8) }'
e2e_result c "samples; postgresql-$SLOW's own has_quorum false in" "$samples; $slow_noq"
e2e_result c "Raft leaders seen (own status state 2)" "$(tr ' ' '\n' <<<"$leaders" | grep . | sort | uniq -c | awk '{ printf "%s%s x%s", s, $2, $1; s = ", " }')"
e2e_result c "Raft terms seen" "$(tr ' ' '\n' <<<"$terms" | grep . | sort -n | uniq | tr '\n' ' ')"
e2e_result c "exporter verdicts seen (evidence)" "$(awk -F'\t' 'NR > 1 { print $4 "/" $5 }' "$RUN_DIR/samples-c.tsv" | sort | uniq -c | awk '{ printf "%s%s x%s", s, $2, $1; s = ", " }')"
e2e_result c "alerts at the end of the phase" "$(e2e_alerts_brief)"
check "c: the nodes' own statuses were steady in at least half the samples ($compared of $samples)" test $((compared * 2)) -ge "$samples"
check "c: the exporter's verdict matched the nodes' own statuses where they were steady ($compared samples)${mismatch:+:$mismatch}" test -z "$mismatch"
check "c: no quorum alert pending or firing while the leader held its quorum${loud:+ (saw:$loud)}" test -z "$loud"
links_clear
T_H=$(e2e_now)
expect_healthy c
e2e_result c "healed -> healthy (s)" "$(e2e_since "$T_H")"
check "c: no quorum alert pending or firing after the heal" quorum_alerts_quiet

e2e_log "=== cleanup: the queues' rules, the table, the shaper"
e2e_cleanup_hook
check "no iptables rule of ours left" bash -c "! iptables -w -S OUTPUT | grep -q NFQUEUE"
check "no nftables table of ours left" bash -c "! nft list table inet $FW >/dev/null 2>&1"
e2e_finish "slow and lossy links"
}
