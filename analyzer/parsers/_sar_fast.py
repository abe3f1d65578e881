"""sar text blocks with most lines recognised from their bytes (private helper of ``sar``).

A block without colour codes whose bytes are ASCII (no NUL or CR) is read as:

* empty lines: blank (counted only);
* *clock lines* (``HH:MM:SS`` with H < 24, M < 60, S < 60, then two blanks): one whose
  bytes after the time (its *tail*) equal those of a header the regular classifier has
  already seen (`Tails`) is that header again; one under a header whose tail has a
  `_sar_rows` layout and whose bytes pass `_sar_rows.typed` is a data row typed from
  its bytes;
* every other line: the regular classifier (`_sar_blocks.classify`). The tails of the
  headers it finds are learned; when it finds one among the clock lines, the rows after
  it were given the wrong header, so the block is read again with the header known (a
  few times at most, then the whole block goes the regular way). The first block also
  learns the headers among its first clock lines before anything else.

`split` returns the classified lines and the typed ones (`Fast`: numpy arrays) for
`_sar_merge.block`. Each line is read exactly once; a typed row gets the kind, header,
values and time the regular path would give it (a known tail is a header there too:
classification depends only on the text after the time and its validity).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analyzer.parsers import _blocks
from analyzer.parsers import _sar_blocks as sb
from analyzer.parsers import _sar_extract as sx
from analyzer.parsers import _sar_rows as sr
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar

_SP = 32
_ROUNDS = 4  # readings of a block that keeps finding new headers before it goes regular
_PROBE = 512  # lines classified to learn the first headers of a file
_SCHEMA = {"line_no": pl.UInt32, "kind": pl.String, "sec": pl.Int32, "rest": pl.String}


@dataclass
class Tail:
    """A header's bytes after the time: its ``rest`` text, section and layout."""

    text: str
    section: sx.Section
    layout: sr.Layout | None


@dataclass
class Tails:
    """Header tails learned from the regular classifier, by their bytes."""

    ids: dict[bytes, int] = field(default_factory=dict)
    items: list[Tail] = field(default_factory=list)

    def learn(self, tail: bytes, text: str) -> None:
        if tail not in self.ids:
            section = sx.make_section(text.split())
            self.ids[tail] = len(self.items)
            self.items.append(Tail(text, section, sr.layout(tail, section)))


@dataclass
class Fast:
    """The lines of a block read from their bytes. Typed rows: ``idx`` (line indexes,
    ascending), ``line`` (line numbers), ``sec`` (seconds of day), per tail the
    positions of its rows in ``idx`` and their `_sar_rows.Typed` (``groups``). Known
    headers: ``head_line`` (line numbers), ``head_tail`` (tail ids)."""

    idx: np.ndarray
    groups: list[tuple[int, np.ndarray, sr.Typed]]
    line: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    sec: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int32))
    head_line: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    head_tail: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


@dataclass
class Split:
    """`split`'s answer: the regularly classified lines (``line_no``, ``kind``, ``sec``,
    ``rest``), the lines read from their bytes (None: the whole block went the regular
    way), the tail id in effect at the end (-1: none) and the empty lines (in neither)."""

    df: pl.DataFrame
    fast: Fast | None
    end_tail: int
    blanks: int


def split(block: _blocks.Block, tails: Tails, hdr_tail: int) -> Split:
    """The block read as the module doc says; ``hdr_tail``: the tail id of the header in
    effect before the block (-1: none, or one without a tail)."""
    ch = block.chunk
    starts, lens = ch.starts, ch.lens
    padded = np.zeros(ch.buf.size + 16, dtype=np.uint8)
    padded[: ch.buf.size] = ch.buf
    words = np.ndarray((padded.size - 7,), dtype="<u8", buffer=padded, strides=(1,))
    head = words[starts]
    ok, sec = swar.clock(head.view(np.uint8).reshape(-1, 8))
    clock = ok & (lens >= 10) & (padded[starts + 8] == _SP) & (padded[starts + 9] == _SP)
    if ch.unterminated:
        clock[-1] = False
    blank = lens == 0
    df0 = _classify(block, np.flatnonzero(~clock & ~blank))
    clocks = np.flatnonzero(clock)
    if not tails.items:
        _learn(ch, tails, _classify(block, clocks[:_PROBE]))
    tail_of = np.full(ch.n, -1, dtype=np.int64)
    _match(ch, words, tails, clocks, tail_of, 0)
    for _ in range(_ROUNDS):
        known = len(tails.items)
        typed, fail, end_tail = _typed(ch, tails, df0, clocks, tail_of, hdr_tail)
        df1 = _classify(block, fail)
        _learn(ch, tails, df1)
        if len(tails.items) == known:
            break
        _match(ch, words, tails, clocks, tail_of, known)
    else:
        return Split(sb.classify(block.lines, True), None, -1, 0)
    heads = np.flatnonzero(tail_of >= 0)
    typed.head_line, typed.head_tail = ch.line_nos(heads), tail_of[heads]
    typed.sec, typed.line = sec[typed.idx], ch.line_nos(typed.idx)
    df = (
        df0.merge_sorted(df1, "line_no")
        if df1.height and df0.height
        else (df1 if df1.height else df0)
    )
    return Split(df, typed, end_tail, int(blank.sum()))


