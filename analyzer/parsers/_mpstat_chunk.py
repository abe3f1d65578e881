"""mpstat, big files: the lines of a chunk that are not fast rows (:mod:`._mpstat_fast`).

What the regular classifier (:func:`.mpstat.classify_lines`) would say about them, as a
:class:`Structure`: line kinds counted, the header lines in file order (the one carried
from the previous chunk first) with their layout key and time, and the rows it parses the
regular way. Two ways to get there:

- :func:`by_bytes` (the usual chunk): blank lines and byte copies of the head's header
  lines (any valid ``HH:MM:SS`` before the same bytes) are told from their bytes; only
  the other lines (a banner, an ``Average:`` block, garbage) go through the classifier's
  regexes. Gives up (None) when one of those is a row: rows need the regular path.
- :func:`regular`: every line through the classifier and mpstat's layout parsers.

Also here: each fast row's governing header (:func:`governed`) and the midnight
roll-over of the chunk's rows in file order (:func:`days`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar
from analyzer.parsers import base

if TYPE_CHECKING:
    from analyzer.parsers._mpstat_fast import Ctx, Group, Rows, State

_MAX_LAYOUTS = 64  # mpstat's cap on distinct header layouts (same value as mpstat.py)
_KINDS = ("blank", "banner", "header", "average", "row", "other", "truncated")


@dataclass
class Structure:
    """A chunk's non-fast lines as the regular classifier sees them."""

    counts: dict[str, int]  # kind -> lines of this chunk
    hdr_line: np.ndarray  # line numbers of the headers in file order, the carried one first
    hkeys: list[str]  # their layout keys (the header without its time)
    hsec: np.ndarray  # their time, seconds of day (-1: none)
    last: tuple[int, str, str, int] | None  # this chunk's last header: line_no, text, hkey, sec
    seen: list[str]  # layouts met so far, in order (State.seen extended)
    rows: pl.DataFrame | None = None  # regular rows: line_no, _sec (for day numbers)
    frames: list[tuple[str, str, pl.DataFrame]] = field(default_factory=list)
    cov: base.Coverage = field(default_factory=base.Coverage)  # of the regular rows
    orphans: int = 0  # regular rows without a header above them


def plain(line: str) -> bytes:
    """A line of the file's head as the file's bytes: only plain ASCII (b"" otherwise)."""
    return line.encode() if line.isascii() and "\r" not in line else b""


def templates(hdrs: pl.DataFrame) -> list[tuple[str, bytes]]:
    """The first header line of each layout of the head (``hkey``, bytes; from
    :func:`.mpstat.headers`): a line with its bytes after a valid ``HH:MM:SS`` is a
    header of that layout."""
    out = []
    for hkey, line in (
        hdrs.unique("hkey", keep="first", maintain_order=True).select("hkey", "line").iter_rows()
    ):
        if plain(line) and len(line) > 8:
            out.append((hkey, line.encode()))
    return out


def _carried(st: State) -> tuple[list[int], list[str], list[int]]:
    if st.header is None:
        return [], [], []
    line_no, _, hkey, sec = st.header
    return [line_no], [hkey], [sec]


