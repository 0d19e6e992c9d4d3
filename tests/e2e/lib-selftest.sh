#!/usr/bin/env bash
# lib-selftest.sh - test the helpers of lib.sh against a static metrics file served by a
# throw-away `python3 -m http.server` on 127.0.0.1 (no cluster needed, ~10 s).
#
# Usage: tests/e2e/lib-selftest.sh
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$E2E_DIR/lib.sh"

TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

cat >"$TMP/metrics" <<'EOF'
# HELP patroni_raft_has_quorum 1 if the Raft node has quorum.
# TYPE patroni_raft_has_quorum gauge
patroni_raft_has_quorum{scope="pg-test",member="postgresql-0"} 1
patroni_raft_has_quorum{member="postgresql-1",scope="pg-test"} 0
patroni_raft_has_quorum_total 7
patroni_up 1
patroni_weird{scope="pg-test",msg="a \"quoted\", {braced} value\\",x="y"} 42 1700000000000
patroni_lag_bytes{member="postgresql-2"} 1.5e+06
patroni_nan{member="postgresql-2"} NaN
patroni_inf{le="+Inf"} +Inf
patroni_spaces { a = "1" , b = "2" } 3
http_requests_bucket{le="0.1",path="/metrics"} 5
http_requests_bucket{le="+Inf",path="/metrics"} 9
EOF

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$TMP" && exec python3 -m http.server --bind 127.0.0.1 "$PORT" >"$TMP/server.log" 2>&1) &
SERVER_PID=$!
export EXPORTER_URL="http://127.0.0.1:$PORT/metrics"
for _ in $(seq 1 50); do curl -sf -m 1 -o /dev/null "$EXPORTER_URL" && break; sleep 0.1; done

expect_value() { # expect_value WANT NAME LABELS
  local got rc=0
  got=$(metric_value "$2" "$3" 2>/dev/null) || rc=$?
  if [[ $rc -eq 0 && $got == "$1" ]]; then pass "metric_value $2{$3} = $1"
  else fail "metric_value $2{$3}: want '$1', got '$got' rc=$rc"; fi
}
expect_rc() { # expect_rc RC NAME LABELS
  local rc=0
  metric_value "$2" "$3" >/dev/null 2>&1 || rc=$?
  if [[ $rc -eq $1 ]]; then pass "metric_value $2{$3} rc=$1"; else fail "metric_value $2{$3}: want rc $1, got $rc"; fi
}

# exact, order-independent label matching
expect_value 1 patroni_raft_has_quorum 'scope="pg-test",member="postgresql-0"'
expect_value 1 patroni_raft_has_quorum 'member="postgresql-0",scope="pg-test"'
expect_value 0 patroni_raft_has_quorum 'scope="pg-test",member="postgresql-1"'
expect_rc 1 patroni_raft_has_quorum 'member="postgresql-0"'             # not the whole label set
expect_rc 1 patroni_raft_has_quorum 'scope="pg-test",member="postgresql-9"'
expect_rc 1 patroni_raft_has_quorum 'scope="pg-test",member="postgresql-0",x="1"'
expect_rc 1 patroni_raft_has_quorum 'scope="pg",member="postgresql-0"'   # no prefix matching
expect_value 1 patroni_raft_has_quorum 'member="postgresql-0",...'      # subset match
expect_rc 2 patroni_raft_has_quorum '...'                               # ambiguous
# names are exact (no prefix match), label-less samples
expect_value 7 patroni_raft_has_quorum_total ''
expect_value 1 patroni_up ''
expect_rc 1 patroni_u ''
expect_rc 1 patroni_up 'a="b"'
# escaped quotes, commas and braces inside values; timestamps are not the value
expect_value 42 patroni_weird 'x="y",scope="pg-test",msg="a \"quoted\", {braced} value\\"'
expect_value 1.5e+06 patroni_lag_bytes 'member="postgresql-2"'
expect_value NaN patroni_nan 'member="postgresql-2"'
expect_value +Inf patroni_inf 'le="+Inf"'
expect_value 3 patroni_spaces 'b="2",a="1"'
expect_value 9 http_requests_bucket 'path="/metrics",le="+Inf"'
expect_rc 1 http_requests 'path="/metrics",le="+Inf"'
check "metric_lines all samples of a name (2 lines)" [ "$(metric_lines patroni_raft_has_quorum | wc -l)" -eq 2 ]
check "metric_label: the member of each sample with value 1" \
  [ "$(metric_label patroni_raft_has_quorum 'scope="pg-test",...' member 1)" = postgresql-0 ]
