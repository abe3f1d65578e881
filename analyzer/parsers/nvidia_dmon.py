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
a reason.

Lines are classified (blank, ``#`` names header, ``#`` units header, data, error text,
comment, other); each data row belongs to the last names and units headers above it
(carried across blocks), and rows are typed per distinct header text (dmon repeats its
header every few rows). dmon right-aligns its fields under the header names, except
``Date`` and ``Time`` (8 characters, left-aligned under their names): a row whose every
slot holds exactly one right-aligned token is cut at the slots (`_sysstat.aligned_fields`;
its slots are then its tokens), any other row is split at blanks (`_sysstat.cut_rows`);
a row whose token count differs from the header's is skipped. Values: `_read`'s
``decimal_number`` / ``int_number`` (a decimal comma is read), dates by ``strptime``; in
a plain block (ASCII, no CR or NUL), rows whose values are plain right-aligned numbers
get them from the bytes by the shared `_sysstat.right_aligned` (the same values).

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

import dataclasses
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _read, _sysstat, base
from analyzer.parsers._nvbpf_time import (
    DayCarry,
    hms_seconds,
    local_to_utc,
    resolve_tz,
    time_of_day_to_ts,
)
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
_HEADER_RE = r"^#.*\bgpu\b"
_UNITS_RE = r"^#.*\bIdx\b"
_DATA_RE = r"^\s*\d"
_ERROR_RE = (
    r"(?i)not supported on the device|failed to process command line"
    r"|^(NVIDIA-SMI has failed|No devices were found|Unable to determine)"
)


@dataclass
class _Carry:
    """What one block hands to the next: the headers in effect and, per header text,
    the midnight roll-over of ``-o T`` times."""

    names: tuple[int, str] | None = None  # (line_no, text) of the last names header
    units: tuple[int, str] | None = None  # (line_no, text) of the last units header
    days: dict[tuple[str, str | None], DayCarry] = field(default_factory=dict)


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one dmon output file (see the module docstring), block by block: each
    block's rows go to ``ctx.sink`` when there is one."""
    cov = Coverage()
    tz, tz_note = resolve_tz(ctx)
    carry = _Carry()
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
    carry: _Carry,
    kinds: Counter[str],
    notes: set[str],
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One block -> (gpu_dmon rows, gpu_dmon_other rows or None when no header group of
    the block has unknown metrics); counts kinds and skipped rows, collects ts notes."""
    data, rest = _classify(block.lines)
    kinds["data"] += data.height
    kinds.update(dict(rest.get_column("kind").value_counts().iter_rows()))
    data, groups = _headed(data, rest, carry)
    before = data.get_column("header").null_count()
    cov.add_skipped("data row before any header", before)
    data = data.filter(pl.col("header").is_not_null()) if before else data
    comma = b"," in block.data
    raw = block.data if block.plain else None  # lines are their bytes: typed from them
    frames, others = [], []
    for g, (htext, utext) in enumerate(groups):
        grp = data if len(groups) == 1 else data.filter(pl.col("_g") == g)
        names = htext.lstrip("#").split()
        unit_list = utext.lstrip("#").split() if utext is not None else []
        if len(unit_list) != len(names):
            unit_list = [""] * len(names)
        vals, bad = _rows(grp, htext, names, comma, raw)
        cov.add_skipped("column count differs from header", bad)
        day = carry.days.setdefault((htext, utext), DayCarry())
        ts, src, note = _times(names, ctx, tz, day)
        vals = vals.with_columns(ts.alias("ts"), src.alias("ts_source"))
        if "_sec" in vals.columns:
            day.advance(vals.get_column("_sec"))
        if note:
            notes.add(note)
        cov.parsed += vals.height
        frames.append(vals)
        other = _others(vals, names, unit_list)
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


def _classify(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The data lines, and the other lines with their ``kind`` (data lines are told
    first: no other kind can match them)."""
    line = pl.col("line")
    # byte offsets (`_rows`; right in a plain block only)
    lines = lines.with_columns(_blocks.line_starts(line.str.len_bytes()).alias("_at"))
    is_data = lines.get_column("line").str.contains(_DATA_RE)
    rest = lines.filter(~is_data).with_columns(
        kind=pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.contains(_HEADER_RE))
        .then(pl.lit("names"))
        .when(line.str.contains(_UNITS_RE))
        .then(pl.lit("units"))
        .when(line.str.contains(_ERROR_RE))
        .then(pl.lit("error"))
        .when(line.str.starts_with("#"))
        .then(pl.lit("comment"))
        .otherwise(pl.lit("other"))
    )
    return lines.filter(is_data), rest


