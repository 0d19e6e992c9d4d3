"""Dashboard 'Patroni fleet' (uid patroni-raft-fleet): every cluster in one table, worst first."""
from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import common as mc

from common import (DCS_EVIDENCE_EXPR, DCS_EVIDENCE_MAP, SEL, VERDICT_MAP, build, cell_color,
                    mapping_prop, prop, q, stat_panel, state_panel, table_panel, table_queries,
                    ts_panel, watching)

UID = "patroni-raft-fleet"
CLUSTER_UID = "patroni-raft-cluster"

# One number per cluster for "worst first": 2 critical, 1 warning, 0 ok. The worst of: the
# alerts firing for the cluster (their severity), the DCS's quorum verdict, Raft or etcd (lost 2,
# not visible 1),
# nobody to fail over to (1), no member answering GET /cluster (2), exporter data older than
# 60 s (1). Each term gets its own label `t` so that `or` keeps them all for the max. ALERTS
# without a scope (PatroniExporterDown) match scope=~".*" too: scope!="" keeps them out.
ALERT_SEL = f'alertstate="firing",{SEL},scope!=""'
_TERMS = [
    f'2 * max by (scope) (ALERTS{{{ALERT_SEL},severity="critical"}})',
    f'max by (scope) (ALERTS{{{ALERT_SEL},severity="warning"}})',
    f'(max by (scope) (patroni_dcs_quorum{{{SEL}}}) < bool 1)'
    f' + (max by (scope) (patroni_dcs_quorum{{{SEL}}}) == bool 0)',
    f'min by (scope) (patroni_cluster_failover_candidates{{{SEL}}}) == bool 0',
    f'2 * (min by (scope) (patroni_up{{{SEL}}}) == bool 0)',
    f'time() - max by (scope) (patroni_exporter_last_poll_timestamp_seconds{{{SEL}}}) > bool 60',
]
STATUS_EXPR = "max by (scope) (\n  " + "\n  or ".join(
    f'label_replace({t}, "t", "{i}", "", "")' for i, t in enumerate(_TERMS)) + "\n)"
STATUS_MAP = {"0": ("OK", "green"), "1": ("WARNING", "orange"), "2": ("CRITICAL", "red")}


