"""The report's "Symptom" section: the application's own series, its windows and what
explains them, from the symptom stage's tables (docs/symptoms.md; nothing is computed
here that the tables do not hold).

``symptom_context(store, tf, x_range, anchors)`` returns the section's views and their
figures. One view per analysed primary symptom (``symptoms.is_primary``):

- ``headline``: what the symptom did, in one sentence with its numbers;
- ``windows``: every ``symptom_windows`` row with its rank-1 explanation;
- ``causes``: the candidates that are a ``cause`` in at least one window, ranked by the
  windows they rank first in, then the windows they cause, then their best score; each
  with the sentence of its best window and an evidence chart (the symptom above, the
  candidate below, the windows shaded, the candidate's threshold dashed);
- ``concurrent``: candidates that only overlap (never a cause), best first.

Symptom series that were not analysed are listed with their reason (``skipped``).
Figures: ``figures`` (the symptom chart, on the report's linked time axis) and
``evidence`` (the explanation charts).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer.diff_config import noun
from analyzer.sql import ident
from analyzer.symptoms.words import NOUNS, fmt, subject
from reports.charts import Figure, Row, layout, line_trace, rows_figure
from reports.queries import Store
from reports.timefmt import TimeFormatter

WINDOW_FILL = "#9467bd"
MAX_CONCURRENT = 8
MAX_CAUSE_CHARTS = 6  # per symptom (docs/report.md: evidence charts are few per page)
SYMPTOM_COLUMNS = ["symptom_id", "name", "kind", "stat", "unit", "worse", "is_primary", "source"]
SYMPTOM_COLUMNS += ["family", "labels", "baseline", "enter", "windows", "status", "reason"]
WINDOW_COLUMNS = ["window_id", "symptom_id", "start_ts", "end_ts", "dur_s", "level", "peak"]
WINDOW_COLUMNS += ["ratio"]
EXPLAIN_COLUMNS = ["window_id", "symptom_id", "rank", "candidate", "candidate_type", "role"]
EXPLAIN_COLUMNS += ["finding_id", "entity", "score", "lag_s", "mechanism_group", "threshold"]
EXPLAIN_COLUMNS += ["baseline", "unit", "sentence", "why_not"]


def symptom_views(
    store: Store, tf: TimeFormatter, anchors: dict[Any, str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(views, skipped): the section's content without charts (the Markdown uses it)."""
    if not store.usable("symptoms", "symptom_id"):
        return [], []
    symptoms = store.records("symptoms", SYMPTOM_COLUMNS, order="symptom_id")
    windows = store.records("symptom_windows", WINDOW_COLUMNS, order="window_id")
    rows = store.records(
        "symptom_explanations", EXPLAIN_COLUMNS, where="role <> 'weak'", order="window_id, rank"
    )
    views, skipped = [], []
    for s in symptoms:
        if s["status"] != "analysed" or not s["is_primary"]:
            if s["is_primary"] or not _context_of(s, symptoms):
                skipped.append(s)
            continue
        mine = [w for w in windows if w["symptom_id"] == s["symptom_id"]]
        expl = [r for r in rows if r["symptom_id"] == s["symptom_id"]]
        view = _view(tf, s, mine, expl, anchors or {})
        view["context"] = [c for c in symptoms if c is not s and _context_of(c, [s])]
        views.append(view)
    return views, skipped


def symptom_context(
    store: Store, tf: TimeFormatter, x_range: tuple[int, int] | None, anchors: dict[Any, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Figure], dict[str, Figure]]:
    """(views, skipped, figures, evidence) of the Symptom section; all empty without one."""
    views, skipped = symptom_views(store, tf, anchors)
    figures, evidence = {}, {}
    for view in views:
        s = view["symptom"]
        view["chart_id"] = f"p-symptom-{s['symptom_id']}"
        figures[view["chart_id"]] = _symptom_figure(store, view, x_range)
        for c in view["causes"][:MAX_CAUSE_CHARTS]:
            fig = _cause_figure(store, s, c, view["windows"], x_range)
            if fig is not None:
                c["chart_id"] = f"ev-symptom-{s['symptom_id']}-{c['n']}"
                evidence[c["chart_id"]] = fig
    return views, skipped, figures, evidence


def _context_of(s: dict[str, Any], symptoms: list[dict[str, Any]]) -> bool:
    """A non-primary series drawn beside a primary one (p50 beside p99): not 'skipped'."""
    return any(
        p["is_primary"] and p["family"] == s["family"] and p["labels"] == s["labels"]
        for p in symptoms
        if p is not s
    )


