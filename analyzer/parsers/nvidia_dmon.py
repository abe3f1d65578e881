"""``nvidia-smi dmon`` -> ``gpu_dmon`` (one row per GPU per sample).

Supported: any ``-s`` metric set (``p u c v m e t`` and newer ``jpg``/``ofa``/``ccpm``
columns), with and without ``-o D`` / ``-o T`` / ``-o DT``, multi-GPU, repeated headers
(every N rows), drivers from 2016 (single ``temp`` column, read as ``gtemp_c``) to current
(``gtemp mtemp``). The columns come from the ``#`` names header, so any order works.
``-`` and ``N/A`` are NULL. The capture runs ``nvidia-smi dmon -o DT`` under ``TZ=UTC0``;
printed times are read in ``ctx.tz`` (UTC when unknown, with a note). Without ``-o D`` the
date is taken from ``ctx.capture_start`` with midnight roll-over (``ts_source`` =
``derived-date``); without any time column ``ts`` is NULL (note).

Metric columns this parser does not know are kept, long-form, in ``gpu_dmon_other``
(metric name, unit from the units header, value). Error text printed instead of data
(``Not supported on the device(s)``, ``Failed to process command line``) is skipped with
a reason. Rows of plain right-aligned numbers are typed from their bytes (`_dmon_fast`),
the others from their tokens (`_dmon_block`): the same values either way.

Tables: ``gpu_dmon`` (ts, ts_source, gpu, sm_pct, mem_pct, enc_pct, dec_pct, jpg_pct,
ofa_pct, pwr_w, gtemp_c, mtemp_c, mclk_mhz, pclk_mhz, pviol_pct, tviol, fb_mib,
bar1_mib, ccpm_mib, sbecc, dbecc, pci_errors, rxpci_mb_s, txpci_mb_s) and
``gpu_dmon_other`` (ts, gpu, metric, unit, value).

Sample input (``nvidia-smi dmon -o DT -s pucm``)::

    #Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk     fb   bar1
    #YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz     MB     MB
     20261129   14:00:01      0     71     34      -      0      0      0      0    405    210      0      1
     20261129   14:00:01      1    250     71      -     98     45      0      0   9251   1950  20480      5
     20261129   14:00:02      0     70     34      -      0      0      0      0    405    210      0      1
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, base
from analyzer.parsers import _dmon_block as db
from analyzer.parsers import _dmon_fast as df_fast
from analyzer.parsers._nvbpf_time import DayCarry, resolve_tz
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult

F64, I64 = pl.Float64, pl.Int64

# dmon header name -> (column, dtype, unit, doc)
_METRICS: dict[str, tuple[str, pl.DataType, str, str]] = {
    "sm": ("sm_pct", F64, "%", "SM (streaming multiprocessor) utilization"),
    "mem": ("mem_pct", F64, "%", "memory-controller utilization (not memory used)"),
    "enc": ("enc_pct", F64, "%", "video encoder utilization"),
    "dec": ("dec_pct", F64, "%", "video decoder utilization"),
    "jpg": ("jpg_pct", F64, "%", "JPEG engine utilization"),
    "ofa": ("ofa_pct", F64, "%", "optical-flow accelerator utilization"),
    "pwr": ("pwr_w", F64, "W", "power draw"),
    "gtemp": ("gtemp_c", F64, "C", "GPU temperature (old drivers' single `temp` column)"),
    "temp": ("gtemp_c", F64, "C", ""),
    "mtemp": ("mtemp_c", F64, "C", "memory (HBM) temperature"),
    "mclk": ("mclk_mhz", I64, "MHz", "memory clock"),
    "pclk": ("pclk_mhz", I64, "MHz", "processor (graphics) clock"),
    "pviol": ("pviol_pct", F64, "%", "share of the interval the clocks were power-capped"),
    "tviol": ("tviol", pl.Boolean, "bool", "thermal violation flag (units line says `bool`)"),
    "fb": ("fb_mib", I64, "MiB", "frame-buffer memory used (dmon prints `MB`, i.e. MiB)"),
    "bar1": ("bar1_mib", I64, "MiB", "BAR1 memory used"),
    "ccpm": ("ccpm_mib", I64, "MiB", "confidential-compute protected memory used"),
    "sbecc": ("sbecc", I64, "errors", "single-bit ECC errors in the interval"),
    "dbecc": ("dbecc", I64, "errors", "double-bit ECC errors in the interval"),
    "pci": ("pci_errors", I64, "errors", "PCIe replay errors in the interval"),
    "rxpci": ("rxpci_mb_s", F64, "MB/s", "PCIe receive throughput"),
    "txpci": ("txpci_mb_s", F64, "MB/s", "PCIe transmit throughput"),
}
# `temp` (old drivers) is an alias of `gtemp`: it has no doc of its own and no column.
_METRIC_COLUMNS = [v for v in _METRICS.values() if v[3]]

TABLES: dict[str, base.Table] = {
    "gpu_dmon": base.table(
        "one row per GPU per dmon sample",
        ("ts", TS, "", "sample time (UTC); NULL when the output has no time column"),
        ("ts_source", pl.String, "", "'printed' (-o DT), 'derived-date' (-o T + capture date)"),
        ("gpu", pl.Int32, "", "GPU index as printed by dmon (`Idx`)"),
        *((c, t, u, d) for c, t, u, d in _METRIC_COLUMNS),
    ),
    "gpu_dmon_other": base.table(
        "one row per GPU per sample per dmon metric column this parser does not know",
        ("ts", TS, "", "sample time (UTC), as in gpu_dmon"),
        ("gpu", pl.Int32, "", "GPU index"),
        ("metric", pl.String, "", "column name from the dmon names header"),
        ("unit", pl.String, "", "unit from the dmon units header ('' when none)"),
        ("value", F64, "", "value (NULL for `-` / `N/A`)"),
    ),
}


def sniff(head: str, name: str) -> float:
    """High when a ``# gpu ...`` names header is followed by a ``# Idx`` units line."""
    lines = [ln.strip() for ln in head.splitlines()[:200]]
    names = any(ln.startswith("#") and " gpu " in f" {ln[1:]} " for ln in lines)
    units = any(ln.startswith("#") and " Idx " in f" {ln[1:]} " for ln in lines)
    if names and units:
        return 0.95
    if names:
        return 0.7
    if any("nvidia-smi dmon" in ln for ln in lines) or "dmon" in name.lower():
        return 0.5 if any("Not supported on the device" in ln for ln in lines) else 0.2
    return 0.0


