"""Shared helpers for sysstat text and JSON output (iostat, mpstat; usable by sar/pidstat).

Everything here is general sysstat knowledge, not tied to one tool:

- the banner ``Linux <release> (<host>) \\t<date> \\t_<arch>_\\t(<n> CPU)`` (:func:`parse_banner`),
  with the date in C (``11/29/26``), en_US (``11/29/2026``), de_DE (``29.11.2026``) or ISO
  (``2026-11-29``) form (:func:`parse_date`);
- time-of-day tokens ``17:23:36`` / ``05:23:36 PM`` as seconds of day (:func:`seconds_of_day`)
  and the vectorized midnight roll-over (:func:`day_rollover`);
- localized ``Average:`` labels (:data:`AVERAGE_RE`: ``Average:``, ``Durchschn.:``, ``Moyenne :``);
- local wall-clock -> UTC (:func:`resolve_tz`, :func:`local_to_utc`);
- column-aligned slicing of right-aligned tables with a per-row boundary check
  (:func:`header_layout`, :func:`aligned_fields`) and the whitespace-split fallback
  (:func:`tokens`);
- numbers with a decimal comma and ``--human`` suffixes (:func:`human_number`).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import polars as pl

from analyzer.parsers import _read, base
from analyzer.parsers import _sysstat_swar as swar

BANNER_RE = re.compile(
    r"^(?P<sysname>[A-Za-z][\w.-]*) (?P<release>\S+) \((?P<host>[^)]*)\)\s+(?P<date>\S+)\s+"
    r"_(?P<arch>\S+)_\s+\((?P<cpus>\d+) CPU\)"
)
#: polars regex matching a banner line (same shape as :data:`BANNER_RE`).
BANNER_PL = r"^[A-Za-z][\w.-]* \S+ \([^)]*\)\s+\S+\s+_\S+_\s+\(\d+ CPU\)"
#: A localized "Average:" label at the start of a line: a first token that starts with a
#: non-digit and ends with ':' (``Average:``, ``Durchschn.:``, ``Moyenne :``).
AVERAGE_RE = r"^[^\s\d][^\s:]{0,24} ?:(\s|$)"
#: A time-of-day token at the start of a line, with an optional 12-hour marker.
TIME_RE = r"^(\d{1,2}):(\d{2}):(\d{2})(?:\s?([AaPp])\.?[Mm]\.?)?"

#: Multipliers of the ``--human`` suffixes when the printed unit is kB (sysstat prints
#: sizes in binary multiples: ``4.3M`` kB/s = 4.3 * 1024 kB/s).
HUMAN_KB = {
    "B": 1 / 1024,
    "k": 1.0,
    "K": 1.0,
    "M": 1024.0,
    "G": 1024.0**2,
    "T": 1024.0**3,
    "P": 1024.0**4,
    "E": 1024.0**5,
}


@dataclass(frozen=True)
class Banner:
    """The first line of sysstat text output."""

    sysname: str
    release: str
    host: str
    date_text: str
    date: date | None
    arch: str
    cpus: int

    def meta(self) -> dict[str, object]:
        """Facts for ``ParseResult.meta``."""
        return {
            "host": self.host,
            "kernel": self.release,
            "date": self.date.isoformat() if self.date else None,
            "cpus": self.cpus,
            "arch": self.arch,
        }


def parse_banner(line: str) -> Banner | None:
    """Parse a sysstat banner line; None when ``line`` is not one."""
    m = BANNER_RE.match(line)
    if not m:
        return None
    return Banner(
        sysname=m["sysname"],
        release=m["release"],
        host=m["host"],
        date_text=m["date"],
        date=parse_date(m["date"]),
        arch=m["arch"],
        cpus=int(m["cpus"]),
    )


def parse_date(text: str) -> date | None:
    """A sysstat date in any of its locale forms; None when not a valid date.

    ``2026-11-29`` (ISO), ``29.11.2026`` (de_DE, day first), ``11/29/26`` and ``11/29/2026``
    (C / en_US, month first). A slash date whose first field is > 12 is read day first
    (en_GB style ``29/11/26``). Two-digit years are 20xx (sysstat's own convention; ``70`` of
    the upstream tests gives 1970).
    """
    m = re.fullmatch(r"(\d{1,4})([-/.])(\d{1,2})\2(\d{1,4})", text.strip())
    if not m:
        return None
    a, sep, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
    if sep == "-":
        y, mo, d = a, b, c
    elif sep == ".":
        d, mo, y = a, b, c
    else:
        mo, d, y = (a, b, c) if a <= 12 else (b, a, c)
    if y < 100:
        y += 1900 if y >= 70 else 2000
    try:
        return date(y, mo, d)
    except ValueError:
        return None


def _clock_seconds(h: pl.Expr, mi: pl.Expr, s: pl.Expr, ampm: pl.Expr) -> pl.Expr:
    """Seconds of day (Int32) of hour, minute, second and an optional ``A``/``P`` marker
    (12-hour clock: 12 AM is 0 h, 12 PM is 12 h); NULL when out of range."""
    h24 = (
        pl.when(ampm.is_null())
        .then(h)
        .when(ampm == "A")
        .then(pl.when(h == 12).then(0).otherwise(h))
        .otherwise(pl.when(h == 12).then(12).otherwise(h + 12))
    )
    valid = (h24 < 24) & (mi < 60) & (s < 61)
    return pl.when(valid).then(h24 * 3600 + mi * 60 + s).otherwise(None).cast(pl.Int32)


def seconds_of_day(token: pl.Expr) -> pl.Expr:
    """``HH:MM:SS`` with optional ``AM``/``PM`` as Int32 seconds of day (NULL when invalid).
    The regex runs once per token (its groups are fields of one match)."""
    f = pl.field
    h = f("1").cast(pl.Int32, strict=False)
    mi = f("2").cast(pl.Int32, strict=False)
    s = f("3").cast(pl.Int32, strict=False)
    sec = _clock_seconds(h, mi, s, f("4").str.to_uppercase())
    out = token.str.extract_groups(TIME_RE).struct.with_fields(_sec=sec).struct.field("_sec")
    return out.alias("1")  # the name it always had (its first group)


def day_rollover(sec: pl.Expr) -> pl.Expr:
    """Days elapsed since the first row, counting each backwards step of ``sec`` as midnight.

    ``sec`` must be the seconds of day of consecutive samples in file order (NULLs are
    ignored). Vectorized form of "+86400 whenever the clock goes back".
    """
    filled = sec.forward_fill()
    return (filled < filled.shift(1)).fill_null(False).cast(pl.Int32).cum_sum()


def resolve_tz(tz: str | None) -> tuple[str | None, str | None]:
    """Map ``ctx.tz`` to an IANA zone polars understands: ``(zone, note)``.

    POSIX forms without DST (``UTC0``, ``GMT0``, ``UTC``) map to ``UTC``. Unknown zones give
    ``(None, note)``; the caller then assumes UTC and records the note.
    """
    if not tz:
        return None, None
    t = tz.strip().lstrip(":")
    if re.fullmatch(r"(UTC|GMT|Z|UCT)(0|\+0|-0)?", t):
        return "UTC", None
    try:
        zoneinfo.ZoneInfo(t)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None, f"unknown time zone {tz!r}: local times assumed to be UTC"
    return t, None


def local_to_utc(naive: pl.Expr, tz: str | None) -> pl.Expr:
    """Naive local datetimes -> UTC ``base.TS`` (DST gaps become NULL, folds take the earliest)."""
    if tz is None or tz == "UTC":
        return naive.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    return (
        naive.cast(pl.Datetime("us"))
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def tz_for(ctx: base.ParseContext, coverage: base.Coverage) -> str | None:
    """The zone to read local times in; records a coverage note when UTC is assumed."""
    zone, note = resolve_tz(ctx.tz)
    if note:
        coverage.notes.append(note)
    if zone is None:
        coverage.notes.append("host time zone unknown: local timestamps interpreted as UTC")
    return zone


@dataclass(frozen=True)
class Layout:
    """Token names and their [start, end) offsets in a header line (right-aligned columns)."""

    names: tuple[str, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    width: int


def header_layout(header: str) -> Layout:
    """Positions of the whitespace-separated tokens of ``header`` (trailing blanks ignored)."""
    toks = list(re.finditer(r"\S+", header))
    return Layout(
        names=tuple(t.group() for t in toks),
        starts=tuple(t.start() for t in toks),
        ends=tuple(t.end() for t in toks),
        width=len(header.rstrip()),
    )


def aligned_fields(
    line: pl.Expr, layout: Layout, idx: Sequence[int], loose_first: bool = False
) -> tuple[pl.Expr, list[pl.Expr]]:
    """Cut right-aligned fields ``idx`` of ``layout`` out of ``line`` by position.

    Field ``i`` is the text in ``[ends[i-1], ends[i])``, blanks not stripped (:func:`number`
    strips them). Returns ``(ok, fields)``
    where ``ok`` is the per-row boundary check: the row has the header's width and a blank
    right before every field slot (fields that overflow their header push the rest of the row
    right, which this detects). Rows failing the check must be re-read with :func:`tokens`.
    With ``loose_first`` the first listed field takes the last token of its slot (a long
    left-aligned name before it, e.g. a device, may reach into the slot).
    """
    ok = line.str.strip_chars_end(" ").str.len_chars() == layout.width
    fields = []
    for n, i in enumerate(idx):
        start = layout.ends[i - 1] if i > 0 else 0
        slot = line.str.slice(start, layout.ends[i] - start)
        if n == 0 and loose_first:
            fields.append(slot.str.extract(r"(\S+)$"))
            ok = ok & (line.str.slice(layout.ends[i], 1).is_in([" ", ""]))
        else:
            fields.append(slot)
            if i > 0:
                ok = ok & (line.str.slice(start, 1) == " ")
    return ok.fill_null(False), fields


def tokens(line: pl.Expr) -> pl.Expr:
    """Whitespace-split fallback: the list of non-blank tokens of ``line``."""
    return line.str.extract_all(r"\S+")


def number(tok: pl.Expr, human: bool = False, comma: bool = True) -> pl.Expr:
    """A numeric token as Float64: decimal comma accepted; with ``human`` also ``4.3M``/``20.4%``.

    Human suffixes are read as binary multiples of kB (:data:`HUMAN_KB`); a trailing ``%`` is
    dropped. Anything else that is not a number gives NULL. ``comma=False`` (a file known to
    use decimal points, see :func:`uses_decimal_comma`) skips the comma replacement.
    """
    if not human:
        if not comma:
            return tok.str.strip_chars(" ").cast(pl.Float64, strict=False)
        return _read.decimal_number(tok)
    g = tok.str.strip_chars().str.extract_groups(r"^([-+]?[\d.,]+)([BkKMGTPE%]?)$")
    val = _read.decimal_number(g.struct.field("1"))
    suf = g.struct.field("2")
    mult = suf.replace_strict(
        {**HUMAN_KB, "%": 1.0, "": 1.0}, default=None, return_dtype=pl.Float64
    )
    return val * mult


def uses_decimal_comma(sample: str) -> bool:
    """Whether sysstat numbers in ``sample`` (some data lines) use a decimal comma."""
    return re.search(r"\d,\d", sample) is not None


def human_number(tok: pl.Expr) -> pl.Expr:
    """Shorthand for ``number(tok, human=True)``."""
    return number(tok, human=True)


#: A report timestamp as printed by ``iostat -t`` / in sysstat JSON: a date in any locale
#: form, a time with optional AM/PM, and (S_TIME_FORMAT=ISO) an optional UTC offset.
STAMP_RE = (
    r"^\s*(\d{1,4})([-/.])(\d{1,2})[-/.](\d{1,4})[ T]+"
    r"(\d{1,2}:\d{2}:\d{2}(?:\s?[AaPp]\.?[Mm]\.?)?)\s*(Z|[+-]\d{2}:?\d{2})?\s*$"
)


#: :data:`STAMP_RE` with the time of day split: hour, minute, second, AM/PM letter.
_STAMP_PARTS = (
    r"^\s*(\d{1,4})([-/.])(\d{1,2})[-/.](\d{1,4})[ T]+"
    r"(\d{1,2}):(\d{2}):(\d{2})(?:\s?([AaPp])\.?[Mm]\.?)?\s*(Z|[+-]\d{2}:?\d{2})?\s*$"
)


def stamp_to_utc(text: pl.Expr, tz: str | None) -> pl.Expr:
    """Parse :data:`STAMP_RE` strings to UTC ``base.TS`` (NULL when not a valid stamp).

    The date order follows the separator (``-`` ISO, ``.`` day first, ``/`` month first
    unless the first field is > 12). A printed offset wins over ``tz``. The regex runs
    once per string: every part is a field of its one match.
    """
    f = pl.field

    def num(name: str) -> pl.Expr:
        return f(name).cast(pl.Int32, strict=False)

    a, sep, b, c = num("1"), f("2"), num("3"), num("4")
    slash_dmy = (sep == "/") & (a > 12)
    y = pl.when(sep == "-").then(a).otherwise(c)
    mo = (
        pl.when((sep == "-") | ((sep == "/") & ~slash_dmy))
        .then(pl.when(sep == "-").then(b).otherwise(a))
        .otherwise(b)
    )
    d = pl.when(sep == "-").then(c).when(sep == ".").then(a).when(slash_dmy).then(a).otherwise(b)
    y = pl.when(y < 70).then(y + 2000).when(y < 100).then(y + 1900).otherwise(y)
    sec = _clock_seconds(num("5"), num("6"), num("7"), f("8").str.to_uppercase())
    parts = text.str.extract_groups(_STAMP_PARTS).struct.with_fields(
        _day=pl.format("{}-{}-{}", y, mo, d).str.to_date("%Y-%-m-%-d", strict=False),
        _sec=sec,
        _off=f("9").str.replace(":", "", literal=True),
    )
    naive = f("_day").cast(pl.Datetime("us")) + pl.duration(seconds=f("_sec"))
    off = f("_off")
    off_min = pl.when(off == "Z").then(0).otherwise(
        off.str.slice(1, 2).cast(pl.Int32, strict=False) * 60
        + off.str.slice(3, 2).cast(pl.Int32, strict=False)
    ) * pl.when(off.str.starts_with("-")).then(-1).otherwise(1)
    with_off = (naive - pl.duration(minutes=off_min)).dt.replace_time_zone("UTC")
    ts = pl.when(off.is_not_null()).then(with_off).otherwise(local_to_utc(naive, tz))
    return parts.struct.with_fields(_ts=ts).struct.field("_ts").alias("1")  # name as before


def ends_with_newline(path: object) -> bool:
    """True when the file is empty or its last byte is a newline (else the last line is cut)."""
    with open(path, "rb") as f:  # type: ignore[call-overload]
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def short_flags(command: str | None) -> set[str] | None:
    """Single-letter options of a command line (``iostat -xy -p ALL 1`` -> {x, y, p}).

    None when no command is known. Long options are returned whole (``--human``).
    """
    if not command:
        return None
    out: set[str] = set()
    for tok in command.split():
        if tok.startswith("--"):
            out.add(tok.split("=")[0])
        elif re.fullmatch(r"-[A-Za-z]+", tok):
            out.update(tok[1:])
    return out


def command_has_interval(command: str | None) -> bool | None:
    """Whether a sysstat command line has an ``<interval>`` argument (None if unknown)."""
    if not command:
        return None
    toks = command.split()
    try:
        i = next(
            n for n, t in enumerate(toks) if re.search(r"(^|/)(iostat|mpstat|sar|pidstat)$", t)
        )
    except StopIteration:
        return None
    return any(re.fullmatch(r"\d+(\.\d+)?", t) for t in toks[i + 1 :])


def clock_seconds(tok: pl.Expr, twelve_hour: bool = False) -> pl.Expr:
    """Fast :func:`seconds_of_day` for sysstat's fixed ``HH:MM:SS`` / ``HH:MM:SS AM`` token.

    ``tok`` must start with the time (it may go on: only the first 8 or 11 characters are
    read). The 12-hour form is chosen per file (see :func:`twelve_hour_clock`), not per row.
    """
    if twelve_hour:
        t = tok.str.slice(0, 11).str.to_time("%I:%M:%S %p", strict=False)
    else:
        t = tok.str.slice(0, 8).str.to_time("%H:%M:%S", strict=False)
    return (t.cast(pl.Int64) // 1_000_000_000).cast(pl.Int32)


def twelve_hour_clock(head: str) -> bool:
    """Whether sysstat rows in ``head`` start with a 12-hour ``HH:MM:SS AM`` time."""
    return re.search(r"(?m)^\d\d:\d\d:\d\d [AP]M\s", head) is not None


def cut_rows(
    rows: pl.DataFrame,
    ok: pl.Expr,
    fast: dict[str, pl.Expr],
    slow: dict[str, pl.Expr],
    keep: Sequence[str] = ("line_no",),
) -> pl.DataFrame:
    """Tokenize ``rows`` by position where ``ok`` holds, by whitespace split elsewhere.

    ``fast`` exprs (usually from :func:`aligned_fields`) run only on aligned rows; ``slow``
    exprs run only on the others and may use ``pl.col("_tok")`` (the :func:`tokens` list).
    Both dicts must have the same keys. The result keeps ``keep`` columns; row order is
    aligned rows first, then the others (sort by ``line_no`` when order matters).
    """
    flagged = rows.with_columns(ok.fill_null(False).alias("_ok"))
    good = flagged.filter(pl.col("_ok")).select(*keep, *[e.alias(k) for k, e in fast.items()])
    bad = (
        flagged.filter(~pl.col("_ok"))
        .with_columns(tokens(pl.col("line")).alias("_tok"))
        .select(*keep, *[slow[k].alias(k) for k in fast])
    )
    return pl.concat([good, bad], how="vertical_relaxed")


def right_aligned(
    data: bytes,
    starts: np.ndarray,
    layout: Layout,
    idx: Sequence[int],
    comma: bool = False,
    alt: dict[int, tuple[str, float]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The fields ``idx`` of :func:`aligned_fields` typed straight from the bytes, for rows
    of ``layout.width`` ASCII bytes starting at ``starts`` (offsets in ``data``).

    Returns ``ok`` (per row) and the values ``(len(idx), rows)``. A row is ok when each of
    its fields is ``[blank][blanks][digits]`` plus the point and decimals of the first
    row's field (or the text of ``alt``: position in ``idx`` -> ``(text, value)``, e.g.
    ``all``): then every value is the one :func:`number` gives for the field (``comma``:
    ``,`` accepted as the point, as :func:`number` does), never a guess. Rows that are not
    ok are for :func:`aligned_fields`. Typed by :class:`._sysstat_swar.Numbers` (SWAR).
    """
    ok = np.zeros(starts.size, dtype=bool)
    vals = np.empty((len(idx), starts.size), dtype=np.float64)
    if not starts.size:
        return ok, vals
    first = data[int(starts[0]) : int(starts[0]) + layout.width].decode("ascii", "replace")
    slots, short = [], []
    for i in idx:
        a = layout.ends[i - 1] if i > 0 else 0
        m = re.search(r"[.,](\d+)$", first[a : layout.ends[i]])
        slots.append((a, layout.ends[i], len(m[1]) if m else 0))
        short.append(len(first[a : layout.ends[i]].lstrip(" ")) <= 8)  # one word, mostly
    try:
        numbers = swar.Numbers(slots, comma, alt=alt, narrow=short)
    except ValueError:  # a field too narrow for a number: read them all by the regular path
        return ok, vals
    view = np.lib.stride_tricks.sliding_window_view(np.frombuffer(data, np.uint8), layout.width)
    step = swar.block_rows(len(idx))
    for at in range(0, starts.size, step):
        part = slice(at, at + step)
        good, _ = numbers(view[starts[part]], out=vals[:, part])
        ok[part] = good.all(axis=0)
    if (numbers.row != np.arange(numbers.k)).any():  # values come out one-word slots first
        vals = vals[numbers.row]
    return ok, vals
