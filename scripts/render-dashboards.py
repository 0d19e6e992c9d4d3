"""Draw Grafana dashboards (their JSON) as PNG pictures from a real Prometheus.

Each panel's queries (targets[].expr) run through Prometheus' /api/v1/query_range (instant
targets through /api/v1/query at the end of the range, as Grafana does) with the template
variables substituted: query variables with an "All" value take it (scope -> .*), and
$__rate_interval, $__interval, $__range and their _s/_ms forms are computed as Grafana does.
The dashboard is drawn as Grafana lays it out: the 24-column gridPos grid (a unit of height is
30 px plus an 8 px margin), row panels as headers, stat panels as big coloured numbers (last
value, value mappings, thresholds, units), time series as lines with their legend below,
state timelines as coloured bands, tables merged and organised as the panel's transformations
say. A panel whose queries return nothing shows "No data", in red, so that a reviewer sees it.
Texts that do not fit their space (titles, table cells, row and value names) are cut with an
ellipsis and a legend takes at most 35 % of its panel, as in Grafana.

The dashboard's annotation queries are drawn as Grafana draws them (vertical lines on time
panels); the events of the scripted incident (--events, "epoch<TAB>label" lines) as numbered
dotted lines, listed under the title.

usage: render-dashboards.py --prometheus URL --start EPOCH --end EPOCH [--events FILE]
                            [--var NAME=VALUE]... --out DIR DASHBOARD.json...
  --var scope=pg-test   a template variable's value, as Grafana's URL var-scope=pg-test (for the
                        dashboards that have that variable; default: its All value)
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import RendererAgg  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

# Grafana's dark theme and named colours.
BG, PANEL_BG, BORDER, TEXT, DIM = "#111217", "#181b1f", "#2c3235", "#ccccdc", "#8e8e8e"
COLORS = {
    "green": "#73BF69", "semi-dark-green": "#56A64B", "dark-green": "#37872D",
    "light-green": "#96D98D", "red": "#F2495C", "semi-dark-red": "#E02F44", "dark-red": "#C4162A",
    "orange": "#FF9830", "dark-orange": "#FA6400", "yellow": "#FADE2A", "blue": "#5794F2",
    "dark-blue": "#1F60C4", "purple": "#B877D9", "text": TEXT, "transparent": PANEL_BG,
}
PALETTE = ["#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9",
           "#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17", "#890F02", "#0A437C",
           "#6D1F62", "#584477"]
NO_DATA = "#F2495C"
CELL_H, CELL_GAP, WIDTH_PX, DPI = 30, 8, 1800, 100
# Grafana gives a legend under a graph at most 35 % of the panel's height (the rest scrolls)
LEGEND_MAX_SHARE = 0.35
TIMEOUT = 20  # seconds for every Prometheus request


def color(name: str | None) -> str:
    if not name:
        return TEXT
    return COLORS.get(name, name)


_MEASURE = RendererAgg(100, 100, DPI)


def text_px(text: str, size: float, bold: bool = False) -> float:
    """The width in pixels of `text` drawn at `size` points (the picture's font)."""
    font = FontProperties(size=size, weight="bold" if bold else "normal")
    return _MEASURE.get_text_width_height_descent(text, font, ismath=False)[0]


def fit(text: str, max_px: float, size: float, bold: bool = False) -> str:
    """`text` cut to `max_px` with an ellipsis, as Grafana cuts a title, a cell or a name that
    does not fit (a picture whose texts run into each other is unreadable)."""
    if text_px(text, size, bold) <= max_px:
        return text
    lo, hi = 0, len(text)  # the longest prefix that fits with the ellipsis
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text_px(text[:mid] + "…", size, bold) <= max_px:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + "…" if lo else ""


# ---------------------------------------------------------------- Prometheus

class Prom:
    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.errors: list[str] = []

    def get(self, path: str, **params) -> dict:
        full = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(full, timeout=TIMEOUT) as resp:
            body = json.load(resp)
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def query(self, expr: str, **params) -> list:
        path = "/api/v1/query_range" if "start" in params else "/api/v1/query"
        try:
            return self.get(path, query=expr, **params)["result"]
        except Exception as ex:  # reported and drawn as "No data": the reviewer must see it
            self.errors.append(f"{expr}: {ex}")
            return []

    def scrape_interval(self) -> float:
        try:
            yaml_text = self.get("/api/v1/status/config")["yaml"]
            m = re.search(r"scrape_interval:\s*(\d+)(ms|s|m)", yaml_text)
            if m:
                return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]
        except Exception:
            pass
        return 15.0


