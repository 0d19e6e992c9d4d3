"""Dashboard 'Patroni Raft' (uid patroni-raft-raft): the Raft (pysyncobj) DCS, node by node."""
from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import common as mc

from common import (QUORUM_MAP, SEL, UP_MAP, build, cell_color, cluster_stat, mapping_prop,
                    increased, per_cluster, prop, q, range_total, stat_panel, state_panel, table_panel,
                    table_queries, ts_panel, verdict_timeline)

UID = "patroni-raft-raft"

STATE_MAP = {"0": ("follower", "green"), "1": ("candidate", "orange"), "2": ("leader", "blue")}
# numeric encoding of the one-hot patroni_raft_state (pysyncobj: 0 follower, 1 candidate, 2 leader)
STATE_EXPR = (f'max by (scope, node) (patroni_raft_state{{{SEL},state="leader"}} == 1) * 2'
              f' or max by (scope, node) (patroni_raft_state{{{SEL},state="candidate"}} == 1)'
              f' or max by (scope, node) (patroni_raft_state{{{SEL},state="follower"}} == 1) * 0')


def per_node(pid: int, title: str, family: str, desc: str):
    """A time series of one Raft node family, a line per node."""
    return ts_panel(pid, title, [q(f'{family}{{{SEL}}}', "{{node}}")], desc)


def by_node(family: str, label: str = "", cond: str = ""):
    """A query of the Raft node family `family` (its series that satisfy `cond`, e.g. " == 1"),
    one series per node, or per node and its `label` (a partner, the leader it believes in):
    the highest of the exporters' values. Legend '{{node}}' or '{{node}} → {{label}}'."""
    by = "scope, node" + (f", {label}" if label else "")
    legend = "{{node}}" + (" → {{" + label + "}}" if label else "")
    return q(f'max by ({by}) ({family}{{{SEL}}}{cond})', legend)


