"""iostat (sysstat 9.1 … 12.7) text and ``-o JSON`` output.

Supported: the basic report (``tps kB_read/s …``, with ``kB_dscd`` from 12.1.2, ``-s``
narrow ``kB_w+d``), the extended report ``-x`` of every version (``Device:`` with
``avgrq-sz avgqu-sz await svctm`` in 9.x–11.5.6; ``Device`` with ``%rrqm aqu-sz rareq-sz``
from 11.5.7; discard ``d/…`` from 12.1.2 and flush ``f/…`` from 12.3.1; ``-xs`` narrow),
``-c``/``-d``, ``-k``/``-m`` and ``GB``/``Blk`` (POSIXLY_CORRECT) units and ``rsec/s``
(all stored as kB), ``-t`` report stamps in C, en_US (12-hour), de_DE and ISO form,
``-y``, ``-z``, ``-p ALL`` (``is_partition``), ``-g``/``-H`` groups (``is_group``),
``-N``/``-j`` names, ``--pretty``/``--compact`` and ``--human``/``-h`` (Device last, sub-tables
merged back per device, ``4.3M``/``80.2k``/``20.4%`` suffixes read as binary multiples, so
counters become approximate), decimal commas, 11.5.7's NUL bytes, CRLF. Columns are mapped
by header name, never by position; JSON keys likewise (see :mod:`._iostat_json`).

Times: ``-t`` stamps are local wall-clock (read in ``ctx.tz``, else UTC + note) unless
they carry an ISO offset; without ``-t`` report k gets ``ctx.capture_start + k ×
ctx.interval_s`` (``ts_source='derived'``, shifted by one interval with ``-y``), else NULL.
``since_boot`` marks the first report of a run without ``-y`` (read from ``ctx.command``;
without a command a 12.x ``-y`` run is recognised by its blank line after the banner,
otherwise since-boot is assumed and noted).

Tables: ``iostat_cpu`` (one row per ``avg-cpu`` block) and ``iostat_device`` (one row per
device per report); columns, types and units are in ``TABLES``.

Sample input (``iostat -x -t 1 2``, sysstat 12.6.1, columns cut)::

    Linux 6.18.44-fc-v669 (vm) 	11/29/26 	_x86_64_	(2 CPU)

    11/29/26 17:23:36
    avg-cpu:  %user   %nice %system %iowait  %steal   %idle
              26.55    0.00    6.92    0.26    0.02   66.26

    Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz ... aqu-sz  %util
    vda             54.99   4412.39    14.12  20.44    0.46    80.24 ...   0.06   1.03
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _iostat_fast, _iostat_json, _iostat_json_chunks, _read, base
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as _fast

TABLES = c.TABLES

_DEV_HDR = r"^\s*Device:?\s|\sDevice\s*$"
_AVG_HDR = r"^avg-cpu:"
_CPU_ROW = r"^\s+[\d.,]+%?(\s+[\d.,]+%?){2,}\s*$"
_MAX_LAYOUTS = 64


def sniff(head: str, name: str) -> float:
    """Confidence that ``head`` is iostat output (text or JSON)."""
    if re.search(r"(?m)^avg-cpu:\s+%user\s+%nice\s+%system", head):
        return 0.95
    if re.search(r"(?m)^Device:?\s+(tps|rrqm/s|r/s)\s", head) or re.search(
        r"(?m)^\s+(tps|r/s|w/s|d/s|f/s)\s.*\sDevice\s*$", head
    ):
        return 0.9
    if '"sysstat"' in head and ('"disk_device"' in head or '"avg-cpu"' in head):
        return 0.95
    return 0.0


def _classify(path: Path) -> pl.DataFrame:
    return classify_lines(_read.read_lines(path))


def _kind(after_avg: pl.Expr) -> pl.Expr:
    """The kind of each line (``after_avg``: the line before it is an avg-cpu header)."""
    line = pl.col("line")
    return (
        pl.when(line.str.contains(r"^\s*$"))
        .then(pl.lit("blank"))
        .when(line.str.contains(s.BANNER_PL))
        .then(pl.lit("banner"))
        .when(line.str.contains(_AVG_HDR))
        .then(pl.lit("avg"))
        .when(after_avg & line.str.contains(_CPU_ROW))
        .then(pl.lit("cpu"))
        .when(line.str.contains(_DEV_HDR))
        .then(pl.lit("dev_hdr"))
        .when(line.str.contains(s.STAMP_RE))
        .then(pl.lit("ts"))
        .otherwise(pl.lit("other"))
    )


def _after_avg(first: pl.Expr) -> pl.Expr:
    """The file line right before this one is an avg-cpu header: the previous row when it
    is the previous line (``lines`` may skip lines), else ``first``."""
    adjacent = pl.col("line_no").shift(1) == pl.col("line_no") - 1
    prev = pl.col("line").shift(1).str.contains(_AVG_HDR)
    return pl.when(adjacent).then(prev).otherwise(first).fill_null(False)


def _hkey() -> pl.Expr:
    return (
        pl.when(pl.col("kind") == "dev_hdr")
        .then(pl.col("line").str.strip_chars().str.replace_all(r"\s+", " "))
        .alias("hkey")
    )


def line_kinds(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` (``line_no``, ``line``, ``_prev_avg``: the file line before is an avg-cpu
    header that is not among ``lines``) with ``kind`` and ``hkey``, no context."""
    after = _after_avg(pl.lit(False)) | pl.col("_prev_avg")
    return lines.with_columns(_kind(after).alias("kind")).with_columns(_hkey())


