#!/usr/bin/env bash
# test.sh - every check of the project, in order, with a summary at the end.
# This is what `make test` and CI (.ci/run) run. It installs what it needs (Debian
# packages, the Patroni venvs, promtool, cargo-deb, shellcheck) through scripts/install-deps.sh.
#
# Usage: scripts/test.sh [--no-e2e]
#   E2E_MATRICES="3.3.8 4.1.5"   which Patroni versions the end-to-end scenarios run on
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
RUN_E2E=1
[[ ${1:-} == --no-e2e ]] && RUN_E2E=0
E2E_MATRICES="${E2E_MATRICES:-3.3.8 4.1.5}"
RESULTS=()
FAILED=0
START=$(date +%s)

step() { # step NAME CMD...
  local name=$1; shift
  local t0
  t0=$(date +%s)
  printf '\n\033[1m==> %s\033[0m\n' "$name"
  if "$@"; then
    RESULTS+=("$(printf 'PASS  %-48s %4ss' "$name" $(( $(date +%s) - t0 )))")
  else
    RESULTS+=("$(printf 'FAIL  %-48s %4ss' "$name" $(( $(date +%s) - t0 )))")
    FAILED=$(( FAILED + 1 ))
  fi
}

# dpkg -i needs root; CI runs as root, a developer's machine may have sudo.
# shellcheck disable=SC2317  # step runs it
package_e2e() {
  if ((EUID == 0)); then tests/e2e/package.sh 3.3.8; else sudo -n tests/e2e/package.sh 3.3.8; fi
}

# A network namespace of its own needs root.
# shellcheck disable=SC2317  # step runs it
mixin_job() {
  if ((EUID == 0)); then tests/e2e/mixin-job.sh; else sudo -n tests/e2e/mixin-job.sh; fi
}

# The crate as crates.io would get it builds from its packaged files alone (Cargo.toml include).
# Its own target dir: the packaged copy has the same unit hashes as the checkout, and built in
# the shared one, its build script and library (dep-info pointing into target/package/) would
# stand in for the checkout's in later builds, whatever is edited since.
# shellcheck disable=SC2317  # step runs it
publish_dry_run() {
  cargo publish --dry-run --locked --allow-dirty --target-dir "${CARGO_TARGET_DIR:-target}/publish-dry-run"
}

# The golden file marks run-dependent values as <varies>; promtool needs numbers.
# shellcheck disable=SC2317  # step runs it
golden_promtool() { sed 's/ <varies>$/ 0/' tests/golden/metrics.txt | promtool check metrics; }

