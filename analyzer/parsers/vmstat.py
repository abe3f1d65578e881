"""vmstat (procps 3.3.x, procps-ng 3.3.10 … 4.0.x) text output.

Supported: the default report with or without ``-t`` (timestamp + zone name), ``-w``
(wide, adds ``gu`` in procps-ng 4), ``-a`` (``inact``/``active`` instead of
``buff``/``cache``), ``-S k|K|m|M`` (unit read from ``ctx.command``; without a command
line KiB is assumed and noted), ``-n`` / repeated headers, ``-y``; ``-d`` and ``-d -t``
(table ``vmstat_disk``); ``-s``, ``-D`` and ``-f`` key/value lists (table
``vmstat_summary``). Not supported (lines skipped with a reason): ``-p`` partition
statistics and ``-m`` slabinfo.

Columns are mapped by the names of the second header line, never by position, so
versions with extra or missing CPU columns parse alike. Fields are split on whitespace
(values can be wider than their header: ``bo`` 1435932, ``id`` 100).

Times: ``-t`` rows carry ``YYYY-MM-DD HH:MM:SS`` in the zone named at the end of the
header (``UTC``/``PDT``/``CET``); a non-UTC zone is interpreted in the command's ``TZ=``
or ``ctx.tz``, else assumed UTC with a note. Without ``-t``, ``ts`` is
``ctx.capture_start + i × interval`` (``ctx.interval_s``, else the command's delay) with
``ts_source = 'derived'``; with no start time ``ts`` stays NULL (noted), never invented.
Memory columns are normalised to kB = 1024 bytes from any ``-S`` unit (k = 1000 bytes,
K = 1024, m = 10^6, M = 2^20; k and m are rounded to whole kB).

Tables: ``vmstat`` (one row per sample), ``vmstat_disk`` (one row per disk per sample),
``vmstat_summary`` (one row per ``-s``/``-D`` line); columns and units in ``TABLES``.

Sample input (``vmstat -t 1 3``, procps-ng 4.0.2)::

    procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu----- -----timestamp-----
     r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st                 UTC
    15  0      0 21430380   2900 1822224    0    0  2215  4183  340  636 27  7 66  0  0 2026-11-29 17:23:36
     3  1      0 21430380   2900 1822224    0    0  2732 1004132 2518 3027 58 43  0  0  0 2026-11-29 17:23:37
     3  1      0 21430380   2900 1822224    0    0     8 858592 2489 2915 56 44  0  0  0 2026-11-29 17:23:38
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _vmstat_util as u

_I, _F, _S, _B = pl.Int64, pl.Float64, pl.String, pl.Boolean
_TS_COLS: tuple[tuple[str, pl.DataType, str, str], ...] = (
    ("ts", base.TS, "", "sample time (UTC): printed by -t, or derived, or NULL"),
    ("ts_source", _S, "", "'printed' (-t), 'derived' (capture start + i × interval) or NULL"),
)
# header name -> (column, kind): kind 'mem' (scaled to kB), 'swap' (kB/s, scaled), 'f' float, 'i' int
_VM: dict[str, tuple[str, str]] = {
    "r": ("r", "i"),
    "b": ("b", "i"),
    "swpd": ("swpd_kb", "mem"),
    "free": ("free_kb", "mem"),
    "buff": ("buff_kb", "mem"),
    "cache": ("cache_kb", "mem"),
    "inact": ("inact_kb", "mem"),
    "active": ("active_kb", "mem"),
    "si": ("si_kb_s", "swap"),
    "so": ("so_kb_s", "swap"),
    "bi": ("bi_blocks_s", "f"),
    "bo": ("bo_blocks_s", "f"),
    "in": ("in_per_s", "f"),
    "cs": ("cs_per_s", "f"),
    "us": ("us_pct", "f"),
    "sy": ("sy_pct", "f"),
    "id": ("id_pct", "f"),
    "wa": ("wa_pct", "f"),
    "st": ("st_pct", "f"),
    "gu": ("gu_pct", "f"),
}

TABLES: dict[str, base.Table] = {
    "vmstat": base.table(
        "one row per vmstat sample (the first row of a run is the average since boot)",
        *_TS_COLS,
        (
            "since_boot",
            _B,
            "",
            "true for the first row (averages since boot) unless the command had -y",
        ),
        ("r", _I, "processes", "runnable processes (running or waiting for a CPU)"),
        ("b", _I, "processes", "processes in uninterruptible sleep"),
        ("swpd_kb", _I, "kB", "swap in use (kB = 1024 bytes, from any -S unit)"),
        ("free_kb", _I, "kB", "idle memory"),
        ("buff_kb", _I, "kB", "memory used as buffers (NULL with -a)"),
        ("cache_kb", _I, "kB", "memory used as page cache (NULL with -a)"),
        ("inact_kb", _I, "kB", "inactive memory (-a only)"),
        ("active_kb", _I, "kB", "active memory (-a only)"),
        ("si_kb_s", _F, "kB/s", "memory swapped in from disk per second"),
        ("so_kb_s", _F, "kB/s", "memory swapped out to disk per second"),
        ("bi_blocks_s", _F, "blocks/s", "blocks received from block devices per second"),
        ("bo_blocks_s", _F, "blocks/s", "blocks sent to block devices per second"),
        ("in_per_s", _F, "1/s", "interrupts per second, including the clock"),
        ("cs_per_s", _F, "1/s", "context switches per second"),
        ("us_pct", _F, "%", "CPU time in user code (includes guest time on old kernels)"),
        ("sy_pct", _F, "%", "CPU time in kernel code"),
        ("id_pct", _F, "%", "CPU time idle"),
        ("wa_pct", _F, "%", "CPU time waiting for IO"),
        ("st_pct", _F, "%", "CPU time stolen from this virtual machine"),
        ("gu_pct", _F, "%", "CPU time running KVM guests (procps-ng >= 4 with -w; else NULL)"),
    ),
    "vmstat_disk": base.table(
        "one row per disk per `vmstat -d` report (counters are cumulative since boot)",
        *_TS_COLS,
        ("disk", _S, "", "block device name"),
        ("reads_total", _I, "requests", "reads completed"),
        ("reads_merged", _I, "requests", "reads merged"),
        ("read_sectors", _I, "sectors", "sectors read (512 bytes)"),
        ("read_ms", _I, "ms", "time spent reading"),
        ("writes_total", _I, "requests", "writes completed"),
        ("writes_merged", _I, "requests", "writes merged"),
        ("write_sectors", _I, "sectors", "sectors written (512 bytes)"),
        ("write_ms", _I, "ms", "time spent writing"),
        ("io_cur", _I, "requests", "IOs in progress"),
        ("io_s", _I, "s", "seconds spent doing IO"),
    ),
    "vmstat_summary": base.table(
        "one row per line of `vmstat -s` / `-D` / `-f` (counters since boot)",
        ("key", _S, "", "the label in snake_case, e.g. total_memory, milli_reading, forks"),
        ("value", _I, "see unit", "the number; memory amounts converted to kB (1024 bytes)"),
        ("unit", _S, "", "kB, ticks, ms, sectors, pages, epoch_s or count"),
    ),
}

_MISFIT = "row does not fit its header (field count or header layout)"
_MAX_LAYOUTS = 64  # distinct header lines handled; more is hostile input
_BLANK = r"^[ \t]*$"
_GROUP = r"^[ \t]*-*procs-*[ \t]+-+memory|^[ \t]*disk-[ \t]+-+reads"
_VMHDR = r"^[ \t]*r[ \t]+b[ \t]+swpd[ \t]"
_DISKHDR = r"^[ \t]+total[ \t]+merged[ \t]+sectors[ \t]+ms[ \t]"
_VMDATA = r"^[ \t]*[0-9]+(?:[ \t]+[0-9]+)+(?:" + u.TS_PART + r")?[ \t]*$"
_DISKDATA = r"^[A-Za-z][^ \t]*(?:[ \t]+[0-9]+)+(?:" + u.TS_PART + r")?[ \t]*$"
_UNSUPPORTED = r"^[^ \t]+[ \t]+reads[ \t]+read sectors[ \t]+writes[ \t]+requested writes|^Cache[ \t]+Num[ \t]+Total"


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is vmstat output (header lines or -s/-D lists)."""
    if re.search(r"(?m)^\s*-*procs\s+-+memory-+\s", head) or re.search(
        r"(?m)^\s*r\s+b\s+swpd\s+free\s+(buff|inact)\s", head
    ):
        return 0.95
    if re.search(r"(?m)^disk-\s+-+reads-+\s+-+writes-+", head):
        return 0.95
    if re.search(r"(?m)^\s*\d+ [KkMm] total memory$", head) and "cpu ticks" in head:
        return 0.9
    if re.search(r"(?m)^\s*\d+ disks$", head) and re.search(r"(?m)^\s*\d+ total reads$", head):
        return 0.9
    return 0.0


