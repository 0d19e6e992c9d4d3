"""Shared helpers for the patroni-raft-exporter dashboards (grafana-foundation-sdk builders)."""
from __future__ import annotations

import string

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import common as bc
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries, statetimeline
from grafana_foundation_sdk.models import common as mc
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

# Every panel and query uses the dashboard's datasource variable.
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'scope=~"$scope"'


def variables() -> list:
    """`datasource` (Prometheus) and `scope` (multi-select, from patroni_up) template variables."""
    return [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        db.QueryVariable("scope")
        .label("Cluster (scope)")
        .datasource(DS)
        .query('label_values(patroni_up, scope)')
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*"),
    ]


def q(expr: str, legend: str = "", ref: str = "A", instant: bool = False, table_fmt: bool = False):
    b = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        b = b.legend_format(legend)
    if instant:
        b = b.instant()
    if table_fmt:
        b = b.format(PromQueryFormat.TABLE)
    return b


def per_cluster(family: str, what: str):
    """A query of `family` with one series per cluster, the highest value of the exporters
    that watch it; legend '{{scope}} `what`'."""
    return q(f'max by (scope) ({family}{{{SEL}}})', "{{scope}} " + what)


def per_member(family: str, what: str = ""):
    """A query of the member family `family` as exported, a series per member; legend
    '{{scope}} {{member}}', then `what`."""
    return q(f'{family}{{{SEL}}}', "{{scope}} {{member}}" + (f" {what}" if what else ""))


def watching(expr: str) -> str:
    """`expr` (over an exporter's own series, e.g. process_*) for the exporters that watch a
    selected cluster: those with a patroni_up series of one, matched on `instance`."""
    return f'{expr} and on (instance) patroni_up{{{SEL}}}'

def table_queries(*exprs: str) -> list:
    """Instant queries in table format, one per column group of a table_panel, refs A, B, C..."""
    return [q(e, ref=ref, instant=True, table_fmt=True) for ref, e in zip(string.ascii_uppercase, exprs)]


def thresholds(*steps: tuple[float | None, str]):
    return (
        db.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=v, color=c) for v, c in steps])
    )


def value_map(mapping: dict[str, tuple[str, str]]) -> list:
    """{'1': ('OK', 'green')} -> a Grafana value mapping."""
    return [dm.ValueMap(options={k: dm.ValueMappingResult(text=t, color=c, index=i)
                                 for i, (k, (t, c)) in enumerate(mapping.items())})]


QUORUM_MAP = {"1": ("QUORUM", "green"), "0": ("NO QUORUM", "red")}
# patroni_raft_cluster_quorum, the exporter's verdict (docs/metrics.md "The quorum verdict").
VERDICT_MAP = {"1": ("Confirmed", "green"), "0": ("LOST", "red"), "-1": ("Not visible", "orange")}
VERDICT_STEPS = [(None, "orange"), (0, "red"), (1, "green")]
# patroni_raft_quorum_evidence is one-hot over `evidence`; panels show it as one number so that
# a value mapping can name and colour it. Order = the rules' order: with several exporters the
# `or` keeps the strongest evidence any of them has.
EVIDENCE = [("leader", "green"), ("majority", "green"), ("follower", "light-green"),
            ("no_quorum", "red"), ("refused", "red"), ("not_visible", "orange")]
EVIDENCE_MAP = {str(i): (name, color) for i, (name, color) in enumerate(EVIDENCE, start=1)}
EVIDENCE_EXPR = " or ".join(
    f'max by (scope) (patroni_raft_quorum_evidence{{{SEL},evidence="{name}"}} == 1) * {i}'
    for i, (name, _) in enumerate(EVIDENCE, start=1))
# patroni_etcd_quorum_evidence, numbered after Raft's so that one value mapping names the
# evidence of both kinds (the DCS panels of the cluster dashboard show either).
ETCD_EVIDENCE = [("leader", "green"), ("majority", "green"), ("health", "light-green"),
                 ("no_leader", "red"), ("refused", "red"), ("not_visible", "orange")]
