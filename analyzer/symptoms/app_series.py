"""``analyze --app-series FILE``: a symptom series the user already has (a load test's
per-request latencies, an exported Grafana panel, a training log turned into CSV).

Formats: CSV (``.csv``, ``.tsv`` tab-separated, else a first character other than
``{``) with a header row, or JSONL (``.jsonl``/``.ndjson``/``.json``, or lines starting
with ``{``): one JSON object per line. Read with polars; every cell first as text, then
one cast step. Columns:

- **time** (required): the first column named ``ts``, ``time``, ``timestamp``,
  ``datetime``, ``@timestamp``, ``_time``, ``date``, ``t`` or ``epoch`` (any case), else
  one ending in ``_ts``/``_time``/``timestamp``. Numbers are epoch time, the unit from
  the magnitude of their median (< 1e11 s, < 1e14 ms, < 1e17 µs, else ns). Text is ISO
  8601 (``T`` or a space between date and time, optional fraction) with a zone
  (``Z``, ``UTC``, ``+01:00``, ``+0100``). A time without a zone is an error unless
  ``--tz ZONE`` (an IANA name, or ``UTC``) says where it was written; with ``--tz``, a
  local time inside a DST gap is skipped, one in a fold takes the earlier instant.
- **name** (optional, k6-style long files): a text column named ``metric_name``,
  ``metric``, ``series`` or ``name``; its value names the series of the record.
- **values**: every other column whose non-empty cells are mostly (> 50 %) numbers,
  except the codes and ids of `NOT_VALUES` (``status``, ``code``, ``id``, ``step``…);
  text columns are ignored (listed in the file's ``collectors`` notes).

Every record is accounted for (`analyzer.parsers.base.Coverage`, the file's row in
``collectors``, counted in records, not lines): the CSV header is structure, a blank
record is structure, and a record is skipped with its reason when it is not a JSON
object, has no time, a time that does not parse, a time in a DST gap, a time outside
1970–2099, or no numeric value. The file is opened by its exact path (never a glob).

Table ``app_series`` (`analyzer.symptoms.schema.APP_SERIES`): one row per value (``ts``,
``file``, ``series``, ``value``, ``record_no``). How a series becomes a symptom (units,
per-request records → p50/p99 per second) is `analyzer.symptoms.series`.

Sample input (CSV, per-request)::

    timestamp,latency_ms,status
    2026-11-29T14:00:00.120Z,182,200
    2026-11-29T14:00:00.480Z,175,200
    1796176800.9,2410,200
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analyzer.errors import HindsightError
from analyzer.parse_stage import coverage_fields
from analyzer.parsers._read import read_lines
from analyzer.parsers._sysstat import local_to_utc, resolve_tz
from analyzer.parsers.base import TS, Coverage
from analyzer.store import TS_RANGE

TIME_NAMES = ("ts", "time", "timestamp", "datetime", "@timestamp", "_time", "date", "t", "epoch")
TIME_SUFFIXES = ("_ts", "_time", "timestamp")
NAME_COLUMNS = ("metric_name", "metric", "series", "name")
#: numeric columns that are not measurements (codes, ids, counters of records)
NOT_VALUES = frozenset(
    [
        "status",
        "status_code",
        "code",
        "http_status",
        "response_code",
        "id",
        "request_id",
        "pid",
        "tid",
        "port",
        "step",
        "iteration",
        "line",
        "line_no",
        "seq",
        "vus",
    ]
)
NUMERIC_SHARE = 0.5  # a value column: more than half of its non-empty cells are numbers
KEY_SAMPLE = 1000  # JSONL: keys are taken from the first objects


class SeriesError(HindsightError):
    """An --app-series file cannot be used at all (exit 2, one line)."""


@dataclass
class AppSeries:
    """One file read: its rows for ``app_series``, its coverage, its format."""

    path: Path
    frame: pl.DataFrame
    coverage: Coverage
    tool: str


def read(path: Path, tz: str | None = None) -> AppSeries:
    """Read ``path`` (see the module docstring); SeriesError when it cannot be used."""
    zone = _zone(tz)
    if not path.is_file():
        raise SeriesError(f"--app-series {path}: no such file")
    cov = Coverage()
    try:
        tool = _format(path)
        raw = _read_jsonl(path, cov) if tool == "jsonl" else _read_csv(path, tool, cov)
    except (OSError, pl.exceptions.PolarsError) as e:
        raise SeriesError(f"--app-series {path}: cannot read it: {str(e)[:200]}") from e
    time_col = _time_column([c for c in raw.columns if not c.startswith("_")], path)
    name_col = next((c for c in raw.columns if c.lower() in NAME_COLUMNS and c != time_col), None)
    values = _value_columns(raw, {time_col, name_col}, path, cov)
    frame = pl.concat([raw, _times(raw[time_col], zone, path, time_col, cov)], how="horizontal")
    num = [pl.col(c).str.strip_chars().cast(pl.Float64, strict=False) for c in values]
    frame = frame.with_columns([e.alias(c) for e, c in zip(num, values, strict=True)])
    lo, hi = TS_RANGE
    finite = pl.any_horizontal([pl.col(c).is_finite().fill_null(False) for c in values])
    reason = (
        pl.when(pl.col("_bad").is_not_null())
        .then(pl.col("_bad"))
        .when(pl.col(time_col).is_null())
        .then(pl.lit("no time"))
        .when(pl.col("_ts").is_null() & pl.col("_gap"))
        .then(pl.lit(f"time in a DST gap of {zone}"))
        .when(pl.col("_ts").is_null())
        .then(pl.lit("time unparsable"))
        .when((pl.col("_ts") < lo) | (pl.col("_ts") >= hi))
        .then(pl.lit("time outside 1970-01-01..2099-12-31 UTC"))
        .when(~finite)
        .then(pl.lit("no numeric value"))
    )
    frame = frame.filter(~pl.col("_blank")).with_columns(_reason=reason)
    for why, n in frame.group_by("_reason").len().filter(pl.col("_reason").is_not_null()).rows():
        cov.add_skipped(why, n)
    good = frame.filter(pl.col("_reason").is_null())
    cov.parsed = good.height
    cov.check()
    return AppSeries(path, _long(good, values, name_col, str(path)), cov, tool)


def collectors_row(s: AppSeries) -> dict:
    """The file's row of ``collectors`` (status as for bundle files)."""
    cov = s.coverage
    status = "parsed" if not cov.n_skipped else "partial"
    if cov.parsed == 0:
        status = "failed" if cov.n_skipped else "empty"
    return {
        "file": str(s.path),
        "collector": "app_series",
        "tool": s.tool,
        "status": status,
        "bytes": s.path.stat().st_size,
        **coverage_fields(cov),
        "reason": None if cov.parsed else "no record could be used",
        "tables": "app_series" if s.frame.height else None,
    }


