"""mpstat, big files: the column-aligned fast path (see :mod:`._sysstat_fast`), chunk by chunk.

Used by :func:`analyzer.parsers.mpstat.parse` for large text files with 24-hour times
(the capture's ``mpstat -P ALL`` and ``mpstat -I SUM,SCPU -P ALL``). Tables whose header
was seen in the first 64 KiB and whose columns are all percentages (CPU / NODE tables) or
all ``/s`` rates (interrupt tables) are read by numpy + polars' CSV reader; every other
line of the chunk (banners, headers, blanks, ``Average:``, rows that fail the boundary
check, rows of other tables) goes through mpstat's regular line classifier and layout
parsers, with the header that governs the chunk's first rows carried over from the
previous chunk. A fast row must also be governed by a header of the layout it was read
with; a chunk where that does not hold is re-read entirely by the regular path. Midnight
roll-over and ``since_boot`` carry across chunks, so the tables are the same as the
regular path's, row for row (tests/parsers/test_mpstat_fast.py).

Each chunk's rows are conformed and handed to ``emit`` at once (the store's sink in the
pipeline), so memory stays at a few chunks whatever the file size.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import base

_TIME = (2, 5)  # colons of HH:MM:SS


@dataclass(frozen=True)
class Group:
    """Layouts read with one CSV schema: same width, slot boundaries and value columns."""

    width: int
    seps: tuple[int, ...]  # first byte of the key slot and of every value slot
    key_end: int
    names: tuple[str, ...]  # value column names as printed (%usr, intr/s, NET_RX/s...)
    kind: str  # cpu | irq
    hkeys: frozenset[str]


@dataclass
class State:
    """What carries from one chunk to the next."""

    header: pl.DataFrame | None = None  # the last header line seen (line_no, line)
    prev_sec: int | None = None
    day: int = 0
    seen: list[str] = field(default_factory=list)
    orphans: int = 0


def groups(head_headers: pl.DataFrame, pct_cols: dict[str, str]) -> list[Group]:
    """Fast-readable layouts among the headers of the file's head (``hkey``, ``line``)."""
    by_shape: dict[tuple, set[str]] = {}
    shapes: dict[tuple, Group] = {}
    for hkey, hline in head_headers.unique("hkey", maintain_order=True).iter_rows():
        lay = s.header_layout(hline)
        names = lay.names
        if len(names) < 3 or len(names[0]) != 8 or names[0][2] != ":" or names[0][5] != ":":
            continue
        if names[1] not in ("CPU", "NODE") or lay.starts[0] != 0:
            continue
        values = names[2:]
        if all(v in pct_cols for v in values):
            kind = "cpu"
        elif all(v.endswith("/s") for v in values):
            kind = "irq"
        else:
            continue
        seps = (lay.ends[0], *lay.ends[1:-1])
        shape = (lay.width, seps, values, kind)
        if any(k[0] == lay.width and k != shape for k in shapes):
            continue  # same width, other slots: leave it to the regular path
        by_shape.setdefault(shape, set()).add(hkey)
        shapes[shape] = Group(lay.width, seps, lay.ends[1], values, kind, frozenset())
    return [
        Group(g.width, g.seps, g.key_end, g.names, g.kind, frozenset(by_shape[k]))
        for k, g in shapes.items()
    ]


def _schema(g: Group) -> dict[str, pl.DataType]:
    return {
        "_h": pl.Int32,
        "_m": pl.Int32,
        "_s": pl.Int32,
        "key": pl.Int32,
        **{f"_v{i}": pl.Float64 for i in range(len(g.names))},
    }


