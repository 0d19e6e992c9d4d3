# shellcheck shell=bash
# lib.sh - helpers for end-to-end scenario scripts. Source it:
#   source "$(dirname "$0")/lib.sh"
#
# Metrics (the exporter's Prometheus text format, fetched from EXPORTER_URL, default
# http://127.0.0.1:9393/metrics; file:///path works too; EXPORTER_CURL_CONFIG names a curl
# config file with the CA and credentials of an https endpoint):
#   metric_value NAME [LABELS]       print the value of the one sample NAME{LABELS};
#                                    rc 1 if absent, 2 if ambiguous or on a fetch error.
#                                    LABELS: 'a="x",b="y"' matched exactly (values compared
#                                    verbatim) and order-independently against the sample's
#                                    whole label set; end it with ',...' (or use '...') to
#                                    allow further labels. '' = no labels.
#   metric_lines NAME [LABELS]       print the matching sample lines (all of NAME without LABELS)
#   wait_for_metric NAME LABELS OP VALUE TIMEOUT_S
#                                    poll (every WAIT_INTERVAL=0.5 s) until the value OP VALUE;
#                                    OP: == != < <= > >= (numeric; +Inf/-Inf/NaN understood),
#                                    absent, present (VALUE ignored, e.g. '-'). On success prints
#                                    the elapsed seconds and sets E2E_ELAPSED; on timeout prints
#                                    expected vs seen and the NAME lines to stderr, rc 1.
#   METRICS_TEXT                     fetch_metrics stores the last body here
# Results:
#   pass MSG / fail MSG              record a result (and print it)
#   check MSG CMD...                 run CMD: pass MSG if rc 0, else fail MSG
#   e2e_summary                      list the results, print 'N passed, N failed'; rc 1 if any failed
# Diagnostics:
#   dump_logs [EXPORTER_LOG]         tail (DUMP_LINES=40) of each member's patroni.log and of
#                                    EXPORTER_LOG (default $EXPORTER_LOG if set)
# Timing:
#   e2e_now / e2e_since T0           epoch seconds (float) / seconds since T0 ("%.1f")
# Raft cut between the members (root, nftables, in a network namespace of the caller's own;
# the cluster started with MEMBER_GID_BASE=GID, so member N's sockets have the group GID+N):
#   member_fw_setup TABLE GID        table inet TABLE: its output chain stamps the group of a
#                                    member that opens a connection into the conntrack mark,
#                                    then jumps to the chain `faults` (empty: nothing dropped)
#   member_fw_cut_raft TABLE GID [PORT]
#                                    drop the Raft traffic (tcp PORT, default 2222) between the
#                                    members: their connections to PORT, and their Raft servers'
#                                    replies on connections another member opened. Clients of
#                                    other groups (the exporter, patronictl, syncobj_admin) still
#                                    reach every Raft port; REST and replication stay open.
#   member_fw_heal TABLE             flush `faults` (established connections resume)
#   member_fw_teardown TABLE         delete the table (no error if it is not there)
# A scenario per Patroni version, each in a network namespace of its own (failsafe.sh's
# structure; next-outage.sh uses these):
#   e2e_versions_parallel NAME SCRIPT VERSION...
#                                    run `SCRIPT VERSION` for each version at once (log in
#                                    $E2E_WORK/NAME-VERSION.log), then print each log in order and a
#                                    summary line per version (its 'N passed, N failed' and the
#                                    `total` row of $E2E_WORK/NAME-VERSION/results.tsv); rc 1 if any
#                                    failed. TERM/INT reach every run.
#   e2e_netns_run PREFIX CMD...      (root) CMD in a new network namespace PREFIX-<pid> (lo up)
#                                    with E2E_IN_NETNS=1; when the caller exits, what is left in
#                                    that namespace is killed and it is deleted; rc of CMD
#   e2e_results_init FILE            results table FILE (version, phase, what, value) with its header
#   e2e_result PHASE WHAT VALUE      append a row ($PATRONI_VERSION) and log it; e2e_results_print
#                                    prints the rows recorded so far
#   e2e_prometheus DIR [TARGET]      Prometheus on $E2E_PROM (127.0.0.1:9090) scraping TARGET
#                                    (default 127.0.0.1:9393) and evaluating the shipped
#                                    alerts/patroni-raft.rules.yml unchanged, both every 2 s; config,
#                                    data and log in DIR, PID in E2E_PROM_PID; rc 1 if not ready in 60 s
#   e2e_prom_rule_loaded NAME        rc 0 when Prometheus has loaded the alert rule NAME
#   e2e_prom_alerts                  Prometheus' /api/v1/alerts JSON ('{}' when it does not answer)
#   e2e_alert_state JSON NAME [MEMBER]  pending, firing or "" for alert NAME (and MEMBER) in it
#   e2e_alerts_brief [JSON]          "Name{member}/state ..." of every alert (fetched without JSON)