def dashboard():
    d = build("Patroni Raft", UID,
              "Raft (pysyncobj) DCS of Patroni clusters, as seen by patroni-raft-exporter: quorum, "
              "leadership, log indexes, partner links.",
              ["patroni", "raft", "pysyncobj"],
              (("Raft leader changes", "orange", increased("patroni_raft_leader_changes_total")),
               ("Quorum losses", "red", increased("patroni_raft_quorum_losses_total"))),
              first_row="Cluster")
    d = d.with_panel(cluster_stat(
        5, "Raft leaders", "patroni_raft_cluster_leaders",
        "Nodes claiming leadership. Must be 1. 0 with quorum: elections failing "
        "(PatroniRaftNoLeader); >1 for 2m: split leadership (PatroniRaftSplitLeadership).",
        steps=[(None, "red"), (1, "green"), (2, "red")], span=4))
    for pid, title, family, desc, alarm in (
            (6, "Leader changes", "patroni_raft_leader_changes_total",
             "Raft leader changes seen by the exporter in the dashboard's time range.", (4, "orange")),
            (8, "Quorum losses", "patroni_raft_quorum_losses_total",
             "Times the exporter's verdict went from confirmed to lost in the dashboard's time range.",
             (1, "red"))):
        d = d.with_panel(stat_panel(pid, title, range_total(family), desc, legend="{{scope}}",
                                    steps=[(None, "green"), alarm], span=3))
    d = d.with_panel(verdict_timeline(21))
    d = d.with_panel(ts_panel(
        22, "Voters answering, with has_quorum, unanswered by reason",
        [per_cluster("patroni_raft_voters", "voters"),
         per_cluster("patroni_raft_voters_answering", "answering"),
         per_cluster("patroni_raft_voters_with_quorum", "with has_quorum"),
         q(f'max by (scope, reason) (patroni_raft_voters_unanswered{{{SEL}}} > 0)', "{{scope}} unanswered: {{reason}}"),
         per_cluster("patroni_raft_quorum_margin", "margin"),
         per_cluster("patroni_raft_voter_sets", "voter sets"),
         per_cluster("patroni_raft_witnesses", "witnesses")],
        "The counts the verdict is computed from. unanswered reasons: refused (process down), "
        "timeout, auth (Raft password refused), error. margin: voters that can still fail "
        "(alert PatroniRaftQuorumNoMargin at 0); voter sets: 1 when every node counts the same "
        "voters; witnesses: voters that run only Raft (stereo mode's watcher), counted in the "
        "voters and the margin, never promoted.", span=12, height=6))
    d = d.with_panel(state_panel(
        24, "Raft leader on the primary's host",
        [per_cluster("patroni_raft_leader_away_from_primary", "Raft leader")],
        "Whether the Raft leader runs on the primary's host. AWAY: every DCS write of the "
        "primary crosses the network to the Raft leader's host (or the witness), so a slow link "
        "there delays the leader key's renewal. Patroni does not move it with the primary; with pysyncobj "
        "0.3.16+ syncobj_admin -transfer moves it back (runbooks: Raft leadership away from the "
        "primary).",
        {"0": ("on the primary's host", "green"), "1": ("AWAY from the primary", "yellow")},
        span=24, height=4))

    d = d.with_panel(table_panel(
        7, "Nodes",
        table_queries(
            f'max by (scope, node) (patroni_raft_up{{{SEL}}})',
            f'max by (scope, node) (patroni_raft_has_quorum{{{SEL}}})',
            f'max by (scope, node, state) (patroni_raft_state{{{SEL}}} == 1)',
            f'max by (scope, node) (patroni_raft_term{{{SEL}}})',
            f'max by (scope, node, leader) (patroni_raft_leader{{{SEL}}} == 1)',
            f'max by (scope, node) (patroni_raft_partners{{{SEL}}})',
            f'max by (scope, node) (patroni_raft_readonly_nodes{{{SEL}}})',
            f'max by (scope, node) (patroni_raft_commit_index{{{SEL}}})',
            f'max by (scope, node) (patroni_raft_uptime_seconds{{{SEL}}})',
            f'max by (scope, node, version) (patroni_raft_info{{{SEL}}})',
            f'max by (scope, node) (patroni_raft_voter_set_differs{{{SEL}}})',
            f'max by (scope, node, kind) (patroni_raft_node_info{{{SEL}}})',
        ),
        "One row per Raft node (the syncobj-admin -status view). 'Believed leader' is the leader "
        "each node reports; nodes disagreeing on it are partitioned or electing. Read-only nodes "
        "are non-voting clients such as patronictl. 'Voter set' DIFFERS: the node counts its "
        "majority against another set of voters (itself and its partners) than most nodes "
        "(alert PatroniRaftVoterSetsDiffer). Kind: member (a member's host), witness (runs only "
        "Raft: stereo mode's watcher), unknown (no member runs it: PatroniRaftZombieVoter).",
        join_field="node", height=5,
        exclude=["Time", "Value #C", "Value #E", "Value #J", "Value #L"],
        rename={"scope": "Cluster", "node": "Node", "Value #A": "Answers", "Value #B": "Has quorum",
                "state": "State", "Value #D": "Term", "leader": "Believed leader",
                "Value #F": "Partners", "Value #G": "Read-only nodes", "Value #H": "Commit index",
                "Value #I": "Uptime", "version": "pysyncobj", "Value #K": "Voter set",
                "kind": "Kind"},
        overrides=[
            ("Answers", [mapping_prop(UP_MAP), cell_color()]),
            ("Voter set", [mapping_prop({"0": ("as the others", "green"), "1": ("DIFFERS", "red")}), cell_color()]),
            ("Has quorum", [mapping_prop(QUORUM_MAP), cell_color()]),
            ("Uptime", [prop("unit", "s")]),
        ]))

    d = d.with_row(db.Row("Per node").id(10))
    d = d.with_panel(state_panel(
        11, "Has quorum per node",
        [by_node("patroni_raft_has_quorum")],
        "has_quorum reported by each node: it reaches a majority of voters. One node red while "
        "the others are green: that node is cut off (PatroniRaftNodeWithoutQuorum).", QUORUM_MAP))
    d = d.with_panel(state_panel(
        12, "Raft state per node", [q(STATE_EXPR, "{{node}}")],
        "follower / candidate / leader. A node staying candidate with a climbing term cannot "
        "reach a majority.", STATE_MAP))
    d = d.with_panel(per_node(
        13, "Term", "patroni_raft_term",
        "Raft term per node: +1 per election. A term that climbs on one node = that node keeps "
        "starting elections (isolated candidate)."))
    d = d.with_panel(per_node(
        14, "Commit index", "patroni_raft_commit_index",
        "Raft commit index per node. Flat lines on every node: nothing is written (no Raft "
        "leader, no quorum). How far each node is behind: the next panel."))
    d = d.with_panel(state_panel(
        15, "Partner connectivity",
        [by_node("patroni_raft_partner_connected", "partner")],
        "Each node's TCP link to each partner (syncobj-admin partner_node_status_server_*: 2 = "
        "connected). Red while the partner answers the exporter: network or password problem "
        "between the nodes (PatroniRaftPartnerDisconnected).",
        {"1": ("connected", "green"), "0": ("disconnected", "red")}))
    d = d.with_panel(state_panel(
        16, "Leader each node believes in",
        [by_node("patroni_raft_leader", "leader", " == 1")],
        "One line per (node, believed leader). After a partition the nodes disagree; a node with "
        "no line has no leader.", {"1": ("believes", "blue")}))
    d = d.with_panel(ts_panel(
        18, "Match index per partner",
        [q(f'patroni_raft_match_index{{{SEL}}}', "{{node}} → {{partner}}"),
         q(f'patroni_raft_next_index{{{SEL}}}', "{{node}} → {{partner}} next")],
        "Leader-side replication progress of each partner (only the Raft leader reports them)."))
    # backlog and log length apart: on one axis the backlog (0..a few) vanishes under the log
    d = d.with_panel(ts_panel(
        19, "Entries behind the leader",
        [q(f'patroni_raft_leader_commit_index{{{SEL}}} - patroni_raft_last_applied_index{{{SEL}}}', "{{node}}")],
        "The leader's commit index (as last heard by the node) minus the node's last applied "
        "index: entries the node has still to receive or apply. Near 0 on a healthy node; "
        "growing on a follower that cannot keep up.", min_val=0))
    d = d.with_panel(per_node(
        17, "Raft log entries", "patroni_raft_log_entries",
        "Entries in each node's in-memory Raft log after compaction (log_len)."))
    d = d.with_panel(state_panel(
        20, "Node answers the exporter",
        [by_node("patroni_raft_up")],
        "UP when the exporter read this node's status in the last poll (PatroniRaftNodeUnreachable).",
        UP_MAP))
    d = d.with_panel(table_panel(
        23, "Nodes: versions and uptime",
        table_queries(f'max by (scope, node, version) (patroni_raft_info{{{SEL}}})',
                      f'max by (scope, node) (patroni_raft_self_code_version{{{SEL}}})',
                      f'max by (scope, node) (patroni_raft_enabled_code_version{{{SEL}}})',
                      f'max by (scope, node) (patroni_raft_uptime_seconds{{{SEL}}})'),
        "Each reachable node's pysyncobj version, the replicated code version its code supports "
        "and the one enabled cluster-wide (a node whose code version is below the enabled one "
        "cannot apply the log), and the uptime of its Raft object (a restart of Patroni resets it).",
        join_field="node", span=12,
        exclude=["Time", "Value #A"],
        rename={"scope": "Cluster", "node": "Node", "version": "pysyncobj",
                "Value #B": "Code version (node)", "Value #C": "Code version (enabled)",
                "Value #D": "Raft uptime"},
        overrides=[("Raft uptime", [prop("unit", "s")])]))
    return d.build()
