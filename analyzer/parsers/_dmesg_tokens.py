"""Tokenizing kernel log lines for `analyzer.parsers.dmesg` (private helper).

Every function here is a polars expression pipeline over the whole line column: no loop per
line. The result of `tokenize_text` / `tokenize_json` is an untyped frame (strings plus a few
flags) that `dmesg.parse` places on the clock, classifies and casts once.
"""

from __future__ import annotations

import polars as pl

FACILITIES = [
    "kern",
    "user",
    "mail",
    "daemon",
    "auth",
    "syslog",
    "lpr",
    "news",
    "uucp",
    "cron",
    "authpriv",
    "ftp",
    "res0",
    "res1",
    "res2",
    "res3",
    "local0",
    "local1",
    "local2",
    "local3",
    "local4",
    "local5",
    "local6",
    "local7",
]
LEVELS = ["emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"]

_FAC = "|".join(FACILITIES)
_LVL = "|".join(LEVELS)
_RAW = r"\[\s*\d+\.\d+(?:\s*<\s*\d+\.\d+>)?\]"
_DELTA = r"\[<\s*\d+\.\d+>\]"
_CTIME = r"\[[^\s\[\]]{1,12} +[^\s\[\]]{1,12} +\d{1,2} \d\d:\d\d:\d\d \d{4}(?:\s*<\s*\d+\.\d+>)?\]"
_RELMIN = r"\[[^\s\[\]\d]{2,8} ?\d{1,2} \d\d:\d\d\]"
_RELOFF = r"\[\s*[+-]\d+\.\d+\]"
ISO_RE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)"
_CALLER = r"\[\s*[TC]\d+\]"
_TOKEN = f"(?:{_RAW}|{_DELTA}|{_CTIME}|{_RELMIN}|{_RELOFF}|{ISO_RE}|{_CALLER})"

# Only the short prefix is matched with captures (capture engines are slow on whole lines);
# the message is the rest of the line, cut with str.slice.
PREFIX_HEAD_RE = rf"^((?:<\d{{1,3}}>)?(?:(?:{_FAC}) *:(?:{_LVL}) *: )?(?:{_TOKEN} ?)*)"
PREFIX_PARTS_RE = (
    rf"^(?:<(?P<pri>\d{{1,3}})>)?(?:(?P<fac>{_FAC}) *:(?P<lvl>{_LVL}) *: )?(?P<stamps>.*)$"
)
# `Jan 28 19:58:45 host kernel: msg` (host optional, as in the cadvisor sample), or the
# journalctl -o short-iso form `2026-11-29T17:25:08+0000 host kernel: msg`.
SYSLOG_RE = (
    r"^(?:(?P<smon>[A-Z][a-z]{2}) +(?P<sday>\d{1,2}) (?P<shms>\d\d:\d\d:\d\d(?:\.\d+)?)"
    r"|(?P<siso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z))) "
    r"(?:(?P<host>[^\s\[\]:]+) )?(?P<ident>[^\s\[\]:]+)(?:\[\d+\])?: ?"
)
KMSG_RE = r"^(?P<kpri>\d{1,4}),(?P<kseq>\d+),(?P<kusec>\d+),(?P<kflags>[^,;]*)(?P<kextra>,[^;]*)?;"
JOURNAL_SEP_RE = (
    r"^-- (?:Boot [0-9a-f]+|Logs begin at .*|Journal begins at .*|No entries|Reboot) --$"
)
ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"

_MONTHS = {
    1: "jan janv ene gen",
    2: "feb févr fev fevr",
    3: "mar mär mrt mars maerz",
    4: "apr avr abr",
    5: "may mai mei mag",
    6: "jun juin giu",
    7: "jul juil lug",
    8: "aug août ago aou",
    9: "sep sept set",
    10: "oct okt ott out",
    11: "nov",
    12: "dec dez déc dic",
}
MONTHS: dict[str, int] = {name: n for n, names in _MONTHS.items() for name in names.split()}


def month_number(expr: pl.Expr) -> pl.Expr:
    """Abbreviated month name (C, de, fr, es, it, nl, pt locales) -> 1..12, NULL if unknown."""
    key = expr.str.to_lowercase().str.strip_chars_end(".")
    return key.replace_strict(MONTHS, default=None, return_dtype=pl.Int32)


def pri_facility(pri: pl.Expr) -> pl.Expr:
    """Syslog priority number -> facility name (pri >> 3)."""
    return (pri // 8).replace_strict(
        dict(enumerate(FACILITIES)), default=None, return_dtype=pl.String
    )


def pri_level(pri: pl.Expr) -> pl.Expr:
    """Syslog priority number -> level name (pri & 7)."""
    return (pri % 8).replace_strict(dict(enumerate(LEVELS)), default=None, return_dtype=pl.String)


def _first_blank(col: str) -> pl.Expr:
    return pl.col("line_no").filter(pl.col(col)).min()


