"""Symptom windows: where a symptom departs from its own baseline (table
``symptom_windows``; docs/symptoms.md "Windows").

For each primary symptom ``y`` on the 1-second grid (NULL where it has no value):

1. **Baseline** ``m`` and spread ``σ``: `robust_level` (median, 1.4826 × MAD) of ``y``;
   second pass over the seconds outside the first pass's windows widened by ``pad_s``
   (when at least ``min_values`` seconds remain).
2. **Threshold distance** ``d = max(k_enter × σ, rel × m, floor)``: ``rel`` = 0.5 for
   ``worse = up`` (latency, step time: a window needs 1.5 × the baseline), 0.3 for
   ``down`` (throughput: 0.7 × the baseline); ``floor`` 1 ms for times, else 0.
3. **Runs** (`analyzer.intervals.runs`): enter at ``m + d`` (down: ``m − d``), leave at
   ``m + d/2``; at least ``max(min_s, min_samples × step)`` long, runs closer than
   ``max(gap_s, step)`` merged (``step`` = the symptom's sample spacing: a 5 s scrape
   interval fills 5 seconds). A NULL second ends a run unless the merge closes it.
4. **Split where the intensity changes**: each second's *badness* ``y/m`` (down:
   ``m/y``) falls in band ``floor(log2(badness))`` (0: < 2×, 1: 2–4×, 2: 4–8×, … at
   most 10); inside a window, runs of one band shorter than ``min_s`` take the band
   before them (the first, the band after); the window is cut where the band changes
   **and** the median badness of the parts on either side differs by ≥ 2× (noise that
   hovers at a band's edge does not cut a window). ``band`` is that of the part's
   median badness.

A symptom with fewer than ``min_values`` seconds of values is not analysed (its reason
says so). Window columns: `analyzer.symptoms.schema.SYMPTOM_WINDOWS`.
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors._base import robust_level
from analyzer.parsers.base import TS
from analyzer.symptoms.cooccur import inside

THRESHOLDS = {
    "k_enter": 4.0,  # σ above the baseline to open a window …
    "rel_up": 0.5,  # … and at least 1.5 × the baseline (latency, step time)
    "rel_down": 0.3,  # … or at most 0.7 × it (throughput)
    "floor_ms": 1.0,  # a latency window needs at least 1 ms of change
    "min_s": 3,  # seconds: the shortest window and the shortest band segment
    "min_samples": 2,  # … and at least this many of the symptom's samples
    "gap_s": 2,  # runs this close are one window
    "pad_s": 2,  # seconds around windows left out of the second-pass baseline
    "min_values": 20,  # seconds with a value needed to learn a baseline
    "max_band": 10,
}
T = THRESHOLDS
_1S = pl.duration(seconds=1)


def find(
    catalogue: pl.DataFrame, series: pl.DataFrame, grid: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(catalogue with baseline, sigma, enter, leave, windows, status, reason; windows).

    ``series``: ts, symptom_id, value (`analyzer.symptoms.series.build`); ``grid``: the
    signals' ``ts``. One pass per symptom (a few per capture), vectorised inside."""
    rows, found = [], []
    for sym in catalogue.iter_rows(named=True):
        y = _on_grid(series, sym["symptom_id"], grid)
        row, windows = _one(sym, y)
        rows.append(row)
        if windows.height:
            found.append(windows.with_columns(symptom_id=pl.lit(sym["symptom_id"], pl.Int32)))
    stats = pl.DataFrame(rows, infer_schema_length=None)
    out = catalogue.join(stats, on="symptom_id", how="left")
    if not found:
        return out, pl.DataFrame()
    windows = pl.concat(found).sort("start_ts", "symptom_id")
    windows = windows.with_row_index("window_id", offset=1).with_columns(
        pl.col("window_id").cast(pl.Int32)
    )
    return out, windows


def _on_grid(series: pl.DataFrame, symptom_id: int, grid: pl.Series) -> pl.DataFrame:
    one = series.filter(pl.col("symptom_id") == symptom_id).select("ts", "value")
    return pl.DataFrame({"ts": grid.cast(TS)}).join(one, on="ts", how="left").sort("ts")


