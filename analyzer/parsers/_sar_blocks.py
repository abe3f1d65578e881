"""sar text, one block at a time (private helper of ``sar``).

`classify` gives every line its kind (blank, banner, average, header, data, restart,
comment, garbage), its time of day and the text after the time. `Stream.block` ties
data rows to the section header above them, numbers the midnight roll-overs of each run
of rows (a run ends at an ``Average:`` block), and builds the block's tables; what
continues into the next block (the header in effect, the run's clock and day count, the
sections met so far, the events already seen) stays in the `Stream`.

Speed: a line that starts with ``HH:MM:SS`` and two blanks (every row and header sar
prints with a 24-hour clock) is split by position: its time is its first 8 bytes, so no
time regex runs on it, and it cannot be a banner or an ``Average:`` line (those start
with a letter). Empty lines are blank. Every other line goes through the full
classification (`_classify_full`), as does a block with colour escape codes. Blocks of
plain ASCII mostly skip this module's frames: `_sar_fast` reads their headers and data
rows from the bytes and `_sar_merge` does what `Stream.block` does with the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime

import polars as pl

from analyzer.parsers import _sar_extract as sx
from analyzer.parsers import _sysstat as ss
from analyzer.parsers import base

ANSI = r"\x1b\[[0-9;]*[A-Za-z]"
TIME = r"^(\d{1,2}:\d{2}:\d{2}(?:\s?[AaPp]\.?[Mm]\.?)?)(?:\s|$)"
NUM_TOKEN = r"(^|\s)[-+]?\d+(?:[.,]\d+)?[BkKMGTPE%]?(\s|$)"
BANNER_LOOSE = r"^Linux \S+ \([^)]*\)\s+\S+"
AVG_LABELS = r"^(Average|Summary|Durchschn\.|Moyenne|Media|Promedio|Gemiddeld|Среднее)\s?:"
HUMAN = r"\d[BkKMGTPE%](\s|$)"
_CLOCK = r"^[0-9]{2}:[0-9]{2}:[0-9]{2}  "


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


def _timed_kind(rest: pl.Expr, sec: pl.Expr, num: pl.Expr) -> pl.Expr:
    """Kind of a line that is not blank, banner or average."""
    return (
        pl.when(rest.is_null() | sec.is_null())
        .then(pl.lit("garbage"))
        .when(rest.str.starts_with("LINUX RESTART"))
        .then(pl.lit("restart"))
        .when(rest.str.starts_with("COM "))
        .then(pl.lit("comment"))
        .when(~num)
        .then(pl.lit("header"))
        .otherwise(pl.lit("data"))
    )


def _classify_full(lines: pl.DataFrame) -> pl.DataFrame:
    """``line_no``, ``kind``, ``sec``, ``rest`` of any lines (colour codes removed)."""
    # staged with_columns: each regex runs once (a when/then chain would re-run them)
    lf = (
        lines.lazy()
        .with_columns(pl.col("line").str.replace_all(ANSI, ""))
        .with_columns(pl.col("line").str.extract(TIME).alias("_t"))
    )
    lf = lf.with_columns(
        pl.col("line").str.slice(pl.col("_t").str.len_chars()).str.strip_chars().alias("rest"),
        seconds_of_day(pl.col("_t")).alias("sec"),
    ).with_columns(pl.when(pl.col("rest") != "").then(pl.col("rest")).alias("rest"))
    line, rest = pl.col("line"), pl.col("rest")
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
        .otherwise(_timed_kind(rest, pl.col("sec"), pl.col("_num")))
    )
    return lf.select("line_no", kind.alias("kind"), "sec", "rest").collect()


def classify(lines: pl.DataFrame, plain: bool) -> pl.DataFrame:
    """`_classify_full` of ``lines``, by position for 24-hour rows (see the module doc).
    ``plain``: the block has no escape byte (colour codes cannot occur)."""
    if not plain:
        return _classify_full(lines)
    line = pl.col("line")
    clock = line.str.contains(_CLOCK)
    empty = line.str.len_bytes() == 0
    timed = lines.filter(clock)
    rest = line.str.slice(8).str.strip_chars()
    h, m, s = (line.str.slice(i, 2).cast(pl.Int32, strict=False) for i in (0, 3, 6))
    sec = pl.when((h < 24) & (m < 60) & (s < 61)).then(h * 3600 + m * 60 + s).cast(pl.Int32)
    timed = timed.select(
        "line_no", pl.when(rest != "").then(rest).alias("rest"), sec.alias("sec")
    ).with_columns(
        kind=_timed_kind(
            pl.col("rest"),
            pl.col("sec"),
            pl.col("rest").str.contains(NUM_TOKEN).fill_null(False),
        )
    )
    blank = lines.filter(empty).select(
        "line_no",
        pl.lit("blank").alias("kind"),
        pl.lit(None, pl.Int32).alias("sec"),
        pl.lit(None, pl.String).alias("rest"),
    )
    other = _classify_full(lines.filter(~clock & ~empty))
    timed = timed.select("line_no", "kind", "sec", "rest")
    return timed.merge_sorted(blank, "line_no").merge_sorted(other, "line_no")


@dataclass
class Stream:
    """A sar text file read block by block: what carries from one block to the next.
    ``human``: whether values are read as ``--human`` numbers, or a function that tells
    (called once, when rows of the regular path first need it)."""

    day0: date | None
    zone: str | None
    human: bool | Callable[[], bool]
    hdr: str | None = None  # section header in effect ('' after an Average block)
    hdr_tail: int = -1  # its `_sar_fast.Tails` id (-1: none known)
    run: int = 0  # runs of rows so far (a run ends at an Average block)
    last_sec: int | None = None  # clock of the current run's last timed row
    day: int = 0  # midnight roll-overs in the current run so far
    sections: list[sx.Section] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # header text of each section
    events: pl.DataFrame | None = None  # events already kept (deduplicated over the file)

    def is_human(self) -> bool:
        if callable(self.human):
            self.human = bool(self.human())
        return self.human

    def block(
        self, df: pl.DataFrame, cov: base.Coverage, plain: bool = False
    ) -> dict[str, pl.DataFrame]:
        """Tables of one classified block (events first, then in section order);
        ``plain``: the block has no comma (`_sar_extract.cast_value`)."""
        df = self.headers(df)
        timed = self._days(
            df.filter(pl.col("kind").is_in(["data", "restart", "comment"])),
            df.get_column("seg")[-1] if df.height else self.run,
        )
        if self.day0 is None:
            ts = pl.lit(None, base.TS)
        else:
            naive = pl.lit(datetime.combine(self.day0, datetime.min.time())) + pl.duration(
                seconds=pl.col("sec") + pl.col("day") * 86400
            )
            ts = ss.local_to_utc(naive, self.zone)
        timed = timed.with_columns(ts.alias("ts"))
        tables: dict[str, pl.DataFrame] = {}
        events = self._events(timed.filter(pl.col("kind").is_in(["restart", "comment"])), cov)
        if events is not None:
            tables["sar_events"] = events
        good = self.good_rows(timed.filter(pl.col("kind") == "data"), cov)
        cov.parsed += good.height
        if good.height:
            human = self.is_human()
            rows = good.select("ts", "sid", "tok")
            tables |= sx.extract(rows, self.sections, human, plain and not human)
        return tables

    def headers(self, df: pl.DataFrame) -> pl.DataFrame:
        """``hdr`` (header text in effect) and ``seg`` (run number) of every line."""
        kind = pl.col("kind")
        df = df.with_columns(
            pl.when(kind == "header")
            .then(pl.col("rest"))
            .when(kind == "average")
            .then(pl.lit(""))  # a section ends with its Average block
            .otherwise(None)
            .forward_fill()
            .fill_null(pl.lit(self.hdr, pl.String))
            .alias("hdr"),
            ((kind == "average").cum_sum().cast(pl.Int64) + self.run).alias("seg"),
        )
        if df.height:
            self.hdr = df.get_column("hdr")[-1]
        for text in df.filter(kind == "header").get_column("rest").unique(maintain_order=True):
            if text not in self.texts:
                self.texts.append(text)
                self.sections.append(sx.make_section(text.split()))
        return df

    def _days(self, timed: pl.DataFrame, last_run: int) -> pl.DataFrame:
        """``day``: midnight roll-overs since the start of each run, the run's rows of
        earlier blocks included; ``last_run``: the run the block ends in."""
        prev = pl.DataFrame(
            {"sec": [self.last_sec], "seg": [self.run]},
            schema={"sec": pl.Int32, "seg": pl.Int64},
        )
        both = pl.concat([prev, timed.select("sec", "seg")]).with_columns(
            (pl.col("sec") < pl.col("sec").shift(1).over("seg"))
            .fill_null(False)
            .cast(pl.Int32)
            .cum_sum()
            .over("seg")
            .alias("day")
        )
        carried = pl.when(pl.col("seg") == self.run).then(self.day).otherwise(0)
        timed = timed.with_columns(
            (both.get_column("day").slice(1) + timed.select(carried).to_series()).alias("day")
        )
        tail = timed.filter(pl.col("seg") == last_run)
        if tail.height:
            self.last_sec, self.day = tail.get_column("sec")[-1], tail.get_column("day")[-1]
        elif last_run != self.run:
            self.last_sec, self.day = None, 0
        self.run = last_run
        return timed

    def _events(self, ev: pl.DataFrame, cov: base.Coverage) -> pl.DataFrame | None:
        """LINUX RESTART / COM rows, each distinct event once per file."""
        if ev.height == 0:
            return None
        cov.parsed += ev.height
        restart = pl.col("kind") == "restart"
        rows = ev.select(
            "ts",
            pl.when(restart).then(pl.lit("restart")).otherwise(pl.lit("comment")).alias("event"),
            pl.when(restart)
            .then(pl.col("rest").str.strip_prefix("LINUX RESTART").str.strip_chars())
            .otherwise(pl.col("rest").str.strip_prefix("COM "))
            .alias("detail"),
            pl.when(restart)
            .then(pl.col("rest").str.extract(r"\((\d+) CPU\)").cast(pl.Int32, strict=False))
            .alias("cpus"),
        ).unique(maintain_order=True)
        if self.events is not None:
            rows = rows.join(self.events, on=rows.columns, how="anti", nulls_equal=True)
            self.events = pl.concat([self.events, rows])
        else:
            self.events = rows
        return rows if rows.height else None

    def good_rows(self, data: pl.DataFrame, cov: base.Coverage) -> pl.DataFrame:
        """Data rows with ``sid`` and ``tok`` (width checked; text tails re-joined); the
        others are counted as skipped."""
        hmap = pl.DataFrame(
            {
                "hdr": self.texts,
                "sid": list(range(len(self.texts))),
                "width": [s.width for s in self.sections],
            },
            schema={"hdr": pl.String, "sid": pl.Int32, "width": pl.Int32},
        )
        data = data.join(hmap, on="hdr", how="left", maintain_order="left").with_columns(
            ss.tokens(pl.col("rest")).alias("tok")
        )
        data = data.with_columns(sx.text_tail(self.sections))
        no_hdr = data["sid"].is_null()
        bad_width = ~no_hdr & (data["tok"].list.len() != data["width"])
        cov.add_skipped("data row without a section header", int(no_hdr.sum()))
        cov.add_skipped("field count differs from its section header", int(bad_width.sum()))
        return data.filter(~no_hdr & ~bad_width)
