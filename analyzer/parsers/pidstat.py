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
become NULL. Table ``pidstat``: its columns, types, units and meaning are in `TABLES`.

One path for every file size: the text comes in blocks of whole lines (`_blocks.Blocks`);
polars expressions find each block's banners and headers, and what the previous block
ended under (segment and header counts, the governing header, the row shapes learned)
carries over in `_State`. What a row says is defined by the whitespace split of its
header (`_Header.rx`: one token per column name, the rest is the command: `_split`).
Under a header of numbers only, rows are first cut by position (`_cut`): sysstat
right-aligns each value under its name and a value too wide for its column moves the rest
of the row right, so where the time and each value end (a *pattern*) is learned from rows
that fit no known pattern; a row is cut by a pattern only where the cut cannot differ from
the split (every slot starts with a blank and holds one number, a blank before the
command), else it takes the split. In a plain block the values of a cut are typed from
the bytes by the engine's `_sysstat.right_aligned` (the same values as the casts, which
take the rows it refuses). ``--human`` output (a ``4.2G`` anywhere in a row) is read
again with every row split.

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

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _pidstat_json as pj
from analyzer.parsers import _sysstat as ss
from analyzer.parsers._blocks import Block, Blocks, line_starts
from analyzer.parsers._read import read_head
from analyzer.parsers._sampler import count, reason, tally
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

__all__ = ["TABLES", "parse", "sniff"]

F64 = pl.Float64()
I64 = pl.Int64()

TABLES = {
    "pidstat": table(
        "one row per (sample time, PID, TID): all reports of that interval merged",
        ("ts", TS, "", "end of the interval (UTC); NULL when the date is unknown"),
        ("since_boot", pl.Boolean(), "", "values since process start (no interval); NULL unknown"),
        ("uid", I64, "", "real user ID (sysstat >= 10.x; NULL with -U or on 9.x)"),
        ("user", pl.Utf8(), "", "user name (-U)"),
        ("pid", I64, "", "process ID (TGID with -t; thread rows carry their TGID)"),
        ("tid", I64, "", "thread ID of a -t thread row; NULL for the process row"),
        (
            "command",
            pl.Utf8(),
            "",
            "command name, or the full command line with -l ('|__' removed)",
        ),
        ("usr_pct", F64, "%", "%usr: user CPU (per-CPU scale, can exceed 100 with -I off)"),
        ("system_pct", F64, "%", "%system: system CPU"),
        ("guest_pct", F64, "%", "%guest: running a virtual CPU"),
        ("wait_pct", F64, "%", "%wait: runnable but waiting for a CPU (sysstat >= 11.5)"),
        ("cpu_pct", F64, "%", "%CPU: total CPU"),
        ("cpu", pl.Int32(), "", "processor number the task last ran on"),
        ("usr_ms", I64, "ms", "usr-ms: user time (-T CHILD/ALL, cumulative)"),
        ("system_ms", I64, "ms", "system-ms: system time (-T CHILD/ALL)"),
        ("guest_ms", I64, "ms", "guest-ms: guest time (-T CHILD/ALL)"),
        ("minflt_s", F64, "1/s", "minor page faults per second"),
        ("majflt_s", F64, "1/s", "major page faults per second"),
        ("minflt_nr", I64, "", "minflt-nr: minor faults (-T CHILD/ALL)"),
        ("majflt_nr", I64, "", "majflt-nr: major faults (-T CHILD/ALL)"),
        ("vsz_kb", I64, "kB", "virtual size"),
        ("rss_kb", I64, "kB", "resident set size"),
        ("mem_pct", F64, "%", "%MEM: share of physical memory"),
        ("stk_size_kb", I64, "kB", "StkSize: stack reserved (-s)"),
        ("stk_ref_kb", I64, "kB", "StkRef: stack referenced (-s)"),
        ("kb_rd_s", F64, "kB/s", "kB_rd/s: read from storage (NULL where pidstat printed -1)"),
        ("kb_wr_s", F64, "kB/s", "kB_wr/s: written (NULL where -1)"),
        ("kb_ccwr_s", F64, "kB/s", "kB_ccwr/s: cancelled writes (NULL where -1)"),
        ("iodelay_ticks", I64, "ticks", "iodelay: block I/O delay in clock ticks (>= 10.x)"),
        ("cswch_s", F64, "1/s", "voluntary context switches per second"),
        ("nvcswch_s", F64, "1/s", "involuntary context switches per second"),
        ("threads", I64, "", "number of threads (-v)"),
        ("fd_nr", I64, "", "open file descriptors (-v)"),
        ("prio", pl.Int32(), "", "real-time priority (-R)"),
        ("policy", pl.Utf8(), "", "scheduling policy (-R): NORMAL, FIFO, RR, BATCH, IDLE..."),
    )
}
_SCHEMA = TABLES["pidstat"].schema

