"""mpstat, big files: the column-aligned fast path (see :mod:`._sysstat_fast`), chunk by chunk.

Used by :func:`analyzer.parsers.mpstat.parse` for large text files with 24-hour times
(the capture's ``mpstat -P ALL`` and ``mpstat -I SUM,SCPU -P ALL``). Tables whose header
was seen in the first 64 KiB and whose columns are all percentages (CPU / NODE tables) or
all ``/s`` rates (interrupt tables) are typed by numpy straight from the chunk's bytes: a
row is a line exactly as wide as its header with a valid ``HH:MM:SS``, a CPU number or
``all`` and one right-aligned number per slot (:class:`._sysstat_swar.Numbers`). The
other lines of the chunk are what mpstat's regular classifier would say they are
(:mod:`._mpstat_chunk`): blank lines, copies of the head's header and banner lines told
from their bytes, the rest (``Average:``, garbage, rows that fail a check, rows of other
tables) through the classifier and layout parsers, with the header that governs the
chunk's first rows carried over from the previous chunk. A fast row must also be
governed by a header of the layout it was read with; a chunk where that does not hold is
re-read entirely by the regular path. Midnight roll-over and ``since_boot`` carry across
chunks, so the tables are the same as the regular path's, row for row
(tests/parsers/test_sysstat_fast.py). Table rows are laid out by :mod:`._mpstat_rows`.

Each chunk's rows are handed to ``emit`` at once (the store's sink in the pipeline), so
memory stays at a few chunks whatever the file size. Two worker threads type chunks
i+1 and i+2 (numpy releases the GIL) while this thread finishes chunk i; a file of a few
chunks is read at once, cut into quarters (:func:`._sysstat_fast.chunk_bytes`) so that the
threads overlap, and typed by one worker (:func:`._sysstat_fast.workers`).
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _mpstat_chunk as _mc
from analyzer.parsers import _mpstat_rows as _rows
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar
from analyzer.parsers import base

_MAX_LAYOUTS = 64  # mpstat's cap on distinct header layouts (same value as mpstat.py)


@dataclass(frozen=True)
class Group:
    """Layouts read with one decoder: same width, slots and value columns."""

    width: int
    slots: tuple[tuple[int, int, int], ...]  # key slot (decimals 0), then one per value
    names: tuple[str, ...]  # value column names as printed (%usr, intr/s, NET_RX/s...)
    kind: str  # cpu | irq
    hkeys: frozenset[str]
    header_keys: frozenset[bytes] = frozenset()  # the 8 bytes ending its headers' key slot


@dataclass
class Rows:
    """Fast rows of one group in one chunk: chunk line index, seconds of day, key
    (-1 = all), values ``(k, n)``; ``day``, ``gov`` (governing header) set later."""

    line: np.ndarray
    sec: np.ndarray
    key: np.ndarray
    vals: np.ndarray
    day: np.ndarray | None = None
    hdr_sec: np.ndarray | None = None  # governing header's time, seconds (-1 = none)
    node: np.ndarray | None = None  # governed by a NODE header (CPU tables)
    first_line: int = 0  # line number of the chunk's line 0

    @property
    def height(self) -> int:
        return int(self.line.size)


@dataclass
class State:
    """What carries from one chunk to the next."""

    header: tuple[int, str, str, int] | None = None  # last header: line_no, text, hkey, sec
    prev_sec: int | None = None
    day: int = 0
    seen: list[str] = field(default_factory=list)
    orphans: int = 0


def _decimals(text: str) -> int:
    m = re.search(r"[.,](\d+)\s*$", text)
    return len(m[1]) if m else 0


def groups(
    head_headers: pl.DataFrame, pct_cols: dict[str, str], head_rows: pl.DataFrame
) -> list[Group]:
    """Fast-readable layouts among the headers of the file's head (``hkey``, ``line``);
    ``head_rows`` (``hkey``, ``line``) give each layout's decimals (first row wins)."""
    by_shape: dict[tuple, set[str]] = {}
    keys_of: dict[tuple, set[bytes]] = {}
    shapes: dict[tuple, Group] = {}
    first_row = dict(head_rows.unique("hkey", keep="first", maintain_order=True).iter_rows())
    for hkey, hline in head_headers.unique("hkey", maintain_order=True).iter_rows():
        lay = s.header_layout(hline)
        names = lay.names
        if len(names) < 3 or len(names[0]) != 8 or names[0][2] != ":" or names[0][5] != ":":
            continue
        if names[1] not in ("CPU", "NODE") or lay.starts[0] != 0 or hkey not in first_row:
            continue
        values = names[2:]
        if all(v in pct_cols for v in values):
            kind = "cpu"
        elif all(v.endswith("/s") for v in values) and names[1] == "CPU":
            kind = "irq"  # (mpstat reads rates under a NODE header as a NODE table)
        else:
            continue
        row = first_row[hkey]
        ends = lay.ends
        slots = [(ends[0], ends[1], 0)]
        slots += [
            (ends[i - 1], ends[i], _decimals(row[ends[i - 1] : ends[i]]))
            for i in range(2, len(ends))
        ]
        try:
            swar.Numbers(slots, alt={0: ("all", -1.0)})
        except ValueError:
            continue
        shape = (lay.width, tuple(slots), values, kind)
        if any(k[0] == lay.width and k != shape for k in shapes):
            continue  # same width, other slots: leave it to the regular path
        by_shape.setdefault(shape, set()).add(hkey)
        key = hline[ends[1] - 8 : ends[1]].encode()  # blanks and CPU/NODE: never a row's
        keys_of.setdefault(shape, set()).update([key] if len(key) == 8 else [])
        shapes[shape] = Group(lay.width, tuple(slots), values, kind, frozenset())
    return [
        Group(g.width, g.slots, g.names, g.kind, frozenset(by_shape[k]), frozenset(keys_of[k]))
        for k, g in shapes.items()
    ]