def classify_lines(
    lines: pl.LazyFrame | pl.DataFrame,
    dev_ctx0: int = 0,
    event0: str | None = None,
    avg_before: bool = False,
) -> pl.DataFrame:
    """``lines`` (``line_no``, ``line``) with ``kind``, ``dev_ctx`` (governing device
    header line, 0 = none), ``prev_event`` and ``hkey`` (normalized device header).

    ``lines`` may skip lines (never structure): a line is a CPU row only if the line right
    before it *in the file* is an ``avg-cpu`` header. For a run of chunks, ``dev_ctx0``/
    ``event0`` carry the state after the previous chunk and ``avg_before`` says whether
    the file line before the first of ``lines`` is an ``avg-cpu`` header."""
    first = pl.lit(avg_before) & (pl.int_range(pl.len()) == 0)
    event = pl.col("kind").is_in(["ts", "avg", "dev_hdr"])
    ctx_reset = pl.col("kind").is_in(["blank", "banner", "avg", "cpu", "ts"])
    last_event = pl.when(event).then(pl.col("kind")).forward_fill()
    if event0 is not None:
        prev_event = last_event.fill_null(pl.lit(event0)).shift(1, fill_value=pl.lit(event0))
    else:
        prev_event = last_event.shift(1)
    return (
        lines.lazy()
        .with_columns(_kind(_after_avg(first)).alias("kind"))
        .with_columns(
            pl.when(pl.col("kind") == "dev_hdr")
            .then(pl.col("line_no"))
            .when(ctx_reset)
            .then(0)
            .forward_fill()
            .fill_null(dev_ctx0)
            .alias("dev_ctx"),
            prev_event.alias("prev_event"),
            _hkey(),
        )
        .collect(engine="streaming")
    )


def _reports(df: pl.DataFrame, f_key: str | None = None, report0: int = 0) -> pl.DataFrame:
    """Number the reports: a report starts at a stamp, at an avg-cpu block not right after a
    stamp, or at a device header of the file's first layout (``f_key``; by default the
    first in ``df``) not right after either. ``report0`` reports started before ``df``."""
    if f_key is None:
        first = df.filter(pl.col("kind") == "dev_hdr").get_column("hkey").head(1).to_list()
        f_key = first[0] if first else ""
    prev = pl.col("prev_event")
    start = (
        (pl.col("kind") == "ts")
        | ((pl.col("kind") == "avg") & (prev != "ts").fill_null(True))
        | (
            (pl.col("kind") == "dev_hdr")
            & (pl.col("hkey") == f_key)
            & ~prev.is_in(["ts", "avg"]).fill_null(False)
        )
    )
    return df.with_columns((start.cast(pl.Int32).cum_sum() - 1 + report0).alias("report"))