#: A header line: ``PID``/``TGID`` ... ``Command`` at the end.
HEADER_RE = r"\s(PID|TGID)\s.*\sCommand\s*$"
#: The column names of a header, from its first ID column to ``Command``.
SIG_RE = r"((?:UID|USER|PID|TGID)\s.*Command)\s*$"
#: The first token of a header (its time, or ``#`` of ``# Time``).
HDR_TOK_RE = r"^\s*(\S+(?:\s[AaPp]\.?[Mm]\.?)?)"
#: A row's time: ``HH:MM:SS`` (12-hour marker glued on) or epoch seconds.
TIME_TOKEN = r"^(\d{1,2}:\d{2}:\d{2}(?:[AaPp]\.?[Mm]\.?)?|\d{9,11})$"
#: A 12-hour marker after the time (``PM``, ``p.m.``).
AMPM_RE = r"^[AaPp]\.?[Mm]\.?(\s|$)"
#: A ``--human`` value (``4.2G``, ``359.4%``) somewhere in a row's text.
HUMAN_RE = r"\d[BkKMGTP%](\s|$)"

#: header token -> column
COLUMNS = {
    **{"UID": "uid", "USER": "user", "PID": "pid", "TGID": "tgid", "TID": "tid"},
    **{"%usr": "usr_pct", "%system": "system_pct", "%guest": "guest_pct", "%wait": "wait_pct"},
    **{"%CPU": "cpu_pct", "CPU": "cpu", "usr-ms": "usr_ms", "system-ms": "system_ms"},
    **{"guest-ms": "guest_ms", "minflt/s": "minflt_s", "majflt/s": "majflt_s"},
    **{"minflt-nr": "minflt_nr", "majflt-nr": "majflt_nr", "VSZ": "vsz_kb", "RSS": "rss_kb"},
    **{"%MEM": "mem_pct", "StkSize": "stk_size_kb", "StkRef": "stk_ref_kb"},
    **{"kB_rd/s": "kb_rd_s", "kB_wr/s": "kb_wr_s", "kB_ccwr/s": "kb_ccwr_s"},
    **{"iodelay": "iodelay_ticks", "cswch/s": "cswch_s", "nvcswch/s": "nvcswch_s"},
    **{"threads": "threads", "fd-nr": "fd_nr", "prio": "prio", "policy": "policy"},
}
#: columns kept as text
TEXT = {"user", "policy", "command"}
#: I/O columns where sysstat prints -1 for "not available"
SENTINEL = ("kb_rd_s", "kb_wr_s", "kb_ccwr_s")
#: columns a row may be cut into by position (numbers; ``-`` of ``-t`` rows excluded)
_SLICED = {c for c in _SCHEMA if c not in TEXT and c not in ("ts", "since_boot", "tid")}
#: Value-end patterns learned per header; rows of further shapes are split on whitespace.
MAX_PATTERNS = 16
_LEARN = 8  # rows of a block that fit no pattern, whose shapes are tried
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


