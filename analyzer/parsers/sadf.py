"""sadf (sysstat 9.1 … 12.7) output of sa data files: ``-d``, ``-dh``, ``-d -U``/``-T``/``-t``,
``-p`` and ``-j``.

- ``-d``: ``;``-separated; a ``# hostname;interval;timestamp;<names>`` comment header per
  activity, rows ``host;interval;timestamp;values``. Values are taken by header name (the
  same names as sar text, see ``_sar_tables``), CPU ``all`` is ``-1``, decimal commas of a
  de_DE run are accepted. ``LINUX-RESTART`` / ``COM`` rows -> ``sar_events``.
- ``-dh``: one row per timestamp with all activities; the glued header is split back into
  activities by name (:func:`_sar_extract.split_groups`). Rows where an activity repeats
  for several items (``[...]`` marker with ``-P ALL`` or several interfaces) are skipped
  with a reason (their item count cannot be told apart per activity).
- ``-p``: tab-separated ``host interval timestamp device field value``, one value per line;
  values are regrouped into rows per (timestamp, device) by field name.
- ``-j``: JSON, read line by line (see ``_sadf_json``).
Not supported (``ParseError`` / low sniff): ``-x`` XML, ``-r`` raw dumps, ``-H`` headers,
``-g`` SVG. Activities without a dedicated table go to ``sar_other`` (long form).

Timestamps: ``YYYY-MM-DD HH:MM:SS UTC`` (default), a local zone abbreviation with
``-T``/``-t`` (read as local time in ``ctx.tz``, else UTC + note), epoch seconds with ``-U``. Tables: the same as ``sar`` (``TABLES`` is shared).

Sample input (``sadf -d sa.data -- -u -q``, sysstat 12.6.1)::

    # hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle
    vm;1;2026-11-29 17:23:36 UTC;-1;58.00;0.00;42.00;0.00;0.00;0.00
    vm;1;2026-11-29 17:23:37 UTC;-1;57.29;0.00;42.71;0.00;0.00;0.00
    # hostname;interval;timestamp;runq-sz;plist-sz;ldavg-1;ldavg-5;ldavg-15;blocked
    vm;1;2026-11-29 17:23:36 UTC;15;116;1.30;0.96;0.47;0
    vm;-1;2026-11-29 17:25:00 UTC;LINUX-RESTART\t(2 CPU)
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _read, base
from analyzer.parsers import _sadf_json as sj
from analyzer.parsers import _sadf_time as stime
from analyzer.parsers import _sar_extract as sx
from analyzer.parsers import _sar_names as sn
from analyzer.parsers import _sar_tables as st

TABLES: dict[str, base.Table] = st.TABLES

_HDR = "# hostname;interval;timestamp"
_TS_RE = r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?: (\S+))?$"
_D_ROW = re.compile(r"^[^;\t\n]+;-?\d+;(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}( \S+)?|\d{6,});", re.M)
_P_ROW = re.compile(
    r"^[^\t\n]+\t-?\d+\t(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}( \S+)?|\d{6,})\t", re.M
)


def _format(head: str) -> str | None:
    text = head.lstrip("\ufeff \r\n\t")
    if text.startswith("{") and '"sysstat"' in text[:200]:
        # sadf -j hosts carry "file-date"; iostat/mpstat/pidstat JSON carry "date"
        return "json" if '"file-date"' in head or '"timestamp": {"date"' in head else None
    if re.search(r"^" + re.escape(_HDR), head, re.M) or _D_ROW.search(head):
        return "d"
    if _P_ROW.search(head):
        return "p"
    return None


def sniff(head: str, name: str) -> float:
    """sadf: the ``-d`` header comment, a ``-d``/``-p`` row shape, or ``{"sysstat":`` JSON."""
    fmt = _format(head)
    if fmt == "json" or (fmt == "d" and _HDR in head):
        return 0.95
    return 0.8 if fmt else 0.0


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one sadf output file (see the module docstring)."""
    fmt = _format(_read.read_head(path))
    if fmt is None:
        raise ParseError(f"{path.name}: not sadf -d/-p/-j output")
    cov = base.Coverage()
    if _read.needs_utf8_repair(path):
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced")
    lf = _read.read_lines(path)
    if fmt == "json":
        tables, meta = sj.parse_json(lf, ctx, cov)
    elif fmt == "p":
        tables, meta = _parse_p(lf, ctx, cov)
    else:
        tables, meta = _parse_d(lf, ctx, cov)
    out = {t: TABLES[t].conform(f).collect() for t, f in tables.items() if f.height}
    return base.ParseResult(tables=out, coverage=cov, meta={"tool": "sadf", **meta})


def _fields(lf: pl.LazyFrame, sep: str, ts_idx: int) -> pl.LazyFrame:
    f = pl.col("line").str.split(sep)
    ts_raw = f.list.get(ts_idx, null_on_oob=True).str.strip_chars()
    g = ts_raw.str.extract_groups(_TS_RE)
    return lf.with_columns(
        f.alias("f"),
        g.struct.field("1").alias("d"),
        g.struct.field("2").alias("t"),
        g.struct.field("3").alias("z"),
        ts_raw.str.extract(r"^(\d{6,})$").alias("epoch"),
    )


def _ts(df: pl.DataFrame, ctx: base.ParseContext, cov: base.Coverage) -> pl.DataFrame:
    zones = df["z"].unique().to_list() if df.height else []
    return df.with_columns(
        stime.to_utc(pl.col("d"), pl.col("t"), pl.col("z"), pl.col("epoch"), zones, ctx, cov).alias(
            "ts"
        )
    )


def _events(df: pl.DataFrame, detail: pl.Expr) -> pl.DataFrame:
    restart = detail.str.starts_with("LINUX-RESTART")
    return df.select(
        "ts",
        pl.when(restart).then(pl.lit("restart")).otherwise(pl.lit("comment")).alias("event"),
        pl.when(restart)
        .then(detail.str.strip_prefix("LINUX-RESTART").str.strip_chars())
        .otherwise(detail.str.strip_prefix("COM "))
        .alias("detail"),
        pl.when(restart)
        .then(detail.str.extract(r"\((\d+) CPU\)").cast(pl.Int32, strict=False))
        .alias("cpus"),
    ).unique(maintain_order=True)


def _parse_d(lf: pl.LazyFrame, ctx: base.ParseContext, cov: base.Coverage):
    line = pl.col("line")
    lf = _fields(lf, ";", 2)
    is_ts = pl.col("d").is_not_null() | pl.col("epoch").is_not_null()
    f3 = pl.col("f").list.slice(3).list.join(";")
    kind = (
        pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.starts_with(_HDR))
        .then(pl.lit("header"))
        .when(~is_ts | (pl.col("f").list.len() < 4))
        .then(pl.lit("garbage"))
        .when(f3.str.starts_with("LINUX-RESTART") | f3.str.starts_with("COM "))
        .then(pl.lit("event"))
        .otherwise(pl.lit("data"))
    )
    hdr = pl.when(kind == "header").then(line.str.strip_prefix(_HDR).str.strip_prefix(";"))
    df = lf.select(
        "line_no", "f", "d", "t", "z", "epoch", kind.alias("kind"), hdr.forward_fill().alias("hdr")
    ).collect(engine="streaming")
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("header", counts.get("header", 0))
    cov.add_skipped("unrecognized line (not sadf -d output)", counts.get("garbage", 0))
    df = _ts(df.filter(pl.col("kind").is_in(["data", "event"])), ctx, cov)
    tables: dict[str, pl.DataFrame] = {}
    ev = df.filter(pl.col("kind") == "event")
    if ev.height:
        cov.parsed += ev.height
        tables["sar_events"] = _events(ev, pl.col("f").list.slice(3).list.join(";"))
    data = df.filter(pl.col("kind") == "data").with_columns(pl.col("f").list.slice(3).alias("tok"))
    hdrs = [h for h in data["hdr"].unique(maintain_order=True).to_list() if h is not None]
    sections: list[sx.Section] = []
    parts = []
    cov.add_skipped("data row before any sadf header", int(data["hdr"].is_null().sum()))
    for h in hdrs:
        names = h.replace("[...]", "").split(";")
        rows = data.filter(pl.col("hdr") == h)
        if names[-1] == "CPU*" and "[...]" not in h:  # -I: INTR;CPU* = all, CPU0, CPU1...
            for n in sorted(set(rows["tok"].list.len().to_list())):
                k = n - len(names) + 1
                if k < 1:
                    continue
                wide = names[:-1] + ["all"] + [f"CPU{i}" for i in range(k - 1)]
                parts.append(
                    _group_rows(rows.filter(pl.col("tok").list.len() == n), wide, sections, cov)
                )
            rows = rows.filter(pl.col("tok").list.len() < len(names))
        ok = rows["tok"].list.len() == len(names)
        reason = (
            "sadf -dh row with several items per activity (not supported)"
            if "[...]" in h
            else "field count differs from its sadf header"
        )
        cov.add_skipped(reason, int((~ok).sum()))
        parts.append(_group_rows(rows.filter(ok), names, sections, cov))
    if parts:
        tables.update(sx.extract(pl.concat(parts), sections))
    host = data["f"].list.first()[0] if data.height else None
    return tables, {"host": host}