def _classify(path: Path, ends_nl: bool) -> pl.DataFrame:
    line = pl.col("line")
    kind = (
        pl.when(line.str.contains(_BLANK))
        .then(pl.lit("blank"))
        .when(line.str.contains(_GROUP))
        .then(pl.lit("group"))
        .when(line.str.contains(_VMHDR))
        .then(pl.lit("vmhdr"))
        .when(line.str.contains(_DISKHDR))
        .then(pl.lit("diskhdr"))
        .when(line.str.contains(_VMDATA))
        .then(pl.lit("vm"))
        .when(line.str.contains(_DISKDATA))
        .then(pl.lit("disk"))
        .when(line.str.contains(u.SUMMARY_RE))
        .then(pl.lit("summary"))
        .when(line.str.contains(r"^\s*vmstat:"))
        .then(pl.lit("err"))
        .when(line.str.contains(_UNSUPPORTED))
        .then(pl.lit("unsupported"))
        .otherwise(pl.lit("other"))
    )
    lf = _read.read_lines(path).with_columns(kind.alias("kind"))
    if not ends_nl:  # a last line without newline is cut unless it ends in a full timestamp
        last = pl.col("line_no") == pl.col("line_no").max()
        cut = last & pl.col("kind").is_in(["vm", "disk", "summary"]) & ~line.str.contains(u.TS_TAIL)
        lf = lf.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("kind").alias("kind"))
    is_hdr = pl.col("kind").is_in(["vmhdr", "diskhdr"])
    lf = lf.with_columns(
        pl.when(is_hdr).then(line).forward_fill().alias("hdr"),
        pl.when(is_hdr).then(pl.col("kind")).forward_fill().alias("hdr_kind"),
        (pl.col("kind") == "diskhdr").cum_sum().alias("disk_block"),
        (pl.col("kind") == "vm").cum_sum().alias("vm_idx"),
    )
    return lf.collect(engine="streaming")


