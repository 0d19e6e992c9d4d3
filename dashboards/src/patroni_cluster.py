"""Dashboard 'Patroni cluster' (uid patroni-raft-cluster): the Patroni REST view of a cluster."""
from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import common as mc

from common import (DCS_EVIDENCE_EXPR, DCS_EVIDENCE_MAP, SEL, UP_MAP, YESNO_BAD, build, cell_color,
                    cluster_stat, dcs_quorum_row, exporter_row, mapping_prop, increased, per_cluster,
                    per_member, state_panel, prop, q, range_total, stat_panel, verdict_timeline,
                    table_panel, table_queries, ts_panel)

UID = "patroni-raft-cluster"

# patroni_etcd_is_leader, _has_leader and _up of an endpoint as one number: 3 leader (its own
# Status), 1 follower that knows a leader, 0 no leader known, -1 no answer. Where Status is
# refused to the exporter's user /health says only whether a leader is known (1 or 0).
ETCD_ROLE_EXPR = (
    f'2 * max by (scope, endpoint) (patroni_etcd_is_leader{{{SEL}}})'
    f' + on (scope, endpoint) max by (scope, endpoint) (patroni_etcd_has_leader{{{SEL}}})'
    f' or max by (scope, endpoint) (patroni_etcd_has_leader{{{SEL}}})'
    f' or max by (scope, endpoint) (patroni_etcd_up{{{SEL}}}) - 1')
ETCD_ROLE_MAP = {"3": ("leader", "blue"), "1": ("follower", "green"), "0": ("NO LEADER", "red"),
                 "-1": ("NO ANSWER", "orange")}


def per_endpoint(family: str, what: str = ""):
    """A query of the etcd endpoint family `family`, a series per endpoint (the highest of the
    exporters' values); legend '{{scope}} {{endpoint}}', then `what`."""
    return q(f'max by (scope, endpoint) ({family}{{{SEL}}})',
             "{{scope}} {{endpoint}}" + (f" {what}" if what else ""))


