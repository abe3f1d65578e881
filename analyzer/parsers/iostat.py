"""iostat (sysstat 9.1 … 12.7) text and ``-o JSON`` output.

Supported: the basic report (``tps kB_read/s …``, with ``kB_dscd`` from 12.1.2, ``-s``
narrow ``kB_w+d``), the extended report ``-x`` of every version (``Device:`` with
``avgrq-sz avgqu-sz await svctm`` in 9.x–11.5.6; ``Device`` with ``%rrqm aqu-sz rareq-sz``
from 11.5.7; discard ``d/…`` from 12.1.2 and flush ``f/…`` from 12.3.1; ``-xs`` narrow),
``-c``/``-d``, ``-k``/``-m`` and ``GB``/``Blk`` (POSIXLY_CORRECT) units and ``rsec/s``
(all stored as kB), ``-t`` report stamps in C, en_US (12-hour), de_DE and ISO form,
``-y``, ``-z``, ``-p ALL`` (``is_partition``), ``-g``/``-H`` groups (``is_group``),
``-N``/``-j`` names, ``--pretty``/``--compact`` and ``--human``/``-h`` (Device last, sub-tables
merged back per device, ``4.3M``/``80.2k``/``20.4%`` suffixes read as binary multiples, so
counters become approximate), decimal commas, 11.5.7's NUL bytes, CRLF. Columns are mapped
by header name, never by position; JSON keys likewise (read by :mod:`._iostat_json`).

Times: ``-t`` stamps are local wall-clock (read in ``ctx.tz``, else UTC + note) unless
they carry an ISO offset; without ``-t`` report k gets ``ctx.capture_start + k ×
ctx.interval_s`` (``ts_source='derived'``, shifted by one interval with ``-y``), else NULL.
``since_boot`` marks the first report of a run without ``-y`` (read from ``ctx.command``;
without a command a 12.x ``-y`` run is recognised by its blank line after the banner,
otherwise since-boot is assumed and noted).

Tables: ``iostat_cpu`` (one row per ``avg-cpu`` block) and ``iostat_device`` (one row per
device per report); columns, types and units are in ``TABLES``.

How the text is read: block by block (:class:`._blocks.Blocks`). Every line gets a kind:
blank, banner, ``avg-cpu`` header, ``avg-cpu`` row (the line right after that header),
device header, ``-t`` stamp or other. Most lines are told by their first byte (a device
row starts with its name: neither a blank nor a digit, and no ``Device`` or ``CPU)`` in
the line), the others by the regexes below. An other line under a device header is a
device row, cut at its header's column positions (:func:`._sysstat.aligned_fields`) or,
when it does not fit them, split at blanks. Carried from block to block: the last device
header, the last report event and the report count. A report starts at a stamp, at an
``avg-cpu`` header not right after a stamp, or at a device header of the file's first
layout not right after either. Two things depend on the whole file, so the rows are kept
and handed over at its end: ``is_partition`` (a device is a partition when another device
*of the file* is its disk) and, when the file has more than one device header layout,
the merging of its sub-tables per device and report.

Sample input (``iostat -x -t 1 2``, sysstat 12.6.1, columns cut)::

    Linux 6.18.44-fc-v669 (vm) 	11/29/26 	_x86_64_	(2 CPU)

    11/29/26 17:23:36
    avg-cpu:  %user   %nice %system %iowait  %steal   %idle
              26.55    0.00    6.92    0.26    0.02   66.26

    Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz ... aqu-sz  %util
    vda             54.99   4412.39    14.12  20.44    0.46    80.24 ...   0.06   1.03
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _iostat_json, _read, base
from analyzer.parsers import _sysstat as s

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

#: avg-cpu header name (without ``%``) or JSON key -> column.
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


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is iostat output (text or JSON)."""
    if re.search(r"(?m)^avg-cpu:\s+%user\s+%nice\s+%system", head):
        return 0.95
    if re.search(r"(?m)^Device:?\s+(tps|rrqm/s|r/s)\s", head) or re.search(
        r"(?m)^\s+(tps|r/s|w/s|d/s|f/s)\s.*\sDevice\s*$", head
    ):
        return 0.9
    if '"sysstat"' in head and ('"disk_device"' in head or '"avg-cpu"' in head):
        return 0.95
    return 0.0


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one iostat output file (text or JSON) into ``iostat_cpu`` and ``iostat_device``."""
    if _read.read_head(path).lstrip().startswith("{"):
        return _json(path, ctx)
    return _text(path, ctx)


# --- what text and JSON share: report times, partitions, handing the rows over ---

NO_TIME_NOTE = "reports without -t stamp and no capture start/interval known: ts is NULL"
_BOOT_NOTE = "no iostat command line known: first report assumed since boot (no -y)"
_UTF8_NOTE = "file is not valid UTF-8: invalid bytes replaced"


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
    n: int, stamps: pl.DataFrame, ctx: base.ParseContext, y: bool
) -> tuple[pl.DataFrame, bool]:
    """Reports ``0 .. n-1`` with ``ts``, ``ts_source``, ``since_boot``, and whether a report
    has no time at all (no stamp, nothing to derive one from). Report k's time is its
    ``stamps`` row (``report``, ``ts``; the first wins), else ``ctx.capture_start + (k [+1
    with -y]) × interval``."""
    reports = pl.DataFrame({"report": pl.Series(range(n), dtype=pl.Int32)})
    first = stamps.unique("report", keep="first", maintain_order=True)
    out = reports.join(first, on="report", how="left", maintain_order="left")
    interval = _interval(ctx)
    missing = out.get_column("ts").null_count()
    derived = pl.lit(None, base.TS)
    if missing and ctx.capture_start is not None and interval:
        off = 1 if y else 0
        derived = pl.lit(ctx.capture_start).cast(base.TS) + pl.duration(
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


@dataclass
class _Read:
    """What a whole file gave, before the report times: device rows (``report``,
    ``device``, typed columns) and avg-cpu rows in file order, the stamps (``report``,
    ``ts``), how many reports and stamp lines there were."""

    dev: list[pl.DataFrame] = field(default_factory=list)
    cpu: list[pl.DataFrame] = field(default_factory=list)
    stamps: list[pl.DataFrame] = field(default_factory=list)
    reports: int = 0
    stamp_lines: int = 0
    repaired: bool = False


def _finish(
    got: _Read,
    ctx: base.ParseContext,
    cov: base.Coverage,
    y: bool,
    boot_note: bool,
    dev_table: bool,
    merge: bool,
) -> dict[str, pl.DataFrame]:
    """Notes, report times, ``is_partition`` (and with ``merge`` the sub-tables merged per
    device and report), then every row to ``ctx.sink`` (or the tables returned)."""
    if got.repaired:
        cov.notes.append(_UTF8_NOTE)
    if got.stamp_lines:
        s.tz_for(ctx, cov)
    if boot_note:
        cov.notes.append(_BOOT_NOTE)
    empty = pl.DataFrame(schema={"report": pl.Int32, "ts": base.TS})
    stamps = pl.concat(got.stamps) if got.stamps else empty
    times, missing = report_times(got.reports, stamps, ctx, y)
    if missing:
        cov.notes.append(NO_TIME_NOTE)
    out = _blocks.Rows(ctx, TABLES)
    dev = got.dev
    if dev_table:
        if merge and dev:  # --pretty/--human split tables: one row per device again
            one = pl.concat(dev, how="diagonal_relaxed")
            dev = [
                one.group_by(["report", "device"], maintain_order=True).agg(
                    pl.all().drop_nulls().first()
                )
            ]
        names = set().union(*(set(f.get_column("device").unique().to_list()) for f in dev))
        parts = partitions(names, ctx, cov.notes)
        flag = pl.lit(None, pl.Boolean) if parts is None else pl.col("device").is_in(sorted(parts))
        for frame in dev or [pl.DataFrame(schema={"report": pl.Int32, "device": pl.String})]:
            out.put(
                {"iostat_device": _timed(frame, times).with_columns(flag.alias("is_partition"))}
            )
    for frame in got.cpu:
        out.put({"iostat_cpu": _timed(frame, times)})
    return out.tables()


def _timed(frame: pl.DataFrame, times: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its report's times (``times`` holds reports 0, 1, ... in order)."""
    report = frame.get_column("report")
    if report.min() is None or report.min() < 0:  # type: ignore[operator]  # rows before any report
        return frame.join(times, on="report", how="left", maintain_order="left")
    return frame.hstack(times.drop("report")[report])


