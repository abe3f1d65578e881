"""Finding cards: what, when, evidence chart with the baseline, numbers vs baseline, raw lines,
the causal chain and the remediation.

Cards are grouped by incident (chain) and, inside it, by finding key: a periodic incident of
2 000 occurrences is one card with its occurrence list, not 2 000 cards. The card's chart and
numbers are those of its representative occurrence (most GPU-seconds lost, else the first).

Inputs: :mod:`reports.incidents` dicts plus ``finding_evidence`` (finding_id, signal, value,
baseline, unit, note), ``finding_log_lines`` (finding_id, source_file, line_no, ts, text)
and the ``signals`` table for the evidence charts (columns named by ``finding_evidence.signal``).
"""

from __future__ import annotations

from typing import Any

from analyzer.sql import ident
from reports import flame
from reports.charts_findings import evidence_figure
from reports.incidents import Incident
from reports.queries import Store, clip
from reports.timefmt import TimeFormatter

MAX_CHARTS = 12  # evidence charts per report (most important cards first)
MAX_OCCURRENCES = 60  # occurrence rows per card
MAX_LOG_LINES = 40  # raw lines per card
MAX_FLAMES = 8  # flame graphs of sampled stacks per report (CPU-related cards first)
CHART_SIGNALS = 3
# Evidence units shown in friendlier units: unit -> (shown unit, factor)
UNITS = {"kB/s": ("MB/s", 1 / 1024), "kB": ("MiB", 1 / 1024), "us": ("ms", 1 / 1000)}
EVIDENCE_COLUMNS = ["finding_id", "signal", "value", "baseline", "unit", "note"]
LOG_COLUMNS = ["finding_id", "source_file", "line_no", "ts", "text"]
LOG_TABLE = "finding_log_lines"