def _classify(block: _blocks.Block, idx: np.ndarray) -> pl.DataFrame:
    """`_sar_blocks.classify` of the lines ``idx``."""
    if idx.size == 0:
        return pl.DataFrame(schema=_SCHEMA)
    return sb.classify(block.subset(idx), True)


def _learn(ch: fast.Chunk, tails: Tails, df: pl.DataFrame) -> None:
    """Learn the tails of the clock lines that ``df`` (classified lines) calls headers."""
    for line_no, rest in (
        df.filter(pl.col("kind") == "header").select("line_no", "rest").iter_rows()
    ):
        i = line_no - ch.first_line
        a = int(ch.starts[i])
        tails.learn(ch.buf[a + 8 : a + int(ch.lens[i])].tobytes(), rest)


def _match(
    ch: fast.Chunk,
    words: np.ndarray,
    tails: Tails,
    clocks: np.ndarray,
    tail_of: np.ndarray,
    start: int,
) -> None:
    """``tail_of`` of the clock lines whose tail is one of ``tails`` from ``start`` on:
    same length, then equal 8-byte words (the last one ending at the line's end)."""
    starts, lens = ch.starts[clocks] + 8, ch.lens[clocks] - 8
    first = words[starts]
    for t, tail in enumerate(list(tails.ids)[start:], start=start):
        n = len(tail)
        head = tail[:8].ljust(8, b"\0")
        mask = np.uint64((1 << (8 * min(n, 8))) - 1)
        hit = np.flatnonzero(
            (lens == n) & ((first & mask) == np.uint64(int.from_bytes(head, "little")))
        )
        for at in list(range(8, n - 8, 8)) + ([n - 8] if n > 8 else []):
            if hit.size == 0:
                break
            want = np.uint64(int.from_bytes(tail[at : at + 8], "little"))
            hit = hit[words[starts[hit] + at] == want]
        tail_of[clocks[hit]] = t


def _typed(
    ch: fast.Chunk,
    tails: Tails,
    df0: pl.DataFrame,
    clocks: np.ndarray,
    tail_of: np.ndarray,
    hdr_tail: int,
) -> tuple[Fast, np.ndarray, int]:
    """The typed rows among the clock lines that are not known headers, the line
    indexes of the others, and the tail id in effect at the block's end."""
    first_line = ch.first_line
    marks = df0.filter(pl.col("kind").is_in(["header", "average"]))
    m_idx = marks.get_column("line_no").to_numpy().astype(np.int64) - first_line
    heads = np.flatnonzero(tail_of >= 0)
    at = np.concatenate([heads, m_idx])
    lay = np.concatenate([tail_of[heads], np.full(m_idx.size, -1, dtype=np.int64)])
    order = np.argsort(at, kind="stable")
    at, lay = at[order], lay[order]
    cand = clocks[tail_of[clocks] < 0]
    pos = np.searchsorted(at, cand, side="right") - 1
    gov = np.where(pos >= 0, lay[np.maximum(pos, 0)] if lay.size else -1, hdr_tail)
    lens = ch.lens[cand]
    by_gov = np.argsort(gov, kind="stable")
    bounds = np.flatnonzero(np.diff(gov[by_gov])) + 1
    done = np.zeros(ch.n, dtype=bool)
    found: list[tuple[int, np.ndarray, sr.Typed]] = []
    for sel in np.split(by_gov, bounds):
        t = int(gov[sel[0]]) if sel.size else -1
        tail = tails.items[t] if t >= 0 else None
        if tail is None or tail.layout is None:
            continue
        rows = cand[sel[lens[sel] == tail.layout.width]]
        dec = None
        for r in rows[:4].tolist():
            a = int(ch.starts[r])
            dec = sr.decimals(ch.buf[a : a + tail.layout.width].tobytes(), tail.layout)
            if dec is not None:
                break
        if dec is None:
            continue
        got = sr.typed(ch, rows, tail.layout, dec)
        if got.rows.size:
            found.append((t, got.rows, got))
            done[got.rows] = True
    idx = np.flatnonzero(done)
    rank = np.cumsum(done) - 1  # position of a typed line in idx
    groups = [(t, rank[rows], got) for t, rows, got in found]
    fail = cand[~done[cand]]
    return Fast(idx, groups), fail, int(lay[-1]) if lay.size else hdr_tail
