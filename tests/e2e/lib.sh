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
#   metric_label NAME LABELS KEY [VALUE]
#                                    print label KEY of each matching sample (with value VALUE)
#   metric_count NAME LABELS [VALUE] print how many samples match (with value VALUE)
#   metric_values NAME [LABELS]      print the value of each matching sample (all of NAME without LABELS)
#   (metric_lines/_label/_count/_value(s) read METRICS_TEXT as it is when FETCH=0, else fetch first;
#   the file:// form reads a saved /metrics body.)
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
#   ensure MSG FAIL_MSG CMD...       run CMD: pass MSG if rc 0, else on_fail FAIL_MSG (stops)
#   expect DESC NAME LABELS OP VALUE TIMEOUT_S
#                                    wait_for_metric: pass "DESC (Ns)", else on_fail DESC
#   expect_healthy PHASE             expect (30 s each) the healthy cluster of cluster.sh up --sync:
#                                    patroni_up 1, verdict 1, 3 members, 1 leader, 2 sync standbys
#                                    (labels $S, default scope="pg-test")
#   on_fail MSG                      fail MSG, then the script's own show_state (if it defines
#                                    one), dump_logs and the summary on stderr; exit 1
#   e2e_summary                      list the results, print 'N passed, N failed'; rc 1 if any failed
# Diagnostics:
#   e2e_show_metrics TITLE ERE       the exporter's sample lines matching ERE under a title
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
# The runner: a scenario script's skeleton (failover-readiness.sh and failsafe.sh are examples).
#   source "$(dirname "$0")/lib.sh"
#   E2E_TOOLS="nft prometheus" e2e_scenario failsafe "$@"   # returns only inside the namespace
#   e2e_setup                      # lock, fresh $RUN_DIR, results.tsv, traps, no leftover cluster
#   cluster up --sync; eval "$(cluster env)"; e2e_exporter 2; e2e_prometheus "$RUN_DIR"
#   E2E_PIDS+=("$E2E_PROM_PID"); expect ...; e2e_result PHASE WHAT VALUE; ...
#   e2e_finish "failsafe mode"     # exporter alive, no panic, results.txt, summary, exit
#
#   e2e_scenario NAME [VERSION...] sets PATRONI_VERSION (first VERSION, else $PATRONI_VERSION,
#                                    else E2E_DEFAULT_VERSION, else 4.1.5), EXPORTER_BIN (default
#                                    the debug build) and RUN_DIR=$E2E_WORK/NAME-VERSION (exported).
#                                    Several versions: `$0 VERSION` for each at once
#                                    (e2e_versions_parallel NAME), then exit with its rc.
#                                    One version, outside a namespace: as root, checks the tools
#                                    (ip setpriv jq curl + $E2E_TOOLS), the exporter binary (not
#                                    with E2E_NO_EXPORTER=1) and the venv (built here: the
#                                    namespace has no route out), then runs `$0 VERSION` in a
#                                    network namespace NAME-VERSION-PID (e2e_netns_run) and exits
#                                    with its rc. Not root: E2E_NETNS=required (default) refuses
#                                    (rc 2); E2E_NETNS=optional returns and the scenario runs on
#                                    the host's loopback (e2e_lock waits for other users).
#                                    Inside the namespace (E2E_IN_NETNS=1): returns.
#   e2e_lock [WAIT_S]                take the real-cluster lock on fd 9 ($E2E_CLUSTER_LOCK, one per
#                                    network namespace; default wait 60 s in a namespace of ours,
#                                    else 900 s); rc 2 with a message when not obtained
#   cluster ARGS...                  tests/e2e/cluster.sh ARGS, without fd 9 (the lock must not
#                                    outlive us in the cluster's daemons); after a successful
#                                    `cluster up`, e2e_wait_build
#   e2e_wait_build                   when E2E_BUILD_WAIT names a file (scripts/test.sh starts a
#                                    script while cargo still builds EXPORTER_BIN; the file appears
#                                    when the build ends and holds cargo's exit code): wait for it
#                                    (E2E_BUILD_WAIT_S, default 1800 s), exit 2 if the build failed
#                                    or the binary is missing; at once when it is unset or done.
#                                    With it set, e2e_scenario does not require the binary before
#                                    the namespace: only for a script that brings its cluster up
#                                    (`cluster up`) before it runs the exporter (tests/e2e/lab.sh)
#   e2e_setup                        e2e_lock, a fresh $RUN_DIR, e2e_results_init
#                                    $RUN_DIR/results.tsv, traps (EXIT: e2e_cleanup; TERM/INT:
#                                    exit 143), `cluster down --fast` of an interrupted run's
#                                    leftovers; T_START=now
#   E2E_PIDS                         our background processes: e2e_cleanup TERMs and reaps them
#   e2e_cleanup                      (the EXIT trap) the scenario's own `e2e_cleanup_hook` if it
#                                    defines one, E2E_PIDS stopped, `cluster down --fast` (log
#                                    $RUN_DIR/cleanup.log); exits with the script's rc
#   e2e_exporter POLL_S [ARG...]     the exporter as the README quick start: --patroni.url member
#                                    0 + --raft.password-file $RUN_DIR/raft-secret (written from
#                                    RAFT_PASS; neither with --config.file among the ARGs),
#                                    --poll.interval POLL_S s, --poll.timeout
#                                    $E2E_POLL_TIMEOUT (default 1s), on
#                                    127.0.0.1:9393, log $EXPORTER_LOG; PID in EXPORTER_PID and E2E_PIDS
#   e2e_status NAME [URL | -- ARG...]
#                                    `patroni-raft-exporter status` as the README shows it (from
#                                    $RUN_DIR, the password file by its relative name, URL default
#                                    member 0; after `--`: these arguments instead, e.g.
#                                    --config.file FILE), --timeout E2E_STATUS_TIMEOUT: output in
#                                    status-NAME.txt (and on stderr), exit code in status-NAME.rc,
#                                    the seconds it took logged; prints the exit code
#   E2E_STATUS_TIMEOUT               `status --timeout` of the e2e calls, seconds (default 20):
#                                    status ends its poll by that deadline, each request at most
#                                    half of it (src/status/mod.rs); the default is twice the
#                                    10 s the old request budget gave 3 URLs, as room for a
#                                    shared CI machine (loads of 20-28 seen on 2 cores)
#   e2e_member N WHAT                $MEMBERn_WHAT of `cluster env` (REST, RAFT, PG, CONFIG, ...)
#   e2e_rest N / e2e_own_role N      member N's REST URL / the role its own GET /patroni says
#                                    ("down" when it does not answer)
#   e2e_cluster_leader               the member GET /cluster names leader (asks the members in turn,
#                                    the first that answers tells); rc != 0 when it names none
#   e2e_exporter_survived            pass if EXPORTER_PID still runs, on_fail if not or if
#                                    $EXPORTER_LOG shows a panic
#   e2e_finish TITLE                 e2e_exporter_survived (when EXPORTER_PID is set: a script with
#                                    several exporters checks them itself), e2e_result total, the
#                                    results table and the summary (both also in
#                                    $RUN_DIR/results.txt); exits 0 or 1
#   e2e_stop_pid PID                 TERM one of our children, KILL after 5 s, reap it (and drop it
#                                    from E2E_PIDS)
# The pieces (next-outage.sh uses them directly):
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
# Prometheus and Alertmanager (the one setup, also scripts/demo.sh's):
#   e2e_alertmanager DIR [GROUP_WAIT] [GROUP_BY]
#                                    Alertmanager on $E2E_AM (default http://127.0.0.1:9093; set by
#                                    this call), one receiver `log`, group_wait GROUP_WAIT (10s),
#                                    group_by [GROUP_BY] ("alertname, scope"); config, data and log
#                                    in DIR, PID in E2E_AM_PID; rc 1 if not ready in 60 s
#   e2e_prometheus DIR [TARGETS] [INTERVAL]
#                                    Prometheus on $E2E_PROM (http://127.0.0.1:9090) scraping
#                                    TARGETS (host:port, default 127.0.0.1:9393; or the YAML lines
#                                    of static_configs entries, "      - targets: [...]" each) and
#                                    evaluating the shipped alerts/patroni-raft.rules.yml unchanged
#                                    (E2E_PROM_RULES: other rule files, space-separated; E2E_PROM_CA:
#                                    scrape over https, trusting that CA file),
#                                    both every INTERVAL (2s); alerts sent to $E2E_AM when it is set
#                                    (start Alertmanager first); config, data and log in DIR, PID in
#                                    E2E_PROM_PID; rc 1 if not ready in 60 s
#   e2e_prometheus_rules NAME...     e2e_prometheus "$RUN_DIR" (on_fail when not ready; its PID in
#                                    E2E_PIDS), E2E_PROM_T0 the e2e_now when it was ready, and a
#                                    check that it loaded each shipped alert rule NAME
#   e2e_wait_http URL SECONDS        poll URL until it answers 2xx; rc 1 after SECONDS
#   e2e_prom_rule_loaded NAME        rc 0 when Prometheus has loaded the alert rule NAME
#   e2e_prom_alerts                  Prometheus' /api/v1/alerts JSON ('{}' when it does not answer)
#   e2e_alert_state JSON NAME [MEMBER]  pending, firing or "" for alert NAME (and MEMBER) in it
#   e2e_alerts_brief                 "Name{member}/state ..." of every alert in Prometheus now
#   e2e_alerts_seen T0 [ERE]         "Name{scope}/state ..." of every ALERTS series Prometheus had
#                                    since T0 (epoch s) whose alertname matches ERE (default all):
#                                    what was pending or firing at any evaluation ("?query-failed"
#                                    when Prometheus does not answer)

