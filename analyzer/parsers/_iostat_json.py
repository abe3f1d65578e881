"""``iostat -o JSON`` (sysstat 11.5+): read line by line, never as one document.

sysstat writes one ``{"disk_device": ...}`` record per line, the ``"avg-cpu": {...}`` object
on one line and ``"timestamp"`` (``-t`` only) on its own line, so each line is tokenized with
polars regexes like the text format; a statistics element (a report) starts at a line that
is just ``{`` after the ``"statistics"`` key. Keys are mapped by name exactly like the text
headers (``util`` = ``%util``, ``rrqm`` = ``%rrqm``, ``MB_read/s`` scaled to kB).

Known upstream quirk, kept as printed: sysstat 12.2.0's JSON reports ``rkB/s``/``wkB/s``/
``dkB/s`` twice the text values (sectors, not kB); 12.6.1 prints them correctly.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _read, base
from analyzer.parsers import _sysstat as s

_NUM = r'"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)'


def _field(key: str) -> pl.Expr:
    return pl.col("line").str.extract('"' + re.escape(key) + _NUM).cast(pl.Float64, strict=False)


_SLICE_ROWS = 1 << 18  # disk records typed per step: bounds the transient string columns


def _keys(lines: pl.Series) -> list[str]:
    """The numeric keys of disk records (the file's first 200 are looked at)."""
    return sorted(set(re.findall(r'"([^"]+)"\s*:\s*-?\d', "\n".join(lines))))


def _order(line: str | None) -> list[str]:
    """The keys of a disk record, in its order."""
    return re.findall(r'"([^"]+)"\s*:', line) if line is not None else []


def _disk_rows(
    disks: pl.DataFrame,
    keys: list[str],
    device: pl.Expr,
    casts: list[pl.Expr],
    order: list[str] | None = None,
) -> pl.DataFrame:
    """Typed disk records. Records with sysstat's own key order (``order``: the file's
    first good record's, by default that of ``disks``) are read by one regex; any other
    record by one regex per key (same values)."""
    if order is None:
        order = _order(disks["line"].head(1).to_list()[0] if disks.height else None)
    if disks.height > _SLICE_ROWS:
        parts = [
            _disk_part(part, keys, device, casts, order) for part in disks.iter_slices(_SLICE_ROWS)
        ]
        return pl.concat(parts, how="vertical_relaxed")
    return _disk_part(disks, keys, device, casts, order)


def _disk_part(
    disks: pl.DataFrame,
    keys: list[str],
    device: pl.Expr,
    casts: list[pl.Expr],
    order: list[str],
) -> pl.DataFrame:
    """`_disk_rows` for one slice of records; ``order`` is the first record's key order."""
    known = {k for k in keys if c.device_column(k)}
    one = None
    if order and order[0] == "disk_device" and known <= set(order[1:]):
        body = r'^\s*\{\s*"disk_device"\s*:\s*"([^"]*)"'
        for k in order[1:]:
            body += r'\s*,\s*"' + re.escape(k) + _NUM
        one = body + r"\s*\}\s*,?\s*$"
    slow_cols = [
        "line_no",
        "report",
        device.str.strip_chars(" ").alias("device"),
        device.str.starts_with(" ").alias("is_group"),
        *casts,
    ]
    if one is None:
        return disks.select(slow_cols)
    g = pl.col("line").str.extract_groups(one)
    split = disks.with_columns(g.alias("_g")).with_columns(
        pl.col("_g").struct.field("1").is_not_null().alias("_one")
    )
    cols = {k: str(i + 2) for i, k in enumerate(order[1:])}
    fast_casts = []
    for k in keys:
        col = c.device_column(k)
        if col:
            name, factor, is_int = col
            v = pl.col("_g").struct.field(cols[k]).cast(pl.Float64, strict=False) * factor
            fast_casts.append((v.round(0).cast(pl.Int64) if is_int else v).alias(name))
    dev = pl.col("_g").struct.field("1")
    fast = split.filter(pl.col("_one")).select(
        "line_no",
        "report",
        dev.str.strip_chars(" ").alias("device"),
        dev.str.starts_with(" ").alias("is_group"),
        *fast_casts,
    )
    rest = split.filter(~pl.col("_one"))
    if rest.height == 0:
        return fast
    return pl.concat([fast, rest.select(slow_cols)]).sort("line_no")


_DISK = r'^\s*\{\s*"disk_device"\s*:'
_COMPLETE = r"\}\s*,?\s*$"
_DEVICE = r'"disk_device"\s*:\s*"([^"]*)"'


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


def _casts(keys: list[str]) -> list[pl.Expr]:
    """Typed device columns from the JSON keys ``keys`` (one regex per key)."""
    casts = []
    for k in keys:
        col = c.device_column(k)
        if col:
            name, factor, is_int = col
            v = _field(k) * factor
            casts.append((v.round(0).cast(pl.Int64) if is_int else v).alias(name))
    return casts


def _stamp(date_text: str) -> pl.Expr:
    """The ``timestamp`` line's text, with the file's date before a bare time of day."""
    stamp = pl.col("line").str.extract(r'"timestamp"\s*:\s*"([^"]*)"')
    return (
        pl.when(stamp.str.contains(r"^\d{1,2}:\d{2}"))
        .then(pl.lit(date_text + " ") + stamp)
        .otherwise(stamp)
    )


def _cpu_rows(cpus: pl.DataFrame) -> pl.DataFrame:
    complete = pl.col("line").str.contains(_COMPLETE)
    return cpus.filter(complete).select(
        "line_no", "report", *[_field(k).alias(v) for k, v in c.CPU_COLUMNS.items()]
    )


def _head_value(head: str, key: str) -> str | None:
    m = re.search(r'"' + re.escape(key) + r'"\s*:\s*"?([^",\n]*)"?', head)
    return m[1] if m else None


def parse(path: Path, ctx: base.ParseContext, cov: base.Coverage) -> base.ParseResult:
    """Parse an iostat JSON file into ``iostat_cpu`` and ``iostat_device``."""
    head = _read.read_head(path)
    line = pl.col("line")
    kind = _kind()
    df = (
        _read.read_lines(path)
        .with_columns(kind.alias("kind"))
        .with_columns(
            (
                ((pl.col("kind") == "open") & ((pl.col("kind") == "stats").cum_sum() > 0))
                .cast(pl.Int32)
                .cum_sum()
                - 1
            ).alias("report")
        )
        .collect(engine="streaming")
    )
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    if counts.get("disk", 0) + counts.get("cpu", 0) + counts.get("stats", 0) == 0 and (
        cov.total - counts.get("blank", 0)
    ):
        raise ParseError(f"{ctx.file_name or path.name}: no iostat JSON statistics found")
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("json", sum(counts.get(k, 0) for k in ("json", "open", "stats")))
    cov.add_structure("timestamp", counts.get("ts", 0))
    cov.add_skipped("not JSON", counts.get("other", 0))

    complete = line.str.contains(_COMPLETE)
    disks = df.filter(pl.col("kind") == "disk")
    keys = _keys(disks["line"].head(200))
    device = line.str.extract(_DEVICE)
    good = disks.filter(complete & device.is_not_null())
    dev = _disk_rows(good, keys, device, _casts(keys))
    cov.add_skipped("malformed JSON disk record", disks.height - dev.height)
    cpus = df.filter(pl.col("kind") == "cpu")
    cpu = _cpu_rows(cpus)
    cov.add_skipped("malformed JSON avg-cpu record", cpus.height - cpu.height)
    cov.parsed = dev.height + cpu.height

    date_text = _head_value(head, "date") or ""
    ts_rows = df.filter(pl.col("kind") == "ts")
    zone = s.tz_for(ctx, cov) if ts_rows.height else None
    stamps = ts_rows.select("report", s.stamp_to_utc(_stamp(date_text), zone).alias("ts")).unique(
        "report", keep="first"
    )
    flags = s.short_flags(ctx.command)
    y = bool(flags and "y" in flags)
    if flags is None:
        cov.notes.append("no iostat command line known: first report assumed since boot (no -y)")
    times = c.report_times(df, stamps, ctx, y, cov.notes)
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    if dev.height:
        dev = c.flag_partitions(dev, ctx, cov.notes).join(
            times, on="report", how="left", maintain_order="left"
        )
        tables["iostat_device"] = c.TABLES["iostat_device"].conform(dev).collect()
    if cpu.height:
        cpu = cpu.join(times, on="report", how="left", maintain_order="left")
        tables["iostat_cpu"] = c.TABLES["iostat_cpu"].conform(cpu).collect()
    return base.ParseResult(tables=tables, coverage=cov, meta=_meta(head, date_text))


def _meta(head: str, date_text: str) -> dict[str, object]:
    """Facts of the file's head for ``ParseResult.meta``."""
    cpus_n = _head_value(head, "number-of-cpus")
    return {
        "host": _head_value(head, "nodename"),
        "kernel": _head_value(head, "release"),
        "cpus": int(cpus_n) if cpus_n and cpus_n.strip().isdigit() else None,
        "date": d.isoformat() if (d := s.parse_date(date_text)) else None,
    }
