"""The symptom stage's result for the terminal summary and ``analyze --json`` (read back
from its tables; docs/json-output.md "symptoms").

One dict per analysed primary symptom: ``id``, ``name``, ``kind``, ``stat``, ``unit``,
``baseline`` (in ``unit``), ``windows``: per window ``id``, ``start``, ``end``, ``dur_s``,
``level``, ``peak``, ``ratio`` and ``explanations`` — its causes and concurrent
candidates in rank order (``rank``, ``candidate``, ``candidate_type``, ``role``,
``mechanism_group``, ``lag_s``, ``score``, ``sentence``); weak candidates are left out.
"""

from __future__ import annotations

from typing import Any

import duckdb

EXPLANATION_KEYS = (
    "rank", "candidate", "candidate_type", "role", "mechanism_group", "lag_s", "score", "sentence",
)  # fmt: skip


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()}


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.sql(sql)
    return [dict(zip(cur.columns, r, strict=True)) for r in cur.fetchall()]


def symptom_dicts(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The analysed primary symptoms with their windows and shown explanations."""
    have = _tables(con)
    if "symptoms" not in have:
        return []
    symptoms = _rows(
        con,
        "SELECT symptom_id AS id, name, kind, stat, unit, baseline FROM symptoms "
        "WHERE is_primary AND status = 'analysed' ORDER BY symptom_id",
    )
    windows = (
        _rows(
            con,
            "SELECT window_id AS id, symptom_id, start_ts AS start, end_ts AS end, dur_s, level, "
            "peak, ratio FROM symptom_windows ORDER BY window_id",
        )
        if "symptom_windows" in have
        else []
    )
    expl = (
        _rows(
            con,
            f"SELECT window_id, {', '.join(EXPLANATION_KEYS)} FROM symptom_explanations "
            "WHERE role <> 'weak' ORDER BY window_id, rank",
        )
        if "symptom_explanations" in have
        else []
    )
    for s in symptoms:
        s["windows"] = [
            {k: v for k, v in w.items() if k != "symptom_id"}
            for w in windows
            if w["symptom_id"] == s["id"]
        ]
        for w in s["windows"]:
            w["explanations"] = [
                {k: r[k] for k in EXPLANATION_KEYS} for r in expl if r["window_id"] == w["id"]
            ]
    return symptoms


def summary_lines(symptoms: list[dict[str, Any]], max_windows: int = 5) -> list[str]:
    """Terminal lines: per symptom its windows and each window's best explanation."""
    lines = []
    for s in symptoms:
        n = len(s["windows"])
        lines.append(f"  symptom   {s['name']}: {n} window{'s' if n != 1 else ''}")
        for w in s["windows"][:max_windows]:
            top = next((e for e in w["explanations"] if e["role"] == "cause"), None)
            why = (
                f"{top['candidate']} (cause, leads by {top['lag_s']} s)"
                if top
                else "no known mechanism explains it"
            )
            at = w["start"].strftime("%H:%M:%S") if w["start"] is not None else "?"
            ratio = f" ×{w['ratio']:.1f}" if w["ratio"] is not None else ""
            lines.append(f"    {at} UTC {w['dur_s']:.0f} s{ratio}: {why}")
        if n > max_windows:
            lines.append(f"    … and {n - max_windows} more (in the report)")
    return lines
