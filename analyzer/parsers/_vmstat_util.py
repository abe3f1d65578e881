"""Private helpers of the vmstat parser: the command line, time zones, derived times,
and the ``-d`` / ``-s`` / ``-D`` tables. Not a parser module (no TABLES/sniff/parse).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from analyzer.parsers import base

# Bytes per unit letter of `vmstat -S` (procps: k=1000, K=1024, m=1000000, M=1048576).
UNIT_BYTES = {"k": 1000, "K": 1024, "m": 1_000_000, "M": 1_048_576}
UTC_NAMES = {"UTC", "GMT", "UCT", "Z", "ZULU", "UNIVERSAL", "UTC0", "GMT0", "ETC/UTC", "ETC/GMT"}
TS_PART = r"[ \t]+[0-9]{4}-[0-9]{2}-[0-9]{2}[ \t]+[0-9]{2}:[0-9]{2}:[0-9]{2}"
TS_TAIL = TS_PART + r"\s*$"
TS_FMT = "%Y-%m-%d %H:%M:%S"
# Header of `vmstat -d`: reads (4), writes (4), IO (2); a zone name follows with -t.
DISK_HEADER = ("total", "merged", "sectors", "ms") * 2 + ("cur", "sec")
DISK_COLS = (
    "reads_total",
    "reads_merged",
    "read_sectors",
    "read_ms",
    "writes_total",
    "writes_merged",
    "write_sectors",
    "write_ms",
    "io_cur",
    "io_s",
)
SUMMARY_RE = r"^[ \t]*([0-9]+)[ \t]+(?:([KkMm])[ \t]+)?([A-Za-z][A-Za-z0-9/()_ -]*?)[ \t]*$"


@dataclass
class Command:
    """What the recorded command line says about the output (all None when unknown)."""

    known: bool = False
    unit: str | None = None
    no_first: bool = False
    delay_s: float | None = None
    tz_env: str | None = None


def parse_command(command: str | None) -> Command:
    """Read `-S/--unit`, `-y/--no-first`, the delay and a `TZ=` prefix after the vmstat word."""
    if not command:
        return Command()
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    idx = next((i for i, w in enumerate(words) if Path(w).name == "vmstat"), None)
    if idx is None:
        return Command()
    cmd = Command(known=True, unit="K")
    for w in words[:idx]:
        if w.startswith("TZ="):
            cmd.tz_env = w[3:] or None
    args = words[idx + 1 :]
    i = 0
    positional: list[str] = []
    while i < len(args):
        w = args[i]
        if w.startswith("--"):
            name, _, val = w[2:].partition("=")
            if name == "unit":
                if not val and i + 1 < len(args):
                    i += 1
                    val = args[i]
                cmd.unit = val or cmd.unit
            elif name == "no-first":
                cmd.no_first = True
            elif name == "partition" and not val:
                i += 1
        elif w.startswith("-") and len(w) > 1:
            for j, ch in enumerate(w[1:], start=1):
                if ch in "Sp":
                    val = w[j + 1 :]
                    if not val and i + 1 < len(args):
                        i += 1
                        val = args[i]
                    if ch == "S":
                        cmd.unit = val or cmd.unit
                    break
                if ch == "y":
                    cmd.no_first = True
        else:
            positional.append(w)
        i += 1
    if positional:
        try:
            delay = float(positional[0])
            cmd.delay_s = delay if delay > 0 else None
        except ValueError:
            pass
    return cmd


def resolve_zone(name: str | None) -> str | None:
    """An IANA zone usable by polars for ``name`` ('UTC' for UTC spellings), else None."""
    if not name:
        return None
    if name.upper() in UTC_NAMES:
        return "UTC"
    try:
        ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        return None
    return name


def printed_ts(expr: pl.Expr, abbrev: str | None, zone: str | None, notes: list[str]) -> pl.Expr:
    """Turn a 'YYYY-MM-DD HH:MM:SS' string expression printed in zone ``abbrev`` into UTC.

    ``zone`` is the resolved host zone (command TZ= or ctx.tz). UTC abbreviations need none.
    """
    naive = expr.str.strptime(pl.Datetime("us"), TS_FMT, strict=False)
    if abbrev is None or abbrev.upper() in UTC_NAMES:
        return naive.dt.replace_time_zone("UTC")
    if zone is None:
        notes.append(
            f"timestamps printed in zone {abbrev!r} but the host time zone is unknown: "
            "assumed UTC (may be off by that zone's UTC offset)"
        )
        return naive.dt.replace_time_zone("UTC")
    notes.append(f"timestamps printed in zone {abbrev!r} interpreted in {zone}")
    return naive.dt.replace_time_zone(
        zone, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")


def check_abbrev(
    abbrev: str | None, zone: str | None, first: datetime | None, notes: list[str]
) -> None:
    """Note when the zone name vmstat printed is not what ``zone`` calls itself at ``first``."""
    if not abbrev or not zone or zone == "UTC" or first is None or abbrev.upper() in UTC_NAMES:
        return
    actual = first.astimezone(ZoneInfo(zone)).tzname()
    if actual and actual != abbrev:
        notes.append(f"vmstat printed zone {abbrev!r} but {zone} is {actual!r} at {first:%Y-%m-%d}")


def derived_ts(idx: pl.Expr, start: datetime | None, interval_s: float | None) -> pl.Expr:
    """capture_start + idx × interval (UTC), or NULL when either is unknown."""
    if start is None or interval_s is None:
        return pl.lit(None, dtype=base.TS)
    step_us = round(interval_s * 1_000_000)
    start_lit = pl.lit(start).cast(base.TS)
    return start_lit + pl.duration(microseconds=idx.cast(pl.Int64) * step_us)


def file_ends_with_newline(path: Path) -> bool:
    """True when the file is empty or its last byte is a newline."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def disk_rows(rows: pl.DataFrame, zone: str | None, notes: list[str]) -> tuple[pl.DataFrame, int]:
    """Rows of `vmstat -d` under one header -> (typed rows, rows skipped for field count).

    ``rows`` has columns line, hdr, block (0-based sample index), ts_derived.
    """
    names = str(rows["hdr"][0]).split()
    abbrev = names[10] if len(names) == 11 else None
    if tuple(names[:10]) != DISK_HEADER or len(names) > 11:
        return None, rows.height
    tok = pl.col("line").str.extract_all(r"[^ \t]+")
    n_want = 13 if abbrev else 11
    t = rows.with_columns(tok.alias("tok")).filter(pl.col("tok").list.len() == n_want)
    cols = [pl.col("tok").list.get(0).alias("disk")]
    cols += [pl.col("tok").list.get(i + 1).alias(c) for i, c in enumerate(DISK_COLS)]
    if abbrev:
        stamp = pl.col("tok").list.get(11) + " " + pl.col("tok").list.get(12)
        ts = printed_ts(stamp, abbrev, zone, notes)
        cols += [ts.alias("ts"), pl.lit("printed").alias("ts_source")]
    else:
        cols += [
            pl.col("ts_derived").alias("ts"),
            pl.when(pl.col("ts_derived").is_not_null()).then(pl.lit("derived")).alias("ts_source"),
        ]
    out = t.select(cols).with_columns(
        pl.col(c).str.strip_chars().cast(pl.Int64, strict=False) for c in DISK_COLS
    )
    out = out.with_columns(
        pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_source")).alias("ts_source")
    )
    return out, rows.height - t.height