_E2E_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=paths.sh
source "$_E2E_LIB_DIR/paths.sh"

EXPORTER_URL="${EXPORTER_URL:-http://127.0.0.1:9393/metrics}"
WAIT_INTERVAL="${WAIT_INTERVAL:-0.5}"
DUMP_LINES="${DUMP_LINES:-40}"
E2E_CLUSTER="$_E2E_LIB_DIR/cluster.sh"
METRICS_TEXT=""
E2E_ELAPSED=""
E2E_PASSED=0
E2E_FAILED=0
E2E_RESULTS=()

e2e_log()   { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
e2e_now()   { date +%s.%N; }
e2e_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# ------------------------------------------------------------------ metrics
fetch_metrics() { # -> METRICS_TEXT; rc != 0 when the endpoint does not answer 2xx
  # EXPORTER_CURL_CONFIG: a curl config file (-K) for an https endpoint with basic auth,
  # so no credential is ever in curl's argv
  METRICS_TEXT=$(curl -sf -m "${FETCH_TIMEOUT:-5}" ${EXPORTER_CURL_CONFIG:+-K "$EXPORTER_CURL_CONFIG"} "$EXPORTER_URL" 2>/dev/null) || { METRICS_TEXT=""; return 1; }
}

# _metric_select MODE NAME LABELS   (reads the exposition text on stdin)
#   MODE value: print the value of each matching sample; MODE lines: print matching lines
# Parses the Prometheus text format: name{k="v",...} value [timestamp]; label values may hold
# escaped quotes/backslashes, commas and braces. Plain POSIX awk (Debian's mawk).
_metric_select() {
  # strings go through ENVIRON: awk -v would interpret the backslash escapes in label values
  _M_MODE=$1 _M_NAME=$2 _M_LABELS=$3 awk '
    # parse_labels(s, K, V): fills K[i], V[i] (values kept verbatim, escapes included);
    # returns the count, or -1 on a syntax error
    function parse_labels(s, K, V,    n, i, c, L, key, val) {
      n = 0; i = 1; L = length(s)
      while (i <= L) {
        c = substr(s, i, 1)
        if (c == " " || c == "," || c == "\t") { i++; continue }
        key = ""
        while (i <= L && (c = substr(s, i, 1)) != "=" && c != " ") { key = key c; i++ }
        while (i <= L && substr(s, i, 1) == " ") i++
        if (substr(s, i, 1) != "=") return -1
        i++
        while (i <= L && substr(s, i, 1) == " ") i++
        if (substr(s, i, 1) != "\"") return -1
        i++; val = ""
        while (i <= L) {
          c = substr(s, i, 1)
          if (c == "\\") { val = val c substr(s, i + 1, 1); i += 2; continue }
          if (c == "\"") break
          val = val c; i++
        }
        if (i > L) return -1
        i++
        n++; K[n] = key; V[n] = val
      }
      return n
    }
    BEGIN {
      mode = ENVIRON["_M_MODE"]; want_name = ENVIRON["_M_NAME"]; want_labels = ENVIRON["_M_LABELS"]
      subset = 0; any_labels = 0
      if (want_labels == "*") any_labels = 1
      else {
        w = want_labels
        if (w == "...") { subset = 1; w = "" }
        else if (w ~ /,[ \t]*\.\.\.[ \t]*$/) { subset = 1; sub(/,[ \t]*\.\.\.[ \t]*$/, "", w) }
        nw = parse_labels(w, WK, WV)
        if (nw < 0) { print "metric: cannot parse labels: " want_labels > "/dev/stderr"; exit 3 }
        for (j = 1; j <= nw; j++) WANT[WK[j]] = WV[j]
      }
    }
    /^[ \t]*#/ || /^[ \t]*$/ { next }
    {
      line = $0
      if (!match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*/)) next
      name = substr(line, 1, RLENGTH)
      if (name != want_name) next
      rest = substr(line, RLENGTH + 1)
      sub(/^[ \t]+/, "", rest)
      labels = ""
      if (substr(rest, 1, 1) == "{") {
        # find the closing brace outside of quoted values
        L = length(rest); q = 0; k = 2
        while (k <= L) {
          c = substr(rest, k, 1)
          if (q && c == "\\") { k += 2; continue }
          if (c == "\"") q = !q
          else if (!q && c == "}") break
          k++
        }
        if (k > L) next
        labels = substr(rest, 2, k - 2)
        rest = substr(rest, k + 1)
      }
      sub(/^[ \t]+/, "", rest)
      split(rest, F, /[ \t]+/)
      value = F[1]
      if (!any_labels) {
        split("", SK); split("", SV)
        ns = parse_labels(labels, SK, SV)
        if (ns < 0) next
        if (!subset && ns != nw) next
        ok = 1; found = 0
        for (j = 1; j <= ns; j++) {
          if (SK[j] in WANT) { found++; if (WANT[SK[j]] != SV[j]) { ok = 0; break } }
          else if (!subset) { ok = 0; break }
        }
        if (!ok || found != nw) next
      }
      print (mode == "value") ? value : line
    }'
}

