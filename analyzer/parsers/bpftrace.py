"""bpftrace and bcc histogram / map output -> ``bpf_hist`` and ``bpf_scalar``.

Supported (text, any bpftrace version from 0.9 to 0.2x; bcc tools' ``print_log2_hist`` /
``print_linear_hist``):

* bpftrace ``hist()``/``lhist()`` maps: a map line ``@usecs:`` / ``@[comm]:`` /
  ``@name[k1, k2]:`` then bucket rows ``[lo, hi)  count |@@@|`` with K/M/G/T suffixes
  (powers of 1024), single-value buckets ``[0]``, ``[1]``, the negative bucket
  ``(..., 0)`` and the lhist overflow bucket ``[64K, ...)``; multi-line stack keys
  (``@name[`` + indented frames + ``]:``, frames joined with ';').
* scalar maps ``@a[comm]: 26`` (count/sum/avg/min/max print the same way: stat
  ``value``), ``stats()`` lines ``@s: count 80723, average 8661, total 699159288``
  (stats ``count``/``average``/``total``), string maps (``text``), ``tseries()`` rows.
* bcc histograms: ``     usecs   : count     distribution`` headers with
  ``0 -> 1   : 233  |****|`` (log2) or ``5   : 12  |**|`` (linear) rows, per-key
  sections (``disk = 'sda'``: map ``disk``, key ``sda``).
* interval timestamps on their own line: ``HH:MM:SS`` (bpftrace ``time()`` default,
  bcc ``-T``; also ``[HH:MM:SS]``) dated with ``ctx.capture_start`` and rolled over at
  midnight, ISO 8601 (``2026-11-29T14:00:10Z``, offset or local), epoch seconds. A
  timestamp applies to the maps after it until the next one or two blank lines in a row
  (bpftrace's exit dump has no time: ``ts`` NULL). Local times use ``ctx.tz``.
* ``-f json``: NDJSON records ``hist``, ``map``, ``stats``, ``tseries``, ``time``,
  ``attached_probes`` (pretty-printed multi-line records too); see ``_bpftrace_json``.

Banners (``Attaching N probes...``, ``Tracing ... Hit Ctrl-C to end.``), titles and
``^C`` are structure; stderr noise (``ERROR: ... RLIMIT_MEMLOCK``), shell prompts and
prose of example transcripts are skipped with reasons. Other printf output (snoop
tables, stacks) is skipped as unsupported.

Tables: ``bpf_hist`` (ts, map, key, bucket_low, bucket_high, count, unit, style) and
``bpf_scalar`` (ts, map, key, stat, value, text). Buckets are ``[bucket_low,
bucket_high)``: high is exclusive, so bcc's ``2 -> 3`` is ``[2, 4)`` and JSON
``max`` is ``max + 1``.

How text is read: blocks of `_blocks.Blocks` that start at an empty line, so only the
timestamp in effect, a pending blank line and the midnight roll-over go on from block to
block (`_Carry`). A line's kind comes from its text alone, computed once per distinct
text (a capture repeats itself), except a bcc section key and a section title, which
also look at the next two lines. Each run of histogram rows takes map, key and
timestamp from the line that starts it (its segment): the context work runs on the
other lines plus the first row of each run.

Sample input::

    Attaching 5 probes...
    17:26:46
    @usecs:
    [1]                25440 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
    [2, 4)              6511 |@@@@@@@@@@@@@                                       |
    [64K, ...)             2 |                                                    |

    @s: count 80723, average 8661, total 699159288
    @a[dd]: 8663
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _blocks, _bpftrace_json, _read, base
from analyzer.parsers._nvbpf_time import (
    DayCarry,
    hms_seconds,
    local_to_utc,
    resolve_tz,
    time_of_day_to_ts,
)
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult

TABLES: dict[str, base.Table] = {
    "bpf_hist": base.table(
        "one row per histogram bucket per map key per printed interval",
        ("ts", TS, "", "interval end: the timestamp printed before the map (NULL if unknown)"),
        ("map", pl.String, "", "map name with '@' (bpftrace), or the bcc section/label"),
        ("key", pl.String, "", "map key as printed ('' when none)"),
        ("bucket_low", pl.Int64, "", "inclusive lower bound (NULL for the negative bucket)"),
        ("bucket_high", pl.Int64, "", "exclusive upper bound (NULL for an open overflow bucket)"),
        ("count", pl.Int64, "", "events in the bucket"),
        (
            "unit",
            pl.String,
            "",
            "usecs/nsecs/msecs/secs/bytes/kbytes from the map name or header, else NULL",
        ),
        ("style", pl.String, "", "'bpftrace', 'bcc' or 'json'"),
    ),
    "bpf_scalar": base.table(
        "one row per scalar map value (per key, per stat, per interval)",
        ("ts", TS, "", "interval end (tseries: interval start) or NULL if unknown"),
        ("map", pl.String, "", "map name with '@'"),
        ("key", pl.String, "", "map key as printed ('' when none)"),
        (
            "stat",
            pl.String,
            "",
            "'value' (count/sum/avg/min/max maps), or 'count'/'average'/'total' of stats()",
        ),
        ("value", pl.Float64, "", "numeric value (NULL for string maps)"),
        ("text", pl.String, "", "the value as printed when it is not a number"),
    ),
}

# Line kinds (on the line without trailing blanks).
BT_HDR = r"^(?:@[A-Za-z_0-9]*(?:\[.*\])?|\]):$"
STACK_OPEN = r"^@[A-Za-z_0-9]*\[$"
BT_ROW = r"^[\[(][^\])]*[\])]\s+\d+\s+\|[@ ]*\|\s*$"  # on the line as read
BT_SCALAR = r"^(?:@([A-Za-z_0-9]*)(?:\[(.*)\])?|\]): (.+)$"
BCC_HDR = r"^\s*(\S.*?)\s+: count\s+distribution$"
BCC_LOG2 = r"^\s*(\d+) -> (\d+)\s+: (\d+)\s+\|[*+ ]*\|$"
BCC_LIN = r"^\s*(\d+)\s+: (\d+)\s+\|[*+ ]*\|$"
BCC_KEY = r"^\s*(?:Bucket )?([A-Za-z_][\w ]*?) = (.+)$"
TS_ROW = r"^(\S+) +[|*][ *.]*[|*] (-?\d+(?:\.\d+)?|-)$"
TS_AXIS = r"^(?:\s+-?\d+(?:\.\d+)?\s+-?\d+(?:\.\d+)?|hh:mm:ss(?:\.ms)?\s+\|_+\||\s+v_+v)$"
TIME_HMS = r"^\[?(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)\]?$"
TIME_ISO = r"^(?:@[A-Za-z_0-9]*: )?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)(Z|[+-]\d{2}:?\d{2})?$"
TIME_EPOCH = r"^(?:@[A-Za-z_0-9]*time[A-Za-z_0-9]*: )?(\d{9,10}(?:\.\d+)?)$"
BANNER = r"^Attach(?:ing|ed) \d+ probes?|Ctrl-C|^Tracing .*\.\.\.?$|^hindsight \w+: "
NOISE = r"^(?:ERROR|WARNING|WARN|Error|stdin:\d|Lost \d+ events|\S+\.bt:\d+:\d+|libbpf:|perf_event_open|Failed to|cannot )"
PROMPT = r"^(?:#|\$|~\$|\w+@[\w.-]+[:~][^ ]*[$#]) +\S"
ROW_KINDS = ["bt_row", "bcc_row", "ts_row", "ts_axis"]
# Kinds from the text alone, first match wins: rows and map lines, then noise, then the
# rest (`_facts`); a bcc section key comes before noise and a title before the rest when
# the next lines say so (`_line_kinds`).
_K1 = [
    ("blank", r"^\s*$"),
    ("bt_hdr", BT_HDR),
    ("stack_open", STACK_OPEN),
    ("time", f"{TIME_HMS}|{TIME_ISO}|{TIME_EPOCH}"),
    ("bt_scalar", BT_SCALAR),
    ("bcc_hdr", BCC_HDR),
    ("bcc_row", f"{BCC_LOG2}|{BCC_LIN}"),
    ("ts_row", TS_ROW),
    ("ts_axis", TS_AXIS),
]
_K2 = [("noise", NOISE), ("banner", BANNER), ("ctrl_c", r"^\^C$"), ("prompt", PROMPT)]
# Coverage of the lines that are not rows, by kind.
_REASONS = {
    "bt_scalar": "P",
    "bt_hdr": "S:histogram/map header",
    "bcc_hdr": "S:histogram/map header",
    "stack_open": "S:stack key (map name)",
    "bcc_key": "S:bcc section key",
    "time": "S:timestamp",
    "blank": "S:blank",
    "banner": "S:banner",
    "ctrl_c": "S:interrupt echo (^C)",
    "title": "S:section title",
    "noise": "K:stderr noise",
    "prompt": "K:shell prompt (transcript)",
}
UNITS = {"us": "usecs", "ns": "nsecs", "ms": "msecs"} | {
    u: u for u in ("usecs", "nsecs", "msecs", "bytes", "kbytes", "secs")
}
_MULT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}

_SNIFF = [
    (r"^Attach(?:ing|ed) \d+ probes?", 0.9),
    (r'^\{"type": ?"(?:attached_probes|hist|map|stats|tseries|time|printf)"', 0.95),
    (r"^\s*\S.*\s+: count\s+distribution\s*$", 0.9),
    (r"^[\[(][^\])]*[\])]\s+\d+\s+\|[@ ]*\|\s*$", 0.9),
]


def sniff(head: str, name: str) -> float:
    """bpftrace banners, bucket rows or JSON records; bcc ``: count distribution`` headers."""
    score = max((p for rx, p in _SNIFF if re.search(rx, head, re.M)), default=0.0)
    if not score and len(re.findall(r"^@[A-Za-z_0-9]*(?:\[.*\])?: \S", head, re.M)) >= 2:
        score = 0.6
    if (
        not score
        and re.search(r"^\{\s*$", head, re.M)
        and re.search(r'"type":\s*"(?:hist|map|stats|tseries)"', head)
    ):
        score = 0.8
    return score


@dataclass
class _Carry:
    """What one block hands to the next (blocks start at an empty line)."""

    ts: datetime | None = None  # the timestamp in effect after the block
    prev_blank: bool = False  # the block's last line is blank
    times: DayCarry = field(default_factory=DayCarry)  # roll-over of timestamp lines
    tseries: DayCarry = field(default_factory=DayCarry)  # roll-over of tseries row times
    unplaced: int = 0  # timestamp lines whose ts is NULL


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one bpftrace / bcc output file (see the module docstring); each block's rows
    go to ``ctx.sink`` when there is one. JSON output is read whole."""
    cov = Coverage()
    tz, tz_note = resolve_tz(ctx)
    json_mode = _json_mode(path)
    out = _blocks.Rows(ctx, TABLES)
    placed = False
    if json_mode:
        df = _read.read_lines(path).collect()
        cov.total = df.height
        if _read.needs_utf8_repair(path):
            cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
        hist, scalars = _json(df, ctx, tz, cov)
        out.put({"bpf_hist": hist, "bpf_scalar": scalars})
        placed = _any_ts(hist, scalars)
    else:
        carry = _Carry()
        blocks = _blocks.Blocks(path, _cut_before_blank, lookahead=2)
        for block in blocks:
            cov.total += block.lines.height
            hist, scalars = _block(block.lines, block.ahead, ctx, tz, cov, carry)
            out.put({"bpf_hist": hist, "bpf_scalar": scalars})
            placed = placed or _any_ts(hist, scalars)
        if blocks.repaired:
            cov.notes.append("file was not valid UTF-8: invalid bytes replaced")
        if carry.unplaced:
            cov.notes.append(
                f"{carry.unplaced} timestamp line(s) could not be placed (time of day without"
                " a capture start date, or invalid): ts NULL"
            )
    if tz_note and placed:
        cov.notes.append(tz_note)
    empty = {name: pl.DataFrame() for name in TABLES}
    meta = {"format": "json" if json_mode else "text"}
    return ParseResult(tables=dict(out.tables(empty)), coverage=cov, meta=meta)