_E2E_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=paths.sh
source "$_E2E_LIB_DIR/paths.sh"

EXPORTER_URL="${EXPORTER_URL:-http://127.0.0.1:9393/metrics}"
E2E_STATUS_TIMEOUT="${E2E_STATUS_TIMEOUT:-20}"
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

# _metric_select MODE NAME LABELS   (reads the exposition text on stdin; the one reader of the
# text format on the shell side: every metric_* function goes through it)
#   MODE value: print the value of each matching sample; MODE lines: print matching lines;
#   MODE label: print the value of label $_M_KEY of each matching sample (verbatim).
#   _M_EQ (optional): only the samples whose value equals it (numerically where both are numbers)
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
      key = ENVIRON["_M_KEY"]; eq = ENVIRON["_M_EQ"]
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
      if (eq != "" && !(value == eq || (value ~ /^[-+0-9.eE]+$/ && value + 0 == eq + 0))) next
      split("", SK); split("", SV)
      ns = parse_labels(labels, SK, SV)
      if (ns < 0) next
      if (!any_labels) {
        if (!subset && ns != nw) next
        ok = 1; found = 0
        for (j = 1; j <= ns; j++) {
          if (SK[j] in WANT) { found++; if (WANT[SK[j]] != SV[j]) { ok = 0; break } }
          else if (!subset) { ok = 0; break }
        }
        if (!ok || found != nw) next
      }
      if (mode == "label") { for (j = 1; j <= ns; j++) if (SK[j] == key) print SV[j] }
      else print (mode == "value") ? value : line
    }'
}

