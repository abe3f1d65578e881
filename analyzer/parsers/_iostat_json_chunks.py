"""``iostat -o JSON``, big files: block by block, rows handed to ``ctx.sink`` as they come.

The line rules are :mod:`._iostat_json`'s (the reference, used for small files), applied to
blocks of whole lines (:func:`._sysstat_fast.read_blocks`), with the statistics/report count
carried from block to block. What depends on the whole file is read first, by one pass
of polars over the lines: the first 200 disk records (their keys are the columns), the
first complete one (its key order makes the one-regex fast path) and the device names of
all complete records (``is_partition`` depends on them). A report's rows are handed over
once the report is closed (its stamp may come after them), so memory stays at a block and
one report whatever the file size. Tables and coverage are the reference's, row for row
(tests/parsers/test_sysstat_fast.py).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _iostat_json as j
from analyzer.parsers import _read, base
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast

_TABLES = ("iostat_device", "iostat_cpu")


@dataclass
class _Head:
    """What the first pass found."""

    keys: list[str]
    order: list[str]
    names: set[str]


@dataclass
class _State:
    """What carries from block to block."""

    line: int = 1
    stats: int = 0  # "statistics" lines so far
    reports: int = 0  # reports started so far
    counts: dict[str, int] = field(default_factory=dict)
    stamps: pl.DataFrame | None = None  # the open report's stamps
    held: dict[str, pl.DataFrame] = field(default_factory=dict)  # the open report's rows
    no_time: bool = False
    timed: int = 0  # reports whose times were computed
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_TABLES, 0))


def _lines(source: Path | bytes, nul: bool, cr: bool) -> pl.LazyFrame:
    """Lines as :func:`_read.read_lines` gives them (``nul``/``cr``: the text has any); a
    path is read as named, never as a glob pattern."""
    lf = pl.scan_lines(source, glob=False)
    if nul:
        lf = lf.with_columns(pl.col("line").str.replace_all("\x00", "", literal=True))
    if cr:
        lf = lf.with_columns(pl.col("line").str.strip_suffix("\r"))
    return lf


def _first_pass(source: Path) -> _Head:
    nul, cr = _has(source)
    line = pl.col("line")
    disk = line.str.contains(j._DISK)
    good = disk & line.str.contains(j._COMPLETE)
    device = line.str.extract(j._DEVICE)
    lf = _lines(source, nul, cr)
    first = lf.filter(disk).head(200).collect().get_column("line")
    order = lf.filter(good & device.is_not_null()).head(1).collect().get_column("line").to_list()
    names = lf.filter(good).select(device.str.strip_chars(" ").drop_nulls().unique())
    names = names.collect(engine="streaming")
    return _Head(j._keys(first), j._order(order[0] if order else None), set(names.to_series()))


def _has(path: Path, chunk: int = 1 << 22) -> tuple[bool, bool]:
    """Whether the file holds a NUL byte, a CR."""
    nul = cr = False
    with open(path, "rb", buffering=0) as f:
        while (block := f.read(chunk)) and not (nul and cr):
            nul, cr = nul or b"\x00" in block, cr or b"\r" in block
    return nul, cr


def parse(path: Path, ctx: base.ParseContext, cov: base.Coverage, repair: bool) -> base.ParseResult:
    """Parse a big iostat JSON file (see the module doc)."""
    head = _read.read_head(path)
    source = _read.utf8_clean_copy(path) if repair else path
    hd = _first_pass(source)
    casts = j._casts(hd.keys)
    parts = c.partitions(hd.names, ctx, [])
    is_part = pl.lit(None, pl.Boolean) if parts is None else pl.col("device").is_in(sorted(parts))
    flags = s.short_flags(ctx.command)
    y = bool(flags and "y" in flags)
    date_text = j._head_value(head, "date") or ""
    zone = s.resolve_tz(ctx.tz)[0]
    st = _State()
    kept: dict[str, list[pl.DataFrame]] = {t: [] for t in _TABLES}

    def out(name: str, frame: pl.DataFrame) -> None:
        if not frame.height:
            return
        st.rows[name] += frame.height
        frame = c.TABLES[name].conform(frame).collect()
        if ctx.sink is not None:
            ctx.sink(name, frame)
        else:
            kept[name].append(frame)

    def work(buf: np.ndarray) -> _Block:
        return _typed(buf, hd, casts, is_part, date_text, zone)

    with ThreadPoolExecutor(max_workers=2) as pool:  # blocks i+1, i+2 typed meanwhile
        pending: deque = deque()
        for buf in fast.read_blocks(source, fast.CHUNK_BYTES):
            pending.append(pool.submit(work, buf))
            while len(pending) > 2 or (pending and pending[0].done()):
                _take(pending.popleft().result(), st, cov, ctx, y, out)
        while pending:
            _take(pending.popleft().result(), st, cov, ctx, y, out)
    _release({}, None, st, ctx, y, out, final=True)
    return _result(st, kept, head, date_text, flags, hd.names, ctx, cov)


@dataclass
class _Block:
    """A block as a worker leaves it: rows typed, each with ``line_no`` counted from 0 in
    the block (``report`` is set later, in file order)."""

    lines: int
    stats: np.ndarray  # the block's "statistics" lines (mask)
    opens: np.ndarray  # its lone "{" lines
    counts: dict[str, int]
    frames: dict[str, pl.DataFrame]
    ts: pl.DataFrame  # line_no, ts
    bad: dict[str, int]


def _typed(
    buf: np.ndarray, hd: _Head, casts: list, is_part: pl.Expr, date_text: str, zone: str | None
) -> _Block:
    """The worker's part: classify and type one block (the reference's expressions)."""
    data = buf.tobytes()
    df = (
        _lines(data, b"\x00" in data, b"\r" in data)
        .with_row_index("line_no")
        .with_columns(j._kind().alias("kind"), pl.lit(0, pl.Int32).alias("report"))
        .collect()
    )
    line = pl.col("line")
    device = line.str.extract(j._DEVICE)
    disks = df.filter(pl.col("kind") == "disk")
    good = disks.filter(line.str.contains(j._COMPLETE) & device.is_not_null())
    dev = j._disk_rows(good, hd.keys, device, casts, hd.order)
    dev = dev.with_columns(is_part.alias("is_partition"))
    cpus = df.filter(pl.col("kind") == "cpu")
    cpu = j._cpu_rows(cpus)
    ts = df.filter(pl.col("kind") == "ts").select(
        "line_no", s.stamp_to_utc(j._stamp(date_text), zone).alias("ts")
    )
    kind = df.get_column("kind")
    return _Block(
        df.height,
        (kind == "stats").to_numpy(),
        (kind == "open").to_numpy(),
        dict(df.group_by("kind").len().iter_rows()),
        {"iostat_device": dev, "iostat_cpu": cpu},
        ts,
        {"disk": disks.height - dev.height, "cpu": cpus.height - cpu.height},
    )


def _take(b: _Block, st: _State, cov: base.Coverage, ctx: base.ParseContext, y: bool, out) -> None:
    """This thread's part, in file order: line numbers, reports (carried), coverage, then
    the rows of the closed reports."""
    seen = (np.cumsum(b.stats) + st.stats) > 0
    n = np.cumsum(b.opens & seen)
    report = (n - 1 + st.reports).astype(np.int32)

    def placed(frame: pl.DataFrame) -> pl.DataFrame:
        at = frame.get_column("line_no").to_numpy().astype(np.int64)
        return frame.with_columns(
            pl.Series("line_no", at + st.line, dtype=pl.UInt32),
            pl.Series("report", report[at], dtype=pl.Int32),
        )

    frames = {name: placed(f) for name, f in b.frames.items()}
    ts = placed(b.ts.with_columns(pl.lit(0, pl.Int32).alias("report"))).select("report", "ts")
    st.line += b.lines
    st.stats += int(b.stats.sum())
    st.reports += int(n[-1]) if n.size else 0
    for k, v in b.counts.items():
        st.counts[k] = st.counts.get(k, 0) + v
    cov.add_skipped("malformed JSON disk record", b.bad["disk"])
    cov.add_skipped("malformed JSON avg-cpu record", b.bad["cpu"])
    cov.parsed += sum(f.height for f in frames.values())
    _release(frames, ts, st, ctx, y, out, final=False)


def _release(
    new: dict[str, pl.DataFrame],
    ts: pl.DataFrame | None,
    st: _State,
    ctx: base.ParseContext,
    y: bool,
    out: object,
    final: bool,
) -> None:
    """Hand over the rows of the closed reports with their times; hold the open one's."""
    open_r = st.reports - 1  # the report the block ends in (its stamp may still come)
    stamps = [x for x in (st.stamps, ts) if x is not None]
    stamp = (
        pl.concat(stamps) if stamps else pl.DataFrame(schema={"report": pl.Int32, "ts": base.TS})
    )
    stamp = stamp.unique("report", keep="first", maintain_order=True)
    last = open_r if final else open_r - 1
    times, no_time = c.times_for(
        pl.DataFrame({"report": range(st.timed, last + 1)}, schema={"report": pl.Int32}),
        stamp,
        ctx,
        y,
    )
    st.no_time |= no_time
    st.timed = max(st.timed, last + 1)
    st.stamps = stamp.filter(pl.col("report") >= st.timed)
    for name in _TABLES:
        frames = [x for x in (st.held.get(name), new.get(name)) if x is not None and x.height]
        if not frames:
            st.held.pop(name, None)
            continue
        rows = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
        hold = (pl.col("report") == open_r) & pl.lit(not final and open_r >= 0)
        st.held[name] = rows.filter(hold)
        done = rows.filter(~hold).join(times, on="report", how="left", maintain_order="left")
        out(name, done)  # type: ignore[operator]


