"""mpstat (sysstat 9.1 … 12.7) text and ``-o JSON`` output.

Supported: the CPU table (``-u``, ``-P ALL``/``-P 0,3-5``; 9.x without ``%gnice``; ``-T`` with
``CORE SOCK NODE`` columns, not stored), the node table (``-N``), the interrupt tables
``-I SUM`` (``CPU intr/s``), ``-I CPU`` and ``-I SCPU`` (one column per IRQ / softirq, stored
long: one row per CPU and IRQ), ``-A``, ``-H``, ``--dec``, ``-U`` (epoch seconds), C / en_US
(12-hour) / de_DE (decimal comma, ``Durchschn.:``) / ISO locales, 11.5.7's NUL bytes, CRLF;
JSON (11.5+) in :mod:`._mpstat_json`. Columns are mapped by header name, never by position.

Times: the date comes from the banner, the time of day from each row (midnight roll-over
handled); local times are read in ``ctx.tz`` (else UTC + note). ``since_boot`` is true for a
report whose row time equals its header time (``mpstat`` without an interval prints
statistics since boot that way; interval reports show the previous sample time in the
header). ``Average:`` blocks are structure, not rows.

Tables: ``mpstat_cpu`` (one row per CPU and ``all`` per report), ``mpstat_node`` (per NUMA
node), ``mpstat_irq`` (per CPU and interrupt); columns, types and units are in ``TABLES``.

Sample input (``mpstat -P ALL 1 1``, sysstat 12.6.1)::

    Linux 6.18.44-fc-v669 (vm) 	11/29/26 	_x86_64_	(2 CPU)

    17:23:36     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
    17:23:37     all   56.00    0.00   43.00    0.00    0.00    1.00    0.00    0.00    0.00    0.00
    17:23:37       0   19.00    0.00   81.00    0.00    0.00    0.00    0.00    0.00    0.00    0.00
    17:23:37       1   93.00    0.00    5.00    0.00    0.00    2.00    0.00    0.00    0.00    0.00

    Average:     all   56.00    0.00   43.00    0.00    0.00    1.00    0.00    0.00    0.00    0.00

How the text is read: block by block (:class:`._blocks.Blocks`, so memory stays a few blocks
whatever the file size; each block's rows go to ``ctx.sink`` when there is one). A line is a
header (``<time> CPU|NODE ...``), a row (``<time> all|<n> ...``) or, for the few others, blank,
banner, ``Average:`` or unrecognized. A row belongs to the last header above it, across
blocks; rows are cut at their header's column positions (:func:`._sysstat.aligned_fields`)
and re-read by whitespace split when they do not fit it. A header layout is the header
without its time; the first 64 of a file are read, the rows of later ones are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _mpstat_json, _read, base
from analyzer.parsers import _sysstat as s

_I32, _F, _S, _B = pl.Int32, pl.Float64, pl.String, pl.Boolean
_HEAD: tuple[tuple[str, pl.DataType, str, str], ...] = (
    ("ts", base.TS, "", "end of the sample interval (UTC): banner date + row time of day"),
    ("since_boot", _B, "", "averages since boot (one-shot mpstat); NULL when unknown (JSON)"),
)
_PCT: tuple[tuple[str, pl.DataType, str, str], ...] = (
    ("usr_pct", _F, "%", "time in user code (%usr), guest time excluded"),
    ("nice_pct", _F, "%", "time in niced user code (%nice)"),
    ("sys_pct", _F, "%", "time in the kernel (%sys), IRQ time excluded"),
    ("iowait_pct", _F, "%", "idle with outstanding disk IO (%iowait)"),
    ("irq_pct", _F, "%", "time serving hardware interrupts (%irq)"),
    ("soft_pct", _F, "%", "time serving softirqs (%soft)"),
    ("steal_pct", _F, "%", "time stolen by the hypervisor (%steal)"),
    ("guest_pct", _F, "%", "time running a virtual CPU (%guest)"),
    ("gnice_pct", _F, "%", "time running a niced guest (%gnice; NULL in 9.x)"),
    ("idle_pct", _F, "%", "idle without outstanding IO (%idle)"),
)
TABLES: dict[str, base.Table] = {
    "mpstat_cpu": base.table(
        "one row per CPU (and the 'all' average) per mpstat report",
        *_HEAD,
        ("cpu", _I32, "", "CPU number; -1 for the 'all' row"),
        *_PCT,
    ),
    "mpstat_node": base.table(
        "one row per NUMA node (and 'all') per mpstat -N report",
        *_HEAD,
        ("node", _I32, "", "NUMA node number; -1 for the 'all' row"),
        *_PCT,
    ),
    "mpstat_irq": base.table(
        "one row per CPU and interrupt per mpstat -I report (long form of the wide tables)",
        *_HEAD,
        ("cpu", _I32, "", "CPU number; -1 for the 'all' row"),
        ("kind", _S, "", "'sum' (-I SUM intr/s), 'hard' (-I CPU) or 'soft' (-I SCPU softirqs)"),
        ("irq", _S, "", "IRQ name without '/s' (24, NMI, LOC, TIMER, NET_RX...); 'sum' for SUM"),
        ("per_s", _F, "1/s", "interrupts per second"),
    ),
}
_PCT_COLS = {
    "%usr": "usr_pct",
    "%user": "usr_pct",
    "%nice": "nice_pct",
    "%sys": "sys_pct",
    "%system": "sys_pct",
    "%iowait": "iowait_pct",
    "%irq": "irq_pct",
    "%soft": "soft_pct",
    "%steal": "steal_pct",
    "%guest": "guest_pct",
    "%gnice": "gnice_pct",
    "%idle": "idle_pct",
}
_SOFT = {"HI/s", "TIMER/s", "NET_TX/s", "NET_RX/s", "BLOCK/s", "TASKLET/s", "SCHED/s", "RCU/s"}
_T = r"^(\d{2}:\d{2}:\d{2}(?: ?[AaPp]\.?[Mm]\.?)?|\d{9,11})\s+"
_HEADER = _T + r"(CPU|NODE)\s+\S"
_ROW = _T + r"(all|\d+)\s+\S"
_MAX_LAYOUTS = 64


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is mpstat output (text or JSON)."""
    if re.search(
        r"(?m)^\S+(?: [AP]M)?\s+(CPU|NODE)(\s+(CORE|SOCK|NODE))*\s+%usr\s+%nice\s+%sys\s+%iowait\s+%irq",
        head,
    ):
        return 0.95
    if re.search(r"(?m)^\S+(?: [AP]M)?\s+CPU\s+intr/s\s*$", head):
        return 0.9
    sadf = '"file-date"' in head or '"sysdata-version"' in head  # sadf -j, not mpstat
    if '"sysstat"' in head and '"cpu-load"' in head and '"usr"' in head and not sadf:
        return 0.95
    return 0.0