def _device_rows(
    rows: pl.DataFrame, header: str, human: bool, comma: bool
) -> tuple[pl.DataFrame, int]:
    """Device rows under one header layout -> (typed frame, rows skipped)."""
    lay = s.header_layout(header)
    names = list(lay.names)
    dev_last = names[-1] == "Device"
    vidx = list(range(len(names) - 1)) if dev_last else list(range(1, len(names)))
    mapped = [(i, c.device_column(names[i])) for i in vidx]
    seen: set[str] = set()
    for k, (i, col) in enumerate(mapped):  # a mangled header may repeat a column: first wins
        if col is not None and col[0] in seen:
            mapped[k] = (i, None)
        elif col is not None:
            seen.add(col[0])
    line = pl.col("line")
    ok, fields = s.aligned_fields(line, lay, vidx, loose_first=not dev_last)
    tok = pl.col("_tok")
    n = len(names)
    fast = {
        "device": line.str.extract(r"(\S+)\s*$" if dev_last else r"^\s*(\S+)"),
        "_shape": pl.lit(True),
    }
    slow = {
        "device": tok.list.last() if dev_last else tok.list.first(),
        "_shape": tok.list.len() == n,
    }
    for (i, col), field in zip(mapped, fields, strict=True):
        if col is not None:
            fast[f"_{i}"] = field
            slow[f"_{i}"] = tok.list.get(i, null_on_oob=True)
    keep = ["line_no", "report", "line"]
    raw = s.cut_rows(rows, ok, fast, slow, keep).with_columns(
        (line.str.contains(r"^\s") if not dev_last else pl.lit(None, pl.Boolean)).alias("is_group")
    )
    casts = []
    for i, col in mapped:
        if col is None:
            continue
        name, factor, is_int = col
        v = s.number(pl.col(f"_{i}"), human, comma) * factor
        casts.append((v.round(0).cast(pl.Int64, strict=False) if is_int else v).alias(name))
    typed = raw.filter(pl.col("_shape")).select("line_no", "report", "device", "is_group", *casts)
    value_cols = [x.meta.output_name() for x in casts]
    good = pl.all_horizontal([pl.col(v).is_not_null() for v in value_cols]) if value_cols else True
    good = good & pl.col("device").is_not_null()
    typed = typed.filter(good)
    return typed, rows.height - typed.height


def _cpu_rows(df: pl.DataFrame, human: bool, hdr: str | None = None) -> tuple[pl.DataFrame, int]:
    """avg-cpu rows against ``hdr`` (by default the first avg-cpu header of ``df``)."""
    cpu = df.filter(pl.col("kind") == "cpu")
    if cpu.height == 0:
        return pl.DataFrame(), 0
    if hdr is None:
        hdr = df.filter(pl.col("kind") == "avg").get_column("line").head(1).to_list()[0]
    names = hdr.split()[1:]
    t = cpu.with_columns(s.tokens(pl.col("line")).alias("tok")).filter(
        pl.col("tok").list.len() == len(names)
    )
    sel = [pl.col("line_no"), pl.col("report")]
    for i, nm in enumerate(names):
        col = c.CPU_COLUMNS.get(nm.lstrip("%"))
        if col:
            sel.append(s.number(pl.col("tok").list.get(i), human).alias(col))
    out = t.select(sel)
    return out, cpu.height - out.height