metric_lines() { # metric_lines NAME [LABELS]   (uses METRICS_TEXT when FETCH=0)
  local name=$1 labels=${2-*}
  [[ ${FETCH:-1} == 0 ]] || fetch_metrics || { e2e_log "metrics: $EXPORTER_URL did not answer"; return 2; }
  printf '%s\n' "$METRICS_TEXT" | _metric_select lines "$name" "$labels"
}

metric_label() { # metric_label NAME LABELS KEY [VALUE]   (uses METRICS_TEXT when FETCH=0)
  [[ ${FETCH:-1} == 0 ]] || fetch_metrics || { e2e_log "metrics: $EXPORTER_URL did not answer"; return 2; }
  printf '%s\n' "$METRICS_TEXT" | _M_KEY=$3 _M_EQ=${4:-} _metric_select label "$1" "$2"
}
metric_values() { # metric_values NAME [LABELS]   (uses METRICS_TEXT when FETCH=0)
  [[ ${FETCH:-1} == 0 ]] || fetch_metrics || { e2e_log "metrics: $EXPORTER_URL did not answer"; return 2; }
  printf '%s\n' "$METRICS_TEXT" | _metric_select value "$1" "${2-*}"
}
metric_count() { # metric_count NAME LABELS [VALUE]   (uses METRICS_TEXT when FETCH=0)
  [[ ${FETCH:-1} == 0 ]] || fetch_metrics || { e2e_log "metrics: $EXPORTER_URL did not answer"; return 2; }
  printf '%s\n' "$METRICS_TEXT" | _M_EQ=${3:-} _metric_select value "$1" "$2" | grep -c . || true
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

# ------------------------------------------------------------------ ground truth that only grows
# A position that only grows (a WAL position) read by the exporter at an unknown moment of a
# poll is checked against readings of PostgreSQL's own that bracket the poll: whatever the load
# makes polls, scrapes and psql take, the exporter's value lies between the last reading made
# wholly before the poll started and the first one made wholly after it ended.
#
# e2e_sample OUT CMD...: runs CMD (prints the position, an integer) again and again in the
# background, each answer a line "BEFORE AFTER VALUE" in OUT (Unix times right before CMD
# started and right after it answered). Its PID in E2E_SAMPLE_PID, also in E2E_PIDS.
e2e_sample() {
  local out=$1
  shift
  (
    while :; do
      before=$(e2e_now)
      if value=$("$@" 2>/dev/null) && [[ $value =~ ^[0-9]+$ ]]; then echo "$before $(e2e_now) $value"; fi
      sleep 0.1
    done
  ) >>"$out" &
  E2E_SAMPLE_PID=$!
  E2E_PIDS+=("$E2E_SAMPLE_PID")
}
# e2e_await_reading FILE T: waits (up to 30 s) for a reading in FILE (e2e_sample's) made wholly
# after the Unix time T, the upper end of a bracket that ends at T. rc 1 without one.
e2e_await_reading() {
  local deadline=$(($(date +%s) + 30))
  until awk -v t="${2:-0}" '$1 >= t { found = 1 } END { exit !found }' "$1"; do
    (($(date +%s) < deadline)) || return 1
    sleep 0.2
  done
}
# e2e_bracket FILE FROM TO -> "LOW HIGH": what the position in FILE (e2e_sample's) was at any
# moment between the Unix times FROM and TO lies in [LOW, HIGH]. Exit 1 without a reading made
# wholly before FROM or one made wholly after TO.
e2e_bracket() {
  awk -v from="$2" -v to="$3" '
    $2 <= from { low = $3; have_low = 1 }
    $1 >= to && !have_high { high = $3; have_high = 1 }
    END { if (!have_low || !have_high) exit 1; print low, high }' "$1"
}

# ------------------------------------------------------------------ results
pass() { E2E_PASSED=$((E2E_PASSED + 1)); E2E_RESULTS+=("PASS  $*"); e2e_log "PASS: $*"; }
fail() { E2E_FAILED=$((E2E_FAILED + 1)); E2E_RESULTS+=("FAIL  $*"); e2e_log "FAIL: $*"; }
check() { # check MSG CMD...
  local msg=$1; shift
  if "$@"; then pass "$msg"; else fail "$msg"; fi
}
ensure() { # ensure MSG FAIL_MSG CMD...
  local msg=$1 failure=$2; shift 2
  if "$@"; then pass "$msg"; else on_fail "$failure"; fi
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

e2e_show_metrics() { # e2e_show_metrics TITLE ERE
  echo "===== $1"
  if fetch_metrics; then printf '%s\n' "$METRICS_TEXT" | grep -E "$2" || true; else echo "(no answer from $EXPORTER_URL)"; fi
}

expect_healthy() { # expect_healthy PHASE
  local s=${S:-'scope="pg-test"'}
  expect "$1: exporter polls the cluster" patroni_up "$s" == 1 30
  expect "$1: verdict 1 (quorum confirmed)" patroni_raft_cluster_quorum "$s" == 1 30
  expect "$1: three members" patroni_cluster_members "$s" == 3 30
  expect "$1: one leader" patroni_cluster_leaders "$s" == 1 30
  expect "$1: two sync standbys" patroni_cluster_sync_standbys "$s" == 2 30
}

dump_logs() { # dump_logs [EXPORTER_LOG]
  local exporter_log=${1:-${EXPORTER_LOG:-}} data f n
  data=${DATA_DIR:-$E2E_WORK/cluster}
  for n in 0 1 2; do
    f="$data/postgresql-$n/patroni.log"
    echo "===== postgresql-$n: $f (last $DUMP_LINES lines)"
    if [[ -f $f ]]; then tail -n "$DUMP_LINES" "$f"; else echo "(missing)"; fi
  done
  f="$data/witness/witness.log"   # the Raft-only witness of a stereo-mode cluster
  if [[ -f $f ]]; then echo "===== witness: $f (last $DUMP_LINES lines)"; tail -n "$DUMP_LINES" "$f"; fi
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

# ------------------------------------------------------------------ the runner
cluster() {
  local rc=0
  "$E2E_CLUSTER" "$@" 9>&- || rc=$?
  if ((rc == 0)) && [[ ${1:-} == up ]]; then e2e_wait_build; fi
  return "$rc"
}

e2e_wait_build() {
  [[ -n ${E2E_BUILD_WAIT:-} ]] || return 0
  local t0=$SECONDS limit=${E2E_BUILD_WAIT_S:-1800} rc
  until [[ -s $E2E_BUILD_WAIT ]]; do
    if ((SECONDS - t0 >= limit)); then
      echo "the exporter's build ($E2E_BUILD_WAIT) did not end within ${limit}s" >&2; exit 2
    fi
    sleep 1
  done
  rc=$(<"$E2E_BUILD_WAIT")
  [[ $rc == 0 ]] || { echo "the exporter's build failed (rc $rc): no exporter to test" >&2; exit 2; }
  [[ -x $EXPORTER_BIN ]] || { echo "no exporter binary at $EXPORTER_BIN after its build" >&2; exit 2; }
  ((SECONDS - t0 < 1)) || e2e_log "waited $((SECONDS - t0))s for the exporter's build"
  E2E_BUILD_WAIT=""
}

e2e_lock() { # e2e_lock [WAIT_S]
  local wait_s=${1:-}
  [[ -n $wait_s ]] || if [[ ${E2E_IN_NETNS:-} == 1 ]]; then wait_s=60; else wait_s=900; fi
  exec 9>"$E2E_CLUSTER_LOCK"
  flock -w "$wait_s" 9 || { echo "another real cluster holds $E2E_CLUSTER_LOCK (waited ${wait_s}s)" >&2; exit 2; }
}

e2e_scenario() { # e2e_scenario NAME [VERSION...]
  local name=$1 c rc=0
  shift
  export PATRONI_VERSION="${1:-${PATRONI_VERSION:-${E2E_DEFAULT_VERSION:-4.1.5}}}"
  EXPORTER_BIN="${EXPORTER_BIN:-$E2E_TARGET_DIR/debug/patroni-raft-exporter}"
  export RUN_DIR="$E2E_WORK/$name-$PATRONI_VERSION"
  if (($# > 1)); then
    e2e_versions_parallel "$name" "$0" "$@" || rc=$?
    exit "$rc"
  fi
  [[ ${E2E_IN_NETNS:-} == 1 ]] && return 0
  if ((EUID != 0)); then
    [[ ${E2E_NETNS:-required} == optional ]] && return 0
    echo "$(basename "$0") needs root (a network namespace of its own)" >&2; exit 2
  fi
  for c in ip setpriv jq curl ${E2E_TOOLS:-}; do
    command -v "$c" >/dev/null || { echo "$c missing: scripts/install-deps.sh" >&2; exit 2; }
  done
  [[ ${E2E_NO_EXPORTER:-0} == 1 || -n ${E2E_BUILD_WAIT:-} || -x $EXPORTER_BIN ]] \
    || { echo "no exporter binary at $EXPORTER_BIN (cargo build --bin patroni-raft-exporter)" >&2; exit 2; }
  [[ -x $(e2e_venv_dir "$PATRONI_VERSION")/bin/patroni ]] \
    || "$E2E_REPO/scripts/install-deps.sh" --no-apt --no-cargo --patroni "$PATRONI_VERSION"
  e2e_netns_run "$name-${PATRONI_VERSION//./}" env EXPORTER_BIN="$EXPORTER_BIN" "$0" "$PATRONI_VERSION" || rc=$?
  exit "$rc"
}

E2E_PIDS=()
e2e_setup() {
  e2e_lock "${E2E_LOCK_WAIT:-}"
  rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR"
  e2e_results_init "$RUN_DIR/results.tsv"
  trap e2e_cleanup EXIT
  trap 'exit 143' TERM INT
  cluster down --fast >"$RUN_DIR/cleanup.log" 2>&1 || true   # an interrupted run's leftovers
  T_START=$(e2e_now)
}
# shellcheck disable=SC2317  # the EXIT trap runs it
# e2e_ours PID: PID is still a child of this script. A background process that ended long ago
# left its number free, and on a busy machine another run's process may have it now (a run
# beside this one lost its exporter to such a stale kill): only our own children are stopped.
e2e_ours() { [[ $(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ') == "$$" ]]; }
e2e_cleanup() {
  local rc=$? pid
  if declare -F e2e_cleanup_hook >/dev/null; then e2e_cleanup_hook || true; fi
  for pid in "${E2E_PIDS[@]}"; do if e2e_ours "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi; done
  for pid in "${E2E_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cluster down --fast >>"$RUN_DIR/cleanup.log" 2>&1 || e2e_log "cluster down failed: see $RUN_DIR/cleanup.log"
  exit "$rc"
}
e2e_stop_pid() { # e2e_stop_pid PID
  local pid=$1 p keep=()
  [[ -n $pid ]] || return 0
  for p in "${E2E_PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
  E2E_PIDS=("${keep[@]}")   # reaped below: its number may be reused, never stopped again
  if e2e_ours "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

EXPORTER_PID=""
e2e_exporter() { # e2e_exporter POLL_S [ARG...]
  local poll=$1 flags_of_one=(--patroni.url "$MEMBER0_REST" --raft.password-file "$RUN_DIR/raft-secret")
  shift
  ( umask 077; printf '%s\n' "$RAFT_PASS" >"$RUN_DIR/raft-secret" )
  # the flags of one cluster; with --config.file its entries name the members (the flags are refused beside it)
  [[ " $* " != *" --config.file "* ]] || flags_of_one=()
  "$EXPORTER_BIN" "${flags_of_one[@]}" \
    --poll.interval "${poll}s" --poll.timeout "${E2E_POLL_TIMEOUT:-1s}" --web.listen-address 127.0.0.1:9393 "$@" \
    >"$EXPORTER_LOG" 2>&1 9>&- &
  EXPORTER_PID=$!
  E2E_PIDS+=("$EXPORTER_PID")
}
e2e_status() { # e2e_status NAME [URL | -- ARG...]
  local rc=0 args=(--patroni.url "${2:-$MEMBER0_REST}" --raft.password-file raft-secret) t0
  [[ ${2:-} == -- ]] && args=("${@:3}")
  t0=$(e2e_now)
  (cd "$RUN_DIR" && timeout $((E2E_STATUS_TIMEOUT + 10)) "$EXPORTER_BIN" status --timeout "${E2E_STATUS_TIMEOUT}s" "${args[@]}") \
    >"$RUN_DIR/status-$1.txt" 2>&1 9>&- || rc=$?
  echo "$rc" >"$RUN_DIR/status-$1.rc"
  e2e_log "status $1: exit $rc in $(e2e_since "$t0") s (--timeout ${E2E_STATUS_TIMEOUT}s)"
  sed 's/^/    /' "$RUN_DIR/status-$1.txt" >&2
  echo "$rc"
}
e2e_member() { local v="MEMBER${1}_$2"; echo "${!v}"; }
e2e_rest() { e2e_member "$1" REST; }
# e2e_edit_config OUT KEY=VALUE...: `patronictl edit-config -s KEY=VALUE ... --force` (output in
# OUT), judged by its effect: each KEY's value in a member's GET /config (the DCS), waited for up
# to 20 s. patronictl can abort at its exit on a loaded machine after the change was written
# ("FATAL: exception not rethrown", its Raft thread torn down at interpreter exit: rc 134), so
# its exit code alone is not the verdict; it is kept in OUT. rc 1 when a value did not take.
e2e_edit_config() {
  local out=$1 rc=0 kv args=() deadline n got missing
  shift
  for kv in "$@"; do args+=(-s "$kv"); done
  cluster ctl edit-config "${SCOPE:-pg-test}" "${args[@]}" --force >"$out" 2>&1 || rc=$?
  echo "patronictl exit $rc" >>"$out"
  deadline=$(($(date +%s) + 20))
  while :; do
    missing=""
    for kv in "$@"; do
      for n in 0 1 2; do
        got=$(curl -sf -m 2 "$(e2e_rest "$n")/config" 2>/dev/null | jq -r --arg k "${kv%%=*}" 'if has($k) then .[$k] else null end | tostring' 2>/dev/null) && break
      done
      [[ $got == "${kv#*=}" ]] || missing+=" ${kv%%=*}=${got:-?}"
    done
    [[ -z $missing ]] && break
    (($(date +%s) < deadline)) || { cat "$out" >&2; e2e_log "edit-config: not in GET /config within 20 s:$missing"; return 1; }
    sleep 0.5
  done
  ((rc == 0)) || e2e_log "edit-config: patronictl exit $rc, the change in GET /config all the same ($(tail -n 3 "$out" | tr '\n' ' '))"
}
e2e_own_role() { curl -sf -m 2 "$(e2e_rest "$1")/patroni" 2>/dev/null | jq -r '.role // "?"' 2>/dev/null || echo down; }
e2e_cluster_leader() {
  local n js
  for n in 0 1 2; do
    js=$(curl -sf -m 3 "$(e2e_rest "$n")/cluster" 2>/dev/null) || continue
    jq -er '[.members[] | select(.role == "leader") | .name][0] // empty' <<<"$js"
    return
  done
  return 1
}
e2e_exporter_survived() {
  if kill -0 "$EXPORTER_PID" 2>/dev/null; then pass "exporter process still running"; else on_fail "exporter process died"; fi
  if grep -q panicked "$EXPORTER_LOG"; then on_fail "exporter log shows a panic"; fi
}
e2e_finish() { # e2e_finish TITLE
  [[ -z $EXPORTER_PID ]] || e2e_exporter_survived
  e2e_result total "run (s)" "$(e2e_since "$T_START")"
  {
    echo "---- $1, Patroni $PATRONI_VERSION, $(date -u +%Y-%m-%d)"
    e2e_results_print
  } | tee "$RUN_DIR/results.txt"
  if e2e_summary | tee -a "$RUN_DIR/results.txt"; then exit 0; fi
  exit 1
}

E2E_PROM="${E2E_PROM:-http://127.0.0.1:9090}"
E2E_AM="${E2E_AM:-}"
E2E_PROM_PID=""
E2E_AM_PID=""
e2e_wait_http() { # e2e_wait_http URL SECONDS
  local deadline=$(($(date +%s) + $2))
  until curl -fs -o /dev/null -m 2 "$1"; do
    (($(date +%s) < deadline)) || return 1
    sleep 0.5
  done
}
e2e_alertmanager() { # e2e_alertmanager DIR [GROUP_WAIT] [GROUP_BY]
  local dir=$1
  E2E_AM=${E2E_AM:-http://127.0.0.1:9093}
  printf '%s\n' 'route:' '  receiver: log' "  group_by: [${3:-alertname, scope}]" "  group_wait: ${2:-10s}" \
    'receivers:' '  - name: log' >"$dir/alertmanager.yml"
  prometheus-alertmanager --config.file "$dir/alertmanager.yml" --storage.path "$dir/alertmanager-data" \
    --web.listen-address "${E2E_AM#http://}" --cluster.listen-address= >"$dir/alertmanager.log" 2>&1 9>&- &
  # shellcheck disable=SC2034  # read by the scripts that source this file
  E2E_AM_PID=$!
  e2e_wait_http "$E2E_AM/-/ready" 60
}
e2e_prometheus() { # e2e_prometheus DIR [TARGETS] [INTERVAL]
  local dir=$1 targets=${2:-127.0.0.1:9393} every=${3:-2s} rules
  [[ $targets == *targets:* ]] || targets="      - targets: ['$targets']"
  {
    printf '%s\n' 'global:' "  scrape_interval: $every" "  evaluation_interval: $every" 'rule_files:'
    for rules in ${E2E_PROM_RULES:-$E2E_REPO/alerts/patroni-raft.rules.yml}; do printf '  - %s\n' "$rules"; done
    [[ -z $E2E_AM ]] || printf '%s\n' 'alerting:' '  alertmanagers:' '    - static_configs:' \
      "        - targets: ['${E2E_AM#http://}']"
    printf '%s\n' 'scrape_configs:' '  - job_name: patroni-raft-exporter'
    [[ -z ${E2E_PROM_CA:-} ]] || printf '%s\n' '    scheme: https' '    tls_config:' "      ca_file: $E2E_PROM_CA"
    printf '%s\n' '    static_configs:' "$targets"
  } >"$dir/prometheus.yml"
  prometheus --config.file "$dir/prometheus.yml" --storage.tsdb.path "$dir/prometheus-data" \
    --web.listen-address "${E2E_PROM#http://}" >"$dir/prometheus.log" 2>&1 9>&- &
  # shellcheck disable=SC2034  # read by the scripts that source this file
  E2E_PROM_PID=$!
  e2e_wait_http "$E2E_PROM/-/ready" 60
}
e2e_prom_rule_loaded() {
  curl -fs -m 3 "$E2E_PROM/api/v1/rules" 2>/dev/null \
    | jq -e --arg a "$1" '[.data.groups[].rules[] | select(.name == $a)] | length == 1' >/dev/null
}
E2E_PROM_T0=""
e2e_prometheus_rules() { # e2e_prometheus_rules NAME...
  local rule
  e2e_prometheus "$RUN_DIR" || on_fail "Prometheus not ready within 60 s (log $RUN_DIR/prometheus.log)"
  E2E_PIDS+=("$E2E_PROM_PID")
  # shellcheck disable=SC2034  # read by the scripts that source this file
  E2E_PROM_T0=$(e2e_now)
  for rule in "$@"; do
    check "Prometheus loaded the shipped rule $rule" e2e_prom_rule_loaded "$rule"
  done
}
e2e_prom_alerts() { curl -fs -m 3 "$E2E_PROM/api/v1/alerts" 2>/dev/null || echo '{}'; }
e2e_alert_state() { # e2e_alert_state JSON NAME [MEMBER]
  jq -r --arg n "$2" --arg m "${3:-}" \
    '[(.data.alerts // [])[] | select(.labels.alertname == $n and ($m == "" or .labels.member == $m)) | .state] | sort | last // ""' <<<"$1"
}
e2e_alerts_brief() {
  e2e_prom_alerts | jq -r '[(.data.alerts // [])[] | "\(.labels.alertname)\(if .labels.member then "{\(.labels.member)}" else "" end)/\(.state)"] | sort | join(" ")' \
    2>/dev/null || true
}
e2e_alerts_seen() { # e2e_alerts_seen T0 [ERE]
  local w q
  w=$(awk -v a="$1" -v b="$(e2e_now)" 'BEGIN { printf "%d", b - a + 1 }')
  q="group by (alertname, alertstate, scope) (last_over_time(ALERTS{alertname=~\"${2:-.+}\"}[${w}s]))"
  curl -fs -m 5 "$E2E_PROM/api/v1/query" --data-urlencode "query=$q" 2>/dev/null \
    | jq -r '[.data.result[] | "\(.metric.alertname){\(.metric.scope // "")}/\(.metric.alertstate)"] | sort | join(" ")' 2>/dev/null \
    || echo "?query-failed"
}