def _fast_rows(chunk: fast.Chunk, g: Group, comma: bool) -> pl.DataFrame:
    """Rows of group ``g`` in the chunk: line_no, _sec, key, _v0.. (all valid)."""
    rows = fast.candidates(chunk, g.width)
    if rows.size == 0:
        return pl.DataFrame(schema={"line_no": pl.UInt32, "_sec": pl.Int32, **_schema(g)})
    rows = rows[fast.blank_at(chunk, rows, g.seps) & fast.blank_at(chunk, rows, _TIME, fast.COLON)]
    frame, kept = fast.read_rows(
        chunk, rows, (*_TIME, *g.seps), _schema(g), all_end=g.key_end, decimal_comma=comma
    )
    h, m, sec = pl.col("_h"), pl.col("_m"), pl.col("_s")
    good = pl.all_horizontal(pl.all().is_not_null()) & (h < 24) & (m < 60) & (sec < 61)
    good = good & (pl.col("key") >= -1) & (h >= 0) & (m >= 0) & (sec >= 0)
    return (
        frame.with_columns(pl.Series("line_no", chunk.line_nos(kept), dtype=pl.UInt32))
        .filter(good)
        .with_columns((h * 3600 + m * 60 + sec).alias("_sec"))
        .drop("_h", "_m", "_s")
    )


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
    """Read the whole file chunk by chunk, emitting conformed frames per table.

    A worker thread reads and CSV-parses chunk i+1 (numpy and polars release the GIL)
    while this thread finishes chunk i and hands it to ``emit``.
    """
    st = State()
    chunks = fast.iter_chunks(path, fast.CHUNK_BYTES)

    def prepare() -> tuple[fast.Chunk, np.ndarray, list[tuple[Group, pl.DataFrame]]] | None:
        chunk = next(chunks, None)
        return None if chunk is None else (chunk, *_fast_parts(chunk, gs, cx.comma))

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(prepare)
        while (item := pending.result()) is not None:
            pending = pool.submit(prepare)
            chunk, rest, parts = item
            cov.total += chunk.n
            out = _chunk(chunk, cx, cov, st, rest, parts)
            if out is None:  # a fast row under another table's header: re-read slowly
                out = _chunk(chunk, cx, cov, st, np.ones(chunk.n, dtype=bool), [])
            assert out is not None
            del item, rest, parts
            for name, frame in out.items():
                cx.emit(name, frame)
    cov.add_skipped("row without a table header above it", st.orphans)


def _fast_parts(
    chunk: fast.Chunk, gs: list[Group], comma: bool
) -> tuple[np.ndarray, list[tuple[Group, pl.DataFrame]]]:
    """Fast rows of every group and the mask of the other (rest) lines."""
    rest = np.ones(chunk.n, dtype=bool)
    parts = []
    for g in gs:
        f = _fast_rows(chunk, g, comma)
        rest[f.get_column("line_no").to_numpy().astype(np.int64) - chunk.first_line] = False
        parts.append((g, f))
    return rest, parts