def _group_rows(
    rows: pl.DataFrame, names: list[str], sections: list[sx.Section], cov: base.Coverage
) -> pl.DataFrame:
    """Rows of one header, cut into its activity groups (appends to ``sections``)."""
    cov.parsed += rows.height
    parts = []
    for a, b, sec in sx.split_groups(names):
        sections.append(sec)
        parts.append(
            rows.select(
                "ts",
                pl.lit(len(sections) - 1, pl.Int32).alias("sid"),
                pl.col("tok").list.slice(a, b - a),
            )
        )
    return pl.concat(parts)


def _field_map() -> pl.DataFrame:
    rows: dict[str, list[object]] = {
        "field": [],
        "table": [],
        "column": [],
        "scale": [],
        "resource": [],
        "kind": [],
    }

    def add(
        field: str,
        table: str,
        column: str,
        scale: float = 1.0,
        res: str | None = None,
        kind: str | None = None,
    ) -> None:
        for k, v in zip(rows, (field, table, column, scale, res, kind), strict=True):
            rows[k].append(v)

    seen: dict[str, str] = {}
    for table in st.COLUMNS:
        for name, (col, scale) in sn.text_alias_map(table).items():
            if name in ("CPU", "IFACE", "DEV") or name in seen or scale != 1.0:
                continue
            seen[name] = table
            add(name, table, col, scale)
    for pre, (res, kind) in st.PSI_PREFIX.items():
        for suf, col in st.PSI_SUFFIX.items():
            add(pre + suf, "sar_psi", col, 1.0, res, kind)
    return pl.DataFrame(
        rows,
        schema={
            "field": pl.String,
            "table": pl.String,
            "column": pl.String,
            "scale": pl.Float64,
            "resource": pl.String,
            "kind": pl.String,
        },
    )


