"""iostat, big files: chunk by chunk, the regular path's tables, streamed when possible.

Used by :func:`analyzer.parsers.iostat.parse` for large text files whose first device
table has ``Device`` first (``iostat -x``, any version) and whose numbers use neither a
decimal comma nor ``--human`` suffixes (decided on the same sample of lines the regular
path uses). Three passes over the bytes, each with one job:

1. :mod:`._iostat_scan` (one quick pass): the device names and header layouts of the
   whole file, and the line offsets of each block (so the next pass does not look for
   newlines again).
2. :mod:`._iostat_rows` (two worker threads, block i+1 and i+2): device rows of the fast
   table typed by numpy, known structure lines told from their bytes.
3. :mod:`._iostat_chunk` (this thread, block i): the other lines through the regular
   classifier, the regular path's running state carried, each fast row checked against
   its header, every row timed.

When :func:`._iostat_scan.streamable` allows it (one device layout, no partitions), each
block's rows go straight to ``ctx.sink``, so memory stays at a few blocks; otherwise they
are kept and finished as a whole. Tables and coverage are the regular path's, row for row
(tests/parsers/test_sysstat_fast.py).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _iostat_scan as scan
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import base
from analyzer.parsers import iostat as io
from analyzer.parsers._iostat_chunk import State, finish
from analyzer.parsers._iostat_rows import (
    AVG,
    BANNER,
    BLANK,
    CPU,
    DEV_HDR,
    TRUNC,
    TS,
    Layout,
    Prepared,
    _known,
    layout,
    prepare,
)


def parse(
    path: Path, ctx: base.ParseContext, cov: base.Coverage, head: str
) -> base.ParseResult | None:
    """The whole file, or None when it is not for this path (nothing recorded then)."""
    first = layout(head, None)
    if first is None:
        return None
    scanned = scan.scan(path, first[0].header.decode())
    got = layout(head, scanned)
    if got is None:
        return None
    lay, hd = got
    stream = ctx.sink is not None and scan.streamable(scanned, lay.hkey, ctx)
    tz = (s.resolve_tz(ctx.tz)[0], io._since_boot_skipped(hd, ctx, []))
    st = State(avg_text=lay.avg.decode() or None)
    banner = hd.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
    st.banner = banner[0] if banner else None
    part = pl.lit(None if c.partitions(set(), ctx, []) is None else False, pl.Boolean)
    kept: dict[str, list[pl.DataFrame]] = {"iostat_device": [], "iostat_cpu": []}
    sent = {"iostat_device": 0, "iostat_cpu": 0}

    def done(item: Prepared) -> None:
        out = finish(item, lay, st, ctx, cov, tz)
        if out is None:  # a fast row under another header: the chunk again, no fast rows
            out = finish(_no_fast(item, lay), lay, st, ctx, cov, tz)
        assert out is not None
        for name, frame in (("iostat_device", out.dev), ("iostat_cpu", out.cpu)):
            if frame is None or not frame.height:
                continue
            if ctx.sink is not None and (stream or name == "iostat_cpu"):
                frame = frame.with_columns(part.alias("is_partition"))
                ctx.sink(name, c.TABLES[name].conform(frame).collect())
                sent[name] += frame.height
            else:
                kept[name].append(frame)

    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: deque = deque()
        for i, buf in enumerate(fast.read_blocks(path, fast.CHUNK_BYTES)):
            known = scanned.starts[i] if i < len(scanned.starts) else None
            pending.append(pool.submit(prepare, buf, lay, known))
            if len(pending) > 2:
                done(pending.popleft().result())
        while pending:
            done(pending.popleft().result())
    return _result(st, kept, sent, stream, hd, ctx, cov)


def _no_fast(p: Prepared, lay: Layout) -> Prepared:
    """The chunk with every line for the regular classifier (no fast rows)."""
    none = np.empty(0, dtype=np.int64)
    empty = Prepared(
        p.chunk, none, none, np.empty((lay.numbers.k, 0)), np.arange(p.chunk.n), none, none, none
    )
    return _known(empty, lay)


def _result(
    st: State,
    kept: dict[str, list[pl.DataFrame]],
    sent: dict[str, int],
    stream: bool,
    hd: pl.DataFrame,
    ctx: base.ParseContext,
    cov: base.Coverage,
) -> base.ParseResult:
    """Coverage, notes (in the regular path's order) and the tables not streamed, once
    every chunk is done."""
    n = st.counts
    cov.total = st.line - 1
    known = int(n[BANNER] + n[AVG] + n[CPU] + n[DEV_HDR])
    if known == 0 and cov.total - int(n[BLANK]) > 0:
        raise base.ParseError(f"{ctx.file_name}: no iostat banner, avg-cpu or Device header")
    cov.add_structure("banner", int(n[BANNER]))
    cov.add_structure("blank", int(n[BLANK]))
    cov.add_structure("header", int(n[AVG] + n[DEV_HDR]))
    cov.add_skipped("truncated last line (no trailing newline)", int(n[TRUNC]))
    cov.add_structure("timestamp", int(n[TS]))
    cov.add_skipped("unrecognized line", st.stray)
    if n[TS]:
        s.tz_for(ctx, cov)
    io._since_boot_skipped(hd, ctx, cov.notes)
    if st.no_time:
        cov.notes.append(c.NO_TIME_NOTE)
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    empty = pl.DataFrame(schema={"report": pl.Int32, "device": pl.String})
    if st.layouts and stream:  # one layout, no partitions: rows went to the sink
        c.partitions(set(), ctx, cov.notes)  # for its notes
        if not sent["iostat_device"]:  # the regular path keeps an empty table
            frame = empty.with_columns(pl.lit(None, pl.Boolean).alias("is_partition"))
            tables["iostat_device"] = c.TABLES["iostat_device"].conform(frame).collect()
    elif st.layouts:
        devs = kept["iostat_device"]
        frame = pl.concat(devs, how="diagonal_relaxed") if devs else empty
        if len(st.layouts) > 1:  # --pretty/--human split tables: one row per device again
            frame = frame.group_by(["report", "device"], maintain_order=True).agg(
                pl.all().drop_nulls().first()
            )
        frame = c.flag_partitions(frame, ctx, cov.notes)
        tables["iostat_device"] = c.TABLES["iostat_device"].conform(frame).collect()
    if kept["iostat_cpu"]:
        cpu = pl.concat(kept["iostat_cpu"], how="diagonal_relaxed")
        tables["iostat_cpu"] = c.TABLES["iostat_cpu"].conform(cpu).collect()
    banner = s.parse_banner(st.banner) if st.banner else None
    return base.ParseResult(tables=tables, coverage=cov, meta=banner.meta() if banner else {})
