"""Plotly figures for the HTML report, as plain dicts (``{"data": [...], "layout": {...}}``).

Pure functions: polars frames in, figure dicts out; no store access and no I/O. Every frame
carries ``x`` in epoch milliseconds (UTC), the page draws each dict with ``Plotly.newPlot``.

Strings that come from data (device names, event text) are HTML-escaped before they reach
plotly, which renders a subset of HTML (including links) in names and hover labels.

Rules from PERFORMANCE-NOTES: x as numbers, long series reduced to ~2000 points per trace with
min/max per bucket (spikes survive, averaging would hide them), no WebGL traces, per-CPU data
as one heatmap.
"""

from __future__ import annotations

from html import escape
from typing import Any

import polars as pl

MAX_POINTS = 2000
HEATMAP_COLUMNS = 1200
PANEL_HEIGHT = 230
# Fixed margins so that every panel's plot area starts and ends at the same pixel: the
# x axes line up vertically and linked zoom reads as one timeline.
MARGIN = {"l": 70, "r": 170, "t": 30, "b": 30, "autoexpand": False}

SEVERITY_COLORS = {
    "critical": "#d62728",
    "major": "#ff7f0e",
    "minor": "#bcbd22",
    "info": "#1f77b4",
}
# In order of importance: when there are too many events for vertical lines on every chart,
# the most important kinds get them first (the events strip always shows all of them).
EVENT_COLORS = {
    "oom_kill": "#d62728",
    "xid": "#ff7f0e",
    "hung_task": "#9467bd",
    "soft_lockup": "#17becf",
    "oom_invoked": "#e377c2",
    "segfault": "#7f7f7f",
    "io_error": "#8c564b",
}
MAX_EVENT_LINES = 150

Figure = dict[str, Any]