step "install dependencies (apt, Patroni venvs, promtool, cargo-deb)" scripts/install-deps.sh
step "shellcheck (every shell script)" scripts/shellcheck.sh
step "lib.sh selftest (the /metrics text reader, no cluster)" tests/e2e/lib-selftest.sh
step "no import circle between the modules of src/" scripts/module-cycles.py
step "rustfmt --check" cargo fmt --all -- --check
step "clippy -D warnings" cargo clippy --all-targets --locked -- -D warnings
step "cargo test" cargo test --locked
step "promtool check metrics (golden /metrics)" golden_promtool
step "alert rules: promtool check/test, amtool" scripts/check-alerts.sh
step "dashboards up to date and valid" scripts/gen-dashboards.sh --check
step "cargo publish --dry-run (packaged crate builds)" publish_dry_run
if (( RUN_E2E )); then
  step "cargo build (exporter binary for e2e)" cargo build --locked --bin patroni-raft-exporter
  step "the exporter binary holds no test double" scripts/check-no-test-doubles.sh
  # issue #22: the mixin's rules rendered for job="pg-ha": PatroniExporterDown fires in a real
  # Prometheus (a network namespace of its own, no Patroni; ~20 s)
  step "mixin: rules for job pg-ha fire in a real Prometheus" mixin_job
  # as root each version in a network namespace of its own, in parallel (~3 min wall clock);
  # otherwise one after the other on the host's loopback (the real-cluster lock)
  # shellcheck disable=SC2086  # one word per version
  step "e2e scenarios, Patroni $E2E_MATRICES" tests/e2e/scenarios.sh $E2E_MATRICES
  # issue #12 section 1, proof against Patroni itself: candidates >= 1 -> a leader kill gives a
  # new leader; both replicas nofailover -> candidates 0, PatroniNoFailoverCandidate pending in
  # a real Prometheus, and a leader kill promotes nobody. A network namespace of its own per
  # version, the versions in parallel; ~3 min wall clock
  # shellcheck disable=SC2086  # one word per version
  step "e2e failover readiness, Patroni $E2E_MATRICES" tests/e2e/failover-readiness.sh $E2E_MATRICES
  # issue #12, failsafe mode: Raft cut between the members (REST open), failsafe_mode on: the
  # leader stays primary beyond ttl, PatroniRaftQuorumLost fires saying "failsafe mode keeps
  # the primary", PatroniFailsafeModeActive fires; heal. A network namespace of its own per
  # version, the versions in parallel; ~3 min wall clock
  # shellcheck disable=SC2086  # one word per version
  step "e2e failsafe mode, Patroni $E2E_MATRICES" tests/e2e/failsafe.sh $E2E_MATRICES
  # stereo mode (Charmed PostgreSQL 16): two members and a Raft-only witness
  # (patroni_raft_controller) on port 2224; healthy (nothing pending for 150 s), the replica
  # stopped (PatroniRaftQuorumNoMargin fires after its for: 5m, no quorum-loss page), the
  # primary killed (promoted through the witness's vote), the witness stopped. A network
  # namespace of its own per version, the versions in parallel; ~10 min wall clock (585-604 s)
  # shellcheck disable=SC2086  # one word per version
  step "e2e stereo mode, Patroni $E2E_MATRICES" tests/e2e/stereo.sh $E2E_MATRICES
  # issue #20, how close the next outage is, against PostgreSQL's and Patroni's own word: quorum
  # margin (a replica killed), data at risk (pg_wal_lsn_diff, walreceivers stopped, async/sync),
  # replay lag seconds (replay paused), a stalled HA loop (SIGSTOP of the heartbeat connection's
  # backend), clock skew (libfaketime, PatroniLeaderClockSkew firing). A network namespace of its
  # own per version, the versions in parallel; ~4 min wall clock
  # shellcheck disable=SC2086  # one word per version
  step "e2e next outage, Patroni $E2E_MATRICES" tests/e2e/next-outage.sh $E2E_MATRICES
  # issue #22 item 4, standby clusters: a second real Patroni + Raft cluster with standby_cluster:
  # pointing at the first; the standby lag against pg_wal_lsn_diff under a write load and back,
  # the source primary stopped: PatroniStandbyLeaderNotStreaming firing. A network namespace of
  # its own per version, the versions in parallel; ~2.5 min wall clock (125-168 s, 2026-11-25)
  # shellcheck disable=SC2086  # one word per version
  step "e2e standby cluster, Patroni $E2E_MATRICES" tests/e2e/standby.sh $E2E_MATRICES
  # issue #29, pysyncobj 0.3.16+ keeps a restarted node's term and may lower its commit index
  # after a crash: a Raft follower and the Raft leader stopped, killed, and crashed with the
  # journal's tail lost, then started; the term and commit index measured, no false alert in a
  # real Prometheus with the shipped rules. A network namespace of its own per version, the
  # versions in parallel; ~2.5 min wall clock (136 s, 2026-11-26)
  # shellcheck disable=SC2086  # one word per version
  step "e2e restarts and crashes of a Raft node, Patroni $E2E_MATRICES" tests/e2e/restart.sh $E2E_MATRICES
  step "e2e alerting: real Prometheus + Alertmanager page on quorum loss" tests/e2e/alerting.sh 3.3.8
  # issue #29 item 6, Charmed PostgreSQL's own Patroni rules and dashboard unchanged (from the
  # pinned library package, tests/e2e/requirements-charm.txt) on the compat records: two
  # exporters, 150 s quiet, every dashboard query with data, a killed primary seen as Patroni's own
  # /metrics would show it (a second Prometheus scrapes the members' own /metrics). A network
  # namespace of its own per version, the versions in parallel
  # shellcheck disable=SC2086  # one word per version
  step "e2e Charmed PostgreSQL's monitoring, Patroni $E2E_MATRICES" tests/e2e/charm-monitoring.sh $E2E_MATRICES
  # partitions (nftables in a network namespace of its own per version, the versions in
  # parallel): quorum verdict, shipped alerts, two vantage points, 150 s healthy check, and the
  # split views of issue #19 (two primaries, one member's Raft cut off, a partner list that
  # differs); ~12 min wall clock (727 s / 716 s, 2026-11-24)
  # shellcheck disable=SC2086  # one word per version
  step "e2e partition lab, Patroni $E2E_MATRICES" tests/e2e/lab.sh $E2E_MATRICES
  # https + verify_client + the exporter's own TLS and basic auth + no secret leaks: on the
  # version Charmed PostgreSQL ships only (one more cluster start, ~1 min)
  step "e2e TLS, auth and secrets, Patroni 3.3.8" tests/e2e/tls.sh 3.3.8
  # issue #29 item 7: Charmed PostgreSQL's patroni.yml.j2 (the pinned library package) rendered
  # with jinja2 for a member of an https cluster, the exporter run on that file alone: every
  # member over TLS with the peer CA, every Raft voter, and another CA refused (~1.5 min)
  # shellcheck disable=SC2086  # one word per version
  step "e2e Charmed PostgreSQL's patroni.yml as the only configuration, Patroni $E2E_MATRICES" tests/e2e/charm-config.sh $E2E_MATRICES
  # make deb (release build), lintian, dpkg -i, the unit's ExecStart as its user against a
  # real cluster, dpkg --purge leaves nothing (~2 min with the release build)
  step "e2e Debian package: install, run as the unit does, purge" package_e2e
  # the release build the package ships (made by the package step): no fake node in it
  step "the packaged release binary holds no test double" \
    scripts/check-no-test-doubles.sh "${CARGO_TARGET_DIR:-target}/release/patroni-raft-exporter"
fi

printf '\n\033[1mSummary\033[0m (%ss)\n' $(( $(date +%s) - START ))
printf '  %s\n' "${RESULTS[@]}"
(( FAILED == 0 )) && echo "all checks passed" || echo "$FAILED check(s) failed"
exit $(( FAILED > 0 ))
