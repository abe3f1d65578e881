"""iostat schema, header-name -> column mapping, report times and partition flags.

Shared by the text parser (:mod:`analyzer.parsers.iostat`) and the JSON parser
(:mod:`analyzer.parsers._iostat_json`).
"""

from __future__ import annotations

import re

import polars as pl

from analyzer.parsers import _sysstat as s
from analyzer.parsers import base

_I, _F, _S, _B = pl.Int64, pl.Float64, pl.String, pl.Boolean
_COMMON: tuple[tuple[str, pl.DataType, str, str], ...] = (
    ("ts", base.TS, "", "report time (UTC): the -t stamp, or derived, or NULL"),
    ("ts_source", _S, "", "'printed' (-t stamp), 'derived' (capture start + k × interval) or NULL"),
    ("since_boot", _B, "", "true for the first report of a run without -y (averages since boot)"),
)

TABLES: dict[str, base.Table] = {
    "iostat_cpu": base.table(
        "one row per iostat avg-cpu block (CPU utilisation over the report interval)",
        *_COMMON,
        ("user_pct", _F, "%", "CPU time in user code (%user)"),
        ("nice_pct", _F, "%", "CPU time in niced user code (%nice)"),
        ("system_pct", _F, "%", "CPU time in the kernel (%system)"),
        ("iowait_pct", _F, "%", "idle time with outstanding disk IO (%iowait)"),
        ("steal_pct", _F, "%", "time stolen by the hypervisor (%steal)"),
        ("idle_pct", _F, "%", "idle time without outstanding IO (%idle)"),
    ),
    "iostat_device": base.table(
        "one row per device (or partition, or -g group) per iostat report; kB = 1024 bytes",
        *_COMMON,
        ("device", _S, "", "device name as printed (kernel, -N mapper or -j persistent name)"),
        ("is_partition", _B, "", "partition of a listed disk (-p output); NULL when not -p output"),
        ("is_group", _B, "", "a -g device group total (name printed with a leading blank)"),
        ("tps", _F, "1/s", "transfers (IO requests) per second, basic and -s reports"),
        ("r_s", _F, "1/s", "read requests completed per second (r/s)"),
        ("w_s", _F, "1/s", "write requests completed per second (w/s)"),
        ("d_s", _F, "1/s", "discard requests completed per second (d/s, 12.1.2+)"),
        ("f_s", _F, "1/s", "flush requests completed per second (f/s, 12.3.1+)"),
        ("rkb_s", _F, "kB/s", "kB read per second (rkB/s; rMB/s, rsec/s converted)"),
        ("wkb_s", _F, "kB/s", "kB written per second (wkB/s; wMB/s, wsec/s converted)"),
        ("dkb_s", _F, "kB/s", "kB discarded per second (dkB/s)"),
        ("kb_s", _F, "kB/s", "kB read+written+discarded per second (-xs narrow report kB/s)"),
        ("rrqm_s", _F, "1/s", "read requests merged per second"),
        ("wrqm_s", _F, "1/s", "write requests merged per second"),
        ("drqm_s", _F, "1/s", "discard requests merged per second"),
        ("rqm_s", _F, "1/s", "requests merged per second (-xs narrow report)"),
        ("rrqm_pct", _F, "%", "share of read requests merged (%rrqm)"),
        ("wrqm_pct", _F, "%", "share of write requests merged (%wrqm)"),
        ("drqm_pct", _F, "%", "share of discard requests merged (%drqm)"),
        ("r_await_ms", _F, "ms", "mean time to serve a read request, queueing included"),
        ("w_await_ms", _F, "ms", "mean time to serve a write request, queueing included"),
        ("d_await_ms", _F, "ms", "mean time to serve a discard request"),
        ("f_await_ms", _F, "ms", "mean time to serve a flush request"),
        ("await_ms", _F, "ms", "mean time to serve any request (9.x–11.5.6 -x, and -xs)"),
        ("aqu_sz", _F, "requests", "mean request queue length (aqu-sz / avgqu-sz)"),
        ("rareq_sz_kb", _F, "kB", "mean size of read requests"),
        ("wareq_sz_kb", _F, "kB", "mean size of write requests"),
        ("dareq_sz_kb", _F, "kB", "mean size of discard requests"),
        ("areq_sz_kb", _F, "kB", "mean size of all requests (-xs narrow report)"),
        (
            "avgrq_sz_sectors",
            _F,
            "sectors",
            "mean request size in 512-byte sectors (avgrq-sz, <= 11.5.6)",
        ),
        ("svctm_ms", _F, "ms", "mean service time (svctm, removed in 12.1.2; unreliable)"),
        ("util_pct", _F, "%", "share of time the device had IO in flight (%util)"),
        (
            "kb_read_s",
            _F,
            "kB/s",
            "kB read per second (basic report kB_read/s, any unit converted)",
        ),
        ("kb_wrtn_s", _F, "kB/s", "kB written per second (basic report)"),
        ("kb_dscd_s", _F, "kB/s", "kB discarded per second (basic report, 12.1.2+)"),
        ("kb_wrtn_dscd_s", _F, "kB/s", "kB written+discarded per second (-s narrow kB_w+d/s)"),
        ("kb_read", _I, "kB", "kB read in the report interval (since boot in the first report)"),
        ("kb_wrtn", _I, "kB", "kB written in the report interval"),
        ("kb_dscd", _I, "kB", "kB discarded in the report interval"),
        ("kb_wrtn_dscd", _I, "kB", "kB written+discarded in the report interval (-s kB_w+d)"),
    ),
}

