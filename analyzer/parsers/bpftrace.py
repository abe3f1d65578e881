"""bpftrace and bcc histogram / map output -> ``bpf_hist`` and ``bpf_scalar``.

Supported (text, bpftrace 0.9 to 0.2x; bcc's ``print_log2_hist`` / ``print_linear_hist``):

* bpftrace ``hist()``/``lhist()`` maps: ``@usecs:`` / ``@name[k1, k2]:`` then bucket rows
  ``[lo, hi)  count |@@@|`` (K/M/G/T suffixes are powers of 1024), single-value buckets
  ``[1]``, the negative bucket ``(..., 0)``, the overflow bucket ``[64K, ...)``; multi-line
  stack keys (``@name[`` + indented frames + ``]:``, frames joined with ';').
* scalar maps ``@a[comm]: 26`` (stat ``value``), ``stats()`` lines ``@s: count 80723,
  average 8661, total 699159288`` (stats ``count``/``average``/``total``), string maps
  (``text``), ``tseries()`` rows.
* bcc histograms: ``usecs : count distribution`` headers with ``0 -> 1 : 233 |****|``
  (log2) or ``5 : 12 |**|`` (linear) rows, per-key sections (``disk = 'sda'``: map
  ``disk``, key ``sda``).
* timestamp lines: ``HH:MM:SS`` / ``[HH:MM:SS]`` (dated with ``ctx.capture_start``, rolled
  over at midnight), ISO 8601, epoch seconds. One applies to the maps after it until the
  next one or two blank lines in a row (the exit dump has no time: ``ts`` NULL); local
  times are read in ``ctx.tz``.
* ``-f json``: records ``hist``, ``map``, ``stats``, ``tseries``, ``time``,
  ``attached_probes``, one per line or pretty-printed, each decoded with ``json``.

Banners, titles and ``^C`` are structure; stderr noise, shell prompts and the prose of
example transcripts are skipped with reasons, other printf output as unsupported.

Tables: ``bpf_hist`` (ts, map, key, bucket_low, bucket_high, count, unit, style) and
``bpf_scalar`` (ts, map, key, stat, value, text). Buckets are ``[bucket_low,
bucket_high)``: bcc's ``2 -> 3`` is ``[2, 4)``, JSON ``max`` is ``max + 1``.

Text is read in `_blocks.Blocks` blocks cut at an empty line; the timestamp in effect, a
pending blank line and the midnight roll-overs go on from block to block (`_Carry`). A
line's kind comes from its text alone, computed once per distinct text, except a bcc
section key and a section title, which also look at the next two lines. A run of
histogram rows takes map, key and timestamp from the line that starts it.

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

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from analyzer.parsers import _blocks, _nvbpf_time, _read, base
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult

I64 = pl.Int64
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
BCC_ROW = r"^\s*(\d+)(?: -> (\d+))?\s+: (\d+)\s+\|[*+ ]*\|$"  # log2 `lo -> hi`, linear `v`
BCC_KEY = r"^\s*(?:Bucket )?([A-Za-z_][\w ]*?) = (.+)$"
TS_ROW = r"^(\S+) +[|*][ *.]*[|*] (-?\d+(?:\.\d+)?|-)$"
TS_AXIS = r"^(?:\s+-?\d+(?:\.\d+)?\s+-?\d+(?:\.\d+)?|hh:mm:ss(?:\.ms)?\s+\|_+\||\s+v_+v)$"
TIME_HMS = r"^\[?(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)\]?$"
TIME_ISO = (
    r"^(?:@[A-Za-z_0-9]*: )?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r"(Z|([+-])(\d{2}):?(\d{2}))?$"
)
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
    ("bcc_row", BCC_ROW),
    ("ts_row", TS_ROW),
    ("ts_axis", TS_AXIS),
]
_K2 = [("noise", NOISE), ("banner", BANNER), ("ctrl_c", r"^\^C$"), ("prompt", PROMPT)]
# Coverage of the lines that are not rows, by kind: 'P' parsed, 'S:' structure, 'K:' skipped.
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
UNREC = "K:unrecognized line (unsupported output or garbage)"
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
    times: _nvbpf_time.DayCarry = field(default_factory=_nvbpf_time.DayCarry)  # time lines
    tseries: _nvbpf_time.DayCarry = field(default_factory=_nvbpf_time.DayCarry)  # tseries rows
    unplaced: int = 0  # timestamp lines whose ts is NULL


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse one bpftrace / bcc output file (see the module docstring); each block's rows
    go to ``ctx.sink`` when there is one. JSON output is read whole."""
    cov = Coverage()
    tz, tz_note = _nvbpf_time.resolve_tz(ctx)
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


