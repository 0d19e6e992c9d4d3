#!/usr/bin/env bash
# tls.sh - the exporter against a REAL Patroni + Raft cluster whose REST API is on https with a
# self-signed CA and `verify_client: required` (Charmed PostgreSQL with a TLS relation), its own
# endpoint behind TLS and basic auth, and no secret leaking anywhere.
#
# Usage: tests/e2e/tls.sh [PATRONI_VERSION...]  (default 3.3.8, what Charmed PostgreSQL ships). As
# root in a network namespace of its own (several versions: in parallel), else on the host's
# loopback. Run dir $E2E_WORK/tls-VERSION.
#
#   1. cluster up with TLS=1 (tests/e2e/cluster.sh makes the CA and certificates with openssl)
#   2. the exporter is configured from member 0's patroni.yml (https URL, CA, Raft partners and
#      password), with its own client certificate whose key is encrypted (passphrase from a
#      file), basic auth for its GETs from a password file, and --web.config.file (TLS +
#      bcrypt basic auth); --log.level debug, so that any leak would be logged
#   3. its endpoint: no credentials -> 401, a wrong password -> 401, the right one -> 200,
#      plain http -> no metrics
#   4. metrics over https: patroni_up 1, every member's own API up, Raft quorum on 3 voters
#   5. a second exporter without a client certificate: kind="tls" errors, patroni_up 0
#   6. SIGHUP after rotating the web password: the old one 401, the new one 200, still polling,
#      patroni_exporter_config_last_reload_successful 1; a web config that cannot work and a CA
#      that does not parse: 0, the success timestamp kept, the CA named, still polling; 1 again
#      after the good files are back
#   7. no secret used (REST password, Raft password, key passphrase, both web passwords) in the
#      logs, the /metrics bodies, or the argv and environment of the exporters
#
# Environment: EXPORTER_BIN (default target/debug/patroni-raft-exporter), EXPORTER_PORT (9395;
# the second exporter uses the next port). rc 1 if anything failed.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

# as root in a network namespace of its own, else on the host's loopback after any other user
E2E_DEFAULT_VERSION=3.3.8 E2E_NETNS=optional e2e_scenario tls "$@"
EXPORTER_PORT="${EXPORTER_PORT:-9395}"
PLAIN_PORT=$((EXPORTER_PORT + 1))
export DATA_DIR="${DATA_DIR:-$E2E_WORK/cluster-tls-$PATRONI_VERSION}"
export EXPORTER_URL="https://127.0.0.1:$EXPORTER_PORT/metrics"
export EXPORTER_LOG="$RUN_DIR/exporter.log"
export EXPORTER_CURL_CONFIG="$RUN_DIR/curl-scrape.conf"
PLAIN_LOG="$RUN_DIR/exporter-no-client-cert.log"
S='scope="pg-test"'
WEB_USER=prometheus
WEB_PASS="web-pass-$RANDOM$RANDOM"
WEB_PASS2="web-rotated-$RANDOM$RANDOM"

[[ -x $EXPORTER_BIN ]] || { echo "no exporter binary at $EXPORTER_BIN (cargo build first)" >&2; exit 2; }
e2e_setup
chmod 700 "$RUN_DIR"

# bcrypt_hash: the bcrypt hash (cost 10) of the password on stdin, as htpasswd -B makes it
bcrypt_hash() {
  local password
  IFS= read -r password
  if command -v htpasswd >/dev/null; then
    htpasswd -niBC 10 "" <<<"$password" | tr -d ':\n'
  else
    # Debian 12's python3 (3.11) still has crypt, backed by libxcrypt's bcrypt
    python3 -W ignore -c 'import crypt, sys
print(crypt.crypt(sys.stdin.readline().rstrip("\n"), crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))' <<<"$password"
  fi
}
write_web_config() { # write_web_config PASSWORD
  local hash
  hash=$(bcrypt_hash <<<"$1")
  [[ $hash == "\$2"* ]] || on_fail "cannot make a bcrypt hash (need htpasswd or python3 with crypt)"
  cat >"$RUN_DIR/web.yml" <<EOF
tls_server_config:
  cert_file: $EXPORTER_SERVER_CERT
  key_file: $EXPORTER_SERVER_KEY
  min_version: TLS12
basic_auth_users:
  $WEB_USER: '$hash'
EOF
  # curl reads the credentials from a file: never in its argv either
  printf 'cacert = "%s"\nuser = "%s:%s"\n' "$TLS_CA" "$WEB_USER" "$1" >"$EXPORTER_CURL_CONFIG"
}
http_code() { # http_code CURL_ARGS... -> the status code (000: no HTTP answer)
  curl -s -o /dev/null -w '%{http_code}' -m 5 "$@" || true
}

