"""sadf (sysstat 9.1 … 12.7) output of sa data files: ``-d``, ``-dh``, ``-d -U``/``-T``/``-t``,
``-p`` and ``-j``.

- ``-d``: ``;``-separated; a ``# hostname;interval;timestamp;<names>`` comment header per
  activity, rows ``host;interval;timestamp;values``. Values are taken by header name (the
  same names as sar text, see ``_sar_tables``), CPU ``all`` is ``-1``, decimal commas of a
  de_DE run are accepted. ``LINUX-RESTART`` / ``COM`` rows -> ``sar_events``.
- ``-dh``: one row per timestamp with all activities; the glued header is split back into
  activities by name (:func:`split_groups`). Rows where an activity repeats
  for several items (``[...]`` marker with ``-P ALL`` or several interfaces) are skipped
  with a reason (their item count cannot be told apart per activity).
- ``-p``: tab-separated ``host interval timestamp device field value``, one value per line;
  values are regrouped into rows per (timestamp, device) by field name.
- ``-j``: JSON, read line by line (see ``_sadf_json``).
Not supported (``ParseError`` / low sniff): ``-x`` XML, ``-r`` raw dumps, ``-H`` headers,
``-g`` SVG. Activities without a dedicated table go to ``sar_other`` (long form).

Timestamps (`to_utc`): ``YYYY-MM-DD HH:MM:SS UTC`` (default), a zone name with ``-T``/``-t``,
epoch seconds with ``-U``; JSON ``{"date", "time", "utc": 0|1 | "tz": ZONE}``. Only UTC names
are trusted: any other zone name (``CET``, ``EST``: ambiguous, or a custom ``TZ``), or none,
is local time, read in ``ctx.tz``, else assumed UTC with a coverage note. Tables: the same
as ``sar`` (``TABLES`` is shared).

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
from analyzer.parsers import _sar_tables as st
from analyzer.parsers import _sysstat as ss

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
        records = sj.records(lf, cov)
        zones = records.filter(pl.col("kind") != "data")["z"].unique().to_list()
        ts = to_utc(pl.col("d"), pl.col("t"), pl.col("z"), pl.lit(None, pl.String), zones, ctx, cov)
        tables, meta = sj.tables_of(records, ts, cov), {}
    elif fmt == "p":
        tables, meta = _parse_p(lf, ctx, cov)
    else:
        tables, meta = _parse_d(lf, ctx, cov)
    out = {t: TABLES[t].conform(f).collect() for t, f in tables.items() if f.height}
    return base.ParseResult(tables=out, coverage=cov, meta={"tool": "sadf", **meta})


#: zone names that are UTC. Other abbreviations (``CET``, ``EST``) are ambiguous (``CST``,
#: ``IST``) or follow a custom ``TZ`` (the sysstat tests print ``CET`` for UTC+2): local time.
UTC_NAMES = ["UTC", "GMT", "UT", "Z", "UCT"]


def to_utc(
    date: pl.Expr,
    time: pl.Expr,
    zone: pl.Expr,
    epoch: pl.Expr,
    zones: list[str | None],
    ctx: base.ParseContext,
    cov: base.Coverage,
) -> pl.Expr:
    """UTC ``ts`` from string columns; ``zones`` are the distinct zone values present.

    ``zone`` NULL means "local time" (JSON with ``"utc": 0`` or a missing zone); ``epoch``
    (digits) wins when present.
    """
    naive = pl.concat_str([date, pl.lit(" "), time]).str.to_datetime(
        "%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"
    )
    is_utc = zone.str.to_uppercase().is_in(UTC_NAMES).fill_null(False)
    expr = pl.when(is_utc).then(naive.dt.replace_time_zone("UTC"))
    local = sorted({z or "" for z in zones if z is None or z.upper() not in UTC_NAMES})
    if local:
        local_zone = ss.tz_for(ctx, cov)
        if any(local):
            cov.notes.append(
                f"time zone name(s) {', '.join(n for n in local if n)} not mapped to an offset: "
                "read as local time"
            )
        expr = expr.otherwise(ss.local_to_utc(naive, local_zone))
    from_epoch = pl.from_epoch(
        epoch.cast(pl.Int64, strict=False), time_unit="s"
    ).dt.replace_time_zone("UTC")
    return pl.when(epoch.is_not_null()).then(from_epoch).otherwise(expr).cast(base.TS)


_IS_TS = pl.col("d").is_not_null() | pl.col("epoch").is_not_null()


def _lines(
    lf: pl.LazyFrame,
    sep: str,
    kind: pl.Expr,
    what: str,
    ctx: base.ParseContext,
    cov: base.Coverage,
    *extra: pl.Expr,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The data and event rows of a ``-d``/``-p`` file in line order (``f``: the fields split
    at ``sep``, ``kind``, ``ts`` and the ``extra`` columns) and its ``sar_events`` rows; every
    line counted in ``cov``. ``kind`` may use ``f``, ``d``/``t``/``z``/``epoch`` (the parts of
    the timestamp field) and `_IS_TS`."""
    fields = pl.col("line").str.split(sep)
    stamp = fields.list.get(2, null_on_oob=True).str.strip_chars()
    parts = stamp.str.extract_groups(_TS_RE).struct
    df = (
        lf.with_columns(
            fields.alias("f"),
            parts.field("1").alias("d"),
            parts.field("2").alias("t"),
            parts.field("3").alias("z"),
            stamp.str.extract(r"^(\d{6,})$").alias("epoch"),
        )
        .select("line_no", "f", "d", "t", "z", "epoch", kind.alias("kind"), *extra)
        .collect(engine="streaming")
    )
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("header", counts.get("header", 0))
    cov.add_skipped(f"unrecognized line (not sadf {what} output)", counts.get("garbage", 0))
    df = df.filter(pl.col("kind").is_in(["data", "event"]))
    zones = df["z"].unique().to_list() if df.height else []
    ts = to_utc(pl.col("d"), pl.col("t"), pl.col("z"), pl.col("epoch"), zones, ctx, cov)
    df = df.with_columns(ts.alias("ts"))
    ev = df.filter(pl.col("kind") == "event")
    cov.parsed += ev.height
    return df, st.event_rows(ev, pl.col("f").list.slice(3).list.join(sep), "LINUX-RESTART")