def substitute(expr: str, variables: dict[str, str]) -> str:
    # longest names first: $__rate_interval before $__range, $__range_s before $__range
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", variables[name]).replace("$" + name, variables[name])
    return expr


def template_values(dashboard: dict, start: float, end: float, step: float, scrape: float,
                    chosen: dict[str, str] | None = None) -> dict:
    rng = int(end - start)
    values = {
        "__interval": f"{int(step)}s", "__interval_ms": str(int(step * 1000)),
        # Grafana: max($__interval + scrape interval, 4 * scrape interval)
        "__rate_interval": f"{int(max(step + scrape, 4 * scrape))}s",
        "__range": f"{rng}s", "__range_s": str(rng), "__range_ms": str(rng * 1000),
    }
    for var in dashboard.get("templating", {}).get("list", []):
        name = var.get("name")
        if var.get("type") == "datasource":
            continue
        if name in (chosen or {}):
            values[name] = chosen[name]
        elif var.get("includeAll") and var.get("allValue"):
            values[name] = var["allValue"]
        elif isinstance(var.get("current"), dict) and var["current"].get("value") not in (None, ""):
            values[name] = str(var["current"]["value"])
        else:
            values[name] = ".*"
    return values


def legend_name(fmt: str | None, metric: dict) -> str:
    if fmt:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt).strip()
    if not metric:
        return "value"
    name = metric.get("__name__", "")
    labels = ", ".join(f'{k}="{v}"' for k, v in metric.items() if k != "__name__")
    return f"{name}{{{labels}}}"


# ---------------------------------------------------------------- value formatting