e2e_log "=== TLS matrix Patroni $PATRONI_VERSION"

# ---------------------------------------------------------------- 1. cluster on https
TLS=1 cluster up >&2 || on_fail "TLS cluster up"
eval "$(cluster env)"   # MEMBERn_*, REST_*, RAFT_PASS, TLS_CA, EXPORTER_CLIENT_*, KEY_PASS, ...
[[ $REST_SCHEME == https ]] || on_fail "cluster is not on https"
pass "1: cluster up on https with verify_client: required"
code=$(http_code --cacert "$TLS_CA" "$MEMBER0_REST/cluster")
if [[ $code == 000 || $code -ge 400 ]]; then pass "1: a member refuses a client without certificate ($code)"
else on_fail "1: a member answered $code without a client certificate"; fi

# ---------------------------------------------------------------- 2. the exporter
( umask 077; printf '%s\n' "$REST_PASS" >"$RUN_DIR/rest-secret" ); cp "$TLS_CA" "$RUN_DIR/ca.pem"
write_web_config "$WEB_PASS"
"$EXPORTER_BIN" \
  --patroni.config-file "$MEMBER0_CONFIG" --patroni.ca-file "$RUN_DIR/ca.pem" \
  --patroni.cert-file "$EXPORTER_CLIENT_CERT" --patroni.key-file "$EXPORTER_CLIENT_KEY" \
  --patroni.key-password-file "$EXPORTER_KEY_PASS_FILE" \
  --patroni.username "$REST_USER" --patroni.password-file "$RUN_DIR/rest-secret" \
  --web.config.file "$RUN_DIR/web.yml" --web.listen-address "127.0.0.1:$EXPORTER_PORT" \
  --poll.interval 2s --poll.timeout 1s --log.level debug >"$EXPORTER_LOG" 2>&1 9>&- &
EXPORTER_PID=$!
E2E_PIDS+=("$EXPORTER_PID")
e2e_log "exporter pid $EXPORTER_PID on https://127.0.0.1:$EXPORTER_PORT (log $EXPORTER_LOG)"
ensure "2: the exporter's client key is encrypted" \
  "2: the exporter's client key is not encrypted" grep -q 'BEGIN ENCRYPTED PRIVATE KEY' "$EXPORTER_CLIENT_KEY"

# ---------------------------------------------------------------- 3. its endpoint
expect "3: /metrics over TLS with basic auth" patroni_exporter_build_info '...' present - 15
code=$(http_code --cacert "$TLS_CA" "https://127.0.0.1:$EXPORTER_PORT/metrics")
ensure "3: no credentials: 401" "3: no credentials: got $code, want 401" test "$code" = 401
printf 'cacert = "%s"\nuser = "%s:%s"\n' "$TLS_CA" "$WEB_USER" "not-the-password" >"$RUN_DIR/curl-wrong.conf"
code=$(http_code -K "$RUN_DIR/curl-wrong.conf" "https://127.0.0.1:$EXPORTER_PORT/metrics")
ensure "3: wrong password: 401" "3: wrong password: got $code, want 401" test "$code" = 401
code=$(http_code -K "$EXPORTER_CURL_CONFIG" "https://127.0.0.1:$EXPORTER_PORT/metrics")
ensure "3: right password: 200" "3: right password: got $code, want 200" test "$code" = 200
code=$(http_code "http://127.0.0.1:$EXPORTER_PORT/metrics")
ensure "3: plain http gets no metrics ($code)" "3: plain http answered 200" test "$code" != 200