@functools.cache
def _numbers(slots: tuple[tuple[int, int, int], ...], comma: bool, key: bool) -> swar.Numbers:
    """The decoder of ``slots``; with ``key``, the one slot may read ``all`` (-1)."""
    return swar.Numbers(slots, comma, alt={0: ("all", -1.0)} if key else None, narrow=True)


def _fast_rows(chunk: fast.Chunk, g: Group, comma: bool) -> Rows:
    """Rows of group ``g`` in the chunk that pass every check (time, key, values; the
    time and key also tell rows from headers of the same width), in one pass."""
    rows = fast.candidates(chunk, g.width, semicolons=False)
    if rows.size and g.header_keys:  # its header lines (as wide, "CPU" as key): never rows
        at = chunk.starts[rows] + (g.slots[0][1] - 8)
        word = np.lib.stride_tricks.sliding_window_view(chunk.buf, 8)[at].view("<u8")[:, 0]
        hdr = np.frombuffer(b"".join(sorted(g.header_keys)), "<u8")
        rows = rows[~np.isin(word, hdr)]
    keys, values = _numbers(g.slots[:1], comma, True), _numbers(g.slots[1:], comma, False)
    ok = np.empty(rows.size, dtype=bool)
    sec = np.empty(rows.size, dtype=np.int32)
    key = np.empty(rows.size, dtype=np.float64)
    vals = np.empty((len(g.slots) - 1, rows.size), dtype=np.float64)
    for sl, m in swar.row_blocks(chunk, rows, g.width, swar.block_rows(len(g.slots))):
        good, sec[sl] = swar.clock(m)
        okk, _ = keys(m, out=key[None, sl])
        good &= okk[0]
        okv, _ = values(m, out=vals[:, sl])
        ok[sl] = good & okv.all(axis=0)
    if not ok.all():
        rows, sec, key, vals = rows[ok], sec[ok], key[ok], vals[:, ok]
    if (values.row != np.arange(values.k)).any():  # slot order (one-word slots came first)
        vals = vals[values.row]
    return Rows(rows, sec, key.astype(np.int32), vals)


@dataclass
class Ctx:
    """File-level facts the chunk reader needs."""

    comma: bool
    day0: datetime | None
    zone: str | None
    tables: dict[str, base.Table]
    pct_cols: dict[str, str]
    layout_frames: Callable
    classify_lines: Callable
    headers: Callable
    finish: Callable
    table_kind: Callable
    line_kinds: Callable
    templates: list[tuple[str, bytes]]  # (hkey, line) of a header line per layout of the head
    banner: bytes  # the head's banner line (b"" when none or not plain ASCII)
    emit: Callable[[str, pl.DataFrame], None]