def finish_number(v: pl.Expr, c: str) -> pl.Expr:
    """A Float64 value of column ``c`` -> its declared type (``-1`` sentinels become NULL;
    integers rounded as printed)."""
    if c in SENTINEL:
        v = pl.when(v < 0).then(None).otherwise(v)
    dtype = _SCHEMA.get(c, I64)
    return v.round(0).cast(dtype, strict=False) if dtype != F64 else v


@dataclass
class _Header:
    """A header's column names (``sig``, blanks collapsed) and how its rows are read:
    ``cols`` (the column of each value; ``_unknown<i>`` for a name not in `COLUMNS` or
    repeated), ``rx`` (the whitespace split of a row's text after its time), ``sliced``
    (numbers only: rows may be cut by position) and ``patterns`` (time and value ends
    learned from rows -> rows read with them, most used first)."""

    cols: list[str]
    rx: str
    sliced: bool
    patterns: dict[tuple[int, ...], int] = field(default_factory=dict)

    @classmethod
    def of(cls, sig: str) -> _Header:
        names = sig.split(" ")[:-1]
        cols = [COLUMNS.get(n, f"_unknown{i}") for i, n in enumerate(names)]
        cols = [c if c not in cols[:i] else f"_unknown{i}" for i, c in enumerate(cols)]
        rx = "^" + r"(\S+)\s+" * len(names) + r"(.*?)\s*$"
        return cls(cols, rx, bool(cols) and all(c in _SLICED for c in cols))