ETCD_EVIDENCE_MAP = {str(i): (name, color)
                     for i, (name, color) in enumerate(ETCD_EVIDENCE, start=len(EVIDENCE) + 1)}
DCS_EVIDENCE_MAP = {**EVIDENCE_MAP, **ETCD_EVIDENCE_MAP}
DCS_EVIDENCE_EXPR = EVIDENCE_EXPR + " or " + " or ".join(
    f'max by (scope) (patroni_etcd_quorum_evidence{{{SEL},evidence="{name}"}} == 1) * {i}'
    for i, (name, _) in enumerate(ETCD_EVIDENCE, start=len(EVIDENCE) + 1))
UP_MAP = {"1": ("UP", "green"), "0": ("DOWN", "red")}
YESNO_BAD = {"1": ("YES", "red"), "0": ("no", "green")}


def stat_panel(pid: int, title: str, expr: str | list, desc: str, legend: str = "", mapping=None,
               steps=None, unit: str = "", span: int = 4, height: int = 4, text_mode=None):
    """One big number per series; `expr` may be a list of (expr, legend) for several values."""
    p = (stat.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height)
         .reduce_options(bc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
         .color_mode(mc.BigValueColorMode.BACKGROUND).graph_mode(mc.BigValueGraphMode.NONE))
    exprs = expr if isinstance(expr, list) else [(expr, legend)]
    for ref, (e, leg) in zip("ABCDEFGH", exprs):
        p = p.with_target(q(e, leg, ref=ref, instant=True))
    if mapping:
        p = p.mappings(value_map(mapping))
    if steps:
        p = p.thresholds(thresholds(*steps))
    if unit:
        p = p.unit(unit)
    if text_mode:
        p = p.text_mode(text_mode)
    return p


def cluster_stat(pid: int, title: str, family: str, desc: str, agg: str = "max", **options):
    """A stat panel with one number per selected cluster: `family` aggregated by scope, `agg`
    "max" (the highest of the exporters that watch the cluster) or "min" (the lowest)."""
    return stat_panel(pid, title, f'{agg} by (scope) ({family}{{{SEL}}})', desc,
                      legend="{{scope}}", **options)


def quorum_row(d, title: str):
    """`d` with its first row (id 1), opened by the quorum verdict, its evidence and the voter
    counts behind it (three stat panels, ids 2 to 4, 14 wide): the first thing to read on a
    cluster's dashboards.

    `max by (scope)`: with several exporters the best verdict counts, as in the alert
    PatroniRaftQuorumLost."""
    d = d.with_row(db.Row(title).id(1))
    for p in [
        cluster_stat(
            2, "Raft quorum", "patroni_raft_cluster_quorum",
            "The exporter's quorum verdict. Confirmed: a Raft quorum is proven. LOST: positive "
            "evidence of the loss (alert PatroniRaftQuorumLost); Patroni cannot write to the DCS, "
            "the primary demotes itself and GET /cluster shows a FROZEN view: do not trust the "
            "Patroni panels while this is red. Not visible: this exporter cannot tell (voters "
            "time out, wrong Raft password, voters never seen; alert PatroniRaftQuorumNotVisible).",
            mapping=VERDICT_MAP, steps=VERDICT_STEPS, span=4),
        stat_panel(
            3, "Quorum evidence", EVIDENCE_EXPR,
            "What the verdict rests on. leader: the Raft leader reports has_quorum; majority: more "
            "than half of the voters report has_quorum; follower: a follower with has_quorum is "
            "connected to the leader it names (weaker); no_quorum: every answering voter reports no "
            "quorum; refused: more than half of the voters refuse connections (processes down); "
            "not_visible: not enough answers to tell.",
            legend="{{scope}}", mapping=EVIDENCE_MAP, steps=[(None, "orange")], span=4),
        stat_panel(
            4, "Raft voters",
            [(f'max by (scope) (patroni_raft_voters_answering{{{SEL}}})', "answer"),
             (f'max by (scope) (patroni_raft_voters{{{SEL}}})', "of voters"),
             (f'max by (scope) (patroni_raft_voters_with_quorum{{{SEL}}})', "report has_quorum")],
            "N of M voters answer the exporter, K of them report has_quorum. A quorum is "
            "floor(M/2)+1. The voters that do not answer, by reason, are on the Patroni Raft "
            "dashboard (patroni_raft_voters_unanswered).",
            steps=[(None, "blue")], span=6, text_mode=mc.BigValueTextMode.VALUE_AND_NAME),
    ]:
        d = d.with_panel(p)
    return d


