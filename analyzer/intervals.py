"""The one interval helper every detector uses (STYLE: perfetto's `_interval_intersect`).

A *window* is a half-open time interval ``[start, end)`` of UTC datetimes; a *windows
frame* is a polars DataFrame with columns ``start`` and ``end`` (Datetime, UTC), sorted,
non-overlapping unless said otherwise.

- `runs`: where a condition holds on a sampled series, with hysteresis (enter above one
  threshold, leave below another), a minimum duration and a merge gap.
- `merge`: merge windows closer than a gap.
- `intersect`, `overlap_s`, `iou`: window arithmetic.

A sample at time ``t`` of a series with step ``dt`` describes ``[t, t + dt)``: a run's
end is the last matching sample's time plus its step.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

Window = tuple[datetime, datetime]
_EMPTY = pl.DataFrame(schema={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")})


def empty_windows() -> pl.DataFrame:
    return _EMPTY.clone()


def runs(
    ts: pl.Series,
    values: pl.Series,
    *,
    enter: float,
    leave: float | None = None,
    above: bool = True,
    step_s: float = 1.0,
    min_duration_s: float = 0.0,
    merge_gap_s: float = 0.0,
) -> pl.DataFrame:
    """Windows where ``values`` crosses ``enter`` and stays until it crosses ``leave``.

    With ``above=True`` a run starts at a sample ``>= enter`` and continues while samples
    stay ``> leave`` (``leave`` defaults to ``enter``: no hysteresis); ``above=False``
    mirrors it for "below" conditions. NULL samples end a run (missing data is never
    taken as evidence). Runs separated by at most ``merge_gap_s`` are merged, then runs
    shorter than ``min_duration_s`` are dropped. Vectorized: the hysteresis state is a
    forward fill of enter/leave marks.
    """
    leave = enter if leave is None else leave
    v = pl.col("v")
    if above:
        mark = pl.when(v >= enter).then(1).when(v <= leave if leave != enter else v < enter).then(0)
    else:
        mark = pl.when(v <= enter).then(1).when(v >= leave if leave != enter else v > enter).then(0)
    frame = (
        pl.DataFrame({"ts": ts, "v": values})
        .sort("ts")
        .with_columns(state=pl.when(v.is_null()).then(0).otherwise(mark.otherwise(None)))
        .with_columns(pl.col("state").forward_fill().fill_null(0))
        .with_columns(run=pl.col("state").rle_id())
        .filter(pl.col("state") == 1)
        .group_by("run", maintain_order=True)
        .agg(start=pl.col("ts").min(), last=pl.col("ts").max())
        .select("start", end=pl.col("last") + pl.duration(microseconds=int(step_s * 1e6)))
    )
    frame = merge(
        frame.cast({"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")}),
        merge_gap_s,
    )
    if min_duration_s > 0:
        frame = frame.filter(
            (pl.col("end") - pl.col("start")).dt.total_microseconds() >= min_duration_s * 1e6
        )
    return frame


def merge(windows: pl.DataFrame, gap_s: float = 0.0) -> pl.DataFrame:
    """Merge windows that overlap or are separated by at most ``gap_s`` seconds."""
    if windows.height == 0:
        return empty_windows()
    gap = pl.duration(microseconds=int(gap_s * 1e6))
    return (
        windows.sort("start")
        .with_columns(reach=pl.col("end").cum_max())
        .with_columns(new=(pl.col("start") > pl.col("reach").shift(1) + gap).fill_null(True))
        .with_columns(group=pl.col("new").cum_sum())
        .group_by("group", maintain_order=True)
        .agg(start=pl.col("start").min(), end=pl.col("end").max())
        .select("start", "end")
    )


def intersect(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Pairwise intersections of two windows frames (non-empty ones only)."""
    if a.height == 0 or b.height == 0:
        return empty_windows()
    return (
        a.join(b, how="cross", suffix="_b")
        .select(start=pl.max_horizontal("start", "start_b"), end=pl.min_horizontal("end", "end_b"))
        .filter(pl.col("end") > pl.col("start"))
        .sort("start")
    )


def overlap_s(a: Window, b: Window) -> float:
    """Seconds two windows share (0 when disjoint)."""
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return max((hi - lo) / timedelta(seconds=1), 0.0)


def iou(a: Window, b: Window) -> float:
    """Intersection over union of two windows (1.0 = identical)."""
    inter = overlap_s(a, b)
    union = (max(a[1], b[1]) - min(a[0], b[0])) / timedelta(seconds=1)
    return inter / union if union > 0 else 0.0


def as_windows(frame: pl.DataFrame) -> list[Window]:
    """A windows frame as a list of (start, end) tuples."""
    return list(zip(frame["start"].to_list(), frame["end"].to_list(), strict=True))


def periodicity(
    starts: list[datetime], *, min_count: int = 3, max_cv: float = 0.25
) -> tuple[float, float] | None:
    """``(period_s, cv)`` when at least ``min_count`` window starts repeat evenly, else None.

    The period is the median spacing between consecutive starts; each spacing is divided
    by its nearest whole number of periods (so one missed occurrence does not break the
    series) and the coefficient of variation of those per-period spacings must stay below
    ``max_cv``.
    """
    if len(starts) < min_count:
        return None
    s = pl.Series(sorted(starts)).cast(pl.Datetime("us", "UTC"))
    gaps = s.diff().drop_nulls().dt.total_microseconds().cast(pl.Float64) / 1e6
    period = float(gaps.median())  # type: ignore[arg-type]
    if period <= 0:
        return None
    k = (gaps / period).round(0)
    if float(k.min()) < 1:  # type: ignore[arg-type]
        return None
    per = gaps / k
    mean = float(per.mean())  # type: ignore[arg-type]
    cv = float(per.std(ddof=0)) / mean if mean > 0 else 1.0  # type: ignore[arg-type]
    return (mean, cv) if cv < max_cv else None