def _result(
    st: _State,
    kept: dict[str, list[pl.DataFrame]],
    head: str,
    date_text: str,
    flags: set[str] | None,
    names: set[str],
    ctx: base.ParseContext,
    cov: base.Coverage,
) -> base.ParseResult:
    """Coverage and notes (in the reference's order) once every block is done."""
    n = st.counts
    cov.total = st.line - 1
    if n.get("disk", 0) + n.get("cpu", 0) + n.get("stats", 0) == 0 and cov.total - n.get(
        "blank", 0
    ):
        raise ParseError(f"{ctx.file_name}: no iostat JSON statistics found")
    cov.add_structure("blank", n.get("blank", 0))
    cov.add_structure("json", sum(n.get(k, 0) for k in ("json", "open", "stats")))
    cov.add_structure("timestamp", n.get("ts", 0))
    cov.add_skipped("not JSON", n.get("other", 0))
    if n.get("ts", 0):
        s.tz_for(ctx, cov)
    if flags is None:
        cov.notes.append("no iostat command line known: first report assumed since boot (no -y)")
    if st.no_time:
        cov.notes.append(c.NO_TIME_NOTE)
    if st.rows["iostat_device"]:
        c.partitions(names, ctx, cov.notes)  # its notes
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {
        name: pl.concat(frames) for name, frames in kept.items() if frames
    }
    return base.ParseResult(tables=tables, coverage=cov, meta=j._meta(head, date_text))
