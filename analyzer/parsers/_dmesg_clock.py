"""Put kernel log rows on the wall clock (private helper of `analyzer.parsers.dmesg`).

Sources, best first: an ISO stamp with offset ('iso'), a `-T` ctime stamp in local time
('ctime'), a syslog/journal prefix in local time without a year ('syslog'), a raw uptime
plus the known boot time ('kmsg+boot' for /dev/kmsg records, 'boot+uptime' otherwise).
Never invented: a row none of these applies to keeps ts NULL.

A stamp that cannot be a real one marks its row ``_bad`` (the parser skips it, reason
`SKIP_RANGE`) instead of failing the file: an uptime that is not a number of seconds in
[0, `MAX_UPTIME_S`] (NaN, infinite, negative, `[1000000000000000.000000]`), a date or time
that does not exist (month 13, Feb 30, 25:00, offset +99:99), or a wall-clock time outside
[`TS_MIN`, `TS_MAX`) (year 0, year 9999). A local time skipped by a DST change is not bad:
it keeps ts NULL as before.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import polars as pl

from analyzer.parsers import base
from analyzer.parsers._dmesg_tokens import month_number

_UTC_NAMES = {"UTC", "UTC0", "GMT", "GMT0", "Etc/UTC", "Etc/GMT", "Z", "Universal", "Zulu"}
_STR_COLS = ("iso", "cmon", "cday", "chms", "cyear", "smon", "sday", "shms", "siso", "ident")

#: Longest plausible uptime (100 years, in seconds); the kernel's own limit is ~584 years.
MAX_UPTIME_S = 100 * 365.25 * 86400
#: Wall-clock times outside [TS_MIN, TS_MAX) are not believed (every later step, Python's
#: datetime included, can hold them).
TS_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TS_MAX = datetime(2200, 1, 1, tzinfo=UTC)
SKIP_RANGE = "timestamp out of range"


@dataclass
class ClockNotes:
    """The clock's coverage notes for one file, gathered over its blocks (each once, in a
    fixed order whatever the block a row was in)."""

    ctime_zone: str | None = None
    unknown_month: int = 0
    syslog_no_year: bool = False
    syslog_zone: str | None = None

    def lines(self) -> list[str]:
        out = [self.ctime_zone] if self.ctime_zone else []
        if self.unknown_month:
            out.append(f"{self.unknown_month} ctime stamps with an unknown month name: ts NULL")
        if self.syslog_no_year:
            out.append("syslog/journal times carry no year and capture_start is unknown: ts NULL")
        return out + ([self.syslog_zone] if self.syslog_zone else [])


def _zone(tz: str | None, what: str) -> tuple[str, str | None]:
    """The zone to read local times in, and the note to make about it (None: none)."""
    if tz is None:
        return "UTC", f"{what} printed in local time and host timezone unknown: read as UTC"
    if tz in _UTC_NAMES:
        return "UTC", None
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return "UTC", f"unknown timezone {tz!r}: {what} read as UTC"
    return tz, None


def _local(naive: pl.Expr, tz: str) -> pl.Expr:
    if tz == "UTC":
        return naive.dt.replace_time_zone("UTC")
    return naive.dt.replace_time_zone(
        tz, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")


def _naive(year: pl.Expr, month: pl.Expr, day: pl.Expr, hms: pl.Expr) -> pl.Expr:
    text = pl.concat_str(
        year.cast(pl.String),
        pl.lit("-"),
        month.cast(pl.String).str.zfill(2),
        pl.lit("-"),
        day.cast(pl.String).str.zfill(2),
        pl.lit(" "),
        hms,
    )
    return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)


def _iso(expr: pl.Expr) -> pl.Expr:
    norm = expr.str.replace(",", ".", literal=True).str.replace(r"Z$", "+00:00")
    return norm.str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%z", time_zone="UTC", time_unit="us", strict=False
    )


def _uptime_ok(up: pl.Expr) -> pl.Expr:
    return up.is_finite() & (up >= 0) & (up <= MAX_UPTIME_S)


def place_on_clock(df: pl.DataFrame, ctx: base.ParseContext, notes: ClockNotes) -> pl.DataFrame:
    """Add `ts` (UTC), `ts_source`, `_bad` (the row's stamp is impossible or out of range,
    see the module doc) and `_unknown_month` (a ctime stamp whose month name is unknown:
    the caller counts the rows it keeps in ``notes.unknown_month``) to the tokenized rows;
    the other notes go to ``notes``."""
    df = df.with_columns(pl.lit(None, pl.String).alias(c) for c in _STR_COLS if c not in df.columns)
    if "is_kmsg" not in df.columns:
        df = df.with_columns(pl.lit(False).alias("is_kmsg"))
    has_ctime = df["chms"].is_not_null().any()
    has_syslog = df["shms"].is_not_null().any()
    iso_ts = _iso(pl.col("iso"))
    exprs: list[tuple[str, pl.Expr]] = [("iso", iso_ts)]
    unknown_month = pl.lit(False)
    # A stamp that is there but gives no date: it does not exist (month 13, Feb 30...).
    impossible = pl.col("iso").is_not_null() & iso_ts.is_null()
    if has_ctime:
        tz, note = _zone(ctx.tz, "dmesg -T (ctime) times")
        notes.ctime_zone = notes.ctime_zone or note
        month = month_number(pl.col("cmon"))
        naive = _naive(pl.col("cyear"), month, pl.col("cday"), pl.col("chms"))
        exprs.append(("ctime", _local(naive, tz)))
        unknown_month = pl.col("chms").is_not_null() & month.is_null()
        impossible = impossible | (month.is_not_null() & naive.is_null())
    siso = _iso(pl.col("siso"))
    exprs.append(("syslog", siso))
    impossible = impossible | (pl.col("siso").is_not_null() & siso.is_null())
    if has_syslog:
        if ctx.capture_start is None:
            notes.syslog_no_year = True
        else:
            tz, note = _zone(ctx.tz, "syslog/journal times")
            notes.syslog_zone = notes.syslog_zone or note
            ref = ctx.capture_end or ctx.capture_start
            month = month_number(pl.col("smon"))
            this_naive = _naive(pl.lit(ref.year), month, pl.col("sday"), pl.col("shms"))
            last_naive = _naive(pl.lit(ref.year - 1), month, pl.col("sday"), pl.col("shms"))
            this, last = _local(this_naive, tz), _local(last_naive, tz)
            limit = ref + timedelta(days=2)
            # Feb 29 exists in one of the two years only: the one where it does.
            later = this_naive.is_null() | (this > pl.lit(limit))
            pick = pl.when(later).then(last).otherwise(this)
            exprs.append(("syslog", pick))
            no_day = month.is_not_null() & this_naive.is_null() & last_naive.is_null()
            impossible = impossible | no_day
    up_ok = _uptime_ok(pl.col("uptime_s"))
    if ctx.boot_time is not None:
        wrapped = pl.col("ident").is_not_null()
        micros = (pl.when(up_ok).then(pl.col("uptime_s")) * 1e6).round(0).cast(pl.Int64)
        up = pl.lit(ctx.boot_time).cast(base.TS) + pl.duration(microseconds=micros)
        exprs.append(("kmsg+boot", pl.when(~wrapped & pl.col("is_kmsg")).then(up)))
        exprs.append(("boot+uptime", pl.when(~wrapped).then(up)))
    ts = pl.coalesce(e.cast(base.TS) for _, e in exprs)
    source = pl.when(exprs[0][1].is_not_null()).then(pl.lit(exprs[0][0]))
    for name, e in exprs[1:]:
        source = source.when(e.is_not_null()).then(pl.lit(name))
    out_of_range = (pl.col("ts") < pl.lit(TS_MIN)) | (pl.col("ts") >= pl.lit(TS_MAX))
    bad_uptime = pl.col("uptime_s").is_not_null() & ~up_ok
    return df.with_columns(
        ts.alias("ts"),
        source.alias("ts_source"),
        impossible.fill_null(False).alias("_imp"),
        unknown_month.alias("_unknown_month"),
    ).with_columns((pl.col("_imp") | bad_uptime | out_of_range.fill_null(False)).alias("_bad"))