def _first(conds: Iterable[tuple[pl.Expr, str]]) -> pl.Expr:
    """The name paired with the first true condition (NULL when none)."""
    return pl.coalesce(pl.when(cond).then(pl.lit(name)) for cond, name in conds)


def _matches(s: pl.Expr, kinds: list[tuple[str, str]]) -> pl.Expr:
    """The kind of the first regex ``s`` matches (NULL when none)."""
    return _first((s.str.contains(rx), kind) for kind, rx in kinds)


# --- text: what a line's text says ---------------------------------------------------


def _suffixed(expr: pl.Expr) -> pl.Expr:
    """``64K`` -> 65536 (bpftrace suffixes are powers of 1024); NULL for ``...``."""
    g = expr.str.strip_chars().str.extract_groups(r"^(-?\d+)([KMGTPE]?)$")
    mult = g.struct.field("2").replace_strict(_MULT, default=None, return_dtype=I64)
    return g.struct.field("1").cast(I64, strict=False) * mult


def _facts(texts: pl.Series) -> pl.DataFrame:
    """One row per distinct line text (``tid``: its row number): ``kind`` from the text
    alone; ``dep`` when the next lines decide too (``bcc_key``, ``k2``, ``title``, ``k3``);
    what the line before asks of it (``at``, ``empty``, ``bcch``); the values it holds.
    Bucket rows, most of a capture, skip the kind chain."""
    u = pl.DataFrame({"line": texts.unique(maintain_order=True)})
    u = u.with_columns(bt=pl.col("line").str.contains(BT_ROW))
    is_bt = pl.col("bt")
    row = pl.col("line").str.extract_groups(r"^[\[(]([^\])]*)[\])]\s+(\d+)")
    bt = u.filter(is_bt).with_columns(
        label=row.struct.field("1"), count=row.struct.field("2").cast(I64, strict=False)
    )
    # Bucket bounds, once per label: ``[lo, hi)``, or ``[v]`` for ``[v, v + 1)``.
    parts = pl.col("label").str.split_exact(",", 1)
    lo, hi = parts.struct.field("field_0"), parts.struct.field("field_1")
    labels = bt.select(pl.col("label").unique()).with_columns(
        bucket_low=_suffixed(lo),
        bucket_high=pl.when(hi.is_null()).then(_suffixed(lo) + 1).otherwise(_suffixed(hi)),
    )
    bt = bt.join(labels, on="label", how="left", maintain_order="left").select(
        "line", "bucket_low", "bucket_high", "count", kind=pl.lit("bt_row")
    )
    s = pl.col("s")
    words = s.str.count_matches(r"\b[a-z]{2,}\b")
    prose = ((words >= 3) & (words * 5 >= s.str.count_matches(r"\S+") * 2)) | (
        (words >= 1) & s.str.contains(r"^\s*[A-Za-z(\"'][^|@]*[a-z)][.:!?,]$")
    )
    k3 = _first([(s.str.contains(r"^\s+\S"), "indented"), (prose, "prose")])
    bcc, sec = s.str.extract_groups(BCC_ROW), s.str.extract_groups(BCC_KEY)
    val = s.str.extract(BT_SCALAR, 3).str.strip_chars()
    tsr = s.str.extract_groups(TS_ROW)
    c = pl.col
    other = (
        u.filter(~is_bt)
        .with_columns(s=c("line").str.strip_chars_end())
        .with_columns(
            k1=_matches(s, _K1),
            k2=_matches(s, _K2),
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
            bucket_low=bcc.struct.field("1").cast(I64, strict=False),
            bucket_high=pl.coalesce(bcc.struct.field("2"), bcc.struct.field("1")).cast(
                I64, strict=False
            )
            + 1,
            count=bcc.struct.field("3").cast(I64, strict=False),
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
    dep = facts.get_column("dep").gather(tid.head(n)).arg_true()
    if dep.len():
        c = pl.col
        ahead = facts.select("bcch", "at", "empty")[tid].select(
            n_bcch1=c("bcch").shift(-1, fill_value=False),
            n_at1=c("at").shift(-1, fill_value=False),
            n_empty1=c("empty").shift(-1, fill_value=True),
            n_at2=c("at").shift(-2, fill_value=False),
        )
        mine = pl.concat([facts[tid.gather(dep)], ahead[dep]], how="horizontal")
        title = c("title") & (c("n_at1") | (c("n_empty1") & c("n_at2")))
        got = mine.select(
            pl.coalesce(
                pl.when(c("bcc_key") & c("n_bcch1")).then(pl.lit("bcc_key")),
                c("k2"),
                pl.when(title).then(pl.lit("title")),
                c("k3"),
            )
        ).to_series()
        kind = kind.scatter(dep, got)
    lines = full.head(n).select("line_no", "line", tid.head(n), kind.alias("kind"))
    return lines, facts


# --- text: what a line means in its context ------------------------------------------


def _stacks(df: pl.DataFrame) -> pl.DataFrame:
    """Multi-line stack keys (``@name[`` + indented frames + ``]:`` / ``]: value``): adds
    ``frame_ok`` (a frame inside an open stack key) and, on the closing line, ``stack_map``
    / ``stack_key`` (frames stripped, joined with ';'). A run (seg3): a non-indented line
    and the indented lines after it."""
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
    sec = facts.select(pl.col("sec_map", "sec_key").gather(df.get_column("_sec_tid")))
    return pl.concat([df, sec], how="horizontal").with_columns(label=label)


def _timestamps(df: pl.DataFrame, ctx: ParseContext, tz: str, carry: _Carry) -> pl.DataFrame:
    """``ts`` of every line: the last timestamp line before it, until two blank lines."""
    kind = pl.col("kind")
    blank = kind == "blank"
    blank2 = blank & blank.shift(1, fill_value=carry.prev_blank)
    mark = pl.when(kind == "time").then(pl.col("line_no").cast(I64)).when(blank2).then(0)
    df = df.with_columns(mark=mark.forward_fill())
    times = df.filter(kind == "time").select("line_no", "s")
    ts = _time_values(times, "s", ctx, tz, carry.times)
    carry.unplaced += ts.null_count()
    times = times.select(pl.col("line_no").cast(I64).alias("mark"), ts.alias("ts"))
    df = df.join(times, on="mark", how="left", maintain_order="left").with_columns(
        ts=pl.when(pl.col("mark").is_null()).then(pl.lit(carry.ts, TS)).otherwise(pl.col("ts"))
    )
    if df.height:
        carry.ts = df.get_column("ts")[-1]
        carry.prev_blank = df.get_column("kind")[-1] == "blank"
    return df


def _time_values(
    frame: pl.DataFrame,
    col: str,
    ctx: ParseContext,
    tz: str,
    carry: _nvbpf_time.DayCarry | None = None,
) -> pl.Series:
    """Timestamp strings (file order) -> UTC datetimes: HH:MM:SS, ISO 8601, epoch seconds.

    ``carry`` continues the midnight roll-over of times of day from earlier blocks.
    """
    s = pl.col(col).str.strip_chars()
    hms = _nvbpf_time.hms_seconds(s.str.extract(TIME_HMS, 1))
    by_day = _nvbpf_time.time_of_day_to_ts(hms, ctx, tz, carry)
    iso = s.str.extract_groups(TIME_ISO)
    naive = (
        iso.struct.field("1")
        .str.replace(" ", "T")
        .str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.f", strict=False)
    )
    # Offset groups: "2" the whole offset (Z or +hh:mm), "3" its sign, "4" hours, "5" minutes.
    sign = pl.when(iso.struct.field("3") == "-").then(-1).otherwise(1)
    off_min = sign * (iso.struct.field("4").cast(I64) * 60 + iso.struct.field("5").cast(I64))
    with_off = naive - pl.duration(minutes=off_min.fill_null(0))
    epoch = s.str.extract(TIME_EPOCH, 1).cast(pl.Float64, strict=False)
    from_epoch = pl.from_epoch((epoch * 1_000_000).round(0).cast(I64), time_unit="us")
    out = frame.select(
        pl.coalesce(
            by_day if by_day is not None else pl.lit(None, TS),
            pl.when(iso.struct.field("2").is_not_null())
            .then(with_off.dt.replace_time_zone("UTC").cast(TS))
            .otherwise(_nvbpf_time.local_to_utc(naive, tz)),
            from_epoch.dt.replace_time_zone("UTC").cast(TS),
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
    df = df.with_columns(rep=first, at=first.cast(I64).cum_sum() - 1)
    reps = df.filter(pl.col("rep"))
    got = facts.select("s", "prose", "closing", "map0", "key0")[reps["tid"]]
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
    got = facts.select("bucket_low", "bucket_high", "count", "ts_text", "has_val", "ts_val")
    rows = pl.concat([rows.select("kind"), got[rows["tid"]], runs[rows["at"]]], how="horizontal")
    # bcc rows need a bcc header; bpftrace buckets and tseries rows a bpftrace map line.
    kind = pl.col("kind")
    valid = pl.when(kind == "bcc_row").then(bcc_hdr).otherwise(bt_hdr)
    rows = rows.with_columns(valid=valid.fill_null(False))
    hist = rows.filter(pl.col("valid") & kind.is_in(["bt_row", "bcc_row"]))
    scalars = _scalars(reps.filter(kind == "bt_scalar"), rows, facts, ctx, tz, carry)
    _tally(reps.filter(~is_row), rows, cov)
    return hist.select(*TABLES["bpf_hist"].schema), scalars


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
    scal = pl.concat([scal, facts.select("val", "num", "stats")[scal["tid"]]], how="horizontal")
    stats = pl.col("stats")
    is_stats = stats.struct.field("1").is_not_null()
    ident = [pl.col("ts"), pl.col("here_map").alias("map"), pl.col("here_key").alias("key")]
    no_text = pl.lit(None, pl.String)
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
            scal.filter(is_stats).select(*ident, stat=pl.lit(stat), value=value, text=no_text)
        )
    tsr = rows.filter(pl.col("valid") & (pl.col("kind") == "ts_row") & pl.col("has_val"))
    tsr = tsr.with_columns(ts=_time_values(tsr, "ts_text", ctx, tz, carry.tseries))
    parts.append(tsr.select("ts", "map", "key", stat=pl.lit("value"), value="ts_val", text=no_text))
    return pl.concat(parts, how="vertical_relaxed")


def _tally(other: pl.DataFrame, rows: pl.DataFrame, cov: Coverage) -> None:
    """Coverage of the block's lines: ``other`` (not rows), ``rows``."""
    kind, valid = pl.col("kind"), pl.col("valid")
    tseries = valid & (kind == "ts_row")
    row = _first(
        [
            (valid & kind.is_in(["bt_row", "bcc_row"]), "P"),
            (tseries & pl.col("has_val"), "P"),
            (tseries, "S:tseries interval without data"),
            (valid & (kind == "ts_axis"), "S:tseries axis"),
            (pl.lit(True), "K:histogram row without header"),
        ]
    )
    prose = (kind == "prose") | pl.col("prose")
    rest = pl.when(prose).then(pl.lit("K:not tool output (prose)")).otherwise(pl.lit(UNREC))
    line = (
        pl.when("frame_ok")
        .then(pl.lit("S:stack key (frame)"))
        .otherwise(kind.replace_strict(_REASONS, default=rest, return_dtype=pl.String))
    )
    reasons = pl.concat(
        [
            rows.group_by("kind", "valid", "has_val").len().select(row.alias("r"), "len"),
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
    s, kind = pl.col("line").str.strip_chars(), pl.col("kind")
    starts = pl.col("line").str.starts_with("{")
    kinds = [(s == "", "blank"), (s.str.contains(NOISE), "noise"), (starts, "start")]
    df = df.with_columns(kind=_first([*kinds, (pl.lit(True), "cont")])).with_columns(
        rec=(kind == "start").cast(pl.Int32).cum_sum(),
        reset=((kind == "blank") & (kind.shift(1) == "blank")).fill_null(False).cum_sum(),
    )
    body = df.filter(kind.is_in(["start", "cont"]) & (pl.col("rec") > 0))
    recs = body.group_by("rec", maintain_order=True).agg(
        pl.col("line").str.join("\n"), pl.col("reset").first()
    )
    hist, scal, tstr, classes = _decode_json(recs.select("rec", "line").iter_rows())
    reason = pl.coalesce(
        kind.replace_strict(_REASONS, default=None, return_dtype=pl.String),  # blank, noise
        pl.when(pl.col("rec") == 0).then(pl.lit(UNREC)),
        pl.col("rec").replace_strict(
            classes, default="K:malformed JSON record", return_dtype=pl.String
        ),
    )
    _count(cov, df.select(reason.alias("r")).group_by("r").len())
    tframe = pl.DataFrame({"t": [t for _, t in tstr]}, schema={"t": pl.String})
    tvals = _time_values(tframe, "t", ctx, tz).to_list()
    time_at = {r: tvals[i] for i, (r, _) in enumerate(tstr) if isinstance(r, int)}
    mark = pl.when(pl.col("rec").is_in(list(time_at))).then("rec").forward_fill().over("reset")
    rec_ts = mark.replace_strict(time_at, default=None, return_dtype=TS)
    rec_ts = dict(recs.select("rec", rec_ts.alias("ts")).iter_rows())
    hist_df = pl.DataFrame(hist, schema=JSON_HIST, orient="row").with_columns(
        ts=pl.col("rec").replace_strict(rec_ts, default=None, return_dtype=TS),
        unit=_unit(pl.col("map").str.strip_prefix("@")),
        style=pl.lit("json"),
    )
    rows = [(*r[:6], tvals[r[6]] if len(r) > 6 else rec_ts.get(r[0])) for r in scal]
    sc_df = pl.DataFrame(rows, schema={**JSON_SCALAR, "ts": TS}, orient="row")
    return hist_df.drop("rec"), sc_df.drop("rec")


#: Row layouts of `_decode_json`'s hist rows and scalar rows (the record number first).
JSON_HIST = {"rec": I64, "map": pl.String, "key": pl.String}
JSON_HIST |= {"bucket_low": I64, "bucket_high": I64, "count": I64}
JSON_SCALAR = {"rec": I64, "map": pl.String, "key": pl.String, "stat": pl.String}
JSON_SCALAR |= {"value": pl.Float64, "text": pl.String}


def _decode_json(
    records: Iterable[tuple[int, str]],
) -> tuple[list[tuple], list[tuple], list[tuple[Any, str]], dict[int, str]]:
    """(record number, text) -> hist rows, scalar rows, time strings, class per record;
    one ``json.loads`` per record (a whole map print), not per line.

    Time strings are ``(rec, text)`` for "time" records and ``(("p", i), text)`` for the
    interval start of tseries point ``i``, whose scalar row ends with the string's index.
    Classes: 'P' (gave rows), 'S:<structure>' or 'K:<skip reason>'.
    """
    hist: list[tuple] = []
    scal: list[tuple] = []
    tstr: list[tuple[Any, str]] = []
    classes: dict[int, str] = {}
    for rec, text in records:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            obj = None
        ok = isinstance(obj, dict)
        classes[rec] = _json_record(rec, obj, hist, scal, tstr) if ok else "K:malformed JSON record"
    return hist, scal, tstr, classes


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if not isinstance(v, int) or abs(v) < 2**1023 else None  # float(10**400) raises


def _int64(v: object) -> int | None:
    """A JSON integer that fits Int64 (json.loads gives arbitrary ints, or strings)."""
    ok = isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63
    return v if ok else None  # type: ignore[return-value]


def _is_stats_leaf(x: Any) -> bool:
    return isinstance(x, dict) and "count" in x and not isinstance(x["count"], dict)


def _keyed(data: Any, is_leaf: Any) -> list[tuple[str, Any]]:
    """``value`` or ``{key: value}`` -> [(key, value)] ('' when unkeyed)."""
    if is_leaf(data):
        return [("", data)]
    if isinstance(data, dict):
        return [(str(k), v) for k, v in data.items()]
    return []


def _json_record(rec: int, obj: dict, hist: list, scal: list, tstr: list) -> str:
    """Append rows for one record; return its coverage class ('P', 'S:..', 'K:..')."""
    kind, data = obj.get("type"), obj.get("data")
    if kind == "attached_probes":
        return "S:banner"
    if kind == "time":
        tstr.append((rec, str(data).strip()))
        return "S:timestamp"
    if kind not in ("hist", "map", "stats", "tseries") or not isinstance(data, dict):
        return f"K:unsupported JSON record type {kind!r}"
    before = len(hist) + len(scal)
    for name, body in data.items():
        if kind == "hist":
            for key, buckets in _keyed(body, lambda x: isinstance(x, list)):
                for b in buckets if isinstance(buckets, list) else []:
                    if not isinstance(b, dict):
                        continue
                    lo, hi = _int64(b.get("min")), _int64(b.get("max"))
                    hi = _int64(hi + 1) if hi is not None else None
                    hist.append((rec, name, key, lo, hi, _int64(b.get("count"))))
        elif kind == "stats":
            for key, st in _keyed(body, _is_stats_leaf):
                if isinstance(st, dict):
                    scal.extend(
                        (rec, name, key, s, _num(st.get(s)), None)
                        for s in ("count", "average", "total")
                        if s in st
                    )
        elif kind == "tseries":
            for key, points in _keyed(body, lambda x: isinstance(x, list)):
                for p in points if isinstance(points, list) else []:
                    if isinstance(p, dict) and _num(p.get("value")) is not None:
                        tstr.append((("p", len(scal)), str(p.get("interval_start", ""))))
                        scal.append(
                            (rec, name, key, "value", _num(p["value"]), None, len(tstr) - 1)
                        )
        else:
            for key, v in _keyed(body, lambda x: not isinstance(x, dict)):
                if isinstance(v, dict | list):
                    continue
                scal.append(
                    (rec, name, key, "value", _num(v), None if _num(v) is not None else str(v))
                )
    return "P" if len(hist) + len(scal) > before else "S:empty map"
