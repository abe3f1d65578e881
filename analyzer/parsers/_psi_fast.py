"""PSI sampler lines typed from their bytes (private helper of ``psi``).

The capture's sampler writes ``<epoch> <path> <raw PSI line>``, one line per path and
kind every second; this module types the lines of exactly this shape with numpy::

    1795960800.568406082 /proc/pressure/cpu some avg10=3.18 avg60=3.18 avg300=3.18 total=40400215502

that is: single blanks between seven fields and none around them, an epoch of 10 digits,
a point and 9 digits (``date +%s.%N``), a path starting with ``/`` (at most `MAX_PATH`
bytes), ``some`` or ``full``, ``avg10=``, ``avg60=``, ``avg300=`` each with a number of
1 to 4 digits, a point and 2 digits (the kernel's ``%lu.%02lu``), and ``total=`` with 1
to 15 digits. Such a line matches the regular parser's ``_PSI`` regex with these fields
as its groups, and gets the values the regular casts give: the epoch's microseconds
(whole seconds and the first 6 fraction digits), the averages as the double nearest to
their text (`_sysstat_swar.Numbers`), the total as an integer. Every other line (tabs,
other spacing, other number shapes, a last line without newline...) is left to the
regular parser.

Fields are found from the blanks: each line with exactly six is cut at them. Each value
is read as one or two 64-bit words ending where the value ends (an unaligned view of the
bytes), the bytes before it blanked, so that it is a right-aligned number in a fixed slot
as `_sysstat_swar.Numbers` expects. Paths get ids: when the rows repeat their paths
with a period (the sampler prints the same paths in the same order every second), by
position, checked word by word against the row one period earlier; else one distinct
path at a time (at most `MAX_PATHS`; rows of further paths go to the regular parser).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import polars as pl

from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar

#: Longest path typed here, and most distinct paths per slice of lines (the others go to
#: the regular parser).
MAX_PATH, MAX_PATHS = 64, 64
#: Lines typed at a time.
SLICE = 32768
_PAD = 16  # bytes before the block in the padded copy (words may start before a line)
_U = np.uint64
_SOME = _U(int.from_bytes(b"some ", "little"))
_FULL = _U(int.from_bytes(b"full ", "little"))
_KIND = _U((1 << 40) - 1)
_PREFIXES = (b"avg10=", b"avg60=", b"avg300=", b"total=")
_BLANKS = _U(0x2020202020202020)
# _KEEP[k]: the last k bytes of a word (its top bytes: words are little-endian)
_KEEP = np.array([((1 << 64) - 1) ^ ((1 << (8 * (8 - k))) - 1) for k in range(9)], dtype=_U)
_BLANKED = _BLANKS & ~_KEEP
_KINDS = pl.Series(["some", "full"], dtype=pl.String)


@dataclass
class Fast:
    """Typed rows of one block (numpy arrays, one entry per row, in line order):
    ``idx`` (line index in the block), ``line_no``, ``path_id`` (into ``paths``),
    ``full`` (kind is ``full``), ``epoch_us``, ``avg`` (3 rows: avg10, avg60, avg300),
    ``total_us``; ``period``: the rows repeat their path and kind every ``period`` rows
    (0: they do not)."""

    idx: np.ndarray
    line_no: np.ndarray
    path_id: np.ndarray
    paths: list[str]
    full: np.ndarray
    epoch_us: np.ndarray
    avg: np.ndarray
    total_us: np.ndarray
    period: int

    @property
    def height(self) -> int:
        return int(self.idx.size)

    def frame(self) -> pl.DataFrame:
        """``line_no`` (UInt32), ``path``, ``kind``, ``epoch_us``, ``avg10_pct``,
        ``avg60_pct``, ``avg300_pct``, ``total_us``: the regular parser's columns."""
        return pl.DataFrame(
            {
                "line_no": pl.Series(self.line_no, dtype=pl.UInt32),
                "path": pl.Series(self.paths, dtype=pl.String).gather(self.path_id),
                "kind": _KINDS.gather(self.full.astype(np.uint32)),
                "epoch_us": self.epoch_us,
                "avg10_pct": self.avg[0],
                "avg60_pct": self.avg[1],
                "avg300_pct": self.avg[2],
                "total_us": self.total_us,
            }
        )


