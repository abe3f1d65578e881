"""Kernel events and finding windows on the shared time axis (plotly dicts, pure functions).

- :func:`events_figure`: the kernel-events strip, one row of ticks per event kind.
- :func:`finding_shapes` / :func:`event_shapes`: shaded finding windows and dotted event lines
  that the page script adds to every linked chart (:func:`event_lines` chooses which kinds
  fit under the cap).
"""

from __future__ import annotations

from html import escape, unescape
from typing import Any

import polars as pl

from reports.charts import MARGIN, SEVERITY_COLORS, Figure, layout

# In order of importance: when there are too many events for vertical lines on every chart,
# the most important kinds get them first (the events strip always shows all of them).
EVENT_COLORS = {
    "oom_kill": "#d62728",
    "xid": "#ff7f0e",
    "gpu_fallen_off_bus": "#ff7f0e",
    "hung_task": "#9467bd",
    "soft_lockup": "#17becf",
    "oom_invoked": "#e377c2",
    "segfault": "#7f7f7f",
    "io_error": "#8c564b",
}
MAX_EVENT_LINES = 150
MAX_KIND_CHARS = 24  # a kind's label in the events strip's right margin (full name on hover)


def events_figure(events: pl.DataFrame, x_range: tuple[int, int] | None, **kw: Any) -> Figure:
    """Classified kernel events as ticks, one row per kind (columns x, kind, text).

    Each kind is ONE line trace of vertical ticks (x, x, gap) rather than one marker per
    event: thousands of events stay one SVG path. ``text`` must already be HTML-escaped
    (plotly renders a subset of HTML in hover labels).

    The kinds label their rows in the right margin, as the timeline's lanes (the left margin
    of 70 px, the same on every panel, clipped ``oom_invoked``); a kind longer than
    :data:`MAX_KIND_CHARS` is shortened with "…" (its hover text names it in full).
    """
    traces = []
    kinds = []
    for (kind,), part in events.sort("kind", "x").group_by("kind", maintain_order=True):
        i = len(kinds)
        kinds.append(escape(str(kind)))
        xs, ys, texts = [], [], []
        for x, text in zip(part["x"].to_list(), part["text"].to_list(), strict=True):
            xs += [x, x, None]
            ys += [i - 0.35, i + 0.35, None]
            texts += [text, text, None]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": kinds[-1],
                "x": xs,
                "y": ys,
                "text": texts,
                "line": {"width": 1.5, "color": EVENT_COLORS.get(kind, "#444")},
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    lay = layout(
        "Kernel events (dmesg)",
        x_range,
        height=MARGIN["t"] + MARGIN["b"] + 30 + 28 * max(len(kinds), 1),
        hovermode="closest",
        **kw,
    )
    lay["yaxis"].update(
        tickvals=list(range(len(kinds))),
        ticktext=[_short_kind(k) for k in kinds],
        range=[-0.6, len(kinds) - 0.4],
        automargin=False,
        side="right",
        tickfont={"size": 10},
    )
    lay["showlegend"] = False  # the axis names each row
    return {"data": traces, "layout": lay}


def _short_kind(kind: str) -> str:
    """``kind`` (escaped) cut to :data:`MAX_KIND_CHARS` characters.

    >>> _short_kind("gpu_fallen_off_bus"), _short_kind("x" * 30)
    ('gpu_fallen_off_bus', 'xxxxxxxxxxxxxxxxxxxxxxx…')
    """
    raw = unescape(kind)
    if len(raw) <= MAX_KIND_CHARS:
        return kind
    return escape(raw[: MAX_KIND_CHARS - 1]) + "…"


def finding_shapes(findings: pl.DataFrame) -> list[dict[str, Any]]:
    """Shaded rectangles for finding windows (columns x0, x1 in epoch ms, severity)."""
    shapes = []
    for row in findings.iter_rows(named=True):
        x0 = row.get("x0")
        x1 = row.get("x1") or x0
        if x0 is None:
            continue
        color = SEVERITY_COLORS.get(str(row.get("severity") or "info"), "#1f77b4")
        # critical/major windows shade the panel; minor/info ones are a strip along its
        # top, so a long minor finding does not tint every chart of the page
        loud = row.get("severity") in ("critical", "major")
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": max(x1, x0 + 1000),
                "y0": 0 if loud else 0.96,
                "y1": 1,
                "fillcolor": color,
                "opacity": 0.15 if loud else 0.6,
                "line": {"width": 0},
                "layer": "below" if loud else "above",  # a strip is seen over stacked areas
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


def trigger_shape(x: int, label: str) -> dict[str, Any]:
    """A solid red vertical line at the flight recorder's trigger time (epoch ms).

    Plotly renders label text as HTML-ish markup, so the label is escaped.
    """
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"width": 2, "color": "#c62828"},
        "label": {"text": escape(label), "textposition": "end", "font": {"size": 10}},
    }