def _other_kind() -> pl.Expr:
    """The kind of a line that is neither a header nor a row."""
    line = pl.col("line")
    return (
        pl.when(line.str.contains(r"^\s*$"))
        .then(pl.lit("blank"))
        .when(line.str.contains(s.BANNER_PL))
        .then(pl.lit("banner"))
        .when(line.str.contains(s.AVERAGE_RE))
        .then(pl.lit("average"))
        .otherwise(pl.lit("other"))
    )


@dataclass(frozen=True)
class _Layout:
    """A header layout: the table its rows go to and where their columns are."""

    table: str  # mpstat_cpu | mpstat_node | mpstat_irq
    kind: str  # cpu | node | sum | hard | soft
    lay: s.Layout
    first: int  # position of the CPU / NODE column

    @property
    def irqs(self) -> list[str]:
        """The interrupt names of its columns (``-I SUM``: ``sum``)."""
        if self.kind == "sum":
            return ["sum"]
        return [n.removesuffix("/s") for n in self.lay.names[self.first + 1 :]]

    @staticmethod
    def of(header: str) -> _Layout:
        lay = s.header_layout(header)
        first = next(i for i, t in enumerate(lay.names) if t in ("CPU", "NODE"))
        names = lay.names[first:]
        if names[0] == "NODE":
            return _Layout("mpstat_node", "node", lay, first)
        if any(n in _PCT_COLS for n in names):
            return _Layout("mpstat_cpu", "cpu", lay, first)
        kind = "sum" if names[1:] == ("intr/s",) else "soft" if _SOFT & set(names) else "hard"
        return _Layout("mpstat_irq", kind, lay, first)


