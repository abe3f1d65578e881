"""Read a text file in blocks of whole lines, cut where the caller's parser can restart.

The one block reader of the parsers. A block's
lines (`Block.lines`: ``line_no`` UInt32 1-based, ``line`` String) are exactly the lines
`_read.read_lines` gives for the same part of the file (``\\r\\n`` and a final ``\\r``
removed, NUL bytes dropped); they are only split when a parser asks (`Block`). The
caller's ``cut(buf, limit)`` picks where a block ends: the byte offset of a line start in
``(0, limit]`` where its parser keeps no state it cannot carry over, or -1 when ``buf``
holds none (then more of the file is read into the same block, doubling the read size,
so a file without any cut point is one block — the same as reading it whole). ``ahead``
holds the ``lookahead`` lines that follow the block
(they are the first lines of the next block): context for parsers whose line kinds
depend on the next lines, never counted twice.

Memory is a few blocks of ``CHUNK_BYTES`` whatever the file size. Invalid UTF-8 is
replaced block by block, with the same result as `_read.read_lines`' repaired copy.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import polars as pl

from analyzer.parsers import base

#: Bytes read per block: big enough to amortize per-call overhead, small enough that a
#: block, its frames and their typed rows stay a few tens of MB.
CHUNK_BYTES = 8 << 20

Cut = Callable[[bytes, int], int]


class Block:
    """Whole lines of a file: ``data`` (its bytes, invalid UTF-8 replaced), ``first_line``
    (1-based number of its first line), ``n_lines``, ``last`` (the file's last block).

    Nothing is split until asked for: `lines` (every line as a frame: ``data`` split at
    ``\\n``, NUL bytes and a final ``\\r`` removed) and `ahead` (the look-ahead lines) are
    built on first use. In a `plain` block each line is exactly its bytes, so
    `line_starts` gives where it is in ``data`` (for `_sysstat.right_aligned`).
    """

    def __init__(self, data: bytes, first_line: int, ahead: bytes, last: bool) -> None:
        self.data, self.first_line, self.last = data, first_line, last
        self._ahead = ahead

    @functools.cached_property
    def n_lines(self) -> int:
        """Number of lines (a last one without newline included)."""
        if "lines" in self.__dict__:  # already split: no second pass over the bytes
            return self.lines.height
        return self.data.count(b"\n") + (not self.data.endswith(b"\n"))

    @functools.cached_property
    def lines(self) -> pl.DataFrame:
        """``line_no`` (UInt32, 1-based), ``line`` (String) of every line."""
        return frame(self.data, self.first_line)

    @functools.cached_property
    def ahead(self) -> pl.DataFrame:
        """The look-ahead lines, numbered from 0 (context only, never counted)."""
        return frame(self._ahead, 0)

    @functools.cached_property
    def plain(self) -> bool:
        """ASCII without NUL or CR: every line is exactly its bytes."""
        return self.data.isascii() and b"\x00" not in self.data and b"\r" not in self.data


def _utf8(data: bytes) -> bytes:
    """``data`` with invalid UTF-8 replaced by U+FFFD, as `_read.utf8_clean_copy` does (a
    newline ends every byte sequence, so block by block gives the same text)."""
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace").encode("utf-8")
    return data


def frame(data: bytes, first_line: int) -> pl.DataFrame:
    """``line_no``, ``line`` of the whole lines in ``data`` (valid UTF-8), numbered from
    ``first_line``."""
    lf = pl.scan_lines(data, name="line", glob=False).with_row_index("line_no", offset=first_line)
    if b"\x00" in data:
        lf = lf.with_columns(pl.col("line").str.replace_all("\x00", "", literal=True))
    if b"\r" in data:
        lf = lf.with_columns(pl.col("line").str.strip_suffix("\r"))
    return lf.collect()


def line_starts(length: pl.Expr) -> pl.Expr:
    """Byte offset in `Block.data` of each line of `Block.lines`, from the lines' byte
    ``length`` (in file order, all lines of the block); right in a `Block.plain` block."""
    return (length + 1).cum_sum() - length - 1


def at_line_end(buf: bytes, limit: int) -> int:
    """A cut for parsers without state between lines: after the last whole line."""
    return limit


def _limit(buf: bytes, lookahead: int) -> int:
    """Largest cut offset that leaves ``lookahead`` whole lines after it (-1: none)."""
    end = buf.rfind(b"\n")
    for _ in range(lookahead):
        if end < 0:
            return -1
        end = buf.rfind(b"\n", 0, end)
    return end + 1 if end >= 0 else (0 if lookahead else -1)


def _head_lines(buf: bytes, n: int) -> bytes:
    """The first ``n`` lines of ``buf`` (whole lines; fewer at the end of the data)."""
    end = 0
    for _ in range(n):
        nl = buf.find(b"\n", end)
        if nl < 0:
            return buf
        end = nl + 1
    return buf[:end]


class Blocks:
    """Iterate over the blocks of ``path`` in file order (none for an empty file); see the
    module doc. ``repaired`` tells, once iterated, whether any invalid UTF-8 was replaced."""

    def __init__(
        self, path: Path, cut: Cut = at_line_end, lookahead: int = 0, chunk_bytes: int = 0
    ) -> None:
        self.path, self.cut, self.lookahead = path, cut, lookahead
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.repaired = False

    def _block(self, data: bytes, first_line: int, ahead: bytes, last: bool) -> Block:
        clean = _utf8(data)
        self.repaired = self.repaired or clean is not data
        return Block(clean, first_line, _utf8(ahead), last)

    def __iter__(self) -> Iterator[Block]:
        size = self.chunk_bytes
        pending = b""
        line_no = 1
        with open(self.path, "rb") as f:
            left = os.fstat(f.fileno()).st_size  # reads never ask for much more than this
            want = size
            while True:
                ask = min(want, max(left, 0) + 1)
                data = f.read(ask)
                left -= len(data)
                buf = pending + data if pending else data
                if len(data) < ask:  # end of file: the rest is the last block
                    if buf:
                        yield self._block(buf, line_no, b"", True)
                    return
                limit = _limit(buf, self.lookahead)
                at = self.cut(buf, limit) if limit > 0 else -1
                if at <= 0:
                    pending, want = buf, want * 2
                    continue
                pending, want = buf[at:], size
                done = left <= 0 and not pending  # the file ends at this cut: the last block
                block = self._block(buf[:at], line_no, _head_lines(pending, self.lookahead), done)
                yield block
                if done:
                    return
                line_no += block.n_lines


class Rows:
    """Finished rows of a chunked parse: handed to ``ctx.sink`` block by block, or kept
    and returned at the end when the context has no sink.

    A table is handed over the first time a block has it, even empty (the store then
    creates it, as it would for a whole-file parse returning it empty); after that only
    non-empty frames go. `tables` is what `ParseResult.tables` gets: nothing once rows
    were streamed, else the kept rows, or ``empty`` when no block had any table.
    """

    def __init__(self, ctx: base.ParseContext, declared: Mapping[str, base.Table]) -> None:
        self._sink = ctx.sink
        self._declared = declared
        self._kept: dict[str, list[pl.DataFrame]] = {}
        self._sent: set[str] = set()

    def put(self, frames: Mapping[str, pl.DataFrame | pl.LazyFrame]) -> None:
        """One block's rows per table (tables in the order a whole-file parse lists them)."""
        for name, frame in frames.items():
            df = self._declared[name].conform(frame).collect()
            if self._sink is None:
                self._kept.setdefault(name, []).append(df)
            elif df.height or name not in self._sent:
                self._sink(name, df)
                self._sent.add(name)

    def tables(self, empty: Mapping[str, pl.DataFrame] | None = None) -> dict[str, pl.DataFrame]:
        """The kept rows (nothing when streamed); ``empty``: the tables a whole-file parse
        returns when there are no rows at all."""
        if self._sent:
            return {}
        if not self._kept:
            return {n: self._declared[n].conform(f).collect() for n, f in (empty or {}).items()}
        return {name: pl.concat(frames) for name, frames in self._kept.items()}