CPU_COLUMNS = {
    "user": "user_pct",
    "nice": "nice_pct",
    "system": "system_pct",
    "iowait": "iowait_pct",
    "steal": "steal_pct",
    "idle": "idle_pct",
}

_FIXED = {
    "tps": "tps",
    "r/s": "r_s",
    "w/s": "w_s",
    "d/s": "d_s",
    "f/s": "f_s",
    "rrqm/s": "rrqm_s",
    "wrqm/s": "wrqm_s",
    "drqm/s": "drqm_s",
    "rqm/s": "rqm_s",
    "%rrqm": "rrqm_pct",
    "%wrqm": "wrqm_pct",
    "%drqm": "drqm_pct",
    "rrqm": "rrqm_pct",  # JSON key
    "wrqm": "wrqm_pct",
    "drqm": "drqm_pct",
    "r_await": "r_await_ms",
    "w_await": "w_await_ms",
    "d_await": "d_await_ms",
    "f_await": "f_await_ms",
    "await": "await_ms",
    "aqu-sz": "aqu_sz",
    "avgqu-sz": "aqu_sz",
    "rareq-sz": "rareq_sz_kb",
    "wareq-sz": "wareq_sz_kb",
    "dareq-sz": "dareq_sz_kb",
    "areq-sz": "areq_sz_kb",
    "avgrq-sz": "avgrq_sz_sectors",
    "svctm": "svctm_ms",
    "%util": "util_pct",
    "util": "util_pct",  # JSON key
}
_UNIT_KB = {"kB": 1.0, "MB": 1024.0, "GB": 1024.0**2, "Blk": 0.5, "sec": 0.5}
_WHAT = {"read": "read", "wrtn": "wrtn", "dscd": "dscd", "w+d": "wrtn_dscd"}


def device_column(name: str) -> tuple[str, float, bool] | None:
    """Header name (text) or JSON key -> (column, factor to kB, is_int); None if unknown."""
    if name in _FIXED:
        return _FIXED[name], 1.0, False
    m = re.fullmatch(r"([rwd])(kB|MB|GB|sec)/s", name)
    if m:
        return f"{m[1]}kb_s", _UNIT_KB[m[2]], False
    m = re.fullmatch(r"(kB|MB|GB|Blk)/s", name)
    if m:
        return "kb_s", _UNIT_KB[m[1]], False
    m = re.fullmatch(r"(kB|MB|GB|Blk)_(read|wrtn|dscd|w\+d)(/s)?", name)
    if m:
        rate = bool(m[3])
        return f"kb_{_WHAT[m[2]]}{'_s' if rate else ''}", _UNIT_KB[m[1]], not rate
    return None


