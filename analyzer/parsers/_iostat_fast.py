"""iostat, big files: chunk by chunk, the regular path's tables, streamed when possible.

Used by :func:`analyzer.parsers.iostat.parse` for large text files whose first device
table has ``Device`` first (``iostat -x``, any version) and whose numbers use neither a
decimal comma nor ``--human`` suffixes (decided on the same sample of lines the regular
path uses). Three jobs per block of the file:

1. :mod:`._iostat_scan`: the block's device names and header layouts (what decides
   whether rows may be streamed, see below), its line offsets, and whether it is valid
   UTF-8 (a file that is not goes to the regular path whole, which repairs it).
2. :mod:`._iostat_rows` (worker threads, block i+1 and i+2): device rows of the fast
   table typed by numpy, known structure lines told from their bytes.
3. :mod:`._iostat_chunk` (this thread, block i): the other lines through the regular
   classifier, the regular path's running state carried, each fast row checked against
   its header, every row timed.

Files up to `ONE_PASS_BYTES` do all three in one pass, one worker doing 1 and 2
(:func:`._sysstat_fast.workers`), and keep their rows until the end of the file. Bigger files get a first pass doing 1 for the
whole file; when :func:`._iostat_scan.streamable` then allows it (one device layout, no
partitions), each block's rows go straight to ``ctx.sink`` and memory stays at a few
blocks; otherwise they are kept and finished as a whole. Tables and coverage are the
regular path's, row for row (tests/parsers/test_sysstat_fast.py).
"""

from __future__ import annotations

import re
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
from analyzer.parsers._iostat_chunk import Out, State, finish
from analyzer.parsers._iostat_rows import (
    AVG,
    BANNER,
    BLANK,
    CPU,
    DEV_HDR,
    TRUNC,
    TS,
    Layout,
    Names,
    Prepared,
    _known,
    candidates,
    head_lines,
    layout,
    prepare,
    prepare_chunk,
)

#: Files up to this size take one pass: each block's first-pass facts (device names, header
#: layouts) are found with its rows, and the rows wait for the end of the file, where what
#: depends on the whole file is known. Bigger files are scanned first, then streamed.
ONE_PASS_BYTES = 64 << 20


def parse(
    path: Path, ctx: base.ParseContext, cov: base.Coverage, head: str
) -> base.ParseResult | None:
    """The whole file, or None when it is not for this path (nothing recorded then: this
    includes a file that is not valid UTF-8)."""
    hd = head_lines(head)
    lay = layout(hd)
    if lay is None:
        return None
    if path.stat().st_size <= ONE_PASS_BYTES:
        return _one_pass(path, ctx, cov, hd, lay)
    scanned = scan.scan(path, lay.header.decode())
    names = Names(scanned.names)
    if not scanned.utf8 or not names.ok:
        return None
    run = _Run(ctx, lay, hd, cov)
    stream = ctx.sink is not None and scan.streamable(scanned, lay.hkey, ctx)
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: deque = deque()
        for i, buf in enumerate(fast.read_blocks(path, fast.CHUNK_BYTES)):
            known = scanned.starts[i] if i < len(scanned.starts) else None
            pending.append(pool.submit(prepare, buf, lay, names, known))
            if len(pending) > 2:
                run.emit(run.finish(pending.popleft().result()), stream)
        while pending:
            run.emit(run.finish(pending.popleft().result()), stream)
    return _result(run.st, run.kept, run.sent, stream, hd, ctx, cov)


