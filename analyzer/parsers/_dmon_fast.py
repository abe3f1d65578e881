"""Typing ``nvidia-smi dmon`` data rows from their bytes (private helper of ``nvidia_dmon``).

dmon right-aligns every field, so the rows of one header that have the same width put
each value's last byte at the same offset. A *plan* is read from one such row (`plan`):
one slot per header name, from the blank after the previous token to the end of its
own token. `typed` then checks and types all rows of that width at once with numpy
(`_sysstat_swar`): each slot's first byte is a blank and holds one right-aligned token,
the blanks after the last token are blanks, and each value has the exact shape below.
A row passes only when every slot does; every other row (``N/A``, a sign, another
number of decimals, an overflowing value, tabs...) is left to the regular token path.

Accepted shapes, and the values the regular typing gives them (``_read.decimal_number``,
``_read.int_number``, ``strptime``, ``hms_seconds``):

* a number ``[digits][.digits]`` with the slot's number of decimals (that of the plan's
  row; integers only for Int64 and Int32 columns): its exact value (`swar.Numbers`);
* ``-`` alone in a metric or ``gpu`` slot other than the row's first: NULL;
* ``Date``: ``YYYYMMDD``, a real calendar day of the years 1970..2199;
* ``Time``: ``HH:MM:SS`` with H < 24, M < 60, S < 60 (`swar.clock`).

Output (`typed`): ``line_no`` (UInt32), ``header`` (UInt32, the rows' names header line),
``gpu`` (Int32), one column per metric as `_dmon_block.values` names and types them
(known: its ``gpu_dmon`` column; unknown or repeated: ``u<i>``, Float64), ``_naive``
(Datetime us, local) when the header has Date and Time, ``_sec`` (Float64 seconds of
day) when it has Time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from analyzer.parsers import _blocks
from analyzer.parsers import _dmon_block as db
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar

F64, I64 = pl.Float64, pl.Int64
_TOKEN = re.compile(rb"\S+")
_NUMBER = re.compile(rb"[0-9]+(?:\.([0-9]{1,6}))?")
_CLOCK = re.compile(rb"[0-9]{2}:[0-9]{2}:[0-9]{2}")
_DASH, _SP = ord("-"), 32
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Plan:
    """Slots of one row layout: ``width`` (bytes), ``slots`` (``(start, end, decimals)``
    per header name; ``start`` is the blank before the token, ``end`` exclusive),
    ``date``/``time`` (slot index or -1), ``cols`` (per slot: output name and dtype, or
    None for date/time)."""

    width: int
    slots: tuple[tuple[int, int, int], ...]
    date: int
    time: int
    cols: tuple[tuple[str, pl.DataType] | None, ...]


def columns(names: list[str], metrics: dict) -> list[tuple[str, pl.DataType] | None]:
    """Output column of each header name, as `_dmon_block.values` names and types them
    (None for date/time)."""
    out: list[tuple[str, pl.DataType] | None] = []
    done: set[str] = set()
    for i, name in enumerate(names):
        key = name.lower()
        if key in ("date", "time"):
            out.append(None)
        elif key == "gpu":
            out.append(("gpu", pl.Int32))
        elif key in metrics and metrics[key][0] not in done:
            done.add(metrics[key][0])
            out.append((metrics[key][0], metrics[key][1]))
        else:
            out.append((f"u{i}", F64))
    return out


def plan(line: bytes, names: list[str], metrics: dict) -> Plan | None:
    """The plan of rows laid out like ``line`` (one data row of header ``names``), or
    None when that row cannot give one (token count, shapes, no leading blank...)."""
    toks = [(m.start(), m.end()) for m in _TOKEN.finditer(line)]
    if len(toks) != len(names) or not line.startswith(b" ") or len(set(names)) < 1:
        return None
    lower = [n.lower() for n in names]
    if lower.count("gpu") > 1 or lower.count("date") > 1 or lower.count("time") > 1:
        return None
    cols = columns(names, metrics)
    slots = []
    for j, (a, e) in enumerate(toks):
        s = toks[j - 1][1] if j else 0
        tok = line[a:e]
        if lower[j] == "time":
            if not _CLOCK.fullmatch(tok):
                return None
            d = 0
        elif lower[j] == "date":
            if not (len(tok) == 8 and tok.isdigit()):
                return None
            d = 0
        elif tok == b"-" and j:
            d = 0
        elif (m := _NUMBER.fullmatch(tok)) is not None:
            d = len(m.group(1) or b"")
            col = cols[j]
            if d and col is not None and col[1] in (I64, pl.Int32):
                return None
        else:
            return None
        slots.append((s, e, d))
    p = Plan(len(line), tuple(slots), _index(lower, "date"), _index(lower, "time"), tuple(cols))
    try:
        _numbers(p.slots, p.time)
    except ValueError:
        return None
    if p.time >= 0 and slots[p.time][1] - 8 <= slots[p.time][0]:
        return None
    return p


def _index(names: list[str], name: str) -> int:
    return names.index(name) if name in names else -1


@functools.cache
def _numbers(slots: tuple[tuple[int, int, int], ...], time: int) -> swar.Numbers:
    """The decoder of every slot but the time's."""
    return swar.Numbers([s for j, s in enumerate(slots) if j != time])


