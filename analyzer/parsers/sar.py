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
``sar_net_edev``; the names and units are in `_sar_tables`) and values are taken by column
name, so versions with extra or missing columns (``kbavail``, ``kbshmem``, ``%vmeff`` vs
``pgprom/s pgdem/s``, ``blocked``, ``%ifutil``) parse alike. Every other section (``-I``,
``-v``, ``-H``, ``-y``, ``-n SOCK``, ``-n TCP``..., ``-m``, ``-F``) goes to ``sar_other`` in
long form (one row per value). ``LINUX RESTART`` and ``COM`` lines -> ``sar_events``
(deduplicated: ``sar -A -f`` repeats them per activity). ``Average:`` rows (any locale) are
structure.

Reading: block by block (`_blocks.Blocks`), one path for every file size. Each line gets a
kind (`_Stream._lines`); a data row belongs to the header line above it (carried across
blocks) and is split into one token per header name. ``--human`` is decided for the whole
file (`_human`), and only asked when a row could read differently under it.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _blocks, _read, base
from analyzer.parsers import _sar_tables as st
from analyzer.parsers import _sysstat as ss

TABLES: dict[str, base.Table] = st.TABLES

ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
TIME = r"^(\d{1,2}:\d{2}:\d{2}(?:\s?[AaPp]\.?[Mm]\.?)?)(?:\s|$)"
NUM_TOKEN = r"(^|\s)[-+]?\d+(?:[.,]\d+)?[BkKMGTPE%]?(\s|$)"
BANNER_LOOSE = r"^Linux \S+ \([^)]*\)\s+\S+"
AVG_LABELS = r"^(Average|Summary|Durchschn\.|Moyenne|Media|Promedio|Gemiddeld|Среднее)\s?:"
HUMAN = r"\d[BkKMGTPE%](\s|$)"
_CLOCK = r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)  "  # a valid 24-hour time
_EVENT = r"^.{8}\s*(?:LINUX RESTART|COM )"  # a 24-hour line that may be an event
_TIMED = ("data", "restart", "comment")
_TOKEN = {True: r"[^\sA-Za-z%]", False: r"\S"}  # a token read as a number / as text
_SAR_NAMES = re.compile(
    r"runq-sz|kbmemfree|pgpgin/s|IFACE\s+rx(pck|err)/s|proc/s|pswpin/s|bread/s|%scpu-10|"
    r"kbswpfree|kbhugfree|dentunusd|totsck|CPU\s+%user\s+%nice\s+%system|"
    r"CPU\s+%usr\s+%nice\s+%sys\s+%iowait\s+%steal\s+%irq|DEV\s+tps|INTR\s+intr/s|LINUX RESTART|"
    r"%[sf](cpu|io|mem)-10|\btps\s+rkB/s\s+wkB/s\b.*\bDEV$|CPU\s+(wgh)?MHz|rxpck/s|rxerr/s"
)


def sniff(head: str, name: str) -> float:
    """sar text: a sysstat banner plus a header naming sar-only columns."""
    lines = head.splitlines()[:200]
    banner = any(re.match(ss.BANNER_PL, ln) or re.match(BANNER_LOOSE, ln) for ln in lines[:5])
    timed_hdr = any(
        re.match(r"^\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?\s", ln) and _SAR_NAMES.search(ln.rstrip())
        for ln in lines
    )
    return (0.95 if banner else 0.6) if timed_hdr else 0.0


# --- lines -----------------------------------------------------------------------------


def seconds_of_day(t: pl.Expr) -> pl.Expr:
    """``HH:MM:SS`` [``AM``/``PM``] -> seconds of day (cheaper than one regex per field)."""
    p = t.str.split_exact(":", 2)
    h = p.struct.field("field_0").cast(pl.Int32, strict=False)
    m = p.struct.field("field_1").cast(pl.Int32, strict=False)
    sec = p.struct.field("field_2").str.slice(0, 2).cast(pl.Int32, strict=False)
    pm, am = t.str.contains("[Pp]"), t.str.contains("[Aa]")
    h24 = pl.when(pm & (h < 12)).then(h + 12).when(am & (h == 12)).then(0).otherwise(h)
    ok = (h24 < 24) & (m < 60) & (sec < 61) & ~((pm | am) & (h > 12))
    return pl.when(ok).then(h24 * 3600 + m * 60 + sec).cast(pl.Int32)


