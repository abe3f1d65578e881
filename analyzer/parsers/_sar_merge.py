"""Tables of a sar block read by `_sar_fast.split` (private helper of ``sar``).

What `_sar_blocks.Stream.block` does with a frame of every line, done here for a block
whose header and data rows were mostly read from their bytes (`_sar_fast.Fast`: numpy
arrays) and whose other lines were classified (`_sar_fast.Split.df`):

* the header in effect for each line (``hdr``): the text of the last header (known
  tail or classified) or ``''`` after an ``Average:`` line, else the one carried in;
* the run (``seg``: ``Average:`` lines so far) and the midnight roll-overs (``day``) of
  the timed rows (data, restart, comment) in line order, carried across blocks;
* events and the regular data rows as `Stream.block` builds them; the typed rows'
  tables (`_sar_rows.frames`) merged with the regular rows' tables in the order
  `_sar_extract.extract` gives one table built from all of them.

The same values as the frame route, computed on integer arrays (no frame of the
typed lines).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analyzer.parsers import _sar_blocks as sb
from analyzer.parsers import _sar_extract as sx
from analyzer.parsers import _sar_fast as sf
from analyzer.parsers import _sar_rows as sr
from analyzer.parsers import _sysstat as ss
from analyzer.parsers import base

#: Row order keys of the tables `_sar_extract.extract` builds per section (others: line).
_ORDER = {"sar_psi": ["_sid", "_tpl", "line_no"], "sar_other": ["_sid", "line_no", "_m"]}
_TIMED = ("data", "restart", "comment")


def block(
    stream: sb.Stream, sp: sf.Split, cov: base.Coverage, plain: bool, tails: sf.Tails
) -> dict[str, pl.DataFrame]:
    """Tables of one split block (events first, then in section order); updates
    ``stream`` as `Stream.block` does. ``plain``: the block has no comma."""
    f, df = sp.fast, sp.df
    assert f is not None
    line = df.get_column("line_no").to_numpy().astype(np.int64)
    kind = df.get_column("kind").to_numpy()
    is_head, is_avg = kind == "header", kind == "average"
    # markers: classified headers and averages, known headers (tails)
    texts: dict[str, int] = {}
    reg_text = [
        texts.setdefault(t, len(texts)) for t in df.get_column("rest").filter(pl.Series(is_head))
    ]
    tail_tid = np.array([texts.setdefault(t.text, len(texts)) for t in tails.items], dtype=np.int64)
    avg_tid = texts.setdefault("", len(texts))
    m_tid = np.full(line.size, -1, dtype=np.int64)
    m_tid[is_head] = reg_text
    m_tid[is_avg] = avg_tid
    marks = np.flatnonzero(m_tid >= 0)
    m_line = np.concatenate([line[marks], f.head_line])
    m_tid = np.concatenate([m_tid[marks], tail_tid[f.head_tail]])
    order = np.argsort(m_line, kind="stable")
    m_line, m_tid = m_line[order], m_tid[order]
    carry = texts.setdefault(stream.hdr, len(texts)) if stream.hdr is not None else -1
    names = pl.Series([*texts, None], dtype=pl.String)  # id -1: no header
    # sections in order of their first header line
    heads = m_tid[m_tid != avg_tid]
    for t in _in_order(heads, len(texts)):
        text = names[t]
        if text not in stream.texts:
            stream.texts.append(text)
            stream.sections.append(sx.make_section(text.split()))
    if m_tid.size:
        stream.hdr = names[int(m_tid[-1])]
    # runs and roll-overs of the timed rows (classified and typed) in line order
    avg_line = line[is_avg]
    timed = np.flatnonzero(np.isin(kind, _TIMED))
    t_line = np.concatenate([line[timed], f.line])
    t_sec = np.concatenate([df.get_column("sec").to_numpy()[timed], f.sec]).astype(np.int64)
    by_line = np.argsort(t_line, kind="stable")
    seg = stream.run + np.searchsorted(avg_line, t_line[by_line], side="right")
    day = np.empty(t_line.size, dtype=np.int64)
    day[by_line] = _days(stream, t_sec[by_line], seg, stream.run + avg_line.size)
    ts = _ts(stream, t_sec, day)
    tables: dict[str, pl.DataFrame] = {}
    out: dict[str, list[pl.DataFrame]] = {}
    cov.parsed += f.idx.size
    if timed.size:
        reg = df[timed].with_columns(ts[: timed.size].alias("ts"))
        events = stream._events(reg.filter(pl.col("kind").is_in(["restart", "comment"])), cov)
        if events is not None:
            tables["sar_events"] = events
        data = reg.filter(pl.col("kind") == "data")
        pos = np.searchsorted(m_line, data.get_column("line_no").to_numpy(), side="right") - 1
        hdr = np.where(pos >= 0, m_tid[np.maximum(pos, 0)] if m_tid.size else -1, carry)
        good = stream.good_rows(data.with_columns(names.gather(hdr).alias("hdr")), cov)
        cov.parsed += good.height
    if timed.size and good.height:
        human = stream.is_human()
        rows = good.select("ts", "sid", "tok", "line_no")
        out = {
            t: [x] for t, x in sx.extract(rows, stream.sections, human, plain and not human).items()
        }
    pos = np.searchsorted(m_line, f.line, side="right") - 1
    gov = np.where(pos >= 0, m_tid[np.maximum(pos, 0)] if m_tid.size else -1, carry)
    fast_ts, fast_line = ts[timed.size :], pl.Series("line_no", f.line, dtype=pl.UInt32)
    for t, at, got in f.groups:
        tail = tails.items[t]
        if (gov[at] != tail_tid[t]).any():  # cannot happen by construction: never guess
            raise RuntimeError("sar fast path: typed rows under another header")
        sid = stream.texts.index(tail.text)
        rows_at = pl.Series(at)
        for frame in sr.frames(
            tail.section, sid, tail.layout, got, fast_ts.gather(rows_at), fast_line.gather(rows_at)
        ):
            out.setdefault(tail.section.table, []).append(frame)
    return tables | _merged(out, stream.sections)


def _in_order(ids: np.ndarray, n: int) -> list[int]:
    """The distinct values of ``ids`` (all below ``n``) in order of first appearance."""
    if n <= 32:
        seen = [(int(np.argmax(ids == i)), i) for i in range(n) if (ids == i).any()]
    else:
        _, first = np.unique(ids, return_index=True)
        seen = [(int(f), int(ids[f])) for f in first]
    return [i for _, i in sorted(seen)]


def _days(stream: sb.Stream, sec: np.ndarray, seg: np.ndarray, last_run: int) -> np.ndarray:
    """`Stream._days` on arrays in line order: roll-overs since the start of each run,
    the run's rows of earlier blocks included; updates the stream's carry."""
    s = np.concatenate([[stream.last_sec if stream.last_sec is not None else 0], sec])
    g = np.concatenate([[stream.run], seg])
    valid = np.ones(s.size, dtype=bool)
    valid[0] = stream.last_sec is not None
    back = np.zeros(s.size, dtype=np.int64)
    back[1:] = (g[1:] == g[:-1]) & valid[:-1] & (s[1:] < s[:-1])
    total = np.cumsum(back)
    start = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    within = total - np.repeat(total[start], np.diff(np.append(start, s.size)))
    day = within[1:] + np.where(seg == stream.run, stream.day, 0)
    if seg.size and seg[-1] == last_run:
        stream.last_sec, stream.day = int(sec[-1]), int(day[-1])
    elif last_run != stream.run:
        stream.last_sec, stream.day = None, 0
    stream.run = last_run
    return day


def _ts(stream: sb.Stream, sec: np.ndarray, day: np.ndarray) -> pl.Series:
    """``ts`` of rows with these seconds of day and roll-overs, as `Stream.block` reads
    them (NULL without a banner date)."""
    frame = pl.DataFrame({"sec": sec, "day": day})
    if stream.day0 is None:
        return pl.Series("ts", [None] * sec.size, dtype=base.TS)
    naive = pl.lit(datetime.combine(stream.day0, datetime.min.time())) + pl.duration(
        seconds=pl.col("sec") + pl.col("day") * 86400
    )
    return frame.select(ss.local_to_utc(naive, stream.zone).alias("ts")).to_series()


def _merged(
    parts: dict[str, list[pl.DataFrame]], sections: list[sx.Section]
) -> dict[str, pl.DataFrame]:
    """One frame per table, tables in the order of their first section, rows in the
    order of `_sar_extract.extract` (its order keys dropped)."""
    first: dict[str, int] = {}
    for i, sec in enumerate(sections):
        first.setdefault(sec.table, i)
    out = {}
    for table in sorted(parts, key=first.__getitem__):
        keys = _ORDER.get(table, ["line_no"])
        frames = parts[table]
        frame = (
            frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed").sort(keys)
        )
        if frame.height:
            out[table] = frame.drop(keys)
    return out
