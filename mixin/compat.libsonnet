// Recording rules that give the exporter's series Patroni's own /metrics names (issue #22
// item 5): dashboards and alerts written for Patroni's GET /metrics (3.x and 4.x) keep working
// on the exporter, which asks every member itself. Rendered to alerts/patroni-compat.rules.yml
// by scripts/render-mixin.sh; tested by alerts/tests/compat.test.yml, which
// scripts/compat-test.py makes from the golden /metrics of a captured healthy 3.3.8 and 4.1.5
// cluster and Patroni's own /metrics captured at the same moment (tests/fixtures/patroni-3.3.8/
// metrics-m*.txt, patroni-4.1.5/01-metrics-m*.txt): every value equal.
//
// Patroni labels each series {scope, name}: here `name` is the exporter's `member`, and the
// exporter's `role`, `kind`, `state` labels are aggregated away. So are the scrape's `instance`
// and `job`: with two exporters on one cluster (the recommended setup) each member would
// otherwise have two series, and rules written for Patroni's own /metrics, where each member
// reports only itself, count it twice (Charmed PostgreSQL's `sum by (..., scope)
// (patroni_master) > 1`, PatroniMultipleLeaders, fires at once). Other target labels (Juju's
// juju_model, juju_model_uuid, juju_application) stay.
// Of two exporters, each member's records come from the one whose last poll that reached the
// member (patroni_member_api_up 1) finished last (patroni_exporter_last_poll_timestamp_seconds):
// one consistent view, not a mix. A mix is wrong in a switchover, where the old primary demotes
// before the new one promotes: an exporter that polled before the demotion next to one that
// polled after the promotion gives, merged with max, two primaries (tests/e2e/charm-monitoring.sh
// saw the charm's critical PatroniMultipleLeaders fire so on 4.1.5), merged with min, no primary
// for up to a poll longer than the real gap (PatroniHasNoLeader fired so on 3.3.8 and 4.1.5,
// where Patroni's own /metrics showed none).
// juju_unit is the scrape target's unit, here the exporter's, which differs between two
// exporters: it is replaced by the member's own unit where Juju's labels say the cluster is a
// Juju application, as Charmed PostgreSQL names its members (the unit name with - for /:
// postgresql/0 is member postgresql-0), and dropped otherwise. The charm's dashboard uses it as
// its legends.
// Like Patroni, whose /metrics a member that does not answer does not serve, only members whose
// own GET /patroni answered in the exporter's last poll (patroni_member_api_up 1) have series:
// the records read from GET /cluster (running, streaming, sync standby...) would otherwise keep
// a dead member's last DCS state.
// patroni_version is the exporter's patroni_member_patroni_version, the number Patroni makes of
// its version (3.3.8 -> 30308): Charmed PostgreSQL's Patroni dashboard takes its template
// variables from it.
// Do not load these rules where Patroni's own /metrics is scraped too: the names would clash.
// per exporter and member that answered: the end of that exporter's last poll
local polled = '(patroni_member_api_up == 1) * on (scope, instance, job) group_left () patroni_exporter_last_poll_timestamp_seconds';
// of those, the latest per member (equal times: both)
local freshest = '%s == ignoring (instance, job, juju_unit) group_left () max without (instance, job, juju_unit) (%s)' % [polled, polled];
local member(expr) = |||
  label_replace(label_replace(label_join(
    max without (member, instance, job, juju_unit) (
      label_replace((%s) and (%s), "name", "$1", "member", "(.+)")
    ),
  "juju_unit", ";", "juju_application", "name"), "juju_unit", "$1/$2", "juju_unit", "[^;]+;(.+)-([0-9]+)"), "juju_unit", "", "juju_unit", ".*;.*")
||| % [expr, freshest];
local zero = '0 * patroni_member_server_version';
local orZero(expr) = '(%s) or %s' % [expr, zero];
local perMember(scopeExpr) = '%s + ignoring (member) group_left () (%s)' % [zero, scopeExpr];