def dashboard():
    d = build("Patroni fleet", UID,
              "Every Patroni cluster watched by patroni-raft-exporter, one row each, worst first: "
              "quorum verdict, leader, failover candidates, worst lag, data at risk, last "
              "failover, exporter health; then each exporter's own health (memory, file "
              "descriptors, CPU, polls, scrapes). The cluster name links to its Patroni cluster dashboard.",
              ["patroni", "postgresql", "raft", "etcd", "fleet"])

    d = d.with_row(db.Row("Fleet").id(1))
    d = d.with_panel(stat_panel(
        2, "Clusters", f'count(max by (scope) (patroni_up{{{SEL}}}))',
        "Clusters the exporters watch (selected by the scope variable).",
        steps=[(None, "blue")], span=4))
    d = d.with_panel(stat_panel(
        3, "Critical", f'count({STATUS_EXPR} == 2) or vector(0)',
        "Clusters with a critical alert firing, a lost DCS quorum (Raft or etcd) or no member answering "
        "GET /cluster.", steps=[(None, "green"), (1, "red")], span=4))
    d = d.with_panel(stat_panel(
        4, "Warning", f'count({STATUS_EXPR} == 1) or vector(0)',
        "Clusters with a warning firing, a quorum the exporter cannot see, no failover "
        "candidate, or exporter data older than 60 s.", steps=[(None, "green"), (1, "orange")], span=4))
    d = d.with_panel(stat_panel(
        5, "Quorum not confirmed",
        f'count(max by (scope) (patroni_dcs_quorum{{{SEL}}}) < 1) or vector(0)',
        "Clusters whose best DCS quorum verdict (Raft or etcd) is LOST or Not visible (alerts "
        "PatroniRaftQuorumLost, PatroniEtcdQuorumLost and their NotVisible warnings).",
        steps=[(None, "green"), (1, "red")], span=4))
    d = d.with_panel(stat_panel(
        6, "Nobody to fail over to",
        f'count(min by (scope) (patroni_cluster_failover_candidates{{{SEL}}}) == 0) or vector(0)',
        "Clusters where no member could replace the leader now (alert PatroniNoFailoverCandidate).",
        steps=[(None, "green"), (1, "red")], span=4))
    d = d.with_panel(stat_panel(
        7, "Stale exporter data",
        f'count(time() - max by (scope) (patroni_exporter_last_poll_timestamp_seconds{{{SEL}}}) > 60) or vector(0)',
        "Clusters whose last completed poll is older than 60 s (alert PatroniExporterPollStale).",
        steps=[(None, "green"), (1, "orange")], span=4))

    link = {"title": "Patroni cluster ${__value.text}",
            "url": f"/d/{CLUSTER_UID}/patroni-cluster?var-scope=${{__value.raw}}&${{datasource:queryparam}}&${{__url_time_range}}"}
    d = d.with_panel(table_panel(
        10, "Clusters, worst first",
        table_queries(
            STATUS_EXPR,
            f'max by (scope, dcs) (patroni_dcs_quorum{{{SEL}}})',
            f'max by (scope) (patroni_dcs_quorum_margin{{{SEL}}})',
            f'max by (scope, member) (patroni_member_role{{{SEL},role=~"leader|standby_leader"}} == 1)',
            f'min by (scope) (patroni_cluster_failover_candidates{{{SEL}}})',
            f'max by (scope) (patroni_member_lag_bytes{{{SEL}}})',
            f'max by (scope) (patroni_cluster_failover_data_at_risk_bytes{{{SEL}}})',
            f'time() - max by (scope) (patroni_cluster_last_failover_timestamp_seconds{{{SEL}}})',
            f'min by (scope) (patroni_up{{{SEL}}})',
            f'time() - max by (scope) (patroni_exporter_last_poll_timestamp_seconds{{{SEL}}})',
            f'count by (scope) (ALERTS{{{ALERT_SEL}}})',
        ),
        "One row per cluster, the worst first (Status: CRITICAL, WARNING, OK; see the dashboard's "
        "description for what counts). DCS: raft or etcd; Quorum: its best verdict of every "
        "exporter; Margin: how many more DCS members can fail; Leader: who holds the leader key; Candidates: members Patroni "
        "would promote if the leader died now; Worst lag: the replica furthest behind; Data at "
        "risk: what a failover now would lose; Last failover: since the newest GET /history "
        "entry; /cluster and Data age: the exporter's health for that cluster; Alerts: firing "
        "now. Click a cluster for its dashboard.",
        join_field="Status", height=9, sort_desc=True,
        exclude=["Time", "Value #D"],
        rename={"Value #A": "Status", "scope": "Cluster", "Value #B": "Quorum",
                "dcs": "DCS", "Value #C": "Margin", "member": "Leader", "Value #E": "Candidates",
                "Value #F": "Worst lag", "Value #G": "Data at risk", "Value #H": "Last failover",
                "Value #I": "/cluster", "Value #J": "Data age", "Value #K": "Alerts firing"},
        overrides=[
            ("Status", [mapping_prop(STATUS_MAP), cell_color()]),
            ("Cluster", [prop("links", [link])]),
            ("Quorum", [mapping_prop(VERDICT_MAP), cell_color()]),
            ("Margin", [mapping_prop({"0": ("0", "orange"), "-1": ("-1", "red"), "-2": ("-2", "red")}),
                        cell_color()]),
            ("Candidates", [mapping_prop({"0": ("NOBODY", "red")}), cell_color()]),
            ("Worst lag", [prop("unit", "bytes")]),
            ("Data at risk", [prop("unit", "bytes")]),
            ("Last failover", [prop("unit", "s")]),
            ("/cluster", [mapping_prop({"1": ("UP", "green"), "0": ("DOWN", "red")}), cell_color()]),
            ("Data age", [prop("unit", "s")]),
        ]))
    d = d.with_panel(state_panel(
        11, "Status over time", [q(STATUS_EXPR, "{{scope}}")],
        "Each cluster's status (as in the table) poll by poll: when a cluster turned red, for how "
        "long, and which others were affected at the same time.", STATUS_MAP, span=24, height=7))

    # Standby clusters (issue #22): every cluster led by a standby_leader, with the source named
    # by standby_of in the exporter's --config.file; one row per standby cluster.
    d = d.with_row(db.Row("Standby clusters").id(20))
    d = d.with_panel(table_panel(
        21, "Standby clusters and their sources",
        table_queries(f'max by (scope) (patroni_cluster_standby{{{SEL}}} == 1)',
                      f'max by (scope, source_scope) (patroni_standby_source_info{{{SEL}}})',
                      f'max by (scope, member) (patroni_standby_leader_streaming{{{SEL}}})',
                      f'max by (scope) (patroni_standby_leader_archive_recovery{{{SEL}}})',
                      f'min by (scope) (patroni_standby_lag_bytes{{{SEL}}})'),
        "One row per standby cluster (its leader is a standby_leader): the source cluster it follows "
        "(standby_of in the exporter's --config.file; empty when not configured), its standby "
        "leader, whether that streams from the source (alert PatroniStandbyLeaderNotStreaming), "
        "whether it replays from the archive only, and the lag to the source's leader (alert "
        "PatroniStandbyLagHigh; up to one poll interval's WAL short under load).",
        join_field="Standby cluster", height=6,
        exclude=["Time", "Value #A", "Value #B"],
        rename={"scope": "Standby cluster", "source_scope": "Source", "member": "Standby leader",
                "Value #C": "Streaming", "Value #D": "Archive only", "Value #E": "Lag to source"},
        overrides=[
            ("Streaming", [mapping_prop({"1": ("STREAMING", "green"), "0": ("NOT STREAMING", "red")}),
                           cell_color()]),
            ("Archive only", [mapping_prop({"1": ("YES", "orange"), "0": ("no", "green")}), cell_color()]),
            ("Lag to source", [prop("unit", "bytes")]),
        ]))
    d = d.with_panel(ts_panel(
        22, "Standby lag to the source",
        [q(f'min by (scope, source_scope) (patroni_standby_lag_bytes{{{SEL}}})',
           "{{scope}} behind {{source_scope}}")],
        "The source cluster's leader WAL position minus the standby leader's replayed position, "
        "per pair. Rises under a write load on the source and comes back; a line that only grows: "
        "the standby leader does not keep up or does not stream.", unit="bytes", span=24))

    # The DCS of every cluster by kind (issue #41): the verdict with its evidence and counts,
    # and for clusters on etcd what only etcd has (alarms, stale member views, unreadable facts).
    d = d.with_row(db.Row("DCS").id(40))
    d = d.with_panel(table_panel(
        41, "DCS by cluster",
        table_queries(f'max by (scope, dcs) (patroni_dcs_quorum{{{SEL}}})',
                      DCS_EVIDENCE_EXPR,
                      f'max by (scope) (patroni_raft_voters_answering{{{SEL}}})'
                      f' or max by (scope) (patroni_etcd_members_answering{{{SEL}}})',
                      f'max by (scope) (patroni_raft_voters{{{SEL}}})'
                      f' or max by (scope) (patroni_etcd_members{{{SEL}}})',
                      f'max by (scope) (patroni_dcs_quorum_margin{{{SEL}}})',
                      f'sum by (scope) (max by (scope, alarm) (patroni_etcd_alarms{{{SEL}}}))',
                      f'sum by (scope) (max by (scope, member) (patroni_member_dcs_view_stale{{{SEL}}}))',
                      f'sum by (scope) (max by (scope, fact) (patroni_etcd_unreadable{{{SEL}}}))'),
        "One row per cluster with a DCS the exporter watches (Raft or etcd; none for REST only): "
        "the best quorum verdict and the evidence it rests on, the DCS members answering of all, "
        "the margin. On etcd only: members raising an alarm (NOSPACE, CORRUPT: alert "
        "PatroniEtcdAlarm), members whose own view is stale against Patroni's keys in etcd "
        "(PatroniMemberDcsViewStale), facts the exporter could not read (PatroniEtcdFactUnreadable).",
        join_field="Cluster", height=7,
        exclude=["Time"],
        rename={"scope": "Cluster", "dcs": "DCS", "Value #A": "Quorum", "Value #B": "Evidence",
                "Value #C": "Answering", "Value #D": "Members", "Value #E": "Margin",
                "Value #F": "etcd alarms", "Value #G": "Stale views", "Value #H": "Unreadable facts"},
        overrides=[
            ("Cluster", [prop("links", [link])]),
            ("Quorum", [mapping_prop(VERDICT_MAP), cell_color()]),
            ("Evidence", [mapping_prop(DCS_EVIDENCE_MAP)]),
            ("Margin", [mapping_prop({"0": ("0", "orange"), "-1": ("-1", "red"), "-2": ("-2", "red")}),
                        cell_color()]),
            *[(column, [mapping_prop({"0": ("none", "green")}), cell_color(),
                        prop("thresholds", {"mode": "absolute",
                                            "steps": [{"color": color, "value": None}
                                                      if i == 0 else {"color": color, "value": 1}
                                                      for i, color in enumerate(("green", bad))]})])
              for column, bad in (("etcd alarms", "red"), ("Stale views", "orange"),
                                  ("Unreadable facts", "orange"))],
        ]))

    # Exporter health (issue #35): each exporter that watches a selected cluster, from its own
    # process_* families (client_golang's) and its poll figures: what it costs and whether it
    # keeps up.
    d = d.with_row(db.Row("Exporter health").id(30))
    skipped = f'patroni_exporter_polls_skipped_total{{{SEL}}}'
    for pid, title, exprs, desc, unit, span in [
        (31, "Exporter memory (RSS)", [watching("process_resident_memory_bytes")],
         "Resident memory of each exporter (process_resident_memory_bytes). Flat once every "
         "cluster has been polled: a line that keeps growing over hours is a leak (the soak's "
         "criterion: within 5 % between its quiet windows).", "bytes", 8),
        (32, "Exporter file descriptors, share of the limit",
         [watching("process_open_fds / on (instance) process_max_fds")],
         "Open file descriptors over the soft limit (process_open_fds / process_max_fds). The "
         "exporter raises its soft limit to the hard one at start; a poll uses up to "
         "--poll.max-concurrency (8) sockets per cluster, a scrape one.", "percentunit", 8),
        (33, "Exporter CPU", [watching("rate(process_cpu_seconds_total[$__rate_interval])")],
         "CPU seconds per second of each exporter (rate of process_cpu_seconds_total): 100 % = "
         "one core busy. docs/performance.md gives the cost per cluster.", "percentunit", 8),
        (34, "Slowest poll", [f'max by (instance) (patroni_exporter_poll_duration_seconds{{{SEL}}})'],
         "The longest last poll among each exporter's clusters. A poll that lasts the whole "
         "--poll.interval (5 s by default) makes the next interval be skipped (Polls skipped).",
         "s", 6),
        (35, "Polls skipped",
         [f'sum by (instance) (increase({skipped}[$__rate_interval]))',
          # 0 while none was ever skipped (the counter is born at the first skip)
          (f'max by (instance) (patroni_up{{{SEL}}}) * 0 unless on (instance) sum by (instance) ({skipped})',
           "{{instance}} none skipped")],
         "Poll intervals skipped because the previous poll was still running, per exporter: its "
         "polls take longer than --poll.interval.", "", 6),
        (36, "Scrape duration", [watching("scrape_duration_seconds")],
         "How long Prometheus' scrape of each exporter's /metrics took (Prometheus' own "
         "scrape_duration_seconds): the exporter assembles samples encoded at each poll, so this "
         "stays in milliseconds however slow the clusters are.", "s", 6),
        (37, "Exporter uptime", [watching("time() - process_start_time_seconds")],
         "Time since each exporter started (process_start_time_seconds): a drop to 0 is a "
         "restart, after which its counters start at 0 again.", "s", 6),
    ]:
        targets = [q(*e) if isinstance(e, tuple) else q(e, "{{instance}}") for e in exprs]
        d = d.with_panel(ts_panel(pid, title, targets, desc, unit=unit, span=span, min_val=0))
    return d.build()