# shellcheck disable=SC1003  # the backslashes are the label value's own
check "metric_label: a label value verbatim, escapes kept" \
  [ "$(metric_label patroni_weird '...' msg)" = 'a \"quoted\", {braced} value\\' ]
check "metric_count: samples with value 0 / all / none" \
  [ "$(metric_count patroni_raft_has_quorum '...' 0) $(metric_count patroni_raft_has_quorum '...') $(metric_count nope '...')" = "1 2 0" ]
check "metric_count: 1.5e+06 equals 1500000" [ "$(metric_count patroni_lag_bytes '...' 1500000)" = 1 ]

# wait_for_metric: immediate success, numeric operators, Inf/NaN, absent/present
check "wait_for_metric == immediate" wait_for_metric patroni_up '' == 1 2
check "wait_for_metric >= float" wait_for_metric patroni_lag_bytes 'member="postgresql-2"' '>=' 1000000 2
check "wait_for_metric < float" wait_for_metric patroni_lag_bytes 'member="postgresql-2"' '<' 1.6e6 2
check "wait_for_metric +Inf > 1e300" wait_for_metric patroni_inf 'le="+Inf"' '>' 1e300 2
check "wait_for_metric NaN == NaN" wait_for_metric patroni_nan 'member="postgresql-2"' == NaN 2
check "wait_for_metric absent" wait_for_metric patroni_raft_has_quorum 'member="postgresql-7",scope="pg-test"' absent - 2
check "wait_for_metric present" wait_for_metric patroni_up '' present - 2

# success after a change: the value flips after ~1.5 s; the wait must end after the flip began
# (the flipper's own clock), within its 10 s bound: no upper bound of its own, which a loaded machine
# overruns (seen: 4.1 s in a pair run)
(sleep 1.5; e2e_now >"$TMP/flipped"; sed -i 's/^patroni_raft_has_quorum{member="postgresql-1",scope="pg-test"} 0$/patroni_raft_has_quorum{member="postgresql-1",scope="pg-test"} 1/' "$TMP/metrics") &
flipper=$!
out=$(wait_for_metric patroni_raft_has_quorum 'scope="pg-test",member="postgresql-1"' == 1 10 2>/dev/null) || true
returned=$(e2e_now)
wait "$flipper"
check "wait_for_metric waits for a change (elapsed ${out:-none}s, at least 1 s, ended after the flip)" \
  awk -v e="${out:-0}" -v r="$returned" -v f="$(cat "$TMP/flipped")" 'BEGIN { exit !(e >= 1 && r >= f) }'
wait_for_metric patroni_up '' == 1 1 >/dev/null 2>&1
check "E2E_ELAPSED set in the caller's shell ('$E2E_ELAPSED')" [ -n "$E2E_ELAPSED" ]

# failure: bounded, reports expected vs seen and the samples, rc 1
t0=$(e2e_now); rc=0
err=$(wait_for_metric patroni_raft_has_quorum 'scope="pg-test",member="postgresql-0"' == 0 2 2>&1 >/dev/null) || rc=$?
took=$(e2e_since "$t0")
check "wait_for_metric timeout returns 1 (rc=$rc)" [ "$rc" -eq 1 ]
check "wait_for_metric timeout is bounded (${took}s)" awk -v e="$took" 'BEGIN { exit !(e >= 2 && e < 4) }'
# shellcheck disable=SC2016  # $1 is bash -c's argument
check "failure report has expected/seen/samples" \
  bash -c 'grep -q "expected: == 0" <<<"$1" && grep -q "seen:     1" <<<"$1" && grep -q "member=\"postgresql-1\",scope=\"pg-test\"} 1" <<<"$1"' _ "$err"