def dcs_quorum_row(d, title: str):
    """`d` with its first row (id 1), opened by the DCS's quorum verdict whatever the DCS
    (patroni_dcs_quorum: Raft and etcd), its evidence and the member counts behind it (ids 2
    to 4), as [quorum_row] does for Raft alone. `max by`: the best verdict of every exporter,
    as in the alerts PatroniRaftQuorumLost and PatroniEtcdQuorumLost."""
    d = d.with_row(db.Row(title).id(1))
    for p in [
        stat_panel(
            2, "DCS quorum", f'max by (scope, dcs) (patroni_dcs_quorum{{{SEL}}})',
            "The exporter's quorum verdict on the cluster's DCS (raft or etcd, in the legend). "
            "Confirmed: a quorum is proven. LOST: positive evidence of the loss (alerts "
            "PatroniRaftQuorumLost, PatroniEtcdQuorumLost): nobody can take the leader key, the "
            "primary demotes itself unless failsafe mode keeps it, and GET /cluster may show a "
            "FROZEN view: do not trust the Patroni panels while this is red. Not visible: this "
            "exporter cannot tell (alerts PatroniRaftQuorumNotVisible, PatroniEtcdQuorumNotVisible). "
            "No value: a cluster watched through REST only.",
            legend="{{scope}} ({{dcs}})", mapping=VERDICT_MAP, steps=VERDICT_STEPS, span=4),
        stat_panel(
            3, "Quorum evidence", DCS_EVIDENCE_EXPR,
            "What the verdict rests on. Raft: leader (the Raft leader reports has_quorum), "
            "majority (more than half of the voters report has_quorum), follower (a follower with "
            "has_quorum is connected to the leader it names: weaker), no_quorum, refused (more "
            "than half refuse connections), not_visible. etcd: leader (the leader's own Status "
            "says it leads), majority (a majority of the voting members name one leader), health "
            "(Status refused to the exporter's user, a majority answer /health true), no_leader "
            "(every member that answers knows no leader), refused, not_visible.",
            legend="{{scope}}", mapping=DCS_EVIDENCE_MAP, steps=[(None, "orange")], span=4),
        stat_panel(
            4, "DCS members",
            [(f'max by (scope) (patroni_raft_voters_answering{{{SEL}}})'
              f' or max by (scope) (patroni_etcd_members_answering{{{SEL}}})', "answer"),
             (f'max by (scope) (patroni_raft_voters{{{SEL}}})'
              f' or max by (scope) (patroni_etcd_members{{{SEL}}})', "of members"),
             (f'max by (scope) (patroni_raft_voters_with_quorum{{{SEL}}})', "report has_quorum (Raft)")],
            "N of M DCS members (Raft voters, etcd voting members) answer the exporter; on Raft, K "
            "of them report has_quorum. A quorum is floor(M/2)+1. Per member: the Patroni Raft "
            "dashboard, or the etcd row below.",
            steps=[(None, "blue")], span=6, text_mode=mc.BigValueTextMode.VALUE_AND_NAME),
    ]:
        d = d.with_panel(p)
    return d


