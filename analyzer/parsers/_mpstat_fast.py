"""mpstat, big files: the column-aligned fast path (see :mod:`._sysstat_fast`), chunk by chunk.

Used by :func:`analyzer.parsers.mpstat.parse` for large text files with 24-hour times
(the capture's ``mpstat -P ALL`` and ``mpstat -I SUM,SCPU -P ALL``). Tables whose header
was seen in the first 64 KiB and whose columns are all percentages (CPU / NODE tables) or
all ``/s`` rates (interrupt tables) are typed by numpy straight from the chunk's bytes: a
row is a line exactly as wide as its header with a valid ``HH:MM:SS``, a CPU number or
``all`` and one right-aligned number per slot (:class:`._sysstat_fast.Numbers`). Every
other line of the chunk (banners, headers, blanks, ``Average:``, rows that fail a check,
rows of other tables) goes through mpstat's regular line classifier and layout parsers,
with the header that governs the chunk's first rows carried over from the previous chunk.
A fast row must also be governed by a header of the layout it was read with; a chunk where
that does not hold is re-read entirely by the regular path. Midnight roll-over and
``since_boot`` carry across chunks, so the tables are the same as the regular path's, row
for row (tests/parsers/test_sysstat_fast.py).

Each chunk's rows are handed to ``emit`` at once (the store's sink in the pipeline), so
memory stays at a few chunks whatever the file size. Two worker threads type chunks
i+1 and i+2 (numpy releases the GIL) while this thread finishes chunk i.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

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

    header: pl.DataFrame | None = None  # the last header line seen (line_no, line)
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
        elif all(v.endswith("/s") for v in values):
            kind = "irq"
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
        shapes[shape] = Group(lay.width, tuple(slots), values, kind, frozenset())
    return [
        Group(g.width, g.slots, g.names, g.kind, frozenset(by_shape[k])) for k, g in shapes.items()
    ]


@functools.cache
def _numbers(slots: tuple[tuple[int, int, int], ...], comma: bool, key: bool) -> swar.Numbers:
    """The decoder of ``slots``; with ``key``, the one slot may read ``all`` (-1)."""
    return swar.Numbers(slots, comma, alt={0: ("all", -1.0)} if key else None)


def _fast_rows(chunk: fast.Chunk, g: Group, comma: bool) -> Rows:
    """Rows of group ``g`` in the chunk that pass every check: first the time and key
    (which also tell rows from headers of the same width), then the values."""
    rows = fast.candidates(chunk, g.width, semicolons=False)
    key_end = g.slots[0][1]
    keys, values = _numbers(g.slots[:1], comma, True), _numbers(g.slots[1:], comma, False)
    ok = np.empty(rows.size, dtype=bool)
    sec = np.empty(rows.size, dtype=np.int32)
    key = np.empty(rows.size, dtype=np.float64)
    for sl, m in swar.row_blocks(chunk, rows, key_end):
        good, sec[sl] = swar.clock(m)
        okk, _ = keys(m, out=key[None, sl])
        ok[sl] = good & okk[0]
    if not ok.all():
        rows, sec, key = rows[ok], sec[ok], key[ok]
    ok = np.empty(rows.size, dtype=bool)
    vals = np.empty((len(g.slots) - 1, rows.size), dtype=np.float64)
    for sl, m in swar.row_blocks(chunk, rows, g.width):
        okv, _ = values(m, out=vals[:, sl])
        ok[sl] = okv.all(axis=0)
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
    emit: Callable[[str, pl.DataFrame], None]


def parse_chunks(path: Path, cx: Ctx, cov: base.Coverage, gs: list[Group]) -> None:
    """Read the whole file chunk by chunk, emitting conformed frames per table."""
    st = State()
    line = 1

    def prepare(buf: np.ndarray) -> tuple[fast.Chunk, np.ndarray, list[tuple[Group, Rows]]]:
        chunk = fast.chunk_of(buf, 0)  # line numbers are set in file order by finish
        return (chunk, *_fast_parts(chunk, gs, cx.comma))

    def finish(item: tuple[fast.Chunk, np.ndarray, list[tuple[Group, Rows]]]) -> None:
        nonlocal line
        chunk, rest, parts = item
        chunk.first_line = line
        line += chunk.n
        cov.total += chunk.n
        out = _chunk(chunk, cx, cov, st, rest, parts)
        if out is None:  # a fast row under another table's header: re-read slowly
            out = _chunk(chunk, cx, cov, st, np.ones(chunk.n, dtype=bool), [])
        assert out is not None
        for name, frame in out.items():
            cx.emit(name, frame)

    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: deque = deque()
        for buf in fast.read_blocks(path, fast.CHUNK_BYTES):
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


def _governed(
    parts: list[tuple[Group, Rows]], hdrs: pl.DataFrame, chunk: fast.Chunk, seen: list[str]
) -> bool:
    """Set each fast row's governing header (time, NODE or not); False when a fast row's
    governing header is missing, of another layout, or past the layout cap."""
    hl = hdrs.get_column("line_no").to_numpy().astype(np.int64) - chunk.first_line
    hkeys = hdrs.get_column("hkey").to_list()
    hsec = hdrs.select(s.clock_seconds(pl.col("hdr_time")).fill_null(-1)).to_series().to_numpy()
    node = np.array([k.startswith("NODE") for k in hkeys])
    # Index in hdrs of the last header at or above each line of the chunk (-1: none).
    marks = np.zeros(chunk.n, dtype=np.int32)
    np.add.at(marks, hl[hl >= 0], 1)
    above = np.cumsum(marks, dtype=np.int32)
    above += int((hl < 0).sum()) - 1
    for g, f in parts:
        if not f.height:
            f.hdr_sec, f.node = np.empty(0, dtype=np.int32), np.empty(0, dtype=bool)
            continue
        gov = above[f.line]
        allowed = np.array(
            [k in g.hkeys and k in seen and seen.index(k) < _MAX_LAYOUTS for k in hkeys] + [False]
        )
        if not allowed[gov].all():  # gov == -1 picks the trailing False
            return False
        lo, hi = int(gov[0]), int(gov[-1])
        if lo == hi:  # one header governs them all (the usual chunk)
            f.hdr_sec = np.full(f.height, hsec[lo], dtype=np.int32)
            f.node = np.full(f.height, node[lo])
        else:
            f.hdr_sec, f.node = hsec[gov].astype(np.int32), node[gov]
    return True


def _chunk(
    chunk: fast.Chunk,
    cx: Ctx,
    cov: base.Coverage,
    st: State,
    rest: np.ndarray,
    parts: list[tuple[Group, Rows]],
) -> dict[str, pl.DataFrame] | None:
    """One chunk; None when a fast row is not governed by its layout's header (the
    caller then re-reads the chunk with no fast rows). Coverage is only updated on success."""
    lines = chunk.lines(np.flatnonzero(rest))
    carried = st.header is not None
    if carried:
        lines = pl.concat([st.header, lines])
    df = cx.classify_lines(lines, "24h")
    if chunk.unterminated:
        cut = (pl.col("line_no") == chunk.first_line + chunk.n - 1) & (pl.col("kind") == "row")
        df = df.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("kind").alias("kind"))
    hdrs = cx.headers(df)
    own = df.slice(1) if carried else df  # the carried header was counted in its own chunk
    rows = own.filter(pl.col("kind") == "row")
    rows = rows.with_columns(s.clock_seconds(pl.col("time")).alias("_sec"))
    seen = list(st.seen)
    slow_cov = base.Coverage()
    if rows.height:
        slow_frames = cx.layout_frames(rows, hdrs, cx.comma, slow_cov, seen)
    else:  # what layout_frames does without rows: note the layouts, in order
        slow_frames = []
        seen.extend(k for k in dict.fromkeys(hdrs.get_column("hkey").to_list()) if k not in seen)
    if parts and not _governed(parts, hdrs, chunk, seen):
        return None
    st.seen[:] = seen
    counts = dict(own.group_by("kind").len().iter_rows())
    for k in ("banner", "blank", "header", "average"):
        cov.add_structure(k, counts.get(k, 0))
    cov.add_skipped("unrecognized line", counts.get("other", 0))
    cov.add_skipped("truncated last line (no trailing newline)", counts.get("truncated", 0))
    cov.parsed += slow_cov.parsed + sum(f.height for _, f in parts)
    for reason, n in slow_cov.skipped.items():
        cov.add_skipped(reason, n)
    st.orphans += rows.filter(pl.col("hdr") == 0).height
    # Midnight roll-over over all rows of the chunk in file order, carried over.
    live = [(g, f) for g, f in parts if f.height]
    slow_days = _days(live, chunk, rows, st)
    slow_frames = [
        (t, k, fr.join(slow_days, on="line_no", how="left", maintain_order="left"))
        for t, k, fr in slow_frames
    ]
    out: dict[str, list[pl.DataFrame]] = {}
    for g, f in live:
        f.first_line = chunk.first_line
        for table, frame in _finish_fast(f, g, cx):
            out.setdefault(table, []).append(frame)
    for table, key, frame in slow_frames:
        out.setdefault(table, []).append(cx.finish(frame, key))
    last_hdr = hdrs.filter(pl.col("line_no") >= chunk.first_line).tail(1)
    if last_hdr.height:
        st.header = last_hdr.select("line_no", "line")
    result = {}
    for table, frames in out.items():
        merged = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
        if len(frames) > 1:
            merged = merged.sort("line_no", maintain_order=True)
        result[table] = cx.tables[table].conform(merged).collect()
    return result


def _days(
    live: list[tuple[Group, Rows]], chunk: fast.Chunk, rows: pl.DataFrame, st: State
) -> pl.DataFrame:
    """Day numbers (midnight roll-over) of every row of the chunk in file order: sets
    ``day`` of the fast rows, returns ``line_no``/``_sec``/``_day`` of the regular ones.
    A NULL time takes the one before it (the previous chunk's last time at the start)."""
    slow_lines = rows.get_column("line_no").to_numpy().astype(np.int64)
    slow_sec = rows.get_column("_sec").fill_null(-1).to_numpy().astype(np.int64)
    if len(live) == 1 and not slow_lines.size:
        seq, order = live[0][1].sec, None
    else:
        allines = np.concatenate([*(f.line for _, f in live), slow_lines - chunk.first_line])
        sec = np.concatenate([*(f.sec for _, f in live), slow_sec])
        order = np.argsort(allines, kind="stable")
        seq = sec[order]
    valid = seq >= 0
    start = -1 if st.prev_sec is None else st.prev_sec
    if valid.all():
        filled = seq
    else:
        last = np.maximum.accumulate(np.where(valid, np.arange(seq.size), -1))
        filled = np.where(last >= 0, seq[np.maximum(last, 0)], start)
    step = np.empty(seq.size, dtype=bool)
    step[:1] = (filled[:1] < start) & (filled[:1] >= 0)
    step[1:] = (filled[1:] < filled[:-1]) & (filled[1:] >= 0) & (filled[:-1] >= 0)
    day = np.cumsum(step, dtype=np.int32)
    day += st.day
    if seq.size:
        st.day = int(day[-1])
        if valid.any():
            st.prev_sec = int(seq[np.flatnonzero(valid)[-1]])
    if order is not None:
        inv = np.empty_like(day)
        inv[order] = day
        day = inv
    pos = 0
    for _, f in live:
        f.day = day[pos : pos + f.height]
        pos += f.height
    return pl.DataFrame(
        {
            "line_no": pl.Series(slow_lines, dtype=pl.UInt32),
            "_sec": rows.get_column("_sec"),
            "_day": pl.Series(day[pos:], dtype=pl.Int32),
        }
    )


def _ts(f: Rows, cx: Ctx) -> pl.Series:
    """Row times: banner date + day roll-over + time of day, local time -> UTC."""
    if cx.day0 is None:
        return pl.Series("ts", [None] * f.height, dtype=base.TS)
    day0_us = (cx.day0 - datetime(1970, 1, 1)) // timedelta(microseconds=1)
    us = day0_us + (f.sec.astype(np.int64) + 86400 * f.day.astype(np.int64)) * 1_000_000
    naive = pl.Series("ts", us).cast(pl.Datetime("us"))
    return naive.to_frame().select(s.local_to_utc(pl.col("ts"), cx.zone).cast(base.TS)).to_series()


def _finish_fast(f: Rows, g: Group, cx: Ctx) -> list[tuple[str, pl.DataFrame]]:
    """Typed table rows from fast rows: line_no, ts, since_boot, key, values."""
    assert f.day is not None and f.hdr_sec is not None
    base_cols = {
        "line_no": pl.Series(f.line + f.first_line, dtype=pl.UInt32),
        "ts": _ts(f, cx),
        "since_boot": pl.Series(f.sec == f.hdr_sec),
    }
    if g.kind == "cpu":
        node = f.node
        assert node is not None
        frame = pl.DataFrame(
            {
                **base_cols,
                "key": pl.Series(f.key, dtype=pl.Int32),
                **{cx.pct_cols[n]: f.vals[i] for i, n in enumerate(g.names)},
            }
        )
        out = []
        if not node.all():
            cpu = frame if not node.any() else frame.filter(~pl.Series(node))
            out.append(("mpstat_cpu", cpu.rename({"key": "cpu"})))
        if node.any():
            out.append(("mpstat_node", frame.filter(pl.Series(node)).rename({"key": "node"})))
        return out
    kind = cx.table_kind(["CPU", *g.names])
    irq = ["sum"] if kind == "sum" else [n.removesuffix("/s") for n in g.names]
    k = len(irq)
    vals = f.vals[:k].T.ravel()
    rep = np.repeat(np.arange(f.height), k)
    which = np.tile(np.arange(k), f.height)
    wide = pl.DataFrame({**base_cols, "cpu": pl.Series(f.key, dtype=pl.Int32)})
    long = wide[rep].with_columns(
        pl.Series("irq", irq, dtype=pl.String).gather(which),
        pl.lit(kind).alias("kind"),
        pl.Series("per_s", vals),
    )
    return [("mpstat_irq", long)]
