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
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _mpstat_chunk, _mpstat_fast, _mpstat_json, _read, base
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as _fast

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


def _classify(path: Path, mode: str) -> pl.DataFrame:
    """Kind of every line; ``time`` (row/header time token) cut by position per ``mode``."""
    return classify_lines(_read.read_lines(path), mode)


def _kind() -> pl.Expr:
    """The kind of a line by itself: blank, banner, average, header, row or other."""
    line = pl.col("line")
    return (
        pl.when(line.str.contains(r"^\s*$"))
        .then(pl.lit("blank"))
        .when(line.str.contains(s.BANNER_PL))
        .then(pl.lit("banner"))
        .when(line.str.contains(s.AVERAGE_RE))
        .then(pl.lit("average"))
        .when(line.str.contains(_T + r"(CPU|NODE)\s+\S"))
        .then(pl.lit("header"))
        .when(line.str.contains(_T + r"(all|\d+)\s+\S"))
        .then(pl.lit("row"))
        .otherwise(pl.lit("other"))
    )


def line_kinds(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` (``line``) with ``kind``, each line on its own (no header context)."""
    return lines.with_columns(_kind().alias("kind"))


def classify_lines(lines: pl.LazyFrame | pl.DataFrame, mode: str) -> pl.DataFrame:
    """``lines`` (``line_no``, ``line``) with ``kind``, ``hdr`` (line of the governing
    header, 0 = none), ``hdr_time`` and ``time`` (row time token)."""
    line = pl.col("line")
    if mode == "epoch":
        time = line.str.extract(r"^(\d{9,11})\s")
    else:
        time = line.str.slice(0, 11 if mode == "12h" else 8)
    is_hdr = pl.col("kind") == "header"
    return (
        lines.lazy()
        .with_columns(_kind().alias("kind"))
        .with_columns(
            pl.when(is_hdr).then(pl.col("line_no")).forward_fill().fill_null(0).alias("hdr"),
            pl.when(is_hdr).then(time).forward_fill().alias("hdr_time"),
            pl.when(pl.col("kind") == "row").then(time).alias("time"),
        )
        .collect(engine="streaming")
    )


def _table_kind(names: list[str]) -> str:
    if names[0] == "NODE":
        return "node"
    if any(n in _PCT_COLS for n in names):
        return "cpu"
    if names[1:] == ["intr/s"]:
        return "sum"
    return "soft" if _SOFT & set(names) else "hard"


def _pct_rows(rows: pl.DataFrame, lay: s.Layout, first: int, comma: bool) -> pl.DataFrame:
    names = list(lay.names)
    vidx = [i for i in range(first + 1, len(names)) if names[i] in _PCT_COLS]
    line = pl.col("line")
    ok, fields = s.aligned_fields(line, lay, [first, *vidx])
    tok = pl.col("_tok")
    n = len(names)
    fast = {"key": fields[0].str.strip_chars(" ")}
    slow = {"key": tok.list.get(first, null_on_oob=True)}
    for i, field in zip(vidx, fields[1:], strict=True):
        fast[_PCT_COLS[names[i]]] = field
        slow[_PCT_COLS[names[i]]] = tok.list.get(i - n, null_on_oob=True)
    raw = s.cut_rows(rows, ok, fast, slow, ["line_no", "time", "hdr_time"])
    return raw.with_columns(s.number(pl.col(c), comma=comma) for c in fast if c != "key")


def _irq_rows(rows: pl.DataFrame, lay: s.Layout, first: int, kind: str) -> pl.DataFrame:
    names = [n.removesuffix("/s") for n in lay.names[first + 1 :]]
    tok = s.tokens(pl.col("line").str.replace(_T, ""))
    t = rows.select(
        "line_no", "time", "hdr_time", tok.list.first().alias("key"), tok.list.slice(1).alias("v")
    ).filter(pl.col("v").list.len() == len(names))
    if kind == "sum":
        names = ["sum"]
    return (
        t.with_columns(
            pl.lit(pl.Series([names], dtype=pl.List(pl.String))).first().alias("irq"),
            pl.lit(kind).alias("kind"),
        )
        .explode(["irq", "v"])
        .with_columns(s.number(pl.col("v")).alias("per_s"))
        .drop("v")
    )


def _finish(
    frame: pl.DataFrame, key: str, day0: datetime | None, zone: str | None, epoch: bool
) -> pl.DataFrame:
    """Key to Int32 (-1 = all), ts from banner date + time, since_boot from header time."""
    if epoch:
        secs = pl.col("time").cast(pl.Int64, strict=False)
        ts = pl.from_epoch(secs, "s").dt.replace_time_zone("UTC")
    elif day0 is not None:
        naive = pl.lit(day0) + pl.duration(seconds=pl.col("_sec") + 86400 * pl.col("_day"))
        ts = s.local_to_utc(naive, zone)
    else:
        ts = pl.lit(None, base.TS)
    return frame.with_columns(
        pl.when(pl.col("key") == "all")
        .then(-1)
        .otherwise(pl.col("key").cast(pl.Int32, strict=False))
        .alias(key),
        ts.cast(base.TS).alias("ts"),
        (pl.col("time") == pl.col("hdr_time")).alias("since_boot"),
    )


def headers(df: pl.DataFrame) -> pl.DataFrame:
    """Header lines of a classified frame with ``hkey`` (the header without its time)."""
    return df.filter(pl.col("kind") == "header").with_columns(
        pl.col("line").str.replace(_T, "").alias("hkey")
    )


def layout_frames(
    rows: pl.DataFrame, hdrs: pl.DataFrame, comma: bool, cov: base.Coverage, seen: list[str]
) -> list[tuple[str, str, pl.DataFrame]]:
    """Rows parsed against their header's layout: ``(table, key column, frame)`` per layout.

    Frames keep ``line_no``, ``time`` and ``hdr_time``. ``seen`` lists the layouts met so
    far (in order; extended here) so that the layout cap holds across calls.
    """
    out = []
    layouts = hdrs.unique("hkey", maintain_order=True).select("hkey", "line")
    for hkey, hline in layouts.iter_rows():
        if hkey not in seen:
            seen.append(hkey)
        n = seen.index(hkey)
        ids = hdrs.filter(pl.col("hkey") == hkey).get_column("line_no")
        sub = rows.filter(pl.col("hdr").is_in(ids.implode()))
        if n >= _MAX_LAYOUTS:
            cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", sub.height)
            continue
        lay = s.header_layout(hline)
        first = next(i for i, t in enumerate(lay.names) if t in ("CPU", "NODE"))
        kind = _table_kind(list(lay.names[first:]))
        if kind in ("cpu", "node"):
            frame = _pct_rows(sub, lay, first, comma)
            vals = [c for c in frame.columns if c.endswith("_pct")]
            good = pl.all_horizontal([pl.col(c).is_not_null() for c in vals] or [pl.lit(False)])
            good = good & ((pl.col("key") == "all") | pl.col("key").str.contains(r"^\d+$"))
            frame = frame.filter(good)
            cov.parsed += frame.height
            table, key = ("mpstat_cpu", "cpu") if kind == "cpu" else ("mpstat_node", "node")
        else:
            frame = _irq_rows(sub, lay, first, kind).filter(pl.col("per_s").is_not_null())
            cov.parsed += frame.get_column("line_no").n_unique()
            table, key = "mpstat_irq", "cpu"
        bad = sub.height - frame.get_column("line_no").n_unique()
        cov.add_skipped("row does not match its header", bad)
        if frame.height:
            out.append((table, key, frame))
    return out


def _parse_fast(
    path: Path,
    ctx: base.ParseContext,
    cov: base.Coverage,
    head: str,
    comma: bool,
    data: np.ndarray | None = None,
) -> base.ParseResult | None:
    """Big 24-hour text files: chunked fast path (:mod:`._mpstat_fast`); None when no
    table of the file's head can be read that way."""
    lines = pl.DataFrame({"line": head.split("\n")[:-1]}).with_row_index("line_no", offset=1)
    hd = classify_lines(lines, "24h")
    hdrs = headers(hd)
    head_rows = hd.filter(pl.col("kind") == "row").join(
        hdrs.select(pl.col("line_no").alias("hdr"), "hkey"), on="hdr", how="inner"
    )
    gs = _mpstat_fast.groups(
        hdrs.select("hkey", "line"), _PCT_COLS, head_rows.select("hkey", "line")
    )
    if not gs:
        return None
    banner_line = hd.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
    banner = s.parse_banner(banner_line[0]) if banner_line else None
    day0 = datetime.combine(banner.date, datetime.min.time()) if banner and banner.date else None
    zone, _ = s.resolve_tz(ctx.tz)
    kept: dict[str, list[pl.DataFrame]] = {}

    def keep(name: str, frame: pl.DataFrame) -> None:
        kept.setdefault(name, []).append(frame)

    cx = _mpstat_fast.Ctx(
        comma=comma,
        day0=day0,
        zone=zone,
        tables=TABLES,
        pct_cols=_PCT_COLS,
        layout_frames=layout_frames,
        classify_lines=classify_lines,
        headers=headers,
        finish=lambda frame, key: _finish(frame, key, day0, zone, False),
        table_kind=_table_kind,
        line_kinds=line_kinds,
        templates=_mpstat_chunk.templates(hdrs),
        banner=_mpstat_chunk.plain(banner_line[0]) if banner_line else b"",
        emit=ctx.sink or keep,
    )
    _mpstat_fast.parse_chunks(path, cx, cov, gs, data)
    if cov.parsed:
        s.tz_for(ctx, cov)
        if day0 is None:
            cov.notes.append("no banner date: ts is NULL (rows with -U epoch times excepted)")
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {
        name: pl.concat(frames) for name, frames in kept.items()
    }
    return base.ParseResult(tables=tables, coverage=cov, meta=banner.meta() if banner else {})


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one mpstat output file into ``mpstat_cpu``, ``mpstat_node``, ``mpstat_irq``."""
    cov = base.Coverage()
    head = _read.read_head(path)
    size = path.stat().st_size
    data = None  # a big file of a few chunks: read once, checked and parsed from memory
    if _fast.MIN_FAST_BYTES <= size <= _fast.ONE_READ_BYTES and not head.lstrip().startswith("{"):
        data = _fast.read_all(path)
    repair = _read.needs_utf8_repair(path) if data is None else not _fast.utf8(data)
    if repair:
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced")
    if head.lstrip().startswith("{"):
        return _mpstat_json.parse(path, ctx, cov, TABLES)
    twelve = s.twelve_hour_clock(head)
    comma = s.uses_decimal_comma(head)
    epoch = re.search(r"(?m)^\d{9,11}\s+CPU\s", head) is not None
    if not (twelve or epoch or repair) and size >= _fast.MIN_FAST_BYTES:
        done = _parse_fast(path, ctx, cov, head, comma, data)
        if done is not None:
            return done
    del data
    df = _classify(path, "epoch" if epoch else "12h" if twelve else "24h")
    cov.total = df.height
    if not s.ends_with_newline(path) and df.height:
        cut = (pl.col("line_no") == df.height) & (pl.col("kind") == "row")
        df = df.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("kind").alias("kind"))
    counts = dict(df.group_by("kind").len().iter_rows())
    if counts.get("header", 0) + counts.get("banner", 0) + counts.get("average", 0) == 0 and (
        cov.total - counts.get("blank", 0)
    ):
        raise ParseError(f"{ctx.file_name or path.name}: no mpstat banner or table header")
    for k in ("banner", "blank", "header", "average"):
        cov.add_structure(k, counts.get(k, 0))
    cov.add_skipped("unrecognized line", counts.get("other", 0))
    cov.add_skipped("truncated last line (no trailing newline)", counts.get("truncated", 0))
    banner_line = df.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
    banner = s.parse_banner(banner_line[0]) if banner_line else None
    rows = df.filter(pl.col("kind") == "row")
    rows = rows.with_columns(s.clock_seconds(pl.col("time"), twelve).alias("_sec")).with_columns(
        s.day_rollover(pl.col("_sec")).alias("_day")
    )
    orphans = rows.filter(pl.col("hdr") == 0).height
    cov.add_skipped("row without a table header above it", orphans)
    zone = s.tz_for(ctx, cov) if rows.height else None
    day0 = datetime.combine(banner.date, datetime.min.time()) if banner and banner.date else None
    if day0 is None and rows.height:
        cov.notes.append("no banner date: ts is NULL (rows with -U epoch times excepted)")

    hdrs = headers(df)
    out: dict[str, list[pl.DataFrame]] = {"mpstat_cpu": [], "mpstat_node": [], "mpstat_irq": []}
    day = rows.select("line_no", "_sec", "_day")
    for table, key, frame in layout_frames(rows, hdrs, comma, cov, []):
        frame = frame.join(day, on="line_no", how="left", maintain_order="left")
        out[table].append(_finish(frame, key, day0, zone, epoch))
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    for name, frames in out.items():
        if frames:
            merged = pl.concat(frames, how="diagonal_relaxed").sort("line_no", maintain_order=True)
            tables[name] = TABLES[name].conform(merged).collect()
    return base.ParseResult(tables=tables, coverage=cov, meta=banner.meta() if banner else {})
