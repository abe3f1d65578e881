"""iostat, big files: device rows by the column-aligned fast path (:mod:`._sysstat_fast`).

Used by :func:`analyzer.parsers.iostat.parse` for large text files whose first device
table has ``Device`` first (``iostat -x``, any version) and whose numbers use neither a
decimal comma nor ``--human`` suffixes (decided on the same sample of lines the regular
path uses). Device rows of that table are found and typed chunk by chunk: the row is as
wide as the header, has blanks at every value slot start, and its device name ends (at
its first blank) before the first value's slot does; that blank and the slot starts become
CSV separators. Every other line (banner, stamps, ``avg-cpu`` blocks, headers, blanks,
rows of other tables, rows that fail a check) goes through iostat's regular classifier as
before, and a fast row is kept only if the last structural line above it is a device
header of that same table; otherwise the whole file is re-read by the regular path. The
result is the regular path's, row for row (tests/parsers/test_iostat_fast.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import base

_MARKS = ["dev_hdr", "blank", "banner", "avg", "cpu", "ts"]


def parse(
    path: Path, ctx: base.ParseContext, cov: base.Coverage, head: str, hooks: Any
) -> tuple[pl.DataFrame, pl.DataFrame, int] | None:
    """``(classified rest lines with reports, typed fast device rows, total lines)``, or
    None when the file is not for the fast path (nothing was recorded in ``cov``)."""
    lines = pl.DataFrame({"line": head.split("\n")[:-1]}).with_row_index("line_no", offset=1)
    hd = hooks.reports(hooks.classify_lines(lines))
    sample = hd.filter(pl.col("kind").is_in(["cpu", "other"]))["line"].head(50)
    if sample.len() < 50:
        return None
    text = "\n".join(sample)
    if re.search(hooks.human_re, text) or s.uses_decimal_comma(text):
        return None
    hdr = hd.filter(pl.col("kind") == "dev_hdr").head(1)
    if not hdr.height:
        return None
    hkey, hline = hdr.get_column("hkey")[0], hdr.get_column("line")[0]
    lay = s.header_layout(hline)
    names = lay.names
    if names[0] not in ("Device", "Device:") or len(names) < 3 or lay.starts[0] != 0:
        return None
    mapped = [(i, c.device_column(names[i])) for i in range(1, len(names))]
    seps = tuple(lay.ends[1:-1])
    schema: dict[str, pl.DataType] = {"device": pl.String}
    for i, col in mapped:
        schema[f"_{i}"] = pl.Float64 if col is not None else pl.String
    fast_parts, rest_parts, total = [], [], 0
    for chunk in fast.iter_chunks(path, fast.CHUNK_BYTES):
        total += chunk.n
        f = _rows(chunk, lay.width, lay.ends[1], seps, schema, mapped)
        rest = np.ones(chunk.n, dtype=bool)
        rest[f.get_column("line_no").to_numpy().astype(np.int64) - chunk.first_line] = False
        fast_parts.append(f)
        rest_parts.append(chunk.lines(np.flatnonzero(rest)))
    df = hooks.reports(hooks.classify_lines(pl.concat(rest_parts)))
    rows = pl.concat(fast_parts)
    marks = (
        df.filter(pl.col("kind").is_in(_MARKS))
        .select(pl.col("line_no").alias("_m"), "kind", pl.col("hkey").alias("_h"), "report")
        .sort("_m")
    )
    rows = rows.join_asof(marks, left_on="line_no", right_on="_m", strategy="backward")
    governed = (pl.col("kind") == "dev_hdr") & (pl.col("_h") == hkey)
    if rows.height and not rows.select(governed.fill_null(False).all()).item():
        return None
    casts = []
    for i, col in mapped:
        if col is None:
            continue
        name, factor, is_int = col
        v = pl.col(f"_{i}") * factor
        casts.append((v.round(0).cast(pl.Int64) if is_int else v).alias(name))
    out = rows.select("line_no", "report", "device", pl.lit(False).alias("is_group"), *casts)
    return df, out, total


def _rows(
    chunk: fast.Chunk,
    width: int,
    first_end: int,
    seps: tuple[int, ...],
    schema: dict[str, pl.DataType],
    mapped: list,
) -> pl.DataFrame:
    """Fast device rows of one chunk: line_no, device, _1.. (valid ones only)."""
    rows = fast.candidates(chunk, width)
    rows = rows[fast.blank_at(chunk, rows, seps)]
    if rows.size:
        win = chunk.buf[chunk.starts[rows][:, None] + np.arange(first_end)[None, :]] == fast.SP
        p = win.argmax(axis=1)
        ok = win.any(axis=1) & (p >= 1) & (p < first_end - 1)
        rows, p = rows[ok], p[ok]
    else:
        p = np.zeros(0, dtype=np.int64)
    frame, kept = fast.read_rows(chunk, rows, seps, schema, row_seps=p)
    need = [pl.col("device").is_not_null()] + [
        pl.col(f"_{i}").is_not_null() for i, col in mapped if col is not None
    ]
    return frame.with_columns(pl.Series("line_no", chunk.line_nos(kept), dtype=pl.UInt32)).filter(
        pl.all_horizontal(need)
    )