@dataclass
class _State:
    """What carries from block to block: ``human`` (values read with ``--human``
    suffixes), banners (``seg``) and headers (``block``) so far, the governing header
    (``sid``, an index into ``headers``) and its time of day, the banners seen (segment,
    text), rows without PID/TGID/TID, and whether a row looked like ``--human`` output."""

    human: bool
    seg: int = 0
    block: int = 0
    sid: int | None = None
    hdr_sec: int | None = None
    sigs: dict[str, int] = field(default_factory=dict)
    headers: list[_Header] = field(default_factory=list)
    banners: list[tuple[int, str]] = field(default_factory=list)
    n_bad: int = 0
    saw_human: bool = False


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse pidstat text or JSON output (see module doc)."""
    if pj.looks_like(read_head(path)):
        cov = Coverage()
        raw, dates, meta = pj.rows(path, ctx, cov)
        df, n_bad = _checked(raw, human=False)
        df = _clock(df).with_columns(hdr_sec=pl.lit(None, pl.Int32))
        cov.parsed -= n_bad
        cov.add_skipped("row does not match its header", n_bad)
    else:
        text = _text(path, ctx, human=False) or _text(path, ctx, human=True)
        assert text is not None  # read with --human, no row asks for it again
        df, dates, meta, cov = text
    df = df.with_columns(
        command=pl.col("command").str.strip_prefix("|__").str.strip_chars_end(),
        **{c: pl.lit(None, pl.Int64) for c in ("pid", "tid") if c not in df.columns},
    )
    if "tgid" in df.columns:  # -t: a thread row's TGID is the process row's above it
        df = df.with_columns(pid=pl.coalesce("pid", pl.col("tgid").forward_fill().over("block")))
    df = _since_boot(_times(df, dates, ctx, cov), ctx)
    out = TABLES["pidstat"].conform(merge(df))
    return ParseResult(tables={"pidstat": out}, coverage=cov, meta=meta)


def _text(
    path: Path, ctx: ParseContext, human: bool
) -> tuple[pl.DataFrame, pl.DataFrame, dict, Coverage] | None:
    """Rows (typed, with time columns), segment -> banner date, meta and coverage of a
    text file; None when a row looks like ``--human`` output and ``human`` is off."""
    st, cov = _State(human), Coverage()
    frames = []
    for b in Blocks(path):
        frames.append(_block(b, st, ctx, cov))
        if st.saw_human and not human:
            return None
    if cov.parsed == 0 and cov.n_structure == 0 and cov.n_skipped > 0:
        raise ParseError(f"{path.name}: no pidstat banner, header or row found")
    if human:
        cov.notes.append(
            "--human values: sizes read as binary multiples of kB (rounded as printed)"
        )
    cov.parsed -= st.n_bad
    cov.add_skipped("row does not match its header", st.n_bad)
    parsed = [(seg, ss.parse_banner(b)) for seg, b in st.banners]
    dates = pl.DataFrame(
        {"seg": [s for s, _ in parsed], "date": [b.date if b else None for _, b in parsed]},
        schema={"seg": pl.UInt32, "date": pl.Date},
    )
    meta = next((b.meta() for _, b in parsed if b), {})
    df = _concat(frames)
    return (df if df.width else _clock(pl.DataFrame(schema=_NONE))), dates, meta, cov


def _concat(frames: list[pl.DataFrame], sort: bool = False) -> pl.DataFrame:
    """``frames`` one after the other (columns a frame lacks are NULL); ``sort``: in
    line order."""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    same = all(f.schema == frames[0].schema for f in frames)
    df = pl.concat(frames, how="vertical" if same else "diagonal_relaxed")
    return df.sort("line_no") if sort and len(frames) > 1 else df


#: what a row keeps of its line's place
_KEEP = ("line_no", "seg", "block", "hdr_sec")
#: the columns of a text file without rows
_NONE = {"line_no": pl.UInt32, "seg": pl.UInt32, "block": pl.UInt32, "hdr_sec": pl.Int32}
_NONE |= {"time_tok": pl.String, "command": pl.String, "pid": pl.Int64}


def _block(b: Block, st: _State, ctx: ParseContext, cov: Coverage) -> pl.DataFrame:
    """The rows of one block (typed, time columns, in line order); its lines counted."""
    text = b.lines["line"]
    at = text.str.contains_any(["Command", "CPU)"]).arg_true()  # in every header and banner
    kinds = _kinds(text.gather(at), st, ctx)
    size = text.str.len_bytes()
    lines = b.lines.with_columns(
        banner=pl.repeat(False, len(text), eager=True).scatter(at, kinds["banner"]),
        header=pl.repeat(False, len(text), eager=True).scatter(at, kinds["header"]),
        long=size > ctx.max_line_bytes,
        **({"_len": size, "_at": line_starts(size.cast(pl.Int64))} if b.plain else {}),
    )
    hdr = kinds.filter("header")
    lines = _governed(lines, st, hdr["sid"], hdr["sec"])
    # headers and empty lines are what they are: counted here, not read
    n_avg, n_hdr = int((hdr["avg"] & ~hdr["long"]).sum()), int((~hdr["long"]).sum())
    count(cov, reason("structure", "average header"), n_avg)
    count(cov, reason("structure", "header"), n_hdr - n_avg)
    count(cov, reason("structure", "blank"), int((size == 0).sum()))
    known = (pl.col("header") & ~pl.col("long")) | (size == 0)
    parts: list[pl.DataFrame] = []
    if not st.human:
        sliced = [i for i, h in enumerate(st.headers) if h.sliced]
        fit = ~pl.col("header") & ~pl.col("long") & (size > 0) & pl.col("sid").is_in(sliced)
        fit = fit.fill_null(False)
        todo, lines = lines.filter(fit), lines.filter(~fit & ~known)
        sids = todo["sid"].unique().to_list()
        for sid in sids:
            sub = todo.filter(pl.col("sid") == sid) if len(sids) > 1 else todo
            got, left = _sliced(
                sub, st, st.headers[sid], b"," in b.data, b.data if b.plain else None
            )
            parts += got
            lines = pl.concat([lines, left])
    else:
        lines = lines.filter(~known)
    count(cov, None, sum(p.height for p in parts))
    rows = _classify(lines, cov)
    st.banners += lines.filter("banner").select("seg", "line").rows()
    if rows.height:
        st.saw_human = st.saw_human or bool(rows["rest"].str.contains(HUMAN_RE).any())
        df, n_bad = _checked(_split(rows, st), st.human)
        st.n_bad += n_bad
        parts.append(_clock(df))
    drop = ("rest", "why", "line", "sid", "banner", "header", "long", "time_tok", "_len", "_at")
    return _concat([p.drop(drop, strict=False) for p in parts], sort=True)


def _kinds(few: pl.Series, st: _State, ctx: ParseContext) -> pl.DataFrame:
    """Per line of ``few`` (lines that may be banners or headers), found once per text:
    ``banner``, ``header`` (``long``: too long; ``avg``: of an ``Average:`` table), and a
    header's signature (``sid``, registered in ``st``) and time of day (``sec``)."""
    uniq = few.unique(maintain_order=True)  # "# Time" headers: one text for all
    banner = uniq.str.contains(ss.BANNER_PL)
    header = uniq.str.contains(HEADER_RE) & ~banner
    # a SIG_RE match starts with a letter: the same without the header's clock
    keys = uniq.str.strip_chars_start("0123456789:")
    ukeys = keys.filter(header).unique(maintain_order=True)
    sigs = ukeys.str.extract(SIG_RE, 1).str.replace_all(r"\s+", " ").to_list()
    for sig in sigs:
        if sig is not None and sig not in st.sigs:
            st.sigs[sig] = len(st.headers)
            st.headers.append(_Header.of(sig))
    ids = pl.Series([st.sigs.get(sig) for sig in sigs], dtype=pl.Int32)
    tok = pl.lit(uniq).str.extract(HDR_TOK_RE, 1)
    df = pl.DataFrame(
        {
            "banner": banner,
            "header": header,
            "long": uniq.str.len_bytes() > ctx.max_line_bytes,
            "avg": uniq.str.contains(ss.AVERAGE_RE),
            "sid": keys.replace_strict(ukeys, ids, default=None, return_dtype=pl.Int32),
            "sec": pl.select(ss.seconds_of_day(tok).cast(pl.Int32)).to_series(),
        }
    )
    if len(uniq) == len(few):
        return df
    return df.select(pl.all().gather(few.replace_strict(uniq, pl.int_range(len(uniq), eager=True))))


