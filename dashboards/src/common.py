"""Shared helpers for the patroni-raft-exporter dashboards (grafana-foundation-sdk builders)."""
from __future__ import annotations

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
UP_MAP = {"1": ("UP", "green"), "0": ("DOWN", "red")}
YESNO_BAD = {"1": ("YES", "red"), "0": ("no", "green")}


def stat_panel(pid: int, title: str, expr: str, desc: str, legend: str = "", mapping=None,
               steps=None, unit: str = "", span: int = 4, height: int = 4, text_mode=None):
    p = (stat.Panel().id(pid).title(title).description(desc).datasource(DS)
         .with_target(q(expr, legend, instant=True)).span(span).height(height)
         .reduce_options(bc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
         .color_mode(mc.BigValueColorMode.BACKGROUND).graph_mode(mc.BigValueGraphMode.NONE))
    if mapping:
        p = p.mappings(value_map(mapping))
    if steps:
        p = p.thresholds(thresholds(*steps))
    if unit:
        p = p.unit(unit)
    if text_mode:
        p = p.text_mode(text_mode)
    return p


def ts_panel(pid: int, title: str, targets: list, desc: str, unit: str = "", span: int = 12,
             height: int = 8, mapping=None):
    p = (timeseries.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height)
         .legend(bc.VizLegendOptions().display_mode(mc.LegendDisplayMode.LIST)
                 .placement(mc.LegendPlacement.BOTTOM).show_legend(True))
         .tooltip(bc.VizTooltipOptions().mode(mc.TooltipDisplayMode.MULTI)))
    for t in targets:
        p = p.with_target(t)
    if unit:
        p = p.unit(unit)
    if mapping:
        p = p.mappings(value_map(mapping))
    return p


def state_panel(pid: int, title: str, targets: list, desc: str, mapping, span: int = 12,
                height: int = 8):
    p = (statetimeline.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height).mappings(value_map(mapping)).show_value(mc.VisibilityMode.NEVER))
    for t in targets:
        p = p.with_target(t)
    return p


def table_panel(pid: int, title: str, targets: list, desc: str, join_field: str,
                exclude: list[str], rename: dict[str, str], span: int = 24, height: int = 8,
                overrides: list | None = None):
    """Instant table queries merged into one row per `join_field`."""
    p = (table.Panel().id(pid).title(title).description(desc).datasource(DS)
         .span(span).height(height))
    for t in targets:
        p = p.with_target(t)
    p = p.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    p = p.with_transformation(dm.DataTransformerConfig(
        id_val="organize",
        options={"excludeByName": {k: True for k in exclude}, "renameByName": rename,
                 "indexByName": {}}))
    p = p.sort_by([bc.TableSortByFieldState().display_name(join_field)])
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
                    "{{scope}} {{source}} {{kind}}")],
                 "Failed polls per second. connect/timeout: a member or Raft node is down or "
                 "unreachable; auth/tls/decode/protocol/body_too_large: configuration or "
                 "compatibility problems (alert PatroniExporterPollErrors).",
                 unit="reqps", span=8),
        ts_panel(first_id + 2, "Poll duration",
                 [q(f'patroni_exporter_poll_duration_seconds{{{SEL}}}', "{{scope}} {{instance}}")],
                 "Duration of the last poll cycle (GET /cluster, every member's GET /patroni, "
                 "Raft status of every node). Close to the poll interval means slow or hanging members.",
                 unit="s", span=8),
        ts_panel(first_id + 3, "Data age",
                 [q(f'time() - patroni_exporter_last_poll_timestamp_seconds{{{SEL}}}', "{{scope}} {{instance}}")],
                 "Seconds since the last completed poll. Above 60 s for 1m: PatroniExporterPollStale "
                 "(all values of the cluster are frozen).",
                 unit="s", span=8),
    ]
    return row, panels


def build(title: str, uid: str, description: str, tags: list[str]):
    d = (db.Dashboard(title).uid(uid).description(description).tags(tags)
         .time("now-6h", "now").refresh("30s").timezone("browser").editable()
         .tooltip(dm.DashboardCursorSync.CROSSHAIR))
    for v in variables():
        d = d.with_variable(v)
    return d