def _parse_d(lf: pl.LazyFrame, ctx: base.ParseContext, cov: base.Coverage):
    line = pl.col("line")
    f3 = pl.col("f").list.slice(3).list.join(";")
    kind = (
        pl.when(line.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(line.str.starts_with(_HDR))
        .then(pl.lit("header"))
        .when(~_IS_TS | (pl.col("f").list.len() < 4))
        .then(pl.lit("garbage"))
        .when(f3.str.starts_with("LINUX-RESTART") | f3.str.starts_with("COM "))
        .then(pl.lit("event"))
        .otherwise(pl.lit("data"))
    )
    hdr = pl.when(kind == "header").then(line.str.strip_prefix(_HDR).str.strip_prefix(";"))
    df, events = _lines(lf, ";", kind, "-d", ctx, cov, hdr.forward_fill().alias("hdr"))
    data = df.filter(pl.col("kind") == "data").with_columns(pl.col("f").list.slice(3).alias("tok"))
    hdrs = [h for h in data["hdr"].unique(maintain_order=True).to_list() if h is not None]
    parts: list[tuple[st.Section, pl.DataFrame]] = []
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
                parts += _groups(rows.filter(pl.col("tok").list.len() == n), wide, cov)
            rows = rows.filter(pl.col("tok").list.len() < len(names))
        ok = rows["tok"].list.len() == len(names)
        reason = (
            "sadf -dh row with several items per activity (not supported)"
            if "[...]" in h
            else "field count differs from its sadf header"
        )
        cov.add_skipped(reason, int((~ok).sum()))
        parts += _groups(rows.filter(ok), names, cov)
    host = data["f"].list.first()[0] if data.height else None
    return {"sar_events": events, **st.tables_of(parts)}, {"host": host}


def _groups(
    rows: pl.DataFrame, names: list[str], cov: base.Coverage
) -> list[tuple[st.Section, pl.DataFrame]]:
    """Rows of one header, cut into its activity groups: each group's section and its
    rows' tokens (``ts``, ``t0``…)."""
    cov.parsed += rows.height
    tok = pl.col("tok").list
    return [
        (sec, rows.select("ts", *(tok.get(a + j).alias(f"t{j}") for j in range(b - a))))
        for a, b, sec in split_groups(names)
    ]


_ALIASES = {t: set(aliases) for t, aliases in st.TEXT_ALIASES.items()}
_ALIASES["sar_psi"] = set(st.PSI_NAMES)


def split_groups(names: list[str]) -> list[tuple[int, int, st.Section]]:
    """Split a ``sadf -d``/``-dh`` header into activities: ``[(start, end, Section)]``.

    ``sadf -dh`` glues the headers of all activities into one line. Runs of names that all
    belong to one table (and satisfy its signature) form a group; everything else is merged
    into ``sar_other`` groups. A plain single-activity header gives one group.
    """
    runs: list[tuple[int, int, str]] = []
    i = 0
    while i < len(names):
        best, best_len = "sar_other", 1
        for table, aliases in _ALIASES.items():
            seen: set[str] = set()
            j = i
            while j < len(names) and names[j] in aliases and names[j] not in seen:
                seen.add(names[j])
                j += 1
            if j - i > best_len or (j - i == best_len and best == "sar_other"):
                best, best_len = table, j - i
        if best != "sar_other" and st.section_table(names[i : i + best_len]) != best:
            best = "sar_other"
        if best == "sar_other" and runs and runs[-1][2] == "sar_other":
            runs[-1] = (runs[-1][0], i + best_len, best)
        else:
            runs.append((i, i + best_len, best))
        i += best_len
    return [(a, b, st.make_section(names[a:b])) for a, b, _ in runs]


def _field_map() -> pl.DataFrame:
    """``sadf -p`` field name -> table, column, scale (and PSI resource and kind)."""
    rows: dict[str, tuple[str, str, float, str | None, str | None]] = {}
    for table, aliases in st.TEXT_ALIASES.items():
        for name, (col, scale) in aliases.items():
            if name not in ("CPU", "IFACE", "DEV") and scale == 1.0:
                rows.setdefault(name, (table, col, scale, None, None))
    for name, (res, kind, col) in st.PSI_NAMES.items():
        rows[name] = ("sar_psi", col, 1.0, res, kind)
    names = ("field", "table", "column", "scale", "resource", "kind")
    types = (pl.String, pl.String, pl.String, pl.Float64, pl.String, pl.String)
    return pl.DataFrame(
        [(k, *v) for k, v in rows.items()],
        schema=dict(zip(names, types, strict=True)),
        orient="row",
    )


_KEY_COL = {"sar_cpu": "cpu", "sar_disk": "dev", "sar_net_dev": "iface", "sar_net_edev": "iface"}


def _parse_p(lf: pl.LazyFrame, ctx: base.ParseContext, cov: base.Coverage):
    f3 = pl.col("f").list.get(3, null_on_oob=True)
    n = pl.col("f").list.len()
    kind = (
        pl.when(pl.col("line").str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(
            _IS_TS & (n >= 4) & (f3.str.starts_with("LINUX-RESTART") | f3.str.starts_with("COM "))
        )
        .then(pl.lit("event"))
        .when(_IS_TS & (n == 6))
        .then(pl.lit("data"))
        .otherwise(pl.lit("garbage"))
    )
    df, events = _lines(lf, "\t", kind, "-p", ctx, cov)
    tables = {"sar_events": events}
    data = df.filter(pl.col("kind") == "data").select(
        "ts",
        pl.col("f").list.get(3).alias("device"),
        pl.col("f").list.get(4).alias("field"),
        pl.col("f").list.get(5).alias("value"),
    )
    cov.parsed += data.height
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
            exprs.append(st.cast_value(pl.col("device"), types[key], key).alias(key))
        for col in wide.columns:
            if col in types and col not in index:
                exprs.append(st.cast_value(pl.col(col), types[col], col).alias(col))
        tables[table] = wide.select(exprs)
    other = data.filter(pl.col("table").is_null())
    if other.height:
        v = st.cast_value(pl.col("value"), pl.Float64, "value")
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