metric_lines() { # metric_lines NAME [LABELS]   (uses METRICS_TEXT when FETCH=0)
  local name=$1 labels=${2-*}
  [[ ${FETCH:-1} == 0 ]] || fetch_metrics || { e2e_log "metrics: $EXPORTER_URL did not answer"; return 2; }
  printf '%s\n' "$METRICS_TEXT" | _metric_select lines "$name" "$labels"
}

metric_value() { # metric_value NAME [LABELS]
  local name=$1 labels=${2-} out n
  [[ ${FETCH:-1} == 0 ]] || fetch_metrics || { e2e_log "metrics: $EXPORTER_URL did not answer"; return 2; }
  out=$(printf '%s\n' "$METRICS_TEXT" | _metric_select value "$name" "$labels") || return 2
  n=$(grep -c . <<<"$out" || true)
  if ((n == 0)); then return 1; fi
  if ((n > 1)); then
    e2e_log "metric_value: $n samples match $name{$labels}:"
    printf '%s\n' "$METRICS_TEXT" | _metric_select lines "$name" "$labels" >&2
    return 2
  fi
  printf '%s\n' "$out"
}

# _compare SEEN OP WANT -> rc 0 if true
_compare() {
  awk -v a="$1" -v op="$2" -v b="$3" '
    function num(s) {
      if (s ~ /^\+?[Ii]nf$/) return 1e308 * 10
      if (s ~ /^-[Ii]nf$/) return -1e308 * 10
      return s + 0
    }
    BEGIN {
      if (a == "NaN" || b == "NaN") { exit !((op == "==" && a == b) || (op == "!=" && a != b)) }
      x = num(a); y = num(b)
      if (op == "==") r = (x == y); else if (op == "!=") r = (x != y)
      else if (op == "<") r = (x < y); else if (op == "<=") r = (x <= y)
      else if (op == ">") r = (x > y); else if (op == ">=") r = (x >= y)
      else { print "wait_for_metric: unknown operator " op > "/dev/stderr"; exit 2 }
      exit !r
    }'
}

wait_for_metric() { # wait_for_metric NAME LABELS OP VALUE TIMEOUT_S
  local name=$1 labels=$2 op=$3 want=$4 timeout_s=$5 t0 deadline seen rc ok
  t0=$(e2e_now)
  deadline=$(awk -v t="$t0" -v d="$timeout_s" 'BEGIN { printf "%.3f", t + d }')
  E2E_ELAPSED=""
  while :; do
    ok=1; rc=0; seen=""
    # fetch here, not inside $(...): METRICS_TEXT must survive for the failure report
    if fetch_metrics; then
      seen=$(FETCH=0 metric_value "$name" "$labels" 2>/dev/null) || rc=$?
    else
      rc=3
    fi
    case $op in
      absent)  ((rc == 1)) && ok=0 ;;
      present) ((rc == 0)) && ok=0 ;;
      *)       ((rc == 0)) && _compare "$seen" "$op" "$want" && ok=0 ;;
    esac
    if ((ok == 0)); then
      E2E_ELAPSED=$(e2e_since "$t0")
      echo "$E2E_ELAPSED"
      e2e_log "$name{$labels} $op ${want} after ${E2E_ELAPSED}s (value ${seen:-none})"
      return 0
    fi
    if awk -v d="$deadline" -v n="$(e2e_now)" 'BEGIN { exit !(n >= d) }'; then break; fi
    sleep "$WAIT_INTERVAL"
  done
  case $rc in
    1) seen="<absent>" ;;
    2) seen="<ambiguous: several samples match, or unparsable labels>" ;;
    3) seen="<no answer from $EXPORTER_URL>" ;;
  esac
  {
    e2e_log "TIMEOUT after ${timeout_s}s waiting for $name{$labels}"
    echo "  expected: $op $want"
    echo "  seen:     $seen"
    echo "  samples of $name:"
    if [[ -n $METRICS_TEXT ]]; then
      printf '%s\n' "$METRICS_TEXT" | _metric_select lines "$name" '*' | sed 's/^/    /'
    fi
  } >&2
  return 1
}