def tokenize_text(lines: pl.LazyFrame, syzkaller_header: bool, max_line_bytes: int) -> pl.DataFrame:
    """Split every text line into prefix fields and a message; mark structure and noise.

    Output columns (strings unless noted): line_no, line, role ('row', 'cont', 'structure:<r>',
    'skip:<r>'), pri, fac, lvl, stamps, msg, syslog fields, kmsg fields, stamped (bool).
    """
    toolong = pl.col("line").str.len_bytes() > max_line_bytes
    clean = pl.when(toolong).then(pl.lit("")).otherwise(pl.col("line").str.replace_all(ANSI_RE, ""))
    line = pl.col("line")
    df = (
        lines.with_columns(toolong.alias("toolong"))
        .with_columns(clean.alias("line"))
        .with_columns(
            (line.str.strip_chars() == "").alias("blank"),
            pl.when(line.str.contains(SYSLOG_RE))
            .then(line)
            .str.extract_groups(SYSLOG_RE)
            .alias("_sys"),
            pl.when(line.str.contains(SYSLOG_RE))
            .then(line.str.extract(f"({SYSLOG_RE})", 1).str.len_chars())
            .alias("_slen"),
        )
        .unnest("_sys")
        .with_columns(
            pl.when(pl.col("ident") == "kernel")
            .then(line.str.slice(pl.col("_slen")))
            .when(pl.col("ident").is_null())
            .then(line)
            .alias("body"),
        )
        .with_columns(
            pl.when(pl.col("body").str.contains(KMSG_RE))
            .then(pl.col("body"))
            .str.extract_groups(KMSG_RE)
            .alias("_k"),
            pl.col("body").str.extract(PREFIX_HEAD_RE, 1).alias("_head"),
        )
        .unnest("_k")
        .with_columns(
            pl.when(pl.col("kseq").is_not_null())
            .then(pl.col("body").str.slice(pl.col("body").str.find(";", literal=True) + 1))
            .alias("kmsg"),
            pl.when(pl.col("kseq").is_null() & (pl.col("_head") != ""))
            .then(pl.col("_head"))
            .str.extract_groups(PREFIX_PARTS_RE)
            .alias("_p"),
            pl.when(pl.col("kseq").is_null())
            .then(pl.col("body").str.slice(pl.col("_head").str.len_chars()))
            .alias("msg"),
        )
        .unnest("_p")
        .collect()
    )
    has_kmsg = bool(df["kseq"].is_not_null().any())
    stamped = (
        pl.col("ident").is_not_null()
        | pl.col("kmsg").is_not_null()
        | (pl.col("stamps").fill_null("") != "")
    )
    indented = pl.col("line").str.contains(r"^\s")
    meta = (
        pl.lit(syzkaller_header)
        & (pl.col("line_no") < pl.coalesce(_first_blank("blank"), pl.lit(0)))
        & pl.col("line").str.contains(r"^[A-Z][A-Z_]*: ")
    )
    df = df.with_columns(stamped.alias("stamped"), indented.alias("indented"))
    n_stamped = int(df["stamped"].sum())
    n_bare = int(df.filter(~pl.col("stamped") & ~pl.col("indented") & ~pl.col("blank")).height)
    stamped_file = n_stamped > 0 and n_stamped >= n_bare
    seen_stamp = pl.col("stamped").cum_sum() > 0
    role = (
        pl.when(pl.col("toolong"))
        .then(pl.lit("skip:line longer than max_line_bytes"))
        .when(meta)
        .then(pl.lit("structure:syzkaller metadata header"))
        .when(pl.col("blank"))
        .then(pl.lit("structure:blank"))
        .when(pl.col("line").str.contains(JOURNAL_SEP_RE))
        .then(pl.lit("structure:journal separator"))
        .when(pl.col("ident").is_not_null() & (pl.col("ident") != "kernel"))
        .then(pl.lit("skip:syslog line from a non-kernel program"))
        .when(pl.lit(has_kmsg) & pl.col("line").str.contains(r"^ [A-Z][A-Z0-9_]*="))
        .then(pl.lit("structure:kmsg dictionary (KEY=value)"))
        .when(pl.col("stamped"))
        .then(pl.lit("row"))
        .when(pl.lit(stamped_file) & pl.col("indented") & seen_stamp)
        .then(pl.lit("cont"))
        .when(pl.lit(stamped_file))
        .then(pl.lit("skip:unstamped line in a timestamped log (not kernel output)"))
        .otherwise(pl.lit("row"))
    )
    return df.with_columns(role.alias("role"))


def json_lines(lines: pl.LazyFrame) -> pl.DataFrame:
    """Classify each line of `dmesg --json` output and split `"key": value` fields."""
    line = pl.col("line").str.strip_chars()
    struct = line.str.contains(r'^(?:\{|\}|\},\s*\{|\]|\],?|\}\s*\]|\{?\s*"dmesg"\s*:\s*\[)\s*,?$')
    start = line.str.contains(r"^(?:\},\s*)?\{$")
    return lines.with_columns(
        start.cast(pl.Int64).cum_sum().alias("rec"),
        struct.alias("struct"),
        line.str.extract(r'^"(\w+)"\s*:', 1).alias("key"),
        line.str.extract(r'^"\w+"\s*:\s*(.*?)\s*,?$', 1).alias("val"),
    ).collect()
