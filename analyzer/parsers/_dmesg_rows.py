"""Rows of the `dmesg` table from tokenized kernel log lines (private helper of
`analyzer.parsers.dmesg`): `text_rows` assembles printk records (continuation lines
inherit their record's clock, level and caller), `json_rows` the fields of `dmesg --json`
records. Both return untyped frames (strings, a few numbers and flags) with ``src_line``,
the first input line the row depends on (the record's first line), for the block-by-block
parse. Polars expressions over whole columns: no loop per line.
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers._dmesg_tokens import MAX_JSON_RECORD_LINES, pri_facility, pri_level

S, I64, F64 = pl.String, pl.Int64, pl.Float64
ROW_ROLES = ("row", "cont")
SKIP_JSON_LONG = f"skip:json record longer than {MAX_JSON_RECORD_LINES} lines"


def text_rows(tok: pl.DataFrame) -> pl.DataFrame:
    """One row per line of role 'row' or 'cont' of `tokenize_text`'s frame ``tok``."""
    df = tok.filter(pl.col("role").is_in(ROW_ROLES))
    is_cont = pl.col("role") == "cont"
    kpri = pl.col("kpri").cast(I64, strict=False)
    ppri = pl.col("pri").cast(I64, strict=False)
    stamps = pl.col("stamps").fill_null("")
    width = (pl.col("line").str.len_chars() - pl.col("msg").str.len_chars()).cast(I64)
    df = df.with_columns(
        is_cont.alias("is_cont"),
        is_cont.not_().cast(I64).cum_sum().alias("rec"),
        pl.coalesce(
            pri_facility(kpri),
            pri_facility(ppri),
            pl.col("fac"),
            pl.when(pl.col("ident") == "kernel").then(pl.lit("kern")),
        ).alias("facility"),
        pl.coalesce(pri_level(kpri), pri_level(ppri), pl.col("lvl")).alias("level"),
        pl.coalesce(
            pl.col("kextra").str.extract(r"caller=([TC]\d+)", 1),
            stamps.str.extract(r"\[\s*([TC]\d+)\]", 1),
        ).alias("caller"),
        pl.col("kseq").cast(I64, strict=False).alias("seq"),
        pl.coalesce(
            (pl.col("kusec").cast(F64, strict=False) / 1e6).round(6),
            stamps.str.extract(r"\[\s*(\d+\.\d+)(?:\s*<|\])", 1).cast(F64, strict=False),
        ).alias("uptime_s"),
        stamps.str.extract(r"<\s*(\d+\.\d+)>", 1).cast(F64, strict=False).alias("delta_s"),
        stamps.str.extract_groups(
            r"\[(?P<cwday>[^\s\[\]]+) +(?P<cmon>[^\s\[\]]+) +(?P<cday>\d{1,2}) "
            r"(?P<chms>\d\d:\d\d:\d\d) (?P<cyear>\d{4})"
        ).alias("_c"),
        stamps.str.extract(
            r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z))", 1
        ).alias("iso"),
        pl.col("kmsg").is_not_null().alias("is_kmsg"),
        pl.when(pl.col("kmsg").is_null()).then(width).alias("_width"),
    ).unnest("_c")
    # Index of each line's record start: continuation lines copy fields from it (gather).
    start = pl.when(~is_cont).then(pl.int_range(pl.len())).forward_fill().fill_null(0)
    df = df.with_columns(start.alias("_start"))
    w = pl.col("_width").gather(pl.col("_start"))
    line = pl.col("line")
    cont_msg = (
        pl.when(line.str.slice(0, w).str.strip_chars() == "")
        .then(line.str.slice(w))
        .otherwise(line.str.strip_chars_start())
    )
    message = (
        pl.when(is_cont)
        .then(cont_msg)
        .when(pl.col("kmsg").is_not_null())
        .then(pl.col("kmsg").str.replace_all(r"\x5c", "\\", literal=True))
        .otherwise(pl.col("msg"))
    )
    inherit = [
        "facility",
        "level",
        "caller",
        "seq",
        "uptime_s",
        "cmon",
        "cday",
        "chms",
        "cyear",
        "iso",
        "smon",
        "sday",
        "shms",
        "siso",
        "ident",
        "is_kmsg",
    ]
    df = df.with_columns(message.alias("message")).with_columns(
        pl.col(c).gather(pl.col("_start")) for c in inherit
    )
    return df.with_columns(
        pl.col("line_no").cast(I64),
        pl.col("line_no").gather(pl.col("_start")).cast(I64).alias("src_line"),
        pl.when(~pl.col("is_cont"))
        .then(
            pl.coalesce(
                pl.col("kusec"), pl.col("iso"), stamps.str.extract(r"\[\s*(\d+\.\d+)(?:\s*<|\])", 1)
            )
        )
        .alias("stamp_key"),
    )


def json_roles(df: pl.DataFrame) -> pl.DataFrame:
    """`json_lines`' frame with each line's ``role`` (as `tokenize_text`'s). Fields past a
    record's first `MAX_JSON_RECORD_LINES` lines are not read (``capped``)."""
    field = pl.col("key").is_not_null() & ~pl.col("struct")
    read = field & ~pl.col("capped")
    has_msg = (read & (pl.col("key") == "msg")).any().over("rec")
    role = (
        pl.when(pl.col("struct"))
        .then(pl.lit("structure:json syntax"))
        .when(read & has_msg)
        .then(pl.lit("row"))
        .when(read)
        .then(pl.lit("skip:json record without msg"))
        .when(field)
        .then(pl.lit(SKIP_JSON_LONG))
        .when(pl.col("line").str.strip_chars() == "")
        .then(pl.lit("structure:blank"))
        .otherwise(pl.lit("skip:not dmesg --json syntax"))
    )
    return df.with_columns(role.alias("role"))


def json_rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per `dmesg --json` record with a msg field (``df``: `json_roles`' frame)."""

    def val(key: str) -> pl.Expr:
        return pl.col("val").filter(pl.col("key") == key).first()

    recs = (
        df.filter(pl.col("role") == "row")
        .group_by("rec", maintain_order=True)
        .agg(
            pl.col("line_no").filter(pl.col("key") == "msg").first().cast(I64),
            pl.col("rec_line").first().cast(I64).alias("src_line"),
            val("pri").cast(I64, strict=False).alias("_pri"),
            val("time").alias("_time"),
            _json_str(val("caller")).alias("caller"),
            _json_str(val("msg")).alias("message"),
        )
    )
    time = pl.col("_time")
    iso = _json_str(time)
    return recs.with_columns(
        pri_facility(pl.col("_pri")).alias("facility"),
        pri_level(pl.col("_pri")).alias("level"),
        time.cast(F64, strict=False).alias("uptime_s"),
        pl.when(time.str.starts_with('"')).then(iso).alias("iso"),
        pl.lit(False).alias("is_cont"),
        pl.col("rec").alias("rec"),
        pl.when(time.str.starts_with('"')).then(iso).otherwise(time).alias("stamp_key"),
    )


_JSON_STR = r'^"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"$'


def _json_str(expr: pl.Expr) -> pl.Expr:
    """Decode a JSON string literal; anything else (hostile input) is kept as printed."""
    valid = expr.str.contains(_JSON_STR)
    return pl.coalesce(pl.when(valid).then(expr).str.json_decode(S), expr)