# ---------------------------------------------------------------- 4. metrics over https
expect "4: patroni_up over https with a client certificate" patroni_up "$S" == 1 30
expect "4: three members" patroni_cluster_members "$S" == 3 30
for i in 0 1 2; do
  expect "4: postgresql-$i's own API up over https" patroni_member_api_up "$S,member=\"postgresql-$i\"" == 1 20
done
expect "4: Raft quorum (password from patroni.yml)" patroni_raft_cluster_quorum "$S" == 1 20
expect "4: three Raft voters" patroni_raft_voters "$S" == 3 10
expect "4: no TLS errors" patroni_exporter_poll_errors_total "$S,source=\"cluster\",kind=\"tls\"" absent - 5

# ---------------------------------------------------------------- 5. no client certificate
"$EXPORTER_BIN" --patroni.url "$MEMBER0_REST" --patroni.ca-file "$TLS_CA" --patroni.scope pg-test \
  --raft.disabled --poll.interval 1s --poll.timeout 1s \
  --web.listen-address "127.0.0.1:$PLAIN_PORT" --log.level debug >"$PLAIN_LOG" 2>&1 9>&- &
PLAIN_PID=$!
E2E_PIDS+=("$PLAIN_PID")
if EXPORTER_URL="http://127.0.0.1:$PLAIN_PORT/metrics" EXPORTER_CURL_CONFIG="" \
  wait_for_metric patroni_exporter_poll_errors_total "$S,source=\"cluster\",kind=\"tls\"" '>=' 1 20 >/dev/null; then
  pass "5: without a client certificate: kind=\"tls\" (${E2E_ELAPSED}s)"
else
  on_fail "5: without a client certificate: no kind=\"tls\" error"
fi
EXPORTER_URL="http://127.0.0.1:$PLAIN_PORT/metrics" EXPORTER_CURL_CONFIG="" FETCH=1 \
  metric_value patroni_up "$S" >"$RUN_DIR/plain-up.txt" 2>/dev/null || true
if [[ $(cat "$RUN_DIR/plain-up.txt") == 0 ]]; then pass "5: and patroni_up 0"; else on_fail "5: patroni_up is $(cat "$RUN_DIR/plain-up.txt")"; fi
curl -sf -m 5 "http://127.0.0.1:$PLAIN_PORT/metrics" >"$RUN_DIR/metrics-no-client-cert.txt" || true
e2e_stop_pid "$PLAIN_PID"

# ---------------------------------------------------------------- 6. SIGHUP
cp "$EXPORTER_CURL_CONFIG" "$RUN_DIR/curl-old.conf"
write_web_config "$WEB_PASS2"
kill -HUP "$EXPORTER_PID"
# the poller takes its new configuration between two polls (interval 2 s)
for _ in {1..30}; do grep -q 'poller reconfigured' "$EXPORTER_LOG" && break; sleep 0.5; done
code=$(http_code -K "$EXPORTER_CURL_CONFIG" "https://127.0.0.1:$EXPORTER_PORT/metrics")
ensure "6: SIGHUP: the rotated web password works" "6: rotated password: got $code" test "$code" = 200
code=$(http_code -K "$RUN_DIR/curl-old.conf" "https://127.0.0.1:$EXPORTER_PORT/metrics")
ensure "6: SIGHUP: the old web password is refused" "6: old password: got $code" test "$code" = 401
ensure "6: SIGHUP: the poller was reconfigured" "6: no 'poller reconfigured' in the log" grep -q 'poller reconfigured' "$EXPORTER_LOG"
fetch_metrics || on_fail "6: no metrics after SIGHUP"
before=$(metric_value patroni_exporter_last_poll_timestamp_seconds "$S")
expect "6: still polling after SIGHUP" patroni_exporter_last_poll_timestamp_seconds "$S" '>' "$before" 10
expect "6: still patroni_up 1" patroni_up "$S" == 1 10
expect "6: the reload applied" patroni_exporter_config_last_reload_successful "" == 1 10
# a web config that cannot work and a CA that does not parse: refused, the running settings stay
reloaded_at=$(metric_value patroni_exporter_config_last_reload_success_timestamp_seconds)
cp "$RUN_DIR/web.yml" "$RUN_DIR/web-good.yml"
printf 'tls_server_config: [\n' >"$RUN_DIR/web.yml"
printf '%s\n' '-----BEGIN CERTIFICATE-----' 'not base64' '-----END CERTIFICATE-----' >"$RUN_DIR/ca.pem"
kill -HUP "$EXPORTER_PID"
expect "6: a web config and a CA that cannot work are refused" patroni_exporter_config_last_reload_successful "" == 0 10
expect "6: the refused reload keeps the time of the one in force" \
  patroni_exporter_config_last_reload_success_timestamp_seconds "" == "$reloaded_at" 1