def _zone(tz: str | None) -> str | None:
    if tz is None:
        return None
    zone, note = resolve_tz(tz)
    if zone is None:
        raise SeriesError(f"--tz {tz}: {note or 'unknown time zone'}")
    return zone


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".tsv":
        return "tsv"
    if suffix == ".csv":
        return "csv"
    with open(path, "rb") as f:
        head = f.read(4096).lstrip()
    return "jsonl" if head.startswith(b"{") else "csv"


def _read_csv(path: Path, tool: str, cov: Coverage) -> pl.DataFrame:
    """Every cell as text, ``_rec`` (record number), ``_blank``, ``_bad``, ``_gap``."""
    with open(path, "rb") as f:  # the exact path: polars never globs an open file
        df = pl.read_csv(
            f,
            infer_schema=False,
            separator="\t" if tool == "tsv" else ",",
            truncate_ragged_lines=True,
            encoding="utf8-lossy",
        )
    cov.total = df.height + 1
    cov.add_structure("header", 1)
    blank = pl.all_horizontal([pl.col(c).is_null() for c in df.columns])
    df = df.with_row_index("_rec", offset=1).with_columns(_blank=blank)
    cov.add_structure("blank record", int(df["_blank"].sum()))
    return df.with_columns(_bad=pl.lit(None, pl.String))


def _read_jsonl(path: Path, cov: Coverage) -> pl.DataFrame:
    """JSON objects, one per line: their keys as text columns (the keys of the first
    `KEY_SAMPLE` objects), with ``_rec``, ``_blank``, ``_bad`` (not an object)."""
    lines = read_lines(path).collect()
    cov.total = lines.height
    line = pl.col("line").str.strip_chars()
    lines = lines.with_columns(_blank=line == "")
    cov.add_structure("blank line", int(lines["_blank"].sum()))
    obj = line.str.starts_with("{") & line.str.json_path_match("$").is_not_null()
    lines = lines.with_columns(_obj=obj)
    sample = lines.filter(pl.col("_obj")).head(KEY_SAMPLE)["line"]
    keys: list[str] = []
    if sample.len():
        decoded = sample.str.json_decode(infer_schema_length=None)
        if isinstance(decoded.dtype, pl.Struct):
            keys = [f.name for f in decoded.dtype.fields]
    cols = [
        pl.col("line").str.json_path_match("$['" + k.replace("'", "\\'") + "']").alias(k)
        for k in keys
        if not k.startswith("_")
    ]
    bad = pl.when(~pl.col("_obj") & ~pl.col("_blank")).then(pl.lit("not a JSON object"))
    return lines.select(pl.col("line_no").cast(pl.Int64).alias("_rec"), "_blank", *cols, _bad=bad)


