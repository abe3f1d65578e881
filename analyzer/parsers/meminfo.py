"""``/proc/meminfo`` snapshots and sampled series -> table ``meminfo`` (long format).

Inputs:

- a raw snapshot (``cat /proc/meminfo``, ``snap/meminfo.start.out``): no timestamp, so
  ``ts`` is NULL and the coverage notes say so;
- per-node files (``/sys/devices/system/node/node0/meminfo``: ``Node 0 MemTotal: ...``);
- the capture's sampler series (``series/meminfo.out``, see ``_sampler``):
  ``<epoch_s> /proc/meminfo <raw line>``; ``ts`` comes from ``epoch_s`` (UTC).

Any kernel: the key set changes between versions (no ``MemAvailable`` before 3.14,
``Zswap``/``SecPageTables``/``FileHugePages`` only on newer kernels), so the table is
*long*: one row per (sample, key). Keys keep the kernel spelling (``Active(anon)``,
``HugePages_Total``). Sized keys are in kB (``value_kb``); keys printed without a unit
(``HugePages_*``) are counts (``count``). All meminfo keys are gauges: no rates.

Schema ``meminfo``: ts (UTC, NULL for snapshots), node (Int32, NULL = whole system),
key (str), value_kb (Int64, kB), count (Int64).

Sample input (raw snapshot, then sampler format)::

    MemTotal:       24684084 kB
    MemFree:        21965788 kB
    Active(anon):       1592 kB
    HugePages_Total:       0
    Hugepagesize:       2048 kB

    1764424800.002 /proc/meminfo MemAvailable:   23413520 kB
    1764424800.002 /proc/meminfo Dirty:               492 kB
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks
from analyzer.parsers import _sampler as smp
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

TABLES = {
    "meminfo": table(
        "one row per /proc/meminfo key per sample",
        ("ts", TS, "", "sample time (UTC); NULL for a snapshot without timestamp"),
        ("node", pl.Int32(), "", "NUMA node of a per-node meminfo; NULL = whole system"),
        ("key", pl.Utf8(), "", "kernel key as printed, e.g. MemAvailable, Active(anon)"),
        ("value_kb", pl.Int64(), "kB", "value of a key printed with 'kB'; NULL otherwise"),
        ("count", pl.Int64(), "", "value of a key printed without unit (HugePages_*)"),
    )
}

LINE_RE = r"^(?:Node (\d+) )?([A-Za-z][A-Za-z0-9_()]*):\s*(\d+)(?:\s+(kB))?\s*$"
_HINT_KEYS = ("MemTotal:", "MemFree:", "Buffers:", "Cached:", "SwapTotal:", "Dirty:")


def sniff(head: str, name: str) -> float:
    """High for meminfo text (raw or sampled); the name is only a small bonus."""
    hits = sum(1 for k in _HINT_KEYS if k in head)
    if smp.sampler_share(head) >= 0.5:
        paths = smp.sampler_paths(head)
        share = sum(p.endswith("/meminfo") for p in paths) / max(len(paths), 1)
        return 0.95 if share >= 0.5 and hits >= 2 else 0.0
    score = 0.9 if hits >= 4 else 0.3 * hits / 4
    if "meminfo" in name.lower() and hits:
        score = min(1.0, score + 0.1)
    return score


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse a meminfo snapshot or sampler series (see module doc), block by block
    (`_blocks.Blocks`); each block's rows go to ``ctx.sink`` when there is one."""
    cov = Coverage()
    out = _blocks.Rows(ctx, TABLES)
    timeless = False
    for block in _blocks.Blocks(path):
        rows = _rows(block.lines, ctx, cov)
        timeless = timeless or bool(rows["ts"].null_count())
        if cov.parsed:  # a file that then fails with ParseError has sent nothing
            out.put({"meminfo": rows})
    if cov.parsed == 0 and cov.n_skipped > 0:
        raise ParseError(f"{path.name}: no /proc/meminfo line found")
    if timeless:
        cov.notes.append("snapshot without timestamp: ts is NULL")
    return ParseResult(tables=out.tables({"meminfo": pl.DataFrame()}), coverage=cov)


def _rows(lines: pl.DataFrame, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """The meminfo rows of one block's lines (``line_no``, ``line``), lines counted."""
    df = smp.sampler_runs(
        lines,
        other=pl.col("path_file") != "meminfo",
        path_node=pl.col("path").str.extract(r"/node(\d+)/meminfo$", 1),
    )
    body = pl.col("body")
    long = pl.col("line").str.len_bytes() > ctx.max_line_bytes
    df = df.with_columns(ok=body.str.contains(LINE_RE) & ~long & ~pl.col("other").fill_null(False))
    rest = df.filter(~pl.col("ok"))
    why = (
        pl.when(long)
        .then(pl.lit(smp.reason("skipped", "line too long")))
        .when(body.str.strip_chars() == "")
        .then(pl.lit(smp.reason("structure", "blank")))
        .when(pl.col("other"))
        .then(pl.lit(smp.reason("skipped", "sampler line of another file")))
        .otherwise(pl.lit(smp.reason("skipped", "not a meminfo line")))
    )
    smp.tally(cov, rest.select(why=why))
    df = df.filter("ok")
    smp.count(cov, None, df.height)
    if df.get_column("body").str.starts_with("Node ").any():  # per-node files: "Node 1 Key: ..."
        split, numa = body.str.splitn(" ", 3), body.str.starts_with("Node ")
        df = df.with_columns(
            path_node=pl.when(numa).then(split.struct.field("field_1")).otherwise("path_node"),
            body=pl.when(numa).then(split.struct.field("field_2")).otherwise(body),
        )
    # the line matched LINE_RE: the key ends at the first colon, the value is the digits
    df = df.with_columns(colon=body.str.find(":", literal=True))
    colon = pl.col("colon")
    df = df.with_columns(
        key=body.str.head(colon), value=body.str.slice(colon + 1).str.strip_chars()
    )
    df = df.with_columns(
        unit=pl.col("value").str.ends_with("kB"),
        value=pl.col("value")
        .str.strip_suffix("kB")
        .str.strip_chars_end()
        .cast(pl.Int64, strict=False),
    )
    return df.select(
        "ts",
        "key",
        node=pl.col("path_node").cast(pl.Int32, strict=False),
        value_kb=pl.when("unit").then("value"),
        count=pl.when(~pl.col("unit")).then("value"),
    )