def _one(sym: dict, y: pl.DataFrame) -> tuple[dict, pl.DataFrame]:
    """The statistics row of one symptom and its windows (start_ts, end_ts, …)."""
    sid = sym["symptom_id"]
    n = int(y["value"].is_not_null().sum())
    row = {"symptom_id": sid, "status": "not analysed", "reason": None, "windows": 0}
    if not sym["is_primary"]:
        return row | {
            "reason": "context: windows are found on the primary stat (p99)"
        }, pl.DataFrame()
    if n < T["min_values"]:
        reason = f"needs ≥ {T['min_values']} s of values on the capture's grid, has {n}"
        return row | {"reason": reason}, pl.DataFrame()
    up = sym["worse"] != "down"
    step = max(1.0, float(sym.get("step_s") or 1.0))
    level = robust_level(y["value"])
    assert level is not None  # n > 0
    first = _runs(y, level, up, step, sym["unit"])
    outside = y.filter(~inside(y["ts"], first, T["pad_s"], T["pad_s"]))["value"]
    if outside.drop_nulls().len() >= T["min_values"]:
        level = robust_level(outside) or level
    windows = _runs(y, level, up, step, sym["unit"])
    m, sigma = level
    d = _distance(m, sigma, up, sym["unit"])
    enter, leave = (m + d, m + d / 2) if up else (m - d, m - d / 2)
    row |= {"baseline": m, "sigma": sigma, "enter": enter, "leave": leave, "status": "analysed"}
    if windows.is_empty():
        return row, pl.DataFrame()
    split = _split(windows, y, m, up)
    return row | {"windows": split.height}, split


def _distance(m: float, sigma: float, up: bool, unit: str) -> float:
    rel = T["rel_up"] if up else T["rel_down"]
    return max(T["k_enter"] * sigma, rel * abs(m), T["floor_ms"] if unit == "ms" else 0.0, 1e-9)


def _runs(
    y: pl.DataFrame, level: tuple[float, float], up: bool, step: float, unit: str
) -> pl.DataFrame:
    m, sigma = level
    d = _distance(m, sigma, up, unit)
    enter, leave = (m + d, m + d / 2) if up else (m - d, m - d / 2)
    return intervals.runs(
        y["ts"],
        y["value"],
        enter=enter,
        leave=leave,
        above=up,
        min_duration_s=max(T["min_s"], T["min_samples"] * step),
        merge_gap_s=max(T["gap_s"], step),
    )


def _split(windows: pl.DataFrame, y: pl.DataFrame, m: float, up: bool) -> pl.DataFrame:
    """Windows cut where the intensity band changes, with their statistics."""
    v = pl.col("value")
    bad = ((v / m) if up else (pl.lit(m) / v)).clip(1.0, 2.0 ** T["max_band"])
    band = (
        pl.when(v.is_null()).then(None).otherwise(bad.fill_nan(2.0 ** T["max_band"]).log(2).floor())
    )
    secs = (
        windows.with_row_index("w")
        .select("w", ts=pl.datetime_ranges(pl.col("start"), pl.col("end") - _1S, "1s"))
        .explode("ts")
        .join(y, on="ts", how="left")
        .with_columns(band=band.cast(pl.Int32), bad=bad)
        .with_columns(seg=pl.struct("w", "band").rle_id())
        .with_columns(seg_len=pl.len().over("seg"))
        .with_columns(long=pl.when(pl.col("seg_len") >= T["min_s"]).then(pl.col("band")))
        .with_columns(long=pl.col("long").forward_fill().over("w").backward_fill().over("w"))
        .with_columns(part=pl.struct("w", pl.col("long").fill_null(-1)).rle_id())
    )
    # a cut stands only where the parts' median badness differs by ≥ 2× (one band)
    parts = (
        secs.group_by("part", maintain_order=True)
        .agg(pl.col("w").first(), med=pl.col("bad").median())
        .with_columns(
            new=(pl.col("w") != pl.col("w").shift(1)).fill_null(True)
            | ((pl.col("med") / pl.col("med").shift(1)).log(2).abs() >= 1).fill_null(False)
        )
        .select("part", piece=pl.col("new").cum_sum())
    )
    worst = v.max() if up else v.min()
    return (
        secs.join(parts, on="part")
        .group_by("piece", maintain_order=True)
        .agg(
            start_ts=pl.col("ts").min(),
            end_ts=pl.col("ts").max() + _1S,
            level=v.median(),
            peak=worst,
            band=pl.col("bad").median().log(2).floor().cast(pl.Int32),
            seconds=v.is_not_null().sum().cast(pl.Int64),
        )
        .with_columns(
            dur_s=(pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds() / 1e6,
            baseline=pl.lit(m),
            ratio=pl.col("level") / m if m else pl.lit(None, pl.Float64),
        )
        .drop("piece")
    )
