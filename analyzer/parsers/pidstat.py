"""``pidstat`` (sysstat 9.1 - 12.7) text and JSON output -> table ``pidstat``.

Supported: reports ``-u -r -d -w -s -v -R`` and ``-T CHILD/ALL`` (usr-ms, minflt-nr...),
several per interval each with its own header, ``Average:`` tables (localized labels,
counted as structure, not rows); ``-h`` (everything for one PID on one line, ``# Time``
header) with ``HH:MM:SS`` or epoch seconds (``-H``, and ``-h`` on 10.x); ``UID`` (>= 10.x;
absent on 9.1), ``-U`` user names, ``%wait`` (>= 11.5), ``-t`` (``TGID TID`` columns and
``|__`` thread rows), ``-l`` (full command line with spaces), ``-e``, ``--dec``,
``--human``/``-I`` (``4.2G``, ``359.4%``: read as binary multiples of kB), de_DE decimal
commas, 12-hour ``AM/PM`` clocks, and ``-o JSON`` (12.7; see ``_pidstat_json``).

Rows of the different reports of one interval are merged into one row per (time, PID,
TID): a ``-u -r -d -w`` run gives one row with CPU, memory, I/O and context-switch
columns filled. Columns a run did not report stay NULL. The date comes from the banner,
the time of day from each row (midnight roll-over handled), read in ``ctx.tz`` (else
UTC, noted); epoch times are UTC. ``since_boot`` is true for the single report of a run
without interval (the header time equals the row time, or ``ctx.command`` has no
interval), false for interval reports, NULL when it cannot be told (``-h`` without a
known command). I/O values printed as ``-1`` (no permission / no I/O accounting)
become NULL.

Text files of 1 MiB and more first go through the numpy fast path (``_pidstat_fast``):
data rows under copies of the headers seen in the file's head are typed from their bytes,
every other line (and any row the fast path does not accept) is classified here, with
the header copy that governs it, so both paths together read every line once and give
the same table as this module alone (``tests/parsers/test_pidstat_fast.py``).

Table ``pidstat``: ts, since_boot, uid, user, pid, tid, command, usr_pct, system_pct,
guest_pct, wait_pct, cpu_pct, cpu, usr_ms, system_ms, guest_ms, minflt_s, majflt_s,
minflt_nr, majflt_nr, vsz_kb, rss_kb, mem_pct, stk_size_kb, stk_ref_kb, kb_rd_s, kb_wr_s,
kb_ccwr_s, iodelay_ticks, cswch_s, nvcswch_s, threads, fd_nr, prio, policy (types, units
and meaning in ``_pidstat_schema.TABLES``).

Sample input (``LC_ALL=C pidstat -u -d 1``)::

    Linux 6.18.44-fc-v669 (vm) 	11/29/26 	_x86_64_	(2 CPU)

    17:23:36      UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command
    17:23:37        0     21411   14.81   63.89    0.00   22.22   78.70     0  yes

    17:23:36      UID       PID   kB_rd/s   kB_wr/s kB_ccwr/s iodelay  Command
    17:23:37        0     21653      0.00  60135.78      0.00       0  dd

    Average:      UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command
    Average:        0     21411   16.88   56.49    0.00   26.95   73.38     -  yes
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _pidstat_fast as pf
from analyzer.parsers import _pidstat_json as pj
from analyzer.parsers import _sysstat as ss
from analyzer.parsers._pidstat_schema import (
    AMPM_RE,
    COLUMNS,
    HDR_TOK_RE,
    HEADER_RE,
    HUMAN_RE,
    SIG_RE,
    TABLES,
    TEXT,
    TIME_TOKEN,
    finish_number,
)
from analyzer.parsers._read import read_head, read_lines
from analyzer.parsers._sampler import reason, tally
from analyzer.parsers.base import Coverage, ParseContext, ParseResult

__all__ = ["TABLES", "parse", "sniff"]

_ARG_OPTS = {"-p", "-C", "-G", "-T", "-U", "-o", "-e", "--dec"}


def sniff(head: str, name: str) -> float:
    """Banner plus a header with PID/TGID ... Command, or pidstat JSON."""
    if pj.looks_like(head):
        return 0.95
    headers = [ln for ln in head.splitlines()[:200] if re.search(HEADER_RE, ln)]
    if not headers:
        return 0.0
    banner = any(ss.BANNER_RE.match(ln) for ln in head.splitlines()[:5])
    return 0.95 if banner else (0.75 if len(headers) > 1 else 0.6)


def command_since_boot(command: str | None) -> bool | None:
    """True when a pidstat command line has no interval argument (None if unknown)."""
    if not command or "pidstat" not in command:
        return None
    toks = command.split()
    i = next((n for n, t in enumerate(toks) if re.search(r"(^|/)pidstat$", t)), None)
    if i is None:
        return None
    prev = ""
    for t in toks[i + 1 :]:
        if re.fullmatch(r"\d+", t) and prev not in _ARG_OPTS:
            return False
        prev = t
    return True


def classify(lines: pl.LazyFrame, ctx: ParseContext, streaming: bool = True) -> pl.DataFrame:
    """Classify every line of ``lines`` (``line_no``, ``line`` and optionally ``dup``, kept);
    data rows keep their time token and the rest of the line. ``streaming``: collect with
    the streaming engine (a scanned file; in-memory lines need not).

    Capture-free regexes and ``splitn`` on the hot path (capturing regexes are several
    times slower in polars); header/banner text is only kept on their own rows.
    """
    line = pl.col("line")
    flags = lines.with_columns(
        is_banner=line.str.contains(ss.BANNER_PL),
        is_header=line.str.contains(HEADER_RE),
        is_avg=line.str.contains(ss.AVERAGE_RE),
        s=line.str.strip_chars_start().str.splitn(" ", 2),
    )
    tok = pl.col("s").struct.field("field_0")
    after = pl.col("s").struct.field("field_1").str.strip_chars_start()
    ampm = after.str.contains(AMPM_RE)
    lf = flags.with_columns(
        is_header=pl.col("is_header") & ~pl.col("is_banner"),
        time_tok=pl.when(tok.str.contains(TIME_TOKEN)).then(
            pl.when(ampm).then(tok + " " + after.str.slice(0, 2)).otherwise(tok)
        ),
        rest=pl.when(ampm).then(after.str.slice(2).str.strip_chars_start()).otherwise(after),
    )
    lf = lf.with_columns(
        seg=pl.col("is_banner").cum_sum(),
        block=pl.col("is_header").cum_sum(),
        text=pl.when(pl.col("is_header") | pl.col("is_banner")).then(line),
        why=pl.when(line.str.len_bytes() > ctx.max_line_bytes)
        .then(pl.lit(reason("skipped", "line too long")))
        .when(pl.col("is_banner"))
        .then(pl.lit(reason("structure", "banner")))
        .when(line.str.strip_chars() == "")
        .then(pl.lit(reason("structure", "blank")))
        .when(pl.col("is_header") & pl.col("is_avg"))
        .then(pl.lit(reason("structure", "average header")))
        .when(pl.col("is_header"))
        .then(pl.lit(reason("structure", "header")))
        .when(pl.col("is_avg"))
        .then(pl.lit(reason("structure", "average")))
        .when(pl.col("time_tok").is_null() | (pl.col("rest") == ""))
        .then(pl.lit(reason("skipped", "not a pidstat line"))),
    )
    cols = ["line_no", "seg", "block", "is_header", "is_banner", "text", "time_tok", "rest", "why"]
    if "dup" in lines.collect_schema().names():
        cols.append("dup")
    df = lf.select(cols).collect(engine="streaming" if streaming else "in-memory")
    df = df.with_columns(
        sig=pl.when(pl.col("is_header")).then(
            pl.col("text").str.extract(SIG_RE, 1).str.replace_all(r"\s+", " ")
        ),
        hdr_tok=pl.when(pl.col("is_header")).then(pl.col("text").str.extract(HDR_TOK_RE, 1)),
        banner=pl.when(pl.col("is_banner")).then(pl.col("text")),
    ).with_columns(
        # every block after the first starts with its header: a plain forward fill is
        # the same as one per block, and much cheaper
        sig=pl.when(pl.col("block") > 0).then(pl.col("sig").forward_fill()),
        hdr_tok=pl.when(pl.col("block") > 0).then(pl.col("hdr_tok").forward_fill()),
    )
    df = df.with_columns(
        why=pl.when(pl.col("why").is_null() & pl.col("sig").is_null())
        .then(pl.lit(reason("skipped", "row before any header")))
        .otherwise(pl.col("why"))
    )
    return df.drop("is_header", "is_banner", "text")


def _split_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """Per distinct header signature: cut the row into its header's fields (strings)."""
    parts = []
    for sig in rows["sig"].unique().drop_nulls().to_list():
        names = sig.split(" ")[:-1]
        cols = [COLUMNS.get(n, f"_unknown{i}") for i, n in enumerate(names)]
        # a mangled header may repeat a column: the first one wins
        cols = [c if c not in cols[:i] else f"_unknown{i}" for i, c in enumerate(cols)]
        rx = "^" + r"(\S+)\s+" * len(names) + r"(.*?)\s*$"
        sub = rows.filter(pl.col("sig") == sig)
        g = pl.col("rest").str.extract_groups(rx)
        fields = [g.struct.field(str(i + 1)).alias(c) for i, c in enumerate(cols)]
        fields.append(g.struct.field(str(len(cols) + 1)).alias("command"))
        parts.append(sub.with_columns(fields).drop([c for c in cols if c.startswith("_unknown")]))
    if not parts:
        return rows.with_columns(pid=pl.lit(None, pl.Utf8), command=pl.lit(None, pl.Utf8))
    return pl.concat(parts, how="diagonal_relaxed").sort("line_no")


