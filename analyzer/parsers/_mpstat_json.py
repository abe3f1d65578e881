"""``mpstat -o JSON`` (sysstat 11.5+): read line by line, never as one document.

sysstat writes one record per line: ``{"cpu": "all", "usr": ...}`` (``cpu-load``),
``{"node": ...}`` (``node-load``), ``{"cpu": "0", "intr": 41.0}`` (``sum-interrupts``) and, in
``individual-interrupts`` / ``soft-interrupts``, a ``{"cpu": "0", "intr": [`` line followed
by ``{"name": "TIMER", "value": 13.09}`` lines. The section is the last ``"<section>": [`` key
seen; ``"timestamp"`` holds only the time of day (date from the ``"date"`` key, midnight
roll-over handled). ``since_boot`` is NULL unless ``ctx.command`` tells (no interval argument).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _sysstat as s

_PCT = ("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest", "gnice", "idle")
_NUM = r'"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)'
_SECTIONS = {
    "cpu-load": "cpu",
    "node-load": "node",
    "sum-interrupts": "sum",
    "individual-interrupts": "hard",
    "soft-interrupts": "soft",
}


def _num(key: str) -> pl.Expr:
    return pl.col("line").str.extract('"' + key + _NUM).cast(pl.Float64, strict=False)


def _str(key: str) -> pl.Expr:
    return pl.col("line").str.extract('"' + key + r'"\s*:\s*"([^"]*)"')


def _key(expr: pl.Expr) -> pl.Expr:
    return (
        pl.when(expr == "all").then(-1).otherwise(expr.cast(pl.Int32, strict=False)).cast(pl.Int32)
    )


def parse(
    path: Path, ctx: base.ParseContext, tables_decl: dict[str, base.Table]
) -> base.ParseResult:
    """Parse an mpstat JSON file into ``mpstat_cpu``, ``mpstat_node``, ``mpstat_irq``."""
    cov = base.Coverage()
    if _read.needs_utf8_repair(path):
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced")
    head = _read.read_head(path)
    line = pl.col("line")
    sect = line.str.extract(r'^\s*"([a-z-]+)"\s*:\s*\[')
    kind = (
        pl.when(line.str.contains(r"^\s*$"))
        .then(pl.lit("blank"))
        .when(line.str.contains(r'^\s*"timestamp"\s*:'))
        .then(pl.lit("ts"))
        .when(line.str.contains(r'^\s*\{\s*"(cpu|node)"\s*:.*"usr"'))
        .then(pl.lit("pct"))
        .when(line.str.contains(r'^\s*\{\s*"cpu"\s*:\s*"[^"]*"\s*,\s*"intr"\s*:\s*\['))
        .then(pl.lit("cpu_open"))
        .when(line.str.contains(r'^\s*\{\s*"cpu"\s*:\s*"[^"]*"\s*,\s*"intr"\s*:'))
        .then(pl.lit("sum"))
        .when(line.str.contains(r'^\s*\{\s*"name"\s*:'))
        .then(pl.lit("irq"))
        .when(line.str.contains(r'^[\s\[\]{}(),]*("[^"]+"\s*:.*)?$'))
        .then(pl.lit("json"))
        .otherwise(pl.lit("other"))
    )
    df = (
        _read.read_lines(path)
        .with_columns(kind.alias("kind"), sect.alias("section"))
        .with_columns(
            pl.col("section").forward_fill(),
            pl.when(pl.col("kind") == "ts").then(_str("timestamp")).forward_fill().alias("time"),
            pl.when(pl.col("kind") == "cpu_open").then(_str("cpu")).forward_fill().alias("icpu"),
        )
        .collect(engine="streaming")
    )
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    found = sum(counts.get(k, 0) for k in ("pct", "sum", "irq", "ts"))
    if found == 0 and '"sysstat"' not in head and cov.total - counts.get("blank", 0):
        raise ParseError(f"{ctx.file_name or path.name}: no mpstat JSON statistics found")
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("json", counts.get("json", 0) + counts.get("cpu_open", 0))
    cov.add_structure("timestamp", counts.get("ts", 0))
    cov.add_skipped("not JSON", counts.get("other", 0))

    m = re.search(r'"date"\s*:\s*"([^"]*)"', head)
    day = s.parse_date(m[1]) if m else None
    zone = s.tz_for(ctx, cov) if counts.get("ts") else None
    sec = s.seconds_of_day(pl.col("time"))
    naive = (
        pl.lit(datetime.combine(day, datetime.min.time()))
        + pl.duration(seconds=sec + 86400 * s.day_rollover(sec))
        if day
        else pl.lit(None, pl.Datetime("us"))
    )
    has_iv = s.command_has_interval(ctx.command)
    since_boot = pl.lit(None if has_iv is None else not has_iv, pl.Boolean)
    df = df.with_columns(s.local_to_utc(naive, zone).alias("ts"), since_boot.alias("since_boot"))
    complete = line.str.contains(r"\}\s*,?\s*$")
    pct = df.filter(pl.col("kind") == "pct")
    cpu = pct.filter(complete & (pl.col("section") == "cpu-load")).select(
        "ts",
        "since_boot",
        _key(_str("cpu")).alias("cpu"),
        *[_num(k).alias(f"{k}_pct") for k in _PCT],
    )
    node = pct.filter(complete & (pl.col("section") == "node-load")).select(
        "ts",
        "since_boot",
        _key(_str("node")).alias("node"),
        *[_num(k).alias(f"{k}_pct") for k in _PCT],
    )
    sums = df.filter((pl.col("kind") == "sum") & complete).select(
        "ts",
        "since_boot",
        _key(_str("cpu")).alias("cpu"),
        pl.lit("sum").alias("kind"),
        pl.lit("sum").alias("irq"),
        _num("intr").alias("per_s"),
    )
    irq = df.filter((pl.col("kind") == "irq") & complete).select(
        "ts",
        "since_boot",
        _key(pl.col("icpu")).alias("cpu"),
        pl.col("section").replace_strict(_SECTIONS, default=None).alias("kind"),
        _str("name").alias("irq"),
        _num("value").alias("per_s"),
    )
    irqs = pl.concat([sums, irq], how="diagonal_relaxed").filter(
        pl.col("per_s").is_not_null() & pl.col("irq").is_not_null()
    )
    n_data = sum(counts.get(k, 0) for k in ("pct", "sum", "irq"))
    cov.parsed = cpu.height + node.height + irqs.height
    cov.add_skipped("malformed JSON record", n_data - cov.parsed)
    if since_boot.meta.is_literal() and has_iv is None:
        cov.notes.append("no mpstat command line known: since_boot is NULL")
    out: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    for name, frame in (("mpstat_cpu", cpu), ("mpstat_node", node), ("mpstat_irq", irqs)):
        if frame.height:
            out[name] = tables_decl[name].conform(frame).collect()
    hm = {k: re.search(r'"' + k + r'"\s*:\s*"?([^",\n]*)', head) for k in ("nodename", "release")}
    cpus = re.search(r'"number-of-cpus"\s*:\s*(\d+)', head)
    meta = {
        "host": hm["nodename"][1] if hm["nodename"] else None,
        "kernel": hm["release"][1] if hm["release"] else None,
        "cpus": int(cpus[1]) if cpus else None,
        "date": day.isoformat() if day else None,
    }
    return base.ParseResult(tables=out, coverage=cov, meta=meta)