def _headed(
    data: pl.DataFrame, rest: pl.DataFrame, carry: _Carry
) -> tuple[pl.DataFrame, list[tuple[str, str | None]]]:
    """The data lines with ``header``/``units`` (line of the headers above, NULL when
    none) and ``_g`` (index of their header texts in the list returned next: the
    distinct (names, units) texts in the order of their first row); advances ``carry``
    past the block (``rest``: its other lines, with their kind)."""
    pos, line, texts = {}, {}, {}
    for kind in ("names", "units"):
        prev, found = getattr(carry, kind), rest.filter(pl.col("kind") == kind)
        at = [0, *([prev[0]] if prev else []), *found.get_column("line_no")]  # 0: none yet
        texts[kind] = [None, *([prev[1]] if prev else []), *found.get_column("line")]
        setattr(carry, kind, (at[-1], texts[kind][-1]) if len(at) > 1 else None)
        lines = pl.Series(at, dtype=pl.UInt32)
        pos[kind] = lines.search_sorted(data.get_column("line_no"), side="right") - 1
        line[kind] = lines.gather(pos[kind]).replace(0, None)
    key = pl.DataFrame({"h": pos["names"], "u": pos["units"]})
    pairs = key.unique(maintain_order=True)
    groups: dict[tuple[str, str | None], int] = {}
    ids = [
        groups.setdefault((texts["names"][h], texts["units"][u]), len(groups)) if h else None
        for h, u in pairs.iter_rows()
    ]
    if pairs.height == 1:
        gid = pl.repeat(ids[0], data.height, dtype=pl.UInt32, eager=True)
    else:
        pairs = pairs.with_columns(pl.Series("_g", ids, dtype=pl.UInt32))
        gid = key.join(pairs, on=["h", "u"], how="left", maintain_order="left").get_column("_g")
    data = data.with_columns(
        line["names"].alias("header"), line["units"].alias("units"), gid.alias("_g")
    )
    return data, list(groups)


@functools.cache
def _layout(header: str) -> _sysstat.Layout:
    """Column slots of the rows under names header ``header``: each name's slot ends
    where the name ends, but ``Date`` and ``Time`` end 8 characters after they start."""
    names = header.lstrip("#")
    lay = _sysstat.header_layout(" " * (len(header) - len(names)) + names)
    ends = [
        s + 8 if n.lower() in ("date", "time") else e
        for n, s, e in zip(lay.names, lay.starts, lay.ends, strict=True)
    ]
    return dataclasses.replace(lay, ends=tuple(ends), width=max(ends))


@functools.cache
def _one_token_per_slot(header: str, upto: int | None = None) -> str | None:
    """Regex of a row whose every `_layout` slot holds exactly one right-aligned token of
    printable ASCII (and that has only blanks after the last slot): such a row's stripped
    slots are exactly its whitespace tokens. With ``upto``: of a row whose first ``upto``
    slots do. None when a slot is narrower than two characters (one for the first) or
    wider than `_WIDEST` (the regex grows with it)."""
    lay, out, start = _layout(header), ["^"], 0
    for i, end in enumerate(lay.ends):
        blanks = range(0 if i == 0 else 1, end - start)  # blanks before the token
        if not blanks or end - start > _WIDEST:
            return None
        if upto is None or i < upto:
            out.append(
                "(?:" + "|".join(f" {{{b}}}[!-~]{{{end - start - b}}}" for b in blanks) + ")"
            )
        start = end
    return "".join(out) + (" *$" if upto is None else "")


_WIDEST = 40


