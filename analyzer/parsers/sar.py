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
from collections import Counter
from pathlib import Path

import polars as pl

from analyzer.parsers import _blocks, _read, base
from analyzer.parsers import _sar_blocks as sb
from analyzer.parsers import _sar_fast as sf
from analyzer.parsers import _sar_merge as sm
from analyzer.parsers import _sar_tables as st
from analyzer.parsers import _sysstat as ss

TABLES: dict[str, base.Table] = st.TABLES

_SAR_NAMES = re.compile(
    r"runq-sz|kbmemfree|pgpgin/s|IFACE\s+rx(pck|err)/s|proc/s|pswpin/s|bread/s|%scpu-10|"
    r"kbswpfree|kbhugfree|dentunusd|totsck|CPU\s+%user\s+%nice\s+%system|"
    r"CPU\s+%usr\s+%nice\s+%sys\s+%iowait\s+%steal\s+%irq|DEV\s+tps|INTR\s+intr/s|LINUX RESTART|"
    r"%[sf](cpu|io|mem)-10|\btps\s+rkB/s\s+wkB/s\b.*\bDEV$|CPU\s+(wgh)?MHz|rxpck/s|rxerr/s"
)


def sniff(head: str, name: str) -> float:
    """sar text: a sysstat banner plus a header naming sar-only columns."""
    lines = head.splitlines()[:200]
    banner = any(re.match(ss.BANNER_PL, ln) or re.match(sb.BANNER_LOOSE, ln) for ln in lines[:5])
    timed_hdr = any(
        re.match(r"^\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?\s", ln) and _SAR_NAMES.search(ln.rstrip())
        for ln in lines
    )
    if banner and timed_hdr:
        return 0.95
    if timed_hdr:
        return 0.6
    return 0.0


_CLASS = bytes(
    ord("d")
    if chr(b).isdigit() and b < 128
    else ord("s")
    if chr(b) in "BkKMGTPE%"
    else ord("w")
    if chr(b) in " \t\n\r\x0b\x0c"
    else ord("x")
    for b in range(256)
)


def _may_be_human(path: Path, chunk: int = 8 << 20) -> bool:
    """False when no line can hold a ``--human`` value: no ASCII digit followed by a suffix
    and a blank or the line end anywhere in the bytes (one ``translate`` and one substring
    search per chunk, no line split). Bytes that the line reading would change (colour
    codes, NUL) or that are not ASCII (Unicode digits and blanks) make it answer True."""
    tail = b""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            data = tail + block
            if not data.isascii() or b"\x1b" in data or b"\x00" in data:
                return True
            kinds = data.translate(_CLASS)
            if b"dsw" in kinds:
                return True
            tail = data[-2:]
    return tail.translate(_CLASS) == b"ds"  # a suffix at the very end of the file


def _human(path: Path) -> bool:
    """Whether a data row of the file has a ``--human`` suffix (``4.3M``, ``20.4%``): then
    every value is read as a human number. When the bytes allow it (`_may_be_human`), the
    data rows are found exactly: a pass that classifies the file and follows its sections
    as `parse` does."""
    if not _may_be_human(path):
        return False
    stream, cov = sb.Stream(day0=None, zone=None, human=False), base.Coverage()
    for block in _blocks.Blocks(path):
        df = stream.headers(sb.classify(block.lines, b"\x1b" not in block.data))
        good = stream.good_rows(df.filter(pl.col("kind") == "data"), cov)
        if good.get_column("rest").str.contains(sb.HUMAN).any():
            return True
    return False


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one sar text file (see the module docstring), block by block: each block's
    rows go to ``ctx.sink`` when there is one."""
    cov = base.Coverage()
    head = _read.read_head(path)
    banner = next(
        (
            b
            for b in (ss.parse_banner(ln.replace("\x00", "")) for ln in head.splitlines()[:20])
            if b
        ),
        None,
    )
    zone = ss.tz_for(ctx, cov)
    day0 = banner.date if banner is not None else None
    if day0 is None:
        cov.notes.append("no sysstat banner with a date: ts is NULL")
    stream = sb.Stream(day0=day0, zone=zone, human=lambda: _human(path))
    tails = sf.Tails()
    counts: Counter[str] = Counter()
    out = _blocks.Rows(ctx, TABLES)
    blocks = _blocks.Blocks(path)
    for block in blocks:
        colour, plain = b"\x1b" in block.data, b"," not in block.data
        part = sf.split(block, tails, stream.hdr_tail) if block.plain and not colour else None
        if part is not None and part.fast is not None:
            stream.hdr_tail = part.end_tail
            counts["blank"] += part.blanks
            counts["header"] += part.fast.head_line.size
            counts["data"] += part.fast.idx.size
            counts.update(dict(part.df.get_column("kind").value_counts().iter_rows()))
            out.put(sm.block(stream, part, cov, plain, tails))
        else:
            df = part.df if part is not None else sb.classify(block.lines, not colour)
            stream.hdr_tail = -1
            counts.update(dict(df.get_column("kind").value_counts().iter_rows()))
            out.put(stream.block(df, cov, plain))
        cov.total += block.n_lines
    for k in ("banner", "blank", "header", "average"):
        cov.add_structure(k, counts[k])
    cov.add_skipped("unrecognized line (not sar output)", counts["garbage"])
    if blocks.repaired:
        cov.notes.insert(0, "file is not valid UTF-8: invalid bytes replaced")
    meta: dict[str, object] = {"tool": "sar"}
    if banner is not None:
        meta.update(banner.meta())
    return base.ParseResult(tables=dict(out.tables()), coverage=cov, meta=meta)
