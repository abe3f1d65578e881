"""sar data rows typed from their bytes (private helper of `_sar_fast`).

sar right-aligns every value under the end of its header name, so the rows of one
header line (a *tail*: the bytes after its ``HH:MM:SS``) put each value's last byte where
that name ends. `layout` turns a tail into slots (from the blank after the previous name
to the end of the name; the first from the blank after the time), and `typed` checks
and types all rows of the tail's width at once with numpy (`_sysstat_swar`):

* number slots: ``[blanks][digits][.digits]`` with the slot's number of decimals (that
  of the first row of the block that gives them; integers only for Int64/Int32
  columns): the value the regular casts give (`_sar_extract.cast_value`, with or without
  ``--human``: these tokens have no suffix, comma or sign);
* the ``CPU`` column of ``sar_cpu``: also ``all`` (-1);
* text slots (``IFACE``, ``DEV``, the item columns of ``sar_other``): blanks, then one
  token of printable ASCII; each distinct token decoded once. ``COM`` or ``LINUX`` as the
  row's first token is refused (the regular parser reads those rows as events).

A row passes when its width is the tail's and every slot does; any other row is left
to the regular parser. Sections with free-text columns (``TEXT_NAMES``) or without a
number column are never typed here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from analyzer.parsers import _sar_extract as sx
from analyzer.parsers import _sar_names as sn
from analyzer.parsers import _sar_tables as st
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar

_SP = 32
_TOKEN = re.compile(rb"\S+")
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Layout:
    """Slots of the rows of one tail: ``width`` (line bytes), ``slots`` (``(start, end)``
    per column, line offsets), ``kinds`` per slot: ``num``, ``int`` (integers only),
    ``cpu`` (integers or ``all``), ``text``."""

    width: int
    slots: tuple[tuple[int, int], ...]
    kinds: tuple[str, ...]


def layout(tail: bytes, section: sx.Section) -> Layout | None:
    """The layout of the rows under a header line whose bytes after the time are
    ``tail``, or None when its rows are not typed here."""
    names = tail.split()
    if (
        not names
        or any(not (33 <= b <= 126 or b == _SP) for b in tail)
        or tuple(n.decode() for n in names) != section.names
        or any(n in st.TEXT_NAMES for n in section.names)
    ):
        return None
    kinds = [_kind(section, j) for j in range(section.width)]
    if "num" not in kinds and "int" not in kinds:
        return None
    slots, prev = [], 8
    for m in _TOKEN.finditer(tail):
        slots.append((prev, 8 + m.end()))
        prev = 8 + m.end()
    return Layout(8 + len(tail), tuple(slots), tuple(kinds))


def _kind(section: sx.Section, j: int) -> str:
    name = section.names[j]
    if section.table == "sar_other":
        return "text" if name in st.KEY_NAMES else "num"
    if section.table == "sar_psi":
        return "num"
    col = next(c for c, (i, _) in section.cols.items() if i == j) if section.cols else None
    if col is None:  # a repeated name: its column took an earlier position
        return "num"
    dtype = st.COLUMNS[section.table][col][0]
    if col == "cpu":
        return "cpu"
    if dtype == pl.String:
        return "text"
    return "int" if dtype in (pl.Int64, pl.Int32) else "num"


def decimals(row: bytes, lay: Layout) -> tuple[int, ...] | None:
    """Decimals of each number slot as ``row`` (one data row) prints them, or None when
    a number slot of it holds no plain number (or an integer slot a fraction)."""
    out = []
    for (s, e), kind in zip(lay.slots, lay.kinds, strict=True):
        if kind == "text":
            continue
        tok = row[s:e].strip()
        if kind == "cpu" and tok == b"all":
            out.append(0)
            continue
        whole, dot, frac = tok.partition(b".")
        if not whole.isdigit() or (dot and not frac.isdigit()) or len(frac) > 6:
            return None
        if frac and kind != "num":
            return None
        out.append(len(frac))
    return tuple(out)


@functools.cache
def _numbers(slots: tuple[tuple[int, int, int], ...], cpu: int) -> swar.Numbers:
    return swar.Numbers(slots, alt={cpu: ("all", -1.0)} if cpu >= 0 else None)


@dataclass
class Typed:
    """Typed rows of one layout: ``rows`` (line indexes), ``vals`` (number slots, in
    slot order, float64), ``texts`` (per text slot: ids per row and the distinct
    tokens)."""

    rows: np.ndarray
    vals: np.ndarray
    texts: list[tuple[np.ndarray, list[str]]]


def typed(chunk: fast.Chunk, rows: np.ndarray, lay: Layout, dec: tuple[int, ...]) -> Typed:
    """The rows ``rows`` (line indexes, ``lay.width`` long, terminated) that pass."""
    num = [j for j, k in enumerate(lay.kinds) if k != "text"]
    txt = [j for j, k in enumerate(lay.kinds) if k == "text"]
    slots = tuple((*lay.slots[j], d) for j, d in zip(num, dec, strict=True))
    cpu = next((i for i, j in enumerate(num) if lay.kinds[j] == "cpu"), -1)
    try:
        numbers = _numbers(slots, cpu)
    except ValueError:
        return Typed(rows[:0], np.empty((len(num), 0)), [])
    vals = np.empty((len(num), rows.size), dtype=np.float64)
    ok = np.empty(rows.size, dtype=bool)
    text_bytes = [
        np.empty((rows.size, e - s), dtype=np.uint8) for s, e in (lay.slots[j] for j in txt)
    ]
    for sl, m in swar.row_blocks(chunk, rows, lay.width):
        okn, _ = numbers(m, out=vals[:, sl])
        good = okn.all(axis=0)
        for t, j in enumerate(txt):
            s, e = lay.slots[j]
            text_bytes[t][sl] = m[:, s:e]
            good &= _one_token(m[:, s:e])
        ok[sl] = good
    vals = vals[numbers.row]
    for r, j in enumerate(num):
        if lay.kinds[j] == "cpu":
            ok &= vals[r] <= _INT32_MAX
    texts = []
    for t, j in enumerate(txt):
        ids, distinct = _distinct(text_bytes[t])
        if j == 0:  # the row's first token: 'COM' / 'LINUX' rows are events
            bad = [i for i, s in enumerate(distinct) if s in ("COM", "LINUX")]
            if bad:
                ok &= ~np.isin(ids, bad)
        texts.append((ids, distinct))
    keep = np.flatnonzero(ok)
    if keep.size < rows.size:
        vals = vals[:, keep]
        texts = [(ids[keep], distinct) for ids, distinct in texts]
    return Typed(rows[keep], vals, texts)


def _one_token(m: np.ndarray) -> np.ndarray:
    """Rows of slot bytes ``m`` that are a blank, blanks, then one printable token."""
    solid = (m >= 33) & (m <= 126)
    blank = m == _SP
    ok = blank[:, 0] & solid[:, -1] & (solid | blank).all(axis=1)
    # no blank after a solid byte: solid bytes form one run that ends the slot
    return ok & ~(solid[:, :-1] & blank[:, 1:]).any(axis=1)


def _distinct(m: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Id of each row's token (equal bytes, equal ids) and the distinct tokens: the few
    distinct ones one at a time, then (many) by sorting."""
    n, w = m.shape
    if n == 0:
        return np.empty(0, dtype=np.int64), []
    cols = np.zeros((n, (w + 7) // 8 * 8), dtype=np.uint8)
    cols[:, :w] = m
    key = cols.view(np.uint64)  # (n, words)
    ids = np.full(n, -1, dtype=np.int64)
    firsts: list[int] = []
    todo = np.arange(n)
    while todo.size and len(firsts) < 16:
        same = (key[todo] == key[todo[0]]).all(axis=1)
        ids[todo[same]] = len(firsts)
        firsts.append(int(todo[0]))
        todo = todo[~same]
    texts = [m[i].tobytes().decode("ascii").lstrip(" ") for i in firsts]
    if todo.size:
        rest = np.ascontiguousarray(m[todo]).view(np.dtype((np.void, w))).ravel()
        uniq, inv = np.unique(rest, return_inverse=True)
        ids[todo] = inv.ravel() + len(firsts)
        texts += [u.tobytes().decode("ascii").lstrip(" ") for u in uniq]
    return ids, texts


def frames(
    section: sx.Section, sid: int, lay: Layout, t: Typed, ts: pl.Series, line_no: pl.Series
) -> list[pl.DataFrame]:
    """The table rows of one section's typed rows (``ts``, ``line_no``: theirs), with the
    order keys `_sar_extract.extract` gives its rows (``line_no``; ``_sid``, ``_tpl``,
    ``_m``)."""
    num = [j for j, k in enumerate(lay.kinds) if k != "text"]
    txt = [j for j, k in enumerate(lay.kinds) if k == "text"]
    value = {j: t.vals[r] for r, j in enumerate(num)}
    text = {
        j: pl.Series(d, dtype=pl.String).gather(ids)
        for j, (ids, d) in zip(txt, t.texts, strict=True)
    }
    if section.table == "sar_other":
        return _other(section, sid, value, text, ts, line_no)
    if section.table == "sar_psi":
        return _psi(section, sid, value, ts, line_no)
    cols: dict[str, pl.Series] = {"ts": ts}
    for col, spec in st.COLUMNS[section.table].items():
        dtype = spec[0]
        at = section.cols.get(col)
        if at is None:
            cols[col] = pl.Series(col, [None] * ts.len(), dtype=dtype)
        elif at[0] in text:
            cols[col] = text[at[0]].alias(col)
        elif dtype == pl.Float64:
            cols[col] = pl.Series(col, value[at[0]] * at[1])
        else:
            cols[col] = pl.Series(col, value[at[0]]).cast(dtype)
    cols["line_no"] = line_no
    return [pl.DataFrame(cols)]


def _psi(
    section: sx.Section, sid: int, value: dict, ts: pl.Series, line_no: pl.Series
) -> list[pl.DataFrame]:
    out = []
    for tpl, (res, kind, idx) in enumerate(sn.psi_templates(list(section.names))):
        cols = {
            "ts": ts,
            "resource": pl.Series([res] * ts.len()),
            "kind": pl.Series([kind] * ts.len()),
        }
        for c in ("avg10_pct", "avg60_pct", "avg300_pct", "avg_pct"):
            cols[c] = (
                pl.Series(c, value[idx[c]])
                if c in idx
                else pl.Series(c, [None] * ts.len(), dtype=pl.Float64)
            )
        out.append(
            pl.DataFrame(cols).with_columns(
                pl.lit(sid, pl.Int64).alias("_sid"), pl.lit(tpl, pl.Int64).alias("_tpl"), line_no
            )
        )
    return out


def _other(
    section: sx.Section,
    sid: int,
    value: dict,
    text: dict,
    ts: pl.Series,
    line_no: pl.Series,
) -> list[pl.DataFrame]:
    """Long rows (one per row and metric, row by row) of a ``sar_other`` section."""
    keys = [i for i, n in enumerate(section.names) if n in st.KEY_NAMES]
    idx = [i for i in range(section.width) if i not in keys]
    if not idx:
        return []
    n, k = ts.len(), len(idx)
    row = pl.Series(np.repeat(np.arange(n), k))
    if keys:
        item = (
            pl.DataFrame({str(i): text[i] for i in keys})
            .select(pl.concat_str(pl.all(), separator="|"))
            .to_series()
            .gather(row)
        )
    else:
        item = pl.Series([None] * (n * k), dtype=pl.String)
    names = pl.Series([section.names[i] for i in idx], dtype=pl.String)
    return [
        pl.DataFrame(
            {
                "ts": ts.gather(row),
                "section": pl.Series([section.label], dtype=pl.String).gather(
                    np.zeros(n * k, dtype=np.int64)
                ),
                "item": item,
                "metric": names.gather(np.tile(np.arange(k), n)),
                "value": np.stack([value[i] for i in idx], axis=1).ravel(),
                "text": pl.Series([None] * (n * k), dtype=pl.String),
                "_sid": np.full(n * k, sid, dtype=np.int64),
                "line_no": line_no.gather(row),
                "_m": np.tile(np.arange(k, dtype=np.int64), n),
            }
        )
    ]