def build_cards(
    store: Store, incidents: list[Incident], tf: TimeFormatter
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(incident views with their cards, evidence figures by chart id)."""
    evidence = _by_finding(store.records("finding_evidence", EVIDENCE_COLUMNS))
    logs = _by_finding(
        store.records("finding_log_lines", LOG_COLUMNS, order="finding_id, ts, line_no")
    )
    signal_cols = set(store.columns("signals")) if store.usable("signals", "ts") else set()
    figures: dict[str, Any] = {}
    flames: list[str] = []  # cards with a flame graph (the page keeps at most MAX_FLAMES)
    views = []
    for inc in incidents:
        groups: dict[str, list[dict[str, Any]]] = {}
        cause = next((f for f in inc.members if f["finding_id"] == inc.cause_id), inc.members[0])
        for f in [cause] + [m for m in inc.members if m is not cause]:
            groups.setdefault(str(f["key"] or f["kind"] or "?"), []).append(f)
        cards = []
        for key, members in groups.items():
            rep = max(members, key=lambda f: (f.get("gpu_seconds_lost") or 0.0, -members.index(f)))
            card = _card(key, members, rep, evidence, logs, tf)
            if len(flames) < MAX_FLAMES:
                card["flame"] = flame.for_finding(store, rep)
                if card["flame"] is not None:
                    flames.append(card["anchor"])
            if len(figures) < MAX_CHARTS and signal_cols:
                fig = _evidence_chart(store, rep, evidence.get(rep["finding_id"], []), signal_cols)
                if fig is not None:
                    card["chart_id"] = f"ev-{rep['finding_id']}"
                    figures[card["chart_id"]] = fig
            if "chart_id" not in card:
                card["chart_note"] = (
                    "No evidence chart: the signals table is absent."
                    if not signal_cols
                    else "No evidence chart (none of its signals is on the 1 s grid, or the chart budget of the page is used up): use “zoom charts”."
                )
            cards.append(card)
        steps = [
            {"key": c["key"], "anchor": c["anchor"], "cause": i == 0} for i, c in enumerate(cards)
        ]
        views.append(
            {"incident": inc, "cards": cards, "steps": steps, "anchor": f"incident-{inc.chain_id}"}
        )
    return views, figures


def _by_finding(rows: list[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["finding_id"], []).append(r)
    return out


def _card(
    key: str,
    members: list[dict[str, Any]],
    rep: dict[str, Any],
    evidence: dict[Any, list[dict[str, Any]]],
    logs: dict[Any, list[dict[str, Any]]],
    tf: TimeFormatter,
) -> dict[str, Any]:
    lines = []
    for f in members:
        for ln in logs.get(f["finding_id"], []):
            if len(lines) < MAX_LOG_LINES:
                lines.append({**ln, "time": tf.utc(ln["ts"]), "text": clip(ln["text"], LOG_TABLE)})
    total_lines = sum(len(logs.get(f["finding_id"], [])) for f in members)
    caveats: list[str] = []
    for f in members:
        caveats += [c for c in f["caveat_lines"] if c not in caveats]
    return {
        "key": key,
        "anchor": f"finding-{rep['finding_id']}",
        "ids": [f["finding_id"] for f in members],
        "rep": rep,
        "count": len(members),
        "occurrences": members[:MAX_OCCURRENCES],
        "evidence": [_evidence_row(e) for e in evidence.get(rep["finding_id"], [])],
        "log_lines": lines,
        "log_total": total_lines,
        "caveats": caveats,
    }


#: name endings that spell a unit: a value shown under such a name stays in that unit
_NAMED_UNITS = ("_kb_s", "_kb", "_us", "_mb", "_mb_s", "_ms")


def shown_unit(signal: str, unit: str) -> tuple[str, float]:
    """(unit shown, factor) of an evidence value: kB/s as MB/s, kB as MiB, µs as ms —
    unless the signal's name spells its unit (``disk_write_kb_s`` stays in kB/s: a label
    never contradicts its value, and the number is the one the tool printed).

    >>> shown_unit("disk_write_kb_s", "kB/s"), shown_unit("vda write_kb_s", "kB/s")
    (('kB/s', 1.0), ('kB/s', 1.0))
    >>> shown_unit("written", "kB/s"), shown_unit("runqlat_p99", "us"), shown_unit("runq", "tasks")
    (('MB/s', 0.0009765625), ('ms', 0.001), ('tasks', 1.0))
    """
    if signal.lower().endswith(_NAMED_UNITS):
        return unit, 1.0
    return UNITS.get(unit, (unit, 1.0))


def _evidence_row(e: dict[str, Any]) -> dict[str, Any]:
    unit = str(e["unit"] or "")
    shown, factor = shown_unit(str(e["signal"] or ""), unit)
    value, base = _scaled(e["value"], factor), _scaled(e["baseline"], factor)
    ratio = None
    if isinstance(value, float) and isinstance(base, float) and base > 0 and value >= 0:
        ratio = value / base
    return {**e, "shown_value": value, "shown_baseline": base, "shown_unit": shown, "ratio": ratio}


def _scaled(v: Any, factor: float) -> float | None:
    return float(v) * factor if isinstance(v, int | float) and not isinstance(v, bool) else None


def _evidence_chart(
    store: Store, f: dict[str, Any], evidence: list[dict[str, Any]], signal_cols: set[str]
) -> dict[str, Any] | None:
    """The finding's own signals around its window, baselines dashed."""
    if f["x0"] is None:
        return None
    chosen: list[dict[str, Any]] = []
    for e in evidence:
        sig = str(e["signal"] or "")
        if sig in signal_cols and sig != "ts" and all(c["signal"] != sig for c in chosen):
            chosen.append(e)
    gpu = next((e for e in chosen if e["signal"] == "gpu_util_mean_pct"), None)
    picked = chosen[:CHART_SIGNALS]
    if (
        gpu is not None and gpu not in picked
    ):  # the user-facing effect, when the detector measured it
        picked[-1] = gpu
    if not picked:
        return None
    x0, x1 = int(f["x0"]), int(f["x1"] or f["x0"])
    pad = max(30_000, (x1 - x0) // 2)
    lo, hi = x0 - pad, x1 + pad
    series = []
    for e in picked:
        unit = str(e["unit"] or "")
        shown, factor = shown_unit(str(e["signal"] or ""), unit)
        q = (
            f"SELECT epoch_ms(ts) AS x, {ident(e['signal'])} * {float(factor)!r} AS v FROM signals "
            f"WHERE ts BETWEEN to_timestamp({lo} / 1000) AND to_timestamp({hi} / 1000) "
            f"AND {ident(e['signal'])} IS NOT NULL ORDER BY ts"
        )
        frame = store.con.sql(q).pl()
        if frame.height:
            base = _scaled(e["baseline"], factor)
            series.append({"label": e["signal"], "unit": shown, "frame": frame, "baseline": base})
    if not series:
        return None
    return evidence_figure(series, (x0, x1), (lo, hi))