def _governed(lines: pl.DataFrame, st: _State, sid: pl.Series, sec: pl.Series) -> pl.DataFrame:
    """``lines`` with ``seg`` (banners so far), ``block`` (headers so far) and the
    governing header's ``sid`` and ``hdr_sec`` (its time of day; ``sid``, ``sec``: of
    the block's headers); ``st`` moves on."""
    sid = pl.concat([pl.Series([st.sid], dtype=pl.Int32), sid])
    sec = pl.concat([pl.Series([st.hdr_sec], dtype=pl.Int32), sec])
    k = lines["header"].cum_sum()
    out = lines.with_columns(
        seg=(pl.col("banner").cum_sum() + st.seg).cast(pl.UInt32),
        block=(k + st.block).cast(pl.UInt32),
        sid=sid.gather(k),
        hdr_sec=sec.gather(k),
    )
    st.seg += int(lines["banner"].sum())
    st.block += len(sid) - 1
    st.sid, st.hdr_sec = sid[-1], sec[-1]
    return out


def _sliced(
    rows: pl.DataFrame, st: _State, h: _Header, comma: bool, data: bytes | None
) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """Rows of header ``h`` cut by one of its patterns (new ones learned from rows that
    fit none), and the rows left for the whitespace split (``data``: the block's bytes,
    when its lines are their bytes)."""
    got = []
    known = list(h.patterns)
    for ends in known:
        if not rows.height:
            break
        # where the other patterns have no blank: a row of another shape skips the cut
        tell = {max(set(ends) - set(o)) for o in known if o != ends} if ends != known[-1] else ()
        route = [pl.col("line").str.slice(e, 1) == " " for e in tell]
        fit = rows.select(pl.all_horizontal(route)).to_series() if route else None
        read, left = _cut(rows if fit is None else rows.filter(fit), st, h, ends, comma, data)
        rows = left if fit is None else pl.concat([rows.filter(~fit), left])
        h.patterns[ends] += read.height
        got.append(read)
    tried: set[tuple[int, ...]] = set()
    while rows.height and len(h.patterns) < MAX_PATTERNS:
        shapes = (_ends(t, len(h.cols)) for t in rows["line"].head(_LEARN).to_list())
        new = [e for e in dict.fromkeys(shapes) if e and e not in h.patterns and e not in tried]
        if not new:
            break
        tried.add(new[0])
        read, rows = _cut(rows, st, h, new[0], comma, data)
        if read.height:
            h.patterns[new[0]] = read.height
            got.append(read)
    h.patterns = dict(sorted(h.patterns.items(), key=lambda kv: -kv[1]))
    return [g for g in got if g.height], rows


