"""``stall_pct`` of PSI rows, block by block (private helper of ``psi``).

``stall_pct`` = 100 × Δtotal_us / Δt_us from the previous sample of the same path and
kind (the one of an earlier block included: ``last``, one row per path and kind with
``path``, ``kind``, ``total_us``, ``ts``); NULL for a first sample, Δtotal < 0 or Δt <= 0.

Two routes to the same values: `stall` (polars, any rows) and `fast_block` (numpy, for a
block whose PSI rows were all typed from their bytes: `_psi_fast.Fast`). Both compute
``100.0 * Δtotal / Δt`` in doubles from the exact integer differences.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzer.parsers import _psi_fast, base

_KEY = ["path", "kind"]
LAST_SCHEMA = {"path": pl.String, "kind": pl.String, "total_us": pl.Int64, "ts": base.TS}


def stall(
    typed: pl.DataFrame, last: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """``typed`` (with ``path``, ``kind``, ``total_us``, ``ts``) with ``stall_pct``, and
    the new ``last``."""
    both = typed.with_columns(pl.lit(False).alias("_prev"))
    if last is not None:
        both = pl.concat([last.with_columns(pl.lit(True).alias("_prev")), both], how="diagonal")
    d_total = pl.col("total_us") - pl.col("total_us").shift(1).over(_KEY)
    d_t = (pl.col("ts") - pl.col("ts").shift(1).over(_KEY)).dt.total_microseconds()
    pct = pl.when((d_total >= 0) & (d_t > 0)).then(100.0 * d_total / d_t)
    both = both.with_columns(pct.alias("stall_pct"))
    if both.height:
        last = both.group_by(_KEY, maintain_order=True).agg(
            pl.col("total_us").last(), pl.col("ts").last()
        )
    return both.filter(~pl.col("_prev")).drop("_prev"), last


def fast_block(
    f: _psi_fast.Fast, source: pl.Series, resource: pl.Series, last: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The ``psi`` rows of a block whose PSI rows are all ``f`` (``source``,
    ``resource``: those of each of ``f.paths``), and the new ``last``."""
    n, k = f.height, 2 * len(f.paths)
    key = f.path_id * 2 + f.full
    prev = np.full(n, -1, dtype=np.int64)
    p = f.period
    if p and np.unique(key[:p]).size == p:  # each period holds each key once
        prev[p:] = np.arange(n - p)
    else:
        order = np.argsort(key, kind="stable")
        same = key[order][1:] == key[order][:-1]
        prev[order[1:][same]] = order[:-1][same]
    has = prev >= 0
    total, ts = f.total_us, f.epoch_us
    p_total = np.where(has, total[np.maximum(prev, 0)], 0)
    p_ts = np.where(has, ts[np.maximum(prev, 0)], 0)
    known = has.copy()
    if last is not None and last.height:  # the first sample of a key: from earlier blocks
        lk = _keys(last, f.paths)
        tot, when = last.get_column("total_us"), last.get_column("ts").dt.epoch("us")
        ok = (lk >= 0) & tot.is_not_null().to_numpy() & when.is_not_null().to_numpy()
        lt, lts = tot.fill_null(0).to_numpy(), when.fill_null(0).to_numpy()
        by_key = np.full(k, -1, dtype=np.int64)
        by_key[lk[ok]] = np.flatnonzero(ok)
        first = np.flatnonzero(~has)
        src = by_key[key[first]]
        found = first[src >= 0]
        p_total[found] = lt[src[src >= 0]]
        p_ts[found] = lts[src[src >= 0]]
        known[found] = True
    d_total, d_t = total - p_total, ts - p_ts
    valid = known & (d_total >= 0) & (d_t > 0)
    pct = np.full(n, np.nan)
    pct[valid] = 100.0 * d_total[valid].astype(np.float64) / d_t[valid].astype(np.float64)
    ids = pl.Series(f.path_id)
    frame = pl.DataFrame(
        {
            "ts": pl.from_epoch(pl.Series(ts), time_unit="us").dt.replace_time_zone("UTC"),
            "source": source.gather(ids),
            "resource": resource.gather(ids),
            "kind": _psi_fast._KINDS.gather(f.full.astype(np.uint32)),
            "avg10_pct": f.avg[0],
            "avg60_pct": f.avg[1],
            "avg300_pct": f.avg[2],
            "total_us": total,
            "stall_pct": pl.Series(pct, nan_to_null=True),
        }
    )
    return frame, _last(f, key, last)


def _keys(last: pl.DataFrame, paths: list[str]) -> np.ndarray:
    """The key (path id × 2 + full) of each ``last`` row; -1 for a path not in ``paths``."""
    ids = {p: i for i, p in enumerate(paths)}
    kinds = {"some": 0, "full": 1}
    return np.array(
        [
            ids[p] * 2 + kinds[kd] if p in ids and kd in kinds else -1
            for p, kd in zip(last.get_column("path"), last.get_column("kind"), strict=True)
        ],
        dtype=np.int64,
    )


def _last(f: _psi_fast.Fast, key: np.ndarray, last: pl.DataFrame | None) -> pl.DataFrame:
    """``last`` after the block: its last row of each key, earlier blocks' other keys."""
    if f.period and np.unique(key[: f.period]).size == f.period:
        rows = np.arange(key.size - f.period, key.size)
    else:
        _, at = np.unique(key[::-1], return_index=True)
        rows = np.sort(key.size - 1 - at)
    new = pl.DataFrame(
        {
            "path": pl.Series(f.paths, dtype=pl.String).gather(f.path_id[rows]),
            "kind": _psi_fast._KINDS.gather(f.full[rows].astype(np.uint32)),
            "total_us": f.total_us[rows],
            "ts": pl.from_epoch(pl.Series(f.epoch_us[rows]), time_unit="us").dt.replace_time_zone(
                "UTC"
            ),
        }
    )
    if last is None:
        return new
    return pl.concat([last.join(new, on=_KEY, how="anti", nulls_equal=True), new])