@dataclass
class _File:
    """What holds for the whole file, and what carries from one block to the next."""

    path: Path
    mode: str  # 24h | 12h | epoch: how the time token is cut
    comma: bool  # decimal comma seen in the head
    zone: str | None
    banner: s.Banner | None = None  # the first banner
    layouts: dict[str, _Layout | None] = field(default_factory=dict)  # by header sans time
    header: tuple[str | None, int] | None = None  # the last header: time token, layout index
    prev_sec: int | None = None  # last row time of day seen (midnight roll-over)
    day: int = 0  # midnights passed
    kinds: dict[str, int] = field(default_factory=dict)  # line kind -> count

    @property
    def day0(self) -> datetime | None:
        if self.banner is None or self.banner.date is None:
            return None
        return datetime.combine(self.banner.date, datetime.min.time())

    def time(self) -> pl.Expr:
        """The time token at the start of a line."""
        line = pl.col("line")
        if self.mode == "epoch":
            return line.str.extract(r"^(\d{9,11})\s")
        return line.str.slice(0, 11 if self.mode == "12h" else 8)

    def count(self, kind: str, n: int) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + n


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one mpstat output file into ``mpstat_cpu``, ``mpstat_node``, ``mpstat_irq``."""
    head = _read.read_head(path)
    if head.lstrip().startswith("{"):
        return _mpstat_json.parse(path, ctx, TABLES)
    epoch = re.search(r"(?m)^\d{9,11}\s+CPU\s", head) is not None
    mode = "epoch" if epoch else "12h" if s.twelve_hour_clock(head) else "24h"
    zone, tz_note = s.resolve_tz(ctx.tz)
    f = _File(path, mode, s.uses_decimal_comma(head), zone)
    cov = base.Coverage()
    out = _blocks.Rows(ctx, TABLES)
    blocks = _blocks.Blocks(path)
    for block in blocks:
        out.put(_block(block, f, cov))
        cov.total += block.n_lines
    k = f.kinds
    if k.get("header", 0) + k.get("banner", 0) + k.get("average", 0) == 0 and (
        cov.total - k.get("blank", 0)
    ):
        raise ParseError(f"{ctx.file_name or path.name}: no mpstat banner or table header")
    for kind in ("banner", "blank", "header", "average"):
        cov.add_structure(kind, k.get(kind, 0))
    cov.add_skipped("unrecognized line", k.get("other", 0))
    cov.add_skipped("truncated last line (no trailing newline)", k.get("truncated", 0))
    if blocks.repaired:
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced")
    if k.get("row"):
        cov.notes += [tz_note] if tz_note else []
        if zone is None:
            cov.notes.append("host time zone unknown: local timestamps interpreted as UTC")
        if f.day0 is None:
            cov.notes.append("no banner date: ts is NULL (rows with -U epoch times excepted)")
    meta = f.banner.meta() if f.banner else {}
    return base.ParseResult(tables=dict(out.tables()), coverage=cov, meta=meta)


def _block(block: _blocks.Block, f: _File, cov: base.Coverage) -> dict[str, pl.DataFrame]:
    """One block's rows, by table (line kinds counted into ``f.kinds``)."""
    line = pl.col("line")
    df = block.lines.with_columns(line.str.contains(_ROW).alias("row"))
    data = block.data if block.plain else None  # lines are their bytes: typed from them
    if data is not None:
        n = line.str.len_bytes()
        df = df.with_columns(n.alias("_len"), _blocks.line_starts(n).alias("_at"))
    if block.last and not block.data.endswith(b"\n") and df.item(-1, "row"):
        df = df.head(-1)  # a cut row: neither a row nor another line
        f.count("truncated", 1)
    # Not rows (a header never is one: the token after the time tells them apart).
    rest = df.filter(~pl.col("row")).with_columns(line.str.contains(_HEADER).alias("hdr"))
    other = rest.filter(~pl.col("hdr")).select(line, _other_kind().alias("kind"))
    for kind, n in other.get_column("kind").value_counts().iter_rows():
        f.count(kind, n)
    if block.first_line == 1:
        banner = other.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
        if not banner and not block.last:  # rare: the first banner comes later
            banner = _banners(f.path)
        f.banner = s.parse_banner(banner[0]) if banner else None
    carried = 0 if f.header is None else 1
    hdrs = rest.filter("hdr").select("line_no", "line")
    heads = _headers(hdrs, f)
    f.count("header", hdrs.height)
    if heads.height:
        f.header = heads.row(-1)
    below = pl.lit(hdrs.get_column("line_no")).search_sorted(pl.col("line_no"), side="right")
    hidx = below.cast(pl.Int32) + (carried - 1)  # index in heads of the header above
    rows = df.filter("row").select(pl.exclude("row"), hidx.alias("hidx"))
    f.count("row", rows.height)
    if not rows.height:
        return {}
    rows = _times(rows, f, heads, data).with_row_index("_r")
    orphans = rows.get_column("lid").null_count()
    cov.add_skipped("row without a table header above it", orphans)
    lids = rows.get_column("lid").drop_nulls().unique(maintain_order=True).to_list()
    out: dict[str, list[pl.DataFrame]] = {}
    irqs: list[tuple[_Values, int]] = []  # values of the interrupt layouts, their first code
    names: list[tuple[str, str]] = []  # (kind, irq) of the block's interrupt columns
    of = rows.get_column("lid").fill_null(-1).to_numpy()
    for lid in lids:
        sel = (
            np.arange(rows.height) if len(lids) == 1 and not orphans else np.flatnonzero(of == lid)
        )
        lay = list(f.layouts.values())[lid]
        if lay is None:
            cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", sel.size)
        elif lay.table == "mpstat_irq":
            irqs += [(p, len(names)) for p in _irq(rows, sel, lay, f.comma, cov, data)]
            names += [(lay.kind, n) for n in lay.irqs]
        else:
            out.setdefault(lay.table, []).append(_pct(rows, sel, lay, f.comma, cov, data))
    tables = {}
    for name, frames in out.items():
        frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
        if not frame.get_column("line_no").is_sorted():
            frame = frame.sort("line_no", maintain_order=True)
        tables[name] = frame
    if irqs:
        tables["mpstat_irq"] = _long(irqs, names)
    return {name: tables[name] for name in TABLES if name in tables and tables[name].height}