def _time_column(columns: list[str], path: Path) -> str:
    by_lower = {c.lower(): c for c in reversed(columns)}
    for name in TIME_NAMES:
        if name in by_lower:
            return by_lower[name]
    for c in columns:
        if c.lower().endswith(TIME_SUFFIXES):
            return c
    shown = ", ".join(columns[:10]) or "none"
    raise SeriesError(
        f"--app-series {path}: no time column (name one ts, time or timestamp; columns: {shown})"
    )


def _value_columns(
    raw: pl.DataFrame, skip: set[str | None], path: Path, cov: Coverage
) -> list[str]:
    """Columns whose non-empty cells are mostly numbers; a note lists the others."""
    cols = [
        c
        for c in raw.columns
        if c not in skip and not c.startswith("_") and c.lower() not in NOT_VALUES
    ]
    if not cols:
        raise SeriesError(f"--app-series {path}: no value column besides the time")
    cell = [pl.col(c).str.strip_chars() for c in cols]
    share = raw.select(
        [
            (
                e.cast(pl.Float64, strict=False).is_not_null().sum() / e.is_not_null().sum().clip(1)
            ).alias(c)
            for e, c in zip(cell, cols, strict=True)
        ]
    ).row(0)
    values = [c for c, s in zip(cols, share, strict=True) if s > NUMERIC_SHARE]
    if not values:
        raise SeriesError(
            f"--app-series {path}: no numeric value column (columns: {', '.join(cols[:10])})"
        )
    if others := [c for c in cols if c not in values]:
        cov.notes.append(f"not numeric, ignored: {', '.join(others[:20])}")
    return values


_OFFSET = re.compile(r"[+-]\d\d:?\d\d$").pattern


def _times(
    cells: pl.Series, zone: str | None, path: Path, name: str, cov: Coverage
) -> pl.DataFrame:
    """``_ts``: UTC datetimes of the time column, a number as epoch time and text as ISO
    8601 (NULL where it does not parse; see the module docstring); ``_gap``: a local time
    that does not exist in ``zone`` (DST gap)."""
    s = cells.str.strip_chars()
    num = s.cast(pl.Float64, strict=False)
    us = 1e6
    if num.is_not_null().any():
        mag = float(num.abs().median())  # type: ignore[arg-type]
        unit, us = next((u, k) for lim, u, k in _EPOCH_UNITS if mag < lim)
        cov.notes.append(f"time column {name!r}: numbers read as epoch {unit}")
    iso = s.str.replace(r"^(\d{4}-\d\d-\d\d)[ T]", "${1}T").str.replace(
        r"\s*(?:Z|z|UTC|GMT)$", "+00:00"
    )
    frame = pl.DataFrame({"iso": iso, "num": num}).with_columns(
        aware=pl.col("iso").str.contains(_OFFSET),
        e=(pl.col("num") * us).round(0).cast(pl.Int64, strict=False).cast(TS),
    )
    frame = frame.with_columns(
        a=pl.col("iso").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", time_zone="UTC", strict=False),
        n=pl.when(~pl.col("aware") & pl.col("num").is_null()).then(
            pl.col("iso").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False)
        ),
    )
    naive = frame.filter(pl.col("n").is_not_null())
    if naive.height and zone is None:
        raise SeriesError(
            f"--app-series {path}: column {name!r} has times without a zone (e.g. "
            f"{naive['iso'][0]!r}): write the offset (Z, +01:00) or give --tz ZONE"
        )
    if naive.height:
        cov.notes.append(f"time column {name!r}: times without a zone read in {zone}")
    local = local_to_utc(pl.col("n"), zone)
    return frame.select(
        _ts=pl.coalesce(pl.col("e"), pl.when(pl.col("aware")).then(pl.col("a")).otherwise(local)),
        _gap=pl.col("n").is_not_null() & local.is_null(),
    )


_EPOCH_UNITS = ((1e11, "seconds", 1e6), (1e14, "milliseconds", 1e3), (1e17, "microseconds", 1.0), (float("inf"), "nanoseconds", 1e-3))  # fmt: skip


def _long(good: pl.DataFrame, values: list[str], name_col: str | None, file: str) -> pl.DataFrame:
    """One row per finite value: ts, file, series, value, record_no."""
    keep = ["_rec", "_ts", *([name_col] if name_col else []), *values]
    long = good.select(keep).unpivot(index=[c for c in keep if c not in values], on=values)
    series = pl.col("variable")
    if name_col:
        named = pl.col(name_col).fill_null("")
        series = named if len(values) == 1 else pl.concat_str([named, pl.lit("."), series])
    return long.filter(pl.col("value").is_finite().fill_null(False)).select(
        ts=pl.col("_ts"),
        file=pl.lit(file),
        series=series,
        value=pl.col("value"),
        record_no=pl.col("_rec").cast(pl.Int64),
    )