def _rest(line: pl.Expr, tlen: pl.Expr | int) -> pl.Expr:
    """The text after the time (blanks around it stripped; NULL when empty)."""
    rest = line.str.slice(tlen).str.strip_chars()
    return pl.when(rest != "").then(rest)


def _classify_full(lines: pl.DataFrame) -> pl.DataFrame:
    """``line_no``, ``kind``, ``sec``, ``tlen`` (characters of the time), ``line`` of any lines."""
    # staged with_columns: each regex runs once (a when/then chain would re-run them)
    line = pl.col("line")
    lf = lines.lazy().with_columns(line.str.extract(TIME).alias("_t"))
    lf = lf.with_columns(
        pl.col("_t").str.len_chars().cast(pl.Int32).alias("tlen"),
        seconds_of_day(pl.col("_t")).alias("sec"),
    ).with_columns(_rest(line, pl.col("tlen")).alias("rest"))
    rest = pl.col("rest")
    lf = lf.with_columns(
        (line.str.strip_chars() == "").alias("_blank"),
        (line.str.contains(ss.BANNER_PL) | line.str.contains(BANNER_LOOSE)).alias("_banner"),
        (
            line.str.contains(AVG_LABELS)
            | (line.str.contains(ss.AVERAGE_RE) & line.str.contains(NUM_TOKEN))
        ).alias("_avg"),
        rest.str.contains(NUM_TOKEN).fill_null(False).alias("_num"),
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
    return lf.select("line_no", kind.alias("kind"), "sec", "tlen", "line").collect()


def _clock_times(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` of lines that start with a valid ``HH:MM:SS`` (`_CLOCK`), with ``sec`` (their
    seconds of day) and ``tlen`` (8)."""
    sec = ss.clock_seconds(pl.col("line")).fill_null(86400)  # the one left: 23:59:60
    return rows.with_columns(sec.cast(pl.Int32).alias("sec"), pl.lit(8, pl.Int32).alias("tlen"))


def _in_order(*frames: pl.DataFrame) -> pl.DataFrame:
    """The rows of frames sorted by ``line_no`` (each already is) in one frame."""
    out = frames[0]
    for f in frames[1:]:
        if f.height:
            out = out.merge_sorted(f, "line_no") if out.height else f
    return out


# --- the file, block by block ------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """A header line: its section, the characters of its time and ``fields``: the regex of a
    row that holds one token per header name after the time, each one a group, blanks
    between them (a token read as a number without a letter or ``%``: only there would
    ``--human`` read it otherwise). None for a section with free-text columns."""

    sid: int
    tlen: int
    fields: str | None


@dataclass
class _Stream:
    """A sar text file read block by block: what carries from one block to the next.
    ``human``: whether values are read as ``--human`` numbers, or a function that tells
    (called once, when a row first needs it)."""

    day0: date | None
    zone: str | None
    human: bool | Callable[[], bool]
    hid: int = -1  # header line in effect (index in ``layouts``; -1: none, or an Average block)
    run: int = 0  # runs of rows so far (a run ends at an Average block)
    last_sec: int | None = None  # clock of the current run's last timed row
    day: int = 0  # midnight roll-overs in the current run so far
    sections: list[st.Section] = field(default_factory=list)
    sids: dict[str, int] = field(default_factory=dict)  # header text -> section
    lids: dict[tuple[int, str], int] = field(default_factory=dict)  # (tlen, tail) -> layout
    layouts: list[_Layout] = field(default_factory=list)
    events: pl.DataFrame | None = None  # events already kept (deduplicated over the file)

    def is_human(self) -> bool:
        if callable(self.human):
            self.human = bool(self.human())
        return self.human

    def block(
        self, block: _blocks.Block, cov: base.Coverage, counts: Counter[str]
    ) -> dict[str, pl.DataFrame]:
        """Tables of one block (events first, then in section order)."""
        events, parts, loose = self.rows(block, cov, counts)
        tables = {} if events is None else {"sar_events": events}
        if parts:
            # rows that both readings read alike need no answer (it costs a pass)
            human = self.is_human() if loose or isinstance(self.human, bool) else False
            tables |= st.tables_of(parts, human, b"," not in block.data)
        return tables

    def rows(
        self, block: _blocks.Block, cov: base.Coverage, counts: Counter[str]
    ) -> tuple[pl.DataFrame | None, list[tuple[st.Section, pl.DataFrame]], bool]:
        """The block's new events, the token rows of each section (in section order: ``ts``,
        ``line_no``, ``line``, ``t0``…) and whether ``--human`` may change their values."""
        lines = block.lines
        if b"\x1b" in block.data:
            lines = lines.with_columns(pl.col("line").str.replace_all(ANSI, ""))
        timed, marks = self._lines(lines, counts)
        at, hids = marks.get_column("line_no").to_numpy(), marks.get_column("hid").to_numpy()
        avg = at[hids < 0]
        seg = self.run + np.searchsorted(avg, timed.get_column("line_no").to_numpy(), "right")
        timed = timed.with_columns(self._ts(timed.get_column("sec"), seg, self.run + avg.size))
        is_data = timed.get_column("kind") == "data"
        data = timed if is_data.all() else timed.filter(is_data)
        new = None if data is timed else self._events(timed.filter(~is_data), cov)
        pos = np.searchsorted(at, data.get_column("line_no").to_numpy(), "right") - 1
        hid = np.where(pos >= 0, hids[np.maximum(pos, 0)] if hids.size else -1, self.hid)
        if hids.size:
            self.hid = int(hids[-1])
        cov.add_skipped("data row without a section header", int((hid < 0).sum()))
        data = data.with_columns(pl.Series("hid", hid)).filter(pl.col("hid") >= 0)
        by_sid: dict[int, list[pl.DataFrame]] = {}
        loose = False
        for (h,), rows in data.partition_by("hid", as_dict=True, maintain_order=True).items():
            lay = self.layouts[int(h)]
            cut, rest = self._cut(rows, lay) if lay.fields else (rows.clear(), rows)
            by_sid.setdefault(lay.sid, []).append(cut)
            if rest.height:
                by_sid[lay.sid].append(_split(rest, self.sections[lay.sid], cov))
                loose = True
        parts = []
        for sid in sorted(by_sid):
            if frames := [f for f in by_sid[sid] if f.height]:
                rows = pl.concat(frames, how="vertical")
                parts.append((self.sections[sid], rows.sort("line_no") if frames[1:] else rows))
                cov.parsed += rows.height
        return new, parts, loose

    def _lines(
        self, lines: pl.DataFrame, counts: Counter[str]
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The timed lines (``line_no``, ``kind``: data, restart or comment, ``sec``, ``tlen``,
        ``line``) and the marks (``line_no``; ``hid``: a header line's layout, -1 for an
        Average line) of a block, each in line order; every line's kind counted in ``counts``.

        A line that starts with a valid ``HH:MM:SS`` and two blanks (`_CLOCK`) is a known
        header by its text after the time, else with a number token (banners and ``Average:``
        lines start with a letter) a data row unless it starts like an event, else it takes
        the kind `_classify_full` gives the first line with its text. Every other line goes
        through `_classify_full`."""
        line, kind = pl.col("line"), pl.col("kind")
        known = {tail: hid for (tlen, tail), hid in self.lids.items() if tlen == 8}
        hid = line.str.slice(8).replace_strict(
            list(known), list(known.values()), default=None, return_dtype=pl.Int64
        )
        lines = lines.with_columns(line.str.contains(_CLOCK).alias("_c"))
        other = lines.filter(~pl.col("_c") & (line.str.len_bytes() > 0)).drop("_c")
        clock = lines.filter(pl.col("_c")).select("line_no", "line", hid.alias("hid"))
        counts["blank"] += lines.height - clock.height - other.height
        heads = clock.filter(pl.col("hid").is_not_null()).select("line_no", "hid")
        counts["header"] += heads.height
        fast = line.str.contains(NUM_TOKEN) & ~line.str.contains(_EVENT)
        clock = clock.filter(pl.col("hid").is_null()).drop("hid").with_columns(fast.alias("_f"))
        data = _clock_times(clock.filter("_f")).select(
            "line_no", pl.lit("data").alias("kind"), "sec", "tlen", "line"
        )
        # the others (new headers, events): one line per text after the time is classified,
        # in line order with every other line (sections are numbered in that order)
        exact = clock.filter(~pl.col("_f")).select(
            "line_no", "line", line.str.slice(8).alias("tail")
        )
        texts = exact.unique("tail", keep="first", maintain_order=True)
        found = _classify_full(_in_order(texts.drop("tail"), other))
        found = self._with_hids(found.with_columns(line.str.slice("tlen").alias("tail")))
        is_text = found.get_column("line_no").is_in(texts.get_column("line_no").implode())
        by_text = found.filter(is_text).select("tail", "kind", "hid")
        parts = [exact.join(by_text, on="tail", how="left", maintain_order="left")]
        parts.append(found.filter(~is_text))
        marks, timed = [heads], [data]
        for part in parts:
            counts.update(dict(part.get_column("kind").value_counts().iter_rows()))
            marks.append(part.filter(kind.is_in(["header", "average"])).select("line_no", "hid"))
            timed.append(part.filter(kind.is_in(_TIMED)))
        timed[1] = _clock_times(timed[1])
        return _in_order(*(t.select(data.columns) for t in timed)), _in_order(*marks)

    def _with_hids(self, lines: pl.DataFrame) -> pl.DataFrame:
        """``lines`` (``kind``, ``tlen``, ``tail``: the text after the time) with ``hid``: the
        layout of a header line (new sections and layouts registered in line order), -1 for
        an Average line."""
        heads = lines.filter(pl.col("kind") == "header").unique(
            ["tlen", "tail"], maintain_order=True
        )
        keys = list(heads.select("tlen", "tail").iter_rows())
        for key, rest in zip(keys, heads.get_column("tail").str.strip_chars(), strict=True):
            if key not in self.lids:
                self.lids[key] = len(self.layouts)
                self.layouts.append(self._layout(key[0], rest))
        ids = heads.select(
            "tlen", "tail", pl.Series("hid", [self.lids[k] for k in keys], dtype=pl.Int64)
        )
        lines = lines.join(ids, on=["tlen", "tail"], how="left", maintain_order="left")
        return lines.with_columns(
            pl.when(pl.col("kind") == "average").then(-1).otherwise("hid").alias("hid")
        )

    def _layout(self, tlen: int, text: str) -> _Layout:
        if text not in self.sids:
            self.sids[text] = len(self.sections)
            self.sections.append(st.make_section(text.split()))
        sid = self.sids[text]
        sec = self.sections[sid]
        if any(n in st.TEXT_NAMES for n in sec.names):
            return _Layout(sid, tlen, None)
        number = set(st.number_positions(sec))
        groups = "".join(f" +({_TOKEN[j in number]}+)" for j in range(sec.width))
        return _Layout(sid, tlen, f"^.{{{tlen}}}{groups} *$")

    def _cut(self, rows: pl.DataFrame, lay: _Layout) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The rows of one header line that `_Layout.fields` matches, with their tokens
        (``t0``…; then they are those of a split at blanks), and the others."""
        assert lay.fields is not None
        found = pl.col("line").str.extract_groups(lay.fields).alias("_g")
        cut = rows.select("ts", "line_no", "line", found)
        ok = cut.get_column("_g").struct.field("1").is_not_null() & (rows["tlen"] == lay.tlen)
        fit = cut if ok.all() else cut.filter(ok)
        n = self.sections[lay.sid].width
        fields = (pl.col("_g").struct.field(str(j + 1)).alias(f"t{j}") for j in range(n))
        rest = rows.filter(~ok) if fit is not cut else rows.clear()
        return fit.select("ts", "line_no", "line", *fields), rest

    def _ts(self, sec: pl.Series, seg: np.ndarray, last_run: int) -> pl.Series:
        """``ts`` of timed rows (in line order) with these seconds of day and runs: the day
        is the midnight roll-overs since the start of each run, the run's rows of earlier
        blocks included; ``last_run``: the run the block ends in."""
        prev = pl.Series("sec", [self.last_sec], dtype=pl.Int32).append(sec)
        if last_run == self.run:  # one run: the day goes on from the carried one
            day = (prev < prev.shift(1)).fill_null(False).cast(pl.Int32).cum_sum().slice(1)
            day = day + self.day
        else:
            runs = pl.DataFrame({"sec": prev, "seg": np.concatenate([[self.run], seg])})
            back = pl.col("sec") < pl.col("sec").shift(1).over("seg")
            days = runs.select(back.fill_null(False).cast(pl.Int32).cum_sum().over("seg"))
            carried = np.where(seg == self.run, self.day, 0)
            day = days.to_series().slice(1) + pl.Series(carried, dtype=pl.Int32)
        tail = seg == last_run
        if tail.any():
            self.last_sec, self.day = sec[int(np.flatnonzero(tail)[-1])], day[-1]
        elif last_run != self.run:
            self.last_sec, self.day = None, 0
        self.run = last_run
        if self.day0 is None:
            return pl.Series("ts", [None] * sec.len(), dtype=base.TS)
        naive = pl.lit(datetime.combine(self.day0, datetime.min.time())) + pl.duration(
            seconds=pl.col("sec") + pl.col("day") * 86400
        )
        frame = pl.DataFrame({"sec": sec, "day": day})
        return frame.select(ss.local_to_utc(naive, self.zone).alias("ts")).to_series()

    def _events(self, ev: pl.DataFrame, cov: base.Coverage) -> pl.DataFrame | None:
        """LINUX RESTART / COM rows, each distinct event once per file."""
        if ev.height == 0:
            return None
        cov.parsed += ev.height
        rows = st.event_rows(ev, _rest(pl.col("line"), pl.col("tlen")), "LINUX RESTART")
        if self.events is not None:
            rows = rows.join(self.events, on=rows.columns, how="anti", nulls_equal=True)
        self.events = rows if self.events is None else pl.concat([self.events, rows])
        return rows if rows.height else None


def _split(rows: pl.DataFrame, sec: st.Section, cov: base.Coverage) -> pl.DataFrame:
    """Tokens ``t0``… of rows split at blanks (free-text trailing columns re-joined); rows
    whose field count still differs from the header are counted as skipped."""
    tok = ss.tokens(_rest(pl.col("line"), pl.col("tlen")))
    w, n = sec.width, tok.list.len()
    ntext = next((i for i, name in enumerate(reversed(sec.names)) if name not in st.TEXT_NAMES), w)
    if ntext:  # USB manufact/product, FILESYSTEM: extra words go to the last column
        joined = tok.list.head(w - 1).list.concat(
            pl.concat_list(tok.list.slice(w - 1).list.join(" "))
        )
        padded = tok.list.concat(pl.lit([""] * ntext, pl.List(pl.String))).list.head(w)
        tok = (
            pl.when(n > w).then(joined).when((n < w) & (n >= w - ntext)).then(padded).otherwise(tok)
        )
    rows = rows.select("ts", "line_no", "line", tok.alias("_tok"))
    ok = rows.get_column("_tok").list.len() == w
    cov.add_skipped("field count differs from its section header", int((~ok).sum()))
    return rows.filter(ok).select(
        "ts", "line_no", "line", *(pl.col("_tok").list.get(j).alias(f"t{j}") for j in range(w))
    )


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
            if b"dsw" in data.translate(_CLASS):
                return True
            tail = data[-2:]
    return tail.translate(_CLASS) == b"ds"  # a suffix at the very end of the file


def _human(path: Path) -> bool:
    """Whether a data row of the file has a ``--human`` suffix (``4.3M``, ``20.4%``): then
    every value is read as a human number. When the bytes allow it (`_may_be_human`), the
    data rows are found exactly: a pass that follows the file's sections as `parse` does."""
    if not _may_be_human(path):
        return False
    stream, cov, counts = _Stream(day0=None, zone=None, human=False), base.Coverage(), Counter()
    for block in _blocks.Blocks(path):
        _, parts, _ = stream.rows(block, cov, counts)
        if any(rows.get_column("line").str.contains(HUMAN).any() for _, rows in parts):
            return True
    return False


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one sar text file (see the module docstring), block by block: each block's
    rows go to ``ctx.sink`` when there is one."""
    cov = base.Coverage()
    head = _read.read_head(path)
    banners = (ss.parse_banner(ln.replace("\x00", "")) for ln in head.splitlines()[:20])
    banner = next((b for b in banners if b), None)
    zone = ss.tz_for(ctx, cov)
    day0 = banner.date if banner is not None else None
    if day0 is None:
        cov.notes.append("no sysstat banner with a date: ts is NULL")
    stream = _Stream(day0=day0, zone=zone, human=lambda: _human(path))
    counts: Counter[str] = Counter()
    out = _blocks.Rows(ctx, TABLES)
    blocks = _blocks.Blocks(path)
    for block in blocks:
        out.put(stream.block(block, cov, counts))
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