def _any_ts(*frames: pl.DataFrame) -> bool:
    return any(f.get_column("ts").is_not_null().any() for f in frames)


def _json_mode(path: Path) -> bool:
    """Whether the first line that is neither blank nor stderr noise starts with ``{``."""
    for block in _blocks.Blocks(path, chunk_bytes=1 << 16):
        line = pl.col("line")
        first = block.lines.filter((line.str.strip_chars() != "") & ~line.str.contains(NOISE))
        if first.height:
            return first.item(0, "line").startswith("{")
    return False


def _cut_before_blank(buf: bytes, limit: int) -> int:
    """Block cut: the start of the last empty line at or before ``limit``, -1 if none."""
    at = max(buf.rfind(b"\n\n", 0, limit + 1), buf.rfind(b"\n\r\n", 0, limit + 2))
    return at + 1 if at >= 0 else -1


def _count(cov: Coverage, reasons: pl.DataFrame) -> None:
    """Add ``r`` -> ``n`` rows to ``cov``: 'P' parsed, 'S:<why>' structure, 'K:<why>' skipped."""
    for r, n in reasons.iter_rows():
        if r == "P":
            cov.parsed += n
        elif r.startswith("S:"):
            cov.add_structure(r[2:], n)
        else:
            cov.add_skipped(r[2:], n)