@functools.cache
def _numbers(epoch: bool) -> swar.Numbers:
    """Slots of the words `rows` builds. Epoch: seconds (16 bytes), the first 6 and the
    last 3 fraction digits; values: avg10, avg60, avg300 (2 decimals), total (16 bytes)."""
    if epoch:
        return swar.Numbers([(0, 16, 0), (16, 24, 0), (24, 32, 0)])
    return swar.Numbers([(0, 8, 2), (8, 16, 2), (16, 24, 2), (24, 40, 0)])


def _decode(numbers: swar.Numbers, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ok`` (all slots) and values (slot order) of the rows of words ``m``."""
    vals = np.empty((numbers.k, m.shape[0]), dtype=np.float64)
    good = np.empty(m.shape[0], dtype=bool)
    mat = m.view(np.uint8).reshape(m.shape[0], 8 * m.shape[1])
    for i in range(0, m.shape[0], swar.BLOCK_ROWS):
        sl = slice(i, i + swar.BLOCK_ROWS)
        okn, _ = numbers(mat[sl], out=vals[:, sl])
        good[sl] = okn.all(axis=0)
    return good, vals[numbers.row]


def rows(chunk: fast.Chunk, tabs: bool = True) -> Fast:
    """The lines of the chunk that have the shape of the module doc, typed (``tabs``:
    the chunk may hold a tab). Lines are typed `SLICE` at a time (arrays that stay in
    the CPU cache); path ids and the period are then those of the whole chunk."""
    buf = chunk.buf
    padded = np.empty(buf.size + _PAD + 8, dtype=np.uint8)
    padded[:_PAD] = 0
    padded[_PAD : _PAD + buf.size] = buf
    padded[_PAD + buf.size :] = 10
    words = np.ndarray((padded.size - 7,), dtype="<u8", buffer=padded, strides=(1,))
    starts = chunk.starts + _PAD
    sp = np.flatnonzero(padded == 32)
    first = np.searchsorted(sp, starts)
    count = np.diff(first, append=sp.size)
    if chunk.unterminated:
        count[-1] = 0
    if tabs and (at_tab := np.flatnonzero(buf == 9)).size:
        count[np.searchsorted(chunk.starts, at_tab, side="right") - 1] = 0
    cand = np.flatnonzero(count == 6)
    parts = [
        _typed(words, padded, sp, cand[i : i + SLICE], starts, first, chunk.lens)
        for i in range(0, cand.size, SLICE)
    ]
    if not parts:
        parts = [_typed(words, padded, sp, cand, starts, first, chunk.lens)]
    names: dict[str, int] = {}
    ids = []
    for part in parts:  # path ids of the chunk: by text
        lut = np.array([names.setdefault(t, len(names)) for t in part[2]] + [-1], dtype=np.int64)
        ids.append(lut[part[1]])
    idx = np.concatenate([part[0] for part in parts])
    path_id, full = np.concatenate(ids), np.concatenate([part[3] for part in parts])
    return Fast(
        idx=idx,
        line_no=chunk.line_nos(idx),
        path_id=path_id,
        paths=list(names),
        full=full,
        epoch_us=np.concatenate([part[4] for part in parts]),
        avg=np.concatenate([part[5][:3] for part in parts], axis=1),
        total_us=np.concatenate([part[5][3] for part in parts]).astype(np.int64),
        period=_key_period(path_id * 2 + full),
    )


def _typed(
    words: np.ndarray,
    padded: np.ndarray,
    sp: np.ndarray,
    cand: np.ndarray,
    starts: np.ndarray,
    first: np.ndarray,
    lens: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The lines ``cand`` (indexes of lines with six blanks) that pass, typed: their
    indexes, path ids (into the paths returned next), full, epoch_us, values (avg10,
    avg60, avg300, total)."""
    at, f = starts[cand], first[cand]
    c = [sp[f + j] for j in range(6)]  # the six blanks of each line
    end = at + lens[cand]
    ok = (c[0] == at + 20) & (padded[at + 10] == ord(".")) & (padded[at + 21] == ord("/"))
    ok &= (c[1] - at <= 21 + MAX_PATH) & (c[2] == c[1] + 5)
    kind = words[c[1] + 1] & _KIND
    full = kind == _FULL
    ok &= full | (kind == _SOME)
    vlen = [c[3] - c[2] - 7, c[4] - c[3] - 7, c[5] - c[4] - 8, end - c[5] - 7]
    for j, pre in enumerate(_PREFIXES):
        mask = _U((1 << (8 * len(pre))) - 1)
        ok &= (words[c[2 + j] + 1] & mask) == _U(int.from_bytes(pre, "little"))
    ok &= (vlen[0] >= 4) & (vlen[0] <= 7) & (vlen[1] >= 4) & (vlen[1] <= 7)
    ok &= (vlen[2] >= 4) & (vlen[2] <= 7) & (vlen[3] >= 1) & (vlen[3] <= 15)
    keep = np.flatnonzero(ok)
    if keep.size < cand.size:
        cand, at, end, full = cand[keep], at[keep], end[keep], full[keep]
        c = [x[keep] for x in c]
        vlen = [x[keep] for x in vlen]
    epoch, good = _epochs(words, at)
    m = np.empty((cand.size, 5), dtype=_U)
    m[:, 0] = _right(words, c[3], vlen[0])
    m[:, 1] = _right(words, c[4], vlen[1])
    m[:, 2] = _right(words, c[5], vlen[2])
    m[:, 3] = _right(words, end - 8, np.clip(vlen[3] - 8, 0, 8))
    m[:, 4] = _right(words, end, np.minimum(vlen[3], 8))
    okv, vals = _decode(_numbers(False), m)
    good &= okv
    ids, paths, _ = _paths(words, padded, at + 21, c[1], full)
    good &= ids >= 0
    keep = np.flatnonzero(good)
    if keep.size < cand.size:
        cand, ids, full, vals, epoch = cand[keep], ids[keep], full[keep], vals[:, keep], epoch[keep]
    return cand, ids, paths, full, epoch, vals


def _key_period(key: np.ndarray) -> int:
    """The smallest p (up to twice `MAX_PATHS`) with ``key[i] == key[i - p]`` for all
    i >= p, the rows holding at least two periods; else 0."""
    if key.size < 2:
        return 0
    for p in (np.flatnonzero(key[1 : 2 * MAX_PATHS + 1] == key[0]) + 1).tolist():
        if 2 * p > key.size:
            return 0
        if (key[p:] == key[:-p]).all():
            return p
    return 0


def _epochs(words: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since the epoch of the 20-byte epochs at ``at`` (the point checked),
    and whether they are digits; typed once per run of equal epochs (a sample's lines)."""
    text = [words[at], words[at + 8], words[at + 12]]  # bytes 0-7, 8-15, 12-19
    head = np.ones(at.size, dtype=bool)
    head[1:] = (text[0][1:] != text[0][:-1]) | (text[1][1:] != text[1][:-1])
    head[1:] |= text[2][1:] != text[2][:-1]
    h = at[head]
    m = np.empty((h.size, 4), dtype=_U)
    m[:, 0] = _right(words, h + 2, 2)  # 10 digits before the point
    m[:, 1] = text[0][head] >> _U(16) | text[1][head] << _U(48)
    m[:, 2] = _right(words, h + 17, 6)  # 6 fraction digits (microseconds)
    m[:, 3] = _right(words, h + 20, 3)  # and 3 more (checked, not used)
    ok, vals = _decode(_numbers(True), m)
    us = vals[0].astype(np.int64) * 1_000_000 + vals[1].astype(np.int64)
    run = np.cumsum(head) - 1
    return us[run], ok[run]


def _right(words: np.ndarray, end: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """The word of the 8 bytes before ``end`` with all but its last ``n`` bytes blank."""
    w = words[end - 8]
    w &= _KEEP[n]
    w |= _BLANKED[n]
    return w


def _paths(
    words: np.ndarray, padded: np.ndarray, a: np.ndarray, b: np.ndarray, full: np.ndarray
) -> tuple[np.ndarray, list[str], int]:
    """An id per path field ``[a, b)`` (-1: none given), the distinct paths by id, and
    the period of the rows' (path, kind) (0: none); see the module doc.

    A row is compared as its length and kind, then words that cover its path: at ``a``,
    ``a + 8``, ... and never past ``b - 8`` (so rows of equal length compare the same
    bytes; a path shorter than a word is masked)."""
    ids = np.full(a.size, -1, dtype=np.int64)
    if a.size == 0:
        return ids, [], 0
    n = b - a
    lk = (n << 1) | full
    cols = [words[np.minimum(a + 8 * j, b - 8)] for j in range((int(n.max()) + 7) // 8)]
    if (short := n < 8).any():
        cols[0] = np.where(short, cols[0] & _KEEP[np.minimum(n, 8)], cols[0])
    period = _period(lk, cols)
    if period:
        firsts = _distinct(np.stack([lk[:period], *(c[:period] for c in cols)], axis=1))
        ids = firsts[np.arange(a.size) % period]
        reps = np.unique(firsts)
    else:
        h = lk.astype(_U)
        for c in cols:
            h *= _U(0x9E3779B97F4A7C15)
            h ^= c
        found: list[int] = []
        todo = np.arange(a.size)
        while todo.size and len(found) < MAX_PATHS:
            same = h[todo] == h[todo[0]]
            ids[todo[same]] = todo[0]
            found.append(int(todo[0]))
            todo = todo[~same]
        given = np.flatnonzero(ids >= 0)
        exact = lk[given] == lk[ids[given]]
        for c in cols:
            exact &= c[given] == c[ids[given]]
        ids[given[~exact]] = -1
        reps = np.array(found, dtype=np.int64)
    # ids so far are representative rows (equal path and kind): ids by distinct path
    texts: dict[bytes, int] = {}
    by_rep = {r: texts.setdefault(padded[a[r] : b[r]].tobytes(), len(texts)) for r in reps.tolist()}
    lut = np.full(int(reps.max()) + 1 if reps.size else 1, -1, dtype=np.int64)
    lut[list(by_rep)] = list(by_rep.values())
    out = np.where(ids >= 0, lut[np.maximum(ids, 0)], -1)
    return out, [t.decode("ascii") for t in texts], period


def _period(lk: np.ndarray, cols: list[np.ndarray]) -> int:
    """The smallest p (up to twice `MAX_PATHS`) with row i equal to row i - p for every
    i >= p (``lk`` and every column), when the rows hold at least two periods; else 0."""
    for p in (np.flatnonzero(lk[1 : 2 * MAX_PATHS + 1] == lk[0]) + 1).tolist():
        if 2 * p > lk.size:
            return 0
        if (lk[p:] == lk[:-p]).all() and all((c[p:] == c[:-p]).all() for c in cols):
            return p
    return 0


def _distinct(w: np.ndarray) -> np.ndarray:
    """Index of the first equal row, for each of the few rows ``w``."""
    seen: dict[bytes, int] = {}
    return np.array([seen.setdefault(row.tobytes(), i) for i, row in enumerate(w)], dtype=np.int64)
