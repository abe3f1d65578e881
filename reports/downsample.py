"""Reduce long time series for charts without hiding spikes.

Every frame here carries ``x`` in epoch milliseconds (UTC). Rules from PERFORMANCE-NOTES: a
series is reduced to about ``max_points`` points by keeping each bucket's minimum *and*
maximum (averaging would hide a one-sample spike); gaps in sampling become explicit breaks
so plotly does not draw a straight line across a stretch without data. Nothing is
interpolated: every point sent is a measured sample.
"""

from __future__ import annotations

import polars as pl

MAX_POINTS = 1200  # ≈ one min and one max per pixel column of a 1200 px chart


def _minmax_rows(data: pl.DataFrame, y: str, x: str, max_points: int) -> pl.Series:
    """Row numbers (sorted) of each bucket's min and max of ``y``; ``data`` sorted by x."""
    buckets = max(max_points // 2, 1)
    lo, hi = data[x].min(), data[x].max()
    span = int(hi - lo) + 1  # type: ignore[operator]
    idx = (
        data.select(x, y)
        .with_row_index("_i")
        .drop_nulls(y)
        .with_columns(((pl.col(x) - lo) * buckets // span).alias("_b"))
        .group_by("_b")
        .agg(
            pl.col("_i").sort_by(pl.col(y)).first().alias("_min"),
            pl.col("_i").sort_by(pl.col(y)).last().alias("_max"),
        )
    )
    return pl.concat([idx["_min"], idx["_max"]]).unique().sort()


def minmax_downsample(
    frame: pl.DataFrame, y: str, *, x: str = "x", max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """Reduce ``frame[x, y]`` to at most ~``max_points`` rows keeping each bucket's min and max.

    Buckets are equal slices of the x range; within a bucket the rows holding the minimum and
    the maximum of ``y`` are kept in their original order, so a one-sample spike survives.

    >>> f = pl.DataFrame({"x": range(10_000), "v": [0.0] * 10_000})
    >>> f = f.with_columns(v=pl.when(pl.col("x") == 5_001).then(99.0).otherwise("v"))
    >>> out = minmax_downsample(f, "v", max_points=100)
    >>> out.height <= 100, out["v"].max()
    (True, 99.0)
    """
    data = frame.select(x, y).drop_nulls(y).sort(x)
    if data.height <= max_points:
        return data
    return data.select(pl.all().gather(_minmax_rows(data, y, x, max_points)))


def rows_downsample(
    frame: pl.DataFrame, key: str, *, x: str = "x", max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """Like :func:`minmax_downsample` but keeps whole rows, chosen by ``key``'s min and max.

    For stacked series (CPU us/sy/wa/id) whose columns must stay aligned on one x and sum to
    100: the busiest and idlest sample of each bucket are kept.
    """
    data = frame.sort(x)
    if data.height <= max_points:
        return data
    return data.select(pl.all().gather(_minmax_rows(data, key, x, max_points)))


def gap_breaks(
    frame: pl.DataFrame, *, x: str = "x", factor: float = 3.0, min_gap: int = 0
) -> list[int]:
    """x positions just after each gap longer than ``factor`` × the median sample interval
    (and longer than ``min_gap`` ms: two bucket widths for downsampled data, whose points
    are irregularly spaced by construction).

    A row with this x and null values makes plotly break the line instead of drawing a
    straight segment across a stretch without data (an interrupted capture).

    >>> gap_breaks(pl.DataFrame({"x": [0, 1000, 2000, 3000, 60_000, 61_000]}))
    [3001]
    >>> gap_breaks(pl.DataFrame({"x": [0, 1000, 2000, 3000, 60_000, 61_000]}), min_gap=60_000)
    []
    """
    xs = frame.select(pl.col(x).unique().sort()).to_series()
    if xs.len() < 3:
        return []
    diff = xs.diff()
    median = diff.median()
    if not median:
        return []
    limit = max(float(median) * factor, float(min_gap))  # type: ignore[arg-type]
    starts = xs.filter(diff.shift(-1) > limit)
    return [int(v) + 1 for v in starts.to_list()]


def bucket_ms(x_lo: int, x_hi: int, columns: int, *, floor_ms: int = 1000) -> int:
    """Width in ms of ``columns`` equal time buckets over ``[x_lo, x_hi]`` (heatmaps).

    >>> bucket_ms(0, 86_400_000, 1200)
    72001
    >>> bucket_ms(0, 60_000, 1200)
    1000
    """
    return max(floor_ms, (int(x_hi) - int(x_lo)) // max(columns, 1) + 1)


def minmax_sql(
    source: str,
    values: list[str],
    *,
    points: int,
    x_range: tuple[int, int] | None = None,
    grouped: bool = False,
) -> str:
    """SQL reducing ``source`` (columns x, [g,] and ``values``) to each bucket's min and max.

    The same rule as :func:`minmax_downsample`, done by DuckDB where the data is, so a day of
    16 disks × 4 metrics never travels to Python: per value column (``m`` = its index in
    ``values``) and group ``g``, ``points // 2`` equal time buckets over ``x_range`` (else
    the data's own span), each keeping the sample with the minimum and the sample with the
    maximum (real samples at their real times). Result columns: m, g, x, v.
    """
    buckets = max(points // 2, 1)
    g = "g" if grouped else "NULL"
    unpivot = ", ".join(values)
    if x_range is not None:
        lo, span = int(x_range[0]), max(int(x_range[1]) - int(x_range[0]), 1) + 1
        bounds = f"SELECT {lo}::BIGINT AS lo, {span}::BIGINT AS span"
    else:
        bounds = "SELECT min(x) AS lo, max(x) - min(x) + 1 AS span FROM long"
    names = ", ".join(f"'{v}'" for v in values)
    return (
        f"WITH src AS ({source}), "
        f"long AS (SELECT x, {g} AS g, list_position([{names}], metric) - 1 AS m, v "
        f"FROM (UNPIVOT (SELECT x, {g} AS g, {unpivot} FROM src) ON {unpivot} INTO NAME metric VALUE v) "
        "WHERE v IS NOT NULL AND x IS NOT NULL), "
        f"bounds AS ({bounds}), "
        f"agg AS (SELECT m, g, (x - lo) * {buckets} // span AS b, arg_min(x, v) AS xa, min(v) AS va, "
        "arg_max(x, v) AS xb, max(v) AS vb FROM long, bounds GROUP BY ALL) "
        "SELECT m, g, xa AS x, va AS v FROM agg UNION SELECT m, g, xb, vb FROM agg ORDER BY m, g, x"
    )


def bucket_gap(x_range: tuple[int, int] | None, frame: pl.DataFrame, points: int) -> int:
    """The smallest gap (ms) that downsampling to ``points`` cannot create: two bucket widths."""
    if x_range is not None:
        span = int(x_range[1]) - int(x_range[0])
    elif frame.height:
        span = int(frame["x"].max()) - int(frame["x"].min())  # type: ignore[arg-type]
    else:
        return 0
    return 2 * (span // max(points // 2, 1) + 1)