def etcd_row(d):
    """The row 'etcd' (ids 80 to 91): each etcd member as the exporter reads it, the cluster's
    facts (alarms, the leader key's lease, Patroni's keys) and the members whose own view is
    stale against those keys. Empty for a cluster on Raft or REST only."""
    d = d.with_row(db.Row("etcd (clusters on etcd)").id(80))
    d = d.with_panel(stat_panel(
        81, "etcd members",
        [(f'max by (scope) (patroni_etcd_members_answering{{{SEL}}})', "{{scope}} answer"),
         (f'max by (scope) (patroni_etcd_members{{{SEL}}})', "{{scope}} voting members"),
         (f'max by (scope) (patroni_etcd_learners{{{SEL}}})', "{{scope}} learners")],
        "Voting etcd members that answer the exporter (their Status, or /health where Status is "
        "refused to its user), of the voting members in etcd's member list; learners replicate "
        "without voting. A quorum is floor(M/2)+1 of the voting members.",
        steps=[(None, "blue")], span=6, text_mode=mc.BigValueTextMode.VALUE_AND_NAME))
    d = d.with_panel(stat_panel(
        82, "etcd alarms", f'max by (scope, alarm) (patroni_etcd_alarms{{{SEL}}})',
        "etcd members raising each alarm. NOSPACE: the database reached its quota and etcd takes "
        "no writes; CORRUPT: a member's data differs from the others', etcd refuses reads and "
        "writes. Either way nobody can take the leader key (alert PatroniEtcdAlarm). No value: "
        "the alarms could not be read (Unreadable facts).",
        legend="{{scope}} {{alarm}}", steps=[(None, "green"), (1, "red")], span=6,
        text_mode=mc.BigValueTextMode.VALUE_AND_NAME))
    d = d.with_panel(stat_panel(
        83, "Leader key TTL", f'min by (scope) (patroni_etcd_leader_key_ttl_seconds{{{SEL}}})',
        "Seconds left on the lease of Patroni's leader key: ttl (30 s by default) right after "
        "the leader renews it, every loop_wait (10 s). Close to 0: the leader is not renewing "
        "it (a stalled HA loop, or etcd refusing its requests); at 0 the key is gone and the "
        "replicas race for it. No value: no leader key, or its lease could not be read.",
        legend="{{scope}}", unit="s", steps=[(None, "red"), (5, "orange"), (15, "green")], span=4))
    d = d.with_panel(stat_panel(
        84, "Member keys",
        [(f'max by (scope) (patroni_etcd_member_keys{{{SEL}}})', "{{scope}} keys in etcd"),
         (f'max by (scope) (patroni_cluster_members{{{SEL}}})'
          f' and on (scope) max by (scope) (patroni_dcs_quorum{{{SEL},dcs="etcd"}})', "{{scope}} in GET /cluster")],
        "Patroni's member keys (members/<name>) read directly from etcd, against the members "
        "GET /cluster lists (clusters on etcd only). A member's key lives as long as its lease "
        "(ttl): a member that stopped leaves etcd ttl after its last renewal.",
        steps=[(None, "blue")], span=4, text_mode=mc.BigValueTextMode.VALUE_AND_NAME))
    d = d.with_panel(stat_panel(
        85, "Unreadable facts", f'max by (scope, fact) (patroni_etcd_unreadable{{{SEL}}} == 1)',
        "Facts the exporter asked etcd for and could not read in the last poll, typically refused "
        "to its etcd user (alert PatroniEtcdFactUnreadable after 10m): status (etcd 3.6.0-3.6.9 "
        "answer Status to root only: the verdict rests on /health), members, alarms, keys "
        "(Patroni's prefix), leader_lease. Nothing is judged from them. No value: every fact "
        "read.", legend="{{scope}} {{fact}}", steps=[(None, "orange")], span=4,
        text_mode=mc.BigValueTextMode.NAME))
    d = d.with_panel(table_panel(
        86, "etcd members, per endpoint",
        table_queries(f'max by (scope, endpoint, member, version, cluster_version) (patroni_etcd_member_info{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_up{{{SEL}}})',
                      ETCD_ROLE_EXPR,
                      f'max by (scope, endpoint) (patroni_etcd_is_learner{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_raft_term{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_raft_index{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_raft_applied_index{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_db_size_bytes{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_db_size_in_use_bytes{{{SEL}}})',
                      f'max by (scope, endpoint) (patroni_etcd_db_quota_bytes{{{SEL}}})'),
        "One row per etcd endpoint the exporter asks, from each member's own Status: its name "
        "and etcd version, the cluster version it answered on /version (behind the members' "
        "own during a rolling upgrade, until the last member runs the new version), whether it answered, its role (leader by its own word, follower "
        "knowing a leader, NO LEADER), learner, Raft term, committed and applied index, and its "
        "database on disk, in use (the rest is freed pages a defragmentation returns) and its "
        "quota (reported from etcd 3.6). etcdctl endpoint status --cluster -w table says the same.",
        join_field="endpoint", height=6,
        exclude=["Time", "Value #A"],
        rename={"scope": "Cluster", "endpoint": "Endpoint", "member": "Member", "version": "etcd", "cluster_version": "Cluster version",
                "Value #B": "Answers", "Value #C": "Role", "Value #D": "Learner",
                "Value #E": "Raft term", "Value #F": "Committed index", "Value #G": "Applied index",
                "Value #H": "DB size", "Value #I": "DB in use", "Value #J": "Quota"},
        overrides=[
            ("Answers", [mapping_prop(UP_MAP), cell_color()]),
            ("Role", [mapping_prop(ETCD_ROLE_MAP), cell_color()]),
            ("Learner", [mapping_prop({"1": ("learner", "blue"), "0": ("voting", "text")})]),
            ("DB size", [prop("unit", "bytes")]), ("DB in use", [prop("unit", "bytes")]),
            ("Quota", [prop("unit", "bytes")]),
        ]))
    d = d.with_panel(state_panel(
        87, "etcd leader per endpoint", [q(ETCD_ROLE_EXPR, "{{scope}} {{endpoint}}")],
        "Each etcd member's role poll by poll: leader (by its own Status), follower (it knows a "
        "leader), NO LEADER, NO ANSWER. A leader that moves often: etcd-mixin's "
        "etcdHighNumberOfLeaderChanges from etcd's own /metrics.",
        ETCD_ROLE_MAP, span=12, height=7))
    d = d.with_panel(ts_panel(
        88, "etcd Raft term and index lag",
        [per_endpoint("patroni_etcd_raft_term", "term"),
         q(f'max by (scope) (patroni_etcd_raft_index{{{SEL}}})'
           f' - on (scope) group_right () max by (scope, endpoint) (patroni_etcd_raft_index{{{SEL}}})',
           "{{scope}} {{endpoint}} committed behind the highest"),
         q(f'max by (scope, endpoint) (patroni_etcd_raft_index{{{SEL}}})'
           f' - max by (scope, endpoint) (patroni_etcd_raft_applied_index{{{SEL}}})',
           "{{scope}} {{endpoint}} committed not applied")],
        "Each member's Raft term (+1 at every election) and how far its committed index is "
        "behind the highest of the cluster's, and its applied index behind its own committed "
        "one. Entries behind for more than a poll or two: a slow or cut-off member (etcd-mixin: "
        "etcdMemberCommunicationSlow, the fsync and commit latency alerts).", span=12, height=7,
        min_val=0))
    d = d.with_panel(ts_panel(
        89, "etcd database size against its quota",
        [per_endpoint("patroni_etcd_db_size_bytes", "on disk"),
         per_endpoint("patroni_etcd_db_size_in_use_bytes", "in use"),
         per_endpoint("patroni_etcd_db_quota_bytes", "quota")],
        "Each member's database on disk and in use, and its quota (etcd 3.6 and later report "
        "it; before, --quota-backend-bytes, 2 GiB by default). On disk reaching the quota raises "
        "NOSPACE (alert PatroniEtcdAlarm); etcd-mixin's etcdDatabaseQuotaLowSpace warns before. "
        "A large gap between on disk and in use: a defragmentation returns it.",
        unit="bytes", span=8, height=7, min_val=0))
    d = d.with_panel(stat_panel(
        90, "Member views against etcd's keys",
        f'max by (scope, member) (patroni_member_dcs_view_stale{{{SEL}}})',
        "Whether each member's own GET /cluster names the leader and the members that Patroni's "
        "keys read directly from etcd hold (read through etcd's leader, unchanged since the poll "
        "before). STALE: its watch of etcd stopped delivering changes (zalando/patroni #3359; "
        "alert PatroniMemberDcsViewStale after 1m).",
        legend="{{scope}} {{member}}", mapping={"1": ("STALE", "red"), "0": ("current", "green")},
        steps=[(None, "green"), (1, "red")], span=8, text_mode=mc.BigValueTextMode.VALUE_AND_NAME))
    d = d.with_panel(stat_panel(
        91, "etcd changes in the time range",
        [(range_total("patroni_etcd_leader_changes_total"), "{{scope}} leader changes"),
         (range_total("patroni_etcd_quorum_losses_total"), "{{scope}} quorum losses")],
        "etcd leader changes (another member as the leader the answering members agree on) and "
        "quorum verdicts of lost after a confirmed one, seen by the exporter in the time range.",
        steps=[(None, "green"), (1, "orange")], span=8, text_mode=mc.BigValueTextMode.VALUE_AND_NAME))
    return d