def by_bytes(chunk: fast.Chunk, rest: np.ndarray, st: State, cx: Ctx) -> Structure | None:
    """The lines ``rest`` (chunk line indexes) told mostly from their bytes; None when a
    line the regexes read is a data row (the chunk then takes the :func:`regular` way)."""
    lens = chunk.lens[rest]
    kind = np.full(rest.size, -1, dtype=np.int8)
    kind[lens == 0] = _KINDS.index("blank")
    tmpl = np.full(rest.size, -1, dtype=np.int32)  # which template a header copies
    hsec = np.full(rest.size, -1, dtype=np.int32)
    for t, (_, text) in enumerate(cx.templates):
        cand = np.flatnonzero((kind == -1) & (lens == len(text)))
        if not cand.size:
            continue
        m = np.lib.stride_tricks.sliding_window_view(chunk.buf, len(text))[chunk.starts[rest[cand]]]
        ok, sec = swar.clock(m)
        ok &= (m[:, 8:] == np.frombuffer(text, np.uint8)[8:]).all(axis=1)
        hit = cand[ok]
        kind[hit], tmpl[hit], hsec[hit] = _KINDS.index("header"), t, sec[ok]
    if cx.banner:  # the head's banner line again (a capture restarted in the same file)
        cand = np.flatnonzero((kind == -1) & (lens == len(cx.banner)))
        if cand.size:
            m = np.lib.stride_tricks.sliding_window_view(chunk.buf, len(cx.banner))
            same = (m[chunk.starts[rest[cand]]] == np.frombuffer(cx.banner, np.uint8)).all(axis=1)
            kind[cand[same]] = _KINDS.index("banner")
    unknown = np.flatnonzero(kind == -1)
    text_of: dict[int, tuple[str, str]] = {}  # position in rest -> (line, hkey) of headers
    if unknown.size:
        lines = chunk.lines(rest[unknown])
        got = cx.line_kinds(lines).get_column("kind")
        codes = got.replace_strict(_KINDS, list(range(len(_KINDS))), return_dtype=pl.Int8)
        kind[unknown] = codes.to_numpy()
        last = unknown[-1]
        if chunk.unterminated and rest[last] == chunk.n - 1 and kind[last] == _KINDS.index("row"):
            kind[last] = _KINDS.index("truncated")
        if (kind[unknown] == _KINDS.index("row")).any():
            return None
        is_hdr = kind[unknown] == _KINDS.index("header")
        if is_hdr.any():
            hdrs = cx.headers(
                lines.filter(pl.Series(is_hdr)).with_columns(pl.lit("header").alias("kind"))
            )
            sec = hdrs.select(s.clock_seconds(pl.col("line")).fill_null(-1)).to_series()
            pos = unknown[is_hdr]
            hsec[pos] = sec.to_numpy()
            for p, line, hkey in zip(pos, hdrs["line"], hdrs["hkey"], strict=True):
                text_of[int(p)] = (line, hkey)
    counts = np.bincount(kind, minlength=len(_KINDS))
    pos = np.flatnonzero(kind == _KINDS.index("header"))
    hkeys = [text_of[int(p)][1] if tmpl[p] < 0 else cx.templates[tmpl[p]][0] for p in pos]
    c_line, c_key, c_sec = _carried(st)
    seen = list(st.seen)
    seen.extend(k for k in dict.fromkeys(c_key + hkeys) if k not in seen)
    last = None
    if pos.size:
        p = int(pos[-1])
        line_no = int(rest[p]) + chunk.first_line
        if tmpl[p] < 0:
            last = (line_no, text_of[p][0], text_of[p][1], int(hsec[p]))
        else:
            line = chunk.lines(rest[p : p + 1]).get_column("line")[0]
            last = (line_no, line, hkeys[-1], int(hsec[p]))
    return Structure(
        counts={k: int(n) for k, n in zip(_KINDS, counts, strict=True)},
        hdr_line=np.array(c_line + (rest[pos] + chunk.first_line).tolist(), dtype=np.int64),
        hkeys=c_key + hkeys,
        hsec=np.array(c_sec + hsec[pos].tolist(), dtype=np.int32),
        last=last,
        seen=seen,
    )


def regular(chunk: fast.Chunk, rest: np.ndarray, st: State, cx: Ctx) -> Structure:
    """Every line ``rest`` through mpstat's classifier and layout parsers."""
    lines = chunk.lines(rest)
    carried = st.header is not None
    if st.header is not None:
        head = pl.DataFrame(
            {"line_no": [st.header[0]], "line": [st.header[1]]},
            schema={"line_no": pl.UInt32, "line": pl.String},
        )
        lines = pl.concat([head, lines])
    df = cx.classify_lines(lines, "24h")
    if chunk.unterminated:
        cut = (pl.col("line_no") == chunk.first_line + chunk.n - 1) & (pl.col("kind") == "row")
        df = df.with_columns(pl.when(cut).then(pl.lit("truncated")).otherwise("kind").alias("kind"))
    hdrs = cx.headers(df).with_columns(
        s.clock_seconds(pl.col("hdr_time")).fill_null(-1).alias("_hsec")
    )
    own = df.slice(1) if carried else df  # the carried header was counted in its own chunk
    rows = own.filter(pl.col("kind") == "row")
    rows = rows.with_columns(s.clock_seconds(pl.col("time")).alias("_sec"))
    seen = list(st.seen)
    out = Structure(
        counts=dict(own.group_by("kind").len().iter_rows()),
        hdr_line=hdrs.get_column("line_no").to_numpy().astype(np.int64),
        hkeys=hdrs.get_column("hkey").to_list(),
        hsec=hdrs.get_column("_hsec").to_numpy().astype(np.int32),
        last=None,
        seen=seen,
        rows=rows.select("line_no", "_sec"),
    )
    if rows.height:
        out.frames = cx.layout_frames(rows, hdrs, cx.comma, out.cov, seen)
        out.orphans = rows.filter(pl.col("hdr") == 0).height
    else:  # what layout_frames does without rows: note the layouts, in order
        seen.extend(k for k in dict.fromkeys(out.hkeys) if k not in seen)
    last = hdrs.filter(pl.col("line_no") >= chunk.first_line).tail(1)
    if last.height:
        line_no, line, hkey, sec = last.select("line_no", "line", "hkey", "_hsec").row(0)
        out.last = (int(line_no), line, hkey, int(sec))
    return out