def typed(
    chunk: fast.Chunk, rows: np.ndarray, p: Plan, header: np.ndarray
) -> tuple[pl.DataFrame, np.ndarray]:
    """The rows ``rows`` (line indexes, all ``p.width`` long and terminated) that pass,
    typed (see the module doc), and their line indexes. ``header``: names header line
    number of each of ``rows``."""
    numbers = _numbers(p.slots, p.time)
    num_slots = [j for j in range(len(p.slots)) if j != p.time]
    vals = np.empty((len(num_slots), rows.size), dtype=np.float64)  # numbers' row order
    ok = np.empty(rows.size, dtype=bool)
    sec = np.zeros(rows.size, dtype=np.int32)
    last = p.slots[-1][1]
    for sl, m in swar.row_blocks(chunk, rows, p.width):
        okn, v = numbers(m, out=vals[:, sl])
        good = okn.all(axis=0)
        if not good.all():
            _dashes(m, okn, v, p, num_slots, numbers.row)
            good = okn.all(axis=0)
        if p.time >= 0:
            s, e, _ = p.slots[p.time]
            okc, sec[sl] = swar.clock(m, e - 8)
            good &= okc
            if e - 8 > s:
                good &= (m[:, s : e - 8] == _SP).all(axis=1)
        if last < p.width:
            good &= (m[:, last:] == _SP).all(axis=1)
        ok[sl] = good
    slot_vals = {j: vals[numbers.row[r]] for r, j in enumerate(num_slots)}
    if p.date >= 0:
        days = _days(slot_vals[p.date])
        ok &= days >= 0
    for j, v in slot_vals.items():
        col = p.cols[j]
        if col is not None and col[1] == pl.Int32:
            ok &= ~(v > _INT32_MAX)  # NaN ('-') is fine
    keep = np.flatnonzero(ok)
    every = keep.size == rows.size
    out: dict[str, pl.Series] = {
        "line_no": pl.Series(chunk.line_nos(rows if every else rows[keep]), dtype=pl.UInt32),
        "header": pl.Series(header if every else header[keep], dtype=pl.UInt32),
    }
    if p.time >= 0:
        s = sec if every else sec[keep]
        if p.date >= 0:
            us = (days if every else days[keep]) * 86400 + s
            us *= 1_000_000
            out["_naive"] = pl.Series(us).cast(pl.Datetime("us"))
        out["_sec"] = pl.Series(s.astype(np.float64))
    for j, v in slot_vals.items():
        col = p.cols[j]
        if col is None:
            continue
        series = pl.Series(col[0], v if every else v[keep], nan_to_null=True)
        if col[1] == pl.Boolean:
            series = (series != 0).alias(col[0])
        elif col[1] != F64:
            series = series.cast(col[1])
        out[col[0]] = series
    return pl.DataFrame(out), rows if every else rows[keep]


def _dashes(
    m: np.ndarray,
    okn: np.ndarray,
    v: np.ndarray,
    p: Plan,
    num_slots: list[int],
    order: np.ndarray,
) -> None:
    """In place: a slot that failed but holds ``-`` alone is ok, NaN (not the date, nor
    the first slot: a row must start with a digit to be a data row)."""
    for r, j in enumerate(num_slots):
        row = order[r]
        if j in (p.date, 0) or okn[row].all():
            continue
        s, e, _ = p.slots[j]
        bad = np.flatnonzero(~okn[row])
        dash = (m[bad, e - 1] == _DASH) & (m[bad, s : e - 1] == _SP).all(axis=1)
        okn[row, bad[dash]] = True
        v[row, bad[dash]] = np.nan


