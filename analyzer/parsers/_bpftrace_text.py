"""Text-mode tokenizer for bpftrace / bcc output (private helper of ``bpftrace``).

Every line gets a kind from one ``when`` chain; histogram rows are tied to the header
that starts their run of rows (a segment), timestamps to the maps that follow them until
the next timestamp or a run of two blank lines (bpftrace's exit dump).

The file is read in blocks (`_blocks`) that start at an empty line: there a segment, a
stack key and a timestamp's reach can only continue through what `Carry` holds (the
timestamp in effect, whether the line before was blank, the midnight roll-over of
printed times). A line's kind depends on itself and, for section titles and bcc section
keys, on the next two lines: the block reader hands those over as ``ahead``.

Speed: the chain runs once per *distinct* line text (`_facts`; a capture repeats its
headers, blank lines and timestamps), and canonical bucket rows never enter it: they are
recognized by one regex and stand for their run of rows through one representative
(`_bpftrace_rows`). The per-line context work then runs on the other lines plus one line
per run — a fifth of a histogram capture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl

from analyzer.parsers import _bpftrace_rows as rows
from analyzer.parsers._bpftrace_kinds import (
    NOISE,
    ROW_KINDS,
    TIME_EPOCH,
    TIME_HMS,
    TIME_ISO,
    classify,
)
from analyzer.parsers._bpftrace_rows import TS_ROW, UNITS
from analyzer.parsers._nvbpf_time import DayCarry, hms_seconds, local_to_utc, time_of_day_to_ts
from analyzer.parsers.base import TS, Coverage, ParseContext

__all__ = ["NOISE", "UNITS", "Carry", "cut_before_blank", "finish", "time_values", "tokenize"]


def cut_before_blank(buf: bytes, limit: int) -> int:
    """Block cut for `_blocks.Blocks`: the start of the last empty line at or
    before ``limit`` (``\\n`` or ``\\r\\n``), -1 when there is none."""
    at = max(buf.rfind(b"\n\n", 0, limit + 1), buf.rfind(b"\n\r\n", 0, limit + 2))
    return at + 1 if at >= 0 else -1


@dataclass
class Carry:
    """What one block hands to the next (blocks start at an empty line)."""

    ts: datetime | None = None  # the timestamp in effect after the block
    prev_blank: bool = False  # the block's last line is blank
    times: DayCarry = field(default_factory=DayCarry)  # roll-over of timestamp lines
    tseries: DayCarry = field(default_factory=DayCarry)  # roll-over of tseries row times
    unplaced: int = 0  # timestamp lines whose ts is NULL


def time_values(
    frame: pl.DataFrame, col: str, ctx: ParseContext, tz: str, carry: DayCarry | None = None
) -> pl.Series:
    """Timestamp strings (file order) -> UTC datetimes: HH:MM:SS, ISO 8601, epoch seconds.

    ``carry`` continues the midnight roll-over of times of day from earlier blocks.
    """
    s = pl.col(col).str.strip_chars()
    hms = hms_seconds(s.str.extract(TIME_HMS, 1))
    by_day = time_of_day_to_ts(hms, ctx, tz, carry)
    iso = s.str.extract_groups(TIME_ISO)
    naive = (
        iso.struct.field("1")
        .str.replace(" ", "T")
        .str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.f", strict=False)
    )
    off = (
        iso.struct.field("2")
        .str.replace("Z", "+00:00")
        .str.replace(r"^([+-]\d{2})(\d{2})$", "$1:$2")
    )
    off_min = off.str.slice(0, 1).replace_strict(
        {"+": 1, "-": -1}, default=None, return_dtype=pl.Int64
    ) * (
        off.str.slice(1, 2).cast(pl.Int64, strict=False) * 60
        + off.str.slice(4, 2).cast(pl.Int64, strict=False)
    )
    with_off = (naive - pl.duration(minutes=off_min)).dt.replace_time_zone("UTC").cast(TS)
    epoch = s.str.extract(TIME_EPOCH, 1).cast(pl.Float64, strict=False)
    from_epoch = (
        pl.from_epoch((epoch * 1_000_000).round(0).cast(pl.Int64), time_unit="us")
        .dt.replace_time_zone("UTC")
        .cast(TS)
    )
    out = frame.select(
        pl.coalesce(
            by_day if by_day is not None else pl.lit(None, TS),
            pl.when(off.is_not_null()).then(with_off).otherwise(local_to_utc(naive, tz)),
            from_epoch,
        ).alias("ts"),
        hms.alias("hms"),
    )
    if carry is not None:
        carry.advance(out.get_column("hms"))
    return out.get_column("ts")


def _stacks(df: pl.DataFrame) -> pl.DataFrame:
    """Multi-line stack keys: ``@name[`` + indented frames + ``]:`` / ``]: value``.

    Adds ``frame_ok`` (a frame inside an open stack key) and, on the closing line,
    ``stack_map`` / ``stack_key`` (frames stripped and joined with ';'). A stack run
    (seg3) is a non-indented line and the indented lines after it.
    """
    kind = pl.col("kind")
    ind = kind == "indented"
    df = df.with_columns(
        seg3=(~ind).cast(pl.Int32).cum_sum(),
        st_start=pl.when(~ind).then(kind).forward_fill().fill_null(pl.lit("indented")),
        st_line=pl.when(~ind).then(pl.col("s")).forward_fill(),
    ).with_columns(frame_ok=ind & (pl.col("st_start") == "stack_open"))
    df = df.with_columns(
        prev_open=(pl.col("st_start").shift(1) == "stack_open") & pl.col("closing")
    )
    if not df.get_column("prev_open").any():
        return df.with_columns(stack_map=pl.lit(None, pl.String), stack_key=pl.lit(None, pl.String))
    keys = (
        df.filter(pl.col("frame_ok"))
        .group_by("seg3")
        .agg(pl.col("s").str.strip_chars().str.join(";").alias("stack_key"))
    )
    df = df.join(keys, on="seg3", how="left", maintain_order="left")
    prev_open = pl.col("prev_open")
    return df.with_columns(
        stack_map=pl.when(prev_open).then(
            pl.col("st_line").shift(1).str.extract(r"^(@[A-Za-z_0-9]*)\[", 1)
        ),
        stack_key=pl.when(prev_open).then(pl.col("stack_key").shift(1).fill_null("")),
    )


def _context(df: pl.DataFrame) -> pl.DataFrame:
    """Map/key of map lines, segments (a non-row line and the rows after it: ``starter``,
    ``starter_line``, ``bt_map``, ``bt_key``, ``hdr_prev``, ``hdr_prev_kind``) and
    ``valid`` (a row under a header of its own style)."""
    kind, s = pl.col("kind"), pl.col("s")
    df = _stacks(df).with_columns(
        here_map=pl.when(pl.col("closing")).then(pl.col("stack_map")).otherwise(pl.col("map0")),
        here_key=pl.when(pl.col("closing")).then(pl.col("stack_key")).otherwise(pl.col("key0")),
    )
    df = df.with_columns(
        kind=pl.when(kind.is_in(["bt_hdr", "bt_scalar"]) & pl.col("here_map").is_null())
        .then(pl.lit("other"))
        .otherwise(kind)
    )
    seg = (~kind.is_in(ROW_KINDS)).cast(pl.Int32).cum_sum()
    df = df.with_columns(seg=seg).with_columns(
        _start=pl.when(pl.col("seg") != pl.col("seg").shift(1, fill_value=-1))
        .then(pl.int_range(pl.len()))
        .forward_fill()
    )
    at = pl.col("_start")
    df = df.with_columns(
        starter=kind.gather(at),
        starter_line=s.gather(at),
        bt_map=pl.col("here_map").gather(at),
        bt_key=pl.col("here_key").gather(at),
        hdr_prev=s.shift(1).gather(at),
        hdr_prev_kind=kind.shift(1).gather(at),
    )
    valid = (
        ((kind == "bt_row") & (pl.col("starter") == "bt_hdr"))
        | ((kind == "bcc_row") & (pl.col("starter") == "bcc_hdr"))
        | (kind.is_in(["ts_row", "ts_axis"]) & (pl.col("starter") == "bt_hdr"))
    )
    return df.with_columns(valid=valid)


def _timestamps(df: pl.DataFrame, ctx: ParseContext, tz: str, carry: Carry) -> pl.DataFrame:
    """``ts`` of every line: the last timestamp line before it, until two blank lines."""
    kind = pl.col("kind")
    blank = kind == "blank"
    blank2 = blank & blank.shift(1, fill_value=carry.prev_blank)
    df = df.with_columns(
        mark=pl.when(kind == "time")
        .then(pl.col("line_no").cast(pl.Int64))
        .when(blank2)
        .then(0)
        .forward_fill()
    )
    times = df.filter(kind == "time").select("line_no", "s")
    ts = time_values(times, "s", ctx, tz, carry.times)
    carry.unplaced += ts.null_count()
    times = times.select(pl.col("line_no").cast(pl.Int64).alias("mark"), ts.alias("ts"))
    df = df.join(times, on="mark", how="left", maintain_order="left").with_columns(
        ts=pl.when(pl.col("mark").is_null()).then(pl.lit(carry.ts, TS)).otherwise(pl.col("ts"))
    )
    if df.height:
        carry.ts = df.get_column("ts")[-1]
        carry.prev_blank = df.get_column("kind")[-1] == "blank"
    return df


def _tally(df: pl.DataFrame, ts_rows: pl.DataFrame, cov: Coverage) -> None:
    """Coverage of every line (``w`` lines per row: a representative counts its run)."""
    keys = ["kind", "valid", "frame_ok", "prose"]
    groups = pl.concat(
        [
            df.filter(pl.col("kind") != "ts_row")
            .group_by(keys)
            .agg(pl.col("w").sum().alias("n"))
            .with_columns(has_val=pl.lit(None, pl.Boolean)),
            ts_rows.group_by([*keys, "has_val"]).agg(pl.col("w").sum().alias("n")),
        ],
        how="diagonal_relaxed",
    )
    kind, valid, has_val = pl.col("kind"), pl.col("valid"), pl.col("has_val")
    reason = (
        pl.when(valid & kind.is_in(["bt_row", "bcc_row"]))
        .then(pl.lit("P"))
        .when(kind == "bt_scalar")
        .then(pl.lit("P"))
        .when(valid & (kind == "ts_row") & has_val)
        .then(pl.lit("P"))
        .when(valid & (kind == "ts_row"))
        .then(pl.lit("S:tseries interval without data"))
        .when(valid & (kind == "ts_axis"))
        .then(pl.lit("S:tseries axis"))
        .when(kind.is_in(ROW_KINDS))
        .then(pl.lit("K:histogram row without header"))
        .when(kind.is_in(["bt_hdr", "bcc_hdr"]))
        .then(pl.lit("S:histogram/map header"))
        .when(kind == "stack_open")
        .then(pl.lit("S:stack key (map name)"))
        .when(pl.col("frame_ok"))
        .then(pl.lit("S:stack key (frame)"))
        .when(kind == "bcc_key")
        .then(pl.lit("S:bcc section key"))
        .when(kind == "time")
        .then(pl.lit("S:timestamp"))
        .when(kind == "blank")
        .then(pl.lit("S:blank"))
        .when(kind == "banner")
        .then(pl.lit("S:banner"))
        .when(kind == "ctrl_c")
        .then(pl.lit("S:interrupt echo (^C)"))
        .when(kind == "title")
        .then(pl.lit("S:section title"))
        .when(kind == "noise")
        .then(pl.lit("K:stderr noise"))
        .when(kind == "prompt")
        .then(pl.lit("K:shell prompt (transcript)"))
        .when((kind == "prose") | pl.col("prose"))
        .then(pl.lit("K:not tool output (prose)"))
        .otherwise(pl.lit("K:unrecognized line (unsupported output or garbage)"))
    )
    tally = groups.group_by(reason.alias("r")).agg(pl.col("n").sum())
    for r, n in tally.sort("r").iter_rows():
        if r == "P":
            cov.parsed += n
        elif r.startswith("S:"):
            cov.add_structure(r[2:], n)
        else:
            cov.add_skipped(r[2:], n)


def tokenize(
    lines: pl.DataFrame,
    ahead: pl.DataFrame,
    ctx: ParseContext,
    tz: str,
    cov: Coverage,
    carry: Carry,
    data: bytes | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One block (``line_no``, ``line``; ``ahead``: the next lines; ``data``: its bytes
    when known) -> (hist rows, scalar rows) as frames with typed columns; fills ``cov``
    and advances ``carry``."""
    if data is not None and (b"\x00" in data or b"\r" in data):
        data = None  # bytes were removed: the lines are not the bytes
    full = pl.concat([lines, ahead]) if ahead.height else lines
    rest, fast = classify(full, lines.height)
    first, length, run_of = rows.runs(fast)
    reps = lines.select(pl.all().gather(first)).select(
        "line_no",
        pl.col("line").alias("s"),
        pl.lit("bt_row").alias("kind"),
        pl.lit(False).alias("prose"),
        pl.lit(False).alias("closing"),
        pl.lit(None, pl.String).alias("map0"),
        pl.lit("").alias("key0"),
        pl.Series("w", length, dtype=pl.Int64),
        pl.Series("run", np.arange(first.size), dtype=pl.Int64),
    )
    df = pl.concat(
        [rest.with_columns(w=pl.lit(1, pl.Int64), run=pl.lit(None, pl.Int64)), reps]
    ).sort("line_no")
    df = _timestamps(_context(df), ctx, tz, carry)
    kind = pl.col("kind")
    slow = df.filter(pl.col("valid") & kind.is_in(["bt_row", "bcc_row"]) & pl.col("run").is_null())
    runs_ok = df.filter(pl.col("valid") & pl.col("run").is_not_null()).select(
        "run", "ts", "bt_map", "bt_key"
    )
    hist = rows.fast_hist_rows(lines, data, fast, run_of, runs_ok)
    if slow.height:
        hist = pl.concat([hist, rows.hist_rows(slow)]).sort("line_no")
    ts_rows = df.filter(kind == "ts_row").with_columns(
        has_val=pl.col("s").str.extract_groups(TS_ROW).struct.field("2") != "-"
    )
    with_val = ts_rows.filter(pl.col("valid") & pl.col("has_val"))
    times = None
    if with_val.height:
        t = with_val.select(pl.col("s").str.extract_groups(TS_ROW).struct.field("1").alias("t"))
        times = time_values(t, "t", ctx, tz, carry.tseries)
    scalars = rows.scalar_rows(df.filter(kind == "bt_scalar"), with_val, times)
    _tally(df, ts_rows, cov)
    return hist.drop("line_no"), scalars


def finish(carry: Carry, cov: Coverage) -> None:
    """Notes that sum over all blocks (after the last one)."""
    if carry.unplaced:
        cov.notes.append(
            f"{carry.unplaced} timestamp line(s) could not be placed (time of day without a capture start date, or invalid): ts NULL"
        )
