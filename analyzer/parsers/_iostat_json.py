"""``iostat -o JSON`` (sysstat 11.5+): read line by line, never as one document.

sysstat writes one ``{"disk_device": ...}`` record per line, the ``"avg-cpu": {...}`` object
on one line and ``"timestamp"`` (``-t`` only) on its own line, so each line is tokenized with
polars regexes like the text format, block by block (:class:`._blocks.Blocks`); a
statistics element (a report) starts at a line that is just ``{`` after the
``"statistics"`` key (the count of both carries from block to block). Keys are mapped by
name exactly like the text headers (``util`` = ``%util``, ``rrqm`` = ``%rrqm``,
``MB_read/s`` scaled to kB: the caller's ``column``). What the whole file decides is taken
from its first records: the columns are the numeric keys of the first 200 disk records,
and a record with the key order of the first complete one is read by one regex (any
other by one regex per key, same values).

Known upstream quirk, kept as printed: sysstat 12.2.0's JSON reports ``rkB/s``/``wkB/s``/
``dkB/s`` twice the text values (sectors, not kB); 12.6.1 prints them correctly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _read, base
from analyzer.parsers import _sysstat as s

#: JSON key -> (column, factor to kB, is_int), None for a key that is no column.
Column = Callable[[str], tuple[str, float, bool] | None]

_NUM = r'"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)'
_DISK = r'^\s*\{\s*"disk_device"\s*:'
_COMPLETE = r"\}\s*,?\s*$"
_DEVICE = r'"disk_device"\s*:\s*"([^"]*)"'
_KEY_RECORDS = 200  # disk records whose keys make the columns


@dataclass
class Json:
    """What a file gave: device rows (``report``, ``device``, ``is_group``, columns) and
    avg-cpu rows in file order, stamps (``report``, ``ts``), the number of reports and
    of stamp lines, whether invalid UTF-8 was replaced, and the head's facts."""

    dev: list[pl.DataFrame] = field(default_factory=list)
    cpu: list[pl.DataFrame] = field(default_factory=list)
    stamps: list[pl.DataFrame] = field(default_factory=list)
    reports: int = 0
    stamp_lines: int = 0
    repaired: bool = False
    meta: dict[str, object] = field(default_factory=dict)


def _field(key: str) -> pl.Expr:
    return pl.col("line").str.extract('"' + re.escape(key) + _NUM).cast(pl.Float64, strict=False)


def _keys(lines: list[str]) -> list[str]:
    """The numeric keys of disk records."""
    return sorted(set(re.findall(r'"([^"]+)"\s*:\s*-?\d', "\n".join(lines))))


def _order(line: str | None) -> list[str]:
    """The keys of a disk record, in its order."""
    return re.findall(r'"([^"]+)"\s*:', line) if line is not None else []


def _kind() -> pl.Expr:
    """The kind of each JSON line (``disk``, ``cpu``, ``ts``, ``open``, ``stats``,
    ``blank``, ``json``, ``other``)."""
    line = pl.col("line")
    return (
        pl.when(line.str.contains(_DISK))
        .then(pl.lit("disk"))
        .when(line.str.contains(r'^\s*"avg-cpu"\s*:'))
        .then(pl.lit("cpu"))
        .when(line.str.contains(r'^\s*"timestamp"\s*:'))
        .then(pl.lit("ts"))
        .when(line.str.strip_chars() == "{")
        .then(pl.lit("open"))
        .when(line.str.contains(r'^\s*"statistics"\s*:'))
        .then(pl.lit("stats"))
        .when(line.str.contains(r"^\s*$"))
        .then(pl.lit("blank"))
        .when(line.str.contains(r'^[\s\[\]{}(),]*("[^"]+"\s*:.*)?$'))
        .then(pl.lit("json"))
        .otherwise(pl.lit("other"))
    )


def _casts(keys: list[str], column: Column, value: Callable[[str], pl.Expr]) -> list[pl.Expr]:
    """Typed device columns of the keys ``keys`` (``value``: a key's Float64 text)."""
    casts = []
    for k in keys:
        col = column(k)
        if col:
            name, factor, is_int = col
            v = value(k) * factor
            casts.append((v.round(0).cast(pl.Int64) if is_int else v).alias(name))
    return casts


def _disk_rows(
    good: pl.DataFrame, keys: list[str], order: list[str], column: Column
) -> pl.DataFrame:
    """Typed complete disk records. Records with the key order ``order`` (the file's first
    complete record's) are read by one regex, any other by one regex per key."""
    device = pl.col("line").str.extract(_DEVICE)
    slow = [
        "report",
        device.str.strip_chars(" ").alias("device"),
        device.str.starts_with(" ").alias("is_group"),
        *_casts(keys, column, _field),
    ]
    known = {k for k in keys if column(k)}
    if not (order and order[0] == "disk_device" and known <= set(order[1:])):
        return good.select(slow)
    one = r'^\s*\{\s*"disk_device"\s*:\s*"([^"]*)"'
    for k in order[1:]:
        one += r'\s*,\s*"' + re.escape(k) + _NUM
    one += r"\s*\}\s*,?\s*$"
    split = good.with_columns(pl.col("line").str.extract_groups(one).alias("_g"))
    split = split.with_columns(pl.col("_g").struct.field("1").is_not_null().alias("_one"))
    group = {k: str(i + 2) for i, k in enumerate(order[1:])}
    g = pl.col("_g").struct.field
    fast = split.filter(pl.col("_one")).select(
        "line_no",
        "report",
        g("1").str.strip_chars(" ").alias("device"),
        g("1").str.starts_with(" ").alias("is_group"),
        *_casts(keys, column, lambda k: g(group[k]).cast(pl.Float64, strict=False)),
    )
    rest = split.filter(~pl.col("_one"))
    if rest.height == 0:
        return fast.drop("line_no")
    rest = rest.select("line_no", *slow)
    return pl.concat([fast, rest]).sort("line_no").drop("line_no")