def summary_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """`vmstat -s` / `-D` lines (`   24684084 K total memory`) -> key, value (kB for memory), unit."""
    g = pl.col("line").str.extract_groups(SUMMARY_RE)
    t = rows.select(
        g.struct.field("1").alias("num"),
        g.struct.field("2").alias("u"),
        g.struct.field("3").alias("label"),
    )
    label = pl.col("label").str.to_lowercase()
    factor = pl.col("u").replace_strict(UNIT_BYTES, default=None, return_dtype=pl.Float64) / 1024
    num = pl.col("num").cast(pl.Int64, strict=False)
    value = (
        pl.when(pl.col("u").is_null())
        .then(num)
        .otherwise((num * factor).round(0).cast(pl.Int64, strict=False))
    )
    unit = (
        pl.when(pl.col("u").is_not_null())
        .then(pl.lit("kB"))
        .when(label.str.ends_with("ticks"))
        .then(pl.lit("ticks"))
        .when(label.str.starts_with("milli"))
        .then(pl.lit("ms"))
        .when(label.str.contains("sectors"))
        .then(pl.lit("sectors"))
        .when(label == "boot time")
        .then(pl.lit("epoch_s"))
        .when(label.str.starts_with("pages"))
        .then(pl.lit("pages"))
        .otherwise(pl.lit("count"))
    )
    key = label.str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")
    return t.select(key.alias("key"), value.alias("value"), unit.alias("unit"))
