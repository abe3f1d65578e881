"""Vectorized text building for the writers: printf-style numbers, times, line layout.

Every writer turns polars columns of numbers into right-aligned fixed-point text exactly
as C's ``printf("%*.*f")`` would (a value wider than its field widens the field), then
joins the fields of a row with one space and the rows with newlines, without a Python
loop over rows. Numbers of a bounded range (percentages, per-second counts) are looked up
in a cached table of pre-formatted strings (a gather: ~10x faster than formatting); wider
values, and columns too short to pay for a table, are formatted arithmetically. Random numbers come from `uniform`/`normal`
(pyarrow's seeded generator: same seed and stream name, same numbers).
"""

from __future__ import annotations

import io
import zlib
from functools import lru_cache

import polars as pl
import pyarrow.compute as pc

TABLE_MAX = 1 << 21  # values up to ~2 M (scaled) use the lookup table


def _arith(ints: pl.Series, width: int, dec: int) -> pl.Series:
    """Format non-negative scaled integers (value × 10^dec) as ``%{width}.{dec}f``."""
    frame = pl.DataFrame({"v": ints})
    if dec == 0:
        expr = pl.col("v").cast(pl.String)
    else:
        unit = 10**dec
        expr = pl.concat_str(
            [
                (pl.col("v") // unit).cast(pl.String),
                pl.lit("."),
                (pl.col("v") % unit).cast(pl.String).str.zfill(dec),
            ]
        )
    return frame.select(expr.str.pad_start(width).alias("s")).to_series()


@lru_cache(maxsize=64)
def _table(width: int, dec: int, size: int) -> pl.Series:
    return _arith(pl.int_range(0, size, dtype=pl.Int64, eager=True), width, dec)


def num(values: pl.Series, width: int, dec: int = 2) -> pl.Series:
    """``printf("%*.*f", width, dec, v)`` for every value (negatives are clipped to 0)."""
    ints = (values.cast(pl.Float64) * 10**dec).round(0).clip(0).cast(pl.Int64)
    top = ints.max()
    top = 0 if top is None else int(top)  # type: ignore[arg-type]
    size = 1 << max(10, top.bit_length())
    if top < TABLE_MAX and ints.len() >= size // 4:  # the table pays for itself
        return _table(width, dec, size).gather(ints)
    return _arith(ints, width, dec)


def signed(values: pl.Series, width: int, dec: int = 0) -> pl.Series:
    """Like `num` but keeps a minus sign (temperatures, deltas)."""
    ints = (values.cast(pl.Float64) * 10**dec).round(0).cast(pl.Int64)
    mag = num(ints.abs().cast(pl.Float64) / 10**dec, 0, dec)
    frame = pl.DataFrame({"m": mag, "neg": ints < 0})
    return frame.select(
        pl.concat_str([pl.when(pl.col("neg")).then(pl.lit("-")).otherwise(pl.lit("")), "m"])
        .str.pad_start(width)
        .alias("s")
    ).to_series()


def text(values: pl.Series, width: int, *, left: bool = False) -> pl.Series:
    """Strings padded to ``width`` (right-aligned like ``%*s``, or ``%-*s``)."""
    s = values.cast(pl.String)
    return s.str.pad_end(width) if left else s.str.pad_start(width)


def join(cols: list[pl.Series | str], sep: str = " ") -> pl.Series:
    """Row-wise ``sep.join(fields)``; a str is a constant field."""
    frame_cols: dict[str, pl.Series] = {}
    exprs: list[pl.Expr] = []
    for i, c in enumerate(cols):
        if isinstance(c, str):
            exprs.append(pl.lit(c))
        else:
            frame_cols[f"c{i}"] = c
            exprs.append(pl.col(f"c{i}"))
    frame = pl.DataFrame(frame_cols) if frame_cols else pl.DataFrame({"_": [0]})
    return frame.select(pl.concat_str(exprs, separator=sep).alias("line")).to_series()


def blocks(
    rows: pl.Series, rows_per_block: int, heads: list[pl.Series], tails: int = 1
) -> pl.Series:
    """Interleave: per block the head lines (one Series of n_blocks strings each), then its
    ``rows_per_block`` data rows (``rows`` is block-major), then ``tails`` blank lines."""
    n_blocks = rows.len() // rows_per_block if rows_per_block else heads[0].len()
    nh = len(heads)
    per = nh + rows_per_block + tails
    src = pl.concat([rows.cast(pl.String), *[h.cast(pl.String) for h in heads], pl.Series([""])])
    blank = rows.len() + nh * n_blocks
    frame = pl.DataFrame({"r": pl.int_range(0, n_blocks * per, dtype=pl.Int64, eager=True)})
    b, j = pl.col("r") // per, pl.col("r") % per
    idx = pl.when(j >= nh + rows_per_block).then(pl.lit(blank))
    for h in range(nh):
        idx = idx.when(j == h).then(rows.len() + h * n_blocks + b)
    idx = idx.otherwise(b * rows_per_block + j - nh)
    return src.gather(frame.select(idx.alias("i")).to_series())


def to_bytes(lines: pl.Series) -> bytes:
    """One line per element, each ending in a newline."""
    if lines.len() == 0:
        return b""
    buf = io.BytesIO()
    pl.DataFrame({"l": lines}).write_csv(
        buf, include_header=False, quote_style="never", line_terminator="\n"
    )
    return buf.getvalue()


def hms(epoch: pl.Series) -> pl.Series:
    """Epoch seconds -> ``HH:MM:SS`` (UTC)."""
    sod = (epoch.cast(pl.Int64) % 86400).alias("s")
    f = pl.DataFrame({"s": sod})
    two = lambda e: e.cast(pl.String).str.zfill(2)  # noqa: E731
    return f.select(
        pl.concat_str(
            [two(pl.col("s") // 3600), two(pl.col("s") // 60 % 60), two(pl.col("s") % 60)],
            separator=":",
        ).alias("t")
    ).to_series()


def strftime(epoch: pl.Series, fmt: str) -> pl.Series:
    """Epoch seconds (int) -> formatted UTC time strings."""
    return (
        (epoch.cast(pl.Int64) * 1_000_000)
        .cast(pl.Datetime("us", "UTC"))
        .dt.strftime(fmt)
        .alias("t")
    )


def _stream_seed(seed: int, stream: str) -> int:
    return zlib.crc32(f"{seed}/{stream}".encode()) & 0x7FFFFFFF


def uniform(n: int, seed: int, stream: str) -> pl.Series:
    """``n`` uniform numbers in [0, 1), reproducible from (seed, stream)."""
    if n <= 0:
        return pl.Series("u", [], dtype=pl.Float64)
    return pl.Series("u", pc.random(n, initializer=_stream_seed(seed, stream)))


def normal(n: int, seed: int, stream: str) -> pl.Series:
    """``n`` standard normal numbers (Box-Muller over two uniform streams)."""
    u1 = uniform(n, seed, stream + "/1").clip(1e-12, 1.0)
    u2 = uniform(n, seed, stream + "/2")
    return ((-2.0 * u1.log()).sqrt() * (6.283185307179586 * u2).cos()).alias("z")
