"""Render the self-contained HTML incident report from a loaded DuckDB store.

``render_html(con, out_path, role=...)`` is the public API. The page is one file: the
vendored plotly.js partial bundle, the CSS and the page script are inlined once; chart data
travels as one JSON block (``<script type="application/json">``) with ``<``, ``>``, ``&``
and U+2028/9 escaped, so no string from a bundle can close the script element. Templates are
autoescaped; the only ``Markup`` values are the package's own static files, that escaped
JSON, and :func:`code_spans` output (escaped text with ``<code>`` around backtick spans).

Sections (one template each, see ``templates/`` and docs/report.md): header, symptom
(only when the bundle has an application series), summary,
timeline, panels, stacks (flame graph of the sampled stacks, `reports.flame`), findings,
audit, coverage, appendix.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import polars as pl
from markupsafe import Markup, escape

from analyzer.audit import run_audit
from reports import charts_events, flame
from reports.charts_findings import swimlanes_figure
from reports.coverage import coverage_context, manifest_rows, reproduce
from reports.findings_view import build_cards
from reports.incidents import (
    SEVERITY_ORDER,
    detector_status,
    load_findings,
    load_incidents,
    verdict,
)
from reports.panel_registry import all_panels
from reports.panels import Frame
from reports.panels_host import events_frame
from reports.queries import Store, clip
from reports.symptom_view import symptom_context
from reports.timefmt import TimeFormatter

PLOTLY_JS = "static/plotly/plotly-cartesian.min.js"
MAX_EVENT_ROWS = 500
BUNDLE_COLUMNS = [
    "name", "source_path", "host", "kernel", "os", "arch", "cpus", "start_utc", "end_utc",
    "interval_s", "timezone", "capture_version", "format_version", "manifest_present",
    "interrupted", "refused_members", "notes", "analyzer_version", "analyzed_at",
    "history_start_utc", "trigger", "trigger_utc",
]  # fmt: skip
EVENT_COLUMNS = ["ts", "kind", "level", "pid", "comm", "device", "xid_code", "memcg", "message"]


def render_html(con: duckdb.DuckDBPyConnection, out_path: Path, *, role: str = "auto") -> Path:
    """Write the HTML report for the store behind ``con`` to ``out_path``; return the path."""
    out_path = Path(out_path)
    html = render_string(con, role=role)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(html, encoding="utf-8")
    return out_path


def render_string(con: duckdb.DuckDBPyConnection, *, role: str = "auto") -> str:
    """The report as one HTML string (what :func:`render_html` writes)."""
    return _env().get_template("report.html.j2").render(**build_context(Store(con), role=role))


def script_json(value: Any) -> Markup:
    """JSON safe to place inside a ``<script>`` element.

    >>> str(script_json({"m": "</script><!-- & \\u2028"}))
    '{"m":"\\\\u003c/script\\\\u003e\\\\u003c!-- \\\\u0026 \\\\u2028"}'
    """
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or infinity somewhere: JSON has no such values, send null
        text = json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=False)
    for raw, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(raw, esc)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)  # every <, >, & escaped above: cannot end the script element


def pack(figure: dict[str, Any]) -> dict[str, Any]:
    """Shrink a figure for transport: integer x arrays become ``xd`` (first value, then deltas).

    Epoch-ms x values are 13 digits; the deltas of a 1 s series are 4–5. ``report.js`` turns
    ``xd`` back into ``x`` before plotting.

    >>> pack({"data": [{"x": [1000, 2000, 2500], "y": [1, 2, 3]}], "layout": {}})["data"]
    [{'y': [1, 2, 3], 'xd': [1000, 1000, 500]}]
    """
    traces = []
    for trace in figure.get("data", []):
        xs = trace.get("x")
        if (
            trace.get("type", "scatter") in ("scatter", "heatmap")
            and isinstance(xs, list)
            and xs
            and all(type(v) is int for v in xs)
        ):
            trace = {k: v for k, v in trace.items() if k != "x"}
            trace["xd"] = [xs[0]] + [b - a for a, b in pairwise(xs)]
        traces.append(trace)
    return {**figure, "data": traces}


_CODE = re.compile(r"`([^`\n]+)`")


def code_spans(text: Any) -> Markup:
    """Escape ``text`` and show its `backtick` spans as ``<code>``.

    >>> str(code_spans("run `sysctl -w a=1` <now>"))
    'run <code>sysctl -w a=1</code> &lt;now&gt;'
    """
    out, last = [], 0
    raw = "" if text is None else str(text)
    for m in _CODE.finditer(raw):
        out.append(str(escape(raw[last : m.start()])))
        out.append(f"<code>{escape(m.group(1))}</code>")
        last = m.end()
    out.append(str(escape(raw[last:])))
    return Markup("".join(out))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["code"] = code_spans
    return env


@cache
def static_text(name: str) -> str:
    """A file shipped in ``reports/static`` (asserted free of ``</script`` / ``</style``)."""
    text = resources.files("reports").joinpath(name).read_text(encoding="utf-8")
    lowered = text.lower()
    if "</script" in lowered or "</style" in lowered:
        raise ValueError(f"{name} cannot be inlined: it contains a closing tag")
    return text


def plotly_version() -> str:
    return static_text("static/plotly/VERSION").strip()


def _num(value: Any, digits: int = 1) -> str:
    if value is None or isinstance(value, bool):
        return "" if value is None else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if digits == 1 and abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _x_range(store: Store, meta: dict[str, Any]) -> tuple[int, int] | None:
    start, end = meta.get("start_utc"), meta.get("end_utc")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        return (start, end)
    spans = []
    for table in ("signals", "vmstat", "mpstat_cpu", "psi", "iostat_device", "gpu_dmon", "dmesg"):
        if store.usable(table, "ts"):
            spans.append(f"SELECT min(epoch_ms(ts)) AS lo, max(epoch_ms(ts)) AS hi FROM {table}")
    if not spans:
        return None
    lo, hi = store.con.sql(
        f"SELECT min(lo), max(hi) FROM ({' UNION ALL '.join(spans)})"
    ).fetchall()[0]
    if lo is None or hi is None or hi <= lo:
        return None
    return (int(lo), int(hi))


def _trigger(meta: dict[str, Any], tf: TimeFormatter) -> dict[str, Any] | None:
    """The flight recorder's trigger (manifest ``trigger``/``trigger_utc``), if this bundle
    was cut by one: where to draw the line and how to name it."""
    at = meta.get("trigger_utc")
    if not isinstance(at, int):
        return None
    what = str(meta.get("trigger") or "manual cut")
    return {"x": at, "what": what, "time": tf.utc(at), "label": f"trigger: {what}"}


def _centred(x_range: tuple[int, int] | None, at: int) -> tuple[int, int]:
    """A view centred on ``at`` that still holds the whole capture."""
    if x_range is None:
        return (at - 60_000, at + 60_000)
    half = max(at - x_range[0], x_range[1] - at, 1)
    return (at - half, at + half)


def gpu_summary(store: Store) -> str:
    """``'8 × NVIDIA H100 80GB HBM3 (driver 550.54.15)'``, or what is known."""
    if store.usable("gpu_info", "gpu", "name"):
        drv = (
            "any_value(driver_version)" if "driver_version" in store.columns("gpu_info") else "NULL"
        )
        rows = store.con.sql(
            f"SELECT name, count(DISTINCT gpu), {drv} FROM gpu_info WHERE gpu IS NOT NULL GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
        parts = [f"{n} × {name}" + (f" (driver {d})" if d else "") for name, n, d in rows if name]
        if parts:
            return "; ".join(parts)
    if store.usable("host_config", "key", "value"):
        names = store.con.sql(
            "SELECT value, count(DISTINCT key) FROM host_config WHERE key LIKE 'nvidia.gpu%.name' GROUP BY value"
        ).fetchall()
        if names:
            return "; ".join(f"{n} × {v}" for v, n in names)
    if store.usable("gpu_dmon", "gpu"):
        n = store.scalar("SELECT count(DISTINCT gpu) FROM gpu_dmon")
        return f"{n} GPU{'s' if n != 1 else ''} (model not captured)"
    return "none seen"


def events_table(store: Store, tf: TimeFormatter) -> dict[str, Any]:
    if not store.usable("dmesg", "kind"):
        return {"rows": [], "total": 0, "columns": [], "local": None}
    total = store.scalar("SELECT count(*) FROM dmesg WHERE kind IS NOT NULL") or 0
    order = "ts" if "ts" in store.columns("dmesg") else ""
    rows = store.records(
        "dmesg", EVENT_COLUMNS, where="kind IS NOT NULL", order=order, limit=MAX_EVENT_ROWS
    )
    extra = [c for c in EVENT_COLUMNS[2:-1] if any(r[c] is not None for r in rows)]
    for r in rows:
        r["time"] = tf.utc(r["ts"])
        r["local"] = tf.local(r["ts"])
        r["message"] = clip(r["message"], "dmesg")
    local = tf.zone_name if tf.zone is not None else None
    return {"rows": rows, "total": int(total), "columns": extra, "local": local}


def build_context(store: Store, *, role: str = "auto") -> dict[str, Any]:
    """Everything the templates need, gathered from the store."""
    meta = dict.fromkeys(BUNDLE_COLUMNS) | store.bundle()
    tf = TimeFormatter(meta.get("timezone"))
    x_range = _x_range(store, meta)
    findings = load_findings(store, tf)
    incidents = load_incidents(store, findings, tf)
    detectors = detector_status(store)
    views, evidence = build_cards(store, incidents, tf)
    anchors = {fid: card["anchor"] for v in views for card in v["cards"] for fid in card["ids"]}
    events = events_frame(store)
    frame = pl.DataFrame(
        {
            "x0": [f["x0"] for f in findings],
            "x1": [f["x1"] for f in findings],
            "severity": [f["severity"] for f in findings],
        },
        schema={"x0": pl.Int64, "x1": pl.Int64, "severity": pl.String},
    )
    shapes = charts_events.finding_shapes(frame)
    drawn, left = charts_events.event_lines(events)
    shapes += charts_events.event_shapes(events, drawn)
    trigger = _trigger(meta, tf)
    if trigger is not None:
        shapes.append(charts_events.trigger_shape(trigger["x"], trigger["label"]))
        x_range = _centred(x_range, trigger["x"])
    panels = all_panels(store, events, Frame(x_range))
    if left and panels and panels[0].figure is not None:
        panels[0].notes.append(
            "too many to mark on every chart, shown here only: " + ", ".join(map(str, left))
        )
    figures = {p.id: p.figure for p in panels if p.figure is not None}
    symptoms, symptoms_skipped, sym_figures, sym_evidence = symptom_context(
        store, tf, x_range, anchors
    )
    figures = sym_figures | figures
    evidence = evidence | sym_evidence
    if findings:
        lanes = [
            {**f, "hover": f"{f['label']} — {f['window']}", "key": f["key"] or f["kind"]}
            for f in findings
        ]
        figures = {"p-swimlanes": swimlanes_figure(lanes, x_range)} | figures
    coverage = coverage_context(store)
    return {
        "meta": meta,
        "header": tf.header(meta, x_range),
        "gpus": gpu_summary(store),
        "verdict": verdict(findings, incidents, detectors, store.has("findings")),
        "trigger": trigger,
        "history_start": tf.utc(meta["history_start_utc"])
        if meta.get("history_start_utc")
        else None,
        "findings": findings,
        "incidents": incidents,
        "symptoms": symptoms,
        "symptoms_skipped": symptoms_skipped,
        "views": views,
        "anchors": anchors,
        "detectors": detectors,
        "detectors_skipped": [d for d in detectors if d["status"] != "evaluated"],
        "audit": run_audit(store, role),
        "coverage": coverage,
        "events": events_table(store, tf),
        "panels": panels,
        "stacks": flame.whole_capture(store),
        "groups": _groups(panels),
        "reproduce": reproduce(store, meta, incidents, panels),
        "manifest": manifest_rows(meta, tf),
        "tables": [(t, store.rows(t)) for t in store.tables],
        "figures_json": script_json(
            {
                "range": x_range,
                "shapes": shapes,
                "figures": {k: pack(f) for k, f in figures.items()},
                "evidence": {k: pack(f) for k, f in evidence.items()},
            }
        ),
        "plotly_js": Markup(static_text(PLOTLY_JS)),
        "plotly_version": plotly_version(),
        "report_css": Markup(static_text("static/report.css")),
        "report_js": Markup(static_text("static/report.js")),
        "generated": tf.utc(int(datetime.now(UTC).timestamp() * 1000)),
        "severities": SEVERITY_ORDER,
    }


def _groups(panels: list[Any]) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for p in panels:
        if not out or out[-1][0] != p.group:
            out.append((p.group, []))
        out[-1][1].append(p)
    return out
