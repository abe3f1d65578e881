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
from analyzer.parsers import _sampler as smp
from analyzer.parsers import _sampler_stream as st
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
    """Parse a meminfo snapshot or sampler series (see module doc).

    Read in chunks (:mod:`._sampler_stream`): well-formed sampler lines are typed from
    CSV fields, all others go through the line expressions of :func:`_rest_rows`.
    """
    cov = Coverage()
    out = st.Output(path, ctx.sink, TABLES)
    timeless = False
    for chunk in st.iter_chunks(path, st.chunk_size(path)):
        rows = _chunk_rows(chunk, ctx, cov)
        timeless = timeless or bool(rows["ts"].null_count())
        out.emit({"meminfo": rows}, cov.parsed)
    if cov.parsed == 0 and cov.n_skipped > 0:
        raise ParseError(f"{path.name}: no /proc/meminfo line found")
    if timeless:
        cov.notes.append("snapshot without timestamp: ts is NULL")
    return ParseResult(tables=out.result(), coverage=cov)


_FIELDS = {
    "e": pl.String(),
    "p": pl.String(),
    "k": pl.String(),
    "v": pl.Int64(),
    "u": pl.String(),
    "x": pl.String(),
}


def _chunk_rows(chunk: st.Chunk, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """The meminfo rows of one chunk (``line_no`` first), its lines counted into ``cov``."""
    return st.key_value_rows(
        chunk, ctx, cov, schema=_FIELDS, file="meminfo", key_re=r"^[A-Za-z][A-Za-z0-9_()]*:$",
        forbid=b"+-", pad_after_colon=True, rest=_rest_rows,
        extra_ok=lambda f: f.get_column("u").is_null() | f.get_column("u").eq("kB"),
        columns={"key": pl.col("k").str.head(-1),
                 "value_kb": pl.when(pl.col("u").is_not_null()).then(pl.col("v")),
                 "count": pl.when(pl.col("u").is_null()).then(pl.col("v"))},
    )  # fmt: skip


def _rest_rows(lines: pl.LazyFrame, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """Rows from text lines (``line_no``, ``line``): any input, raw or sampled."""
    lf = smp.split_sampler(lines)
    body = pl.when(pl.col("s_ok")).then(pl.col("raw")).otherwise(pl.col("line"))
    g = body.str.extract_groups(LINE_RE)
    node_from_path = pl.col("path").str.extract(r"/node(\d+)/meminfo$", 1)
    tok = lf.with_columns(
        node=pl.coalesce(g.struct.field("1"), node_from_path),
        key=g.struct.field("2"),
        value=g.struct.field("3"),
        unit=g.struct.field("4"),
        long=pl.col("line").str.len_bytes() > ctx.max_line_bytes,
    ).with_columns(
        why=pl.when(pl.col("long"))
        .then(pl.lit(smp.reason("skipped", "line too long")))
        .when(body.str.strip_chars() == "")
        .then(pl.lit(smp.reason("structure", "blank")))
        .when(pl.col("s_ok") & ~pl.col("path_file").eq("meminfo"))
        .then(pl.lit(smp.reason("skipped", "sampler line of another file")))
        .when(pl.col("key").is_null())
        .then(pl.lit(smp.reason("skipped", "not a meminfo line")))
    )
    df = tok.select("line_no", "ts", "node", "key", "value", "unit", "why").collect()
    smp.tally(cov, df)
    value = pl.col("value").cast(pl.Int64, strict=False)
    return df.filter(pl.col("why").is_null()).select(
        "line_no",
        "ts",
        pl.col("node").cast(pl.Int32, strict=False),
        "key",
        value_kb=pl.when(pl.col("unit").is_not_null()).then(value),
        count=pl.when(pl.col("unit").is_null()).then(value),
    )