# ------------------------------------------------------------------ results
pass() { E2E_PASSED=$((E2E_PASSED + 1)); E2E_RESULTS+=("PASS  $*"); e2e_log "PASS: $*"; }
fail() { E2E_FAILED=$((E2E_FAILED + 1)); E2E_RESULTS+=("FAIL  $*"); e2e_log "FAIL: $*"; }
check() { # check MSG CMD...
  local msg=$1; shift
  if "$@"; then pass "$msg"; else fail "$msg"; fi
}
e2e_summary() {
  local r
  echo "---- e2e results"
  for r in "${E2E_RESULTS[@]}"; do echo "$r"; done
  echo "$E2E_PASSED passed, $E2E_FAILED failed"
  ((E2E_FAILED == 0))
}

# ------------------------------------------------------------------ diagnostics
# on_fail MSG: record the failure, show the state (a script's own `show_state`, when it has
# one) and the logs, print the summary, and stop: later phases build on the failed one. A
# script that needs more at a failure defines its own on_fail after sourcing this file.
on_fail() {
  fail "$1"
  if declare -F show_state >/dev/null; then show_state >&2 || true; fi
  dump_logs "${EXPORTER_LOG:-}" >&2 || true
  e2e_summary || true
  exit 1
}
expect() { # expect DESCRIPTION NAME LABELS OP VALUE TIMEOUT: wait_for_metric, else on_fail
  local what=$1; shift
  if wait_for_metric "$@" >/dev/null; then pass "$what (${E2E_ELAPSED}s)"; else on_fail "$what"; fi
}

dump_logs() { # dump_logs [EXPORTER_LOG]
  local exporter_log=${1:-${EXPORTER_LOG:-}} data f n
  data=${DATA_DIR:-$E2E_WORK/cluster}
  for n in 0 1 2; do
    f="$data/postgresql-$n/patroni.log"
    echo "===== postgresql-$n: $f (last $DUMP_LINES lines)"
    if [[ -f $f ]]; then tail -n "$DUMP_LINES" "$f"; else echo "(missing)"; fi
  done
  if [[ -n $exporter_log ]]; then
    echo "===== exporter: $exporter_log (last $DUMP_LINES lines)"
    if [[ -f $exporter_log ]]; then tail -n "$DUMP_LINES" "$exporter_log"; else echo "(missing)"; fi
  fi
}

# ------------------------------------------------------------------ Raft cut between members
member_fw_setup() { # member_fw_setup TABLE GID
  local t=$1 g=$2
  nft -f - <<EOF
table inet $t {
  chain faults {}
  chain out {
    type filter hook output priority 0; policy accept;
    ct state new meta skgid $g ct mark set $g
    ct state new meta skgid $((g + 1)) ct mark set $((g + 1))
    ct state new meta skgid $((g + 2)) ct mark set $((g + 2))
    jump faults
  }
}
EOF
}
member_fw_cut_raft() { # member_fw_cut_raft TABLE GID [PORT]
  local t=$1 g=$2 port=${3:-2222} gids
  gids="{ $g, $((g + 1)), $((g + 2)) }"
  nft add rule inet "$t" faults meta skgid "$gids" tcp dport "$port" drop
  nft add rule inet "$t" faults meta skgid "$gids" ct mark "$gids" tcp sport "$port" drop
}
member_fw_heal() { nft flush chain inet "$1" faults; }
member_fw_teardown() { nft delete table inet "$1" 2>/dev/null || true; }

# ------------------------------------------------------------------ per-version scenarios
e2e_versions_parallel() { # e2e_versions_parallel NAME SCRIPT VERSION...
  local name=$1 script=$2 v vrc rc=0 summary=()
  shift 2
  declare -gA _E2E_VPIDS=()
  for v in "$@"; do
    "$script" "$v" >"$E2E_WORK/$name-$v.log" 2>&1 &
    _E2E_VPIDS[$v]=$!
  done
  # a TERM/INT reaches every version's run, and each cleans up after itself
  trap 'kill -TERM "${_E2E_VPIDS[@]}" 2>/dev/null; wait; exit 143' TERM INT
  for v in "$@"; do
    vrc=0; wait "${_E2E_VPIDS[$v]}" || vrc=$?
    ((vrc == 0)) || rc=1
    echo "==================== $name, Patroni $v (log $E2E_WORK/$name-$v.log)"
    cat "$E2E_WORK/$name-$v.log"
    summary+=("Patroni $v: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$E2E_WORK/$name-$v.log" | tail -n1 || echo "no summary (rc $vrc)") in $(awk -F'\t' '$2 == "total" { print $4 }' "$E2E_WORK/$name-$v/results.tsv" 2>/dev/null)s")
  done
  trap - TERM INT
  for v in "${summary[@]}"; do printf '%s: %s\n' "$name" "$v"; done
  return "$rc"
}