def _minmax_rows(data: pl.DataFrame, y: str, x: str, max_points: int) -> pl.Series:
    """Row numbers (sorted) of each bucket's min and max of ``y``; ``data`` sorted by x."""
    buckets = max(max_points // 2, 1)
    lo, hi = data[x].min(), data[x].max()
    span = int(hi - lo) + 1  # type: ignore[operator]
    idx = (
        data.select(x, y)
        .with_row_index("_i")
        .drop_nulls(y)
        .with_columns(((pl.col(x) - lo) * buckets // span).alias("_b"))
        .group_by("_b")
        .agg(
            pl.col("_i").sort_by(pl.col(y)).first().alias("_min"),
            pl.col("_i").sort_by(pl.col(y)).last().alias("_max"),
        )
    )
    return pl.concat([idx["_min"], idx["_max"]]).unique().sort()


def minmax_downsample(
    frame: pl.DataFrame, y: str, *, x: str = "x", max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """Reduce ``frame[x, y]`` to at most ~``max_points`` rows keeping each bucket's min and max.

    Buckets are equal slices of the x range; within a bucket the rows holding the minimum and
    the maximum of ``y`` are kept in their original order, so a one-sample spike survives.

    >>> f = pl.DataFrame({"x": range(10_000), "v": [0.0] * 10_000})
    >>> f = f.with_columns(v=pl.when(pl.col("x") == 5_001).then(99.0).otherwise("v"))
    >>> out = minmax_downsample(f, "v", max_points=100)
    >>> out.height <= 100, out["v"].max()
    (True, 99.0)
    """
    data = frame.select(x, y).drop_nulls(y).sort(x)
    if data.height <= max_points:
        return data
    return data.select(pl.all().gather(_minmax_rows(data, y, x, max_points)))


def rows_downsample(
    frame: pl.DataFrame, key: str, *, x: str = "x", max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """Like :func:`minmax_downsample` but keeps whole rows, chosen by ``key``'s min and max.

    For stacked series (CPU us/sy/wa/id) whose columns must stay aligned on one x and sum to
    100: the busiest and idlest sample of each bucket are kept.
    """
    data = frame.sort(x)
    if data.height <= max_points:
        return data
    return data.select(pl.all().gather(_minmax_rows(data, key, x, max_points)))


def gap_breaks(frame: pl.DataFrame, *, x: str = "x", factor: float = 3.0) -> list[int]:
    """x positions just after each gap longer than ``factor`` × the median sample interval.

    A row with this x and null values makes plotly break the line instead of drawing a
    straight segment across a stretch without data (an interrupted capture).
    """
    xs = frame.select(pl.col(x).unique().sort()).to_series()
    if xs.len() < 3:
        return []
    diff = xs.diff()
    median = diff.median()
    if not median:
        return []
    limit = float(median) * factor  # type: ignore[arg-type]
    starts = xs.filter(diff.shift(-1) > limit)
    return [int(v) + 1 for v in starts.to_list()]


def _values(series: pl.Series, digits: int = 2) -> list[Any]:
    if series.dtype.is_float():
        series = series.fill_nan(None).round(digits)
    return series.to_list()


def line_trace(
    frame: pl.DataFrame,
    y: str,
    name: str,
    *,
    breaks: list[int] | None = None,
    scale: float = 1.0,
    **extra: Any,
) -> dict[str, Any]:
    """One downsampled ``scatter`` line trace of column ``y``."""
    data = minmax_downsample(frame.select("x", pl.col(y).cast(pl.Float64) * scale), y)
    if breaks:
        nulls = pl.DataFrame({"x": breaks, y: [None] * len(breaks)}, schema=data.schema)
        data = pl.concat([data, nulls]).sort("x")
    trace = {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": data["x"].to_list(),
        "y": _values(data[y]),
        "line": {"width": 1.2},
        "hovertemplate": "%{y}<extra>" + name + "</extra>",
    }
    trace.update(extra)
    return trace


def layout(
    title: str,
    x_range: tuple[int, int] | None,
    *,
    y_title: str = "",
    height: int = PANEL_HEIGHT,
    shapes: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The layout every panel shares: same margins, same x range, date axis in UTC."""
    xaxis: dict[str, Any] = {"type": "date", "showgrid": True, "hoverformat": "%H:%M:%S"}
    if x_range is not None:
        xaxis.update(range=list(x_range), autorange=False)
    out = {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 13}},
        "height": height,
        "margin": MARGIN,
        "xaxis": xaxis,
        "yaxis": {"title": {"text": y_title}, "fixedrange": True, "zeroline": False},
        "legend": {"x": 1.01, "y": 1, "xanchor": "left", "font": {"size": 10}},
        "hovermode": "x unified",
        "shapes": shapes or [],
        "paper_bgcolor": "white",
        "plot_bgcolor": "#fafafa",
    }
    out.update(extra)
    return out


def finding_shapes(findings: pl.DataFrame) -> list[dict[str, Any]]:
    """Shaded rectangles for finding windows (columns x0, x1 in epoch ms, severity)."""
    shapes = []
    for row in findings.iter_rows(named=True):
        x0 = row.get("x0")
        x1 = row.get("x1") or x0
        if x0 is None:
            continue
        color = SEVERITY_COLORS.get(str(row.get("severity") or "info"), "#1f77b4")
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": max(x1, x0 + 1000),
                "y0": 0,
                "y1": 1,
                "fillcolor": color,
                "opacity": 0.15,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    return shapes


def event_lines(events: pl.DataFrame, cap: int = MAX_EVENT_LINES) -> tuple[list[str], list[str]]:
    """Which event kinds get vertical lines: whole kinds, most important first, ≤ ``cap`` lines.

    Returns (kinds drawn, kinds left to the events strip because they did not fit).

    >>> ev = pl.DataFrame({"x": [1, 2, 3, 4], "kind": ["io_error"] * 3 + ["xid"]})
    >>> event_lines(ev, cap=2)
    (['xid'], ['io_error'])
    """
    rank = {k: i for i, k in enumerate(EVENT_COLORS)}
    counts = events.group_by("kind").len().rows()
    drawn, left, total = [], [], 0
    for kind, n in sorted(counts, key=lambda kn: (rank.get(kn[0], len(rank)), str(kn[0]))):
        if total + n <= cap:
            drawn.append(kind)
            total += n
        else:
            left.append(kind)
    return drawn, left


def event_shapes(events: pl.DataFrame, kinds: list[str]) -> list[dict[str, Any]]:
    """Thin vertical lines at dmesg events (columns x, kind) of the given kinds."""
    shapes = []
    for row in events.filter(pl.col("kind").is_in(kinds)).iter_rows(named=True):
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": row["x"],
                "x1": row["x"],
                "y0": 0,
                "y1": 1,
                "line": {"width": 1, "dash": "dot", "color": EVENT_COLORS.get(row["kind"], "#444")},
                "opacity": 0.6,
            }
        )
    return shapes


def cpu_figure(
    frame: pl.DataFrame, parts: list[tuple[str, str]], x_range: tuple[int, int] | None, **kw: Any
) -> Figure:
    """Stacked CPU time (percent). ``parts`` = [(column, label)], the idle column last."""
    busy = pl.sum_horizontal([pl.col(c).fill_null(0) for c, _ in parts[:-1]]).alias("_busy")
    data = rows_downsample(frame.with_columns(busy), "_busy")
    colors = ["#1f77b4", "#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e0e0e0"]
    traces = []
    for i, (col, label) in enumerate(parts):
        color = colors[-1] if i == len(parts) - 1 else colors[i % (len(colors) - 1)]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "stackgroup": "cpu",
                "name": label,
                "x": data["x"].to_list(),
                "y": _values(data[col].cast(pl.Float64)),
                "line": {"width": 0.5, "color": color},
                "hovertemplate": "%{y:.1f}%<extra>" + label + "</extra>",
            }
        )
    lay = layout("CPU time (%)", x_range, y_title="%", **kw)
    lay["yaxis"]["range"] = [0, 100]
    return {"data": traces, "layout": lay}


def lines_figure(
    frame: pl.DataFrame,
    series: list[tuple[str, str]],
    title: str,
    x_range: tuple[int, int] | None,
    *,
    y_title: str = "",
    scale: float = 1.0,
    **kw: Any,
) -> Figure:
    """Several columns of one frame as line traces. ``series`` = [(column, label)]."""
    breaks = gap_breaks(frame)
    traces = [line_trace(frame, c, label, breaks=breaks, scale=scale) for c, label in series]
    return {"data": traces, "layout": layout(title, x_range, y_title=y_title, **kw)}


def grouped_lines_figure(
    frame: pl.DataFrame,
    group: str,
    y: str,
    title: str,
    x_range: tuple[int, int] | None,
    *,
    y_title: str = "",
    scale: float = 1.0,
    **kw: Any,
) -> Figure:
    """One line per value of ``group`` (long frame: x, group, y)."""
    traces = []
    for (key,), part in frame.sort(group).group_by(group, maintain_order=True):
        part = part.sort("x")
        traces.append(line_trace(part, y, escape(str(key)), breaks=gap_breaks(part), scale=scale))
    return {"data": traces, "layout": layout(title, x_range, y_title=y_title, **kw)}


def events_figure(events: pl.DataFrame, x_range: tuple[int, int] | None, **kw: Any) -> Figure:
    """Classified kernel events as markers, one row per kind (columns x, kind, text).

    ``text`` must already be HTML-escaped: plotly renders a subset of HTML in hover labels.
    """
    traces = []
    for (kind,), part in events.sort("kind").group_by("kind", maintain_order=True):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": escape(str(kind)),
                "x": part["x"].to_list(),
                "y": [escape(str(kind))] * part.height,
                "text": part["text"].to_list(),
                "marker": {"symbol": "line-ns-open", "size": 14, "color": EVENT_COLORS.get(kind)},
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    kinds = events["kind"].n_unique() if events.height else 1
    lay = layout(
        "Kernel events (dmesg)", x_range, height=60 + 28 * kinds, hovermode="closest", **kw
    )
    lay["yaxis"].update(type="category", automargin=False)
    return {"data": traces, "layout": lay}


def heatmap_figure(
    frame: pl.DataFrame,
    row: str,
    value: str,
    title: str,
    x_range: tuple[int, int] | None,
    *,
    colorbar: str = "%",
    zmax: float | None = 100.0,
    **kw: Any,
) -> Figure:
    """A time × ``row`` heatmap from a long frame (x already bucketed, row, value)."""
    wide = frame.pivot(on=row, index="x", values=value, aggregate_function="max").sort("x")
    rows = sorted((c for c in wide.columns if c != "x"), key=_natural)
    # Whole percent is plenty for a colour; integers keep 128 CPUs × 1200 columns small.
    z = [wide[c].cast(pl.Float64).fill_nan(None).round(0).cast(pl.Int64).to_list() for c in rows]
    trace = {
        "type": "heatmap",
        "x": wide["x"].to_list(),
        "y": [escape(r) for r in rows],
        "z": z,
        "colorscale": "Viridis",
        "zmin": 0,
        "colorbar": {"title": {"text": colorbar}, "thickness": 10, "x": 1.01},
        "hovertemplate": "%{y}: %{z}<extra></extra>",
    }
    if zmax is not None:
        trace["zmax"] = zmax
    height = max(PANEL_HEIGHT, min(700, 60 + 4 * len(rows)))
    lay = layout(title, x_range, height=height, hovermode="closest", **kw)
    lay["yaxis"].update(type="category", title={"text": row})
    return {"data": [trace], "layout": lay}


def _natural(value: str) -> tuple[int, Any]:
    return (0, int(value)) if value.lstrip("-").isdigit() else (1, value)