def _ends(text: str, n: int) -> tuple[int, ...] | None:
    """Where the time and the ``n`` values after it end in ``text`` (blank-separated
    tokens), when a blank follows the last; None when it does not look so."""
    ends = [m.end() for m in itertools.islice(re.finditer(r"[^ ]+", text), n + 1)]
    if len(ends) <= n or text[:1] == " " or len(text) <= ends[-1]:
        return None
    return tuple(ends)


def _cut(
    rows: pl.DataFrame,
    st: _State,
    h: _Header,
    ends: tuple[int, ...],
    comma: bool,
    data: bytes | None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows of pattern ``ends`` with a time and numbers only, the other rows).

    Such a cut gives the whitespace split's tokens: the text after the time is a blank,
    then one slot per value that starts with a blank (stripping shortens it) and holds
    one number (it casts), then a blank before the command. With ``data`` the plain
    numbers are typed from the bytes first (`_from_bytes`: the same values), the rest by
    polars casts (`_from_text`)."""
    parts, other = [], None
    if data is not None and rows.height:
        fast, rows, other = _from_bytes(rows, h, ends, comma, data)
        parts.append(fast)
    if rows.height or not parts:
        slow, rows = _from_text(rows, h, ends, comma)
        parts.append(slow)
    read = pl.concat(parts) if len(parts) > 1 else parts[0]
    st.saw_human = st.saw_human or bool(read["command"].str.contains(HUMAN_RE).any())
    if other is not None and other.height:
        rows = pl.concat([rows, other]).sort("line_no") if rows.height else other
    return read, rows


def _from_text(
    rows: pl.DataFrame, h: _Header, ends: tuple[int, ...], comma: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_cut` by polars: each slot cut, stripped and cast."""
    line = pl.col("line")
    slots = list(itertools.pairwise(ends))
    cut = rows.select(
        *_KEEP,
        time_tok=line.str.slice(0, ends[0]),
        _tail=line.str.slice(ends[-1]),
        **{
            f"_s{j}": line.str.slice(a, b - a).str.strip_chars_start(" ")
            for j, (a, b) in enumerate(slots)
        },
    )
    vals, fine, typed = {}, [], {}
    for j, c in enumerate(h.cols):
        v = pl.col(f"_s{j}")
        v = v.str.replace(",", ".", literal=True) if comma else v
        if _SCHEMA[c] == F64:
            vals[c] = v.cast(F64, strict=False)
            fine.append(pl.col(c).is_not_null())
            typed[c] = finish_number(pl.col(c), c)
        else:  # an integer of up to 2**53 is what the float cast and rounding give
            vals[c] = v.cast(I64, strict=False)
            fine.append(pl.col(c).abs() <= 2**53)
            typed[c] = pl.col(c).cast(_SCHEMA[c], strict=False)
    ok = pl.all_horizontal(
        pl.col("_tail").str.starts_with(" "),
        *fine,
        *(pl.col(f"_s{j}").str.len_bytes() < b - a for j, (a, b) in enumerate(slots)),
    )
    read = cut.with_columns(**vals).select(
        *_KEEP, "time_tok", command=pl.col("_tail").str.strip_chars(), **typed, _ok=ok
    )
    ok = read["_ok"].fill_null(False)
    read, ok = _clocked(read.filter(ok).drop("_ok"), ok)
    return read, rows.filter(~ok)