e2e_netns_run() { # e2e_netns_run PREFIX CMD...
  local inner rc=0
  _E2E_NS="$1-$$"
  shift
  ip netns add "$_E2E_NS" || return 2
  trap _e2e_netns_cleanup EXIT
  ip netns exec "$_E2E_NS" ip link set lo up
  # in the background, so that a TERM/INT reaches it (its own trap stops what it started)
  # before the namespace goes (`ip netns exec` execs: the PID is CMD's)
  ip netns exec "$_E2E_NS" env E2E_IN_NETNS=1 "$@" &
  inner=$!
  trap 'kill -TERM '"$inner"' 2>/dev/null; wait '"$inner"'; exit 143' TERM INT
  wait "$inner" || rc=$?
  trap - TERM INT
  return "$rc"
}
_e2e_netns_cleanup() { # only processes inside our own namespace are left to stop
  local pid
  for pid in $(ip netns pids "$_E2E_NS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  ip netns del "$_E2E_NS" 2>/dev/null || true
}

E2E_RESULTS_TSV=""
E2E_MEASURED=()
e2e_results_init() { E2E_RESULTS_TSV=$1; E2E_MEASURED=(); printf 'version\tphase\twhat\tvalue\n' >"$1"; }
e2e_result() { # e2e_result PHASE WHAT VALUE
  printf '%s\t%s\t%s\t%s\n' "${PATRONI_VERSION:-?}" "$1" "$2" "$3" >>"$E2E_RESULTS_TSV"
  E2E_MEASURED+=("$(printf '%-6s %-78s %10s' "$1" "$2" "$3")")
  e2e_log "measured: $1: $2: $3"
}
e2e_results_print() { printf '  %s\n' "${E2E_MEASURED[@]}"; }

E2E_PROM="${E2E_PROM:-http://127.0.0.1:9090}"
E2E_PROM_PID=""
e2e_prometheus() { # e2e_prometheus DIR [TARGET]
  local dir=$1 target=${2:-127.0.0.1:9393} deadline
  printf '%s\n' 'global:' '  scrape_interval: 2s' '  evaluation_interval: 2s' 'rule_files:' \
    "  - $E2E_REPO/alerts/patroni-raft.rules.yml" 'scrape_configs:' \
    '  - job_name: patroni-raft-exporter' '    static_configs:' "      - targets: ['$target']" \
    >"$dir/prometheus.yml"
  prometheus --config.file "$dir/prometheus.yml" --storage.tsdb.path "$dir/prometheus-data" \
    --web.listen-address "${E2E_PROM#http://}" >"$dir/prometheus.log" 2>&1 9>&- &
  E2E_PROM_PID=$!
  deadline=$(($(date +%s) + 60))
  until curl -fs -o /dev/null -m 2 "$E2E_PROM/-/ready"; do
    (($(date +%s) < deadline)) || return 1
    sleep 0.5
  done
}
e2e_prom_rule_loaded() {
  curl -fs -m 3 "$E2E_PROM/api/v1/rules" 2>/dev/null \
    | jq -e --arg a "$1" '[.data.groups[].rules[] | select(.name == $a)] | length == 1' >/dev/null
}
e2e_prom_alerts() { curl -fs -m 3 "$E2E_PROM/api/v1/alerts" 2>/dev/null || echo '{}'; }
e2e_alert_state() { # e2e_alert_state JSON NAME [MEMBER]
  jq -r --arg n "$2" --arg m "${3:-}" \
    '[(.data.alerts // [])[] | select(.labels.alertname == $n and ($m == "" or .labels.member == $m)) | .state] | sort | last // ""' <<<"$1"
}
e2e_alerts_brief() { # e2e_alerts_brief [JSON]
  jq -r '[(.data.alerts // [])[] | "\(.labels.alertname)\(if .labels.member then "{\(.labels.member)}" else "" end)/\(.state)"] | sort | join(" ")' \
    <<<"${1:-$(e2e_prom_alerts)}" 2>/dev/null || true
}