def _chunk(
    chunk: fast.Chunk,
    cx: Ctx,
    cov: base.Coverage,
    st: State,
    rest: np.ndarray,
    parts: list[tuple[Group, pl.DataFrame]],
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
    if parts:
        gov = hdrs.select(
            pl.col("line_no").alias("_hln"), "hkey", pl.col("hdr_time").alias("_ht")
        ).sort("_hln")
        checked = []
        for g, f in parts:
            f = f.join_asof(gov, left_on="line_no", right_on="_hln", strategy="backward")
            if f.height and not f.get_column("hkey").is_in(list(g.hkeys)).fill_null(False).all():
                return None
            checked.append((g, f))
        parts = checked
    # Coverage of the regular lines (the carried header was counted in its own chunk).
    own = df.slice(1) if carried else df
    counts = dict(own.group_by("kind").len().iter_rows())
    for k in ("banner", "blank", "header", "average"):
        cov.add_structure(k, counts.get(k, 0))
    cov.add_skipped("unrecognized line", counts.get("other", 0))
    cov.add_skipped("truncated last line (no trailing newline)", counts.get("truncated", 0))
    rows = own.filter(pl.col("kind") == "row")
    st.orphans += rows.filter(pl.col("hdr") == 0).height
    rows = rows.with_columns(s.clock_seconds(pl.col("time")).alias("_sec"))
    slow_frames = cx.layout_frames(rows, hdrs, cx.comma, cov, st.seen)
    for _, f in parts:
        cov.parsed += f.height
    # Midnight roll-over over all rows of the chunk in file order, carried over.
    live = [(g, f) for g, f in parts if f.height]
    out: dict[str, list[pl.DataFrame]] = {}
    if len(live) == 1 and not rows.height:
        g, f = live[0]
        f = f.with_columns(_day_expr(st).alias("_day"))
        _carry(f.get_column("_sec"), f.get_column("_day"), st)
        live = [(g, f)]
    else:
        seq = [f.select("line_no", "_sec") for _, f in live]
        if rows.height:
            seq.append(rows.select("line_no", "_sec"))
        days = _days(seq, st)
        day = days.select("line_no", "_day")
        live = [(g, f.join(day, on="line_no", how="left", maintain_order="left")) for g, f in live]
        slow_frames = [
            (t, k, fr.join(days, on="line_no", how="left", maintain_order="left"))
            for t, k, fr in slow_frames
        ]
    for g, f in live:
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


def _days(seq: list[pl.DataFrame], st: State) -> pl.DataFrame:
    """``line_no``, ``_sec``, ``_day`` for the chunk's rows in file order (carry updated)."""
    if not seq:
        return pl.DataFrame(schema={"line_no": pl.UInt32, "_sec": pl.Int32, "_day": pl.Int32})
    allrows = seq[0] if len(seq) == 1 else pl.concat(seq).sort("line_no")
    d = allrows.with_columns(_day_expr(st).alias("_day"))
    _carry(d.get_column("_sec"), d.get_column("_day"), st)
    return d.select("line_no", "_sec", "_day")


def _day_expr(st: State) -> pl.Expr:
    filled = pl.col("_sec").forward_fill()
    prev = filled.shift(1, fill_value=st.prev_sec) if st.prev_sec is not None else filled.shift(1)
    return ((filled < prev).fill_null(False).cast(pl.Int32).cum_sum() + st.day).cast(pl.Int32)


def _carry(sec: pl.Series, day: pl.Series, st: State) -> None:
    last = sec.drop_nulls()
    if last.len():
        st.prev_sec = int(last[-1])
    if day.len():
        st.day = int(day[-1])


def _finish_fast(f: pl.DataFrame, g: Group, cx: Ctx) -> list[tuple[str, pl.DataFrame]]:
    """Typed table rows from fast rows: ts, since_boot, key, values."""
    if cx.day0 is not None:
        naive = pl.lit(cx.day0) + pl.duration(seconds=pl.col("_sec") + 86400 * pl.col("_day"))
        ts = s.local_to_utc(naive, cx.zone).cast(base.TS)
    else:
        ts = pl.lit(None, base.TS)
    hdr_sec = s.clock_seconds(pl.col("_ht"))
    since_boot = (pl.col("_sec") == hdr_sec).fill_null(False)
    base_cols = [pl.col("line_no"), ts.alias("ts"), since_boot.alias("since_boot")]
    out = []
    if g.kind == "cpu":
        is_node = pl.col("hkey").str.starts_with("NODE")
        vals = [pl.col(f"_v{i}").alias(cx.pct_cols[n]) for i, n in enumerate(g.names)]
        cpu = f.filter(~is_node)
        node = f.filter(is_node)
        if cpu.height:
            out.append(("mpstat_cpu", cpu.select(*base_cols, pl.col("key").alias("cpu"), *vals)))
        if node.height:
            out.append(("mpstat_node", node.select(*base_cols, pl.col("key").alias("node"), *vals)))
        return out
    kind = cx.table_kind(["CPU", *g.names])
    irq = ["sum"] if kind == "sum" else [n.removesuffix("/s") for n in g.names]
    k = len(irq)
    wide = f.select(*base_cols, pl.col("key").alias("cpu"), *[f"_v{i}" for i in range(k)])
    vals = np.column_stack([wide.get_column(f"_v{i}").to_numpy() for i in range(k)]).ravel()
    rep = np.repeat(np.arange(wide.height), k)
    which = np.tile(np.arange(k), wide.height)
    long = wide.select("line_no", "ts", "since_boot", "cpu")[rep].with_columns(
        pl.Series("irq", irq, dtype=pl.String).gather(which),
        pl.lit(kind).alias("kind"),
        pl.Series("per_s", vals),
    )
    out.append(("mpstat_irq", long))
    return out
