"""``sadf -j`` JSON, read line by line (sysstat 10.0 … 12.7).

sadf prints one activity object or one array item per line::

    "timestamp": {"date": "2026-11-29", "time": "17:23:36", "utc": 1, "interval": 1},
    "cpu-load": [
        {"cpu": "all", "user": 58.00, "nice": 0.00, "system": 42.00, ...}
    ],
    "memory": {"memfree": 21430720, "avail": 22980988, ...},

so each line is classified with regexes (no whole-document parse: files can be large):
a ``timestamp`` line starts a record (its time is forward-filled), a ``"key": {...}`` line is
a single-object activity, a ``{...}`` line is an item of the last opened ``"key": [`` array;
``boot`` / ``comment`` lines are restarts and comments. Values are pulled by JSON key with
regexes and cast once. Mapped activities go to their tables (``memory`` also feeds
``sar_swap_space`` when it carries swap keys; ``psi-*`` feed ``sar_psi``); every other
activity line goes to ``sar_other`` (all numeric key/value pairs, ``section`` = its key).
A minified single-line document is not supported (the line is skipped with a reason).
`records` classifies the lines, ``sadf.parse`` turns their times into UTC (`sadf.to_utc`),
`tables_of` builds the tables.
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers import _sar_tables as st
from analyzer.parsers import base

# (sadf 11.2 glues the next array opener onto a line: tolerated)
_OBJ = r'^"([\w-]+)":\s*(\{.*\})\s*,?\s*(?:"[\w-]+":\s*\[\s*)?$'
_OPEN = r'^"([\w-]+)":\s*([\[{])\s*$'
_ITEM = r"^(\{.*\})\s*,?$"
_NUM = r"(-?\d[\d.eE+-]*)"
_META = (  # the keys of a host's description
    "nodename|sysname|release|machine|number-of-cpus|file-date|file-utc-time|timezone|"
    "sysdata-version"
)
_PSI = {"psi-cpu": "cpu", "psi-io": "io", "psi-mem": "memory"}


def _num(key: str) -> pl.Expr:
    return pl.col("obj").str.extract(f'"{key}":\\s*{_NUM}')


def _str(key: str) -> pl.Expr:
    return pl.col("obj").str.extract(f'"{key}":\\s*"([^"]*)"')


def records(lf: pl.LazyFrame, cov: base.Coverage) -> pl.DataFrame:
    """The timestamp, event and data lines of a sadf -j file (``kind``, ``obj``: the JSON
    object, ``act``: its activity key, and ``d``, ``t``, ``z``: date, time and zone of a
    timestamp or event, NULL zone for local time); every line counted in ``cov``."""
    s = pl.col("line").str.strip_chars()
    obj_g = s.str.extract_groups(_OBJ)
    open_g = s.str.extract_groups(_OPEN)
    item = s.str.extract(_ITEM)
    okey, obj = obj_g.struct.field("1"), obj_g.struct.field("2")
    okey_open, bracket = open_g.struct.field("1"), open_g.struct.field("2")
    meta_line = s.str.contains('^"(' + _META + r')":')
    kind = (
        pl.when(s == "")
        .then(pl.lit("blank"))
        .when(s.str.contains(r"^[\[\]{}]+,?$") | s.str.starts_with('{"sysstat"'))
        .then(pl.lit("bracket"))
        .when(okey_open.is_not_null() | s.str.contains(r'^"[\w-]+":\s*\[\s*\]\s*,?$'))
        .then(pl.lit("opener"))
        .when(meta_line)
        .then(pl.lit("meta"))
        .when(okey == "timestamp")
        .then(pl.lit("timestamp"))
        .when(okey.is_in(["boot", "comment"]))
        .then(pl.lit("event"))
        .when(okey.is_not_null() | item.is_not_null())
        .then(pl.lit("data"))
        .otherwise(pl.lit("garbage"))
    )
    arr_key = pl.when(bracket == "[").then(okey_open).when(s.str.starts_with("]")).then(pl.lit(""))
    df = lf.select(
        "line_no",
        kind.alias("kind"),
        pl.coalesce(obj, item).alias("obj"),
        pl.when(okey.is_not_null()).then(okey).otherwise(arr_key.forward_fill()).alias("act"),
        s.alias("s"),
    ).collect(engine="streaming")
    cov.total = df.height
    counts = dict(df.group_by("kind").len().iter_rows())
    for k in ("blank", "bracket", "opener", "meta", "timestamp"):
        cov.add_structure(k, counts.get(k, 0))
    cov.add_skipped("unrecognized line (not sadf -j line layout)", counts.get("garbage", 0))

    utc = pl.col("obj").str.extract(r'"utc":\s*(\d)')
    tz = pl.col("obj").str.extract(r'"tz":\s*"([^"]*)"')
    zone = pl.when(tz.is_not_null()).then(tz).when(utc == "1").then(pl.lit("UTC"))
    return df.filter(pl.col("kind").is_in(["timestamp", "event", "data"])).with_columns(
        _str("date").alias("d"), _str("time").alias("t"), zone.alias("z")
    )


def tables_of(df: pl.DataFrame, ts: pl.Expr, cov: base.Coverage) -> dict[str, pl.DataFrame]:
    """Tables from the `records` of a sadf -j file; ``ts``: the UTC time of a timestamp or
    event line (data lines take that of their record's timestamp)."""
    is_data = pl.col("kind") == "data"
    record_ts = pl.when(pl.col("kind") == "timestamp").then(ts).forward_fill()
    df = df.with_columns(pl.when(is_data).then(record_ts).otherwise(ts).alias("ts"))
    boot, act = pl.col("act") == "boot", pl.col("act")
    ev = df.filter(pl.col("kind") == "event")
    tables = {
        "sar_events": ev.select(
            "ts",
            pl.when(boot).then(pl.lit("restart")).otherwise(pl.lit("comment")).alias("event"),
            pl.when(boot)
            .then(pl.format("({} CPU)", _num("cpu_count")))
            .otherwise(_str("com"))
            .alias("detail"),
            pl.when(boot).then(_num("cpu_count").cast(pl.Int32, strict=False)).alias("cpus"),
        ).unique(maintain_order=True)
    }
    data = df.filter(is_data)
    for key, table in st.JSON_ACTIVITIES.items():
        sub = data.filter(act == key)
        _add(tables, table, _dedicated(sub, table))
        if key == "memory":
            _add(tables, "sar_swap_space", _dedicated(sub, "sar_swap_space"))
    _add(tables, "sar_psi", _psi(data.filter(act.is_in(list(_PSI)))))
    _add(
        tables,
        "sar_other",
        _other(data.filter(~act.is_in([*st.JSON_ACTIVITIES, *_PSI]).fill_null(False))),
    )
    cov.parsed += ev.height + data.height
    return tables


def _add(tables: dict[str, pl.DataFrame], table: str, frame: pl.DataFrame) -> None:
    if frame.height:
        tables[table] = (
            pl.concat([tables[table], frame], how="diagonal_relaxed") if table in tables else frame
        )


def _dedicated(sub: pl.DataFrame, table: str) -> pl.DataFrame:
    """The rows of a dedicated table from its activity's objects, values by JSON key (``x*0.5``:
    the value × 0.5); only rows that carry one of its values (memory vs swap keys)."""
    exprs = []
    for col, (dtype, *_, names) in st.COLUMNS[table].items():
        vals = []
        for name in names:
            key, _, scale = name.partition("*")
            raw = _str(key) if col == "cpu" or dtype == pl.String else _num(key)
            value = st.cast_value(raw, dtype, col)
            vals.append(value * float(scale) if scale else value)
        exprs.append(pl.coalesce(vals).alias(col))
    keyless = [
        pl.col(c).is_not_null() for c in st.COLUMNS[table] if c not in ("cpu", "iface", "dev")
    ]
    return sub.select("ts", *exprs).filter(pl.any_horizontal(keyless))


def _psi(sub: pl.DataFrame) -> pl.DataFrame:
    parts = []
    for kind in ("some", "full"):
        cols = {f"{c}_pct": _num(f"{kind}_{c}") for c in ("avg10", "avg60", "avg300", "avg")}
        parts.append(
            sub.select(
                "ts",
                pl.col("act").replace_strict(_PSI, default=None).alias("resource"),
                pl.lit(kind).alias("kind"),
                *(st.cast_value(e, pl.Float64, c).alias(c) for c, e in cols.items()),
            ).filter(pl.any_horizontal([pl.col(c).is_not_null() for c in cols]))
        )
    return pl.concat(parts)


def _other(sub: pl.DataFrame) -> pl.DataFrame:
    pairs = pl.col("obj").str.extract_all(r'"[^"]+":\s*(?:-?\d[\d.eE+-]*|"[^"]*")')
    first_str = pl.col("obj").str.extract(r'^\{\s*"[^"]+":\s*"([^"]*)"')
    long = sub.select(
        "ts", pl.col("act").alias("section"), first_str.alias("item"), pairs.alias("p")
    ).explode("p")
    g = pl.col("p").str.extract_groups(r'^"([^"]+)":\s*"?(.*?)"?$')
    long = long.with_columns(g.struct.field("1").alias("metric"), g.struct.field("2").alias("raw"))
    v = st.cast_value(pl.col("raw"), pl.Float64, "value")
    return long.filter(pl.col("metric").is_not_null()).select(
        "ts",
        "section",
        "item",
        "metric",
        v.alias("value"),
        pl.when(v.is_null()).then(pl.col("raw")).alias("text"),
    )
