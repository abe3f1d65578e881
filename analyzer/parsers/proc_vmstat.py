"""``/proc/vmstat`` snapshots and sampled series -> table ``proc_vmstat`` (long format).

Inputs:

- a raw snapshot (``cat /proc/vmstat``): no timestamp, so ``ts`` is NULL (coverage note)
  and no rate can be computed;
- the capture's sampler series (``series/proc_vmstat.out``, see ``_sampler``):
  ``<epoch_s> /proc/vmstat <key> <value>``; per-node files
  (``/sys/devices/system/node/nodeN/vmstat``) fill ``node``.

The key set changes a lot between kernels, so the table is *long*: one row per
(sample, key). Keys are classified: ``nr_*`` keys are gauges (pages now: ``nr_dirty``,
``nr_free_pages``...) except the cumulative ``nr_dirtied``, ``nr_written``,
``nr_foll_pin_*`` and ``nr_tlb_*``; ``workingset_nodes`` is a gauge too; every other key
(``pgfault``, ``pswpin``, ``oom_kill``, ``numa_hit``, ``compact_*``, ``thp_*``...) is an
event counter since boot. For counters ``rate_per_s`` = Δvalue / Δts between two
consecutive samples of the same (node, key); it is NULL on the first sample, for gauges,
when ts is unknown, and when the counter went backwards (a reset: reboot, or a
wrap), which is also counted in the coverage notes.

Schema ``proc_vmstat``: ts (UTC), node (Int32), key (str), value (Int64, pages or
events as the kernel prints), counter (bool), rate_per_s (Float64, per second).

Sample input (raw, then sampler)::

    nr_free_pages 1276842
    nr_dirty 123
    pgpgin 1203994
    pgfault 29881432
    oom_kill 0

    1764424800.002 /proc/vmstat pgmajfault 8123
    1764424801.004 /proc/vmstat pgmajfault 8190
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks
from analyzer.parsers import _sampler as smp
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

TABLES = {
    "proc_vmstat": table(
        "one row per /proc/vmstat key per sample",
        ("ts", TS, "", "sample time (UTC); NULL for a snapshot without timestamp"),
        ("node", pl.Int32(), "", "NUMA node of a per-node vmstat file; NULL = whole system"),
        ("key", pl.Utf8(), "", "kernel key, e.g. pgmajfault, nr_dirty"),
        ("value", pl.Int64(), "", "value as printed (pages for nr_* gauges, else events)"),
        ("counter", pl.Boolean(), "", "true for cumulative event counters, false for gauges"),
        ("rate_per_s", pl.Float64(), "1/s", "Δvalue/Δts for counters; NULL first/reset/gauge"),
    )
}

LINE_RE = r"^([a-z][a-z0-9_]*) (-?\d+)\s*$"
#: nr_* keys that are cumulative counters, not gauges.
NR_COUNTERS = ("nr_dirtied", "nr_written", "nr_foll_pin_acquired", "nr_foll_pin_released")
GAUGES = ("workingset_nodes",)
_HINT_KEYS = ("nr_free_pages", "nr_dirty ", "pgpgin", "pgfault", "pgmajfault", "numa_hit")


def is_counter(key: pl.Expr) -> pl.Expr:
    """True for event counters, False for gauges (see module doc)."""
    nr_gauge = (
        key.str.starts_with("nr_") & ~key.is_in(NR_COUNTERS) & ~key.str.starts_with("nr_tlb_")
    )
    return ~(nr_gauge | key.is_in(GAUGES))


def sniff(head: str, name: str) -> float:
    """High for /proc/vmstat text (raw or sampled)."""
    hits = sum(1 for k in _HINT_KEYS if k in head)
    if smp.sampler_share(head) >= 0.5:
        paths = smp.sampler_paths(head)
        share = sum(p.endswith("/vmstat") for p in paths) / max(len(paths), 1)
        return 0.95 if share >= 0.5 and hits >= 2 else 0.0
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    if not lines:
        return 0.0
    shaped = sum(1 for ln in lines if ln.split(" ")[0].isidentifier() and len(ln.split()) == 2)
    nr = sum(1 for ln in lines if ln.startswith("nr_"))
    if shaped / len(lines) < 0.9 or hits < 3 or nr < 3:
        return 0.0
    return 0.95 if "vmstat" in name.lower() else 0.9


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse a /proc/vmstat snapshot or sampler series (see module doc), block by block
    (`_blocks.Blocks`); each block's rows go to ``ctx.sink`` when there is one. The last
    sample of every (node, key) carries over to the next block for the rates."""
    cov = Coverage()
    out = _blocks.Rows(ctx, TABLES)
    prev = pl.DataFrame(schema=_ROW)
    resets, timeless = 0, False
    for block in _blocks.Blocks(path):
        rows = _rows(block.lines, ctx, cov).filter(pl.col("value").is_not_null())
        rows = rows.with_columns(counter=is_counter(pl.col("key")))
        rows, prev, n = _rates(rows, prev)
        resets += n
        timeless = timeless or bool(rows["ts"].null_count())
        if cov.parsed:  # a file that then fails with ParseError has sent nothing
            out.put({"proc_vmstat": rows})
    if cov.parsed == 0 and cov.n_skipped > 0:
        raise ParseError(f"{path.name}: no /proc/vmstat line found")
    if resets:
        cov.notes.append(f"{resets} counter reset(s) (value went down): rate_per_s NULL there")
    if timeless:
        cov.notes.append("snapshot without timestamp: ts is NULL, no rates")
    return ParseResult(tables=out.tables({"proc_vmstat": pl.DataFrame()}), coverage=cov)


