"""``/proc/buddyinfo`` -> ``buddyinfo``: free blocks per order, per NUMA node and zone.

All kernels print ``Node <n>, zone <name>`` then the number of free blocks of order 0,
1, 2... (block = 2^order pages; 11 orders on x86-64, more with a larger
``MAX_ORDER``/``MAX_PAGE_ORDER``). Fragmentation shows as low counts at high orders.
``ts``/``snapshot``: capture phase time from the name (``buddyinfo.start.out``), else
NULL (noted). One row per (node, zone, order); columns in ``TABLES``.

Sample input (``snap/buddyinfo.start.out``)::

    Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3
    Node 0, zone   Normal      2      2  35959  22730   6844   1820    247    241     31      8     27
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _snap_common as snap
from analyzer.parsers import base

TABLES: dict[str, base.Table] = {
    "buddyinfo": base.table(
        "one row per (node, zone, order) of a /proc/buddyinfo snapshot",
        *snap.SNAP_COLUMNS,
        ("node", pl.Int32, "", "NUMA node"),
        ("zone", pl.String, "", "memory zone (DMA, DMA32, Normal, Movable...)"),
        ("order", pl.Int32, "", "block order: a block is 2^order pages"),
        ("free_blocks", pl.Int64, "", "free blocks of that order"),
    )
}

ROW = r"^Node (\d+), zone\s+(\S+)((?:\s+\d+)+)\s*$"


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is /proc/buddyinfo."""
    lns = [ln for ln in head.splitlines()[:50] if ln.strip()]
    share = sum(1 for ln in lns if re.match(ROW, ln)) / len(lns) if lns else 0.0
    return 0.95 if share >= 0.8 else 0.0


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse /proc/buddyinfo into ``buddyinfo``."""
    cov = base.Coverage()
    df = snap.lines(path, cov.notes)
    g = pl.col("line").str.extract_groups(ROW)
    df = df.with_columns(
        snap.verdicts(df, g.struct.field("1").is_not_null(), path).alias("what"),
        g.struct.field("1").cast(pl.Int32, strict=False).alias("node"),
        g.struct.field("2").alias("zone"),
        g.struct.field("3").str.extract_all(r"\d+").alias("free_blocks"),  # any blanks between
    )
    if df.height and not (df["what"] == "parsed").any() and (df["what"] == "other").any():
        raise ParseError(f"{ctx.file_name or path.name}: no /proc/buddyinfo line")
    snap.account(cov, df["what"], snap.REASONS)
    phase, ts = snap.snapshot_time(path, ctx, cov.notes)
    rows = (
        df.filter(pl.col("what") == "parsed")
        .with_columns(
            pl.int_ranges(0, pl.col("free_blocks").list.len(), dtype=pl.Int32).alias("order")
        )
        .explode(["free_blocks", "order"])
        .with_columns(pl.col("free_blocks").cast(pl.Int64, strict=False))  # > 2**63: NULL
    )
    return base.ParseResult(snap.conformed(TABLES, {"buddyinfo": rows}, phase, ts), cov)
