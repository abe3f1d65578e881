"""The before/after page of `hindsight diff`: headline, distributions, overlaid charts.

``render_diff_html(result, path)`` writes one self-contained HTML file: the headline; when
both captures have an application symptom (`analyzer.diff_symptom`) first a "Symptom"
section (per symptom its p50/p99/mean before → after, a chart of its per-second values
before and after — the same traces and time axis as the signals' charts — the causes gone
or new and the configuration changes of their mechanisms) with the host configuration
changes right under it; then a table of every key signal's p50/p95/p99/max/σ before →
after, charts of each signal that both captures have with the two captures overlaid on
*seconds since capture start* (min/max downsampled, so spikes survive), the latency
histograms side by side, the findings comparison and (without a symptom) the host
configuration changes. Same assets and escaping as the host
report (`reports.fleet_html.page_assets`, `reports.html.script_json`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import polars as pl

from analyzer.diff import DiffResult
from analyzer.outputs import write_text
from reports.charts import MARGIN, minmax_downsample
from reports.diff_text import signal_rows, symptom_view
from reports.fleet_html import page_assets, template_env
from reports.html import script_json

COLORS = {"before": "#7f7f7f", "after": "#1f77b4"}
CHART_SIGNALS = (
    "gpu_util_mean_pct", "throttled_pct", "cpu_busy_pct", "runq", "psi_cpu_some_pct",
    "psi_io_some_pct", "psi_mem_some_pct", "disk_w_await_max_ms", "runqlat_p99_us",
    "biolat_p99_us", "net_err_per_s",
)  # fmt: skip


def _trace(frame: pl.DataFrame, column: str, side: str) -> dict[str, Any]:
    data = minmax_downsample(frame, column, x="x")
    ys = data[column].round(2).to_list()
    return {
        "type": "scatter", "mode": "lines", "name": side, "x": data["x"].to_list(), "y": ys,
        "line": {"width": 1.3, "color": COLORS[side]},
        "hovertemplate": "%{y}<extra>" + side + "</extra>",
    }  # fmt: skip


def _layout(title: str, unit: str, aligned: int) -> dict[str, Any]:
    return {
        "title": {"text": escape(title), "x": 0, "xanchor": "left", "font": {"size": 13}},
        "height": 220,
        "margin": MARGIN,
        "xaxis": {
            "title": {"text": "seconds since capture start"},
            "range": [0, max(1, aligned)],
            "zeroline": False,
        },
        "yaxis": {"title": {"text": escape(unit)}, "fixedrange": True, "zeroline": False},
        "legend": {"x": 1.01, "y": 1, "xanchor": "left", "font": {"size": 10}},
        "hovermode": "x unified",
        "shapes": [],
        "paper_bgcolor": "white",
        "plot_bgcolor": "#fafafa",
    }


def _hist_figure(h: dict[str, Any]) -> dict[str, Any]:
    traces = []
    for side in ("before", "after"):
        d = h[side]
        if d is None:
            continue
        labels = [
            f"<{b['high_us']:g}" if b["high_us"] is not None else f"≥{b['low_us']:g}"
            for b in d["buckets"]
        ]
        share = [round(100.0 * b["count"] / d["total"], 2) for b in d["buckets"]]
        traces.append(
            {"type": "bar", "name": side, "x": labels, "y": share, "marker": {"color": COLORS[side]},
             "hovertemplate": "%{x} µs: %{y} %<extra>" + side + "</extra>"}
        )  # fmt: skip
    lay = _layout(f"{h['label']} histogram (share of events per bucket, µs)", "%", 1)
    lay["xaxis"] = {"type": "category", "title": {"text": "µs (bucket upper bound)"}}
    lay["barmode"] = "group"
    lay["hovermode"] = "closest"
    return {"data": traces, "layout": lay}


def render_diff_html(result: DiffResult, out_path: Path) -> Path:
    """Write the diff page for ``result``, atomically."""
    return write_text(Path(out_path), diff_html_text(result), "diff page")


def diff_html_text(result: DiffResult) -> str:
    """The diff page for ``result`` as one HTML string."""
    figures: dict[str, Any] = {}
    charts = []
    stats = {s["signal"]: s for s in result.stats}
    for col in CHART_SIGNALS:
        s = stats.get(col)
        series = result.series.get(col, {})
        if s is None or not (s["before"]["n"] or s["after"]["n"]):
            continue
        if col != "gpu_util_mean_pct" and s["verdict"] not in ("better", "worse"):
            continue
        traces = [
            _trace(series[side], col, side)
            for side in ("before", "after")
            if side in series and series[side].height
        ]
        fid = f"d-{col}"
        figures[fid] = {"data": traces, "layout": _layout(s["label"], s["unit"], result.aligned_s)}
        charts.append(fid)
    symptoms = symptom_view(result)
    for v in symptoms:  # the symptom's per-second values, charted as the signals are
        series = result.series.get(f"symptom:{v['index']}", {})
        traces = [
            _trace(series[side], "value", side)
            for side in ("before", "after")
            if side in series and series[side].height
        ]
        fid = f"s-{v['index']}"
        v["chart"] = fid if traces else None
        if traces:
            figures[fid] = {
                "data": traces,
                "layout": _layout(f"{v['title']} per second", v["unit"], result.aligned_s),
            }
    hists = {}
    for h in result.histograms:  # category x axes: drawn apart from the linked time charts
        fid = f"h-{h['name']}"
        hists[fid] = _hist_figure(h)
        charts.append(fid)
    ctx = {
        "r": result,
        "signals": signal_rows(result),
        "symptoms": symptoms,
        "symptom_unmatched": [
            (side, u)
            for side in ("before", "after")
            for u in (result.symptoms or {}).get(f"only_{side}") or []
        ],
        "charts": charts,
        "generated": datetime.now(UTC),
        "figures_json": script_json(
            {"range": [0, max(1, result.aligned_s)], "shapes": [], "figures": figures}
        ),
        "hist_json": script_json(hists),
        **page_assets(),
    }
    return template_env().get_template("diff.html.j2").render(**ctx)
