"""Plotly figures about findings: the swimlane timeline and each card's evidence chart.

Pure functions (dicts in, figure dicts out), like :mod:`reports.charts`. Strings from the
store are HTML-escaped here because plotly renders a subset of HTML in labels.

- :func:`swimlanes_figure`: one lane per finding key, one bar per finding window, coloured by
  severity; it shares the report's time axis, and clicking a bar zooms every panel
  (``customdata`` = [x0, x1, finding id, hover text]). A bar is drawn at least
  :data:`MIN_BAR_SHARE` of the x range wide (centred on its window), so a 5 s finding of a
  2-hour capture can be seen and clicked; its hover and the zoom use the real window, and
  the page script keeps the minimum at :data:`MIN_BAR_PX` px of whatever range is shown.
- :func:`evidence_figure`: the signals of one finding around its window, the window shaded
  and each signal's baseline drawn as a dashed line with its value.
"""

from __future__ import annotations

from html import escape
from typing import Any

import polars as pl

from reports.charts import MARGIN, SEVERITY_COLORS, Figure, Row, layout, line_trace, rows_figure

SEVERITIES = ["critical", "major", "minor", "info"]
LANE_HEIGHT = 24
MAX_BARS = 3000
MIN_BAR_PX = 8  # report.js: the narrowest bar drawn, in pixels of the current x range
MIN_BAR_SHARE = 0.007  # the same before the first zoom: ≈ 8 px of a 1 130 px plot area


def bar_span(x0: int, x1: int, min_width: float) -> tuple[int, int]:
    """(base, width) of a bar drawn at least ``min_width`` wide, centred on [x0, x1].

    >>> bar_span(10_000, 15_000, 50_000), bar_span(0, 90_000, 50_000)
    ((-12500, 50000), (0, 90000))
    """
    real = max(x1 - x0, 0)
    if real >= min_width:
        return x0, real
    width = round(min_width)
    return x0 - (width - real) // 2, width


def swimlanes_figure(findings: list[dict[str, Any]], x_range: tuple[int, int] | None) -> Figure:
    """Findings as bars on lanes (``key``), most important lane on top.

    Each dict needs ``x0``/``x1`` (epoch ms), ``key``, ``severity``, ``finding_id`` and
    ``hover`` (plain text; escaped here). Findings come in rank order.
    """
    rows = [f for f in findings if f.get("x0") is not None][:MAX_BARS]
    span = (x_range[1] - x_range[0]) if x_range else 0
    min_width = max(1000.0, MIN_BAR_SHARE * span)
    lanes: list[str] = []
    for f in rows:
        lane = escape(str(f.get("key") or f.get("kind") or "?"))
        if lane not in lanes:
            lanes.append(lane)
    traces = []
    for sev in [*SEVERITIES, "other"]:
        part = [
            f
            for f in rows
            if (f.get("severity") if f.get("severity") in SEVERITIES else "other") == sev
        ]
        if not part:
            continue
        color = SEVERITY_COLORS.get(sev, "#7f7f7f")
        spans = [bar_span(int(f["x0"]), int(f.get("x1") or f["x0"]), min_width) for f in part]
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": sev,
                "y": [escape(str(f.get("key") or f.get("kind") or "?")) for f in part],
                "base": [b for b, _ in spans],
                "x": [w for _, w in spans],
                "customdata": [
                    [
                        int(f["x0"]),
                        int(f.get("x1") or f["x0"]),
                        f.get("finding_id"),
                        escape(str(f.get("hover") or "")),
                    ]
                    for f in part
                ],
                "marker": {"color": color, "line": {"color": color, "width": 1.5}},
                "hovertemplate": "%{customdata[3]}<extra></extra>",
            }
        )
    lay = layout(
        "", x_range, height=MARGIN["t"] + MARGIN["b"] + 20 + LANE_HEIGHT * max(len(lanes), 1)
    )
    lay.update(
        hovermode="closest",
        barmode="overlay",
        bargap=0.35,
        showlegend=True,
        legend={
            "orientation": "h",
            "x": 0,
            "y": 1.02,
            "xanchor": "left",
            "yanchor": "bottom",
            "font": {"size": 10},
        },
    )
    lay["yaxis"].update(
        type="category",
        categoryorder="array",
        categoryarray=lanes,
        autorange="reversed",
        side="right",
        tickfont={"size": 10},
    )
    return {"data": traces, "layout": lay}


def evidence_figure(
    series: list[dict[str, Any]], window: tuple[int, int], view: tuple[int, int]
) -> Figure:
    """One row per signal around a finding window.

    ``series`` items: ``label`` (text, escaped here), ``frame`` (x, v), ``baseline``
    (float or None) and ``unit``. ``window`` is shaded; ``view`` is the x range shown.
    """
    rows = []
    for s in series:
        frame: pl.DataFrame = s["frame"]
        name = escape(str(s["label"]))
        trace = line_trace(
            frame, "v", name, showlegend=False, line={"width": 1.5, "color": "#1f5fa8"}
        )
        rows.append(Row(f"{s['label']} ({s['unit']})" if s.get("unit") else s["label"], [trace]))
    fig = rows_figure(rows, "", view)
    lay = fig["layout"]
    lay["hovermode"] = "x"
    lay["showlegend"] = False
    lay["margin"] = {**MARGIN, "r": 30}
    shapes: list[dict[str, Any]] = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": window[0],
            "x1": max(window[1], window[0] + 1000),
            "y0": 0,
            "y1": 1,
            "fillcolor": "#ff7f0e",
            "opacity": 0.15,
            "line": {"width": 0},
            "layer": "below",
        }
    ]
    for i, s in enumerate(series):
        base = s.get("baseline")
        if base is None:
            continue
        ref = "y" if i == 0 else f"y{i + 1}"
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": ref,
                "y0": base,
                "y1": base,
                "line": {"color": "#2ca02c", "width": 1.5, "dash": "dash"},
            }
        )
        lay["annotations"].append(
            {
                "text": escape(f"baseline {_short(base)}"),
                "xref": "paper",
                "x": 1,
                "xanchor": "right",
                "yref": ref,
                "y": base,
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 10, "color": "#2ca02c"},
            }
        )
    lay["shapes"] = shapes
    return fig


def _short(value: float) -> str:
    """A chart label: k/M/G by powers of 10³ from 10 000 on; small values keep two decimals.

    >>> [_short(x) for x in (44547.0, 1234567.0, 2.5e9, 9999.0, 0.125, 0.0, -12000.0)]
    ['44.5k', '1.23M', '2.5G', '9999', '0.12', '0', '-12k']
    """
    v = abs(value)
    if v >= 1e4:  # 1e3..1e4 stay plain: '9999', not '10k'
        for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if v >= div:
                return f"{value / div:.3g}{suffix}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if v else "0"