_KEY_COL = {"sar_cpu": "cpu", "sar_disk": "dev", "sar_net_dev": "iface", "sar_net_edev": "iface"}


def _parse_p(lf: pl.LazyFrame, ctx: base.ParseContext, cov: base.Coverage):
    lf = _fields(lf, "\t", 2)
    is_ts = pl.col("d").is_not_null() | pl.col("epoch").is_not_null()
    f3 = pl.col("f").list.get(3, null_on_oob=True)
    n = pl.col("f").list.len()
    kind = (
        pl.when(pl.col("line").str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(is_ts & (n >= 4) & (f3.str.starts_with("LINUX-RESTART") | f3.str.starts_with("COM ")))
        .then(pl.lit("event"))
        .when(is_ts & (n == 6))
        .then(pl.lit("data"))
        .otherwise(pl.lit("garbage"))
    )
    df = lf.select("line_no", "f", "d", "t", "z", "epoch", kind.alias("kind")).collect(
        engine="streaming"
    )
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_skipped("unrecognized line (not sadf -p output)", counts.get("garbage", 0))
    df = _ts(df.filter(pl.col("kind").is_in(["data", "event"])), ctx, cov)
    tables: dict[str, pl.DataFrame] = {}
    ev = df.filter(pl.col("kind") == "event")
    if ev.height:
        tables["sar_events"] = _events(ev, pl.col("f").list.slice(3).list.join("\t"))
    data = df.filter(pl.col("kind") == "data").select(
        "ts",
        pl.col("f").list.get(3).alias("device"),
        pl.col("f").list.get(4).alias("field"),
        pl.col("f").list.get(5).alias("value"),
    )
    cov.parsed += ev.height + data.height
    data = data.join(_field_map(), on="field", how="left").with_columns(
        pl.when((pl.col("field") == "tps") & (pl.col("device") != "-"))
        .then(pl.lit("sar_disk"))
        .otherwise(pl.col("table"))
        .alias("table")
    )
    for table in [t for t in data["table"].unique().to_list() if t is not None]:
        sub = data.filter(pl.col("table") == table)
        index = ["ts", "resource", "kind"] if table == "sar_psi" else ["ts", "device"]
        wide = sub.pivot(on="column", index=index, values="value", aggregate_function="first")
        types = dict(TABLES[table].schema)
        key = _KEY_COL.get(table)
        exprs = [pl.col(c) for c in index if c in types]
        if key:
            exprs.append(sx.cast_value(pl.col("device"), types[key], key).alias(key))
        for col in wide.columns:
            if col in types and col not in index:
                exprs.append(sx.cast_value(pl.col(col), types[col], col).alias(col))
        tables[table] = wide.select(exprs)
    other = data.filter(pl.col("table").is_null())
    if other.height:
        v = sx.cast_value(pl.col("value"), pl.Float64, "value")
        tables["sar_other"] = other.select(
            "ts",
            pl.lit(None, pl.String).alias("section"),
            pl.when(pl.col("device") != "-").then(pl.col("device")).alias("item"),
            pl.col("field").alias("metric"),
            v.alias("value"),
            pl.when(v.is_null()).then(pl.col("value")).alias("text"),
        )
    host = df["f"].list.first()[0] if df.height else None
    return tables, {"host": host}