def _typed(df: pl.DataFrame, human: bool) -> pl.DataFrame:
    """The one cast step: strings -> declared types (decimal commas; ``human`` suffixes)."""
    schema = TABLES["pidstat"].schema
    exprs = []
    for c in [*schema, "tgid"]:
        if c not in df.columns or c in TEXT or c in ("ts", "since_boot"):
            continue
        v = ss.number(pl.col(c).replace("-", None), human=human)
        exprs.append(finish_number(v, c).alias(c))
    return df.with_columns(exprs)


def _time_columns(df: pl.DataFrame) -> pl.DataFrame:
    """``epoch`` (the row's time is epoch seconds ``ep``), ``sec`` (else its seconds of
    day) and ``hdr_sec`` (the header's time of day) from the time tokens."""
    tok = pl.col("time_tok")
    epoch = tok.str.contains(r"^\d{9,11}$")
    return df.with_columns(
        epoch=epoch,
        ep=pl.when(epoch).then(tok.cast(pl.Int64, strict=False)),
        sec=pl.when(~epoch).then(ss.seconds_of_day(tok)),
        hdr_sec=ss.seconds_of_day(pl.col("hdr_tok")),
    )


def _times(df: pl.DataFrame, dates: pl.DataFrame, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """ts from epoch seconds, or banner date + time of day (+ roll-over) in ctx.tz."""
    local = df.filter(~pl.col("epoch")).height > 0
    if not local:  # epoch seconds only: no date, time of day or roll-over needed
        return df.with_columns(
            ts=pl.col("ep").mul(1_000_000).cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
            tkey=pl.col("ep"),
        )
    df = df.join(dates, on="seg", how="left", maintain_order="left")
    df = df.with_columns(days=ss.day_rollover(pl.col("sec")).over("seg"))
    zone = ss.tz_for(ctx, cov)
    naive = pl.col("date").cast(pl.Datetime("us")) + pl.duration(
        seconds=pl.col("sec").cast(pl.Int64) + 86400 * pl.col("days").cast(pl.Int64)
    )
    from_epoch = (pl.col("ep") * 1_000_000).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    df = df.with_columns(
        ts=pl.when(pl.col("epoch")).then(from_epoch).otherwise(ss.local_to_utc(naive, zone)),
        tkey=pl.when(pl.col("epoch"))
        .then(pl.col("ep"))
        .otherwise(pl.col("days").cast(pl.Int64) * 86400 + pl.col("sec")),
    )
    if local and df.filter(~pl.col("epoch") & pl.col("date").is_null()).height:
        cov.notes.append("no banner date: ts is NULL for time-of-day rows")
    return df


def _since_boot(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    by_cmd = command_since_boot(ctx.command)
    hdr_sec = pl.col("hdr_sec")
    from_hdr = pl.when(hdr_sec.is_not_null() & pl.col("sec").is_not_null()).then(
        hdr_sec == pl.col("sec")
    )
    return df.with_columns(since_boot=pl.coalesce(pl.lit(by_cmd, pl.Boolean), from_hdr))


def _keys_increase(df: pl.DataFrame) -> bool:
    """Whether (seg, tkey, pid, tid) strictly increases from row to row (file order), so
    that no two rows share a key and `merge` would change nothing."""
    if df.height < 2:
        return True

    def gt(c: str) -> pl.Expr:
        return pl.col(c) > pl.col(c).shift(1)

    def eq(c: str) -> pl.Expr:
        return pl.col(c) == pl.col(c).shift(1)

    tid, prev = pl.col("tid"), pl.col("tid").shift(1)
    tid_gt = (prev.is_null() & tid.is_not_null()) | (tid > prev).fill_null(False)
    up = gt("seg") | (eq("seg") & (gt("tkey") | (eq("tkey") & (gt("pid") | (eq("pid") & tid_gt)))))
    nulls = pl.col("tkey").null_count() + pl.col("pid").null_count()
    no_nulls, increasing = df.select(nulls == 0, up.slice(1).all()).row(0)
    return bool(no_nulls and increasing)


def merge(df: pl.DataFrame) -> pl.DataFrame:
    """One row per (segment, time, pid, tid): first non-NULL value of each column."""
    keys = ["seg", "tkey", "pid", "tid"]
    other = [c for c in TABLES["pidstat"].schema if c not in keys and c in df.columns]
    if _keys_increase(df):  # every group is one row: the same frame, much cheaper
        return df.select(*keys, "line_no", *other)
    return (
        df.group_by(keys, maintain_order=True)
        .agg(pl.col("line_no").min(), *(pl.col(c).drop_nulls().first() for c in other))
        .sort("line_no")
    )


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse pidstat text or JSON output (see module doc)."""
    cov = Coverage()
    head = read_head(path)
    fast = None
    if pj.looks_like(head):
        df, dates, meta = pj.rows(path, ctx, cov)
    else:
        fast = pf.read(path, ctx, cov, head, classify)
        lines = classify(read_lines(path), ctx) if fast is None else fast.lines
        df, dates, meta = _text_rows(lines, path, cov)
    human = fast is not None and fast.human
    if not human and df.height and "rest" in df.columns:
        human = bool(df["rest"].str.contains(HUMAN_RE).any())
    if human:
        cov.notes.append(
            "--human values: sizes read as binary multiples of kB (rounded as printed)"
        )
    if df.height:
        df = _typed(df, human)
        bad = pl.all_horizontal(
            pl.col(c).is_null() for c in ("pid", "tgid", "tid") if c in df.columns
        )
        bad = df.select(bad).to_series()
        n_bad = int(bad.sum())
        cov.parsed -= n_bad
        cov.add_skipped("row does not match its header", n_bad)
        df = df.filter(~bad)
    if df.height or fast is None or not fast.rows.height:
        df = _time_columns(df).with_columns(
            command=pl.col("command").str.strip_prefix("|__").str.strip_chars_end(),
            **{c: pl.lit(None, pl.Int64) for c in ("pid", "tid") if c not in df.columns},
        )
        if "tgid" in df.columns:  # -t: a thread row's TGID is the process row's above it
            df = df.with_columns(
                pid=pl.coalesce("pid", pl.col("tgid").forward_fill().over("block"))
            )
    if fast is not None and fast.rows.height:  # rows of both paths, in file order
        df = (
            pl.concat([df, fast.rows], how="diagonal_relaxed").sort("line_no")
            if df.height
            else fast.rows
        )
    df = _since_boot(_times(df, dates, ctx, cov), ctx)
    out = TABLES["pidstat"].conform(merge(df))
    return ParseResult(tables={"pidstat": out}, coverage=cov, meta=meta)


def _text_rows(
    lines: pl.DataFrame, path: Path, cov: Coverage
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Row frame (strings), seg -> banner date, meta from classified lines; coverage of
    the lines (``dup`` lines, copies of headers counted elsewhere, are left out)."""
    if "dup" in lines.columns:
        tally(cov, lines.filter(~pl.col("dup")))
        lines = lines.drop("dup")
    else:
        tally(cov, lines)
    if cov.parsed == 0 and cov.n_structure == 0 and cov.n_skipped > 0:
        raise ParseError(f"{path.name}: no pidstat banner, header or row found")
    banners = lines.filter(pl.col("banner").is_not_null()).select("seg", "banner")
    parsed = [(seg, ss.parse_banner(b)) for seg, b in banners.iter_rows()]
    dates = pl.DataFrame(
        {"seg": [s for s, _ in parsed], "date": [b.date if b else None for _, b in parsed]},
        schema={"seg": pl.UInt32, "date": pl.Date},
    )
    meta = next((b.meta() for _, b in parsed if b), {})
    rows = _split_rows(lines.filter(pl.col("why").is_null()))
    rows = rows.with_columns(pl.col("seg").cast(pl.UInt32))
    return rows, dates, meta