def parse_chunks(
    path: Path, cx: Ctx, cov: base.Coverage, gs: list[Group], data: np.ndarray | None = None
) -> None:
    """Read the whole file chunk by chunk, emitting conformed frames per table (``data``:
    the file's bytes, when already read)."""
    st = State()
    line = 1

    def prepare(buf: np.ndarray) -> tuple:
        chunk = fast.chunk_of(buf, 0)  # line numbers are set in file order by finish
        rest, parts = _fast_parts(chunk, gs, cx.comma)
        irq = [(g, f) for g, f in parts if g.kind == "irq" and f.height]
        return chunk, rest, parts, _rows.irq_layout(irq, cx) if irq else None

    def finish(item: tuple) -> None:
        nonlocal line
        chunk, rest, parts, irq = item
        chunk.first_line = line
        line += chunk.n
        cov.total += chunk.n
        out = _chunk(chunk, cx, cov, st, rest, parts, irq)
        if out is None:  # a fast row under another table's header: re-read slowly
            out = _chunk(chunk, cx, cov, st, np.ones(chunk.n, dtype=bool), [], None)
        assert out is not None
        for name, frame in out.items():
            cx.emit(name, frame)

    size = path.stat().st_size if data is None else data.size
    with ThreadPoolExecutor(max_workers=fast.workers(size)) as pool:
        pending: deque = deque()
        if data is None:
            blocks = fast.read_blocks(path, fast.chunk_bytes(size))
        else:
            blocks = fast.split_blocks(data, fast.chunk_bytes(size))
        for buf in blocks:
            pending.append(pool.submit(prepare, buf))
            if len(pending) > 2:
                finish(pending.popleft().result())
        while pending:
            finish(pending.popleft().result())
    cov.add_skipped("row without a table header above it", st.orphans)


def _fast_parts(
    chunk: fast.Chunk, gs: list[Group], comma: bool
) -> tuple[np.ndarray, list[tuple[Group, Rows]]]:
    """Fast rows of every group and the mask of the other (rest) lines."""
    rest = np.ones(chunk.n, dtype=bool)
    parts = []
    for g in gs:
        f = _fast_rows(chunk, g, comma)
        rest[f.line] = False
        parts.append((g, f))
    return rest, parts


def _chunk(
    chunk: fast.Chunk,
    cx: Ctx,
    cov: base.Coverage,
    st: State,
    rest: np.ndarray,
    parts: list[tuple[Group, Rows]],
    irq_layout: _rows.IrqLayout | None,
) -> dict[str, pl.DataFrame] | None:
    """One chunk; None when a fast row is not governed by its layout's header (the
    caller then re-reads the chunk with no fast rows). Coverage is only updated on success.
    ``irq_layout``: the long rows of the interrupt groups with rows, laid out by a worker."""
    idx = np.flatnonzero(rest)
    c = _mc.by_bytes(chunk, idx, st, cx) if parts else None
    if c is None:
        c = _mc.regular(chunk, idx, st, cx)
    if parts and not _mc.governed(parts, c, chunk):
        return None
    st.seen[:] = c.seen
    for k in ("banner", "blank", "header", "average"):
        cov.add_structure(k, c.counts.get(k, 0))
    cov.add_skipped("unrecognized line", c.counts.get("other", 0))
    cov.add_skipped("truncated last line (no trailing newline)", c.counts.get("truncated", 0))
    cov.parsed += c.cov.parsed + sum(f.height for _, f in parts)
    for reason, n in c.cov.skipped.items():
        cov.add_skipped(reason, n)
    st.orphans += c.orphans
    live = [(g, f) for g, f in parts if f.height]
    for _, f in live:
        f.first_line = chunk.first_line
    # Midnight roll-over over all rows of the chunk in file order, carried over.
    irq = [(g, f) for g, f in live if g.kind == "irq"]
    known = irq_layout.order if irq_layout is not None and len(irq) == len(live) else None
    slow_days = _mc.days(live, chunk, c.rows, st, known)
    out: dict[str, list[pl.DataFrame]] = {}
    for table, key, frame in c.frames:
        frame = frame.join(slow_days, on="line_no", how="left", maintain_order="left")
        out.setdefault(table, []).append(cx.finish(frame, key))
    if irq:
        assert irq_layout is not None
        frame = _rows.irq_frame(irq_layout, irq, cx, line_no="mpstat_irq" in out)
        out.setdefault("mpstat_irq", []).insert(0, frame)
    for g, f in live:
        if g.kind == "cpu":
            for table, frame in _finish_fast(f, g, cx):
                out.setdefault(table, []).insert(0, frame)
    if c.last is not None:
        st.header = c.last
    result = {}
    for table, frames in out.items():
        merged = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
        if len(frames) > 1:
            merged = merged.sort("line_no", maintain_order=True)
        result[table] = cx.tables[table].conform(merged).collect()
    return result


def _finish_fast(f: Rows, g: Group, cx: Ctx) -> list[tuple[str, pl.DataFrame]]:
    """Typed CPU/NODE table rows of one group's fast rows (interrupt groups are laid out
    together by :func:`._mpstat_rows.irq_frame`): line_no, ts, since_boot, key, values."""
    return _rows.cpu_frames(f, g, cx)