# --- text: what a line's text says ---------------------------------------------------


def _suffixed(expr: pl.Expr) -> pl.Expr:
    """``64K`` -> 65536 (bpftrace suffixes are powers of 1024)."""
    g = expr.str.strip_chars().str.extract_groups(r"^(-?\d+)([KMGTPE]?)$")
    mult = g.struct.field("2").replace_strict(_MULT, default=None, return_dtype=pl.Int64)
    return g.struct.field("1").cast(pl.Int64, strict=False) * mult


def _bounds(label: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``bucket_low``, ``bucket_high`` of a bpftrace bucket label (between the brackets)."""
    parts = label.str.split_exact(",", 1)
    lo_s, hi_s = parts.struct.field("field_0"), parts.struct.field("field_1")
    lo = pl.when(lo_s.str.strip_chars() == "...").then(None).otherwise(_suffixed(lo_s))
    hi = (
        pl.when(hi_s.is_null())
        .then(_suffixed(lo_s) + 1)
        .when(hi_s.str.strip_chars() == "...")
        .then(None)
        .otherwise(_suffixed(hi_s))
    )
    return lo, hi


def _first(s: pl.Expr, kinds: list[tuple[str, str]]) -> pl.Expr:
    """The kind of the first regex ``s`` matches (NULL when none)."""
    return pl.coalesce(pl.when(s.str.contains(rx)).then(pl.lit(kind)) for kind, rx in kinds)


def _facts(texts: pl.Series) -> pl.DataFrame:
    """One row per distinct line text (``tid``: its row number; a capture repeats its
    rows, headers, blank lines and timestamps): ``kind`` from the text alone; ``dep`` when
    it also depends on the next lines (a possible bcc section key or title: ``bcc_key``,
    ``k2``, ``title``, ``k3`` decide with them); what the line before asks of it (``at``,
    ``empty``, ``bcch``); the values it holds. Bucket rows, most of a capture, match none
    of the kinds before theirs: they skip the kind chain."""
    u = pl.DataFrame({"line": texts.unique(maintain_order=True)})
    u = u.with_columns(bt=pl.col("line").str.contains(BT_ROW))
    is_bt = pl.col("bt")
    row = pl.col("line").str.extract_groups(r"^[\[(]([^\])]*)[\])]\s+(\d+)")
    bt = u.filter(is_bt).with_columns(
        label=row.struct.field("1"), count=row.struct.field("2").cast(pl.Int64, strict=False)
    )
    lo, hi = _bounds(pl.col("label"))
    labels = bt.select(pl.col("label").unique()).with_columns(lo=lo, hi=hi)
    bt = bt.join(labels, on="label", how="left", maintain_order="left").select(
        "line", "lo", "hi", "count", kind=pl.lit("bt_row")
    )
    s = pl.col("s")
    words = s.str.count_matches(r"\b[a-z]{2,}\b")
    prose = ((words >= 3) & (words * 5 >= s.str.count_matches(r"\S+") * 2)) | (
        (words >= 1) & s.str.contains(r"^\s*[A-Za-z(\"'][^|@]*[a-z)][.:!?,]$")
    )
    k3 = pl.coalesce(_first(s, [("indented", r"^\s+\S")]), pl.when(prose).then(pl.lit("prose")))
    log2, lin = s.str.extract_groups(BCC_LOG2), s.str.extract_groups(BCC_LIN)
    sec = s.str.extract_groups(BCC_KEY)
    val = s.str.extract(BT_SCALAR, 3).str.strip_chars()
    tsr = s.str.extract_groups(TS_ROW)
    c = pl.col
    other = (
        u.filter(~is_bt)
        .with_columns(s=c("line").str.strip_chars_end())
        .with_columns(
            k1=_first(s, _K1),
            k2=_first(s, _K2),
            k3=k3.fill_null("other"),
            bcc_key=s.str.contains(BCC_KEY),
            title=s.str.ends_with(":"),
        )
        .with_columns(
            kind=pl.coalesce("k1", "k2", "k3"),
            dep=c("k1").is_null() & (c("bcc_key") | (c("k2").is_null() & c("title"))),
            prose=prose,
            at=s.str.starts_with("@"),
            empty=s == "",
            bcch=s.str.contains(BCC_HDR),
            closing=s.str.starts_with("]:"),
            map0=pl.concat_str(pl.lit("@"), s.str.extract(r"^@([A-Za-z_0-9]*)", 1)),
            key0=s.str.extract(r"^@[A-Za-z_0-9]*\[(.*)\]:(?: .*)?$", 1).fill_null(""),
            lo=pl.coalesce(log2.struct.field("1"), lin.struct.field("1")).cast(
                pl.Int64, strict=False
            ),
            hi=pl.coalesce(log2.struct.field("2"), lin.struct.field("1")).cast(
                pl.Int64, strict=False
            )
            + 1,
            count=pl.coalesce(log2.struct.field("3"), lin.struct.field("2")).cast(
                pl.Int64, strict=False
            ),
            label=s.str.extract(BCC_HDR, 1),
            sec_map=sec.struct.field("1"),
            sec_key=sec.struct.field("2").str.strip_chars().str.strip_chars("'\""),
            val=val,
            num=val.cast(pl.Float64, strict=False),
            stats=val.str.extract_groups(r"^count (-?\d+), average (-?\d+), total (-?\d+)$"),
            ts_text=tsr.struct.field("1"),
            has_val=tsr.struct.field("2") != "-",
            ts_val=tsr.struct.field("2").cast(pl.Float64, strict=False),
        )
    )
    flags = ["dep", "prose", "at", "empty", "bcch", "closing"]
    return (
        pl.concat([bt, other], how="diagonal")
        .with_columns(pl.col(flags).fill_null(False), key0=pl.col("key0").fill_null(""))
        .with_row_index("tid")
    )


def _line_kinds(full: pl.DataFrame, n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``line_no``, ``line``, ``tid`` and ``kind`` of the first ``n`` lines of ``full`` (a
    block, then its look-ahead lines), and the `_facts` of its texts."""
    facts = _facts(full.get_column("line"))
    tid = full.join(facts.select("line", "tid"), on="line", how="left", maintain_order="left")[
        "tid"
    ]
    kind = facts.get_column("kind").gather(tid.head(n))
    dep = np.flatnonzero(facts.get_column("dep").gather(tid.head(n)).to_numpy())
    if dep.size:

        def ahead(col: str, k: int, fill: bool) -> pl.Series:
            """``col`` of the k-th line after each ``dep`` line (``fill`` past the end)."""
            at = dep + k
            got = np.full(dep.size, fill)
            inside = at < full.height
            got[inside] = facts.get_column(col).gather(tid.gather(at[inside]))
            return pl.Series(got)

        c = pl.col
        mine = facts.select(pl.all().gather(tid.gather(dep))).with_columns(
            n_bcch1=ahead("bcch", 1, False),
            n_at1=ahead("at", 1, False),
            n_empty1=ahead("empty", 1, True),
            n_at2=ahead("at", 2, False),
        )
        got = mine.select(
            pl.coalesce(
                pl.when(c("bcc_key") & c("n_bcch1")).then(pl.lit("bcc_key")),
                c("k2"),
                pl.when(c("title") & (c("n_at1") | (c("n_empty1") & c("n_at2")))).then(
                    pl.lit("title")
                ),
                c("k3"),
            )
        ).to_series()
        kind = kind.scatter(dep, got)
    lines = full.head(n).select("line_no", "line", tid.head(n), kind.alias("kind"))
    return lines, facts


# --- text: what a line means in its context ------------------------------------------


def _stacks(df: pl.DataFrame) -> pl.DataFrame:
    """Multi-line stack keys: ``@name[`` + indented frames + ``]:`` / ``]: value``.

    Adds ``frame_ok`` (a frame inside an open stack key) and, on the closing line,
    ``stack_map`` / ``stack_key`` (frames stripped and joined with ';'). A stack run
    (seg3) is a non-indented line and the indented lines after it.
    """
    kind = pl.col("kind")
    ind = kind == "indented"
    df = df.with_columns(
        seg3=(~ind).cast(pl.Int32).cum_sum(),
        st_start=pl.when(~ind).then(kind).forward_fill().fill_null(pl.lit("indented")),
        st_line=pl.when(~ind).then(pl.col("s")).forward_fill(),
    ).with_columns(frame_ok=ind & (pl.col("st_start") == "stack_open"))
    prev_open = (pl.col("st_start").shift(1) == "stack_open") & pl.col("closing")
    df = df.with_columns(prev_open=prev_open)
    if not df.get_column("prev_open").any():
        return df.with_columns(stack_map=pl.lit(None, pl.String), stack_key=pl.lit(None, pl.String))
    keys = (
        df.filter(pl.col("frame_ok"))
        .group_by("seg3")
        .agg(pl.col("s").str.strip_chars().str.join(";").alias("stack_key"))
    )
    df = df.join(keys, on="seg3", how="left", maintain_order="left")
    return df.with_columns(
        stack_map=pl.when("prev_open").then(
            pl.col("st_line").shift(1).str.extract(r"^(@[A-Za-z_0-9]*)\[", 1)
        ),
        stack_key=pl.when("prev_open").then(pl.col("stack_key").shift(1).fill_null("")),
    )


def _context(df: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """Map and key of map lines (``here_map``/``here_key``), and what each line takes from
    the start of its segment (a non-row line and the rows after it): ``starter`` (its
    kind), ``bt_map``/``bt_key``, and the bcc ``label`` and section key (``sec_map``/
    ``sec_key``, from the line before it when that is a section key)."""
    kind = pl.col("kind")
    df = _stacks(df).with_columns(
        here_map=pl.when("closing").then("stack_map").otherwise("map0"),
        here_key=pl.when("closing").then("stack_key").otherwise("key0"),
    )
    df = df.with_columns(
        kind=pl.when(kind.is_in(["bt_hdr", "bt_scalar"]) & pl.col("here_map").is_null())
        .then(pl.lit("other"))
        .otherwise(kind)
    )
    seg = (~kind.is_in(ROW_KINDS)).cast(pl.Int32).cum_sum()
    start = pl.when(seg != seg.shift(1, fill_value=-1)).then(pl.int_range(pl.len())).forward_fill()
    df = df.with_columns(_start=start)
    at = pl.col("_start")
    df = df.with_columns(
        starter=kind.gather(at),
        bt_map=pl.col("here_map").gather(at),
        bt_key=pl.col("here_key").gather(at),
        _label_tid=pl.col("tid").gather(at),
        _sec_tid=pl.when(kind.shift(1) == "bcc_key").then(pl.col("tid").shift(1)).gather(at),
    )
    label = facts.get_column("label").gather(df.get_column("_label_tid"))
    sec = facts.select("sec_map", "sec_key").select(pl.all().gather(df.get_column("_sec_tid")))
    return pl.concat([df, sec], how="horizontal").with_columns(label=label)


def _timestamps(df: pl.DataFrame, ctx: ParseContext, tz: str, carry: _Carry) -> pl.DataFrame:
    """``ts`` of every line: the last timestamp line before it, until two blank lines."""
    kind = pl.col("kind")
    blank = kind == "blank"
    blank2 = blank & blank.shift(1, fill_value=carry.prev_blank)
    mark = pl.when(kind == "time").then(pl.col("line_no").cast(pl.Int64)).when(blank2).then(0)
    df = df.with_columns(mark=mark.forward_fill())
    times = df.filter(kind == "time").select("line_no", "s")
    ts = _time_values(times, "s", ctx, tz, carry.times)
    carry.unplaced += ts.null_count()
    times = times.select(pl.col("line_no").cast(pl.Int64).alias("mark"), ts.alias("ts"))
    df = df.join(times, on="mark", how="left", maintain_order="left").with_columns(
        ts=pl.when(pl.col("mark").is_null()).then(pl.lit(carry.ts, TS)).otherwise(pl.col("ts"))
    )
    if df.height:
        carry.ts = df.get_column("ts")[-1]
        carry.prev_blank = df.get_column("kind")[-1] == "blank"
    return df


def _time_values(
    frame: pl.DataFrame, col: str, ctx: ParseContext, tz: str, carry: DayCarry | None = None
) -> pl.Series:
    """Timestamp strings (file order) -> UTC datetimes: HH:MM:SS, ISO 8601, epoch seconds.

    ``carry`` continues the midnight roll-over of times of day from earlier blocks.
    """
    s = pl.col(col).str.strip_chars()
    hms = hms_seconds(s.str.extract(TIME_HMS, 1))
    by_day = time_of_day_to_ts(hms, ctx, tz, carry)
    iso = s.str.extract_groups(TIME_ISO)
    naive = (
        iso.struct.field("1")
        .str.replace(" ", "T")
        .str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.f", strict=False)
    )
    off = (
        iso.struct.field("2")
        .str.replace("Z", "+00:00")
        .str.replace(r"^([+-]\d{2})(\d{2})$", "$1:$2")
    )
    sign = off.str.slice(0, 1).replace_strict(
        {"+": 1, "-": -1}, default=None, return_dtype=pl.Int64
    )
    off_min = sign * (
        off.str.slice(1, 2).cast(pl.Int64, strict=False) * 60
        + off.str.slice(4, 2).cast(pl.Int64, strict=False)
    )
    with_off = (naive - pl.duration(minutes=off_min)).dt.replace_time_zone("UTC").cast(TS)
    epoch = s.str.extract(TIME_EPOCH, 1).cast(pl.Float64, strict=False)
    from_epoch = (
        pl.from_epoch((epoch * 1_000_000).round(0).cast(pl.Int64), time_unit="us")
        .dt.replace_time_zone("UTC")
        .cast(TS)
    )
    out = frame.select(
        pl.coalesce(
            by_day if by_day is not None else pl.lit(None, TS),
            pl.when(off.is_not_null()).then(with_off).otherwise(local_to_utc(naive, tz)),
            from_epoch,
        ).alias("ts"),
        hms.alias("hms"),
    )
    if carry is not None:
        carry.advance(out.get_column("hms"))
    return out.get_column("ts")


def _unit(name: pl.Expr) -> pl.Expr:
    return name.str.to_lowercase().replace_strict(UNITS, default=None, return_dtype=pl.String)


def _block(
    lines: pl.DataFrame,
    ahead: pl.DataFrame,
    ctx: ParseContext,
    tz: str,
    cov: Coverage,
    carry: _Carry,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One block (``ahead``: the next lines) -> (hist rows, scalar rows); fills ``cov``
    and advances ``carry``."""
    full = pl.concat([lines, ahead]) if ahead.height else lines
    df, facts = _line_kinds(full, lines.height)
    is_row = pl.col("kind").is_in(ROW_KINDS)
    # The context runs on the lines that are not rows and on the first row of each run.
    first = ~is_row | ~is_row.shift(1, fill_value=False)
    df = df.with_columns(rep=first, at=first.cast(pl.Int64).cum_sum() - 1)
    reps = df.filter(pl.col("rep"))
    got = facts.select("s", "prose", "closing", "map0", "key0").select(pl.all().gather(reps["tid"]))
    reps = pl.concat([reps.select("line_no", "tid", "kind", "line"), got], how="horizontal")
    reps = reps.with_columns(s=pl.coalesce("s", "line"))  # bucket rows: the line
    reps = _timestamps(_context(reps, facts), ctx, tz, carry)
    starter = pl.col("starter")
    bt_hdr, bcc_hdr = starter == "bt_hdr", starter == "bcc_hdr"
    runs = reps.select(
        "ts",
        "starter",
        map=pl.when(bt_hdr).then("bt_map").when(bcc_hdr).then(pl.coalesce("sec_map", "label")),
        key=pl.when(bt_hdr).then("bt_key").when(bcc_hdr).then(pl.coalesce("sec_key", pl.lit(""))),
        unit=pl.when(bt_hdr)
        .then(_unit(pl.col("bt_map").str.strip_prefix("@")))
        .when(bcc_hdr)
        .then(_unit(pl.col("label"))),
        style=pl.when(bt_hdr).then(pl.lit("bpftrace")).when(bcc_hdr).then(pl.lit("bcc")),
    )
    rows = df.filter(is_row)
    got = facts.select("lo", "hi", "count", "ts_text", "has_val", "ts_val")
    rows = pl.concat(
        [
            rows.select("kind"),
            got.select(pl.all().gather(rows["tid"])),
            runs.select(pl.all().gather(rows["at"])),
        ],
        how="horizontal",
    )
    kind = pl.col("kind")
    valid = (
        ((kind == "bt_row") & bt_hdr)
        | ((kind == "bcc_row") & bcc_hdr)
        | (kind.is_in(["ts_row", "ts_axis"]) & bt_hdr)
    )
    rows = rows.with_columns(valid=valid.fill_null(False))
    hist = rows.filter(pl.col("valid") & kind.is_in(["bt_row", "bcc_row"])).select(
        "ts",
        "map",
        "key",
        bucket_low="lo",
        bucket_high="hi",
        count="count",
        unit="unit",
        style="style",
    )
    scalars = _scalars(reps.filter(kind == "bt_scalar"), rows, facts, ctx, tz, carry)
    _tally(reps.filter(~is_row), rows, cov)
    return hist, scalars


def _scalars(
    scal: pl.DataFrame,
    rows: pl.DataFrame,
    facts: pl.DataFrame,
    ctx: ParseContext,
    tz: str,
    carry: _Carry,
) -> pl.DataFrame:
    """Map value lines (value / stats() / text), then tseries rows -> bpf_scalar columns:
    the values, then the stats per stat (count, average, total), then the tseries."""
    scal = pl.concat(
        [scal, facts.select("val", "num", "stats").select(pl.all().gather(scal["tid"]))],
        how="horizontal",
    )
    stats = pl.col("stats")
    is_stats = stats.struct.field("1").is_not_null()
    ident = [pl.col("ts"), pl.col("here_map").alias("map"), pl.col("here_key").alias("key")]
    parts = [
        scal.filter(~is_stats).select(
            *ident,
            stat=pl.lit("value"),
            value="num",
            text=pl.when(pl.col("num").is_null()).then("val"),
        )
    ]
    for i, stat in enumerate(("count", "average", "total"), start=1):
        value = stats.struct.field(str(i)).cast(pl.Float64)
        parts.append(
            scal.filter(is_stats).select(
                *ident, stat=pl.lit(stat), value=value, text=pl.lit(None, pl.String)
            )
        )
    tsr = rows.filter(pl.col("valid") & (pl.col("kind") == "ts_row") & pl.col("has_val"))
    if tsr.height:
        tsr = tsr.with_columns(ts=_time_values(tsr, "ts_text", ctx, tz, carry.tseries))
    else:
        tsr = tsr.with_columns(ts=pl.lit(None, TS))
    parts.append(
        tsr.select(
            "ts", "map", "key", stat=pl.lit("value"), value="ts_val", text=pl.lit(None, pl.String)
        )
    )
    return pl.concat(parts, how="vertical_relaxed")


def _tally(other: pl.DataFrame, rows: pl.DataFrame, cov: Coverage) -> None:
    """Coverage of the block's lines: ``other`` (not rows), ``rows``."""
    kind, valid, has_val = pl.col("kind"), pl.col("valid"), pl.col("has_val")
    row = (
        pl.when(valid & kind.is_in(["bt_row", "bcc_row"]))
        .then(pl.lit("P"))
        .when(valid & (kind == "ts_row") & has_val)
        .then(pl.lit("P"))
        .when(valid & (kind == "ts_row"))
        .then(pl.lit("S:tseries interval without data"))
        .when(valid & (kind == "ts_axis"))
        .then(pl.lit("S:tseries axis"))
        .otherwise(pl.lit("K:histogram row without header"))
    )
    prose = (kind == "prose") | pl.col("prose")
    rest = pl.when(prose).then(pl.lit("K:not tool output (prose)"))
    rest = rest.otherwise(pl.lit("K:unrecognized line (unsupported output or garbage)"))
    line = (
        pl.when("frame_ok")
        .then(pl.lit("S:stack key (frame)"))
        .otherwise(kind.replace_strict(_REASONS, default=rest, return_dtype=pl.String))
    )
    keys = ["kind", "valid", "has_val"]
    reasons = pl.concat(
        [
            rows.group_by(keys).len().select(row.alias("r"), "len"),
            other.group_by("kind", "frame_ok", "prose").len().select(line.alias("r"), "len"),
        ]
    )
    _count(cov, reasons.group_by("r").agg(pl.col("len").sum()).sort("r"))


# --- JSON --------------------------------------------------------------------------


def _json(
    df: pl.DataFrame, ctx: ParseContext, tz: str, cov: Coverage
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A ``-f json`` file's lines -> (hist rows, scalar rows); fills ``cov``.

    A record starts at a line beginning with ``{`` and goes on to the next one; "time"
    records apply to the records after them until the next one or two blank lines.
    """
    s = pl.col("line").str.strip_chars()
    kind = (
        pl.when(s == "")
        .then(pl.lit("blank"))
        .when(s.str.contains(NOISE))
        .then(pl.lit("noise"))
        .when(pl.col("line").str.starts_with("{"))
        .then(pl.lit("start"))
        .otherwise(pl.lit("cont"))
    )
    df = df.with_columns(kind=kind).with_columns(
        rec=(pl.col("kind") == "start").cast(pl.Int32).cum_sum()
    )
    blank2 = (pl.col("kind") == "blank") & (pl.col("kind").shift(1) == "blank")
    df = df.with_columns(reset=blank2.cast(pl.Int32).cum_sum())
    body = df.filter(pl.col("kind").is_in(["start", "cont"]) & (pl.col("rec") > 0))
    recs = body.group_by("rec", maintain_order=True).agg(
        pl.col("line").str.join("\n"), pl.col("reset").first()
    )
    hist, scal, tstr, classes = _bpftrace_json.decode(recs.select("rec", "line").iter_rows())
    reason = (
        pl.when(pl.col("kind") == "blank")
        .then(pl.lit("S:blank"))
        .when(pl.col("kind") == "noise")
        .then(pl.lit("K:stderr noise"))
        .when(pl.col("rec") == 0)
        .then(pl.lit("K:unrecognized line (unsupported output or garbage)"))
        .otherwise(
            pl.col("rec").replace_strict(
                classes, default="K:malformed JSON record", return_dtype=pl.String
            )
        )
    )
    _count(cov, df.select(reason.alias("r")).group_by("r").len())
    # timestamps: "time" records apply to later records until a double blank line
    tframe = pl.DataFrame({"t": [t for _, t in tstr]}, schema={"t": pl.String})
    tvals = _time_values(tframe, "t", ctx, tz).to_list() if tstr else []
    time_at = {r: tvals[i] for i, (r, _) in enumerate(tstr) if isinstance(r, int)}
    rec_ts: dict[int, object] = {}
    cur, cur_reset = None, None
    for rec, reset in recs.select("rec", "reset").iter_rows():
        if cur_reset is not None and reset != cur_reset:
            cur = None
        cur_reset = reset
        cur = time_at.get(rec, cur)
        rec_ts[rec] = cur
    hist_df = pl.DataFrame(hist, schema=_bpftrace_json.HIST, orient="row").with_columns(
        ts=pl.col("rec").replace_strict(rec_ts, default=None, return_dtype=TS),
        unit=_unit(pl.col("map").str.strip_prefix("@")),
        style=pl.lit("json"),
    )
    rows = [(*r[:6], tvals[r[6]] if len(r) > 6 else rec_ts.get(r[0])) for r in scal]
    sc_df = pl.DataFrame(rows, schema={**_bpftrace_json.SCALAR, "ts": TS}, orient="row")
    return hist_df.drop("rec"), sc_df.drop("rec")
