"""Local-time helpers shared by the nvidia-smi and bpftrace/bcc parsers (private module).

Tools such as ``nvidia-smi dmon -o DT``, ``nvidia-smi -q`` and bpftrace's ``time()`` print
wall-clock times without an offset. They are interpreted in ``ParseContext.tz`` when known,
else as UTC with a coverage note. Times printed without a date take the date of
``ParseContext.capture_start`` (in the same zone) and roll over at midnight.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import polars as pl

from analyzer.parsers.base import TS, ParseContext

_UTC_ALIASES = {"utc", "utc0", "gmt", "gmt0", "z", "zulu", "etc/utc", "etc/gmt", "universal"}


def resolve_tz(ctx: ParseContext) -> tuple[str, str | None]:
    """The zone to read local times in, plus a coverage note when it had to be assumed."""
    tz = (ctx.tz or "").strip()
    if not tz:
        return "UTC", "no timezone in context: printed local times assumed to be UTC"
    if tz.lower().lstrip(":") in _UTC_ALIASES:
        return "UTC", None
    try:
        ZoneInfo(tz.lstrip(":"))
    except (ValueError, KeyError, OSError):
        return "UTC", f"unknown timezone {tz!r}: printed local times assumed to be UTC"
    return tz.lstrip(":"), None


def local_to_utc(expr: pl.Expr, tz: str) -> pl.Expr:
    """Naive local datetimes -> UTC ``TS`` (DST gaps give NULL, folds the earliest)."""
    expr = expr.cast(pl.Datetime("us"))
    if tz == "UTC":
        return expr.dt.replace_time_zone("UTC").cast(TS)
    return (
        expr.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .cast(TS)
    )


def start_local(ctx: ParseContext, tz: str) -> datetime | None:
    """``capture_start`` as a naive local datetime in ``tz`` (None when unknown)."""
    if ctx.capture_start is None:
        return None
    start = ctx.capture_start
    if start.tzinfo is None:
        start = start.replace(tzinfo=ZoneInfo("UTC"))
    return start.astimezone(ZoneInfo(tz)).replace(tzinfo=None)


@dataclass
class DayCarry:
    """Midnight roll-over state of one sequence of times of day read in blocks.

    ``prev``: the last non-NULL seconds-of-day so far; ``back``: roll-overs so far;
    ``first``: the sequence's first non-NULL seconds-of-day (it decides the first day).
    """

    prev: float | None = None
    back: int = 0
    first: float | None = None

    def advance(self, sec: pl.Series) -> None:
        """Move past ``sec``, the seconds-of-day of one block (file order, NULLs allowed)."""
        vals = sec.drop_nulls()
        if vals.len() == 0:
            return
        prev = pl.Series([self.prev], dtype=pl.Float64).extend(vals.cast(pl.Float64))
        self.back += int((prev.slice(1) < prev.shift(1).slice(1)).fill_null(False).sum())
        if self.first is None:
            self.first = float(vals[0])
        self.prev = float(vals[-1])


def time_of_day_to_ts(
    sec: pl.Expr, ctx: ParseContext, tz: str, carry: DayCarry | None = None
) -> pl.Expr | None:
    """Seconds-of-day (Float64, file order, NULL allowed) -> UTC ts using the capture date.

    Midnight roll-over: one day is added each time the time of day goes backwards. The
    first day is the capture start's local date, or the next day when the first time is
    more than an hour before the capture start's time of day. None when no capture start.
    ``carry`` continues a sequence read in blocks: the roll-overs and first time of the
    blocks before (the caller advances it with `DayCarry.advance` after each block).
    """
    start = start_local(ctx, tz)
    if start is None:
        return None
    start_sec = start.hour * 3600 + start.minute * 60 + start.second
    filled = sec.forward_fill()
    prev, back0, first = None, 0, filled.drop_nulls().first()
    if carry is not None:
        prev, back0 = carry.prev, carry.back
        if carry.first is not None:
            first = pl.lit(carry.first, pl.Float64)
    if prev is not None:
        filled = filled.fill_null(prev)
        before = filled.shift(1, fill_value=prev)
    else:
        before = filled.shift(1)
    back = (filled < before).fill_null(False).cast(pl.Int64).cum_sum() + back0
    first_day = pl.when(first < start_sec - 3600).then(1).otherwise(0)
    day0 = datetime(start.year, start.month, start.day)
    offset_us = ((back + first_day) * 86400 * 1_000_000 + (sec * 1_000_000).round(0)).cast(pl.Int64)
    naive = pl.lit(day0, dtype=pl.Datetime("us")) + pl.duration(microseconds=offset_us)
    return pl.when(sec.is_not_null()).then(local_to_utc(naive, tz))


def hms_seconds(expr: pl.Expr) -> pl.Expr:
    """``HH:MM:SS[.frac]`` -> seconds of day (Float64), NULL when not a valid time."""
    parts = expr.str.extract_groups(r"^(\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?)$")
    h = parts.struct.field("1").cast(pl.Int64, strict=False)
    m = parts.struct.field("2").cast(pl.Int64, strict=False)
    s = parts.struct.field("3").cast(pl.Float64, strict=False)
    ok = (h < 24) & (m < 60) & (s < 61)
    return pl.when(ok).then(h * 3600 + m * 60 + s)