def _rows(
    grp: pl.DataFrame, header: str, names: list[str], comma: bool, data: bytes | None
) -> tuple[pl.DataFrame, int]:
    """The data rows ``grp`` of names header ``header`` typed (``line_no``, ``header`` and
    the `_columns`), in line order: a row with one token per slot is cut at the slots
    (its values typed from the bytes ``data`` of a plain block where they are plain
    numbers: `_bytes`), any other is split at blanks; rows whose token count is not the
    header's are dropped (their number is returned). ``comma``: the rows may hold a
    decimal comma."""
    k = len(names)
    regex = _one_token_per_slot(header)
    if regex is None:  # slots that cannot hold a token: every row is split at blanks
        ok, cut = pl.lit(False), [pl.lit(None, pl.String)] * k
    else:
        ok = pl.col("line").str.contains(regex)
        cut = _sysstat.aligned_fields(pl.col("line"), _layout(header), range(k))[1]
    done = None
    if data is not None and regex is not None:
        done, grp = _bytes(grp, header, names, comma, data, cut)
    tok = pl.col("_tok").list
    fast = _columns(cut, names, comma) | {"_n": pl.lit(k, pl.UInt32)}
    slow = _columns([tok.get(i, null_on_oob=True) for i in range(k)], names, comma)
    slow["_n"] = tok.len()
    rows = _sysstat.cut_rows(grp, ok, fast, slow, keep=("line_no", "header"))
    n = rows.height
    if not (rows.get_column("_n") == k).all():
        rows = rows.filter(pl.col("_n") == k)
    bad, rows = n - rows.height, rows.drop("_n")
    if done is not None:
        rows = pl.concat([done, rows], how="diagonal_relaxed") if rows.height else done
    if not rows.get_column("line_no").is_sorted():
        rows = rows.sort("line_no")
    return rows, bad


def _bytes(
    grp: pl.DataFrame,
    header: str,
    names: list[str],
    comma: bool,
    data: bytes,
    cut: list[pl.Expr],
) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """Of the rows ``grp`` (``_at``: byte offset in ``data``), those of the header's width
    whose value fields are plain numbers, typed from the bytes by
    `_sysstat.right_aligned` (Date and Time from their slots ``cut`` when each holds one
    token: then the row has one token per slot and these are the values `_columns`
    gives), and the other rows."""
    lay, targets = _layout(header), _targets(names)
    line = pl.col("line")
    fit = line.str.strip_chars_end(" ").str.len_bytes() == lay.width
    values = {i for i, _, _ in targets}
    if len(values) < len(names):  # Date, Time: up to the last of them, one token per slot
        regex = _one_token_per_slot(header, max(set(range(len(names))) - values) + 1)
        fit &= line.str.contains(regex) if regex else pl.lit(False)
    grp = grp.with_columns(fit.alias("_fit"))
    rows = grp.filter("_fit")
    if not rows.height or not targets:
        return None, grp
    first = rows.item(0, "line")
    for i, _, dtype in targets:  # a point in an integer slot: every row of it is NULL
        if dtype in (I64, pl.Int32) and re.search(r"[.,]\d+$", first[: lay.ends[i]]):
            return None, grp
    at = rows.get_column("_at").to_numpy().astype(np.int64)
    good, vals = _sysstat.right_aligned(data, at, lay, [i for i, _, _ in targets], comma)
    for v, (_, _, dtype) in zip(vals, targets, strict=True):  # beyond exact: polars reads it
        good &= ~(v >= (2**31 if dtype == pl.Int32 else 2**53))
    if not good.any():
        return None, grp
    stamp = {c: e for c, e in _columns(cut, names, comma).items() if c in ("_naive", "_sec")}
    typed = rows.filter(good).select("line_no", "header", **stamp)
    series = [
        pl.Series(c, v[good]) != 0 if t == pl.Boolean else pl.Series(c, v[good]).cast(t)
        for v, (_, c, t) in zip(vals, targets, strict=True)
    ]
    typed = typed.with_columns(series)
    if "gpu" not in typed.columns:
        typed = typed.with_columns(pl.lit(None, pl.Int32).alias("gpu"))
    return typed, pl.concat([grp.filter(~pl.col("_fit")), rows.filter(pl.Series(~good))])


