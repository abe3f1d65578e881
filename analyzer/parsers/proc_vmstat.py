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
from analyzer.parsers import _sampler as smp
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, read_lines, table

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
    """Parse a /proc/vmstat snapshot or sampler series (see module doc)."""
    cov = Coverage()
    lf = smp.split_sampler(read_lines(path))
    body = pl.when(pl.col("s_ok")).then(pl.col("raw")).otherwise(pl.col("line"))
    g = body.str.extract_groups(LINE_RE)
    tok = lf.with_columns(
        node=pl.col("path").str.extract(r"/node(\d+)/vmstat$", 1),
        key=g.struct.field("1"),
        value=g.struct.field("2"),
    ).with_columns(
        why=pl.when(pl.col("line").str.len_bytes() > ctx.max_line_bytes)
        .then(pl.lit(smp.reason("skipped", "line too long")))
        .when(body.str.strip_chars() == "")
        .then(pl.lit(smp.reason("structure", "blank")))
        .when(pl.col("s_ok") & ~pl.col("path_file").eq("vmstat"))
        .then(pl.lit(smp.reason("skipped", "sampler line of another file")))
        .when(pl.col("key").is_null())
        .then(pl.lit(smp.reason("skipped", "not a /proc/vmstat line")))
    )
    df = tok.select("line_no", "ts", "node", "key", "value", "why").collect(engine="streaming")
    smp.tally(cov, df)
    if cov.parsed == 0 and cov.n_skipped > 0:
        raise ParseError(f"{path.name}: no /proc/vmstat line found")
    out = (
        df.filter(pl.col("why").is_null())
        .select(
            "line_no",
            "ts",
            pl.col("node").cast(pl.Int32, strict=False),
            "key",
            pl.col("value").cast(pl.Int64, strict=False),
            counter=is_counter(pl.col("key")),
        )
        .filter(pl.col("value").is_not_null())
    )
    out, resets = _rates(out)
    if resets:
        cov.notes.append(f"{resets} counter reset(s) (value went down): rate_per_s NULL there")
    if out.height and out["ts"].null_count():
        cov.notes.append("snapshot without timestamp: ts is NULL, no rates")
    return ParseResult(tables={"proc_vmstat": TABLES["proc_vmstat"].conform(out)}, coverage=cov)


def _rates(df: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Add ``rate_per_s`` per (node, key) in file order; return the frame and #resets.

    Samplers write in time order, so no sort is needed; a step back in time gives
    Δts <= 0 and a NULL rate.
    """
    keys = ["node", "key"]
    timed = pl.col("ts").is_not_null()
    df = df.with_columns(
        dv=pl.when(timed).then(pl.col("value") - pl.col("value").shift(1).over(keys)),
        dt=(pl.col("ts") - pl.col("ts").shift(1).over(keys)).dt.total_microseconds() / 1e6,
    ).with_columns(
        rate_per_s=pl.when(pl.col("counter") & (pl.col("dv") >= 0) & (pl.col("dt") > 0)).then(
            pl.col("dv") / pl.col("dt")
        ),
        reset=pl.col("counter") & (pl.col("dv") < 0) & pl.col("dt").is_not_null(),
    )
    resets = int(df["reset"].sum())
    return df.drop("dv", "dt", "reset"), resets