def _cut(buf: bytes, limit: int) -> int:
    """Block cut: before the last names header (``#...gpu``) at or before ``limit``, so
    that each header's rows stay in one block (``gpu_dmon_other`` keeps the order of a
    whole-file parse); after the last whole line when no header is near the end."""
    pos = limit
    for _ in range(64):
        at = buf.rfind(b"\n#", 0, pos)
        if at < 0:
            break
        end = buf.find(b"\n", at + 1)
        line = buf[at + 1 : end if end >= 0 else len(buf)]
        if line.isascii() and _NAMES.search(line):
            return at + 1
        pos = at
    return limit


_NAMES = re.compile(rb"^#.*\bgpu\b")


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one dmon output file (see the module docstring), block by block: each
    block's rows go to ``ctx.sink`` when there is one."""
    cov = Coverage()
    tz, tz_note = resolve_tz(ctx)
    carry = db.Carry()
    kinds: Counter[str] = Counter()
    notes: set[str] = set()
    placed = False
    out = _blocks.Rows(ctx, TABLES)
    blocks = _blocks.Blocks(path, _cut)
    for block in blocks:
        dmon, other = _block(block, ctx, tz, cov, carry, kinds, notes)
        cov.total += block.n_lines
        out.put({"gpu_dmon": dmon} | ({"gpu_dmon_other": other} if other is not None else {}))
        placed = placed or dmon.get_column("ts").is_not_null().any()
    if kinds["names"] == 0 and kinds["error"] == 0 and kinds["data"] > 0:
        raise ParseError(f"{path.name}: no '# gpu' header line: not nvidia-smi dmon output")
    if blocks.repaired:
        cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
    cov.add_structure("blank", kinds["blank"])
    cov.add_structure("header", kinds["names"] + kinds["units"])
    cov.add_skipped("nvidia-smi error message (no data)", kinds["error"])
    cov.add_skipped("comment or shell prompt, not dmon output", kinds["comment"])
    cov.add_skipped("unrecognized line", kinds["other"])
    if placed and tz_note:
        cov.notes.append(tz_note)
    cov.notes.extend(sorted(notes))
    empty = {"gpu_dmon": pl.DataFrame(schema=TABLES["gpu_dmon"].schema)}
    return ParseResult(tables=dict(out.tables(empty)), coverage=cov, meta={})


