"""pidstat fast path: typing the data rows of one layout in a block, with numpy.

sysstat right-aligns each value under its name, and a value too wide for its column (a
9-digit ``VSZ``) moves the rest of the row right: where the time and values of a row end
is its *pattern*. Rows are matched against the patterns of their layout seen so far (the
head's first row gives the first; only the ends that tell the known patterns apart are
checked); the ends of rows that match none are found by moving right from each name's end
to the next blank, which teaches new patterns. A row is then typed from its own bytes by
:class:`._sysstat_swar.Numbers` with its pattern's slots: blanks, then digits with the
column's number of decimals, the slot's first byte (the blank after the value before it)
blank, the epoch time 9 to 11 digits or a valid ``HH:MM:SS``. So its values are those of
the regular cast, and a row that fails any check is left to the regular parser. The
command is everything after the blanks that follow the last value; it must start with a
printable ASCII character other than a blank (the block reader has checked its end).

A slot of 10 to 16 bytes whose values have at most 8 characters in all the rows typed
together is read as one word instead of two (about a fifth less work).

:func:`read` returns the rows of a block as :class:`Rows` (numpy arrays); :func:`frame`
puts a layout's rows of all blocks together as one polars frame: ``line_no`` (UInt32),
``epoch`` (Boolean), ``ep`` (epoch seconds, Int64), ``sec`` (seconds of day, Int32),
``hdr_sec`` (the governing header's time, Int32), the layout's value columns in their
declared types, ``tid`` (NULL) and ``command`` (String, as the regular path cuts it).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar
from analyzer.parsers._pidstat_layout import Layout
from analyzer.parsers._pidstat_schema import HUMAN_RE, TABLES, finish_number

#: How far right of its name a value may end (values before it overflowed their columns).
MAX_SHIFT = 8
#: How many blanks may separate the last value from the command.
MAX_GAP = 32
#: Value end patterns learned per layout (rows of further patterns take the regular path).
MAX_PATTERNS = 32
_PROBE = 64  # rows scanned at a time to learn patterns

SP, NL = 32, 10
_MAX_INT = {pl.Int64(): 2**53, pl.Int32(): 2**31 - 1}
#: Command bytes that might make HUMAN_RE match (its suffixes; bytes outside ASCII may be
#: Unicode digits or blanks): such commands go through the regular expressions.
_ODD = np.zeros(256, dtype=bool)
_ODD[np.frombuffer(b"BkKMGTP%", dtype=np.uint8)] = True
_ODD[0x80:] = True


@dataclass
class Rows:
    """Rows of one layout read from a block: ``line`` (index in the block until the
    block is numbered, then the line number), ``vals`` ``(k, n)`` (Float64), ``tval``
    (epoch seconds or seconds of day), ``gsec`` (the governing header's time, -1 none),
    the commands' bytes ``text`` one after the other with their lengths ``lens``, and
    ``odd``: some command might match the ``--human`` pattern or start with ``|__``."""

    line: np.ndarray
    vals: np.ndarray
    tval: np.ndarray
    gsec: np.ndarray
    text: np.ndarray
    lens: np.ndarray
    odd: bool

    def tail(self, cut: int) -> Rows:
        """The rows after the first ``cut``."""
        skip = int(self.lens[:cut].sum())
        return Rows(
            self.line[cut:],
            self.vals[:, cut:],
            self.tval[cut:],
            self.gsec[cut:],
            self.text[skip:],
            self.lens[cut:],
            self.odd,
        )


@dataclass(frozen=True)
class Pattern:
    """Where the time and each value of a row end: offsets from the line start, as an
    array (``ends``) and a tuple (``key``)."""

    ends: np.ndarray
    key: tuple[int, ...]

    @classmethod
    def of(cls, ends: tuple[int, ...]) -> Pattern:
        return cls(np.array(ends), tuple(ends))


def read(
    chunk: fast.Chunk, rows: np.ndarray, lay: Layout, gsec: np.ndarray, pats: list[Pattern]
) -> tuple[list[Rows], np.ndarray]:
    """The lines ``rows`` of ``chunk`` (sorted) read as rows of ``lay`` under headers with
    times ``gsec`` (-1: none): what was read, in line order, and the mask of the rows
    read. ``pats``: the layout's patterns so far (learned ones are appended)."""
    ok = np.zeros(rows.size, dtype=bool)
    early = int(np.searchsorted(chunk.starts[rows], 16))  # read with the 16 bytes before
    out = []
    for src, part in ((_padded(chunk, rows[:early]), slice(0, early)), (chunk, slice(early, None))):
        if rows[part].size:
            got, ok[part] = _rows(src, rows[part], lay, gsec[part], pats)
            if got.line.size:
                out.append(got)
    return out, ok


def _padded(chunk: fast.Chunk, rows: np.ndarray) -> fast.Chunk:
    """The first lines of ``chunk`` up to the last of ``rows`` after 16 blanks (rows are
    read with the 16 bytes before them)."""
    if not rows.size:
        return chunk
    k = int(rows[-1]) + 1
    end = int(chunk.starts[k - 1] + chunk.lens[k - 1]) + 1
    buf = np.concatenate([np.full(16, SP, dtype=np.uint8), chunk.buf[:end]])
    return fast.Chunk(buf, chunk.first_line, chunk.starts[:k] + 16, chunk.lens[:k], False)


def _rows(
    chunk: fast.Chunk, rows: np.ndarray, lay: Layout, gsec: np.ndarray, pats: list[Pattern]
) -> tuple[Rows, np.ndarray]:
    """Typed rows among the lines ``rows`` under ``lay`` (governing header times ``gsec``)
    and the mask of those that were read. ``pats``: the patterns of this layout seen so
    far (offsets from the line start); rows that match none teach new ones."""
    buf = chunk.buf
    s, lim = chunk.starts[rows], chunk.starts[rows] + chunk.lens[rows]
    ok = np.zeros(rows.size, dtype=bool)
    vals = np.empty((len(lay.cols), rows.size), dtype=np.float64)
    tval = np.zeros(rows.size, dtype=np.int64)
    cmd = np.zeros(rows.size, dtype=np.int64)
    todo, i, probed = np.arange(rows.size), 0, 0
    while todo.size:
        if i == len(pats):  # the rest match no known pattern: learn from a few of them
            probe = todo[probed : probed + _PROBE]
            if not probe.size or len(pats) >= MAX_PATTERNS:
                break
            ends, good = _scan(buf, s[probe], lim[probe], lay)
            known = {p.key for p in pats}
            new = [p for p in dict.fromkeys(map(tuple, ends[good].tolist())) if p not in known]
            pats.extend(Pattern.of(p) for p in new[: MAX_PATTERNS - len(pats)])
            probed = 0 if new else probed + probe.size  # none new: try the next few
            continue
        pat, i = pats[i], i + 1
        hit = todo[_matches(buf, s[todo], lim[todo], _telling(pats, pat))]
        for a in range(0, hit.size, swar.BLOCK_ROWS):
            part = hit[a : a + swar.BLOCK_ROWS]
            ok[part], vals[:, part], tval[part], cmd[part] = _typed(
                buf, s[part], lim[part], pat, lay
            )
        todo = todo[~ok[todo]]
    if not ok.all():
        got = np.flatnonzero(ok)
        rows, vals, tval, cmd, lim, gsec = (
            rows[got],
            vals[:, got],
            tval[got],
            cmd[got],
            lim[got],
            gsec[got],
        )
    lens = lim - cmd
    text = _text(buf, cmd, lens)
    odd = bool(_ODD[text].any()) or bool((buf[cmd] == ord("|")).any())
    return Rows(rows, vals, tval, gsec.astype(np.int32), text, lens, odd), ok


def _text(buf: np.ndarray, start: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The bytes ``buf[start:start + len]`` of each row, one after the other."""
    width = int(lens.max(initial=0))
    if not width:
        return buf[:0].copy()
    if width <= 64 and int(start.max()) + width <= buf.size:  # cut from a matrix of the widest
        m = np.lib.stride_tricks.sliding_window_view(buf, width)[start]
        return m[np.arange(width)[None, :] < lens[:, None]]
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return buf[np.repeat(start - offsets[:-1], lens) + np.arange(offsets[-1])]


def _telling(pats: list[Pattern], pat: Pattern) -> list[int]:
    """Ends of ``pat`` worth checking before typing (typing checks all): the last one and,
    for each known pattern it does not yet tell apart, the last end where they differ."""
    ends = pat.ends
    cols = [ends.size - 1]
    for other in pats:
        differ = np.flatnonzero(other.ends != ends)
        if differ.size and (other.ends[cols] == ends[cols]).all():
            cols.append(int(differ[-1]))
    return ends[sorted(set(cols), reverse=True)].tolist()


def _matches(buf: np.ndarray, s: np.ndarray, lim: np.ndarray, ends: list[int]) -> np.ndarray:
    """Mask of the rows (line starts ``s``, newlines at ``lim``) with a value ending (a
    non-blank, then a blank) at each of ``ends``, inside the line."""
    alive = np.arange(s.size)
    for p in ends:
        e = np.minimum(s[alive] + p, lim[alive])  # past the line: its newline, no match
        alive = alive[(buf[e] == SP) & (buf[e - 1] != SP)]
        if not alive.size:
            break
    out = np.zeros(s.size, dtype=bool)
    out[alive] = True
    return out


def _scan(
    buf: np.ndarray, s: np.ndarray, lim: np.ndarray, lay: Layout
) -> tuple[np.ndarray, np.ndarray]:
    """Value ends (offsets from the line start) of rows matching no known pattern: the
    time ends where it does in the head's first row, each value where its header name
    ends, both moved right to the next blank when longer (an overflowing value moves the
    ones after it too). ``good``: every end found."""
    ok = np.ones(s.size, dtype=bool)
    ends = np.empty((s.size, len(lay.ends)), dtype=np.int64)
    shift = np.zeros(s.size, dtype=np.int64)
    for j, end in enumerate((lay.ends[0], *lay.head_ends)):
        e = np.minimum(s + end + shift, lim)
        ok &= buf[e - 1] != SP
        _extend(buf, e, ok)
        ends[:, j] = e - s
        if j:
            shift = e - s - end
    ok &= buf[s + ends[:, -1]] == SP
    return ends, ok


def _extend(buf: np.ndarray, e: np.ndarray, ok: np.ndarray) -> None:
    """In place: move each end ``e`` right to the next blank or newline (at most
    `MAX_SHIFT` bytes; rows that need more are no longer ``ok``)."""
    c = buf[e]
    more = np.flatnonzero((c != SP) & (c != NL))
    for _ in range(MAX_SHIFT):
        if not more.size:
            return
        e[more] += 1
        c = buf[e[more]]
        more = more[(c != SP) & (c != NL)]
    ok[more] = False


@functools.lru_cache(maxsize=256)
def _numbers(
    decimals: tuple[int, ...], epoch: bool, ends: tuple[int, ...], narrow: tuple[bool, ...]
) -> swar.Numbers | None:
    """The decoder of rows with value ``ends``, read from 16 bytes left of the line start:
    the epoch time (its slot starts at the byte before the line, read as a blank) and one
    slot per value, from the blank after the value before it, or, where ``narrow`` (the
    caller found only blanks there), from 9 bytes before its end: one word instead of
    two. None when a slot cannot hold its value."""
    slots = [(15, 16 + ends[0], 0)] if epoch else []
    for a, b, d, thin in zip(ends[:-1], ends[1:], decimals, narrow, strict=True):
        slots.append((16 + (b - 9 if thin else a), 16 + b, d))
    try:
        return swar.Numbers(slots)
    except ValueError:
        return None


def _narrow(m: np.ndarray, key: tuple[int, ...]) -> tuple[bool, ...]:
    """Per value slot of 10 to 16 bytes: whether its values have at most 8 characters in
    every row of ``m`` (only blanks left of its last 9 bytes), so one word reads it."""
    slots = list(itertools.pairwise(key))
    wide = [j for j, (a, b) in enumerate(slots) if 10 <= b - a <= 16]
    if not wide:
        return (False,) * len(slots)
    cols = [c for j in wide for c in range(16 + slots[j][0], 8 + slots[j][1])]
    blank = (m[:, cols] == SP).all(axis=0).tolist()
    out, at = [False] * len(slots), 0
    for j in wide:
        a, b = slots[j]
        out[j] = all(blank[at : at + b - a - 8])
        at += b - a - 8
    return tuple(out)


def _typed(
    buf: np.ndarray, s: np.ndarray, lim: np.ndarray, pat: Pattern, lay: Layout
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows (line starts ``s``, ends ``lim``) that match ``pat``: ``ok``, values
    ``(k, n)``, time (epoch seconds or seconds of day) and where the command starts."""
    key = pat.key
    t0, last = key[0], key[-1]
    n = s.size
    m = np.lib.stride_tricks.sliding_window_view(buf, 17 + last)[s - 16]
    m[:, 15] = SP
    nums = _numbers(lay.decimals, lay.epoch, key, _narrow(m, key))
    if nums is None:  # the pattern cannot hold the layout's numbers
        return np.zeros(n, dtype=bool), np.zeros((len(lay.cols), n)), np.zeros(n, np.int64), s
    okv, vals = nums(m)
    ok = okv.all(axis=0)
    if (nums.row != np.arange(nums.k)).any():  # one-word slots come first
        vals = vals[nums.row]
    if lay.epoch:  # 9 to 11 digits
        ok &= (t0 >= 9) & (m[:, 16 + max(t0 - 9, 0)] != SP)
        if t0 >= 12:
            ok &= m[:, 4 + t0] == SP
        tval = vals[0].astype(np.int64)
        vals = vals[1:]
    else:
        good, sec = swar.clock(m, 16)
        ok &= good & (t0 == 8)
        tval = sec.astype(np.int64)
    c = np.minimum(s + last + 1, lim)
    gap = np.flatnonzero(buf[c] == SP)
    for _ in range(MAX_GAP):
        if not gap.size:
            break
        c[gap] += 1
        gap = gap[buf[c[gap]] == SP]
    ok[gap] = False
    first = buf[c]
    ok &= (c < lim) & (first > SP) & (first < 0x7F)
    return ok, vals, tval, c


def frame(lay: Layout, parts: list[Rows]) -> tuple[pl.DataFrame, bool]:
    """One frame of the rows of ``lay`` (in line order; ``line`` numbered) and whether a
    command looks like ``--human`` output. Columns: ``line_no`` (UInt32), ``epoch``,
    ``ep``, ``sec``, ``hdr_sec``, the layout's values in their declared types, ``tid``
    (NULL), ``command`` (the regular path's text: ``|__`` removed). Built as Arrow record
    batches over each part's numpy buffers: no copy, no per-column conversion."""
    schema = TABLES["pidstat"].schema
    # values are never negative here (no sign is read), integers are exact (at most 15
    # digits): integers in range need no rounding, only a cast
    cast = {
        c: schema[c]
        for j, c in enumerate(lay.cols)
        if schema[c] == pl.Float64()
        or (
            lay.decimals[j] == 0
            and max(float(p.vals[j].max(initial=0)) for p in parts) <= _MAX_INT[schema[c]]
        )
    }
    table = pa.Table.from_batches([_batch(lay, p, cast) for p in parts])
    df = pl.DataFrame(table)  # one copy when there are several parts (blocks)
    later = [finish_number(pl.col(c), c).alias(c) for c in lay.cols if c not in cast]
    human = False
    if any(p.odd for p in parts):  # rare: ask the regular path's expressions
        human = bool(df["command"].str.contains(HUMAN_RE).any())
        later.append(pl.col("command").str.strip_prefix("|__").str.strip_chars_end())
    return (df.with_columns(later) if later else df), human


def _batch(lay: Layout, p: Rows, cast: dict[str, pl.DataType]) -> pa.RecordBatch:
    """The columns of `frame` for one part (values not in ``cast`` stay Float64)."""
    n = p.line.size
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(p.lens, out=offsets[1:])
    has_sec = p.gsec >= 0
    cols = {
        "line_no": _arrow(p.line, pl.UInt32()),
        "epoch": _bools(np.full(n, lay.epoch)),
        "ep": _arrow(p.tval, pl.Int64()) if lay.epoch else pa.nulls(n, pa.int64()),
        "sec": pa.nulls(n, pa.int32()) if lay.epoch else _arrow(p.tval, pl.Int32()),
        "hdr_sec": _arrow(p.gsec, pl.Int32(), None if has_sec.all() else has_sec),
    }
    for j, c in enumerate(lay.cols):
        cols[c] = _arrow(p.vals[j], cast.get(c, pl.Float64()))
    cols["tid"] = pa.nulls(n, pa.int64())
    cols["command"] = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(p.text)
    )
    return pa.RecordBatch.from_pydict(cols)


_ARROW = {
    pl.Float64(): (pa.float64(), np.float64),
    pl.Int64(): (pa.int64(), np.int64),
    pl.Int32(): (pa.int32(), np.int32),
    pl.UInt32(): (pa.uint32(), np.uint32),
}


def _arrow(values: np.ndarray, dtype: pl.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """``values`` as an Arrow array of ``dtype`` over their buffer (NULL where not
    ``valid``); built from buffers, it skips pyarrow's and polars' checks of numpy input."""
    kind, np_type = _ARROW[dtype]
    v = np.ascontiguousarray(values, dtype=np_type)
    mask = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind, v.size, [mask, pa.py_buffer(v)])


def _bools(values: np.ndarray) -> pa.Array:
    bits = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), values.size, [None, pa.py_buffer(bits)])