def _banners(path: Path) -> list[str]:
    """The file's first banner line (a list of at most one)."""
    for block in _blocks.Blocks(path):
        hit = block.lines.filter(pl.col("line").str.contains(s.BANNER_PL))
        if hit.height:
            return [hit.item(0, "line")]
    return []


def _headers(hdrs: pl.DataFrame, f: _File) -> pl.DataFrame:
    """``time`` (token) and ``lid`` (layout index) of the carried header, then of the
    block's; a header without a time keeps the one before it."""
    hdrs = hdrs.select(
        f.time().alias("time"), pl.col("line").str.replace(_T, "").alias("key"), "line"
    )
    firsts = hdrs.unique("key", keep="first", maintain_order=True).select("key", "line")
    for key, text in firsts.iter_rows():
        if key not in f.layouts:
            known = len(f.layouts) < _MAX_LAYOUTS
            f.layouts[key] = _Layout.of(text) if known else None
    lid = pl.col("key").replace_strict(list(f.layouts), list(range(len(f.layouts))))
    heads = hdrs.select("time", lid.cast(pl.Int32).alias("lid"))
    if f.header is not None:
        carried = pl.DataFrame([f.header], schema=heads.schema, orient="row")
        heads = pl.concat([carried, heads])
    return heads.with_columns(pl.col("time").forward_fill())