def _vm_rows(
    rows: pl.DataFrame, scale: float, zone: str | None, notes: list[str]
) -> tuple[pl.DataFrame | None, int]:
    """Rows under one vmstat header -> (string/typed frame, rows skipped for field count)."""
    names = str(rows["hdr"][0]).split()
    abbrev = names[-1] if names[-1] not in _VM else None
    cols = names[:-1] if abbrev else names
    if len(set(cols)) != len(cols):
        notes.append("vmstat header with duplicate column names: its rows skipped")
        return None, rows.height
    unknown = [c for c in cols if c not in _VM]
    if unknown:
        notes.append(f"vmstat columns not known, ignored: {' '.join(unknown)}")
    # tokenize: whitespace split (values can be wider than their header)
    tok = pl.col("tok")
    lf = rows.lazy().with_columns(pl.col("line").str.extract_all(r"[^ \t]+").alias("tok"))
    ok = tok.list.len() == len(cols) + (2 if abbrev else 0)
    if abbrev:
        ok = ok & tok.list.get(len(cols), null_on_oob=True).str.contains(r"^[0-9]{4}-")
    lf = lf.filter(ok)
    if abbrev:
        stamp = tok.list.get(len(cols)) + " " + tok.list.get(len(cols) + 1)
        ts = u.printed_ts(stamp, abbrev, zone, notes)
        sel = [ts.alias("ts"), pl.when(ts.is_not_null()).then(pl.lit("printed")).alias("ts_source")]
    else:
        derived = pl.col("ts_derived")
        sel = [
            derived.alias("ts"),
            pl.when(derived.is_not_null()).then(pl.lit("derived")).alias("ts_source"),
        ]
    # type: one cast per known column, by header name
    for i, c in enumerate(cols):
        if c not in _VM:
            continue
        out, kind = _VM[c]
        num = tok.list.get(i).cast(pl.Int64, strict=False)
        if kind == "mem" and scale != 1.0:
            num = (num * scale).round(0).cast(pl.Int64, strict=False)
        elif kind == "swap":
            num = num.cast(pl.Float64) * scale
        elif kind == "f":
            num = num.cast(pl.Float64)
        sel.append(num.alias(out))
    s = lf.select(pl.col("since_boot"), *sel).collect()
    if abbrev and s.height:
        u.check_abbrev(abbrev, zone, s["ts"].drop_nulls().first(), notes)  # type: ignore[arg-type]
    return s, rows.height - s.height


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one vmstat output file into the ``vmstat``, ``vmstat_disk``, ``vmstat_summary`` tables."""
    cov = base.Coverage()
    notes = cov.notes
    if _read.needs_utf8_repair(path):
        notes.append("file is not valid UTF-8: invalid bytes replaced")
    df = _classify(path, u.file_ends_with_newline(path))
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("header", sum(counts.get(k, 0) for k in ("group", "vmhdr", "diskhdr")))
    cov.add_skipped("vmstat error message", counts.get("err", 0))
    cov.add_skipped(
        "unsupported vmstat mode (-p partition / -m slabinfo)", counts.get("unsupported", 0)
    )
    cov.add_skipped("unrecognized line", counts.get("other", 0))
    cov.add_skipped("truncated last line (no trailing newline)", counts.get("truncated", 0))
    recognized = sum(
        counts.get(k, 0)
        for k in ("group", "vmhdr", "diskhdr", "vm", "disk", "summary", "truncated")
    )
    if recognized == 0 and counts.get("other", 0) + counts.get("unsupported", 0) > 0:
        raise ParseError(f"{ctx.file_name or path.name}: no vmstat header, sample or summary line")

    cmd = u.parse_command(ctx.command)
    unit = cmd.unit if cmd.unit in u.UNIT_BYTES else "K"
    scale = u.UNIT_BYTES[unit] / 1024
    zone = u.resolve_zone(cmd.tz_env) or u.resolve_zone(ctx.tz)
    if ctx.tz and not u.resolve_zone(ctx.tz) and not cmd.tz_env:
        notes.append(f"host time zone {ctx.tz!r} is not an IANA zone name: not used")
    interval = ctx.interval_s if ctx.interval_s else cmd.delay_s
    if cmd.known and cmd.delay_s is None:
        interval = None  # a one-shot report: no series to place in time

    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    vm = df.filter(pl.col("kind") == "vm").with_columns(
        u.derived_ts(pl.col("vm_idx") - 1, ctx.capture_start, interval).alias("ts_derived"),
        ((pl.col("vm_idx") == 1) & pl.lit(not cmd.no_first)).alias("since_boot"),
    )
    disk = df.filter(pl.col("kind") == "disk").with_columns(
        u.derived_ts(pl.col("disk_block") - 1, ctx.capture_start, interval).alias("ts_derived")
    )
    parts, dparts = [], []
    for n, h in enumerate(vm.get_column("hdr").unique(maintain_order=True).to_list()):
        rows = (
            vm.filter(pl.col("hdr") == h) if h is not None else vm.filter(pl.col("hdr").is_null())
        )
        if h is None or rows["hdr_kind"][0] != "vmhdr":
            cov.add_skipped("sample row without a vmstat header above it", rows.height)
            continue
        if n >= _MAX_LAYOUTS:
            cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", rows.height)
            continue
        frame, bad = _vm_rows(rows, scale, zone, notes)
        cov.add_skipped(_MISFIT, bad)
        if frame is not None and frame.height:
            parts.append(frame)
    for n, h in enumerate(disk.get_column("hdr").unique(maintain_order=True).to_list()):
        rows = (
            disk.filter(pl.col("hdr") == h)
            if h is not None
            else disk.filter(pl.col("hdr").is_null())
        )
        if h is None or rows["hdr_kind"][0] != "diskhdr":
            cov.add_skipped("disk row without a vmstat -d header above it", rows.height)
            continue
        if n >= _MAX_LAYOUTS:
            cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", rows.height)
            continue
        frame, bad = u.disk_rows(rows, zone, notes)
        cov.add_skipped(_MISFIT, bad)
        if frame is not None and frame.height:
            dparts.append(frame)
    in_report = (pl.col("kind") == "summary") & pl.col("hdr").is_not_null()
    cov.add_skipped("unrecognized line", df.filter(in_report).height)  # -s/-D never follow a header
    summary = u.summary_rows(df.filter((pl.col("kind") == "summary") & pl.col("hdr").is_null()))
    for name, frames in (("vmstat", parts), ("vmstat_disk", dparts)):
        if frames:
            merged = pl.concat(frames, how="diagonal_relaxed")
            tables[name] = TABLES[name].conform(merged).collect()
            cov.parsed += tables[name].height  # type: ignore[union-attr]
    if summary.height:
        tables["vmstat_summary"] = TABLES["vmstat_summary"].conform(summary).collect()
        cov.parsed += summary.height
    if "vmstat" in tables and not cmd.known:
        notes.append(
            "no vmstat command line known: memory in KiB (no -S) and a since-boot first row (no -y) assumed"
        )
    elif "vmstat" in tables and cmd.unit not in u.UNIT_BYTES:
        notes.append(f"unknown -S unit {cmd.unit!r}: KiB assumed")
    _time_notes(tables, interval, notes)
    cov.notes[:] = list(dict.fromkeys(notes))
    meta = {"memory_unit": unit, "command": ctx.command}
    return base.ParseResult(tables=tables, coverage=cov, meta=meta)


def _time_notes(tables: dict, interval: float | None, notes: list[str]) -> None:
    for name in ("vmstat", "vmstat_disk"):
        t = tables.get(name)
        if t is None or t.height == 0:
            continue
        src = t["ts_source"]
        if (src == "derived").any():
            notes.append(
                f"{name}: rows without -t timestamps placed at capture start + i × {interval} s (ts_source=derived)"
            )
        n_null = t["ts"].null_count()
        if n_null and (src == "printed").sum() == 0 and not (src == "derived").any():
            notes.append(
                f"{name}: no -t timestamps and no capture start/interval known: ts is NULL"
            )
        elif n_null:
            notes.append(
                f"{name}: {n_null} rows have NULL ts (unparsable or non-existent local time)"
            )