def verdict_timeline(pid: int, span: int = 12, height: int = 6,
                     verdict: str = "patroni_raft_cluster_quorum", evidence: str = EVIDENCE_EXPR,
                     evidence_map=EVIDENCE_MAP):
    """The verdict over time with its evidence: when the quorum was lost, for how long, and on
    which evidence (the stat panels only show the last poll). Raft's, or with `verdict`,
    `evidence` and `evidence_map` another one's (DCS_EVIDENCE_EXPR: every DCS)."""
    # evidence shifted by 10 so that one value mapping names both rows
    return state_panel(
        pid, "Quorum verdict and evidence over time",
        [per_cluster(verdict, "verdict"),
         q(f'10 + ({evidence})', "{{scope}} evidence")],
        "The verdict (Confirmed / LOST / Not visible) and the evidence it rested on, poll by "
        "poll. While it is LOST, GET /cluster and the Patroni panels show a frozen DCS view.",
        {**VERDICT_MAP, **{str(10 + int(k)): v for k, v in evidence_map.items()}},
        span=span, height=height)


def ts_panel(pid: int, title: str, targets: list, desc: str, unit: str = "", span: int = 12,
             height: int = 8, mapping=None, min_val: float | None = None):
    """A time series panel of the `targets` (queries), refs A, B, C... in order."""
    p = (timeseries.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height)
         .legend(bc.VizLegendOptions().display_mode(mc.LegendDisplayMode.LIST)
                 .placement(mc.LegendPlacement.BOTTOM).show_legend(True))
         .tooltip(bc.VizTooltipOptions().mode(mc.TooltipDisplayMode.MULTI)))
    for ref, t in zip(string.ascii_uppercase, targets):
        p = p.with_target(t.ref_id(ref))
    if unit:
        p = p.unit(unit)
    if mapping:
        p = p.mappings(value_map(mapping))
    if min_val is not None:
        p = p.min(min_val)
    return p


def state_panel(pid: int, title: str, targets: list, desc: str, mapping, span: int = 12,
                height: int = 8):
    """A state timeline of the `targets` (queries), refs A, B, C... in order, named and
    coloured by `mapping`."""
    p = (statetimeline.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height).mappings(value_map(mapping)).show_value(mc.VisibilityMode.NEVER))
    for ref, t in zip(string.ascii_uppercase, targets):
        p = p.with_target(t.ref_id(ref))
    return p


def table_panel(pid: int, title: str, targets: list, desc: str, join_field: str,
                exclude: list[str], rename: dict[str, str], span: int = 24, height: int = 8,
                overrides: list | None = None, sort_desc: bool = False):
    """Instant table queries merged into one row per `join_field`; the columns in the order
    of `rename` (else Grafana orders them by query, and the cluster lands in the middle)."""
    p = (table.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height))
    for t in targets:
        p = p.with_target(t)
    p = p.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    p = p.with_transformation(dm.DataTransformerConfig(
        id_val="organize",
        options={"excludeByName": {k: True for k in exclude}, "renameByName": rename,
                 "indexByName": {k: i for i, k in enumerate(rename)}}))
    sort = bc.TableSortByFieldState().display_name(join_field)
    p = p.sort_by([sort.desc(True) if sort_desc else sort])
    for name, props in (overrides or []):
        p = p.override_by_name(name, props)
    return p


def prop(pid: str, value) -> dm.DynamicConfigValue:
    return dm.DynamicConfigValue(id_val=pid, value=value)


def mapping_prop(mapping) -> dm.DynamicConfigValue:
    return prop("mappings", value_map(mapping))


def cell_color() -> dm.DynamicConfigValue:
    return prop("custom.cellOptions", {"type": "color-background"})