def _times(rows: pl.DataFrame, f: _File, heads: pl.DataFrame, data: bytes | None) -> pl.DataFrame:
    """Rows with ``lid`` (their header's layout; NULL: none), ``ts`` and ``since_boot``;
    the midnight roll-over carries over from the block before. Worked out once per run of
    rows with the same time and header (a report), then given to its rows."""
    h = rows.get_column("hidx").to_numpy()
    if data is not None and f.mode == "24h":  # the time: a row's first 8 bytes, one word
        at = rows.get_column("_at").to_numpy().astype(np.int64)
        word = np.lib.stride_tricks.sliding_window_view(np.frombuffer(data, np.uint8), 8)
        t = word[at].view("<u8")[:, 0]
    else:
        t = rows.select(f.time().rank("dense")).to_series().to_numpy()
    new = np.ones(rows.height, dtype=bool)
    new[1:] = (t[1:] != t[:-1]) | (h[1:] != h[:-1])
    gov = pl.when(pl.col("hidx") >= 0).then(pl.col("hidx"))
    sec = s.clock_seconds(pl.col("time"), f.mode == "12h")
    filled = sec.forward_fill()
    before = filled.shift(1)
    if f.prev_sec is not None:
        filled, before = filled.fill_null(f.prev_sec), filled.shift(1, fill_value=f.prev_sec)
    day = (filled < before).fill_null(False).cast(pl.Int32).cum_sum() + f.day
    runs = (
        rows.select("line", "hidx")
        .filter(pl.Series(new))
        .select(
            f.time().alias("time"),
            pl.lit(heads.get_column("time")).gather(gov).alias("hdr_time"),
            pl.lit(heads.get_column("lid")).gather(gov).alias("lid"),
        )
        .with_columns(sec.alias("_sec"))
        .with_columns(day.alias("_day"))
    )
    last_sec, f.day = runs.select(pl.col("_sec").drop_nulls().last(), pl.col("_day").last()).row(0)
    f.prev_sec = f.prev_sec if last_sec is None else last_sec
    day0 = f.day0
    if f.mode == "epoch":
        ts = pl.from_epoch(pl.col("time").cast(pl.Int64, strict=False), "s")
        ts = ts.dt.replace_time_zone("UTC")
    elif day0 is not None:
        secs = (pl.col("_sec") + 86400 * pl.col("_day")).cast(pl.Int64)
        day0_us = int((day0 - datetime(1970, 1, 1)).total_seconds()) * 1_000_000
        ts = s.local_to_utc((secs * 1_000_000 + day0_us).cast(pl.Datetime("us")), f.zone)
    else:
        ts = pl.lit(None, base.TS)
    runs = runs.select(
        "lid",
        ts.cast(base.TS).alias("ts"),
        (pl.col("time") == pl.col("hdr_time")).alias("since_boot"),
    )
    run = pl.Series(np.cumsum(new) - 1)
    return rows.drop("hidx").with_columns(c.gather(run) for c in runs.iter_columns())


def _key(key: str) -> pl.Expr:
    """The CPU / NODE token as Int32: -1 for ``all``."""
    return (
        pl.when(pl.col("key") == "all")
        .then(-1)
        .otherwise(pl.col("key").cast(pl.Int32, strict=False))
        .alias(key)
    )


_KEEP = ("line_no", "ts", "since_boot")


def _aligned(rows: pl.DataFrame, lay: s.Layout, idx: list[int]) -> tuple[pl.DataFrame, pl.Series]:
    """The fields ``idx`` of ``rows`` cut at their header's positions (``_0``, ``_1``...;
    :func:`._sysstat.aligned_fields`) and whether each row fits them (its check, made on
    the cut fields)."""
    line = pl.col("line")
    _, fields = s.aligned_fields(line, lay, idx)
    cut = rows.select(
        (line.str.strip_chars_end(" ").str.len_chars() == lay.width).alias("_w"),
        *(x.alias(f"_{n}") for n, x in enumerate(fields)),
    )
    blank = [pl.col(f"_{n}").str.starts_with(" ") for n, i in enumerate(idx) if i > 0]
    return cut, cut.select(pl.all_horizontal("_w", *blank).fill_null(False)).to_series()


def _typed(
    rows: pl.DataFrame,
    sel: np.ndarray,
    lay: s.Layout,
    idx: list[int],
    data: bytes | None,
    comma: bool,
) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame]:
    """Of the rows ``sel``, those whose fields ``idx`` are typed from the block's bytes
    (when it is plain: :func:`._sysstat.right_aligned`; the first field is the CPU / NODE,
    ``all`` = -1), their values ``(len(idx), rows)``, and the other rows (for
    :func:`_aligned`)."""
    if data is None:
        return rows.select("_r", *_KEEP).clear(), np.empty((len(idx), 0)), rows[sel]
    fit = sel[rows.get_column("_len").to_numpy()[sel] == lay.width]
    at = rows.get_column("_at").to_numpy().astype(np.int64)[fit]
    ok, vals = s.right_aligned(data, at, lay, idx, comma, {0: ("all", -1.0)})
    ok &= vals[0] < 2**31  # (a longer CPU number is NULL: read by polars)
    head = rows.select("_r", *_KEEP)
    if ok.all() and fit.size == sel.size:  # (the usual block: no copies)
        return head if sel.size == rows.height else head[sel], vals, rows.clear()
    left = np.ones(rows.height, dtype=bool)
    left[fit[ok]] = False
    return head[fit[ok]], vals[:, ok], rows[sel[left[sel]]]


