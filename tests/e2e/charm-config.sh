#!/usr/bin/env bash
# charm-config.sh - the exporter configured by Charmed PostgreSQL's own patroni.yml and nothing
# else, in stereo mode (two members and the watcher, as the charm's template renders it). The template is the library package's
# single_kernel_postgresql/templates/patroni.yml.j2 (postgresql-charms-single-kernel, pinned in
# tests/e2e/requirements-charm.txt, installed by scripts/install-deps.sh into
# $E2E_WORK/venv-charm; never copied into the repository), rendered with jinja2 as the charm
# renders it (tests/e2e/render-charm-patroni.py) for member 0 of a REAL Patroni + Raft cluster
# whose REST API is on https (cluster.sh TLS=1) without `verify_client`, as the charm's template
# configures the members, with two members and a Raft-only witness (cluster.sh MEMBERS=2
# WITNESS_PORT=2224: Patroni's patroni_raft_controller, as the charm's postgresql-watcher) that
# the template puts in raft.partner_addrs (CHARM_STEREO=0: three members and no witness). The cluster's CA, member 0's certificate and key are put where the
# template expects them (conf_path: peer_ca.pem, peer_cert.pem, peer_key.pem).
#
#   1 the rendering: restapi on https with the peer files and REST authentication, ctl with the
#     peer CA only, no verify_client, raft.partner_addrs the other members (and CHARM_WATCHER)
#   2 the exporter run with ONLY --patroni.config-file <rendered> and --web.listen-address: it
#     finds every member over https, verified with the peer CA (patroni_member_api_up 1 for
#     each member, their api_url https, no TLS error), every Raft voter of the file with the
#     password read from it, the witness included (patroni_raft_up 1 for each, verdict 1, the
#     witness kind="witness"), the scope of the file
#   3 the same rendering with a peer_ca.pem of another CA: no member answers (kind="tls"
#     errors), so step 2 did verify the members' certificates
#
# Usage: tests/e2e/charm-config.sh [PATRONI_VERSION...]   (default 3.3.8, what the charm ships).
# Root only (network namespace). ~1 min per version. CHARM_PARTNERS (comma-separated addresses,
# no port) replaces the partner list given to the template; CHARM_WATCHER=host:port replaces the
# witness's address given to it (default: the cluster's witness; it must answer as a voter).
set -euo pipefail
{ # parsed whole before it runs: editing this file during a run cannot derail the run

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

if [[ ${E2E_IN_NETNS:-} != 1 && ! -d $(e2e_charm_package_dir || true) ]]; then
  "$E2E_REPO/scripts/install-deps.sh" --no-apt --no-cargo --patroni "${1:-3.3.8}" >&2
fi
E2E_DEFAULT_VERSION=3.3.8 E2E_TOOLS="openssl python3" e2e_scenario charm-config "$@"

# ------------------------------------------------------------------ in the namespace: the scenario
export DATA_DIR="$E2E_WORK/cluster-charm-config-$PATRONI_VERSION"
export WAL_SEGSIZE="${WAL_SEGSIZE:-1}"
export ADDR_MODE=multi                       # the template's fixed ports: REST 8008, Raft 2222
export EXPORTER_URL="http://127.0.0.1:9393/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
WRONG_CA_URL="http://127.0.0.1:9394/metrics"
S='scope="pg-test"'

e2e_setup
chmod 700 "$RUN_DIR"
e2e_log "=== Charmed PostgreSQL's patroni.yml.j2 rendered, the exporter on it alone, Patroni $PATRONI_VERSION"
show_state() { e2e_show_metrics "the exporter's view" '^patroni_(up|member_(api_up|info)|raft_(up|cluster_quorum)|exporter_poll_errors_total)'; }

if [[ ${CHARM_STEREO:-1} == 1 ]]; then export MEMBERS=2 WITNESS_PORT=2224; else export MEMBERS=3; fi
TLS=1 TLS_VERIFY_CLIENT=none cluster up --sync >&2 || on_fail "cluster up (TLS, no verify_client)"
e2e_result setup "cluster up --sync, https, $MEMBERS members (s since start)" "$(e2e_since "$T_START")"
eval "$(cluster env)"   # MEMBERn_REST, MEMBERn_RAFT, WITNESS_RAFT, TLS_DIR, RAFT_PASS, REST_PASS
CHARM_WATCHER=${CHARM_WATCHER:-${WITNESS_RAFT:-}}
[[ $MEMBER0_REST == https://* ]] || on_fail "the cluster's REST is not on https ($MEMBER0_REST)"

# ---- 1. the rendering, for member 0
conf="$RUN_DIR/unit-0/etc/patroni"   # conf_path of the charm (the snap's etc/patroni)
mkdir -p "$conf"
install -m 644 "$TLS_DIR/ca.pem" "$conf/peer_ca.pem"
install -m 644 "$TLS_DIR/member-0.pem" "$conf/peer_cert.pem"
install -m 600 "$TLS_DIR/member-0-key.pem" "$conf/peer_key.pem"
self_ip=${MEMBER0_RAFT%:*}
partners=${CHARM_PARTNERS:-}
if [[ -z $partners ]]; then
  for ((n = 1; n < MEMBERS; n++)); do
    raft=$(e2e_member "$n" RAFT)
    [[ ${raft##*:} == 2222 ]] || on_fail "member $n's Raft is on $raft: the template puts every peer on 2222"
    partners+=${partners:+,}${raft%:*}
  done
fi
rendered="$RUN_DIR/unit-0/patroni.yml"
render() { # render CONF_PATH OUT
  CHARM_RAFT_PASSWORD=$RAFT_PASS CHARM_PATRONI_PASSWORD=$REST_PASS \
    "$(e2e_charm_venv_dir)/bin/python" "$E2E_DIR/render-charm-patroni.py" --scope pg-test \
    --member "$MEMBER0_NAME" --self-ip "$self_ip" --partners "$partners" \
    ${CHARM_WATCHER:+--watcher "$CHARM_WATCHER"} --conf-path "$1" "$2"
}
render "$conf" "$rendered" 2>>"$RUN_DIR/render.log" || on_fail "1: rendering patroni.yml.j2 (log $RUN_DIR/render.log)"
e2e_result 1 "rendered" "$(cat "$RUN_DIR/render.log")"
voters=$(python3 - "$rendered" "$conf" "$self_ip" "$partners" "${CHARM_WATCHER:-}" <<'PYEOF'
import sys, yaml
path, conf, self_ip, partners, watcher = sys.argv[1:]
d = yaml.safe_load(open(path))
r, c, raft = d["restapi"], d["ctl"], d["raft"]
want = [f"{p}:2222" for p in partners.split(",") if p] + ([watcher] if watcher else [])
problems = []
if r.get("connect_address") != f"{self_ip}:8008": problems.append(f"connect_address {r.get('connect_address')}")
for key, name in (("cafile", "peer_ca.pem"), ("certfile", "peer_cert.pem"), ("keyfile", "peer_key.pem")):
    if r.get(key) != f"{conf}/{name}": problems.append(f"restapi.{key} {r.get(key)}")
if "verify_client" in r: problems.append("restapi.verify_client set")
if (r.get("authentication") or {}).get("username") != "patroni": problems.append("no restapi.authentication")
if c != {"cacert": f"{conf}/peer_ca.pem"}: problems.append(f"ctl {c}")
if raft.get("self_addr") != f"{self_ip}:2222" or raft.get("partner_addrs") != want: problems.append(f"raft {raft.get('self_addr')} {raft.get('partner_addrs')}")
if not raft.get("password"): problems.append("no raft.password")
if problems:
    sys.exit("; ".join(problems))
print(1 + len(want))
PYEOF
) || on_fail "1: the rendering is not the shape this test expects"
pass "1: rendered: restapi https with peer_ca/peer_cert/peer_key and authentication, ctl the peer CA only, no verify_client, $voters Raft voters"

# ---- 2. the exporter with the rendered file alone
T2=$(e2e_now)
"$EXPORTER_BIN" --patroni.config-file "$rendered" --web.listen-address 127.0.0.1:9393 >"$EXPORTER_LOG" 2>&1 9>&- &
EXPORTER_PID=$!
E2E_PIDS+=("$EXPORTER_PID")
expect "2: patroni_up 1 (the scope and URL of the file)" patroni_up "$S" == 1 30
for ((n = 0; n < MEMBERS; n++)); do
  name=$(e2e_member "$n" NAME)
  expect "2: $name's own API answers over https" patroni_member_api_up "$S,member=\"$name\"" == 1 20
done
fetch_metrics || on_fail "2: scrape"
https=$(FETCH=0 metric_label patroni_member_info "$S,..." api_url | grep -c '^https://' || true)
check "2: every member's api_url is https ($https of $MEMBERS)" test "$https" = "$MEMBERS"
check "2: no TLS error" test "$(FETCH=0 metric_count patroni_exporter_poll_errors_total "$S,kind=\"tls\",...")" = 0
expect "2: the Raft verdict 1 (quorum confirmed)" patroni_raft_cluster_quorum "$S" == 1 30
fetch_metrics || on_fail "2: scrape"
up=$(FETCH=0 metric_count patroni_raft_up "$S,..." 1)
check "2: every Raft voter of the file answers with the file's password ($up of $voters)" test "$up" = "$voters"
if [[ -n ${CHARM_WATCHER:-} ]]; then
  expect "2: the watcher $CHARM_WATCHER is a witness" patroni_raft_node_info "$S,node=\"$CHARM_WATCHER\",kind=\"witness\"" == 1 20
  expect "2: one witness" patroni_raft_witnesses "$S" == 1 5
  expect "2: the members' voters are members" patroni_raft_node_info "$S,node=\"$MEMBER0_RAFT\",kind=\"member\"" == 1 5
  expect "2: no zombie: voters - witnesses = members" patroni_raft_voters "$S" == "$(( MEMBERS + 1 ))" 5
fi
e2e_result 2 "exporter start -> every member and voter (s)" "$(e2e_since "$T2")"
if grep -qF -e "$RAFT_PASS" -e "$REST_PASS" "$EXPORTER_LOG"; then on_fail "2: a password of the file is in the exporter's log"; fi
pass "2: neither password of the file in the exporter's log"

# ---- 3. another CA: the members' certificates are verified
wrong="$RUN_DIR/wrong-ca/etc/patroni"
mkdir -p "$wrong"
( umask 077
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -keyout "$RUN_DIR/wrong-ca/ca-key.pem" -out "$wrong/peer_ca.pem" -subj "/CN=another CA" 2>/dev/null ) \
  || on_fail "3: a CA of our own"
cp "$conf/peer_cert.pem" "$conf/peer_key.pem" "$wrong/"
render "$wrong" "$RUN_DIR/wrong-ca/patroni.yml" 2>>"$RUN_DIR/render.log" || on_fail "3: rendering"
"$EXPORTER_BIN" --patroni.config-file "$RUN_DIR/wrong-ca/patroni.yml" --web.listen-address 127.0.0.1:9394 \
  >"$RUN_DIR/exporter-wrong-ca.log" 2>&1 9>&- &
E2E_PIDS+=("$!")
EXPORTER_URL=$WRONG_CA_URL expect "3: with another CA's peer_ca.pem: kind=\"tls\" errors" \
  patroni_exporter_poll_errors_total "$S,source=\"cluster\",kind=\"tls\"" '>=' 1 20
EXPORTER_URL=$WRONG_CA_URL expect "3: ... and patroni_up 0" patroni_up "$S" == 0 10

e2e_finish "Charmed PostgreSQL's patroni.yml, rendered, as the exporter's only configuration"
}
