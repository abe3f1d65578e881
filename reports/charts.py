"""Plotly figures for the HTML report's time-aligned panels, as plain dicts.

Pure functions: polars frames in, ``{"data": [...], "layout": {...}}`` out; no store access,
no I/O. Every frame carries ``x`` in epoch milliseconds (UTC); the page draws each dict with
``Plotly.newPlot`` and links every panel's ``xaxis`` (one time axis for the whole report).

Strings that come from data (device names, event text) are HTML-escaped before they reach
plotly, which renders a subset of HTML (including links) in names and hover labels.

Rules from PERFORMANCE-NOTES: x as numbers, long series reduced with min/max per bucket
(:mod:`reports.downsample`), no WebGL traces, per-CPU data as one heatmap. Every panel has
the same left/right margins so the plot areas line up vertically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

import polars as pl

from reports.downsample import MAX_POINTS, gap_breaks, minmax_downsample, rows_downsample

HEATMAP_COLUMNS = 900
PANEL_HEIGHT = 230
ROW_HEIGHT = 110
ROW_GAP = 22
# Fixed margins so that every panel's plot area starts and ends at the same pixel: the
# x axes line up vertically and linked zoom reads as one timeline. 42 px below: the date
# under the first time tick ("May 1, 2024") fits instead of being cut at the bottom.
MARGIN = {"l": 70, "r": 170, "t": 30, "b": 42, "autoexpand": False}
PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
    "#7b4173", "#3182bd",
]  # fmt: skip
SEVERITY_COLORS = {
    "critical": "#d62728",
    "major": "#ff7f0e",
    "minor": "#bcbd22",
    "info": "#1f77b4",
}

Figure = dict[str, Any]


@dataclass
class Row:
    """One sub-chart of a multi-row panel: its y-axis label and its traces."""

    label: str
    traces: list[dict[str, Any]] = field(default_factory=list)
    y_range: list[float] | None = None
    height: int = ROW_HEIGHT  # px of plot area (a heatmap of many devices gets more)


def _values(series: pl.Series, digits: int = 4) -> list[Any]:
    """Values for JSON: floats to ``digits`` significant digits (plenty for a chart).

    >>> _values(pl.Series([1953.125, 0.012345, 99.99, None, float("nan")]))
    [1953.0, 0.01235, 99.99, None, None]
    """
    if series.dtype.is_float():
        series = series.fill_nan(None).round_sig_figs(digits)
    return series.to_list()


def line_trace(
    frame: pl.DataFrame,
    y: str,
    name: str,
    *,
    breaks: list[int] | None = None,
    scale: float = 1.0,
    max_points: int = MAX_POINTS,
    **extra: Any,
) -> dict[str, Any]:
    """One downsampled ``scatter`` line trace of column ``y`` (``name`` already escaped)."""
    data = minmax_downsample(
        frame.select("x", pl.col(y).cast(pl.Float64) * scale), y, max_points=max_points
    )
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


def rows_figure(rows: list[Row], title: str, x_range: tuple[int, int] | None) -> Figure:
    """Several sub-charts stacked on one shared time axis (``x``), one y axis per row.

    A heatmap row's colour bar stands beside that row only (in the right margin).
    """
    n = len(rows)
    plot_h = sum(r.height for r in rows) + (n - 1) * ROW_GAP
    lay = layout(title, x_range, height=plot_h + MARGIN["t"] + MARGIN["b"])
    lay["xaxis"]["anchor"] = "y" if n == 1 else f"y{n}"
    annotations = []
    data = []
    used = 0
    for i, row in enumerate(rows):
        top = 1 - used / plot_h
        bottom = max(top - row.height / plot_h, 0.0)
        used += row.height + ROW_GAP
        name = "yaxis" if i == 0 else f"yaxis{i + 1}"
        axis: dict[str, Any] = {
            "domain": [round(bottom, 4), round(top, 4)],
            "anchor": "x",
            "fixedrange": True,
            "zeroline": False,
            "tickfont": {"size": 10},
        }
        legend = "legend" if i == 0 else f"legend{i + 1}"
        lay[legend] = {"x": 1.01, "y": top, "xanchor": "left", "yanchor": "top", "font": {"size": 10},
                       "tracegroupgap": 0}  # fmt: skip
        if all(t.get("type") == "scatter" for t in row.traces):
            axis["rangemode"] = "tozero"  # rates, sizes, percentages: never below zero
        if row.y_range is not None:
            axis["range"] = row.y_range
        lay[name] = axis
        annotations.append(
            {
                "text": escape(row.label),
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": top,
                "xanchor": "left",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 11, "color": "#444"},
            }
        )
        ref = "y" if i == 0 else f"y{i + 1}"
        for t in row.traces:
            t = {**t, "xaxis": "x", "yaxis": ref, "legend": legend}
            if t.get("type") == "heatmap" and "colorbar" in t:
                bar = {"y": round((top + bottom) / 2, 4), "yanchor": "middle"}
                t["colorbar"] = {**t["colorbar"], **bar, "len": round(top - bottom, 4)}
            data.append(t)
    lay["annotations"] = annotations
    lay["title"]["text"] = ""
    return {"data": data, "layout": lay}


def entity_traces(
    frame: pl.DataFrame,
    group: str,
    y: str,
    colors: dict[str, str],
    *,
    first_row: bool,
    scale: float = 1.0,
    max_points: int = MAX_POINTS,
    min_gap: int = 0,
) -> list[dict[str, Any]]:
    """One line per value of ``group`` (long frame x, group, y), coloured per entity.

    Each entity keeps its colour in every row (``colors``) and one legend entry.
    """
    traces = []
    for (key,), part in frame.sort(group).group_by(group, maintain_order=True):
        part = part.sort("x")
        name = escape(str(key))
        traces.append(
            line_trace(
                part,
                y,
                name,
                breaks=gap_breaks(part, min_gap=min_gap),
                scale=scale,
                max_points=max_points,
                legendgroup=name,
                showlegend=first_row,
                line={"width": 1.2, "color": colors.get(str(key), "#444")},
            )
        )
    return traces


def cpu_figure(
    frame: pl.DataFrame, parts: list[tuple[str, str]], x_range: tuple[int, int] | None, **kw: Any
) -> Figure:
    """Stacked CPU time (percent). ``parts`` = [(column, label)], the idle column last."""
    busy = pl.sum_horizontal([pl.col(c).fill_null(0) for c, _ in parts[:-1]]).alias("_busy")
    data = rows_downsample(frame.with_columns(busy), "_busy")
    colors = ["#1f77b4", "#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#17becf", "#e0e0e0"]
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


def heatmap_trace(
    frame: pl.DataFrame,
    row: str,
    value: str,
    *,
    colorbar: str = "%",
    zmax: float | None = 100.0,
    order: list[str] | None = None,
    hover: str = "%{y}: %{z}",
    absent_is_zero: bool = False,
) -> dict[str, Any]:
    """A time × ``row`` heatmap trace from a long frame (x already bucketed, row, value).

    ``absent_is_zero``: a row missing at a time that has other rows counts 0 (a histogram
    prints only its non-empty buckets), instead of a hole.
    """
    wide = frame.pivot(on=row, index="x", values=value, aggregate_function="max").sort("x")
    if absent_is_zero:
        wide = wide.fill_null(0)
    present = [c for c in wide.columns if c != "x"]
    rows = [r for r in order if r in present] if order else sorted(present, key=_natural)
    # Whole numbers are plenty for a colour; integers keep 128 CPUs × 1200 columns small.
    z = [wide[c].cast(pl.Float64).fill_nan(None).round(0).cast(pl.Int64).to_list() for c in rows]
    trace = {
        "type": "heatmap",
        "x": wide["x"].to_list(),
        "y": [escape(r) for r in rows],
        "z": z,
        "colorscale": "Viridis",
        "zmin": 0,
        "colorbar": {"title": {"text": colorbar}, "thickness": 10, "x": 1.01, "len": 1},
        "hovertemplate": hover + "<extra></extra>",
    }
    if zmax is not None:
        trace["zmax"] = zmax
    return trace


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
    trace = heatmap_trace(frame, row, value, colorbar=colorbar, zmax=zmax)
    height = max(PANEL_HEIGHT, min(700, MARGIN["t"] + MARGIN["b"] + 4 * len(trace["y"])))
    lay = layout(title, x_range, height=height, hovermode="closest", **kw)
    lay["yaxis"].update(type="category", title={"text": row})
    return {"data": [trace], "layout": lay}


def _natural(value: str) -> tuple[int, Any]:
    return (0, int(value)) if value.lstrip("-").isdigit() else (1, value)