def _view(
    tf: TimeFormatter,
    s: dict[str, Any],
    windows: list[dict[str, Any]],
    expl: list[dict[str, Any]],
    anchors: dict[Any, str],
) -> dict[str, Any]:
    unit = s["unit"] or ""
    dur = {w["window_id"]: float(w["dur_s"] or 0) for w in windows}
    causes = _ranked(expl, "cause", dur)
    for i, c in enumerate(causes, 1):
        c["n"] = i
        c["anchor"] = f"symptom-{s['symptom_id']}-cause-{i}"
        c["card"] = anchors.get(c["finding_id"]) if c["candidate_type"] == "finding" else None
    caused = {c["candidate"] for c in causes}
    concurrent = [c for c in _ranked(expl, "concurrent", dur) if c["candidate"] not in caused]
    by_cand = {c["candidate"]: c for c in causes}
    shown_windows = []
    for w in windows:
        first = next((r for r in expl if r["window_id"] == w["window_id"]), None)
        top = by_cand.get(first["candidate"]) if first and first["role"] == "cause" else None
        shown_windows.append(
            {
                **w,
                "time": tf.window(w["start_ts"], w["end_ts"]),
                "x0": w["start_ts"],
                "x1": w["end_ts"],
                "level_text": fmt(w["level"], unit),
                "peak_text": fmt(w["peak"], unit),
                "top": top,
                "top_lag": first["lag_s"] if top else None,
            }
        )
    total_s = sum(float(w["dur_s"] or 0) for w in windows)
    worst = max((w["peak"] for w in windows if w["peak"] is not None), default=None)
    if s["worse"] == "down":
        worst = min((w["peak"] for w in windows if w["peak"] is not None), default=None)
    verb = "fell below" if s["worse"] == "down" else "rose above"
    if windows:
        headline = (
            f"{subject(s['name'])} {verb} its baseline of {fmt(s['baseline'], unit)} in "
            f"{len(windows)} window{'s' if len(windows) != 1 else ''} ({total_s:.0f} s in all; "
            f"worst {fmt(worst, unit)})"
        )
        explained = sum(1 for w in shown_windows if w["top"] is not None)
        headline += f"; {explained} of {len(windows)} explained by a known mechanism."
    else:
        headline = (
            f"{subject(s['name'])} stayed near its baseline of {fmt(s['baseline'], unit)}: "
            "no symptom window, nothing to explain."
        )
    return {
        "symptom": s,
        "headline": headline,
        "windows": shown_windows,
        "causes": causes,
        "concurrent": concurrent[:MAX_CONCURRENT],
        "concurrent_more": max(0, len(concurrent) - MAX_CONCURRENT),
    }


def _ranked(expl: list[dict[str, Any]], role: str, dur: dict[Any, float]) -> list[dict[str, Any]]:
    """One entry per candidate with ``role`` in some window: windows ranked first, windows
    with that role, best score (then name). Its sentence is that of its most telling
    window: one it ranks first in, the longest, then the best score."""
    out: dict[str, dict[str, Any]] = {}
    best: dict[str, tuple] = {}
    for r in expl:
        if r["role"] != role:
            continue
        cand = r["candidate"]
        c = out.setdefault(cand, {"windows": 0, "first": 0, "lags": set(), "n_windows": len(dur)})
        c["windows"] += 1
        c["first"] += r["rank"] == 1
        c["lags"].add(r["lag_s"])
        c["best_score"] = max(c.get("best_score", 0.0), r["score"] or 0.0)
        key = (r["rank"] == 1, dur.get(r["window_id"], 0.0), r["score"] or 0.0)
        if cand not in best or key > best[cand]:
            best[cand] = key
            c.update({k: v for k, v in r.items()})
    ranked = sorted(
        out.values(), key=lambda c: (-c["first"], -c["windows"], -c["best_score"], c["candidate"])
    )
    for c in ranked:
        lags = sorted(x for x in c.pop("lags") if x is not None)
        c["lead"] = (
            f"{lags[0]} s" if len(lags) == 1 else f"{lags[0]}–{lags[-1]} s" if lags else "n/a"
        )
        c["label"] = _label(c)
    return ranked


def _label(c: dict[str, Any]) -> str:
    """'Throttled time per second (cgroup /serve)', 'CPU throttling (finding CPU_THROTTLE)'."""
    if c["candidate_type"] == "finding":
        base = f"{noun(str(c['candidate']))} (finding {c['candidate']})"
    else:
        base = NOUNS.get(c["candidate"], c["candidate"]).removeprefix("the ")
        if c.get("entity"):
            base += f" (cgroup {c['entity']})"
    return base[:1].upper() + base[1:]


def _series(store: Store, table: str, column: str, where: str = "", **params: Any) -> pl.DataFrame:
    cond = f" AND {where}" if where else ""
    col = ident(column)
    return store.con.sql(
        f"SELECT epoch_ms(ts) AS x, CAST({col} AS DOUBLE) AS v FROM {ident(table)} "
        f"WHERE {col} IS NOT NULL{cond} ORDER BY ts",
        params=params or None,
    ).pl()


