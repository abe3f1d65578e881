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

from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import base
from analyzer.parsers._nvbpf_time import hms_seconds, local_to_utc, resolve_tz, time_of_day_to_ts
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

_HEADER_RE = r"^#.*\bgpu\b"
_UNITS_RE = r"^#.*\bIdx\b"
_DATA_RE = r"^\s*\d"
_ERROR_RE = r"(?i)not supported on the device|failed to process command line|^(NVIDIA-SMI has failed|No devices were found|Unable to determine)"


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


def _tokens(expr: pl.Expr) -> pl.Expr:
    return expr.str.extract_all(r"\S+")


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one dmon output file (see the module docstring)."""
    cov = Coverage()
    df = base.read_lines(path).collect()
    cov.total = df.height
    if base.needs_utf8_repair(path):
        cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
    line = pl.col("line")
    df = df.with_columns(
        kind=pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.contains(_HEADER_RE))
        .then(pl.lit("names"))
        .when(line.str.contains(_UNITS_RE))
        .then(pl.lit("units"))
        .when(line.str.contains(_DATA_RE))
        .then(pl.lit("data"))
        .when(line.str.contains(_ERROR_RE))
        .then(pl.lit("error"))
        .when(line.str.starts_with("#"))
        .then(pl.lit("comment"))
        .otherwise(pl.lit("other"))
    ).with_columns(
        header=pl.when(pl.col("kind") == "names").then(pl.col("line_no")).forward_fill(),
        units=pl.when(pl.col("kind") == "units").then(pl.col("line_no")).forward_fill(),
    )
    counts = dict(df.group_by("kind").len().iter_rows())
    if counts.get("names", 0) == 0 and counts.get("error", 0) == 0 and counts.get("data", 0) > 0:
        raise ParseError(f"{path.name}: no '# gpu' header line: not nvidia-smi dmon output")
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("header", counts.get("names", 0) + counts.get("units", 0))
    cov.add_skipped("nvidia-smi error message (no data)", counts.get("error", 0))
    cov.add_skipped("comment or shell prompt, not dmon output", counts.get("comment", 0))
    cov.add_skipped("unrecognized line", counts.get("other", 0))

    data = df.filter(pl.col("kind") == "data")
    cov.add_skipped("data row before any header", data.filter(pl.col("header").is_null()).height)
    data = data.filter(pl.col("header").is_not_null())
    tz, tz_note = resolve_tz(ctx)
    frames, others, ts_notes = [], [], set()
    text = dict(
        df.filter(pl.col("kind").is_in(["names", "units"])).select("line_no", "line").iter_rows()
    )
    # dmon repeats its header every few rows: group by the header's text, not its line, so
    # a 24 h file is one group per layout instead of one per repetition.
    data = data.with_columns(
        _ht=pl.col("header").replace_strict(text, default=None, return_dtype=pl.String),
        _ut=pl.col("units").replace_strict(text, default=None, return_dtype=pl.String),
    )
    for (htext, utext), grp in data.group_by(["_ht", "_ut"], maintain_order=True):
        names = str(htext).lstrip("#").split()
        unit_list = str(utext).lstrip("#").split() if utext is not None else []
        if len(unit_list) != len(names):
            unit_list = [""] * len(names)
        grp = grp.with_columns(tok=_tokens(line))
        ok = grp.filter(pl.col("tok").list.len() == len(names))
        cov.add_skipped("column count differs from header", grp.height - ok.height)
        fields = ok.select(
            "line_no",
            "header",
            *(pl.col("tok").list.get(i).alias(f"c{i}") for i in range(len(names))),
        )
        frame, other, note = _typed(fields, names, unit_list, ctx, tz)
        if note:
            ts_notes.add(note)
        cov.parsed += frame.height
        frames.append(frame)
        if other is not None:
            others.append(other)
    if frames and tz_note and any(f.get_column("ts").is_not_null().any() for f in frames):
        cov.notes.append(tz_note)
    cov.notes.extend(sorted(ts_notes))
    dmon = (
        pl.concat(frames, how="diagonal_relaxed").sort("line_no", maintain_order=True)
        if frames
        else pl.DataFrame(schema=TABLES["gpu_dmon"].schema)
    )
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {
        "gpu_dmon": TABLES["gpu_dmon"].conform(dmon).collect()
    }
    if others:  # in the order of header blocks, then metric, then line
        other = pl.concat(others).sort(["_hdr", "_metric", "_line"], maintain_order=True)
        tables["gpu_dmon_other"] = TABLES["gpu_dmon_other"].conform(other).collect()
    return ParseResult(tables=tables, coverage=cov, meta={})


def _typed(
    fields: pl.DataFrame, names: list[str], units: list[str], ctx: ParseContext, tz: str
) -> tuple[pl.DataFrame, pl.DataFrame | None, str | None]:
    """One header block of string fields -> typed gpu_dmon frame (+ unknown metrics)."""
    col = {n.lower(): f"c{i}" for i, n in enumerate(names)}
    date_c, time_c = col.get("date"), col.get("time")
    note = None
    if date_c and time_c:
        naive = pl.concat_str(pl.col(date_c), pl.col(time_c), separator=" ").str.strptime(
            pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False
        )
        ts, src = local_to_utc(naive, tz), pl.lit("printed")
    elif time_c:
        ts = time_of_day_to_ts(hms_seconds(pl.col(time_c)), ctx, tz)
        src = pl.lit("derived-date")
        if ts is None:
            ts, src = pl.lit(None, TS), pl.lit(None, pl.String)
            note = "dmon printed time without date (-o T) and no capture start: ts is NULL"
        else:
            note = "dmon printed time without date (-o T): date taken from capture start"
    else:
        ts, src = pl.lit(None, TS), pl.lit(None, pl.String)
        note = "dmon output has no Date/Time columns (no -o DT): ts is NULL"
    exprs = [
        pl.col("line_no"),
        ts.alias("ts"),
        src.alias("ts_source"),
        pl.col(col["gpu"]).cast(pl.Int32, strict=False).alias("gpu")
        if "gpu" in col
        else pl.lit(None, pl.Int32).alias("gpu"),
    ]
    unknown = []
    done: set[str] = set()
    for i, name in enumerate(names):
        key = name.lower()
        if key in ("date", "time", "gpu"):
            continue
        raw = pl.col(f"c{i}")
        if key in _METRICS and _METRICS[key][0] not in done:  # a mangled header may repeat one
            done.add(_METRICS[key][0])
            target, dtype = _METRICS[key][0], _METRICS[key][1]
            if dtype == pl.Boolean:
                exprs.append((base.decimal_number(raw) != 0).alias(target))
            elif dtype == I64:
                exprs.append(base.int_number(raw).alias(target))
            else:
                exprs.append(base.decimal_number(raw).alias(target))
        else:
            unknown.append((i, name))
    typed = fields.select(exprs)
    other = None
    if unknown:
        other = pl.concat(
            fields.select(
                ts.alias("ts"),
                pl.col(col["gpu"]).cast(pl.Int32, strict=False).alias("gpu")
                if "gpu" in col
                else pl.lit(None, pl.Int32).alias("gpu"),
                pl.lit(name).alias("metric"),
                pl.lit(units[i]).alias("unit"),
                base.decimal_number(pl.col(f"c{i}")).alias("value"),
                pl.col("header").alias("_hdr"),
                pl.lit(n).alias("_metric"),
                pl.col("line_no").alias("_line"),
            )
            for n, (i, name) in enumerate(unknown)
        )
    return typed, other, note