def governed(parts: list[tuple[Group, Rows]], c: Structure, chunk: fast.Chunk) -> bool:
    """Set each fast row's governing header (time, NODE or not); False when a fast row's
    governing header is missing, of another layout, or past the layout cap."""
    hl = c.hdr_line - chunk.first_line
    node = np.array([k.startswith("NODE") for k in c.hkeys], dtype=bool)
    # Index in the headers of the last one at or above each line of the chunk (-1: none).
    marks = np.zeros(chunk.n, dtype=np.int32)
    np.add.at(marks, hl[hl >= 0], 1)
    above = np.cumsum(marks, dtype=np.int32)
    above += int((hl < 0).sum()) - 1
    rank = {k: i for i, k in enumerate(c.seen)}
    for g, f in parts:
        if not f.height:
            f.hdr_sec, f.node = np.empty(0, dtype=np.int32), np.empty(0, dtype=bool)
            continue
        gov = above[f.line]
        allowed = [k in g.hkeys and rank.get(k, _MAX_LAYOUTS) < _MAX_LAYOUTS for k in c.hkeys]
        if not np.array([*allowed, False])[gov].all():  # gov == -1 picks the trailing False
            return False
        lo, hi = int(gov[0]), int(gov[-1])
        if lo == hi:  # one header governs them all
            f.hdr_sec = np.full(f.height, c.hsec[lo], dtype=np.int32)
            f.node = np.full(f.height, node[lo])
        else:
            f.hdr_sec, f.node = c.hsec[gov].astype(np.int32), node[gov]
    return True


def days(
    live: list[tuple[Group, Rows]],
    chunk: fast.Chunk,
    rows: pl.DataFrame | None,
    st: State,
    order: np.ndarray | None = None,
) -> pl.DataFrame | None:
    """Day numbers (midnight roll-over) of every row of the chunk in file order: sets
    ``day`` of the fast rows, returns ``line_no``/``_sec``/``_day`` of the regular ones.
    A NULL time takes the one before it (the previous chunk's last time at the start).
    ``order``: the file order of the fast rows of ``live``, when known (no regular rows)."""
    if rows is not None and rows.height:
        slow_lines = rows.get_column("line_no").to_numpy().astype(np.int64)
        slow_sec = rows.get_column("_sec").fill_null(-1).to_numpy().astype(np.int64)
    else:
        slow_lines = slow_sec = np.empty(0, dtype=np.int64)
    if len(live) == 1 and not slow_lines.size:
        seq, order = live[0][1].sec, None
    elif order is not None and not slow_lines.size:
        seq = np.concatenate([f.sec for _, f in live])[order]
    else:
        allines = np.concatenate([*(f.line for _, f in live), slow_lines - chunk.first_line])
        sec = np.concatenate([*(f.sec for _, f in live), slow_sec])
        order = np.argsort(allines, kind="stable")
        seq = sec[order]
    valid = seq >= 0
    start = -1 if st.prev_sec is None else st.prev_sec
    if valid.all():
        filled = seq
    else:
        last = np.maximum.accumulate(np.where(valid, np.arange(seq.size), -1))
        filled = np.where(last >= 0, seq[np.maximum(last, 0)], start)
    step = np.empty(seq.size, dtype=bool)
    step[:1] = (filled[:1] < start) & (filled[:1] >= 0)
    step[1:] = (filled[1:] < filled[:-1]) & (filled[1:] >= 0) & (filled[:-1] >= 0)
    day = np.cumsum(step, dtype=np.int32)
    day += st.day
    if seq.size:
        st.day = int(day[-1])
        if valid.any():
            st.prev_sec = int(seq[np.flatnonzero(valid)[-1]])
    if order is not None:
        inv = np.empty_like(day)
        inv[order] = day
        day = inv
    pos = 0
    for _, f in live:
        f.day = day[pos : pos + f.height]
        pos += f.height
    if rows is None or not rows.height:
        return None
    return pl.DataFrame(
        {
            "line_no": pl.Series(slow_lines, dtype=pl.UInt32),
            "_sec": rows.get_column("_sec"),
            "_day": pl.Series(day[pos:], dtype=pl.Int32),
        }
    )