before=$(metric_value patroni_exporter_last_poll_timestamp_seconds "$S")
expect "6: still polling after the refused reload" patroni_exporter_last_poll_timestamp_seconds "$S" '>' "$before" 10
ensure "6: the refusal names its cause in the log" "6: no 'web config not reloaded' in the log" grep -q 'web config not reloaded' "$EXPORTER_LOG"
ensure "6: the refusal names the CA file" "6: no 'CA file $RUN_DIR/ca.pem' in the log" grep -qF "CA file $RUN_DIR/ca.pem" "$EXPORTER_LOG"
cp "$RUN_DIR/web-good.yml" "$RUN_DIR/web.yml" && cp "$TLS_CA" "$RUN_DIR/ca.pem"
kill -HUP "$EXPORTER_PID"
expect "6: 1 again after a good reload" patroni_exporter_config_last_reload_successful "" == 1 10

# ---------------------------------------------------------------- 7. no secret anywhere
curl -sf -m 5 -K "$EXPORTER_CURL_CONFIG" "$EXPORTER_URL" >"$RUN_DIR/metrics-final.txt" || on_fail "7: final scrape"
cp "/proc/$EXPORTER_PID/cmdline" "$RUN_DIR/cmdline" 2>/dev/null || on_fail "7: exporter gone"
cp "/proc/$EXPORTER_PID/environ" "$RUN_DIR/environ" 2>/dev/null || true
if kill -0 "$EXPORTER_PID" 2>/dev/null; then pass "7: exporter still running"; else on_fail "7: exporter died"; fi
e2e_stop_pid "$EXPORTER_PID"
for f in "$EXPORTER_LOG" "$RUN_DIR/metrics-final.txt"; do
  [[ $(wc -l <"$f") -gt 20 ]] || on_fail "7: $f is nearly empty: the check below would prove nothing"
done
grep -q 'patroni_raft_cluster_quorum{scope="pg-test"} 1' "$RUN_DIR/metrics-final.txt" \
  || on_fail "7: the final metrics do not show the healthy cluster"
leaks=0
for name in RAFT_PASS REST_PASS KEY_PASS WEB_PASS WEB_PASS2; do
  secret=${!name}
  [[ ${#secret} -ge 8 ]] || on_fail "7: secret $name is too short to grep for"
  for f in "$EXPORTER_LOG" "$PLAIN_LOG" "$RUN_DIR/metrics-final.txt" "$RUN_DIR/metrics-no-client-cert.txt" \
           "$RUN_DIR/cmdline" "$RUN_DIR/environ"; do
    [[ -f $f ]] || continue
    if grep -qaF -- "$secret" "$f"; then
      fail "7: $name appears in $f"
      leaks=$((leaks + 1))
    fi
  done
done
(( leaks == 0 )) && pass "7: no secret in logs ($(wc -l <"$EXPORTER_LOG") lines at debug), /metrics, argv or environment"
grep -q panicked "$EXPORTER_LOG" && on_fail "exporter log shows a panic"

e2e_summary