def _one_pass(
    path: Path, ctx: base.ParseContext, cov: base.Coverage, hd: pl.DataFrame, lay: Layout
) -> base.ParseResult | None:
    """A file of at most `ONE_PASS_BYTES`: blocks scanned and typed together."""
    total = scan.Scan(header=lay.header)
    total.hkeys.add(re.sub(r"\s+", " ", lay.header.decode().strip()))
    run = _Run(ctx, lay, hd, base.Coverage())  # recorded into cov once the file is read
    outs: list[Out] = []
    with ThreadPoolExecutor(max_workers=fast.workers(path.stat().st_size)) as pool:
        pending: deque = deque()
        blocks = fast.read_blocks(path, fast.CHUNK_BYTES)
        while True:
            buf = next(blocks, None)
            if buf is not None:
                pending.append(pool.submit(_scan_prepare, buf, lay))
            if pending and (len(pending) > 2 or buf is None):
                found, item = pending.popleft().result()
                total.add(found)
                if item is None:  # not valid UTF-8, or names the lookup cannot tell apart
                    for f in pending:
                        f.cancel()
                    return None
                out = run.finish(item)
                total.names |= out.tokens
                total.hkeys |= out.hkeys
                outs.append(out)
            elif buf is None:
                break
    stream = ctx.sink is not None and scan.streamable(total, lay.hkey, ctx)
    for out in outs:
        run.emit(out, stream)
    cov.total, cov.parsed = run.cov.total, run.cov.parsed
    cov.structure.update(run.cov.structure)
    cov.skipped.update(run.cov.skipped)
    cov.notes.extend(run.cov.notes)
    return _result(run.st, run.kept, run.sent, stream, hd, ctx, cov)


def _scan_prepare(buf: np.ndarray, lay: Layout) -> tuple[scan.Scan, Prepared | None]:
    """A worker's part in one pass: the block typed (None when it is not valid UTF-8 or
    its names cannot be looked up) and the names of its fast rows. A first pass would
    find these and the first tokens of the other lines, bar copies of the head's structure
    lines, which the main thread adds (:class:`._iostat_chunk.Out`)."""
    chunk = fast.chunk_of(buf, 0)
    found = scan.Scan(header=lay.header, utf8=scan.utf8(buf))
    if not found.utf8:
        return found, None
    cand = candidates(chunk, lay)
    found.names = scan.distinct(cand[2][cand[1]])  # the plain tokens
    names = Names(found.names)
    if not names.ok:
        return found, None
    return found, prepare_chunk(chunk, lay, names, cand)


class _Run:
    """The main thread's part: blocks finished in file order, rows sent or kept."""

    def __init__(
        self, ctx: base.ParseContext, lay: Layout, hd: pl.DataFrame, cov: base.Coverage
    ) -> None:
        self.ctx, self.lay, self.cov = ctx, lay, cov
        self.tz = (s.resolve_tz(ctx.tz)[0], io._since_boot_skipped(hd, ctx, []))
        self.st = State(avg_text=lay.avg.decode() or None)
        banner = hd.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
        self.st.banner = banner[0] if banner else None
        part = None if c.partitions(set(), ctx, []) is None else False
        self.part = pl.lit(part, pl.Boolean)
        self.kept: dict[str, list[pl.DataFrame]] = {"iostat_device": [], "iostat_cpu": []}
        self.sent = {"iostat_device": 0, "iostat_cpu": 0}

    def finish(self, item: Prepared) -> Out:
        out = finish(item, self.lay, self.st, self.ctx, self.cov, self.tz)
        if out is None:  # a fast row under another header: the chunk again, no fast rows
            out = finish(_no_fast(item, self.lay), self.lay, self.st, self.ctx, self.cov, self.tz)
        assert out is not None
        return out

    def emit(self, out: Out, stream: bool) -> None:
        """One block's rows: to the sink when streaming (avg-cpu rows always), else kept."""
        sink = self.ctx.sink
        for name, frame in (("iostat_device", out.dev), ("iostat_cpu", out.cpu)):
            if frame is None or not frame.height:
                continue
            if sink is not None and (stream or name == "iostat_cpu"):
                frame = frame.with_columns(self.part.alias("is_partition"))
                sink(name, c.TABLES[name].conform(frame).collect())
                self.sent[name] += frame.height
            else:
                self.kept[name].append(frame)


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
