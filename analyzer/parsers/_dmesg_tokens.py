"""Tokenizing kernel log lines for `analyzer.parsers.dmesg` (private helper).

Every function here is a polars expression pipeline over the whole line column: no loop per
line. The result of `tokenize_text` / `tokenize_json` is an untyped frame (strings plus a few
flags) that `dmesg.parse` places on the clock, classifies and casts once.
"""

from __future__ import annotations

from dataclasses import dataclass

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


#: Continuation lines one record may have; the next ones are skipped with `SKIP_CONT`.
MAX_CONT_LINES = 1000
SKIP_CONT = f"skip:continuation line beyond {MAX_CONT_LINES} lines of one record"
# A printk token right after the optional priority prefix: the line is stamped.
STAMP_HEAD_RE = rf"^(?:<\d{{1,3}}>)?(?:(?:{_FAC}) *:(?:{_LVL}) *: )?{_TOKEN}"
_SYSLOG_COLS = ("smon", "sday", "shms", "siso", "host", "ident")
_KMSG_COLS = ("kpri", "kseq", "kusec", "kflags", "kextra")


def _body(lines: pl.DataFrame, max_line_bytes: int) -> pl.LazyFrame:
    """``lines`` with ``line`` cleaned (ANSI codes removed; empty when longer than the
    bound, flagged ``toolong``), the syslog prefix fields (SYSLOG_RE's groups, NULL when
    none), ``_slen`` (the prefix's length) and ``body``: the line without a kernel syslog
    prefix, NULL for other programs' lines. Work a block does not need (no ESC byte, no
    syslog line) is left out; the columns are the same."""
    line = pl.col("line")
    toolong = line.str.len_bytes() > max_line_bytes
    has_esc = bool(lines["line"].str.contains("\x1b", literal=True).any())
    clean = line.str.replace_all(ANSI_RE, "") if has_esc else line
    df = lines.with_columns(
        toolong.alias("toolong"), pl.when(toolong).then(pl.lit("")).otherwise(clean).alias("line")
    )
    is_syslog = line.str.contains(SYSLOG_RE)
    if not df.select(is_syslog.any()).item():
        nulls = [pl.lit(None, pl.String).alias(c) for c in _SYSLOG_COLS]
        slen = pl.lit(None, pl.UInt32).alias("_slen")
        return df.lazy().with_columns(*nulls, slen, line.alias("body"))
    return (
        df.lazy()
        .with_columns(
            pl.when(is_syslog).then(line).str.extract_groups(SYSLOG_RE).alias("_sys"),
            pl.when(is_syslog)
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
    )


def _stamped() -> pl.Expr:
    """A line carries a stamp: a syslog prefix, a /dev/kmsg record, or a printk token
    (raw, delta, ctime, reltime, ISO, caller id) right after the optional priority prefix
    (columns of `_body`)."""
    body = pl.col("body")
    has = pl.col("ident").is_not_null() | body.str.contains(KMSG_RE)
    return (has | body.str.contains(STAMP_HEAD_RE)).fill_null(False)


def tokenize_text(lines: pl.DataFrame, facts: TextFacts, syzkaller_header: bool) -> pl.DataFrame:
    """Split every text line into prefix fields and a message; mark structure and noise.

    ``facts`` are the whole file's (`TextFacts`, gathered first): whether the file is
    timestamped, holds /dev/kmsg records, where its first stamp and blank line are.
    Output columns (strings unless noted): line_no, line, role ('row', 'cont',
    'structure:<r>', 'skip:<r>'), pri, fac, lvl, stamps, msg, syslog fields, kmsg fields,
    stamped (bool). Rows are ``lines``' rows, in order.
    """
    lf = _body(lines, facts.max_line_bytes).with_columns(_stamped().alias("stamped"))
    body = pl.col("body")
    if facts.has_kmsg:
        lf = lf.with_columns(
            pl.when(body.str.contains(KMSG_RE)).then(body).str.extract_groups(KMSG_RE).alias("_k")
        ).unnest("_k")
    else:
        lf = lf.with_columns(pl.lit(None, pl.String).alias(c) for c in _KMSG_COLS)
    df = (
        lf.with_columns(body.str.extract(PREFIX_HEAD_RE, 1).alias("_head"))
        .with_columns(
            pl.when(pl.col("kseq").is_not_null())
            .then(body.str.slice(body.str.find(";", literal=True) + 1))
            .alias("kmsg"),
            pl.when(pl.col("kseq").is_null() & (pl.col("_head") != ""))
            .then(pl.col("_head"))
            .str.extract_groups(PREFIX_PARTS_RE)
            .alias("_p"),
            pl.when(pl.col("kseq").is_null())
            .then(body.str.slice(pl.col("_head").str.len_chars()))
            .alias("msg"),
        )
        .unnest("_p")
        .collect()
    )
    line = pl.col("line")
    meta = (
        pl.lit(syzkaller_header)
        & (pl.col("line_no") < (facts.first_blank or 0))
        & line.str.contains(r"^[A-Z][A-Z_]*: ")
    )
    seen_stamp = pl.lit(facts.first_stamped is not None) & (
        pl.col("line_no") >= (facts.first_stamped or 0)
    )
    stamped_file = pl.lit(facts.stamped_file)
    role = (
        pl.when(pl.col("toolong"))
        .then(pl.lit("skip:line longer than max_line_bytes"))
        .when(meta)
        .then(pl.lit("structure:syzkaller metadata header"))
        .when(line.str.strip_chars() == "")
        .then(pl.lit("structure:blank"))
        .when(line.str.contains(JOURNAL_SEP_RE))
        .then(pl.lit("structure:journal separator"))
        .when(pl.col("ident").is_not_null() & (pl.col("ident") != "kernel"))
        .then(pl.lit("skip:syslog line from a non-kernel program"))
        .when(pl.lit(facts.has_kmsg) & line.str.contains(r"^ [A-Z][A-Z0-9_]*="))
        .then(pl.lit("structure:kmsg dictionary (KEY=value)"))
        .when(pl.col("stamped"))
        .then(pl.lit("row"))
        .when(stamped_file & line.str.contains(r"^\s") & seen_stamp)
        .then(pl.lit("cont"))
        .when(stamped_file)
        .then(pl.lit("skip:unstamped line in a timestamped log (not kernel output)"))
        .otherwise(pl.lit("row"))
    )
    df = df.with_columns(role.alias("role"))
    # One printk record is at most 1 KiB: longer runs of continuation lines are not one.
    is_cont = pl.col("role") == "cont"
    rank = is_cont.cast(pl.Int32).cum_sum().over((pl.col("role") == "row").cum_sum())
    too_many = is_cont & (rank > MAX_CONT_LINES)
    return df.with_columns(
        pl.when(too_many).then(pl.lit(SKIP_CONT)).otherwise("role").alias("role")
    )


@dataclass
class TextFacts:
    """What the roles of a text log's lines depend on beyond the line itself (whole file).

    ``n_stamped``: lines with a stamp; ``n_bare``: unstamped, unindented, non-blank lines;
    ``has_kmsg``: some line is a /dev/kmsg record; ``first_blank`` / ``first_stamped``:
    line numbers (1-based) of the first blank and first stamped line, None when none.
    Gathered by `add` over the file's lines, with the same expressions as `tokenize_text`.
    """

    max_line_bytes: int
    n_stamped: int = 0
    n_bare: int = 0
    has_kmsg: bool = False
    first_blank: int | None = None
    first_stamped: int | None = None

    @property
    def stamped_file(self) -> bool:
        """Timestamped log: unstamped lines are continuations or noise, not records."""
        return self.n_stamped > 0 and self.n_stamped >= self.n_bare

    def add(self, lines: pl.DataFrame) -> None:
        """Count the facts of some of the file's lines (``line_no``, ``line``), in order."""
        line = pl.col("line")
        stamped = pl.col("stamped")
        blank = line.str.strip_chars() == ""
        got = (
            _body(lines, self.max_line_bytes)
            .with_columns(_stamped().alias("stamped"))
            .select(
                stamped.sum().alias("n_stamped"),
                (~stamped & ~line.str.contains(r"^\s") & ~blank).sum().alias("n_bare"),
                pl.col("body").str.contains(KMSG_RE).fill_null(False).any().alias("has_kmsg"),
                pl.col("line_no").filter(blank).min().cast(pl.Int64).alias("first_blank"),
                pl.col("line_no").filter(stamped).min().cast(pl.Int64).alias("first_stamped"),
            )
            .collect()
            .row(0, named=True)
        )
        self.n_stamped += int(got["n_stamped"] or 0)
        self.n_bare += int(got["n_bare"] or 0)
        self.has_kmsg = self.has_kmsg or bool(got["has_kmsg"])
        if self.first_blank is None:
            self.first_blank = got["first_blank"]
        if self.first_stamped is None:
            self.first_stamped = got["first_stamped"]


def json_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Classify each line of `dmesg --json` output and split `"key": value` fields.

    ``rec`` numbers the records (a line ``{`` or ``},{`` opens one), ``rec_line`` is the
    line number of the line that opened the line's record (1 before the first), and
    ``capped`` marks lines `MAX_JSON_RECORD_LINES` or more after it (not read: util-linux
    prints a handful of fields per record).
    """
    line = pl.col("line").str.strip_chars()
    struct = line.str.contains(r'^(?:\{|\}|\},\s*\{|\]|\],?|\}\s*\]|\{?\s*"dmesg"\s*:\s*\[)\s*,?$')
    start = line.str.contains(r"^(?:\},\s*)?\{$")
    rec_line = pl.when(start).then(pl.col("line_no")).forward_fill().fill_null(1)
    return (
        lines.lazy()
        .with_columns(
            start.cast(pl.Int64).cum_sum().alias("rec"),
            rec_line.cast(pl.Int64).alias("rec_line"),
            struct.alias("struct"),
            line.str.extract(r'^"(\w+)"\s*:', 1).alias("key"),
            line.str.extract(r'^"\w+"\s*:\s*(.*?)\s*,?$', 1).alias("val"),
        )
        .with_columns(
            (pl.col("line_no").cast(pl.Int64) - pl.col("rec_line") >= MAX_JSON_RECORD_LINES).alias(
                "capped"
            )
        )
        .collect()
    )


#: Lines of one `dmesg --json` record that are read (from the line that opens it).
MAX_JSON_RECORD_LINES = 16