def _stamp(date_text: str) -> pl.Expr:
    """The ``timestamp`` line's text, with the file's date before a bare time of day."""
    stamp = pl.col("line").str.extract(r'"timestamp"\s*:\s*"([^"]*)"')
    return (
        pl.when(stamp.str.contains(r"^\d{1,2}:\d{2}"))
        .then(pl.lit(date_text + " ") + stamp)
        .otherwise(stamp)
    )


def _head_value(head: str, key: str) -> str | None:
    m = re.search(r'"' + re.escape(key) + r'"\s*:\s*"?([^",\n]*)"?', head)
    return m[1] if m else None


def _meta(head: str, date_text: str) -> dict[str, object]:
    """Facts of the file's head for ``ParseResult.meta``."""
    cpus_n = _head_value(head, "number-of-cpus")
    return {
        "host": _head_value(head, "nodename"),
        "kernel": _head_value(head, "release"),
        "cpus": int(cpus_n) if cpus_n and cpus_n.strip().isdigit() else None,
        "date": d.isoformat() if (d := s.parse_date(date_text)) else None,
    }


def read(
    path: Path,
    ctx: base.ParseContext,
    cov: base.Coverage,
    column: Column,
    cpu_columns: Mapping[str, str],
) -> Json:
    """Read an iostat JSON file: its rows and stamps into a `Json`, its lines into ``cov``.

    ``column`` maps a disk record's key to its column, ``cpu_columns`` an avg-cpu key."""
    head = _read.read_head(path)
    date_text = _head_value(head, "date") or ""
    zone = s.resolve_tz(ctx.tz)[0]
    out = Json(meta=_meta(head, date_text))
    line, kind = pl.col("line"), pl.col("kind")
    complete = line.str.contains(_COMPLETE)
    good = kind.eq("disk") & complete & line.str.extract(_DEVICE).is_not_null()
    stats = 0
    counts: dict[str, int] = {}
    first: list[str] = []  # the file's first disk records
    order: list[str] | None = None
    pending: list[pl.DataFrame] = []
    blocks = _blocks.Blocks(path)
    for block in blocks:
        df = block.lines.with_columns(_kind().alias("kind"))
        seen = (kind.eq("stats").cum_sum() + stats) > 0
        n = (kind.eq("open") & seen).cast(pl.Int32).cum_sum()
        df = df.with_columns((n - 1 + out.reports).alias("report"))
        cov.total += df.height
        for k, c in df.get_column("kind").value_counts().iter_rows():
            counts[k] = counts.get(k, 0) + c
        stats = counts.get("stats", 0)
        out.reports = int(df.get_column("report")[-1]) + 1
        if len(first) < _KEY_RECORDS:
            first += (
                df.filter(kind == "disk")
                .get_column("line")
                .head(_KEY_RECORDS - len(first))
                .to_list()
            )
        if order is None and (one := df.filter(good).get_column("line").head(1)).len():
            order = _order(one[0])
        pending.append(df)
        if (len(first) >= _KEY_RECORDS and order is not None) or block.last:
            keys = _keys(first)
            for df in pending:
                _typed(df, keys, order or [], column, cpu_columns, date_text, zone, good, out, cov)
            pending = []
    out.repaired = blocks.repaired
    if counts.get("disk", 0) + counts.get("cpu", 0) + counts.get("stats", 0) == 0 and (
        cov.total - counts.get("blank", 0)
    ):
        raise ParseError(f"{ctx.file_name or path.name}: no iostat JSON statistics found")
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("json", sum(counts.get(k, 0) for k in ("json", "open", "stats")))
    cov.add_structure("timestamp", counts.get("ts", 0))
    cov.add_skipped("not JSON", counts.get("other", 0))
    return out


def _typed(
    df: pl.DataFrame,
    keys: list[str],
    order: list[str],
    column: Column,
    cpu_columns: Mapping[str, str],
    date_text: str,
    zone: str | None,
    good: pl.Expr,
    out: Json,
    cov: base.Coverage,
) -> None:
    """One block's disk records, avg-cpu records and stamps into ``out``."""
    kind = pl.col("kind")
    disks = df.filter(kind == "disk").height
    dev = _disk_rows(df.filter(good), keys, order, column)
    cov.add_skipped("malformed JSON disk record", disks - dev.height)
    cpus = df.filter(kind == "cpu")
    cpu = cpus.filter(pl.col("line").str.contains(_COMPLETE)).select(
        "report", *[_field(k).alias(v) for k, v in cpu_columns.items()]
    )
    cov.add_skipped("malformed JSON avg-cpu record", cpus.height - cpu.height)
    cov.parsed += dev.height + cpu.height
    if dev.height:
        out.dev.append(dev)
    if cpu.height:
        out.cpu.append(cpu)
    ts = df.filter(kind == "ts")
    if ts.height:
        out.stamp_lines += ts.height
        out.stamps.append(ts.select("report", s.stamp_to_utc(_stamp(date_text), zone).alias("ts")))