def _from_bytes(
    rows: pl.DataFrame, h: _Header, ends: tuple[int, ...], comma: bool, data: bytes
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Of ``rows`` (``_at``, ``_len``: where each is in ``data``), those of pattern
    ``ends`` whose values are plain numbers, typed by `_sysstat.right_aligned` (time and
    command cut by polars, as `_from_text` does: the same frame); the other rows that have
    a blank where each slot starts and before the command; the rows without."""
    width = ends[-1]
    lay = ss.Layout(tuple(["time", *h.cols]), (0, *ends[:-1]), ends, width)
    at = rows.get_column("_at").to_numpy()
    fits = rows.get_column("_len").to_numpy() > width  # room for a blank and a command
    byte = np.frombuffer(data, np.uint8)
    long = at[fits]
    fits[fits] = np.logical_and.reduce([byte[long + a] == 32 for a in ends])
    other = rows.clear()
    if not fits.all():  # rows of another shape: no cut by this pattern
        other = rows.filter(pl.Series(~fits))
        rows, at = rows.filter(pl.Series(fits)), at[fits]
    ok, vals = ss.right_aligned(data, at, lay, range(1, len(ends)), comma)
    for k, c in enumerate(h.cols):  # an integer column takes integers only
        if _SCHEMA[c] != F64:
            ok &= vals[k] == np.round(vals[k])
    every = bool(ok.all())
    line = pl.col("line")
    read = (rows if every else rows.filter(pl.Series(ok))).select(
        *_KEEP,
        time_tok=line.str.slice(0, ends[0]),
        command=line.str.slice(width).str.strip_chars(),
        **{
            c: pl.Series(vals[k] if every else vals[k][ok]).cast(_SCHEMA[c], strict=False)
            for k, c in enumerate(h.cols)
        },
    )
    read, good = _clocked(read, pl.Series(ok))
    return read, rows.clear() if good.all() else rows.filter(~good), other


def _clocked(read: pl.DataFrame, ok: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """``read`` (rows where ``ok``) with its clock columns (`_clock`), without the rows
    whose time is neither epoch seconds nor a `TIME_TOKEN`; ``ok`` without them too."""
    read = _clock(read)
    if not read["epoch"].all():
        clock = read.select(pl.col("epoch") | pl.col("time_tok").str.contains(TIME_TOKEN))
        ok = ok.scatter(ok.arg_true().filter(~clock.to_series()), False)
        read = read.filter(clock.to_series())
    return read, ok


def _classify(lines: pl.DataFrame, cov: Coverage) -> pl.DataFrame:
    """Count ``lines`` (with ``banner``, ``header``, ``long`` and ``sid``) by what they
    are; return the rows among them with their time token and ``rest`` (the text after
    it). Capture-free regexes and ``splitn`` (capturing regexes are slower in polars)."""
    line = pl.col("line")
    avg = line.str.contains(ss.AVERAGE_RE)
    hdr = pl.col("header")
    lines = lines.with_columns(
        why=pl.when(pl.col("long"))
        .then(pl.lit(reason("skipped", "line too long")))
        .when(pl.col("banner"))
        .then(pl.lit(reason("structure", "banner")))
        .when(line.str.strip_chars() == "")
        .then(pl.lit(reason("structure", "blank")))
        .when(hdr & avg)
        .then(pl.lit(reason("structure", "average header")))
        .when(hdr)
        .then(pl.lit(reason("structure", "header")))
        .when(avg)
        .then(pl.lit(reason("structure", "average")))
    )
    tally(cov, lines.filter(pl.col("why").is_not_null()))
    rows = lines.filter(pl.col("why").is_null()).with_columns(
        s=line.str.strip_chars_start().str.splitn(" ", 2)
    )
    tok = pl.col("s").struct.field("field_0")
    after = pl.col("s").struct.field("field_1").str.strip_chars_start()
    ampm = after.str.contains(AMPM_RE)
    rows = rows.with_columns(
        time_tok=pl.when(tok.str.contains(TIME_TOKEN)).then(
            pl.when(ampm).then(tok + " " + after.str.slice(0, 2)).otherwise(tok)
        ),
        rest=pl.when(ampm).then(after.str.slice(2).str.strip_chars_start()).otherwise(after),
    ).with_columns(
        why=pl.when(pl.col("time_tok").is_null() | (pl.col("rest") == ""))
        .then(pl.lit(reason("skipped", "not a pidstat line")))
        .when(pl.col("sid").is_null())
        .then(pl.lit(reason("skipped", "row before any header")))
    )
    tally(cov, rows)
    return rows.filter(pl.col("why").is_null()).drop("s")


def _split(rows: pl.DataFrame, st: _State) -> pl.DataFrame:
    """Per header: cut each row's ``rest`` into its header's fields (strings)."""
    parts = []
    for sid in rows["sid"].unique().to_list():
        h = st.headers[sid]
        g = pl.col("rest").str.extract_groups(h.rx)
        fields = [g.struct.field(str(i + 1)).alias(c) for i, c in enumerate(h.cols)]
        fields.append(g.struct.field(str(len(h.cols) + 1)).alias("command"))
        sub = rows.filter(pl.col("sid") == sid).with_columns(fields)
        parts.append(sub.drop([c for c in h.cols if c.startswith("_unknown")]))
    return pl.concat(parts, how="diagonal_relaxed").sort("line_no")


def _checked(df: pl.DataFrame, human: bool) -> tuple[pl.DataFrame, int]:
    """The one cast step of split rows (strings -> declared types; decimal commas,
    ``human`` suffixes), without the rows that have no PID, TGID or TID, and their count."""
    exprs = []
    for c in [*_SCHEMA, "tgid"]:
        if c not in df.columns or c in TEXT or c in ("ts", "since_boot"):
            continue
        v = ss.number(pl.col(c).replace("-", None), human=human)
        exprs.append(finish_number(v, c).alias(c))
    df = df.with_columns(exprs)
    ids = [pl.col(c).is_null() for c in ("pid", "tgid", "tid") if c in df.columns]
    bad = df.select(pl.all_horizontal(ids)).to_series()
    return df.filter(~bad), int(bad.sum())


def _clock(df: pl.DataFrame) -> pl.DataFrame:
    """``epoch`` (the row's time is epoch seconds ``ep``), else ``sec``, its seconds of day."""
    tok = pl.col("time_tok")
    # 9 to 11 ASCII digits, no sign: epoch seconds without a regex
    quick = tok.str.len_bytes().is_between(9, 11) & ~tok.str.starts_with("+")
    quick = quick & ~tok.str.starts_with("-")
    t = df.select(ep=tok.cast(pl.Int64, strict=False), quick=quick)
    if (t["ep"].is_not_null() & t["quick"]).all():
        return df.with_columns(epoch=pl.lit(True), ep=t["ep"], sec=pl.lit(None, pl.Int32))
    epoch = tok.str.contains(r"^\d{9,11}$")
    df = df.with_columns(epoch=epoch, ep=pl.when(epoch).then(t["ep"]))
    if df["epoch"].all():  # seconds of day only where needed: a regex with groups
        return df.with_columns(sec=pl.lit(None, pl.Int32))
    return df.with_columns(sec=pl.when(~pl.col("epoch")).then(ss.seconds_of_day(tok)))


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
    if df.filter(~pl.col("epoch") & pl.col("date").is_null()).height:
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
    other = [c for c in _SCHEMA if c not in keys and c in df.columns]
    if _keys_increase(df):  # every group is one row: the same frame, much cheaper
        return df.select(*keys, "line_no", *other)
    return (
        df.group_by(keys, maintain_order=True)
        .agg(pl.col("line_no").min(), *(pl.col(c).drop_nulls().first() for c in other))
        .sort("line_no")
    )