err=$(wait_for_metric nope '' == 1 1 2>&1 >/dev/null) || true
check "failure report for an absent metric says <absent>" grep -q 'seen:     <absent>' <<<"$err"

# exporter down: fetch error is reported, never mistaken for 'absent'
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
expect_rc 2 patroni_up ''
err=$(wait_for_metric patroni_raft_has_quorum 'member="x"' absent - 1 2>&1 >/dev/null) && rc=0 || rc=$?
check "absent does not succeed when the exporter is down (rc=$rc)" [ "$rc" -eq 1 ]
check "failure report says no answer" grep -q 'seen:     <no answer from' <<<"$err"

# file:// URLs work too (curl)
EXPORTER_URL="file://$TMP/metrics" expect_value 7 patroni_raft_has_quorum_total ''

# dump_logs
mkdir -p "$TMP/data/postgresql-0" "$TMP/data/postgresql-1"
printf 'line %s\n' $(seq 1 100) >"$TMP/data/postgresql-0/patroni.log"
echo "exporter says hi" >"$TMP/exporter.log"
out=$(DATA_DIR="$TMP/data" DUMP_LINES=5 dump_logs "$TMP/exporter.log")
check "dump_logs tails member logs" grep -q '^line 100$' <<<"$out"
# shellcheck disable=SC2016  # $1 is bash -c's argument
check "dump_logs honours DUMP_LINES" bash -c '! grep -q "^line 95$" <<<"$1"' _ "$out"
check "dump_logs marks missing logs" grep -q '(missing)' <<<"$out"
check "dump_logs prints the exporter log" grep -q 'exporter says hi' <<<"$out"

# e2e_bracket: the last reading wholly before FROM, the first wholly after TO
printf '%s\n' "10.0 10.2 100" "10.5 10.7 150" "11.0 11.3 180" "11.6 11.8 260" "12.1 12.2 300" >"$TMP/readings"
check "e2e_bracket: [last before, first after]" test "$(e2e_bracket "$TMP/readings" 10.8 11.5)" = "150 260"
check "e2e_bracket: a reading that overlaps FROM or TO is not an end" test "$(e2e_bracket "$TMP/readings" 10.6 11.2)" = "100 260"
check "e2e_bracket: the ends may be equal times" test "$(e2e_bracket "$TMP/readings" 10.7 11.6)" = "150 260"
refused() { ! "$@" >/dev/null; }
check "e2e_bracket: none before FROM fails" refused e2e_bracket "$TMP/readings" 10.1 11.0
check "e2e_bracket: none after TO fails" refused e2e_bracket "$TMP/readings" 11.0 12.15
# e2e_sample: readings of a counter that grows, each timed around its command
echo 0 >"$TMP/counter"
count_up() { local n; n=$(($(cat "$TMP/counter") + 1)); echo "$n" >"$TMP/counter"; echo "$n"; }
E2E_PIDS=()
e2e_sample "$TMP/sampled" count_up
sleep 1
e2e_stop_pid "$E2E_SAMPLE_PID"
check "e2e_sample: several readings in 1 s" test "$(wc -l <"$TMP/sampled")" -ge 3
# shellcheck disable=SC2016  # awk's fields
check "e2e_sample: each BEFORE <= AFTER, readings in order, values growing" \
  awk 'NF != 3 || $1 > $2 || $1 < b || $3 <= v { exit 1 } { b = $2; v = $3 }' "$TMP/sampled"
n=$(wc -l <"$TMP/sampled"); sleep 0.5
check "e2e_sample: stopped with e2e_stop_pid" test "$(wc -l <"$TMP/sampled")" -eq "$n"

# the summary is the last thing: its rc is ours
e2e_summary