def _days(v: np.ndarray) -> np.ndarray:
    """``YYYYMMDD`` values -> days since 1970-01-01 (int64), -1 where not a calendar day
    of the years 1970..2199; computed once per run of equal values."""
    if v.size == 0:
        return v.astype(np.int64)
    starts = np.concatenate(([0], np.flatnonzero(v[1:] != v[:-1]) + 1))
    u = v[starts]
    ymd = np.where((u >= 19700101) & (u <= 21991231), u, 19700101).astype(np.int64)
    y, md = np.divmod(ymd, 10000)
    mo, d = np.divmod(md, 100)
    ok = (mo >= 1) & (mo <= 12) & (d >= 1) & (u >= 19700101) & (u <= 21991231)
    mo = np.clip(mo, 1, 12)
    month = (y - 1970).astype("datetime64[Y]").astype("datetime64[M]") + (mo - 1)
    start = month.astype("datetime64[D]").astype(np.int64)
    length = (month + 1).astype("datetime64[D]").astype(np.int64) - start
    ok &= d <= length
    days = np.where(ok, start + d - 1, -1)
    return np.repeat(days, np.diff(np.append(starts, v.size)))


def groups(
    block: _blocks.Block, carry: db.Carry, metrics: dict
) -> tuple[dict[tuple[str, str | None], pl.DataFrame], np.ndarray, pl.DataFrame]:
    """The block's rows that pass (`typed`), per header texts (names, units) in effect,
    their line indexes (sorted) and the classified ``#`` lines (`_dmon_block.classify`).

    Only ``#`` lines can be headers, so they are classified first; each other line that
    starts with a blank gets the headers above it (``carry`` before the block's first),
    and per header the rows of its most common width are typed by the plan of the first
    of them that gives one."""
    chunk = block.chunk
    n, starts, lens = chunk.n, chunk.starts, chunk.lens
    first = np.zeros(n, dtype=np.uint8)
    some = lens > 0
    first[some] = chunk.buf[starts[some]]
    heads = db.classify(block.subset(np.flatnonzero(first == ord("#"))))
    cand = np.flatnonzero(first == _SP)
    if chunk.unterminated:
        cand = cand[cand != n - 1]
    nothing = ({}, np.empty(0, dtype=np.int64), heads)
    h_ln, h_txt = _where(heads, "names", carry.names)
    u_ln, u_txt = _where(heads, "units", carry.units)
    line_nos = chunk.line_nos(cand)
    hpos = np.searchsorted(h_ln, line_nos, side="right") - 1
    cand, line_nos, hpos = cand[hpos >= 0], line_nos[hpos >= 0], hpos[hpos >= 0]
    if cand.size == 0:
        return nothing
    upos = np.searchsorted(u_ln, line_nos, side="right") - 1
    h_id, h_keys = _ids(h_txt)
    u_id, u_keys = _ids(u_txt)
    key = h_id[hpos] * (len(u_keys) + 1) + np.where(upos >= 0, u_id[np.maximum(upos, 0)] + 1, 0)
    out: dict[tuple[str, str | None], pl.DataFrame] = {}
    kept: list[np.ndarray] = []
    one = key.min() == key.max()  # the common case: one header in effect
    for k in key[:1] if one else np.unique(key):
        sel = slice(None) if one else key == k
        rows, hdr = cand[sel], h_ln[hpos[sel]]
        width = int(np.bincount(lens[rows]).argmax())
        rows, hdr = rows[lens[rows] == width], hdr[lens[rows] == width]
        htext = h_keys[int(k) // (len(u_keys) + 1)]
        u = int(k) % (len(u_keys) + 1)
        utext = u_keys[u - 1] if u else None
        names = htext.lstrip("#").split()
        p = None
        for r in rows[:4]:
            a = int(starts[r])
            p = plan(chunk.buf[a : a + int(width)].tobytes(), names, metrics)
            if p is not None:
                break
        if p is None:
            continue
        frame, got = typed(chunk, rows, p, hdr)
        if got.size:
            out[(htext, utext)] = frame
            kept.append(got)
    idx = np.sort(np.concatenate(kept)) if kept else nothing[1]
    return out, idx, heads


def _where(
    heads: pl.DataFrame, kind: str, prev: tuple[int, str] | None
) -> tuple[np.ndarray, list[str]]:
    """Line numbers and texts of the ``kind`` header lines, the one carried in first."""
    rows = heads.filter(pl.col("kind") == kind)
    ln = rows.get_column("line_no").to_numpy().astype(np.int64)
    txt = rows.get_column("line").to_list()
    if prev is not None:
        ln = np.concatenate(([prev[0]], ln))
        txt = [prev[1], *txt]
    return ln, txt


def _ids(texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """An id per text (equal texts, equal ids) and the distinct texts by id."""
    seen: dict[str, int] = {}
    ids = np.array([seen.setdefault(t, len(seen)) for t in texts], dtype=np.int64)
    return ids, list(seen)