def dashboard():
    d = build("Patroni cluster", UID,
              "Patroni clusters on Raft or etcd (patroni-raft-exporter): the DCS quorum, leader, "
              "members, replication; etcd's members in their own row.",
              ["patroni", "postgresql", "raft", "etcd"],
              # leader changes and timeline changes of the selected clusters
              (("Leader changes", "orange", increased("patroni_cluster_leader_changes_total")),
               ("Timeline changes", "purple", f'changes(patroni_cluster_timeline{{{SEL}}}[2m]) > 0')))
    d = dcs_quorum_row(d, "Status")  # ---- Status (top): the DCS quorum first, whatever the DCS
    d = d.with_panel(stat_panel(
        5, "Leader",
        # times the member's own API answering: the frozen view of a lost quorum keeps naming a
        # dead leader, which must not stay green
        f'max by (scope, member) (patroni_member_role{{{SEL},role=~"leader|standby_leader"}} == 1)'
        f' * on (scope, member) group_left () max by (scope, member) (patroni_member_api_up{{{SEL}}})',
        "Member holding the leader role in GET /cluster (leader or standby_leader). Red: that "
        "member does not answer its own GET /patroni: a dead leader still named by a frozen DCS "
        "view (no DCS quorum) or by a TTL that has not expired yet.",
        legend="{{member}}", text_mode=mc.BigValueTextMode.NAME, steps=[(None, "red"), (1, "green")],
        span=5))
    d = d.with_panel(cluster_stat(
        14, "Primaries (own word)", "patroni_cluster_primaries",
        "Members that say primary (or standby_leader) in their own GET /patroni, including one "
        "that already left the DCS view: the DCS view names one leader (left), this counts who "
        "takes writes. 2: TWO PRIMARIES, an isolated old leader that has not demoted itself "
        "(alert PatroniMultiplePrimaries).",
        mapping={"2": ("TWO", "red"), "0": ("none", "red")},
        steps=[(None, "red"), (1, "green"), (2, "red")], span=3))
    d = d.with_panel(cluster_stat(
        6, "/cluster answers", "patroni_up",
        "1 when a member answered GET /cluster in the last poll (alert PatroniClusterUnreachable).",
        agg="min", mapping=UP_MAP, steps=[(None, "red"), (1, "green")], span=2))
    d = d.with_panel(cluster_stat(
        7, "Sync standbys", "patroni_cluster_sync_standbys",
        "Members with role sync_standby (alert PatroniSyncStandbyMissing at 0).",
        agg="min", steps=[(None, "red"), (1, "green")], span=8))
    d = d.with_panel(cluster_stat(
        9, "Timeline", "patroni_cluster_timeline",
        "Current PostgreSQL timeline of the cluster; +1 at every promotion.",
        steps=[(None, "blue")], span=8))
    d = d.with_panel(cluster_stat(
        10, "Paused", "patroni_cluster_paused",
        "Maintenance mode: no automatic failover while paused (alert PatroniPaused).",
        mapping={"1": ("PAUSED", "orange"), "0": ("no", "green")},
        steps=[(None, "green"), (1, "orange")], span=8))

    d = d.with_panel(verdict_timeline(11, span=24, height=3, verdict="patroni_dcs_quorum",
                                      evidence=DCS_EVIDENCE_EXPR, evidence_map=DCS_EVIDENCE_MAP))

    # ---- "If the leader dies now": failover readiness next to the quorum
    d = d.with_panel(stat_panel(
        12, "If the leader dies now",
        f'min by (scope) (patroni_cluster_failover_candidates{{{SEL}}})',
        "Failover candidates: members Patroni would promote if the leader failed now, by its own "
        "rules (reachable, running, not nofailover, watchdog healthy, synchronous in synchronous "
        "mode, within maximum_lag_on_failover). 0 with a leader up: nobody can take over (alert "
        "PatroniNoFailoverCandidate). The table beside says why members are excluded.",
        legend="{{scope}}", mapping={"0": ("NOBODY", "red")},
        steps=[(None, "red"), (1, "orange"), (2, "green")], span=6, height=5))
    d = d.with_panel(table_panel(
        13, "Failover candidates and exclusions",
        table_queries(f'max by (scope, member, reason) (patroni_member_failover_excluded{{{SEL}}} == 1)'
                      f' or on (scope, member) label_replace(max by (scope, member)'
                      f' (patroni_member_failover_eligible{{{SEL}}} == 1), "reason", "candidate", "", "")'),
        "Every member but the leader: 'candidate' when Patroni would promote it now, else each "
        "reason why not: unreachable, unknown (not asked), not_running, nofailover (tag or "
        "failover_priority 0), watchdog, not_sync (synchronous mode), lag (> "
        "maximum_lag_on_failover), timeline (check_timeline), dcs_quorum (the DCS, Raft or etcd, "
        "lost its quorum: nobody can take the leader key), dcs_view (its own /cluster differs: a "
        "stale Raft replica or etcd watch). "
        "`patroni-raft-exporter status` prints the numbers.",
        join_field="member", span=18, height=5,
        exclude=["Time", "Value", "Value #A"],
        rename={"scope": "Cluster", "member": "Member", "reason": "Reason"},
        overrides=[("Reason", [mapping_prop(
            {"candidate": ("candidate", "green"), "unknown": ("unknown (not asked)", "orange"),
             **{r: (r, "red") for r in ("unreachable", "not_running", "nofailover", "watchdog",
                                        "not_sync", "lag", "timeline", "dcs_quorum", "dcs_view")}}),
            cell_color()])]))

    # ---- Members table
    members = table_panel(
        8, "Members",
        table_queries(
            f'max by (scope, member, role) (patroni_member_role{{{SEL}}} == 1)',
            f'max by (scope, member, state) (patroni_member_state{{{SEL}}} == 1)',
            f'max by (scope, member) (patroni_member_timeline{{{SEL}}})',
            f'max by (scope, member) (patroni_member_lag_bytes{{{SEL}}})',
            f'max by (scope, member) (patroni_member_api_up{{{SEL}}})',
            f'max by (scope, member, reported_role) (label_replace(patroni_member_reported_role{{{SEL}}} == 1, "reported_role", "$1", "role", "(.*)"))',
            f'max by (scope, member) (patroni_member_role_mismatch{{{SEL}}})',
            f'max by (scope, member) (patroni_member_pending_restart{{{SEL}}})',
            f'max by (scope, member) (patroni_member_in_dcs{{{SEL}}})',
        ),
        "One row per member. role/state/timeline/lag come from GET /cluster (the DCS view); "
        "'reported role' and 'API up' from the member's own GET /patroni. A role mismatch means "
        "the DCS view is frozen (typically no DCS quorum). 'In DCS view' LEFT: a member that "
        "left GET /cluster in the last ttl (or still says primary), still asked.",
        join_field="member", height=5,
        exclude=["Time", "Value #A", "Value #B", "Value #F"],
        rename={"scope": "Cluster", "member": "Member", "role": "Role (/cluster)",
                "reported_role": "Reported role (/patroni)", "Value #G": "Role mismatch",
                "state": "State", "Value #E": "API up", "Value #C": "Timeline", "Value #D": "Lag",
                "Value #H": "Pending restart", "Value #I": "In DCS view"},
        overrides=[
            ("Lag", [prop("unit", "bytes")]),
            ("API up", [mapping_prop(UP_MAP), cell_color()]),
            ("Role mismatch", [mapping_prop(YESNO_BAD), cell_color()]),
            ("Pending restart", [mapping_prop({"1": ("YES", "orange"), "0": ("no", "green")}), cell_color()]),
            ("In DCS view", [mapping_prop({"1": ("yes", "green"), "0": ("LEFT", "red")}), cell_color()]),
        ])
    d = d.with_panel(members)

    # ---- Replication
    d = d.with_row(db.Row("Replication").id(20))
    d = d.with_panel(ts_panel(
        21, "Replication lag",
        [per_member("patroni_member_lag_bytes"),
         per_member("patroni_member_replay_lag_bytes", "replay"),
         per_member("patroni_member_receive_lag_bytes", "receive")],
        "Bytes each replica is behind the leader (GET /cluster 'lag'; receive and replay lag from "
        "Patroni 4.1). "
        "Alert PatroniReplicationLagHigh above 16 MiB for 5m.", unit="bytes"))
    d = d.with_panel(ts_panel(
        22, "Timeline per member",
        [per_member("patroni_member_timeline"),
         q(f'patroni_cluster_timeline{{{SEL}}}', "{{scope}} cluster")],
        "Members that stay on an older timeline than the cluster did not follow a promotion "
        "(alert PatroniTimelineDiverged)."))
    d = d.with_panel(ts_panel(
        23, "Members, leaders, sync standbys",
        [q(f'patroni_cluster_members{{{SEL}}}', "{{scope}} members"),
         q(f'patroni_cluster_leaders{{{SEL}}}', "{{scope}} leaders"),
         q(f'patroni_cluster_sync_standbys{{{SEL}}}', "{{scope}} sync standbys"),
         q(f'patroni_leader_streaming_standbys{{{SEL}}}', "{{scope}} streaming (leader's PostgreSQL)"),
         q(f'patroni_leader_synchronous_standbys{{{SEL}}}', "{{scope}} synchronous (leader's PostgreSQL)")],
        "Counts from GET /cluster, and the standbys the leader's own PostgreSQL streams to and "
        "waits for (pg_stat_replication). Leaders must be exactly 1 (alerts PatroniNoLeader, "
        "PatroniMultipleLeaders); sync standbys in /cluster above the leader's synchronous ones: "
        "a stale DCS view (alert PatroniSyncStateMismatch)."))
    d = d.with_panel(ts_panel(
        24, "WAL positions",
        [per_member("patroni_member_wal_position_bytes", "{{kind}}")],
        "WAL flush (leader), received and replayed (replicas) positions from each member's GET /patroni.",
        unit="bytes"))

    # ---- Split views: what one member's /cluster cannot show
    d = d.with_row(db.Row("Split views").id(50))
    d = d.with_panel(ts_panel(
        51, "Primaries by their own word vs DCS leaders",
        [per_cluster("patroni_cluster_primaries", "say primary"),
         per_cluster("patroni_cluster_leaders", "leaders in /cluster"),
         q(f'max by (scope) (increase(patroni_cluster_multiple_primaries_polls_total{{{SEL}}}[$__rate_interval]))',
           "{{scope}} polls with two primaries")],
        "Members that say primary in their own GET /patroni next to the leader count of the DCS "
        "view. Above 1: two servers accept writes (alert PatroniMultiplePrimaries); the polls "
        "counted catch a window shorter than the scrape interval.", span=8))
    d = d.with_panel(ts_panel(
        52, "DCS views and voter sets",
        [per_cluster("patroni_cluster_dcs_views", "DCS views"),
         per_cluster("patroni_raft_voter_sets", "voter sets")],
        "Distinct DCS views among the members' own GET /cluster, distinct voter sets among the "
        "Raft nodes: 1 when they agree (alerts PatroniDcsViewsDiverge, PatroniRaftVoterSetsDiffer).",
        span=8))
    fields = ["leader", "members", "timelines", "config"]
    d = d.with_panel(table_panel(
        53, "Members whose view differs",
        table_queries(*[f'max by (scope, member) (patroni_member_dcs_view_differs{{{SEL},field="{f}"}})'
                        for f in fields],
                      f'max by (scope, member) (patroni_member_left_dcs_timestamp_seconds{{{SEL}}}) * 1000',
                      f'max by (scope, member) (patroni_member_dcs_view_read{{{SEL}}})'),
        "Every member whose own GET /cluster answered: whether its view differs from the view "
        "most members share in the leader, the member set, the timelines or the config "
        "(DIFFERS: a stale or diverged Raft replica); members that left the DCS view with the "
        "time they left. View read: UNKNOWN when no exporter read the member's GET /cluster in "
        "its last poll (timed out, failed): it counts neither as agreeing nor as differing.",
        join_field="member", span=8, height=8,
        exclude=["Time"],
        rename={"scope": "Cluster", "member": "Member",
                **{f"Value #{ref}": f for ref, f in zip("ABCD", fields)},
                "Value #E": "Left the DCS view", "Value #F": "View read"},
        overrides=[(f, [mapping_prop({"1": ("DIFFERS", "red"), "0": ("same", "green")}), cell_color()])
                   for f in fields]
        + [("Left the DCS view", [prop("unit", "dateTimeAsIso")]),
           ("View read", [mapping_prop({"1": ("read", "green"), "0": ("UNKNOWN", "orange")}), cell_color()])]))

    # ---- How close the next outage is
    d = d.with_row(db.Row("Margins").id(60))
    d = d.with_panel(stat_panel(
        61, "Quorum margin", f'max by (scope, dcs) (patroni_dcs_quorum_margin{{{SEL}}})',
        "How many more DCS members (Raft voters, etcd voting members) can fail before the quorum "
        "is lost: 1 on a healthy 3-member DCS, 0 with one down (alerts PatroniRaftQuorumNoMargin, "
        "PatroniEtcdQuorumNoMargin), negative when lost.",
        legend="{{scope}} ({{dcs}})", steps=[(None, "red"), (0, "orange"), (1, "green")], span=4))
    d = d.with_panel(stat_panel(
        62, "A failover now loses",
        # -1 (unknown) while the exporter has no leader position to measure from
        f'max by (scope) (patroni_cluster_failover_data_at_risk_bytes{{{SEL}}})'
        f' or max by (scope) (patroni_up{{{SEL}}}) * 0 - 1',
        "The WAL a failover right now would lose: the leader's position minus what the best "
        "promotable replica received (0 with a synchronous standby in synchronous mode). Above "
        "maximum_lag_on_failover Patroni promotes nobody (alert PatroniFailoverDataAtRisk). "
        "unknown: no leader position to measure from (no leader, or its GET /patroni fails).",
        legend="{{scope}}", unit="bytes", mapping={"-1": ("unknown", "orange")},
        steps=[(None, "orange"), (0, "green"), (1, "orange"), (1048576, "red")],
        span=4))
    d = d.with_panel(ts_panel(
        63, "Replication lag (seconds)",
        [per_member("patroni_member_replay_lag_seconds")],
        "On a replica that is behind, the age of the last transaction it replayed; 0 when caught "
        "up (alert PatroniReplicationLagTime above 5 min).", unit="s", span=8))
    d = d.with_panel(state_panel(
        64, "HA loop (liveness) and readiness",
        [q(f'max by (scope, member) (patroni_member_liveness{{{SEL}}})', "{{scope}} {{member}} liveness"),
         q(f'max by (scope, member, version) (patroni_member_readiness{{{SEL}}} '
           f'* on (scope, member, instance, job) group_left (version) patroni_member_patroni_info{{{SEL}}})',
           "{{scope}} {{member}} readiness (Patroni {{version}})")],
        "GET /liveness: 503 (STALLED) when the member's HA loop has not run for ttl while its "
        "REST API answers (alert PatroniHaLoopStalled). GET /readiness beside it, whose meaning "
        "depends on the member's Patroni version (in the legend): on 3.x and 4.0.x a replica is ready when "
        "its PostgreSQL runs and the DCS answers; from 4.1.0 it must also stream and be within "
        "maximum_lag_on_failover (unless failsafe mode is active), so a lagging 4.1 replica "
        "reads not ready where a 3.x one reads ready. The leader is ready on both.",
        {"1": ("ok", "green"), "0": ("STALLED / not ready", "red")}, span=8))
    d = d.with_panel(ts_panel(
        65, "Clocks",
        [per_member("patroni_member_clock_offset_seconds", "offset"),
         q(f'patroni_cluster_leader_clock_skew_seconds{{{SEL}}}', "{{scope}} primary vs Raft leader"),
         per_member("patroni_member_clock_offset_error_seconds", "+- error")],
        "Each member's clock against the exporter's (Date header, +-0.5 s plus half the round "
        "trip: patroni_member_clock_offset_error_seconds), and the primary's against the Raft "
        "leader's host, which sets the leader key's lifetime (alert PatroniLeaderClockSkew "
        "beyond a quarter of ttl - loop_wait).", unit="s", span=8))
    d = d.with_panel(table_panel(
        66, "Failsafe topology",
        table_queries(f'max by (scope, member) (patroni_member_failsafe_topology{{{SEL}}})',
                      f'max by (scope) (patroni_config_failsafe_mode{{{SEL}}})'),
        "failsafe_mode of the cluster and, while it is on, the members the primary needs to "
        "answer it to stay primary without the DCS (GET /failsafe). One row per cluster, with "
        "no member, while failsafe mode is off.",
        join_field="member", span=8, height=8, exclude=["Time"],
        rename={"scope": "Cluster", "Value #B": "failsafe_mode", "member": "Member",
                "Value #A": "In failsafe topology"},
        overrides=[("In failsafe topology", [mapping_prop({"1": ("yes", "green"), "0": ("NO", "orange")}), cell_color()]),
                   ("failsafe_mode", [mapping_prop({"1": ("on", "blue"), "0": ("off", "text")})])]))

    d = d.with_panel(ts_panel(
        67, "Latency headroom",
        [per_member("patroni_member_rest_round_trip_seconds", "GET /patroni"),
         q(f'patroni_raft_status_round_trip_seconds{{{SEL}}}', "{{scope}} {{node}} Raft status"),
         q(f'patroni_etcd_status_round_trip_seconds{{{SEL}}}', "{{scope}} {{endpoint}} etcd Status"),
         per_cluster("patroni_member_request_timeout_seconds", "Patroni's member request timeout"),
         q(f'max by (scope, node) (patroni_raft_connection_timeout_seconds{{{SEL}}})',
           "{{scope}} {{node}} Raft connection timeout")],
        "How long the exporter's GET /patroni of each member and each Raft node's status query "
        "(or etcd member's Status) took, against their deadlines: 2 s for the requests members send one another, fixed in "
        "Patroni's source (the leader race's GET /patroni, POST /failsafe; alert "
        "PatroniMemberRestSlow above half of it), and the Raft connection timeout in force on each "
        "node (pysyncobj's 3.5 s unless Patroni >= 4.2.0 sets raft.connection_timeout, read from "
        "--patroni.config-file). The third deadline, retry_timeout, is in the configuration table "
        "below. Seen from the exporter's host, not between the members.", unit="s", span=8))

    d = etcd_row(d)

    # ---- Versions, configuration, history: what an operator checks before changing anything
    d = d.with_row(db.Row("Versions and configuration").id(70))
    yes = lambda color: {"1": ("YES", color), "0": ("no", "green")}  # noqa: E731
    d = d.with_panel(table_panel(
        71, "Members: versions, uptime, flags",
        table_queries(f'max by (scope, member, host) (patroni_member_info{{{SEL}}})',
                      f'max by (scope, member, version) (patroni_member_patroni_info{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_server_version{{{SEL}}})',
                      f'time() - max by (scope, member) (patroni_member_postmaster_start_time_seconds{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_reported_timeline{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_failover_priority{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_wal_replay_paused{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_watchdog_failed{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_failsafe_active{{{SEL}}})',
                      f'max by (scope, member) (patroni_member_sync_state_mismatch{{{SEL}}})'),
        "One row per member: host (GET /cluster), the Patroni and PostgreSQL versions and how "
        "long PostgreSQL has run (GET /patroni), the timeline it reports itself, its "
        "failover_priority (0: never promoted), and the flags behind alerts: WAL replay paused "
        "(PatroniWalReplayPaused; replicas only), watchdog failed (PatroniWatchdogFailed), "
        "failsafe mode active (PatroniFailsafeModeActive), a sync standby in the DCS that the "
        "leader's PostgreSQL does not replicate to synchronously (PatroniSyncStateMismatch).",
        join_field="member", height=6,
        exclude=["Time", "Value #A", "Value #B"],
        rename={"scope": "Cluster", "member": "Member", "host": "Host", "version": "Patroni",
                "Value #C": "PostgreSQL", "Value #D": "PostgreSQL uptime",
                "Value #E": "Timeline (own)", "Value #F": "Failover priority",
                "Value #G": "Replay paused", "Value #H": "Watchdog failed",
                "Value #I": "Failsafe active", "Value #J": "Sync state mismatch"},
        overrides=[
            ("PostgreSQL uptime", [prop("unit", "s")]),
            ("Failover priority", [mapping_prop({"0": ("0 (never)", "orange")}), cell_color()]),
            ("Replay paused", [mapping_prop(yes("orange")), cell_color()]),
            ("Watchdog failed", [mapping_prop(yes("red")), cell_color()]),
            ("Failsafe active", [mapping_prop(yes("orange")), cell_color()]),
            ("Sync state mismatch", [mapping_prop(yes("red")), cell_color()]),
        ]))
    on_off = {"1": ("on", "blue"), "0": ("off", "text")}
    d = d.with_panel(table_panel(
        72, "Dynamic configuration (GET /config)",
        table_queries(f'max by (scope) (patroni_config_ttl_seconds{{{SEL}}})',
                      f'max by (scope) (patroni_config_loop_wait_seconds{{{SEL}}})',
                      f'max by (scope) (patroni_config_retry_timeout_seconds{{{SEL}}})',
                      f'max by (scope) (patroni_config_maximum_lag_on_failover_bytes{{{SEL}}})',
                      f'max by (scope, mode) (patroni_config_synchronous_mode{{{SEL}}} == 1)',
                      f'max by (scope) (patroni_config_synchronous_mode_strict{{{SEL}}})',
                      f'max by (scope) (patroni_config_synchronous_nodes{{{SEL}}})',
                      f'max by (scope) (patroni_config_failsafe_mode{{{SEL}}})',
                      f'max by (scope) (patroni_config_check_timeline{{{SEL}}})'),
        "The dynamic configuration in force (Patroni's default where unset). ttl - loop_wait is "
        "the slack the leader key has between two renewals (PatroniLeaderClockSkew uses a "
        "quarter of it); maximum_lag_on_failover bounds PatroniFailoverDataAtRisk; "
        "synchronous_mode, strict and the node count decide who may be promoted.",
        join_field="scope", span=16, height=5,
        exclude=["Time", "Value #E"],
        rename={"scope": "Cluster", "Value #A": "ttl", "Value #B": "loop_wait",
                "Value #C": "retry_timeout", "Value #D": "maximum_lag_on_failover",
                "mode": "synchronous_mode", "Value #F": "strict", "Value #G": "sync nodes",
                "Value #H": "failsafe_mode", "Value #I": "check_timeline"},
        overrides=[
            ("ttl", [prop("unit", "s")]), ("loop_wait", [prop("unit", "s")]),
            ("retry_timeout", [prop("unit", "s")]), ("maximum_lag_on_failover", [prop("unit", "bytes")]),
            ("strict", [mapping_prop(on_off)]), ("failsafe_mode", [mapping_prop(on_off)]),
            ("check_timeline", [mapping_prop(on_off)]),
        ]))
    tags = ["nofailover", "nosync", "noloadbalance", "clonefrom", "nostream"]
    d = d.with_panel(table_panel(
        73, "Member tags",
        table_queries(*[f'max by (scope, member) (patroni_member_tag{{{SEL},tag="{t}"}})' for t in tags]),
        "The boolean tags in force on each member (its own GET /patroni; nofailover also when "
        "failover_priority <= 0, nosync when sync_priority <= 0).",
        join_field="member", span=8, height=5,
        exclude=["Time"],
        rename={"scope": "Cluster", "member": "Member",
                **{f"Value #{ref}": t for ref, t in zip("ABCDE", tags)}},
        overrides=[(t, [mapping_prop({"1": ("SET", "orange"), "0": ("-", "text")})]) for t in tags]))
    timing = ["min_timeout", "max_timeout", "connection_timeout", "append_entries_period",
              "connection_retry_time", "leader_fallback_timeout"]
    refs = "ABCDEF"
    d = d.with_panel(table_panel(
        78, "Raft timing and REST pool in force",
        table_queries(*[f'max by (scope, member{", source" if t == "connection_timeout" else ""}) '
                        f'(patroni_member_raft_timing_seconds{{{SEL},setting="{t}"}})' for t in timing],
                      f'max by (scope, member) (patroni_member_rest_thread_pool_size{{{SEL}}})'),
        "pysyncobj's timing on each member's Raft node: pysyncobj's defaults (0.4 / 1.4 / 3.5 / 0.1 / "
        "5 / 30 s) unless Patroni >= 4.2.0 sets the raft: keys, read from --patroni.config-file "
        "(source: config_file, pysyncobj_default, or no_config_file: 4.2 and no file, assumed; "
        "PATRONI_RAFT_* environment variables are not visible). thread_pool_size: Patroni 3.3.9, 4.0.8, 4.1.1 and later "
        "serves its REST API from this + 1 workers, which the exporters share with the members' "
        "own leader-race requests and health checks.",
        join_field="member", span=24, height=6,
        exclude=["Time"],
        rename={"scope": "Cluster", "member": "Member", "source": "source",
                **{f"Value #{r}": t for r, t in zip(refs, timing)}, "Value #G": "thread_pool_size"},
        overrides=[(t, [prop("unit", "s")]) for t in timing]))
    d = d.with_panel(stat_panel(
        74, "Since the last failover",
        f'time() - max by (scope) (patroni_cluster_last_failover_timestamp_seconds{{{SEL}}})',
        "Time since the newest GET /history entry: the last switchover, failover or promotion.",
        legend="{{scope}}", unit="s", steps=[(None, "blue")], span=6))
    d = d.with_panel(cluster_stat(
        75, "Scheduled switchover", "patroni_cluster_scheduled_switchover",
        "A switchover scheduled for later (patronictl switchover --scheduled).",
        mapping={"1": ("SCHEDULED", "orange"), "0": ("none", "green")}, span=6))
    d = d.with_panel(cluster_stat(
        76, "Timeline history entries", "patroni_cluster_history_entries",
        "Entries in GET /history: one per promotion (trimmed by Patroni to max_timelines_history).",
        steps=[(None, "blue")], span=6))
    d = d.with_panel(stat_panel(
        77, "Changes in the time range",
        [(range_total("patroni_cluster_leader_changes_total", zero=True), "{{scope}} leader"),
         (range_total("patroni_config_changes_total", zero=True), "{{scope}} configuration")],
        "Leader changes (switchovers and failovers; alert PatroniFrequentLeaderChanges above 3 "
        "in 1h) and changes of the dynamic configuration (patronictl edit-config, PATCH /config) "
        "the exporter saw in the time range shown.",
        steps=[(None, "green"), (1, "blue")], span=6, text_mode=mc.BigValueTextMode.VALUE_AND_NAME))

    row, panels = exporter_row(40)
    d = d.with_row(row)
    for p in panels:
        d = d.with_panel(p)
    return d.build()
