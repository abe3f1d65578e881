"""The symptom stage, after the detectors: series → windows → explanations → tables.

`analyse` writes ``symptoms``, ``symptom_series``, ``symptom_windows`` and
``symptom_explanations`` (`analyzer.symptoms.schema`) when the store holds an
application series (``app_metric_quantile``, ``app_metric_rate``, ``app_log_line`` or
``app_series``); without one it writes nothing. ``symptom_windows`` is absent when no
symptom departs from its baseline, ``symptom_explanations`` also when no host signal
has data and nothing was found (a bundle of application series only: the symptom's own
span is the grid). Everything is computed before anything is written; an unexpected
error does not stop the analysis (unless ``debug``): ``symptoms`` then holds one row
saying so.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer.findings import Finding
from analyzer.parsers.base import TS
from analyzer.symptoms import series, windows
from analyzer.symptoms.explain import explain


def analyse(store: Any, sig: pl.DataFrame, findings: list[Finding], *, debug: bool = False) -> int:
    """Run the stage on ``store`` (an `analyzer.store.Store`) with the signals frame and
    the ranked findings (finding_id = position + 1); the number of symptom windows.
    Without host signals (an empty ``sig``) the symptom's own span is its grid and no
    explanation is looked for (nothing could explain it)."""
    try:
        return _run(store, sig, findings)
    except Exception as e:
        if debug:
            raise
        row = {
            "symptom_id": 0,
            "name": "symptom analysis",
            "status": "not analysed",
            "reason": f"internal error: {type(e).__name__}: {str(e)[:300]}",
        }
        store.write("symptoms", pl.DataFrame([row]), None)
        return 0


def _run(store: Any, sig: pl.DataFrame, findings: list[Finding]) -> int:
    """Everything computed first, then written: a failure leaves no half of it."""
    con = store.con
    host = sig.height > 0
    lo, hi = (sig["ts"].min(), sig["ts"].max()) if host else (None, None)
    catalogue, values = series.build(con, lo, hi)  # type: ignore[arg-type]
    if catalogue.is_empty():
        return 0
    grid = sig["ts"] if host else _grid(values)
    catalogue, found = windows.find(catalogue, values, grid)
    tables = {"symptoms": catalogue, "symptom_series": values}
    if not found.is_empty():
        units = catalogue.select("symptom_id", "unit")
        tables["symptom_windows"] = found.join(units, on="symptom_id", how="left")
    if not found.is_empty() and host:
        rows = [
            explain(
                con, sig, sym, found.filter(pl.col("symptom_id") == sym["symptom_id"]), findings
            )
            for sym in catalogue.filter(pl.col("windows") > 0).iter_rows(named=True)
        ]
        rows = [r for r in rows if r.height]
        if rows:
            frame = pl.concat(rows, how="diagonal_relaxed").sort("window_id", "rank")
            tables["symptom_explanations"] = frame
    for name, frame in tables.items():
        store.write(name, frame, None)
    return found.height


def _grid(values: pl.DataFrame) -> pl.Series:
    """Every second of the symptom series' span (a bundle without host signals)."""
    if values.is_empty():
        return pl.Series("ts", [], dtype=TS)
    return pl.datetime_range(
        values["ts"].min(), values["ts"].max(), "1s", eager=True, time_zone="UTC"
    ).cast(TS)