def _json(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """``-o JSON``: the lines read by :mod:`._iostat_json`, the rest as for text."""
    cov = base.Coverage()
    got = _iostat_json.read(path, ctx, cov, device_column, CPU_COLUMNS)
    flags = s.short_flags(ctx.command)
    y = bool(flags and "y" in flags)
    read = _Read(got.dev, got.cpu, got.stamps, got.reports, got.stamp_lines, got.repaired)
    dev = sum(f.height for f in got.dev) > 0
    tables = _finish(read, ctx, cov, y, flags is None, dev, merge=False)
    return base.ParseResult(tables=tables, coverage=cov, meta=got.meta)


# --- text ---

_KINDS = ("other", "blank", "banner", "avg", "cpu", "dev_hdr", "ts", "truncated")
OTHER, BLANK, BANNER, AVG, CPU, DEV_HDR, TS, TRUNC = range(8)
_RESETS = [BLANK, BANNER, AVG, CPU, TS]  # lines that end a device table
_DEV_HDR = r"^\s*Device:?\s|\sDevice\s*$"
_AVG_HDR = r"^avg-cpu:"
_CPU_ROW = r"^\s+[\d.,]+%?(\s+[\d.,]+%?){2,}\s*$"
_HUMAN = r"\d[.,]\d[kMGTPE%](\s|$)"
_MAX_LAYOUTS = 64
_SAMPLE = 50  # cpu/other lines that decide --human and the decimal comma
#: First bytes that need the regexes: blanks and digits (other control bytes are no
#: blanks to ``\s``, bytes >= 128 start characters the regexes must see).
_NOT_PLAIN = [9, 10, 11, 12, 13, 32, *range(48, 58)]


@dataclass
class _Text:
    """What the text has said so far (carried from block to block)."""

    zone: str | None
    prev_avg: bool = False  # the last line of the previous block is an avg-cpu header
    dev_ctx: int = 0  # line of the governing device header, 0 = none
    event: int = -1  # kind of the last stamp, avg-cpu or device header (-1: none yet)
    reports: int = 0  # reports started so far
    first_key: str | None = None  # the file's first device header layout
    layouts: dict[str, str] = field(default_factory=dict)  # layout -> its first header
    hdr: tuple[int, str] | None = None  # the last device header: line, layout
    avg: str | None = None  # the file's first avg-cpu header
    banner: str | None = None  # the file's first banner
    kinds: np.ndarray = field(default_factory=lambda: np.zeros(len(_KINDS), dtype=np.int64))
    stray: int = 0
    head: list[int] = field(default_factory=list)  # kinds of the file's first lines
    sample: list[str] = field(default_factory=list)


def _hkey(line: pl.Expr) -> pl.Expr:
    """A device header's layout: its names, single-blank separated."""
    return line.str.strip_chars().str.replace_all(r"\s+", " ")


def _slow_kind(after_avg: pl.Expr) -> pl.Expr:
    """A line's kind by the regexes (``after_avg``: the line before is an avg-cpu header)."""
    line = pl.col("line")
    return (
        pl.when(line.str.contains(r"^\s*$"))
        .then(BLANK)
        .when(line.str.contains(s.BANNER_PL))
        .then(BANNER)
        .when(line.str.contains(_AVG_HDR))
        .then(AVG)
        .when(after_avg & line.str.contains(_CPU_ROW))
        .then(CPU)
        .when(line.str.contains(_DEV_HDR))
        .then(DEV_HDR)
        .when(line.str.contains(s.STAMP_RE))
        .then(TS)
        .otherwise(OTHER)
    )


def _kinds(block: _blocks.Block, st: _Text) -> pl.DataFrame:
    """``line_no``, ``line``, ``kind`` of the block's lines."""
    line = pl.col("line")
    first = line.cast(pl.Binary).bin.get(0, null_on_oob=True)
    is_avg = line.str.starts_with("avg-cpu:")
    plain = (first < 128) & ~first.is_in(_NOT_PLAIN) & ~line.str.contains_any(["Device", "CPU)"])
    quick = pl.when(is_avg).then(AVG).when(plain).then(OTHER)
    quick = quick.when(line.str.len_bytes() == 0).then(BLANK)
    if st.first_key is not None:  # a copy of the file's first device header is one too
        quick = quick.when(line == st.layouts[st.first_key]).then(DEV_HDR)
    n = line.str.len_bytes().cast(pl.Int64)
    at = [n.alias("_len"), _blocks.line_starts(n).alias("_at")] if block.plain else []
    df = block.lines.with_columns(
        quick.otherwise(None).cast(pl.Int8).alias("kind"),
        is_avg.shift(1, fill_value=st.prev_avg).alias("_after"),
        *at,  # where each line is in the block's bytes
    )
    rest = df.with_row_index("_i").filter(pl.col("kind").is_null())
    if rest.height:
        got = rest.select(_slow_kind(pl.col("_after")).cast(pl.Int8)).to_series()
        kind = df.get_column("kind").scatter(rest.get_column("_i"), got)
        df = df.with_columns(kind)
    return df.drop("_after")


def _classify(block: _blocks.Block, st: _Text) -> tuple[pl.DataFrame, dict[int, str]]:
    """The block's lines with ``kind``, ``dev_ctx`` and ``report`` (the running state
    carried in and out of ``st``), and the layout of each device header a row of the
    block may be under (line -> layout)."""
    df = _kinds(block, st)
    kind, line = pl.col("kind"), pl.col("line")
    hdrs = df.filter(kind == DEV_HDR).select("line_no", "line")
    keys: list[str] = []
    if hdrs.height:  # layouts: copies of the first header have its layout, others their own
        copy = line == (st.layouts[st.first_key] if st.first_key else "")
        copies = hdrs.select(copy).to_series().to_list()
        other = iter(hdrs.filter(~copy).select(_hkey(line)).to_series().to_list())
        keys = [st.first_key if c else next(other) for c in copies]  # type: ignore[misc]
        for key, text in zip(keys, hdrs.get_column("line").to_list(), strict=True):
            st.layouts.setdefault(key, text)
        st.first_key = st.first_key or keys[0]
    at = hdrs.get_column("line_no").to_list()
    layout_of = dict(zip(at, keys, strict=True))
    if st.hdr is not None:
        layout_of.setdefault(st.hdr[0], st.hdr[1])
    first = np.zeros(df.height, dtype=bool)
    for n, key in zip(at, keys, strict=True):
        first[n - block.first_line] = key == st.first_key
    ev = pl.when(kind.is_in([TS, AVG, DEV_HDR])).then(kind.cast(pl.Int32)).forward_fill()
    prev = ev.fill_null(st.event).shift(1, fill_value=st.event)
    start = (
        (kind == TS) | ((kind == AVG) & (prev != TS)) | (pl.Series(first) & ~prev.is_in([TS, AVG]))
    )
    df = df.with_columns(
        pl.when(kind == DEV_HDR)
        .then(pl.col("line_no").cast(pl.Int64))
        .when(kind.is_in(_RESETS))
        .then(0)
        .forward_fill()
        .fill_null(st.dev_ctx)
        .alias("dev_ctx"),
        (start.cast(pl.Int32).cum_sum() - 1 + st.reports).alias("report"),
        ev.fill_null(st.event).alias("_ev"),
    )
    last = df.tail(1).row(0, named=True)
    st.dev_ctx, st.event = last["dev_ctx"], last["_ev"]
    st.reports, st.prev_avg = last["report"] + 1, last["kind"] == AVG
    if at:
        st.hdr = (at[-1], keys[-1])
    if len(st.head) < 4:
        st.head += df.get_column("kind").head(4 - len(st.head)).to_list()
    if len(st.sample) < _SAMPLE:
        more = df.filter(kind.is_in([CPU, OTHER])).get_column("line").head(_SAMPLE - len(st.sample))
        st.sample += more.to_list()
    if st.avg is None and (avg := df.filter(kind == AVG).get_column("line").head(1)).len():
        st.avg = avg[0]
    if st.banner is None and (ban := df.filter(kind == BANNER).get_column("line").head(1)).len():
        st.banner = ban[0]
    if block.last and not block.data.endswith(b"\n") and last["kind"] in (OTHER, CPU):
        df = df.with_columns(
            pl.when(pl.col("line_no") == last["line_no"]).then(TRUNC).otherwise(kind).alias("kind")
        )
    return df.drop("_ev"), layout_of


def _device_rows(
    rows: pl.DataFrame, header: str, human: bool, comma: bool, data: bytes | None
) -> tuple[pl.DataFrame, int]:
    """Device rows under one header layout -> (typed frame, rows skipped). With ``data``
    (the block's bytes, when its lines are their bytes) the rows that fit the header are
    typed from the bytes (:func:`._sysstat.right_aligned`), the others by polars."""
    lay = s.header_layout(header)
    names = list(lay.names)
    dev_last = names[-1] == "Device"
    vidx = list(range(len(names) - 1)) if dev_last else list(range(1, len(names)))
    mapped = [(i, device_column(names[i])) for i in vidx]
    seen: set[str] = set()
    for k, (i, col) in enumerate(mapped):  # a mangled header may repeat a column: first wins
        if col is not None and col[0] in seen:
            mapped[k] = (i, None)
        elif col is not None:
            seen.add(col[0])
    line = pl.col("line")
    device = line.str.extract(r"(\S+)\s*$" if dev_last else r"^\s*(\S+)")
    casts = []
    for _, col in mapped:
        if col is not None:
            name, factor, is_int = col
            v = pl.col(name) * factor if factor != 1.0 else pl.col(name)
            casts.append((v.round(0).cast(pl.Int64, strict=False) if is_int else v).alias(name))
    out, total = [], rows.height
    if data is not None and not human:
        done, rows = _from_bytes(rows, lay, mapped, device, dev_last, comma, data)
        out.append(done.select("line_no", "report", "device", "is_group", *casts))
    if rows.height or not out:
        _, fields = s.aligned_fields(line, lay, vidx, loose_first=not dev_last)
        group = line.str.contains(r"^\s") if not dev_last else pl.lit(None, pl.Boolean)
        raw = _aligned(rows, lay, names, mapped, fields, device, group, human, comma)
        good = [
            pl.col("device").is_not_null(),
            *(pl.col(c.meta.output_name()).is_not_null() for c in casts),
        ]
        raw = raw.filter("_shape").select("line_no", "report", "device", "is_group", *casts)
        out.append(raw.filter(pl.all_horizontal(good)))
    typed = pl.concat(out) if len(out) > 1 else out[0]
    if len(out) > 1 and not typed.get_column("line_no").is_sorted():
        typed = typed.sort("line_no")
    return typed, total - typed.height


def _from_bytes(
    rows: pl.DataFrame,
    lay: s.Layout,
    mapped: list[tuple[int, tuple[str, float, bool] | None]],
    device: pl.Expr,
    dev_last: bool,
    comma: bool,
    data: bytes,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows that :func:`._sysstat.right_aligned` types from ``data`` (rows as wide as
    the header, ``_at`` their offset in ``data``): ``line_no``, ``report``, ``device``,
    ``is_group`` and the mapped columns; and the other rows.

    With the device first, the first field is the last token before its header's end (a
    long name may reach into the slot): its slot starts right after the longest name. Any
    start gives that token where the row fits it (a blank there, a number after it), and
    the rows that do not fit are left to polars."""
    fit = np.flatnonzero(rows.get_column("_len").to_numpy() == lay.width)
    at = rows.get_column("_at").to_numpy()[fit]
    sub = rows.select("line_no", "report", "line")
    sub = sub if fit.size == rows.height else sub[fit]
    slots, cut = lay, 0
    if not dev_last:  # the first field's slot starts after the longest name (of a sample)
        some = sub.head(4096).select(device).to_series().str.len_bytes().max()
        cut = max(lay.ends[0], int(some or 0))  # type: ignore[call-overload]
        slots = replace(lay, ends=(cut, *lay.ends[1:]))
    ok, vals = s.right_aligned(data, at, slots, [i for i, _ in mapped], comma)
    if not ok.all():
        sub, vals, at = sub.filter(pl.Series(ok)), vals[:, ok], at[ok]
    if dev_last:
        dev = sub.select(device).to_series()
    else:  # a blank at `cut`: the name is in the first `cut` bytes, unless they are blanks
        heads = sub.get_column("line").str.head(cut)
        uniq = heads.unique()
        names = uniq.to_frame("line").select(device).to_series()
        dev = heads.replace_strict(uniq, names, return_dtype=pl.String)
        if dev.null_count():
            dev = sub.select(pl.coalesce(dev, device)).to_series()
    first = np.frombuffer(data, np.uint8)[at]
    white = (first == 32) | ((first >= 9) & (first <= 13))  # ``^\s`` in ASCII
    done = pl.DataFrame(
        [
            sub.get_column("line_no"),
            sub.get_column("report"),
            dev.alias("device"),
            pl.Series("is_group", [None] * len(at) if dev_last else white, pl.Boolean),
            *(pl.Series(col[0], vals[k]) for k, (_, col) in enumerate(mapped) if col),
        ]
    )
    left = np.ones(rows.height, dtype=bool)
    left[fit[ok]] = False
    return done, rows.filter(pl.Series(left))


def _aligned(
    rows: pl.DataFrame,
    lay: s.Layout,
    names: list[str],
    mapped: list[tuple[int, tuple[str, float, bool] | None]],
    fields: list[pl.Expr],
    device: pl.Expr,
    group: pl.Expr,
    human: bool,
    comma: bool,
) -> pl.DataFrame:
    """Rows cut at their header's positions where they fit it, else split at blanks:
    ``line_no``, ``report``, ``device``, ``is_group``, ``_shape`` (as many tokens as
    header names) and the mapped columns (numbers before any unit factor)."""
    line, tok = pl.col("line"), pl.col("_tok")
    slots = [f"_{n}" for n in range(len(fields))]
    cut = rows.with_columns(f.alias(n) for f, n in zip(fields, slots, strict=True))
    # aligned_fields' boundary check, made on the cut slots (the same check: the row's
    # width and a blank at the start of every slot but the first; loose_first's blank
    # after the first slot is the start of the second)
    width = line.str.strip_chars_end(" ").str.len_chars() == lay.width
    ok = pl.all_horizontal(width, *(pl.col(n).str.starts_with(" ") for n in slots[1:]))
    dev_last = names[-1] == "Device"
    fast = {"device": device, "_shape": pl.lit(True), "is_group": group}
    slow = {
        "device": tok.list.last() if dev_last else tok.list.first(),
        "_shape": tok.list.len() == len(names),
        "is_group": group,
    }
    for (i, col), slot in zip(mapped, slots, strict=True):
        if col is not None:
            fast[col[0]] = s.number(pl.col(slot), human, comma)
            slow[col[0]] = s.number(tok.list.get(i, null_on_oob=True), human, comma)
    return s.cut_rows(cut, ok, fast, slow, ("line_no", "report"))


def _cpu_rows(cpu: pl.DataFrame, human: bool, hdr: str) -> tuple[pl.DataFrame, int]:
    """avg-cpu rows against ``hdr``, the file's first avg-cpu header."""
    names = hdr.split()[1:]
    t = cpu.with_columns(s.tokens(pl.col("line")).alias("tok")).filter(
        pl.col("tok").list.len() == len(names)
    )
    sel = [pl.col("report")]
    for i, nm in enumerate(names):
        col = CPU_COLUMNS.get(nm.lstrip("%"))
        if col:
            sel.append(s.number(pl.col("tok").list.get(i), human).alias(col))
    out = t.select(sel)
    return out, cpu.height - out.height


def _typed(
    df: pl.DataFrame,
    layout_of: dict[int, str],
    data: bytes | None,
    st: _Text,
    human: bool,
    comma: bool,
    got: _Read,
    cov: base.Coverage,
) -> None:
    """One block's device rows, avg-cpu rows and stamps into ``got`` (``data``: the
    block's bytes when its lines are their bytes)."""
    kind = pl.col("kind")
    keep = ["line_no", "line", "report", "dev_ctx", *(["_at", "_len"] if data else [])]
    rows = df.lazy().filter((kind == OTHER) & (pl.col("dev_ctx") > 0)).select(keep).collect()
    order = list(st.layouts)
    parts = []
    under = {layout_of[n] for n in rows.get_column("dev_ctx").unique().to_list()}
    for key in sorted(under, key=order.index):
        sub = rows
        if len(under) > 1:
            ids = [n for n, k in layout_of.items() if k == key]
            sub = rows.filter(pl.col("dev_ctx").is_in(ids))
        if order.index(key) >= _MAX_LAYOUTS:
            cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", sub.height)
            continue
        frame, bad = _device_rows(sub, st.layouts[key], human, comma, data)
        cov.add_skipped("device row does not match its header", bad)
        parts.append(frame)
    if parts:
        dev = pl.concat(parts, how="diagonal_relaxed") if len(parts) > 1 else parts[0]
        if not dev.get_column("line_no").is_sorted():  # cut_rows: aligned rows first
            dev = dev.sort("line_no")
        got.dev.append(dev.drop("line_no"))
        cov.parsed += dev.height
    cpu = df.filter(kind == CPU)
    if cpu.height:
        frame, bad = _cpu_rows(cpu, human, st.avg)  # type: ignore[arg-type]
        cov.add_skipped("avg-cpu row does not match its header", bad)
        cov.parsed += frame.height
        if frame.height:
            got.cpu.append(frame)
    stamps = df.filter(kind == TS)
    if stamps.height:
        got.stamp_lines += stamps.height
        ts = s.stamp_to_utc(pl.col("line"), st.zone).alias("ts")
        got.stamps.append(stamps.select("report", ts))


def _text(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Text output, block by block (see the module doc). Blocks are typed once the file's
    first cpu/other lines have said whether it is ``--human`` and has decimal commas."""
    cov = base.Coverage()
    st = _Text(zone=s.resolve_tz(ctx.tz)[0])
    got = _Read()
    blocks = _blocks.Blocks(path)
    pending: list[tuple[pl.DataFrame, dict[int, str], bytes | None]] = []
    decided: tuple[bool, bool] | None = None  # --human, decimal comma
    for block in blocks:
        df, layout_of = _classify(block, st)
        cov.total += df.height
        counts = df.get_column("kind").value_counts()
        for k, n in counts.iter_rows():
            st.kinds[k] += n
        st.stray += df.filter((pl.col("kind") == OTHER) & (pl.col("dev_ctx") == 0)).height
        pending.append((df, layout_of, block.data if block.plain else None))
        if decided is None and (len(st.sample) >= _SAMPLE or block.last):
            sample = "\n".join(st.sample)
            decided = (re.search(_HUMAN, sample) is not None, s.uses_decimal_comma(sample))
        if decided is not None:
            for lines, lines_layout, data in pending:
                _typed(lines, lines_layout, data, st, *decided, got, cov)
            pending = []
    got.reports, got.repaired = st.reports, blocks.repaired
    n = st.kinds
    if n[BANNER] + n[AVG] + n[CPU] + n[DEV_HDR] == 0 and cov.total - n[BLANK] > 0:
        raise ParseError(
            f"{ctx.file_name or path.name}: no iostat banner, avg-cpu or Device header"
        )
    cov.add_structure("banner", n[BANNER])
    cov.add_structure("blank", n[BLANK])
    cov.add_structure("header", n[AVG] + n[DEV_HDR])
    cov.add_skipped("truncated last line (no trailing newline)", n[TRUNC])
    cov.add_structure("timestamp", n[TS])
    cov.add_skipped("unrecognized line", st.stray)
    flags = s.short_flags(ctx.command)
    y = "y" in flags if flags is not None else st.head[:3] == [BANNER, BLANK, BLANK]
    boot_note = flags is None and not y
    tables = _finish(got, ctx, cov, y, boot_note, bool(st.layouts), len(st.layouts) > 1)
    names = {n for header in st.layouts.values() for n in s.header_layout(header).names}
    unknown = sorted(n for n in names if n.rstrip(":") != "Device" and device_column(n) is None)
    if unknown:  # a column of a newer sysstat: say so rather than drop it silently
        cov.notes.append(f"device columns not stored (unknown names): {', '.join(unknown)}")
    banner = s.parse_banner(st.banner) if st.banner else None
    return base.ParseResult(tables=tables, coverage=cov, meta=banner.meta() if banner else {})