def _interval(ctx: base.ParseContext) -> float | None:
    if ctx.interval_s:
        return ctx.interval_s
    if not ctx.command:
        return None
    toks = ctx.command.split()
    nums = [t for t in toks if re.fullmatch(r"\d+(\.\d+)?", t)]
    prev = {toks[i - 1] for i, t in enumerate(toks) if i and t in nums}
    if nums and not prev & {"-p", "-j", "-g", "--dec"}:
        return float(nums[0])
    return None


def report_times(
    df: pl.DataFrame, stamps: pl.DataFrame, ctx: base.ParseContext, y: bool, notes: list[str]
) -> pl.DataFrame:
    """report -> ts, ts_source, since_boot for every report number seen in ``df``."""
    reports = df.select(pl.col("report").filter(pl.col("report") >= 0).unique().sort())
    out, missing = times_for(reports, stamps, ctx, y)
    if missing:
        notes.append(NO_TIME_NOTE)
    return out


NO_TIME_NOTE = "reports without -t stamp and no capture start/interval known: ts is NULL"


def times_for(
    reports: pl.DataFrame, stamps: pl.DataFrame, ctx: base.ParseContext, y: bool
) -> tuple[pl.DataFrame, bool]:
    """``reports`` (column ``report``) with ``ts``, ``ts_source``, ``since_boot``, and
    whether a report has no time at all (no stamp, nothing to derive one from). Each
    report's time depends on that report alone: its ``stamps`` row (``report``, ``ts``),
    else ``ctx.capture_start + (report [+1 with -y]) × interval``."""
    out = reports.join(stamps, on="report", how="left", maintain_order="left")
    interval = _interval(ctx)
    missing = out.get_column("ts").null_count() if out.height else 0
    derived = pl.lit(None, base.TS)
    if missing and ctx.capture_start is not None and interval:
        start = ctx.capture_start
        off = 1 if y else 0
        derived = pl.lit(start).cast(base.TS) + pl.duration(
            microseconds=((pl.col("report") + off) * round(interval * 1e6))
        )
    times = out.select(
        "report",
        pl.coalesce("ts", derived).alias("ts"),
        pl.when(pl.col("ts").is_not_null())
        .then(pl.lit("printed"))
        .when(derived.is_not_null())
        .then(pl.lit("derived"))
        .alias("ts_source"),
        ((pl.col("report") == 0) & pl.lit(not y)).alias("since_boot"),
    )
    return times, bool(missing) and not (ctx.capture_start is not None and interval)


def _parent(name: str, names: set[str]) -> bool:
    """True when ``name`` is a partition of a device in ``names`` (sda1, nvme0n1p1, mmcblk0p2)."""
    m = re.fullmatch(r"(.*[A-Za-z])\d+", name)
    if m and m[1] in names and not m[1].endswith(("p", "-")):
        return True
    m = re.fullmatch(r"(.*\d)p\d+", name)
    return bool(m and m[1] in names)


def flag_partitions(devs: pl.DataFrame, ctx: base.ParseContext, notes: list[str]) -> pl.DataFrame:
    """Add ``is_partition``: from name patterns, only when the file is ``-p`` output."""
    names = set(devs.get_column("device").drop_nulls().unique().to_list())
    parts = partitions(names, ctx, notes)
    if parts is None:
        return devs.with_columns(pl.lit(None, pl.Boolean).alias("is_partition"))
    return devs.with_columns(pl.col("device").is_in(list(parts)).alias("is_partition"))


def partitions(names: set[str], ctx: base.ParseContext, notes: list[str]) -> set[str] | None:
    """The partitions among the device ``names`` of a whole file, or None when the file
    is not ``-p`` output (``is_partition`` then stays NULL)."""
    parts = {n for n in names if _parent(n, names)}
    flags = s.short_flags(ctx.command)
    if not parts and not (flags and "p" in flags):
        return None
    if flags and "j" in flags:
        notes.append("-j persistent names: partitions named by label/uuid are not flagged")
    return parts
