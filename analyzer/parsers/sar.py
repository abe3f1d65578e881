"""sar (sysstat 9.1 … 12.7) text output: live runs and ``sar -f`` replays of sa data files.

Supported: any combination of activities (``-u [ALL]``, ``-P``, ``-q [ALL|PSI|CPU|IO|MEM]``,
``-B``, ``-r [ALL]``, ``-S``, ``-W``, ``-w``, ``-b``, ``-d [-p]``, ``-n DEV,EDEV,...``,
``-A``), ``--pretty`` (key column last), ``--human`` (``4.3M`` kB, ``20.4%``), colours
(``S_COLORS=always``: escape codes removed), ``S_REPEAT_HEADER``, C / en_US (12-hour
``AM``/``PM``) / de_DE (decimal comma, ``29.11.2026``, ``Durchschn.:``) / ISO dates.

A section starts with a header line whose first token is a time and whose other tokens are
column names; it is identified by those names (``CPU %user`` -> ``sar_cpu``, ``runq-sz`` ->
``sar_queue``, ``%scpu-10`` / ``%sio-10`` / ``%smem-10`` -> ``sar_psi``, ``pgpgin/s`` ->
``sar_paging``, ``kbmemfree`` -> ``sar_memory``, ``kbswpfree`` -> ``sar_swap_space``,
``pswpin/s`` -> ``sar_swap``, ``cswch/s`` -> ``sar_task``, ``bread/s`` -> ``sar_io``,
``DEV tps`` -> ``sar_disk``, ``IFACE rxpck/s`` -> ``sar_net_dev``, ``IFACE rxerr/s`` ->
``sar_net_edev``) and values are taken by column name, so versions with extra or missing
columns (``kbavail``, ``kbshmem``, ``%vmeff`` vs ``pgprom/s pgdem/s``, ``blocked``,
``%ifutil``) parse alike. Every other section (``-I``, ``-v``, ``-H``, ``-y``, ``-n SOCK``,
``-n TCP``..., ``-m``, ``-F``) goes to ``sar_other`` in long form (one row per value).
``LINUX RESTART`` and ``COM`` lines -> ``sar_events`` (deduplicated: ``sar -A -f`` repeats
them per activity). ``Average:`` rows (any locale) are structure.

Times: the banner's date + each row's time of day; a backwards step of the clock inside a
run of rows is a midnight roll-over (+1 day). The run restarts after every ``Average:`` block
because ``sar -f`` prints activity after activity, each from the file's start. sar prints
local time without an offset: read in ``ctx.tz`` (the capture runs sar with ``TZ=UTC0``),
else assumed UTC with a coverage note. Without a banner date ``ts`` is NULL (noted).

Tables: see ``TABLES`` (shared with ``sadf``): sar_cpu, sar_queue, sar_psi, sar_paging,
sar_memory, sar_swap_space, sar_swap, sar_task, sar_io, sar_disk, sar_net_dev,
sar_net_edev, sar_events, sar_other.

Sample input (``sar -u -q 1 2``, sysstat 12.6.1, C locale)::

    Linux 6.18.44-fc-v669 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)

    17:23:36        CPU     %user     %nice   %system   %iowait    %steal     %idle
    17:23:37        all     55.50      0.00     44.50      0.00      0.00      0.00

    17:23:36      runq-sz  plist-sz   ldavg-1   ldavg-5  ldavg-15   blocked
    17:23:37            3       209      1.30      0.96      0.47         0
    Average:        all     55.50      0.00     44.50      0.00      0.00      0.00
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer.parsers import _sar_extract as sx
from analyzer.parsers import _sar_tables as st
from analyzer.parsers import _sysstat as ss
from analyzer.parsers import base

TABLES: dict[str, base.Table] = st.TABLES

_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
_TIME = r"^(\d{1,2}:\d{2}:\d{2}(?:\s?[AaPp]\.?[Mm]\.?)?)(?:\s|$)"
_NUM_TOKEN = r"(^|\s)[-+]?\d+(?:[.,]\d+)?[BkKMGTPE%]?(\s|$)"
_BANNER_LOOSE = r"^Linux \S+ \([^)]*\)\s+\S+"
_AVG_LABELS = r"^(Average|Summary|Durchschn\.|Moyenne|Media|Promedio|Gemiddeld|Среднее)\s?:"
_SAR_NAMES = re.compile(
    r"runq-sz|kbmemfree|pgpgin/s|IFACE\s+rx(pck|err)/s|proc/s|pswpin/s|bread/s|%scpu-10|"
    r"kbswpfree|kbhugfree|dentunusd|totsck|CPU\s+%user\s+%nice\s+%system|"
    r"CPU\s+%usr\s+%nice\s+%sys\s+%iowait\s+%steal\s+%irq|DEV\s+tps|INTR\s+intr/s|LINUX RESTART|"
    r"%[sf](cpu|io|mem)-10|\btps\s+rkB/s\s+wkB/s\b.*\bDEV$|CPU\s+(wgh)?MHz|rxpck/s|rxerr/s"
)


def sniff(head: str, name: str) -> float:
    """sar text: a sysstat banner plus a header naming sar-only columns."""
    lines = head.splitlines()[:200]
    banner = any(re.match(ss.BANNER_PL, ln) or re.match(_BANNER_LOOSE, ln) for ln in lines[:5])
    timed_hdr = any(
        re.match(r"^\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?\s", ln) and _SAR_NAMES.search(ln.rstrip())
        for ln in lines
    )
    if banner and timed_hdr:
        return 0.95
    if timed_hdr:
        return 0.6
    return 0.0


def _seconds_of_day(t: pl.Expr) -> pl.Expr:
    """``HH:MM:SS`` [``AM``/``PM``] -> seconds of day (cheaper than one regex per field)."""
    p = t.str.split_exact(":", 2)
    h = p.struct.field("field_0").cast(pl.Int32, strict=False)
    m = p.struct.field("field_1").cast(pl.Int32, strict=False)
    sec = p.struct.field("field_2").str.slice(0, 2).cast(pl.Int32, strict=False)
    pm, am = t.str.contains("[Pp]"), t.str.contains("[Aa]")
    h24 = pl.when(pm & (h < 12)).then(h + 12).when(am & (h == 12)).then(0).otherwise(h)
    ok = (h24 < 24) & (m < 60) & (sec < 61) & ~((pm | am) & (h > 12))
    return pl.when(ok).then(h24 * 3600 + m * 60 + sec).cast(pl.Int32)


def _classify(lf: pl.LazyFrame) -> pl.LazyFrame:
    # staged with_columns: each regex runs once (a when/then chain would re-run them)
    lf = lf.with_columns(pl.col("line").str.replace_all(_ANSI, "")).with_columns(
        pl.col("line").str.extract(_TIME).alias("_t")
    )
    lf = lf.with_columns(
        pl.col("line").str.slice(pl.col("_t").str.len_chars()).str.strip_chars().alias("rest"),
        _seconds_of_day(pl.col("_t")).alias("sec"),
    ).with_columns(pl.when(pl.col("rest") != "").then(pl.col("rest")).alias("rest"))
    line, rest = pl.col("line"), pl.col("rest")
    lf = lf.with_columns(
        (line.str.strip_chars() == "").alias("_blank"),
        (line.str.contains(ss.BANNER_PL) | line.str.contains(_BANNER_LOOSE)).alias("_banner"),
        (
            line.str.contains(_AVG_LABELS)
            | (line.str.contains(ss.AVERAGE_RE) & line.str.contains(_NUM_TOKEN))
        ).alias("_avg"),
        rest.str.contains(_NUM_TOKEN).fill_null(False).alias("_num"),
    )
    kind = (
        pl.when(pl.col("_blank"))
        .then(pl.lit("blank"))
        .when(pl.col("_banner"))
        .then(pl.lit("banner"))
        .when(pl.col("_avg"))
        .then(pl.lit("average"))
        .when(rest.is_null() | pl.col("sec").is_null())
        .then(pl.lit("garbage"))
        .when(rest.str.starts_with("LINUX RESTART"))
        .then(pl.lit("restart"))
        .when(rest.str.starts_with("COM "))
        .then(pl.lit("comment"))
        .when(~pl.col("_num"))
        .then(pl.lit("header"))
        .otherwise(pl.lit("data"))
    )
    return lf.select("line_no", kind.alias("kind"), "sec", "rest")


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one sar text file (see the module docstring)."""
    cov = base.Coverage()
    if base.needs_utf8_repair(path):
        cov.notes.append("file is not valid UTF-8: invalid bytes replaced")
    df = _classify(base.read_lines(path)).collect(engine="streaming")
    cov.total = df.height
    head = base.read_head(path)
    banner = next(
        (
            b
            for b in (ss.parse_banner(ln.replace("\x00", "")) for ln in head.splitlines()[:20])
            if b
        ),
        None,
    )
    counts = dict(df.group_by("kind").len().iter_rows())
    for k in ("banner", "blank", "header", "average"):
        cov.add_structure(k, counts.get(k, 0))
    cov.add_skipped("unrecognized line (not sar output)", counts.get("garbage", 0))

    # sections: one per distinct header text
    hdr_texts = df.filter(pl.col("kind") == "header")["rest"].unique(maintain_order=True).to_list()
    sections = [sx.make_section(h.split()) for h in hdr_texts]
    hmap = pl.DataFrame(
        {
            "hdr": hdr_texts,
            "sid": list(range(len(hdr_texts))),
            "width": [s.width for s in sections],
        },
        schema={"hdr": pl.String, "sid": pl.Int32, "width": pl.Int32},
    )
    df = df.with_columns(
        pl.when(pl.col("kind") == "header")
        .then(pl.col("rest"))
        .when(pl.col("kind") == "average")
        .then(pl.lit(""))  # a section ends with its Average block
        .otherwise(None)
        .forward_fill()
        .alias("hdr"),
        (pl.col("kind") == "average").cum_sum().alias("seg"),
    )
    timed = df.filter(pl.col("kind").is_in(["data", "restart", "comment"]))
    day = (
        (pl.col("sec") < pl.col("sec").shift(1).over("seg"))
        .fill_null(False)
        .cast(pl.Int32)
        .cum_sum()
        .over("seg")
    )
    timed = timed.with_columns(day.alias("day"))
    zone = ss.tz_for(ctx, cov)
    if banner is None or banner.date is None:
        cov.notes.append("no sysstat banner with a date: ts is NULL")
        ts = pl.lit(None, base.TS)
    else:
        naive = pl.lit(datetime.combine(banner.date, datetime.min.time())) + pl.duration(
            seconds=pl.col("sec") + pl.col("day") * 86400
        )
        ts = ss.local_to_utc(naive, zone)
    timed = timed.with_columns(ts.alias("ts"))

    # events
    ev = timed.filter(pl.col("kind").is_in(["restart", "comment"]))
    tables: dict[str, pl.DataFrame] = {}
    if ev.height:
        cov.parsed += ev.height
        tables["sar_events"] = ev.select(
            "ts",
            pl.when(pl.col("kind") == "restart")
            .then(pl.lit("restart"))
            .otherwise(pl.lit("comment"))
            .alias("event"),
            pl.when(pl.col("kind") == "restart")
            .then(pl.col("rest").str.strip_prefix("LINUX RESTART").str.strip_chars())
            .otherwise(pl.col("rest").str.strip_prefix("COM "))
            .alias("detail"),
            pl.when(pl.col("kind") == "restart")
            .then(pl.col("rest").str.extract(r"\((\d+) CPU\)").cast(pl.Int32, strict=False))
            .alias("cpus"),
        ).unique(maintain_order=True)

    data = (
        timed.filter(pl.col("kind") == "data")
        .join(hmap, on="hdr", how="left")
        .with_columns(ss.tokens(pl.col("rest")).alias("tok"))
    )
    data = data.with_columns(sx.text_tail(sections))
    no_hdr = data["sid"].is_null()
    bad_width = ~no_hdr & (data["tok"].list.len() != data["width"])
    cov.add_skipped("data row without a section header", int(no_hdr.sum()))
    cov.add_skipped("field count differs from its section header", int(bad_width.sum()))
    good = data.filter(~no_hdr & ~bad_width)
    cov.parsed += good.height
    human = bool(good["rest"].str.contains(r"\d[BkKMGTPE%](\s|$)").any())  # sar --human
    for table, frame in sx.extract(good.select("ts", "sid", "tok"), sections, human).items():
        tables[table] = TABLES[table].conform(frame).collect()
    if "sar_events" in tables:
        tables["sar_events"] = TABLES["sar_events"].conform(tables["sar_events"]).collect()
    meta: dict[str, object] = {"tool": "sar"}
    if banner is not None:
        meta.update(banner.meta())
    return base.ParseResult(tables=tables, coverage=cov, meta=meta)
