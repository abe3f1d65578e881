"""Render the self-contained HTML incident report from a loaded DuckDB store.

``render_html(con, out_path)`` is the whole public API. The page is one file: the vendored
plotly.js partial bundle, the CSS and the page script are inlined once; chart data travels as
one JSON block (``<script type="application/json">``) with ``<``, ``>``, ``&`` and U+2028/9
escaped, so no string from a bundle can close the script element. Templates are autoescaped;
the only ``Markup`` values are the package's own static files and that escaped JSON.

Sections (one template each, see ``templates/``): header, summary, timeline, panels,
findings, coverage, appendix.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import jinja2
from markupsafe import Markup

from reports import panels as P
from reports.queries import Store, skip_reasons
from reports.timefmt import TimeFormatter

PLOTLY_JS = "static/plotly/plotly-cartesian.min.js"
SEVERITY_ORDER = ["critical", "major", "minor", "info"]
STATUS_ORDER = [
    "failed", "refused", "timeout", "unrecognised", "partial", "missing",
    "empty", "parser pending", "skipped", "parsed",
]  # fmt: skip
PROBLEM_STATUSES = {"failed", "refused", "timeout", "unrecognised"}
MAX_EVENT_ROWS = 500
FINDING_COLUMNS = [
    "key", "kind", "title", "severity", "start_ts", "end_ts",
    "summary", "impact", "remediation",
]  # fmt: skip
COLLECTOR_COLUMNS = [
    "file", "collector", "tool", "status", "bytes", "lines_total", "lines_parsed",
    "lines_structure", "lines_skipped", "parsed_pct", "skip_reasons", "notes",
    "stderr_tail", "exit_code", "manifest_status", "reason", "tables",
]  # fmt: skip
BUNDLE_COLUMNS = [
    "name", "source_path", "host", "kernel", "os", "arch", "cpus", "start_utc", "end_utc",
    "interval_s", "timezone", "capture_version", "format_version", "manifest_present",
    "interrupted", "analyzer_version", "analyzed_at",
]  # fmt: skip
EVENT_COLUMNS = ["ts", "kind", "level", "pid", "comm", "device", "xid_code", "memcg", "message"]


def render_html(con: duckdb.DuckDBPyConnection, out_path: Path) -> Path:
    """Write the HTML report for the store behind ``con`` to ``out_path``; return the path."""
    out_path = Path(out_path)
    html = render_string(con)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(html, encoding="utf-8")
    return out_path


def render_string(con: duckdb.DuckDBPyConnection) -> str:
    """The report as one HTML string (what :func:`render_html` writes)."""
    return _env().get_template("report.html.j2").render(**build_context(Store(con)))


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
        if isinstance(xs, list) and xs and all(type(v) is int for v in xs):
            trace = {k: v for k, v in trace.items() if k != "x"}
            trace["xd"] = [xs[0]] + [b - a for a, b in pairwise(xs)]
        traces.append(trace)
    return {**figure, "data": traces}


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
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _x_range(store: Store, meta: dict[str, Any]) -> tuple[int, int] | None:
    start, end = meta.get("start_utc"), meta.get("end_utc")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        return (start, end)
    spans = []
    for table in ("vmstat", "mpstat_cpu", "psi", "iostat_device", "gpu_dmon", "dmesg"):
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


def findings_context(store: Store, tf: TimeFormatter) -> dict[str, Any]:
    """``state`` is 'absent' (detectors not run), 'empty' or 'rows'."""
    if not store.has("findings"):
        return {"state": "absent", "rows": [], "counts": {}}
    rank = (
        "CASE severity "
        + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SEVERITY_ORDER))
        + " ELSE 9 END"
    )
    order = rank if "severity" in store.columns("findings") else ""
    if order and "start_ts" in store.columns("findings"):
        order += ", start_ts"
    rows = store.records("findings", FINDING_COLUMNS, order=order)
    counts: dict[str, int] = {}
    for r in rows:
        sev = str(r["severity"] or "info")
        counts[sev] = counts.get(sev, 0) + 1
        r["x0"], r["x1"] = r["start_ts"], r["end_ts"] or r["start_ts"]
        r["window"] = tf.window(r["start_ts"], r["end_ts"])
        r["local"] = tf.local(r["start_ts"])
    return {"state": "rows" if rows else "empty", "rows": rows, "counts": counts}


def coverage_context(store: Store) -> dict[str, Any]:
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    rows = store.records("collectors", COLLECTOR_COLUMNS)
    rows.sort(key=lambda r: (rank.get(str(r["status"]), -1), str(r["file"] or "")))
    counts: dict[str, int] = {}
    for r in rows:
        counts[str(r["status"])] = counts.get(str(r["status"]), 0) + 1
        r["reasons"] = skip_reasons(r["skip_reasons"])
    return {"rows": rows, "counts": counts, "total": len(rows)}


def verdict(findings: dict[str, Any], coverage: dict[str, Any]) -> dict[str, str]:
    """A one-line verdict placeholder driven by findings and coverage (detectors come later)."""
    counts, total = coverage["counts"], coverage["total"]
    problems = sum(n for s, n in counts.items() if s in PROBLEM_STATUSES)
    cov = f"{counts.get('parsed', 0)} of {total} input files parsed fully"
    if counts.get("partial"):
        cov += f", {counts['partial']} partially"
    if problems:
        cov += f", {problems} failed or unreadable"
    if findings["state"] == "rows":
        top = findings["rows"][0]
        sev = str(top["severity"] or "info")
        more = len(findings["rows"]) - 1
        text = f"{sev.upper()}: {top['title'] or top['key'] or top['kind']}"
        if more:
            text += f" (+{more} more finding{'s' if more > 1 else ''})"
        return {"level": sev, "text": text, "coverage": cov}
    if findings["state"] == "empty":
        return {"level": "ok", "text": "No findings: detectors found nothing.", "coverage": cov}
    level = "warn" if problems or not total else "none"
    return {"level": level, "text": "No findings (detectors not run).", "coverage": cov}


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
    local = tf.zone_name if tf.zone is not None else None
    return {"rows": rows, "total": int(total), "columns": extra, "local": local}


def build_context(store: Store) -> dict[str, Any]:
    """Everything the templates need, gathered from the store."""
    meta = dict.fromkeys(BUNDLE_COLUMNS) | store.bundle()
    tf = TimeFormatter(meta.get("timezone"))
    x_range = _x_range(store, meta)
    findings = findings_context(store, tf)
    coverage = coverage_context(store)
    events = P.events_frame(store)
    shapes = P.charts.finding_shapes(_findings_frame(findings["rows"]))
    drawn, left = P.charts.event_lines(events)
    shapes += P.charts.event_shapes(events, drawn)
    fr = P.Frame(x_range=x_range)
    timeline = P.timeline_panels(store, events, fr)
    if left:
        timeline[0].notes.append(
            "too many to mark on every chart, shown here only: " + ", ".join(map(str, left))
        )
    details = P.detail_panels(store, fr)
    details_present = [p for p in details if p.figure is not None]
    figures = {p.id: p.figure for p in timeline + details if p.figure is not None}
    return {
        "meta": meta,
        "header": tf.header(meta, x_range),
        "verdict": verdict(findings, coverage),
        "findings": findings,
        "coverage": coverage,
        "events": events_table(store, tf),
        "timeline": timeline,
        "details": details_present,
        "details_absent": [p for p in details if p.figure is None],
        "tables": [(t, store.rows(t)) for t in store.tables],
        "figures_json": script_json(
            {
                "range": x_range,
                "shapes": shapes,
                "figures": {k: pack(f) for k, f in figures.items()},
            }
        ),
        "plotly_js": Markup(static_text(PLOTLY_JS)),
        "plotly_version": plotly_version(),
        "report_css": Markup(static_text("static/report.css")),
        "report_js": Markup(static_text("static/report.js")),
        "generated": tf.utc(int(datetime.now(UTC).timestamp() * 1000)),
        "severities": SEVERITY_ORDER,
    }


def _findings_frame(rows: list[dict[str, Any]]) -> Any:
    import polars as pl

    return pl.DataFrame(
        {
            "x0": [r["x0"] for r in rows],
            "x1": [r["x1"] for r in rows],
            "severity": [r["severity"] for r in rows],
        },
        schema={"x0": pl.Int64, "x1": pl.Int64, "severity": pl.String},
    )