def _pct(
    rows: pl.DataFrame,
    sel: np.ndarray,
    lay: _Layout,
    comma: bool,
    cov: base.Coverage,
    data: bytes | None,
) -> pl.DataFrame:
    """CPU / NODE rows (``sel`` of ``rows``): every percentage and the key must read, else
    the row is skipped. Rows that do not fit their header are read by whitespace split."""
    names, first, total = lay.lay.names, lay.first, sel.size
    vidx = [i for i in range(first + 1, len(names)) if names[i] in _PCT_COLS]
    cols = [_PCT_COLS[names[i]] for i in vidx]
    done, vals, rows = _typed(rows, sel, lay.lay, [first, *vidx], data if cols else None, comma)
    typed = done.select(_KEEP).with_columns(
        pl.Series(lay.kind, vals[0]).cast(pl.Int32),
        *(pl.Series(c, vals[n]) for n, c in enumerate(cols, 1)),
    )
    frame = _pct_fallback(rows, lay, vidx, cols, comma) if rows.height else typed.clear()
    cov.parsed += typed.height + frame.height
    cov.add_skipped("row does not match its header", total - typed.height - frame.height)
    return pl.concat([typed, frame]) if frame.height else typed


def _pct_fallback(
    rows: pl.DataFrame, lay: _Layout, vidx: list[int], cols: list[str], comma: bool
) -> pl.DataFrame:
    """The rows the bytes did not type: cut by polars at the header's positions, or split
    at whitespace when they do not fit it (values from the right)."""
    names, first = lay.lay.names, lay.first
    cut, fits = _aligned(rows, lay.lay, [first, *vidx])
    raw = pl.concat([rows.select(_KEEP), cut], how="horizontal").select(
        *_KEEP,
        pl.col("_0").str.strip_chars(" ").alias("key"),
        *(pl.col(f"_{n}").alias(c) for n, c in enumerate(cols, 1)),
    )
    if not fits.all():
        tok = pl.col("_tok")
        bad = (
            rows.filter(~fits)
            .with_columns(s.tokens(pl.col("line")).alias("_tok"))
            .select(
                *_KEEP,
                tok.list.get(first, null_on_oob=True).alias("key"),
                *(
                    tok.list.get(i - len(names), null_on_oob=True).alias(c)
                    for i, c in zip(vidx, cols, strict=True)
                ),
            )
        )
        raw = pl.concat([raw.filter(fits), bad])
    read = pl.all_horizontal([pl.col(c).is_not_null() for c in cols] or [pl.lit(False)])
    read = read & ((pl.col("key") == "all") | pl.col("key").str.contains(r"^\d+$"))
    frame = raw.with_columns(s.number(pl.col(c), comma=comma) for c in cols)
    return frame.filter(read).select(*_KEEP, _key(lay.kind), *cols)


def _irq(
    rows: pl.DataFrame,
    sel: np.ndarray,
    lay: _Layout,
    comma: bool,
    cov: base.Coverage,
    data: bytes | None,
) -> list[_Values]:
    """Interrupt rows under one layout (``sel`` of ``rows``): their values that read, in
    column order.

    The whitespace split's rule: a row needs one token per column; a row without any value
    that reads is skipped. A row under a ``HH:MM:SS CPU ...`` header that fits its columns
    with a number in each is cut at the header's positions instead (the same tokens)."""
    k, total = len(lay.irqs), sel.size
    parts = []
    if lay.first == 1 and lay.lay.ends[0] == 8:
        done, v, rows = _typed(rows, sel, lay.lay, list(range(1, k + 2)), data, comma)
        parts.append(_Values.of(done.with_columns(pl.Series("cpu", v[0]).cast(pl.Int32)), v[1:]))
    else:
        rows = rows[sel]
    if rows.height:
        parts += _irq_fallback(rows, lay, comma)
    parsed = sum(int((p.n > 0).sum()) for p in parts)
    cov.parsed += parsed
    cov.add_skipped("row does not match its header", total - parsed)
    return [p for p in parts if p.rows.height]