def _since_boot_skipped(df: pl.DataFrame, ctx: base.ParseContext, notes: list[str]) -> bool:
    """Whether the since-boot first report was omitted (-y)."""
    flags = s.short_flags(ctx.command)
    if flags is not None:
        return "y" in flags
    kinds = df.get_column("kind").head(4).to_list()
    if kinds[:3] == ["banner", "blank", "blank"]:
        return True  # sysstat 12.x prints an extra blank line for the skipped first report
    notes.append("no iostat command line known: first report assumed since boot (no -y)")
    return False


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one iostat output file into ``iostat_cpu`` and ``iostat_device``."""
    cov = base.Coverage()
    head = _read.read_head(path)
    json = head.lstrip().startswith("{")
    if not json and path.stat().st_size >= _fast.MIN_FAST_BYTES:
        done = _iostat_fast.parse(path, ctx, cov, head)  # checks UTF-8 on its way
        if done is not None:
            return done
    repair = _read.needs_utf8_repair(path)
    if repair:
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced")
    if json:
        if path.stat().st_size >= _fast.MIN_FAST_BYTES:
            return _iostat_json_chunks.parse(path, ctx, cov, repair)
        return _iostat_json.parse(path, ctx, cov)
    df = _reports(_classify(path))
    sample = "\n".join(df.filter(pl.col("kind").is_in(["cpu", "other"]))["line"].head(50))
    human = bool(re.search(r"\d[.,]\d[kMGTPE%](\s|$)", sample))
    return _tables(df, path, ctx, cov, human, s.uses_decimal_comma(sample))


def _tables(
    df: pl.DataFrame,
    path: Path,
    ctx: base.ParseContext,
    cov: base.Coverage,
    human: bool,
    comma: bool,
) -> base.ParseResult:
    """Coverage and tables from the classified lines ``df`` of the whole file."""
    cov.total = df.height
    if not s.ends_with_newline(path) and df.height:
        last = pl.col("line_no") == df.height
        cut = last & pl.col("kind").is_in(["other", "cpu"])
        df = df.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("kind").alias("kind"))
    counts = dict(df.group_by("kind").len().iter_rows())
    banner_line = df.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
    banner = s.parse_banner(banner_line[0]) if banner_line else None
    known = sum(counts.get(k, 0) for k in ("banner", "avg", "cpu", "dev_hdr"))
    if known == 0 and cov.total - counts.get("blank", 0) > 0:
        raise ParseError(
            f"{ctx.file_name or path.name}: no iostat banner, avg-cpu or Device header"
        )
    cov.add_structure("banner", counts.get("banner", 0))
    cov.add_structure("blank", counts.get("blank", 0))
    cov.add_structure("header", counts.get("avg", 0) + counts.get("dev_hdr", 0))
    cov.add_skipped("truncated last line (no trailing newline)", counts.get("truncated", 0))
    ts_rows = df.filter(pl.col("kind") == "ts")
    cov.add_structure("timestamp", ts_rows.height)
    stray = df.filter((pl.col("kind") == "other") & (pl.col("dev_ctx") == 0)).height
    cov.add_skipped("unrecognized line", stray)

    dev = df.filter((pl.col("kind") == "other") & (pl.col("dev_ctx") > 0))
    hdrs = df.filter(pl.col("kind") == "dev_hdr").select("line_no", "line", "hkey")
    parts: list[pl.DataFrame] = []
    layouts = hdrs.unique("hkey", maintain_order=True)
    for n, (hkey, hline) in enumerate(layouts.select("hkey", "line").iter_rows()):
        ids = hdrs.filter(pl.col("hkey") == hkey).get_column("line_no")
        rows = dev.filter(pl.col("dev_ctx").is_in(ids.implode()))
        if n >= _MAX_LAYOUTS:
            cov.add_skipped(f"more than {_MAX_LAYOUTS} distinct header layouts", rows.height)
            continue
        frame, bad = _device_rows(rows, hline, human, comma)
        cov.add_skipped("device row does not match its header", bad)
        parts.append(frame)
    cpu, bad_cpu = _cpu_rows(df, human)
    cov.add_skipped("avg-cpu row does not match its header", bad_cpu)
    cov.parsed = sum(p.height for p in parts) + cpu.height

    zone = s.tz_for(ctx, cov) if ts_rows.height else None
    stamps = ts_rows.select("report", s.stamp_to_utc(pl.col("line"), zone).alias("ts")).unique(
        "report", keep="first"
    )
    y = _since_boot_skipped(df, ctx, cov.notes)
    times = c.report_times(df, stamps, ctx, y, cov.notes)
    tables: dict[str, pl.DataFrame | pl.LazyFrame] = {}
    if parts:
        devs = pl.concat(parts, how="diagonal_relaxed").sort("line_no")
        if layouts.height > 1:  # --pretty/--human split tables: one row per device again
            devs = devs.group_by(["report", "device"], maintain_order=True).agg(
                pl.all().drop_nulls().first()
            )
        devs = c.flag_partitions(devs, ctx, cov.notes)
        devs = devs.join(times, on="report", how="left", maintain_order="left")
        tables["iostat_device"] = TABLES["iostat_device"].conform(devs).collect()
    if cpu.height:
        cpu = cpu.join(times, on="report", how="left", maintain_order="left")
        tables["iostat_cpu"] = TABLES["iostat_cpu"].conform(cpu).collect()
    meta = banner.meta() if banner else {}
    return base.ParseResult(tables=tables, coverage=cov, meta=meta)