_ROW = {
    "ts": TS,
    "node": pl.Int32(),
    "key": pl.String(),
    "value": pl.Int64(),
    "counter": pl.Boolean(),
}


def _rows(lines: pl.DataFrame, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """Rows (ts, node, key, value) of one block's lines (``line_no``, ``line``), lines counted."""
    df = smp.sampler_runs(
        lines,
        other=pl.col("path_file") != "vmstat",
        node=pl.col("path").str.extract(r"/node(\d+)/vmstat$", 1).cast(pl.Int32, strict=False),
    )
    body = pl.col("body")
    long = pl.col("line").str.len_bytes() > ctx.max_line_bytes
    df = df.with_columns(ok=body.str.contains(LINE_RE) & ~long & ~pl.col("other").fill_null(False))
    why = (
        pl.when(long)
        .then(pl.lit(smp.reason("skipped", "line too long")))
        .when(body.str.strip_chars() == "")
        .then(pl.lit(smp.reason("structure", "blank")))
        .when(pl.col("other"))
        .then(pl.lit(smp.reason("skipped", "sampler line of another file")))
        .otherwise(pl.lit(smp.reason("skipped", "not a /proc/vmstat line")))
    )
    smp.tally(cov, df.filter(~pl.col("ok")).select(why=why))
    df = df.filter("ok")
    smp.count(cov, None, df.height)
    df = df.with_columns(space=body.str.find(" ", literal=True))  # LINE_RE: "<key> <value>"
    space = pl.col("space")
    return df.select(
        "ts",
        "node",
        key=body.str.head(space),
        value=body.str.slice(space + 1).str.strip_chars_end().cast(pl.Int64, strict=False),
    )


def _rates(df: pl.DataFrame, prev: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Add ``rate_per_s`` per (node, key) in file order, after the rows ``prev`` (the last
    row of every (node, key) so far). Returns the frame, the new ``prev`` and #resets.

    Samplers write in time order, so no sort is needed; a step back in time gives
    Δts <= 0 and a NULL rate. The sampler prints the same keys in the same order every
    sample: when the rows repeat with a period of K distinct keys, the previous sample of
    a key is simply K rows up (checked, else a group-wise shift).
    """
    both = pl.concat([prev, df.select(*_ROW)]) if prev.height else df.select(*_ROW)
    period = _period(both)
    if period:
        value, ts = pl.col("value").shift(period), pl.col("ts").shift(period)
        last = both.tail(period)
    else:
        keys = ["node", "key"]
        value, ts = pl.col("value").shift(1).over(keys), pl.col("ts").shift(1).over(keys)
        last = both.unique(subset=keys, keep="last", maintain_order=True)
    timed = pl.col("ts").is_not_null()
    rated = both.with_columns(
        dv=pl.when(timed).then(pl.col("value") - value),
        dt=(pl.col("ts") - ts).dt.total_microseconds() / 1e6,
    ).with_columns(
        rate_per_s=pl.when(pl.col("counter") & (pl.col("dv") >= 0) & (pl.col("dt") > 0)).then(
            pl.col("dv") / pl.col("dt")
        ),
        reset=pl.col("counter") & (pl.col("dv") < 0) & pl.col("dt").is_not_null(),
    )
    rated = rated.slice(prev.height)
    resets = int(rated["reset"].sum())
    return rated.drop("dv", "dt", "reset"), last, resets


def _period(df: pl.DataFrame) -> int:
    """K when the (node, key) of row i is that of row i - K for every row and the first K
    rows are distinct (then row i - K is the previous row of the same key); else 0."""
    if df.height < 2:
        return 0
    key, node = df.get_column("key"), df.get_column("node")
    again = (key.slice(1) == key[0]).arg_true()
    k = int(again[0]) + 1 if again.len() else df.height
    head = df.head(k).select(pl.struct("node", "key").n_unique()).item()
    if head != k:
        return 0
    if k == df.height:
        return k
    same = (key.slice(k) == key.head(-k)) & node.slice(k).eq_missing(node.head(-k))
    return k if same.all() else 0