def _irq_fallback(rows: pl.DataFrame, lay: _Layout, comma: bool) -> list[_Values]:
    """The rows the bytes did not type: cut by polars at the header's positions when they
    fit it with a number in each column (``HH:MM:SS CPU ...`` headers), else split at
    whitespace."""
    k = len(lay.irqs)
    vals = [f"v{j}" for j in range(k)]
    parts = []
    if lay.first == 1 and lay.lay.ends[0] == 8:
        cut, fits = _aligned(rows, lay.lay, list(range(1, k + 2)))
        wide = cut.select(
            pl.col("_0").str.strip_chars(" ").alias("key"),
            *(s.number(pl.col(f"_{j + 1}"), comma=comma).alias(v) for j, v in enumerate(vals)),
        )
        read = pl.all_horizontal(pl.col(vals).is_not_null())
        fits &= wide.select(read & pl.col("key").str.contains(r"^(all|\d+)$")).to_series()
        wide = wide.filter(fits)
        got = rows.filter(fits).with_columns(wide.select(_key("cpu")))
        parts.append(_Values.of(got, wide.select(vals).to_numpy().T))
        rows = rows.filter(~fits)
    tok = pl.col("_tok")
    whole = tok.list.len() == k + 1  # the CPU and a token per column
    wide = rows.with_columns(s.tokens(pl.col("line").str.replace(_T, "")).alias("_tok")).select(
        tok.list.first().alias("key"),
        *(
            pl.when(whole).then(s.number(tok.list.get(j + 1, null_on_oob=True))).alias(v)
            for j, v in enumerate(vals)
        ),
    )
    read = wide.select(pl.col(vals).is_not_null()).to_numpy().T
    got = rows.with_columns(wide.select(_key("cpu")))
    return [*parts, _Values.of(got, wide.select(vals).to_numpy().T, read)]


@dataclass
class _Values:
    """Interrupt rows and their values that read: ``n`` per row, ``per_s`` and ``col``
    (the column's index) row after row."""

    rows: pl.DataFrame  # _r, line_no, ts, since_boot, cpu
    n: np.ndarray
    per_s: np.ndarray
    col: np.ndarray

    @staticmethod
    def of(rows: pl.DataFrame, vals: np.ndarray, read: np.ndarray | None = None) -> _Values:
        """From the values of each column ``(columns, rows)``: all of them, or ``read``."""
        k, n = vals.shape
        rows = rows.select("_r", *_KEEP, "cpu")
        if read is None:
            return _Values(
                rows, np.full(n, k), vals.T.ravel(), np.tile(np.arange(k, dtype=np.int32), n)
            )
        row, col = np.nonzero(read.T)
        return _Values(rows, read.sum(axis=0), vals.T[row, col], col.astype(np.int32))


def _long(parts: list[tuple[_Values, int]], names: list[tuple[str, str]]) -> pl.DataFrame:
    """The block's ``mpstat_irq`` rows in file order from each layout's values (with the
    code of its first column in ``names``: kind, irq), a row's values in column order."""
    rows = pl.concat([p.rows for p, _ in parts]) if len(parts) > 1 else parts[0][0].rows
    n = np.concatenate([p.n for p, _ in parts])
    per_s = np.concatenate([p.per_s for p, _ in parts])
    code = np.concatenate([p.col + c for p, c in parts])
    r = rows.get_column("_r").to_numpy()
    order = None
    if len(parts) > 1 and (np.diff(r.astype(np.int64)) < 0).any():  # layouts interleave
        order = np.argsort(r, kind="stable")
        start = (np.cumsum(n) - n)[order]  # where each row's values are
        n = n[order]
        at = np.repeat(start - (np.cumsum(n) - n), n) + np.arange(per_s.size)
        per_s, code = per_s[at], code[at]
    rows = rows.select(*_KEEP, "cpu")
    if order is not None or n.size != per_s.size:  # a row per value, in file order
        rows = rows[np.repeat(np.arange(n.size) if order is None else order, n)]
    text = pl.DataFrame(dict(zip(("kind", "irq"), zip(*names, strict=True), strict=True)))
    return rows.hstack(text[code]).with_columns(pl.Series("per_s", per_s))
