"""Timestamps printed by sadf: ``YYYY-MM-DD HH:MM:SS [ZONE]`` (``-d``/``-p``), epoch seconds
(``-U``), and JSON ``{"date", "time", "utc": 0|1 | "tz": ZONE}`` (``-j``).

A zone name printed by ``sadf -T``/``-t`` is an abbreviation (``CET``, ``EST``): only UTC
names are trusted; any other (or none, JSON ``"utc": 0``) is local time, read in ``ctx.tz``,
else assumed UTC with a coverage note.
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers import _sysstat as ss
from analyzer.parsers import base

#: zone names that are UTC. Other abbreviations (``CET``, ``EST``) are not mapped to fixed
#: offsets: they are ambiguous (``CST``, ``IST``) or follow a custom ``TZ`` (the sysstat tests
#: print ``CET`` for UTC+2); they are read as local time in ``ctx.tz``.
ZONE_OFFSETS: dict[str, int] = {"UTC": 0, "GMT": 0, "UT": 0, "Z": 0, "UCT": 0}


def to_utc(
    date: pl.Expr,
    time: pl.Expr,
    zone: pl.Expr,
    epoch: pl.Expr,
    zones: list[str | None],
    ctx: base.ParseContext,
    cov: base.Coverage,
) -> pl.Expr:
    """UTC ``ts`` from string columns; ``zones`` are the distinct zone values present.

    ``zone`` NULL means "local time" (sadf ``-t``-less JSON with ``"utc": 0`` or a missing
    zone); ``epoch`` (digits) wins when present.
    """
    naive = pl.concat_str([date, pl.lit(" "), time]).str.to_datetime(
        "%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"
    )
    expr: pl.Expr = pl.lit(None, base.TS)
    for z in zones:
        if z is not None and z.upper() in ZONE_OFFSETS:
            val = (naive - pl.duration(seconds=ZONE_OFFSETS[z.upper()])).dt.replace_time_zone("UTC")
            expr = pl.when(zone == z).then(val).otherwise(expr)
    local = sorted({z or "" for z in zones if z is None or z.upper() not in ZONE_OFFSETS})
    if local:
        local_zone = ss.tz_for(ctx, cov)
        if any(local):
            cov.notes.append(
                f"time zone name(s) {', '.join(n for n in local if n)} not mapped to an offset: "
                "read as local time"
            )
        unmapped = zone.is_null() | ~zone.str.to_uppercase().is_in(list(ZONE_OFFSETS))
        expr = pl.when(unmapped).then(ss.local_to_utc(naive, local_zone)).otherwise(expr)
    from_epoch = pl.from_epoch(
        epoch.cast(pl.Int64, strict=False), time_unit="s"
    ).dt.replace_time_zone("UTC")
    return pl.when(epoch.is_not_null()).then(from_epoch).otherwise(expr).cast(base.TS)