def fmt_unit(value: float, unit: str | None, sig: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    unit = unit or ""
    if unit == "bytes":
        v, i = abs(value), 0
        names = ["B", "KiB", "MiB", "GiB", "TiB"]
        while v >= 1024 and i < len(names) - 1:
            v /= 1024
            i += 1
        return f"{math.copysign(v, value):.{sig}g} {names[i]}"
    if unit == "s":
        a = abs(value)
        if a == 0:
            return "0 s"
        if a < 1:
            return f"{value * 1000:.{sig}g} ms"
        if a < 60:
            return f"{value:.{sig}g} s"
        if a < 3600:
            return f"{value / 60:.{sig}g} min"
        if a < 86400:
            return f"{value / 3600:.{sig}g} hour"
        return f"{value / 86400:.{sig}g} day"
    if unit == "percent":
        return f"{value:.{sig}g}%"
    if unit == "percentunit":
        return f"{value * 100:.{sig}g}%"
    if unit == "reqps":
        return f"{value:.{sig}g} req/s"
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    for div, suffix in ((1e9, " Bil"), (1e6, " Mil"), (1e3, " K")):
        if abs(value) >= div:
            return f"{value / div:.{sig}g}{suffix}"
    return f"{value:.{sig}g}"


def value_mappings(mappings: list | None) -> dict[str, tuple[str, str | None]]:
    out = {}
    for m in mappings or []:
        if m.get("type") == "value":
            for key, res in (m.get("options") or {}).items():
                out[key] = (res.get("text", key), res.get("color"))
    return out


def mapped(value: float, mapping: dict) -> tuple[str, str | None] | None:
    if value is None:
        return None
    key = str(int(value)) if value == int(value) else str(value)
    return mapping.get(key)


def threshold_color(value: float, thresholds: dict | None) -> str | None:
    steps = (thresholds or {}).get("steps") or []
    chosen = None
    for s in steps:
        if s.get("value") is None or value >= s["value"]:
            chosen = s.get("color")
    return chosen


# ---------------------------------------------------------------- drawing helpers

class Canvas:
    def __init__(self, rows: int, header_px: int):
        self.unit_w = WIDTH_PX / 24
        self.header_px = header_px
        self.height_px = header_px + rows * (CELL_H + CELL_GAP) + CELL_GAP
        self.fig = plt.figure(figsize=(WIDTH_PX / DPI, self.height_px / DPI), dpi=DPI, facecolor=BG)

    def rect(self, grid: dict) -> tuple[float, float, float, float]:
        """gridPos -> figure fraction (left, bottom, width, height), with Grafana's margins."""
        x = grid["x"] * self.unit_w + CELL_GAP / 2
        w = grid["w"] * self.unit_w - CELL_GAP
        top = self.header_px + grid["y"] * (CELL_H + CELL_GAP) + CELL_GAP / 2
        h = grid["h"] * CELL_H + (grid["h"] - 1) * CELL_GAP
        return (x / WIDTH_PX, 1 - (top + h) / self.height_px, w / WIDTH_PX, h / self.height_px)

    def px_to_fig_h(self, px: float) -> float:
        return px / self.height_px

    def px_to_fig_w(self, px: float) -> float:
        return px / WIDTH_PX


def panel_frame(canvas: Canvas, panel: dict):
    left, bottom, w, h = canvas.rect(panel["gridPos"])
    fig = canvas.fig
    fig.add_artist(Rectangle((left, bottom), w, h, transform=fig.transFigure, facecolor=PANEL_BG,
                             edgecolor=BORDER, linewidth=1, zorder=-10))
    title_h = canvas.px_to_fig_h(26)
    fig.text(left + canvas.px_to_fig_w(8), bottom + h - title_h / 2,
             fit(panel.get("title", ""), w * WIDTH_PX - 16, 10, bold=True),
             color=TEXT, fontsize=10, fontweight="bold", va="center", ha="left")
    # the content area under the title
    pad_w = canvas.px_to_fig_w(8)
    return left + pad_w, bottom + canvas.px_to_fig_h(6), w - 2 * pad_w, h - title_h - canvas.px_to_fig_h(8)


def no_data(canvas: Canvas, area, why: str = "No data") -> None:
    left, bottom, w, h = area
    canvas.fig.text(left + w / 2, bottom + h / 2, why, color=NO_DATA, fontsize=14,
                    fontweight="bold", ha="center", va="center")


def style_axes(ax, unit: str | None, start: float, end: float) -> None:
    ax.set_facecolor(PANEL_BG)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.tick_params(colors=DIM, labelsize=8, length=0)
    ax.grid(True, color=BORDER, linewidth=0.6)
    ax.set_xlim(datetime.fromtimestamp(start, timezone.utc), datetime.fromtimestamp(end, timezone.utc))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=timezone.utc))
    ax.xaxis.set_major_locator(mdates.MinuteLocator(byminute=range(0, 60, 2), tz=timezone.utc))
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=5))

    def tick(v, _pos):
        # enough significant digits that neighbouring ticks differ (4.56 s, 4.57 s, ...)
        locs = ax.yaxis.get_majorticklocs()
        spacing = min((abs(b - a) for a, b in zip(locs, locs[1:]) if b != a), default=1) or 1
        biggest = max((abs(x) for x in locs), default=1) or 1
        return fmt_unit(v, unit, max(3, math.ceil(math.log10(biggest / spacing)) + 1))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(tick))


def draw_time_marks(ax, marks: list[tuple[float, str, str]]) -> None:
    for ts, style, col in marks:
        ax.axvline(datetime.fromtimestamp(ts, timezone.utc), color=col, linewidth=1,
                   linestyle=style, alpha=0.8, zorder=1)


# ---------------------------------------------------------------- panels

def run_targets(prom: Prom, panel: dict, ctx: dict, instant_default: bool) -> list[tuple[dict, list]]:
    """[(target, result)] with Grafana's choice of instant or range query per target."""
    out = []
    for t in panel.get("targets", []) or []:
        expr = substitute(t.get("expr", ""), ctx["vars"])
        if t.get("instant", instant_default) and not t.get("range"):
            res = prom.query(expr, time=ctx["end"])
        else:
            res = prom.query(expr, start=ctx["start"], end=ctx["end"], step=ctx["step"])
        out.append((t, res))
    return out


