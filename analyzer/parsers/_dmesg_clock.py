"""Put kernel log rows on the wall clock (private helper of `analyzer.parsers.dmesg`).

Sources, best first: an ISO stamp with offset ('iso'), a `-T` ctime stamp in local time
('ctime'), a syslog/journal prefix in local time without a year ('syslog'), a raw uptime
plus the known boot time ('kmsg+boot' for /dev/kmsg records, 'boot+uptime' otherwise).
Never invented: a row none of these applies to keeps ts NULL.
"""

from __future__ import annotations

import zoneinfo
from datetime import timedelta

import polars as pl

from analyzer.parsers import base
from analyzer.parsers._dmesg_tokens import month_number

_UTC_NAMES = {"UTC", "UTC0", "GMT", "GMT0", "Etc/UTC", "Etc/GMT", "Z", "Universal", "Zulu"}
_STR_COLS = ("iso", "cmon", "cday", "chms", "cyear", "smon", "sday", "shms", "siso", "ident")


def _zone(tz: str | None, cov: base.Coverage, what: str) -> str:
    if tz is None:
        cov.notes.append(f"{what} printed in local time and host timezone unknown: read as UTC")
        return "UTC"
    if tz in _UTC_NAMES:
        return "UTC"
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        cov.notes.append(f"unknown timezone {tz!r}: {what} read as UTC")
        return "UTC"
    return tz


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


def place_on_clock(df: pl.DataFrame, ctx: base.ParseContext, cov: base.Coverage) -> pl.DataFrame:
    """Add `ts` (UTC) and `ts_source` to the tokenized rows."""
    df = df.with_columns(pl.lit(None, pl.String).alias(c) for c in _STR_COLS if c not in df.columns)
    if "is_kmsg" not in df.columns:
        df = df.with_columns(pl.lit(False).alias("is_kmsg"))
    has_ctime = df["chms"].is_not_null().any()
    has_syslog = df["shms"].is_not_null().any()
    iso_ts = _iso(pl.col("iso"))
    exprs: list[tuple[str, pl.Expr]] = [("iso", iso_ts)]
    if has_ctime:
        tz = _zone(ctx.tz, cov, "dmesg -T (ctime) times")
        naive = _naive(
            pl.col("cyear"), month_number(pl.col("cmon")), pl.col("cday"), pl.col("chms")
        )
        exprs.append(("ctime", _local(naive, tz)))
        bad = df.filter(
            pl.col("chms").is_not_null() & month_number(pl.col("cmon")).is_null()
        ).height
        if bad:
            cov.notes.append(f"{bad} ctime stamps with an unknown month name: ts NULL")
    exprs.append(("syslog", _iso(pl.col("siso"))))
    if has_syslog:
        if ctx.capture_start is None:
            cov.notes.append(
                "syslog/journal times carry no year and capture_start is unknown: ts NULL"
            )
        else:
            tz = _zone(ctx.tz, cov, "syslog/journal times")
            ref = ctx.capture_end or ctx.capture_start
            month = month_number(pl.col("smon"))
            this = _local(_naive(pl.lit(ref.year), month, pl.col("sday"), pl.col("shms")), tz)
            last = _local(_naive(pl.lit(ref.year - 1), month, pl.col("sday"), pl.col("shms")), tz)
            limit = ref + timedelta(days=2)
            exprs.append(("syslog", pl.when(this > pl.lit(limit)).then(last).otherwise(this)))
    if ctx.boot_time is not None:
        wrapped = pl.col("ident").is_not_null()
        up = pl.lit(ctx.boot_time).cast(base.TS) + pl.duration(
            microseconds=(pl.col("uptime_s") * 1e6).round(0).cast(pl.Int64)
        )
        exprs.append(("kmsg+boot", pl.when(~wrapped & pl.col("is_kmsg")).then(up)))
        exprs.append(("boot+uptime", pl.when(~wrapped).then(up)))
    ts = pl.coalesce(e.cast(base.TS) for _, e in exprs)
    source = pl.when(exprs[0][1].is_not_null()).then(pl.lit(exprs[0][0]))
    for name, e in exprs[1:]:
        source = source.when(e.is_not_null()).then(pl.lit(name))
    return df.with_columns(ts.alias("ts"), source.alias("ts_source"))
