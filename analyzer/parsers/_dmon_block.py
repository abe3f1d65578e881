"""One block of ``nvidia-smi dmon`` output -> typed rows (private helper of ``nvidia_dmon``).

Lines are classified (blank, ``#`` names header, ``#`` units header, data, error text,
comment, other); each data row belongs to the last names and units headers above it
(carried over from earlier blocks in `Carry`), and rows are typed per distinct header
text (dmon repeats its header every few rows: one group per layout, not per repetition).

Two ways to the same values for a data row:

* **fast rows** (`_dmon_fast`): rows whose fields are right-aligned in the slots of the
  header group's layout and have the exact shapes listed there are typed from their
  bytes with numpy (the values the regular typing gives those shapes).
* every other data row: whitespace tokens (``\\S+``), then the regular typing
  (``_read.decimal_number`` / ``_read.int_number``, `times`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzer.parsers import _read
from analyzer.parsers._nvbpf_time import DayCarry, hms_seconds, local_to_utc, time_of_day_to_ts
from analyzer.parsers.base import TS, ParseContext

F64, I64 = pl.Float64, pl.Int64
HEADER_RE = r"^#.*\bgpu\b"
UNITS_RE = r"^#.*\bIdx\b"
DATA_RE = r"^\s*\d"
ERROR_RE = r"(?i)not supported on the device|failed to process command line|^(NVIDIA-SMI has failed|No devices were found|Unable to determine)"


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


def slow_fields(grp: pl.DataFrame, k: int) -> tuple[pl.DataFrame, int]:
    """Whitespace tokens of rows as string fields ``c0``..; rows whose token count is not
    ``k`` are dropped (their number is returned)."""
    tok = grp.with_columns(tok=pl.col("line").str.extract_all(r"\S+"))
    ok = tok.filter(pl.col("tok").list.len() == k)
    fields = ok.select(
        "line_no", "header", *(pl.col("tok").list.get(i).alias(f"c{i}") for i in range(k))
    )
    return fields, grp.height - ok.height


def values(fields: pl.DataFrame, names: list[str], metrics: dict) -> pl.DataFrame:
    """Token fields -> ``line_no``, ``header``, ``gpu``, one column per metric (known: its
    gpu_dmon column; unknown or repeated: ``u<i>``, Float64), ``_naive`` (Datetime us,
    local; with Date and Time columns) and ``_sec`` (Float64 seconds of day; with Time)."""
    col = {n.lower(): f"c{i}" for i, n in enumerate(names)}
    exprs = [pl.col("line_no"), pl.col("header")]
    if "date" in col and "time" in col:
        stamp = pl.concat_str(pl.col(col["date"]), pl.col(col["time"]), separator=" ")
        naive = stamp.str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
        exprs.append(naive.alias("_naive"))
    if "time" in col:
        exprs.append(hms_seconds(pl.col(col["time"])).alias("_sec"))
    exprs.append(
        pl.col(col["gpu"]).cast(pl.Int32, strict=False).alias("gpu")
        if "gpu" in col
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
                exprs.append((_read.decimal_number(raw) != 0).alias(target))
            elif dtype == I64:
                exprs.append(_read.int_number(raw).alias(target))
            else:
                exprs.append(_read.decimal_number(raw).alias(target))
        else:
            exprs.append(_read.decimal_number(raw).alias(f"u{i}"))
    return fields.select(exprs)


def times(
    names: list[str], ctx: ParseContext, tz: str, day: DayCarry
) -> tuple[pl.Expr, pl.Expr, str | None]:
    """``ts`` and ``ts_source`` expressions over `values` columns, and the group's note."""
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