def _symptom_frame(store: Store, sid: int) -> pl.DataFrame:
    return _series(store, "symptom_series", "value", "symptom_id = $sid", sid=sid)


def _window_shapes(windows: list[dict[str, Any]], yref: str = "paper") -> list[dict[str, Any]]:
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": yref,
            "x0": w["start_ts"],
            "x1": w["end_ts"],
            "y0": 0,
            "y1": 1,
            "fillcolor": WINDOW_FILL,
            "opacity": 0.18,
            "line": {"width": 0},
            "layer": "below",
        }
        for w in windows
    ]


def _hline(y: float, yref: str, color: str, dash: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "yref": yref,
        "y0": y,
        "y1": y,
        "line": {"color": color, "width": 1.2, "dash": dash},
    }


def _symptom_figure(store: Store, view: dict[str, Any], x_range: tuple[int, int] | None) -> Figure:
    """The symptom (and its p50 context, when there is one) on the report's time axis;
    windows shaded, baseline dashed, the threshold that opens a window dotted."""
    s, windows = view["symptom"], view["windows"]
    unit = s["unit"] or ""
    traces = [
        line_trace(
            _symptom_frame(store, s["symptom_id"]), "v", str(s["stat"] or "value"),
            line={"width": 1.6, "color": "#6a3d9a"},
        )
    ]  # fmt: skip
    for c in view["context"]:
        frame = _symptom_frame(store, c["symptom_id"])
        if frame.height:
            traces.append(
                line_trace(frame, "v", str(c["stat"]), line={"width": 1, "color": "#aaaaaa"})
            )
    shapes = _window_shapes(windows)
    if s["baseline"] is not None:
        shapes.append(_hline(float(s["baseline"]), "y", "#2ca02c", "dash"))
    if s["enter"] is not None:
        shapes.append(_hline(float(s["enter"]), "y", "#d62728", "dot"))
    lay = layout("", x_range, y_title=unit, shapes=shapes)
    return {"data": traces, "layout": lay}


def _cause_figure(
    store: Store,
    s: dict[str, Any],
    c: dict[str, Any],
    windows: list[dict[str, Any]],
    x_range: tuple[int, int] | None,
) -> Figure | None:
    """Symptom above, the candidate below (a signals column, or for a finding its spans
    as 1 = active), on the whole capture; windows shaded in both rows."""
    sym = _symptom_frame(store, s["symptom_id"])
    if c["candidate_type"] == "signal" and store.usable("signals", c["candidate"]):
        cand = _series(store, "signals", c["candidate"])
        label = f"{c['candidate']} ({c['unit']})" if c["unit"] else c["candidate"]
    elif c["candidate_type"] == "finding" and store.usable("findings", "key", "start_ts"):
        cand = _finding_steps(store, str(c["candidate"]), x_range)
        label = f"{c['candidate']} (1 = active)"
    else:
        return None
    if not sym.height or not cand.height:
        return None
    rows = [
        Row(f"{s['stat']} ({s['unit']})", [line_trace(sym, "v", "symptom", line={"color": "#6a3d9a"})]),
        Row(label, [line_trace(cand, "v", "candidate", line={"color": "#1f5fa8", "shape": "hv"})]),
    ]  # fmt: skip
    fig = rows_figure(rows, "", x_range)
    lay = fig["layout"]
    lay["showlegend"] = False
    shapes = _window_shapes(windows, "paper")
    if c["candidate_type"] == "signal" and c["threshold"] is not None:
        shapes.append(_hline(float(c["threshold"]), "y2", "#d62728", "dot"))
    lay["shapes"] = shapes
    return fig


def _finding_steps(store: Store, key: str, x_range: tuple[int, int] | None) -> pl.DataFrame:
    """A 0/1 step series of the finding key's spans over the capture."""
    spans = store.con.sql(
        "SELECT epoch_ms(start_ts) AS a, epoch_ms(coalesce(end_ts, start_ts)) AS b FROM findings "
        "WHERE key = $key AND start_ts IS NOT NULL ORDER BY start_ts",
        params={"key": key},
    ).fetchall()
    xs: list[int] = []
    vs: list[float] = []
    if x_range is not None:
        xs, vs = [x_range[0]], [0.0]
    for a, b in spans:  # drawn with line shape "hv": 1 from a, 0 again from b
        xs += [int(a), int(max(b, a + 1000))]
        vs += [1.0, 0.0]
    if x_range is not None:
        xs, vs = [*xs, x_range[1]], [*vs, 0.0]
    return pl.DataFrame({"x": xs, "v": vs}, schema={"x": pl.Int64, "v": pl.Float64}).sort("x")
