"""One block of ``nvidia-smi dmon`` output -> typed rows (private helper of ``nvidia_dmon``).

Lines are classified (blank, ``#`` names header, ``#`` units header, data, error text,
comment, other); each data row belongs to the last names and units headers above it
(carried over from earlier blocks in `Carry`), and rows are typed per distinct header
text (dmon repeats its header every few rows: one group per layout, not per repetition).

Two ways to the same values for a data row:

* **fast rows**: rows made only of blanks, digits, ``. - :`` whose tokens end at the same
  byte offsets as the group's first such row of that width (dmon right-aligns its
  fields), with one token per slot (token count checked): numpy finds them and polars'
  CSV reader types all of a group's fast rows of a block in one call, a ``;`` written
  into the blank after each field. For tokens of that alphabet (no blank inside, leading
  blanks only) the CSV reader's numbers equal ``cast(strict=False)`` of the token, which
  is what the regular typing reduces to for them (no blank to strip, no decimal comma):
  ``tests/parsers/test_nvidia_dmon.py`` checks that equality over all short tokens.
* every other data row: whitespace tokens (``\\S+``), then the regular typing
  (``base.decimal_number`` / ``base.int_number``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import base
from analyzer.parsers._nvbpf_time import DayCarry, hms_seconds, local_to_utc, time_of_day_to_ts
from analyzer.parsers.base import TS, ParseContext

F64, I64 = pl.Float64, pl.Int64
HEADER_RE = r"^#.*\bgpu\b"
UNITS_RE = r"^#.*\bIdx\b"
DATA_RE = r"^\s*\d"
ERROR_RE = r"(?i)not supported on the device|failed to process command line|^(NVIDIA-SMI has failed|No devices were found|Unable to determine)"
_TOKEN = r"[0-9.:-]+"


@dataclass
class Carry:
    """What one block hands to the next: the headers in effect and, per header text,
    the midnight roll-over of ``-o T`` times."""

    names: tuple[int, str] | None = None  # (line_no, text) of the last names header
    units: tuple[int, str] | None = None  # (line_no, text) of the last units header
    days: dict[tuple[str, str | None], DayCarry] = field(default_factory=dict)


def classify(lines: pl.DataFrame) -> pl.DataFrame:
    """``kind`` of every line (data lines are tested first: no other kind can match)."""
    line = pl.col("line")
    data = lines.filter(line.str.contains(DATA_RE)).with_columns(kind=pl.lit("data"))
    rest = lines.filter(~line.str.contains(DATA_RE)).with_columns(
        kind=pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.contains(HEADER_RE))
        .then(pl.lit("names"))
        .when(line.str.contains(UNITS_RE))
        .then(pl.lit("units"))
        .when(line.str.contains(ERROR_RE))
        .then(pl.lit("error"))
        .when(line.str.starts_with("#"))
        .then(pl.lit("comment"))
        .otherwise(pl.lit("other"))
    )
    return pl.concat([data, rest]).sort("line_no")


def headed(df: pl.DataFrame, carry: Carry) -> pl.DataFrame:
    """Data rows with ``header``/``units`` (line of the headers above, NULL when none)
    and their texts ``_ht``/``_ut``; advances ``carry`` past the block."""
    text: dict[int, str] = {}
    for k in ("names", "units"):
        prev = getattr(carry, k)
        if prev is not None:
            text[prev[0]] = prev[1]
    text |= dict(
        df.filter(pl.col("kind").is_in(["names", "units"])).select("line_no", "line").iter_rows()
    )
    seed = {k: (v[0] if v else None) for k, v in (("names", carry.names), ("units", carry.units))}
    df = df.with_columns(
        header=pl.when(pl.col("kind") == "names")
        .then(pl.col("line_no"))
        .forward_fill()
        .fill_null(pl.lit(seed["names"], pl.UInt32)),
        units=pl.when(pl.col("kind") == "units")
        .then(pl.col("line_no"))
        .forward_fill()
        .fill_null(pl.lit(seed["units"], pl.UInt32)),
    )
    if df.height:
        h, u = df.get_column("header")[-1], df.get_column("units")[-1]
        carry.names = (h, text[h]) if h is not None else None
        carry.units = (u, text[u]) if u is not None else None
    return df.filter(pl.col("kind") == "data").with_columns(
        _ht=pl.col("header").replace_strict(text, default=None, return_dtype=pl.String),
        _ut=pl.col("units").replace_strict(text, default=None, return_dtype=pl.String),
    )


def layout(data: bytes | None, n_lines: int) -> fast.Chunk | None:
    """The block as a `_sysstat_fast.Chunk` (line offsets by numpy) when its lines are
    exactly its bytes (no NUL or CR removed) and ASCII (the CSV reader gets the bytes with
    a ``#`` written over the first byte of every other line), else None (no fast rows)."""
    if data is None or not data.isascii() or b"\x00" in data or b"\r" in data:
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    unterminated = buf.size > 0 and (nl.size == 0 or nl[-1] != buf.size - 1)
    ends = np.append(nl, buf.size) if unterminated else nl
    if ends.size != n_lines:
        return None
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    return fast.Chunk(buf, 0, starts, ends - starts, bool(unterminated))


def column_types(names: list[str], metrics: dict) -> dict[str, pl.DataType]:
    """CSV schema of the fast path: the dtype each column ends up with."""
    first: set[str] = set()
    out: dict[str, pl.DataType] = {}
    for i, name in enumerate(names):
        key = name.lower()
        if key in ("date", "time"):
            out[f"c{i}"] = pl.String
        elif key == "gpu":
            out[f"c{i}"] = pl.Int32
        elif key in metrics and metrics[key][0] not in first and metrics[key][1] == I64:
            first.add(metrics[key][0])
            out[f"c{i}"] = I64
        else:
            if key in metrics:
                first.add(metrics[key][0])
            out[f"c{i}"] = F64
    return out


def fast_rows(
    chunk: fast.Chunk, grp: pl.DataFrame, idx: np.ndarray, k: int, schema: dict[str, pl.DataType]
) -> tuple[pl.DataFrame, np.ndarray]:
    """Typed fields (``c0``..) of the rows of ``grp`` (one header group of ``k`` columns;
    ``idx``: their line indexes in the block) that pass the fast checks, and their line
    indexes; the other rows are the caller's to tokenize.

    A row passes when it is ``k`` tokens of the fast alphabet separated by blanks (one
    regex), has the group's most common width, and each token of the width's first row
    ends where one of its own does (a solid byte followed by a blank or the line end):
    ``k`` tokens ending at those ``k`` places, so each slot between them holds exactly
    one token, right-aligned.
    """
    lens = chunk.lens
    shape = rf"^ *{_TOKEN}(?: +{_TOKEN}){{{k - 1}}} *$"
    ok = idx[grp.get_column("line").str.contains(shape).to_numpy()]
    if chunk.unterminated:
        ok = ok[ok != chunk.n - 1]
    if ok.size == 0:
        return pl.DataFrame(schema=schema), ok
    widths, counts = np.unique(lens[ok], return_counts=True)
    width = int(widths[np.argmax(counts)])
    rows = ok[lens[ok] == width]
    first = chunk.buf[chunk.starts[rows[0]] : chunk.starts[rows[0]] + width] != 32
    ends = np.flatnonzero(first & np.append(~first[1:], True))
    seps = [int(e) + 1 for e in ends if e + 1 < width]
    at_end = chunk.buf[chunk.starts[rows][:, None] + ends[None, :]] != 32
    rows = rows[at_end.all(axis=1) & fast.blank_at(chunk, rows, seps)]
    if rows.size == 0:
        return pl.DataFrame(schema=schema), rows
    full = dict(schema)
    if len(seps) == k:  # blanks after the last field: one more column, dropped
        full["_tail"] = pl.String
    frame, kept = fast.read_rows(chunk, rows, seps, full)
    return frame.select(list(schema)), kept


def slow_fields(grp: pl.DataFrame, k: int) -> tuple[pl.DataFrame, int]:
    """Whitespace tokens of rows as string fields ``c0``..; rows whose token count is not
    ``k`` are dropped (their number is returned)."""
    tok = grp.with_columns(tok=pl.col("line").str.extract_all(r"\S+"))
    ok = tok.filter(pl.col("tok").list.len() == k)
    fields = ok.select(
        "line_no", "header", *(pl.col("tok").list.get(i).alias(f"c{i}") for i in range(k))
    )
    return fields, grp.height - ok.height


def values(fields: pl.DataFrame, names: list[str], metrics: dict, typed: bool) -> pl.DataFrame:
    """Fields -> ``line_no``, ``header``, ``_date``/``_time`` (strings), ``gpu`` and one
    column per metric (known: its gpu_dmon column; unknown: ``u<i>``, Float64).
    ``typed``: the fields already have their final dtypes (fast path, padded strings)."""
    col = {n.lower(): f"c{i}" for i, n in enumerate(names)}
    exprs = [pl.col("line_no"), pl.col("header")]
    for key in ("date", "time"):
        if key in col:
            raw = pl.col(col[key])
            exprs.append((raw.str.strip_chars(" ") if typed else raw).alias(f"_{key}"))
    gpu = pl.col(col["gpu"]) if "gpu" in col else None
    exprs.append(
        gpu.cast(pl.Int32, strict=False).alias("gpu")
        if gpu is not None
        else pl.lit(None, pl.Int32).alias("gpu")
    )
    done: set[str] = set()
    for i, name in enumerate(names):
        key = name.lower()
        if key in ("date", "time", "gpu"):
            continue
        raw = pl.col(f"c{i}")
        if key in metrics and metrics[key][0] not in done:  # a mangled header may repeat one
            done.add(metrics[key][0])
            target, dtype = metrics[key][0], metrics[key][1]
            if dtype == pl.Boolean:
                num = raw if typed else base.decimal_number(raw)
                exprs.append((num != 0).alias(target))
            elif dtype == I64:
                exprs.append((raw if typed else base.int_number(raw)).alias(target))
            else:
                exprs.append((raw if typed else base.decimal_number(raw)).alias(target))
        else:
            exprs.append((raw if typed else base.decimal_number(raw)).alias(f"u{i}"))
    return fields.select(exprs)


def times(
    names: list[str], ctx: ParseContext, tz: str, day: DayCarry
) -> tuple[pl.Expr, pl.Expr, str | None]:
    """``ts`` and ``ts_source`` expressions over `values` columns, and the group's note."""
    keys = {n.lower() for n in names}
    if "date" in keys and "time" in keys:
        naive = pl.concat_str(pl.col("_date"), pl.col("_time"), separator=" ").str.strptime(
            pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False
        )
        return local_to_utc(naive, tz), pl.lit("printed"), None
    if "time" in keys:
        ts = time_of_day_to_ts(hms_seconds(pl.col("_time")), ctx, tz, day)
        if ts is None:
            note = "dmon printed time without date (-o T) and no capture start: ts is NULL"
            return pl.lit(None, TS), pl.lit(None, pl.String), note
        note = "dmon printed time without date (-o T): date taken from capture start"
        return ts, pl.lit("derived-date"), note
    note = "dmon output has no Date/Time columns (no -o DT): ts is NULL"
    return pl.lit(None, TS), pl.lit(None, pl.String), note


def others(frame: pl.DataFrame, names: list[str], units: list[str]) -> pl.DataFrame | None:
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