def exporter_row(first_id: int) -> tuple:
    """Row 'Exporter': poll errors by kind, poll duration, data age."""
    row = db.Row("Exporter").id(first_id)
    panels = [
        ts_panel(first_id + 1, "Poll errors by source and kind",
                 [q(f'sum by (scope, source, kind) (rate(patroni_exporter_poll_errors_total{{{SEL}}}[$__rate_interval]))',
                    "{{scope}} {{source}} {{kind}}"),
                  # a 0 line while no error ever happened (the counter is born at the first
                  # error): "no errors" rather than "No data", which also reads as "broken"
                  q(f'max by (scope) (patroni_up{{{SEL}}}) * 0 '
                    f'unless on (scope) sum by (scope) (patroni_exporter_poll_errors_total{{{SEL}}})',
                    "{{scope}} no errors")],
                 "Failed polls per second. connect/timeout: a member or Raft node is down or "
                 "unreachable; auth/tls/decode/protocol/body_too_large: configuration or "
                 "compatibility problems (alert PatroniExporterPollErrors).",
                 unit="reqps", span=8),
        ts_panel(first_id + 2, "Poll duration",
                 [q(f'patroni_exporter_poll_duration_seconds{{{SEL}}}', "{{scope}} {{instance}}")],
                 "Duration of the last poll cycle (GET /cluster, every member's GET /patroni, "
                 "Raft status of every node). Close to the poll interval means slow or hanging members.",
                 unit="s", span=8, min_val=0),
        ts_panel(first_id + 3, "Data age",
                 [q(f'time() - patroni_exporter_last_poll_timestamp_seconds{{{SEL}}}', "{{scope}} {{instance}}")],
                 "Seconds since the last completed poll. Above 60 s for 1m: PatroniExporterPollStale "
                 "(all values of the cluster are frozen).",
                 unit="s", span=8, min_val=0),
        stat_panel(first_id + 4, "Exporter version",
                   f'max by (version, revision) (patroni_exporter_build_info'
                   f' * on (instance) group_left () max by (instance) (patroni_up{{{SEL}}}))',
                   "Version and git revision of each exporter that watches the selected clusters.",
                   legend="{{version}} ({{revision}})", text_mode=mc.BigValueTextMode.NAME,
                   steps=[(None, "blue")], span=8, height=6),
        ts_panel(first_id + 5, "Polls skipped",
                 [q(f'sum by (scope) (increase(patroni_exporter_polls_skipped_total{{{SEL}}}[$__rate_interval]))',
                    "{{scope}}"),
                  q(f'max by (scope) (patroni_up{{{SEL}}}) * 0 '
                    f'unless on (scope) sum by (scope) (patroni_exporter_polls_skipped_total{{{SEL}}})',
                    "{{scope}} none skipped")],
                 "Poll intervals skipped because the previous poll was still running: the poll "
                 "takes longer than --poll.interval (slow or hanging members).",
                 span=16, height=6, min_val=0),
    ]
    return row, panels


# Ends every dashboard's description: where the runbooks the alerts name are installed.
RUNBOOKS = " Runbooks: /usr/share/doc/patroni-raft-exporter/docs/runbooks.md (docs/runbooks.md of the exporter)"


def increased(family: str) -> str:
    """The events of the counter `family` for an annotation: a rise in the last 2 minutes."""
    return f'increase({family}{{{SEL}}}[2m]) > 0'


def range_total(family: str, zero: bool = False) -> str:
    """How many events the counter `family` counted in the dashboard's time range, per
    cluster, rounded (increase() extrapolates to the range's edges: one switchover reads 1.01);
    with `zero`, 0 for a watched cluster that has no such series (a counter absent at 0)."""
    total = f'round(sum by (scope) (increase({family}{{{SEL}}}[$__range])))'
    return total + f' or max by (scope) (patroni_up{{{SEL}}}) * 0' if zero else total


def build(title: str, uid: str, description: str, tags: list[str],
          annotations: tuple[tuple[str, str, str], ...] = (), first_row: str = ""):
    """The dashboard with its template variables and, for each (name, colour, expr) of
    `annotations`, an annotation marking the events `expr` finds; its description ends with
    where the runbooks are. With `first_row`, the dashboard opens with the quorum row of
    that title ([quorum_row])."""
    d = (db.Dashboard(title).uid(uid).description(description + RUNBOOKS).tags(tags)
         .time("now-6h", "now").refresh("30s").timezone("browser").editable()
         .tooltip(dm.DashboardCursorSync.CROSSHAIR))
    for v in variables():
        d = d.with_variable(v)
    for name, color, expr in annotations:
        d = d.annotation(db.AnnotationQuery().name(name).datasource(DS).enable(True)
                         .icon_color(color).expr(expr))
    return quorum_row(d, first_row) if first_row else d