def _block(
    block: _blocks.Block,
    ctx: ParseContext,
    tz: str,
    cov: Coverage,
    carry: db.Carry,
    kinds: Counter[str],
    notes: set[str],
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One block -> (gpu_dmon rows, gpu_dmon_other rows or None when no header group of
    the block has unknown metrics); counts kinds and skipped rows, collects ts notes.
    Rows typed from their bytes (`_dmon_fast`) and the other lines (classified and
    tokenized) meet per header group, in line order."""
    fast: dict[tuple[str, str | None], pl.DataFrame] = {}
    if block.plain:
        fast, kept, heads = df_fast.groups(block, carry, _METRICS)
        rest = np.ones(block.n_lines, dtype=bool)
        rest[kept] = False
        rest[heads.get_column("line_no").to_numpy() - block.first_line] = False
        rest = np.flatnonzero(rest)
        df = db.classify(block.subset(rest)).merge_sorted(heads, "line_no")
        kinds["data"] += kept.size
    else:
        df = db.classify(block.lines)
    kinds.update(dict(df.get_column("kind").value_counts().iter_rows()))
    data = db.headed(df, carry)
    cov.add_skipped("data row before any header", data.filter(pl.col("header").is_null()).height)
    data = data.filter(pl.col("header").is_not_null())
    slow = {k: g for k, g in data.group_by(["_ht", "_ut"], maintain_order=True)}
    first = {k: g.get_column("line_no")[0] for k, g in slow.items()}
    for k, f in fast.items():
        first[k] = min(first.get(k, f.get_column("line_no")[0]), f.get_column("line_no")[0])
    frames, others = [], []
    for htext, utext in sorted(first, key=first.__getitem__):
        names = str(htext).lstrip("#").split()
        unit_list = str(utext).lstrip("#").split() if utext is not None else []
        if len(unit_list) != len(names):
            unit_list = [""] * len(names)
        parts = [fast[(htext, utext)]] if (htext, utext) in fast else []
        if (htext, utext) in slow:
            fields, bad = db.slow_fields(slow[(htext, utext)], len(names))
            cov.add_skipped("column count differs from header", bad)
            parts.append(db.values(fields, names, _METRICS))
        vals = pl.concat(parts, how="diagonal").sort("line_no") if len(parts) > 1 else parts[0]
        day = carry.days.setdefault((str(htext), utext), DayCarry())
        ts, src, note = db.times(names, ctx, tz, day)
        vals = vals.with_columns(ts.alias("ts"), src.alias("ts_source"))
        if "_sec" in vals.columns and "_naive" not in vals.columns:
            day.advance(vals.get_column("_sec"))
        if note:
            notes.add(note)
        cov.parsed += vals.height
        frames.append(vals)
        other = db.others(vals, names, unit_list)
        if other is not None:
            others.append(other)
    if len(frames) > 1:
        dmon = pl.concat(frames, how="diagonal_relaxed").sort("line_no", maintain_order=True)
    else:  # one header group: its rows are in line order already
        dmon = frames[0] if frames else pl.DataFrame(schema=TABLES["gpu_dmon"].schema)
    other = None
    if others:  # in the order of header blocks, then metric, then line
        other = pl.concat(others).sort(["_hdr", "_metric", "_line"], maintain_order=True)
    return dmon, other
