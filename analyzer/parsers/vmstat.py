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
import shlex
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, base
from analyzer.parsers._sysstat import local_to_utc

_I, _F, _S, _B = pl.Int64, pl.Float64, pl.String, pl.Boolean
_SINCE_BOOT = "true for the first row (averages since boot) unless the command had -y"
_TS_COLS: tuple[tuple[str, pl.DataType, str, str], ...] = (
    ("ts", base.TS, "", "sample time (UTC): printed by -t, or derived, or NULL"),
    ("ts_source", _S, "", "'printed' (-t), 'derived' (capture start + i × interval) or NULL"),
)
TABLES: dict[str, base.Table] = {
    "vmstat": base.table(
        "one row per vmstat sample (the first row of a run is the average since boot)",
        *_TS_COLS,
        ("since_boot", _B, "", _SINCE_BOOT),
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

#: header name -> column of the vmstat table (those after ts, ts_source, since_boot)
_HEADER = "r b swpd free buff cache inact active si so bi bo in cs us sy id wa st gu"
_VM = dict(zip(_HEADER.split(), [c.name for c in TABLES["vmstat"].columns[3:]], strict=True))
_DISK_COLS = [c.name for c in TABLES["vmstat_disk"].columns[3:]]
_MISFIT = "row does not fit its header (field count or header layout)"
_MAX_LAYOUTS = 64  # distinct header lines handled; more is hostile input
# Bytes per unit letter of `vmstat -S` (procps: k=1000, K=1024, m=1000000, M=1048576).
UNIT_BYTES = {"k": 1000, "K": 1024, "m": 1_000_000, "M": 1_048_576}
_UTC = {"UTC", "GMT", "UCT", "Z", "ZULU", "UNIVERSAL", "UTC0", "GMT0", "ETC/UTC", "ETC/GMT"}
_STAMP = r"[ \t]+[0-9]{4}-[0-9]{2}-[0-9]{2}[ \t]+[0-9]{2}:[0-9]{2}:[0-9]{2}"
# `vmstat -d`: reads (4), writes (4), IO (2) under these header words; -t adds a zone name
_DISK_HEADER = ("total", "merged", "sectors", "ms") * 2 + ("cur", "sec")
_VMHDR = r"^[ \t]*r[ \t]+b[ \t]+swpd[ \t]"
_SUMMARY = r"^[ \t]*([0-9]+)[ \t]+(?:([KkMm])[ \t]+)?([A-Za-z][A-Za-z0-9/()_ -]*?)[ \t]*$"
_KINDS = (  # line kind -> pattern; the first that matches wins, else 'other'
    ("blank", r"^[ \t]*$"),
    ("group", r"^[ \t]*-*procs-*[ \t]+-+memory|^[ \t]*disk-[ \t]+-+reads"),
    ("vmhdr", _VMHDR),
    ("diskhdr", r"^[ \t]+total[ \t]+merged[ \t]+sectors[ \t]+ms[ \t]"),
    ("vm", r"^[ \t]*[0-9]+(?:[ \t]+[0-9]+)+(?:" + _STAMP + r")?[ \t]*$"),
    ("disk", r"^[A-Za-z][^ \t]*(?:[ \t]+[0-9]+)+(?:" + _STAMP + r")?[ \t]*$"),
    ("summary", _SUMMARY),
    ("err", r"^\s*vmstat:"),
    (
        "unsupported",
        r"^[^ \t]+[ \t]+reads[ \t]+read sectors[ \t]+writes[ \t]+requested writes|^Cache[ \t]+Num[ \t]+Total",
    ),
)
_SKIPPED = {
    "err": "vmstat error message",
    "unsupported": "unsupported vmstat mode (-p partition / -m slabinfo)",
    "other": "unrecognized line",
    "truncated": "truncated last line (no trailing newline)",
}


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
    try:
        words = shlex.split(command or "")
    except ValueError:
        words = (command or "").split()
    idx = next((i for i, w in enumerate(words) if Path(w).name == "vmstat"), None)
    if idx is None:
        return Command()
    cmd = Command(known=True, unit="K")
    cmd.tz_env = next((w[3:] or None for w in reversed(words[:idx]) if w.startswith("TZ=")), None)
    args, positional = iter(words[idx + 1 :]), []
    for w in args:
        if w.startswith("--"):
            name, _, val = w[2:].partition("=")
            if name in ("unit", "partition") and not val:
                val = next(args, "")  # the option's value is the next word
            cmd.no_first |= name == "no-first"
            if name == "unit":
                cmd.unit = val or cmd.unit
        elif w.startswith("-") and len(w) > 1:
            for j, ch in enumerate(w[1:], start=1):
                if ch in "Sp":  # an option with a value: the rest of the word, or the next word
                    val = w[j + 1 :] or next(args, "")
                    if ch == "S":
                        cmd.unit = val or cmd.unit
                    break
                cmd.no_first |= ch == "y"
        else:
            positional.append(w)
    try:
        delay = float(positional[0]) if positional else 0.0
    except ValueError:
        delay = 0.0
    cmd.delay_s = delay if delay > 0 else None
    return cmd


def resolve_zone(name: str | None) -> str | None:
    """An IANA zone usable by polars for ``name`` ('UTC' for UTC spellings), else None."""
    if not name:
        return None
    if name.upper() in _UTC:
        return "UTC"
    try:
        ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        return None
    return name


def _printed_ts(stamp: pl.Expr, abbrev: str, zone: str | None, notes: list[str]) -> pl.Expr:
    """'YYYY-MM-DD HH:MM:SS' printed in zone ``abbrev`` -> UTC (``zone``: the host's)."""
    utc = abbrev.upper() in _UTC
    if not utc and zone is None:
        notes.append(
            f"timestamps printed in zone {abbrev!r} but the host time zone is unknown: "
            "assumed UTC (may be off by that zone's UTC offset)"
        )
    elif not utc:
        notes.append(f"timestamps printed in zone {abbrev!r} interpreted in {zone}")
    naive = stamp.str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False)
    return local_to_utc(naive, None if utc else zone)


def _check_abbrev(abbrev: str, zone: str | None, first: datetime, notes: list[str]) -> None:
    """Note when the zone name vmstat printed is not what ``zone`` calls itself at ``first``."""
    if zone and zone != "UTC" and abbrev.upper() not in _UTC:
        actual = first.astimezone(ZoneInfo(zone)).tzname()
        if actual and actual != abbrev:
            notes.append(
                f"vmstat printed zone {abbrev!r} but {zone} is {actual!r} at {first:%Y-%m-%d}"
            )


def _derived_ts(idx: pl.Expr, start: datetime | None, interval_s: float | None) -> pl.Expr:
    """capture_start + idx × interval (UTC), or NULL when either is unknown."""
    if start is None or interval_s is None:
        return pl.lit(None, dtype=base.TS)
    step_us = round(interval_s * 1_000_000)
    return pl.lit(start).cast(base.TS) + pl.duration(microseconds=idx.cast(pl.Int64) * step_us)


@dataclass
class _State:
    """What one block hands the next: the header above, sample and report counts, the
    header layouts met (vm and disk), and per table the ts sources for the notes."""

    scale: float
    zone: str | None
    no_first: bool
    start: datetime | None
    interval: float | None
    hdr: str | None = None
    n_vm: int = 0
    n_disk_hdr: int = 0
    layouts: dict[str, dict[str | None, int]] = field(
        default_factory=lambda: {"vm": {}, "disk": {}}
    )
    checked: set[str] = field(default_factory=set)  # headers whose zone name was checked
    seen: Counter[str] = field(default_factory=Counter)  # lines per kind
    sources: dict[str, Counter] = field(default_factory=dict)  # table -> ts_source counts


def _typed(
    rows: pl.DataFrame, hdr: str, table: str, st: _State, notes: list[str]
) -> pl.DataFrame | None:
    """Rows under the header line ``hdr`` -> typed rows (None: the header is unusable).

    Columns by header name (vmstat) or the fixed -d layout; fields are whitespace-split
    (values can be wider than their header); rows with another field count are left out."""
    names, tok = hdr.split(), pl.col("tok")
    if table == "vmstat_disk":
        abbrev = names[10] if len(names) == 11 else None
        if tuple(names[:10]) != _DISK_HEADER or len(names) > 11:
            return None
        n = 11
        sel = [tok.list.get(0).alias("disk")]
        sel += [
            tok.list.get(i + 1).str.strip_chars().cast(pl.Int64, strict=False).alias(c)
            for i, c in enumerate(_DISK_COLS)
        ]
    else:
        abbrev = names[-1] if names[-1] not in _VM else None
        cols = names[:-1] if abbrev else names
        if len(set(cols)) != len(cols):
            notes.append("vmstat header with duplicate column names: its rows skipped")
            return None
        if unknown := [c for c in cols if c not in _VM]:
            notes.append(f"vmstat columns not known, ignored: {' '.join(unknown)}")
        n, sel = len(cols), [pl.col("since_boot")]
        for i, c in enumerate(cols):
            if c in _VM:
                out = _VM[c]
                num = tok.list.get(i).cast(pl.Int64, strict=False)
                if out.endswith("_kb_s"):  # swapping, in kB/s from any -S unit
                    num = num.cast(pl.Float64) * st.scale
                elif out.endswith("_kb") and st.scale != 1.0:  # memory, in kB
                    num = (num * st.scale).round(0).cast(pl.Int64, strict=False)
                elif TABLES["vmstat"].schema[out] == pl.Float64:
                    num = num.cast(pl.Float64)
                sel.append(num.alias(out))
    ok = tok.list.len() == n + (2 if abbrev else 0)
    if abbrev:
        if table == "vmstat":
            ok &= tok.list.get(n, null_on_oob=True).str.contains(r"^[0-9]{4}-")
        ts = _printed_ts(tok.list.get(n) + " " + tok.list.get(n + 1), abbrev, st.zone, notes)
    else:
        ts = pl.col("ts_derived")
    source = pl.when(ts.is_not_null()).then(pl.lit("printed" if abbrev else "derived"))
    out = rows.lazy().with_columns(pl.col("line").str.extract_all(r"[^ \t]+").alias("tok"))
    out = out.filter(ok).select("line_no", ts.alias("ts"), source.alias("ts_source"), *sel)
    out = out.collect()
    if table == "vmstat" and abbrev and hdr not in st.checked and out["ts"].drop_nulls().len():
        st.checked.add(hdr)
        _check_abbrev(abbrev, st.zone, out["ts"].drop_nulls()[0], notes)
    return out


def _summary(rows: pl.DataFrame) -> pl.DataFrame:
    """`vmstat -s` / `-D` lines (`   24684084 K total memory`) -> key, value (kB for memory), unit."""
    g = pl.col("line").str.extract_groups(_SUMMARY)
    num, u = g.struct.field("1").cast(pl.Int64, strict=False), g.struct.field("2")
    label = g.struct.field("3").str.to_lowercase()
    factor = u.replace_strict(UNIT_BYTES, default=None, return_dtype=pl.Float64) / 1024
    value = (
        pl.when(u.is_null())
        .then(num)
        .otherwise((num * factor).round(0).cast(pl.Int64, strict=False))
    )
    unit = pl.lit("count")
    for cond, name in (
        (label.str.starts_with("pages"), "pages"),
        (label == "boot time", "epoch_s"),
        (label.str.contains("sectors"), "sectors"),
        (label.str.starts_with("milli"), "ms"),
        (label.str.ends_with("ticks"), "ticks"),
        (u.is_not_null(), "kB"),
    ):
        unit = pl.when(cond).then(pl.lit(name)).otherwise(unit)
    key = label.str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")
    return rows.select(key.alias("key"), value.alias("value"), unit.alias("unit"))


def _block(block: _blocks.Block, st: _State, cov: base.Coverage) -> dict[str, pl.DataFrame]:
    """Classify one block's lines, count them, type its rows; carry the state on."""
    line = pl.col("line")
    kind = pl.lit("other")
    for name, rx in reversed(_KINDS):
        kind = pl.when(line.str.contains(rx)).then(pl.lit(name)).otherwise(kind)
    df = block.lines.with_columns(kind.alias("kind"))
    if block.last and not block.data.endswith(b"\n"):  # a cut last line, unless its stamp is whole
        cut = (
            (pl.col("line_no") == pl.col("line_no").max())
            & pl.col("kind").is_in(["vm", "disk", "summary"])
            & ~line.str.contains(_STAMP + r"\s*$")
        )
        df = df.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("kind").alias("kind"))
    is_hdr, k = pl.col("kind").is_in(["vmhdr", "diskhdr"]), pl.col("kind")
    idx = pl.when(k == "vm").then((k == "vm").cum_sum() + st.n_vm)
    idx = idx.otherwise((k == "diskhdr").cum_sum() + st.n_disk_hdr) - 1
    df = df.with_columns(
        pl.when(is_hdr).then(line).forward_fill().fill_null(pl.lit(st.hdr, pl.String)).alias("hdr"),
        _derived_ts(idx, st.start, st.interval).alias("ts_derived"),
        ((idx == 0) & (k == "vm") & pl.lit(not st.no_first)).alias("since_boot"),
    )
    counts = dict(df.group_by("kind").len().iter_rows())
    cov.total += df.height
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("header", sum(counts.get(x, 0) for x in ("group", "vmhdr", "diskhdr")))
    for x, reason in _SKIPPED.items():
        cov.add_skipped(reason, counts.get(x, 0))
    st.seen.update(counts)
    st.n_vm += counts.get("vm", 0)
    st.n_disk_hdr += counts.get("diskhdr", 0)
    if df.height:
        st.hdr = df["hdr"][-1]
    out: dict[str, pl.DataFrame] = {}
    for table, row_kind, what in (
        ("vmstat", "vm", "sample row without a vmstat header above it"),
        ("vmstat_disk", "disk", "disk row without a vmstat -d header above it"),
    ):
        rows, layouts, frames = df.filter(k == row_kind), st.layouts[row_kind], []
        for (h,), part in rows.partition_by("hdr", as_dict=True, maintain_order=True).items():
            n = layouts.setdefault(h, len(layouts))
            if h is None or (re.match(_VMHDR, h) is None) == (table == "vmstat"):
                cov.add_skipped(what, part.height)
                continue
            if n >= _MAX_LAYOUTS:
                cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", part.height)
                continue
            frame = _typed(part, h, table, st, cov.notes)
            cov.add_skipped(_MISFIT, part.height - (frame.height if frame is not None else 0))
            if frame is not None and frame.height:
                frames.append(frame)
        if frames:
            out[table] = pl.concat(frames, how="diagonal_relaxed").sort("line_no").drop("line_no")
    summary = k == "summary"
    cov.add_skipped("unrecognized line", df.filter(summary & pl.col("hdr").is_not_null()).height)
    rows = df.filter(summary & pl.col("hdr").is_null())  # -s/-D never follow a header
    if rows.height:
        out["vmstat_summary"] = _summary(rows)
    for table, frame in out.items():
        cov.parsed += frame.height
        if table != "vmstat_summary":  # ts_source is NULL where ts is
            st.sources.setdefault(table, Counter()).update(frame["ts_source"].to_list())
    return out


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one vmstat output file into the ``vmstat``, ``vmstat_disk``, ``vmstat_summary`` tables."""
    cov = base.Coverage()
    notes = cov.notes
    cmd = parse_command(ctx.command)
    unit = cmd.unit if cmd.unit in UNIT_BYTES else "K"
    if ctx.tz and not resolve_zone(ctx.tz) and not cmd.tz_env:
        notes.append(f"host time zone {ctx.tz!r} is not an IANA zone name: not used")
    interval = ctx.interval_s if ctx.interval_s else cmd.delay_s
    if cmd.known and cmd.delay_s is None:
        interval = None  # a one-shot report: no series to place in time
    zone = resolve_zone(cmd.tz_env) or resolve_zone(ctx.tz)
    st = _State(UNIT_BYTES[unit] / 1024, zone, cmd.no_first, ctx.capture_start, interval)
    blocks, rows = _blocks.Blocks(path), _blocks.Rows(ctx, TABLES)
    for block in blocks:
        rows.put(_block(block, st, cov))
    if blocks.repaired:
        notes.insert(0, "file is not valid UTF-8: invalid bytes replaced")
    found = ("group", "vmhdr", "diskhdr", "vm", "disk", "summary", "truncated")
    if not sum(st.seen[k] for k in found) and st.seen["other"] + st.seen["unsupported"]:
        raise ParseError(f"{ctx.file_name or path.name}: no vmstat header, sample or summary line")
    if "vmstat" in st.sources and not cmd.known:
        notes.append(
            "no vmstat command line known: memory in KiB (no -S) and a since-boot first row (no -y) assumed"
        )
    elif "vmstat" in st.sources and cmd.unit not in UNIT_BYTES:
        notes.append(f"unknown -S unit {cmd.unit!r}: KiB assumed")
    for table in ("vmstat", "vmstat_disk"):
        src = st.sources.get(table, Counter())
        derived, printed, null = src["derived"], src["printed"], src[None]
        if derived:
            notes.append(
                f"{table}: rows without -t timestamps placed at capture start + i × {interval} s (ts_source=derived)"
            )
        if null and not printed and not derived:
            notes.append(
                f"{table}: no -t timestamps and no capture start/interval known: ts is NULL"
            )
        elif null:
            notes.append(
                f"{table}: {null} rows have NULL ts (unparsable or non-existent local time)"
            )
    cov.notes[:] = list(dict.fromkeys(notes))
    meta = {"memory_unit": unit, "command": ctx.command}
    return base.ParseResult(tables=rows.tables(), coverage=cov, meta=meta)
