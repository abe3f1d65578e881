"""The fleet overview page: hosts ranked by divergence, heat strips, links to host findings.

``render_fleet_html(result, path)`` writes one self-contained HTML file (the vendored
plotly.js, ``report.css`` and ``report.js`` inlined, as in the single-host report; chart
data in one escaped JSON block). It draws the `analyzer.fleet.FleetResult` as computed:
the heat strips' matrices come from `analyzer.fleet_heat`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from analyzer.fleet import FleetResult, headline
from analyzer.fleet_detect import MIN_WINDOW_S
from analyzer.outputs import write_text
from reports.charts import layout
from reports.html import PLOTLY_JS, pack, plotly_version, script_json, static_text

ROW_PX = 16


@cache
def template_env() -> jinja2.Environment:
    """The autoescaping environment for the multi-bundle pages (fleet, diff)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = num
    env.filters["utc"] = utc
    return env


def num(value: Any, digits: int = 1) -> str:
    """A number for a table cell ('' for None/NaN)."""
    if value is None or isinstance(value, bool):
        return "" if value is None else str(value)
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def utc(value: Any, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime(fmt)
    return "" if value is None else str(value)


def page_assets() -> dict[str, Any]:
    """The inlined static files every page carries."""
    return {
        "plotly_js": Markup(static_text(PLOTLY_JS)),
        "plotly_version": plotly_version(),
        "report_css": Markup(static_text("static/report.css")),
        "report_js": Markup(static_text("static/report.js")),
    }


def _figure(
    strip: dict[str, Any], heat: dict[str, Any], x_range: tuple[int, int] | None
) -> dict[str, Any]:
    hosts = heat["hosts"]
    lower_worse = strip["direction"] < 0
    trace = {
        "type": "heatmap",
        "x": heat["x"],
        "y": [escape(h) for h in hosts],
        "z": strip["z"],
        "colorscale": "YlOrRd",
        "reversescale": not lower_worse,
        "zmin": 0,
        "colorbar": {"title": {"text": escape(strip["unit"])}, "thickness": 10, "x": 1.01},
        "hovertemplate": "%{y} %{x}: %{z}<extra>" + escape(strip["label"]) + "</extra>",
        "xgap": 0,
        "ygap": 1,
    }
    if strip["unit"] == "%":
        trace["zmax"] = 100
    if strip["metric"] == "outliers":
        trace["colorscale"] = [[0, "#f4f4f4"], [0.001, "#fdd49e"], [1, "#b30000"]]
        trace["reversescale"] = False
        trace["zmax"] = max(1, max((max(r) for r in strip["z"] if r), default=1))
    title = f"{strip['label']} ({strip['unit']}), worst value per {heat['step_s']} s"
    if strip["metric"] == "outliers":
        title = f"Metrics diverging from peers, per {heat['step_s']} s"
    lay = layout(
        title, x_range, height=max(140, min(1400, 70 + ROW_PX * len(hosts))), hovermode="closest"
    )
    lay["yaxis"].update(
        type="category", autorange="reversed", automargin=False, tickfont={"size": 10}
    )
    lay["margin"] = {**lay["margin"], "l": 150, "b": 45}
    return {"data": [trace], "layout": lay}


def render_fleet_html(result: FleetResult, out_path: Path) -> Path:
    """Write the fleet page for ``result``, atomically."""
    return write_text(Path(out_path), fleet_html_text(result, out_path), "fleet report")


def fleet_html_text(result: FleetResult, out_path: Path) -> str:
    """The fleet page as one HTML string (links to host reports relative to ``out_path``)."""
    heat = result.heat or {}
    x_range = None
    if result.span:
        x_range = (
            int(result.span[0].timestamp() * 1000),
            int(result.span[1].timestamp() * 1000) + 1000,
        )
    figures = {}
    strips = []
    for i, strip in enumerate(heat.get("strips", [])):
        fid = f"heat-{i}"
        figures[fid] = pack(_figure(strip, heat, x_range))
        strips.append({"id": fid, "label": strip["label"]})
    flagged = [h for h in result.hosts if h["clock_flags"]]
    out_path = Path(out_path)
    links = {}
    for h in result.hosts:
        if h.get("report"):
            try:
                links[h["host"]] = (
                    Path(h["report"]).resolve().relative_to(out_path.resolve().parent).as_posix()
                )
            except ValueError:
                links[h["host"]] = Path(h["report"]).resolve().as_uri()
    ctx = {
        "headline": headline(result),
        "result": result,
        "hosts": result.hosts,
        "top_score": result.hosts[0]["score"] if result.hosts else 0,
        "flagged": flagged,
        "strips": strips,
        "quiet": heat.get("quiet", []),
        "links": links,
        "dataset": str(result.dataset),
        "min_window_s": MIN_WINDOW_S,
        "span": result.span,
        "generated": datetime.now(UTC),
        "figures_json": script_json({"range": x_range, "shapes": [], "figures": figures}),
        **page_assets(),
    }
    return template_env().get_template("fleet.html.j2").render(**ctx)