def series_of(results) -> list[tuple[str, list[float], list[float]]]:
    """(legend, times, values) per series of range results; instant results as one point."""
    out = []
    for t, res in results:
        for s in res:
            name = legend_name(t.get("legendFormat"), s.get("metric", {}))
            if "values" in s:
                ts = [float(v[0]) for v in s["values"]]
                vs = [float(v[1]) for v in s["values"]]
            else:
                ts, vs = [float(s["value"][0])], [float(s["value"][1])]
            out.append((name, ts, vs))
    return out


def field_defaults(panel: dict) -> dict:
    """The panel's fieldConfig.defaults (unit, mappings, thresholds...), {} when unset."""
    return (panel.get("fieldConfig") or {}).get("defaults") or {}


def framed_series(canvas, panel, ctx, prom, instant: bool):
    """Draws the panel's frame and runs its queries: the frame's area, the series, the
    panel's field defaults and its value mappings."""
    area = panel_frame(canvas, panel)
    series = series_of(run_targets(prom, panel, ctx, instant))
    defaults = field_defaults(panel)
    return area, series, defaults, value_mappings(defaults.get("mappings"))


def draw_stat(canvas, panel, ctx, prom) -> bool:
    area, series, defaults, mapping = framed_series(canvas, panel, ctx, prom, True)
    unit = defaults.get("unit")
    text_mode = (panel.get("options") or {}).get("textMode", "auto")
    if not series:
        no_data(canvas, area)
        return False
    left, bottom, w, h = area
    n = len(series)
    gap = canvas.px_to_fig_w(4)
    cell_w = (w - gap * (n - 1)) / n
    for i, (name, _ts, vs) in enumerate(series):
        value = vs[-1]
        m = mapped(value, mapping)
        text = m[0] if m else fmt_unit(value, unit)
        col = color((m[1] if m and m[1] else None) or threshold_color(value, defaults.get("thresholds")) or "green")
        x = left + i * (cell_w + gap)
        canvas.fig.add_artist(Rectangle((x, bottom), cell_w, h, transform=canvas.fig.transFigure,
                                        facecolor=col, edgecolor="none"))
        show_name = text_mode in ("name", "value_and_name") or (text_mode == "auto" and n > 1)
        big = name if text_mode == "name" else text
        size = min(30, max(11, 0.9 * cell_w * WIDTH_PX / max(len(big), 1) / 0.62 / 1.39))
        size = min(size, h * canvas.height_px * 0.45)
        # never wider than its cell (a long version string, a member name)
        size = min(size, size * (cell_w * WIDTH_PX - 10) / max(text_px(big, size, bold=True), 1))
        if show_name and text_mode != "name":
            # smaller up to 7 pt to fit its cell (0.95: widths do not scale exactly with size)
            name_size = max(7.0, min(9.0, 0.95 * 9.0 * (cell_w * WIDTH_PX - 8) / max(text_px(name, 9), 1)))
            canvas.fig.text(x + cell_w / 2, bottom + h * 0.80, fit(name, cell_w * WIDTH_PX - 8, name_size),
                            color="white", fontsize=name_size, ha="center", va="center")
            canvas.fig.text(x + cell_w / 2, bottom + h * 0.36, big, color="white", fontsize=size,
                            fontweight="bold", ha="center", va="center")
        else:
            canvas.fig.text(x + cell_w / 2, bottom + h / 2, big, color="white", fontsize=size,
                            fontweight="bold", ha="center", va="center")
    return True


LEGEND_ROW_PX = 15


