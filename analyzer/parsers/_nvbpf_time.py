"""Local-time helpers of the nvidia-smi and bpftrace/bcc parsers: wall-clock times printed
without an offset are read in ``ParseContext.tz`` (UTC with a coverage note when unknown);
times without a date take ``ParseContext.capture_start``'s date and roll over at midnight.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import polars as pl

from analyzer.parsers import _sysstat
from analyzer.parsers.base import TS, ParseContext

_UTC_ALIASES = {"utc", "utc0", "gmt", "gmt0", "z", "zulu", "etc/utc", "etc/gmt", "universal"}


def resolve_tz(ctx: ParseContext) -> tuple[str, str | None]:
    """The zone to read local times in, plus a coverage note when it had to be assumed."""
    raw = (ctx.tz or "").strip()
    tz = raw.lstrip(":")
    if not raw:
        return "UTC", "no timezone in context: printed local times assumed to be UTC"
    if tz.lower() in _UTC_ALIASES:
        return "UTC", None
    try:
        ZoneInfo(tz)
    except (ValueError, KeyError, OSError):
        return "UTC", f"unknown timezone {raw!r}: printed local times assumed to be UTC"
    return tz, None


def local_to_utc(expr: pl.Expr, tz: str) -> pl.Expr:
    """Naive local datetimes -> UTC ``TS`` (DST gaps give NULL, folds the earliest)."""
    return _sysstat.local_to_utc(expr, tz).cast(TS)


@dataclass
class DayCarry:
    """Midnight roll-over state of one sequence of times of day read in blocks: ``prev``
    the last non-NULL seconds-of-day, ``back`` the roll-overs so far, ``first`` the first
    non-NULL seconds-of-day (it decides the first day)."""

    prev: float | None = None
    back: int = 0
    first: float | None = None

    def advance(self, sec: pl.Series) -> None:
        """Move past ``sec``, the seconds-of-day of one block (file order, NULLs allowed)."""
        vals = sec.drop_nulls().cast(pl.Float64)
        if vals.len() == 0:
            return
        steps = pl.concat([pl.Series([self.prev], dtype=pl.Float64), vals]).diff()
        self.back += int((steps < 0).sum())
        if self.first is None:
            self.first = float(vals[0])
        self.prev = float(vals[-1])


def time_of_day_to_ts(
    sec: pl.Expr, ctx: ParseContext, tz: str, carry: DayCarry | None = None
) -> pl.Expr | None:
    """Seconds-of-day (Float64, file order, NULL allowed) -> UTC ts using the capture date;
    None when there is no capture start.

    One day is added each time the time of day goes backwards. The first day is the
    capture start's local date, or the next day when the first time is more than an hour
    before the capture start's time of day. ``carry`` continues a sequence read in blocks
    (the caller advances it with `DayCarry.advance` after each block).
    """
    if ctx.capture_start is None:
        return None
    start = ctx.capture_start
    start = (start if start.tzinfo else start.replace(tzinfo=UTC)).astimezone(ZoneInfo(tz))
    start_sec = start.hour * 3600 + start.minute * 60 + start.second
    filled = sec.forward_fill()
    prev, back0, first = None, 0, filled.drop_nulls().first()
    if carry is not None:
        prev, back0 = carry.prev, carry.back
        if carry.first is not None:
            first = pl.lit(carry.first, pl.Float64)
    if prev is not None:
        filled = filled.fill_null(prev)
    back = (filled < filled.shift(1, fill_value=prev)).fill_null(False).cast(pl.Int64).cum_sum()
    first_day = pl.when(first < start_sec - 3600).then(1).otherwise(0)
    day0 = datetime(start.year, start.month, start.day)
    days = back + back0 + first_day
    offset_us = (days * 86400 * 1_000_000 + (sec * 1_000_000).round(0)).cast(pl.Int64)
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