def _targets(names: list[str]) -> list[tuple[int, str, pl.DataType]]:
    """Field, column and type of each value (every field but Date and Time): ``gpu``
    (Int32; the last one when repeated), each known metric (its gpu_dmon column; a
    repeated one as unknown), each unknown one as ``u<i>`` (Float64), in field order."""
    lower = [n.lower() for n in names]
    gpu = len(lower) - 1 - lower[::-1].index("gpu") if "gpu" in lower else -1
    out: list[tuple[int, str, pl.DataType]] = []
    for i, key in enumerate(lower):
        if i == gpu:
            out.append((i, "gpu", pl.Int32))
        elif key in ("date", "time", "gpu"):
            continue
        elif key in _METRICS and _METRICS[key][0] not in {c for _, c, _ in out}:
            out.append((i, _METRICS[key][0], _METRICS[key][1]))
        else:
            out.append((i, f"u{i}", F64))
    return out


def _columns(text: list[pl.Expr], names: list[str], comma: bool) -> dict[str, pl.Expr]:
    """The typed columns of fields ``text`` (one per header name, blanks not stripped):
    those of `_targets` (``gpu`` NULL when there is none), ``_naive`` (Datetime us,
    local; with Date and Time columns) and ``_sec`` (Float64 seconds of day; with Time
    and no Date)."""
    col = {n.lower(): text[i].str.strip_chars() for i, n in enumerate(names)}
    out: dict[str, pl.Expr] = {}
    if "date" in col and "time" in col:
        stamp = pl.concat_str(col["date"], col["time"], separator=" ")
        out["_naive"] = stamp.str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
    elif "time" in col:
        out["_sec"] = hms_seconds(col["time"])
    out["gpu"] = pl.lit(None, pl.Int32)
    for i, target, dtype in _targets(names):
        if dtype == pl.Int32:
            out[target] = text[i].str.strip_chars().cast(pl.Int32, strict=False)
        elif dtype == I64:
            out[target] = _read.int_number(text[i])
        else:
            value = _decimal(text[i], comma)
            out[target] = value != 0 if dtype == pl.Boolean else value
    return out


def _decimal(raw: pl.Expr, comma: bool) -> pl.Expr:
    """`_read.decimal_number`; without ``comma`` the rows have none to replace."""
    return _read.decimal_number(raw) if comma else raw.str.strip_chars().cast(F64, strict=False)


def _times(
    names: list[str], ctx: ParseContext, tz: str, day: DayCarry
) -> tuple[pl.Expr, pl.Expr, str | None]:
    """``ts`` and ``ts_source`` expressions over `_values` columns, and the group's note."""
    keys = {n.lower() for n in names}
    if "date" in keys and "time" in keys:
        return local_to_utc(pl.col("_naive"), tz), pl.lit("printed"), None
    if "time" in keys:
        ts = time_of_day_to_ts(pl.col("_sec"), ctx, tz, day)
        if ts is None:
            note = "dmon printed time without date (-o T) and no capture start: ts is NULL"
            return pl.lit(None, TS), pl.lit(None, pl.String), note
        note = "dmon printed time without date (-o T): date taken from capture start"
        return ts, pl.lit("derived-date"), note
    note = "dmon output has no Date/Time columns (no -o DT): ts is NULL"
    return pl.lit(None, TS), pl.lit(None, pl.String), note


def _others(frame: pl.DataFrame, names: list[str], units: list[str]) -> pl.DataFrame | None:
    """Long rows of the unknown metric columns (``u<i>``) in header, metric, line order."""
    unknown = [(int(c[1:]), c) for c in frame.columns if c.startswith("u") and c[1:].isdigit()]
    if not unknown:
        return None
    return pl.concat(
        frame.select(
            "ts",
            "gpu",
            pl.lit(names[i]).alias("metric"),
            pl.lit(units[i]).alias("unit"),
            pl.col(c).alias("value"),
            pl.col("header").alias("_hdr"),
            pl.lit(n).alias("_metric"),
            pl.col("line_no").alias("_line"),
        )
        for n, (i, c) in enumerate(unknown)
    )