def legend_rows(names: list[str], width_px: float, max_rows: int) -> tuple[int, int, int]:
    """(columns, rows, names shown) of a legend under a graph `width_px` wide, at most
    `max_rows` rows high: the names that do not fit are left out (Grafana scrolls them)."""
    longest = max(text_px(n, 8) for n in names) if names else 1
    ncol = max(1, min(len(names), int(width_px // (longest + 30))))
    rows = math.ceil(len(names) / ncol)
    if rows <= max_rows:
        return ncol, rows, len(names)
    rows = max(1, max_rows)
    return ncol, rows, ncol * rows - 1  # the last place says how many more


def integer_ylim(ax, values: list[float], defaults: dict) -> None:
    """A graph of whole numbers whose range is under 2 (a constant term, no skipped polls):
    at least two whole ticks, never 0.95, 0.975, 1, 1.03 (fractions of a count)."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite or max(finite) - min(finite) >= 2:
        return
    lo, hi = min(finite), max(finite)
    bottom = lo - 1 if lo < 0 or lo >= 1 else 0
    if defaults.get("min") is None:
        ax.set_ylim(bottom=bottom)
    if defaults.get("max") is None:
        ax.set_ylim(top=hi + 1)


def draw_timeseries(canvas, panel, ctx, prom) -> bool:
    area, series, defaults, mapping = framed_series(canvas, panel, ctx, prom, False)
    unit = defaults.get("unit")
    left, bottom, w, h = area
    if not series:
        no_data(canvas, area)
        return False
    names = [s[0] for s in series]
    max_rows = int(LEGEND_MAX_SHARE * h * canvas.height_px // LEGEND_ROW_PX)
    ncol, nrows, shown = legend_rows(names, w * WIDTH_PX, max_rows)
    legend_h = canvas.px_to_fig_h(nrows * LEGEND_ROW_PX + 6)
    axis_left = canvas.px_to_fig_w(62)
    ax = canvas.fig.add_axes((left + axis_left, bottom + legend_h + canvas.px_to_fig_h(16),
                              w - axis_left, h - legend_h - canvas.px_to_fig_h(18)))
    style_axes(ax, unit, ctx["start"], ctx["end"])
    for i, (name, ts, vs) in enumerate(series):
        times = [datetime.fromtimestamp(t, timezone.utc) for t in ts]
        # gaps where Prometheus has no sample (a stale series), as Grafana draws them
        xs, ys, prev = [], [], None
        for t, dt, v in zip(ts, times, vs):
            if prev is not None and t - prev > 1.5 * ctx["step"]:
                xs.append(dt)
                ys.append(float("nan"))
            xs.append(dt)
            ys.append(v)
            prev = t
        ax.plot(xs, ys, color=PALETTE[i % len(PALETTE)], linewidth=1.4, label=name)
    if all(v == int(v) for _n, _t, vs in series for v in vs if not math.isnan(v)):
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=5, integer=True))
        if not mapping:
            integer_ylim(ax, [v for _n, _t, vs in series for v in vs], defaults)
    if defaults.get("min") is not None:
        ax.set_ylim(bottom=defaults["min"])
    if defaults.get("max") is not None:
        ax.set_ylim(top=defaults["max"])
    if mapping:
        ticks = sorted(float(k) for k in mapping)
        ax.set_yticks(ticks)
        ax.set_yticklabels([mapping[k][0] for k in sorted(mapping, key=float)])
        ax.set_ylim(min(ticks) - 0.2, max(ticks) + 0.2)
    draw_time_marks(ax, ctx["marks"])
    handles, labels = ax.get_legend_handles_labels()
    if shown < len(names):
        handles = handles[:shown] + [Rectangle((0, 0), 0, 0, facecolor="none", edgecolor="none")]
        labels = labels[:shown] + [f"… {len(names) - shown} more"]
    ax.legend(handles, labels, loc="upper left",
              bbox_to_anchor=(-axis_left / (w - axis_left), -canvas.px_to_fig_h(18) / (h - legend_h)),
              ncol=ncol, frameon=False, fontsize=8, labelcolor=TEXT, handlelength=1.2,
              borderaxespad=0, columnspacing=1.2)
    return True


def draw_state_timeline(canvas, panel, ctx, prom) -> bool:
    area, series, defaults, mapping = framed_series(canvas, panel, ctx, prom, False)
    left, bottom, w, h = area
    if not series:
        no_data(canvas, area)
        return False
    used: dict[str, str] = {}
    legend_h = canvas.px_to_fig_h(20)
    # the row names as wide as the longest, up to half the panel (Grafana cuts longer ones)
    label_px = min(0.5 * w * WIDTH_PX, max(text_px(s[0], 8) for s in series) + 12)
    label_w = canvas.px_to_fig_w(label_px)
    ax = canvas.fig.add_axes((left + label_w, bottom + legend_h + canvas.px_to_fig_h(14),
                              w - label_w, h - legend_h - canvas.px_to_fig_h(16)))
    style_axes(ax, None, ctx["start"], ctx["end"])
    ax.grid(False)
    n = len(series)
    for row, (name, ts, vs) in enumerate(series):
        y = n - 1 - row
        # one band per run of a state, as Grafana draws it (a rectangle per sample leaves
        # anti-aliasing seams where two of them meet)
        runs: list[list] = []  # [start, end, label, colour]
        for i, (t, v) in enumerate(zip(ts, vs)):
            t_next = ts[i + 1] if i + 1 < len(ts) and ts[i + 1] - t <= 1.5 * ctx["step"] else t + ctx["step"]
            m = mapped(v, mapping)
            col = color(m[1]) if m and m[1] else color(threshold_color(v, defaults.get("thresholds")) or "blue")
            label = m[0] if m else fmt_unit(v, None)
            used.setdefault(label, col)
            if runs and runs[-1][1] == t and runs[-1][2] == label:
                runs[-1][1] = t_next
            else:
                runs.append([t, t_next, label, col])
        for t0, t1, _label, col in runs:
            x0 = mdates.date2num(datetime.fromtimestamp(t0, timezone.utc))
            x1 = mdates.date2num(datetime.fromtimestamp(t1, timezone.utc))
            ax.add_patch(Rectangle((x0, y + 0.1), x1 - x0, 0.8, facecolor=col, edgecolor="none"))
    ax.set_ylim(0, n)
    ax.set_yticks([n - 1 - r + 0.5 for r in range(n)])
    ax.set_yticklabels([fit(s[0], label_px - 10, 8) for s in series], color=TEXT, fontsize=8)
    draw_time_marks(ax, ctx["marks"])
    handles = [Rectangle((0, 0), 1, 1, facecolor=c) for c in used.values()]
    ax.legend(handles, list(used), loc="upper left", ncol=min(len(used), 8), frameon=False,
              fontsize=8, labelcolor=TEXT, bbox_to_anchor=(-label_w / (w - label_w), -canvas.px_to_fig_h(16) / (h - legend_h - canvas.px_to_fig_h(16))),
              borderaxespad=0, handlelength=1.0)
    return True


def draw_table(canvas, panel, ctx, prom) -> bool:
    area = panel_frame(canvas, panel)
    results = run_targets(prom, panel, ctx, True)
    left, bottom, w, h = area
    # Grafana "format: table": one row per sample, label columns and a "Value #<refId>" column.
    frames = []
    for t, res in results:
        rows = []
        for s in res:
            row = {k: v for k, v in sorted(s.get("metric", {}).items()) if k != "__name__"}
            row[f"Value #{t.get('refId')}"] = float(s["value"][1])
            rows.append(row)
        if rows:
            frames.append(rows)
    if not frames:
        no_data(canvas, area)
        return False
    # transformation "merge": rows of all frames joined on the labels they share
    label_sets = [set().union(*(set(k for k in r if not k.startswith("Value #")) for r in rows)) for rows in frames]
    common = sorted(set.intersection(*label_sets))
    merged: dict[tuple, dict] = {}
    columns: list[str] = ["Time"]
    for rows in frames:
        for r in rows:
            key = tuple(r.get(k) for k in common)
            merged.setdefault(key, {}).update(r)
            for k in r:
                if k not in columns:
                    columns.append(k)
    # (Grafana's order: the fields of each frame in turn, labels sorted, then its value)
    organize = {}
    sort_by = None
    for tr in panel.get("transformations", []) or []:
        if tr.get("id") == "organize":
            organize = tr.get("options") or {}
    exclude = organize.get("excludeByName") or {}
    rename = organize.get("renameByName") or {}
    columns = [c for c in columns if not exclude.get(c) and c != "Time"]
    index = organize.get("indexByName") or {}
    if index:
        columns.sort(key=lambda c: index.get(c, len(index)))
    headers = [rename.get(c, c) for c in columns]
    sort_desc = False
    for s in (panel.get("options") or {}).get("sortBy") or []:
        sort_by, sort_desc = s.get("displayName"), bool(s.get("desc"))
    rows = list(merged.values())
    if sort_by in headers:
        col = columns[headers.index(sort_by)]
        # Grafana sorts a number column by number, a text column by text; missing cells last
        nums = [r.get(col) for r in rows if r.get(col) is not None]
        if nums and all(isinstance(v, float) for v in nums):
            rows.sort(key=lambda r: r.get(col) if r.get(col) is not None else -math.inf, reverse=sort_desc)
        else:
            rows.sort(key=lambda r: str(r.get(col, "")), reverse=sort_desc)
    defaults = field_defaults(panel)
    overrides = {}
    for o in (panel.get("fieldConfig") or {}).get("overrides") or []:
        if (o.get("matcher") or {}).get("id") == "byName":
            overrides[o["matcher"]["options"]] = {p["id"]: p.get("value") for p in o.get("properties", [])}
    # draw
    fig = canvas.fig
    row_h = canvas.px_to_fig_h(24)
    col_w = w / max(len(columns), 1)
    y = bottom + h - row_h
    cell_px = col_w * WIDTH_PX - 8  # what a cell's text may take
    for i, head in enumerate(headers):
        fig.text(left + i * col_w + canvas.px_to_fig_w(4), y + row_h / 2, fit(head, cell_px, 8.5, bold=True),
                 color="#6e9fff", fontsize=8.5, fontweight="bold", va="center", ha="left")
    fig.add_artist(plt.Line2D([left, left + w], [y, y], transform=fig.transFigure, color=BORDER))
    for r in rows:
        y -= row_h
        if y < bottom:
            break
        for i, (col, head) in enumerate(zip(columns, headers)):
            ov = overrides.get(head, {})
            raw = r.get(col)
            text, bg = "", None
            if isinstance(raw, float):
                m = mapped(raw, value_mappings(ov.get("mappings") or defaults.get("mappings")))
                text = m[0] if m else fmt_unit(raw, ov.get("unit") or defaults.get("unit"))
                if m and (ov.get("custom.cellOptions") or {}).get("type") == "color-background":
                    bg = color(m[1])
            elif raw is not None:
                text = raw
            x = left + i * col_w
            if bg:
                fig.add_artist(Rectangle((x + canvas.px_to_fig_w(1), y + canvas.px_to_fig_h(1)), col_w - canvas.px_to_fig_w(2),
                                         row_h - canvas.px_to_fig_h(2), transform=fig.transFigure,
                                         facecolor=bg, edgecolor="none"))
            fig.text(x + canvas.px_to_fig_w(4), y + row_h / 2, fit(text, cell_px, 8.5),
                     color="white" if bg else TEXT, fontsize=8.5, va="center", ha="left")
        fig.add_artist(plt.Line2D([left, left + w], [y, y], transform=fig.transFigure, color=BORDER, linewidth=0.5))
    return True


def draw_row(canvas, panel) -> None:
    left, bottom, w, h = canvas.rect(panel["gridPos"])
    canvas.fig.text(left, bottom + h / 2, "⌄ " + panel.get("title", ""), color=TEXT, fontsize=12,
                    fontweight="bold", va="center", ha="left")


DRAW = {"stat": draw_stat, "timeseries": draw_timeseries, "state-timeline": draw_state_timeline,
        "table": draw_table}


# ---------------------------------------------------------------- dashboard

def annotation_marks(prom: Prom, dashboard: dict, ctx: dict) -> list[tuple[float, str, str]]:
    """Grafana annotations from the dashboard's Prometheus annotation queries: the first
    timestamp of every run of samples (series value present = event)."""
    marks = []
    for a in (dashboard.get("annotations") or {}).get("list", []):
        if not a.get("enable", True) or not a.get("expr"):
            continue
        res = prom.query(substitute(a["expr"], ctx["vars"]), start=ctx["start"], end=ctx["end"], step=ctx["step"])
        for s in res:
            prev = None
            for t, _v in s["values"]:
                t = float(t)
                if prev is None or t - prev > 1.5 * ctx["step"]:
                    marks.append((t, "-", color(a.get("iconColor", "orange"))))
                prev = t
    return marks


def render(path: Path, prom: Prom, start: float, end: float, events: list[tuple[float, str]], out: Path,
           suffix: str = "", caption: str = "", chosen: dict[str, str] | None = None) -> dict:
    dashboard = json.loads(path.read_text())
    scrape = prom.scrape_interval()
    # Grafana: interval = range / max data points (about the panel width in pixels), not
    # below the scrape interval; rounded to whole seconds.
    step = max(scrape, math.ceil((end - start) / 600))
    ctx = {"start": start, "end": end, "step": step}
    ctx["vars"] = template_values(dashboard, start, end, step, scrape, chosen)
    ctx["marks"] = annotation_marks(prom, dashboard, ctx) + [(t, ":", "#a0a0a0") for t, _ in events]
    panels = dashboard.get("panels", [])
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    header_lines = 2 + math.ceil(len(events) / 3)
    canvas = Canvas(rows, header_px=22 * header_lines + 10)
    fig = canvas.fig
    events = [(t, label) for t, label in events if t < end]
    when = (f"{datetime.fromtimestamp(start, timezone.utc):%Y-%m-%d %H:%M:%S} to "
            f"{datetime.fromtimestamp(end, timezone.utc):%H:%M:%S} UTC{caption}")
    top = 1 - canvas.px_to_fig_h(16)
    fig.text(canvas.px_to_fig_w(8), top, f"{dashboard.get('title')}   (uid {dashboard.get('uid')})",
             color=TEXT, fontsize=15, fontweight="bold", va="center")
    scope = ctx["vars"].get("scope", "")
    fig.text(canvas.px_to_fig_w(8), top - canvas.px_to_fig_h(24),
             f"{when}   scope={scope}   step {step:g} s, $__rate_interval {ctx['vars']['__rate_interval']}   "
             "drawn by scripts/render-dashboards.py from a real Prometheus; solid lines: the dashboard's "
             "annotations, dotted: the incident's steps", color=DIM, fontsize=9, va="center")
    for i, (t, label) in enumerate(events):
        col, line = i % 3, i // 3
        fig.text(canvas.px_to_fig_w(8 + col * 600), top - canvas.px_to_fig_h(48 + 22 * line),
                 f"{i + 1}. {datetime.fromtimestamp(t, timezone.utc):%H:%M:%S}  {label}",
                 color="#d0d0d0", fontsize=9.5, va="center")
    summary = {"panels": 0, "no_data": []}
    for p in panels:
        if p.get("type") == "row":
            draw_row(canvas, p)
            continue
        draw = DRAW.get(p.get("type"))
        summary["panels"] += 1
        if draw is None:
            area = panel_frame(canvas, p)
            no_data(canvas, area, f"panel type {p.get('type')} not drawn")
            summary["no_data"].append(p.get("title"))
            continue
        if not draw(canvas, p, ctx, prom):
            summary["no_data"].append(p.get("title"))
    target = out / (path.stem + suffix + ".png")
    fig.savefig(target, dpi=DPI, facecolor=BG)
    plt.close(fig)
    summary["file"] = str(target)
    return summary


def read_events(path: str | None) -> list[tuple[float, str]]:
    if not path:
        return []
    events = []
    for line in Path(path).read_text().splitlines():
        if "\t" in line:
            t, label = line.split("\t", 1)
            events.append((float(t), label))
    return events


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--start", type=float, required=True)
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--events")
    ap.add_argument("--out", required=True)
    ap.add_argument("--suffix", default="", help="appended to each PNG's name")
    ap.add_argument("--caption", default="", help="appended to the time range under the title")
    ap.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                    help="a template variable's value (default: its All value)")
    ap.add_argument("dashboards", nargs="+")
    args = ap.parse_args()
    prom = Prom(args.prometheus)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    events = read_events(args.events)
    for d in args.dashboards:
        s = render(Path(d), prom, args.start, args.end, events, out, args.suffix, args.caption,
                   dict(v.split("=", 1) for v in args.var))
        nd = ", ".join(s["no_data"]) or "none"
        print(f"wrote {s['file']}: {s['panels']} panels, No data in: {nd}")
    for e in prom.errors:
        print(f"error: query failed: {e}", file=sys.stderr)
    return 1 if prom.errors else 0


if __name__ == "__main__":
    sys.exit(main())