{
  patroniCompatRulesHeader:: |||
    Recording rules for patroni-raft-exporter: Patroni's own /metrics names from the exporter's series.

    Generated from mixin/compat.libsonnet by scripts/render-mixin.sh: edit the mixin, not this file.
    Tested by alerts/tests/compat.test.yml (scripts/compat-test.py) against Patroni's own /metrics.

    One series per cluster and member whatever the number of exporters: each member's from the
    exporter whose last poll that reached it finished last; instance and job aggregated away; other
    target labels kept, but juju_unit, which becomes the member's own unit where juju_application is
    set (postgresql-0 -> postgresql/0). Only for members whose own GET /patroni answered
    (patroni_member_api_up 1): a member whose Patroni is down has none, as in Patroni's own
    /metrics, even where a frozen GET /cluster still lists it.
  |||,

  patroniCompatRuleGroups:: [
    {
      name: 'patroni-raft.patroni-compat',
      comment:: |||
        Patroni's GET /metrics names, {scope, name} labels, from the exporter's series (docs/metrics.md,
        "Porting panels from Patroni's own /metrics").
      |||,
      rules: [
        { record: 'patroni_version', expr: member('patroni_member_patroni_version') },
        { record: 'patroni_postgres_running', expr: member('max without (state) (patroni_member_state{state=~"running|streaming|in archive recovery"})') },
        { record: 'patroni_postmaster_start_time', expr: member('patroni_member_postmaster_start_time_seconds') },
        { record: 'patroni_master', expr: member(orZero('max without (role) (patroni_member_reported_role{role="primary"})')) },
        { record: 'patroni_primary', expr: member(orZero('max without (role) (patroni_member_reported_role{role="primary"})')) },
        { record: 'patroni_xlog_location', expr: member(orZero('max without (kind) (patroni_member_wal_position_bytes{kind="flush"})')) },
        { record: 'patroni_standby_leader', expr: member(orZero('max without (role) (patroni_member_reported_role{role="standby_leader"})')) },
        { record: 'patroni_replica', expr: member(orZero('max without (role) (patroni_member_reported_role{role="replica"})')) },
        { record: 'patroni_quorum_standby', expr: member(orZero('max without (role) (patroni_member_role{role="quorum_standby"})')) },
        { record: 'patroni_sync_standby', expr: member(orZero('max without (role) (patroni_member_role{role="sync_standby"})')) },
        { record: 'patroni_xlog_received_location', expr: member(orZero('max without (kind) (patroni_member_wal_position_bytes{kind="received"})')) },
        { record: 'patroni_xlog_replayed_location', expr: member(orZero('max without (kind) (patroni_member_wal_position_bytes{kind="replayed"})')) },
        { record: 'patroni_xlog_replayed_timestamp', expr: member(orZero('patroni_member_replayed_timestamp_seconds')) },
        { record: 'patroni_xlog_paused', expr: member(orZero('patroni_member_wal_replay_paused')) },
        { record: 'patroni_postgres_streaming', expr: member(orZero('max without (state) (patroni_member_state{state="streaming"})')) },
        { record: 'patroni_postgres_in_archive_recovery', expr: member(orZero('max without (state) (patroni_member_state{state="in archive recovery"})')) },
        { record: 'patroni_postgres_server_version', expr: member('patroni_member_server_version') },
        { record: 'patroni_cluster_unlocked', expr: member(perMember('patroni_cluster_leaders == bool 0')) },
        { record: 'patroni_failsafe_mode_is_active', expr: member(orZero('patroni_member_failsafe_active')) },
        { record: 'patroni_postgres_timeline', expr: member(orZero('patroni_member_reported_timeline')) },
        { record: 'patroni_dcs_last_seen', expr: member(orZero('patroni_member_dcs_last_seen_timestamp_seconds')) },
        { record: 'patroni_pending_restart', expr: member(orZero('patroni_member_pending_restart')) },
        { record: 'patroni_is_paused', expr: member(perMember('patroni_cluster_paused')) },
        // Patroni 4.2.0's names (PRs #3534, #3633): failsafe_mode of the dynamic configuration;
        // whether the member is in the failsafe topology (GET /failsafe; 0 while failsafe mode is
        // off, when the exporter does not ask); failover_priority, 0 with nofailover, else the
        // tag, 1 when unset (the exporter reads the tags from the member's own GET /patroni).
        { record: 'patroni_failsafe_mode_enabled', expr: member(perMember('patroni_config_failsafe_mode')) },
        { record: 'patroni_failsafe_member', expr: member(orZero('patroni_member_failsafe_topology')) },
        { record: 'patroni_failover_priority', expr: member('patroni_member_failover_priority') },
        // 4.x: Patroni's numbers for its PostgreSQL states (api.py); the exporter has the state of
        // GET /cluster, where a replica's `running` is `streaming` (or `in archive recovery`).
        // States GET /cluster does not show (initdb, bootstrap, *_failed but start failed) give
        // no sample.
        {
          record: 'patroni_postgres_state',
          expr: member(|||
            max without (state) (
                (patroni_member_state{state=~"running|streaming|in archive recovery"} == 1) * 5
              or (patroni_member_state{state="creating replica"} == 1) * 4
              or (patroni_member_state{state="starting"} == 1) * 6
              or (patroni_member_state{state="start failed"} == 1) * 8
              or (patroni_member_state{state="restarting"} == 1) * 9
              or (patroni_member_state{state="stopping"} == 1) * 11
              or (patroni_member_state{state="stopped"} == 1) * 12
              or (patroni_member_state{state="crashed"} == 1) * 14
            )
          |||),
        },
      ],
    },
  ],
}
