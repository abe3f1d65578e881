"""Big column-aligned sysstat files, chunk by chunk: blocks of whole lines and the lines in them.

:func:`read_blocks` reads a file in blocks of whole lines (``CHUNK_BYTES``, cut after a
newline, each in a fresh buffer) and :func:`chunk_of` finds their lines with numpy (or
takes the line offsets an earlier pass found); a :class:`Chunk` hands any subset of its
lines to polars as text (:meth:`Chunk.lines`, with NUL bytes and a final CR removed, as
:func:`._read.read_lines` does). The big-file paths of mpstat (:mod:`._mpstat_fast`) and
iostat (:mod:`._iostat_fast`) type their data rows from these bytes with numpy
(:mod:`._sysstat_swar`) and hand every other line (banners, headers, blank lines,
``Average:`` blocks, rows that fail a check) to the tool's regular parser, so each line
is read exactly once.

Also here, for dmon's block reader: the CSV route for right-aligned rows
(:func:`candidates`, :func:`blank_at`, :func:`read_rows`): the blanks at slot starts become
``;``, every other line a ``#`` comment, and polars' CSV reader types the rows.

Line numbers are 1-based and count ``\\n``; a last line without a newline is *unterminated*
(never a fast row: the tool parser decides whether it was cut).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

#: Bytes read per chunk. Big enough to amortize per-call overhead, small enough that a
#: chunk, its copy and its typed rows stay far below the memory budget.
CHUNK_BYTES = 12 << 20
#: mpstat reads a file of a few chunks in chunks of a quarter of it, at least this big
#: (:func:`chunk_bytes`): the worker threads start on the first one sooner, and each
#: chunk's arrays (fresh pages to fault in) are smaller.
SMALL_CHUNK_BYTES = 4 << 20
#: Files smaller than this are parsed by the regular path only (one code path for the
#: small files that tests and demos use; the fast path pays off on big files).
MIN_FAST_BYTES = 1 << 20

NL, SP, SEMI, HASH, COLON = 10, 32, 59, 35, 58
_FEW_LINES = 20_000


@dataclass
class Chunk:
    """A run of whole lines of a file. ``buf`` is read-only; ``starts``/``lens`` index it
    (lens exclude the newline); ``first_line`` is the 1-based number of line 0;
    ``unterminated`` is True when the last line has no newline (end of file)."""

    buf: np.ndarray
    first_line: int
    starts: np.ndarray
    lens: np.ndarray
    unterminated: bool

    @property
    def n(self) -> int:
        return len(self.starts)

    def line_nos(self, idx: np.ndarray) -> np.ndarray:
        return idx.astype(np.int64) + self.first_line

    def lines(self, idx: np.ndarray) -> pl.DataFrame:
        """``line_no`` (UInt32) and ``line`` (String; NUL bytes and a final CR removed)
        of the lines ``idx``, built without a Python loop."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return pl.DataFrame(schema={"line_no": pl.UInt32, "line": pl.String})
        if idx.size <= _FEW_LINES:  # a few lines: plain Python beats building Arrow arrays
            mv = memoryview(self.buf)
            text = [
                str(mv[a : a + n], "utf-8", "replace").replace("\x00", "").removesuffix("\r")
                for a, n in zip(self.starts[idx].tolist(), self.lens[idx].tolist(), strict=True)
            ]
            return pl.DataFrame(
                {
                    "line_no": pl.Series(self.line_nos(idx), dtype=pl.UInt32),
                    "line": pl.Series(text, dtype=pl.String),
                }
            )
        offsets = np.empty(self.n + 1, dtype=np.int64)
        offsets[:-1] = self.starts
        offsets[-1] = self.starts[-1] + self.lens[-1]
        # Element i spans [start_i, start_i+1) (newline included); cut to its length below.
        data = pa.py_buffer(self.buf)
        arr = pa.Array.from_buffers(pa.large_binary(), self.n, [None, pa.py_buffer(offsets), data])
        lines = pl.from_arrow(arr.take(pa.array(idx)))
        assert isinstance(lines, pl.Series)
        lens = pl.Series(self.lens[idx])
        text = (
            pl.DataFrame({"b": lines, "n": lens})
            .select(pl.col("b").bin.slice(0, pl.col("n")).cast(pl.String).alias("line"))
            .get_column("line")
        )
        return pl.DataFrame(
            {"line_no": pl.Series(self.line_nos(idx), dtype=pl.UInt32), "line": text}
        ).with_columns(
            pl.col("line").str.replace_all("\x00", "", literal=True).str.strip_suffix("\r")
        )


def iter_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """Read ``path`` in chunks of whole lines (the last one may be unterminated)."""
    line = 1
    for buf in read_blocks(path, chunk_bytes):
        chunk = chunk_of(buf, line)
        line += chunk.n
        yield chunk


def chunk_bytes(size: int) -> int:
    """Bytes per chunk for a file of ``size`` bytes (see `SMALL_CHUNK_BYTES`)."""
    return min(CHUNK_BYTES, max(SMALL_CHUNK_BYTES, size // 4))


#: mpstat reads a file up to this size in one go (one copy of its bytes, no separate
#: pass to check UTF-8) and cuts it into blocks in memory (:func:`split_blocks`).
ONE_READ_BYTES = 64 << 20


def workers(size: int) -> int:
    """Worker threads for a file of ``size`` bytes: one up to `ONE_READ_BYTES` (with this
    thread, two busy: each more thread costs its own fresh memory, a good part of the time
    of a file of a few chunks, and shares a loaded machine's cores), else two."""
    return 1 if size <= ONE_READ_BYTES else 2


def read_all(path: Path) -> np.ndarray:
    """The bytes of ``path`` in one fresh buffer."""
    size = path.stat().st_size
    data = np.empty(size, dtype=np.uint8)
    view = memoryview(data)
    got = 0
    with open(path, "rb", buffering=0) as f:
        while got < size and (n := f.readinto(view[got:])):
            got += n
    del view
    return data[:got]


def split_blocks(data: np.ndarray, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """:func:`read_blocks` of bytes in memory: blocks of whole lines (views of ``data``;
    the last may end without a newline), about ``chunk_bytes`` each."""
    start = 0
    while start < data.size:
        end = min(start + chunk_bytes, data.size)
        if end < data.size:
            cut = _after_last_newline(data[start:end])
            if cut:
                end = start + cut
            else:  # no newline in a whole block: up to the next one
                nl = np.flatnonzero(data[end:] == NL)
                end = end + int(nl[0]) + 1 if nl.size else data.size
        yield data[start:end]
        start = end


def utf8(data: np.ndarray) -> bool:
    """Whether bytes of whole lines are valid UTF-8 (a newline never cuts a character)."""
    if not data.size or int(data.max()) < 0x80:
        return True
    try:
        codecs.utf_8_decode(data, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def read_blocks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """The bytes of ``path`` in blocks of whole lines (the last may end without a newline).

    Each block owns a fresh buffer (``readinto``, no intermediate copies).
    """
    carry = b""
    with open(path, "rb", buffering=0) as f:
        while True:
            data = np.empty(len(carry) + chunk_bytes, dtype=np.uint8)
            data[: len(carry)] = np.frombuffer(carry, dtype=np.uint8)
            view = memoryview(data)
            got = len(carry)
            while got < len(data) and (n := f.readinto(view[got:])):
                got += n
            del view
            final = got < len(data)
            if got == 0:
                return
            cut = got if final else _after_last_newline(data[:got])
            if cut == 0:  # no newline in a whole block: a longer block
                carry = data[:got].tobytes()
                chunk_bytes *= 2
                continue
            carry = data[cut:got].tobytes()
            yield data[:cut]
            if final:
                return


def _after_last_newline(data: np.ndarray) -> int:
    """Offset just past the last newline of ``data`` (0 when there is none)."""
    tail = 1 << 16
    while True:
        nl = np.flatnonzero(data[-tail:] == NL)
        if nl.size:
            return int(nl[-1]) + max(data.size - tail, 0) + 1
        if tail >= data.size:
            return 0
        tail *= 4


def chunk_of(buf: np.ndarray, first_line: int = 1, starts: np.ndarray | None = None) -> Chunk:
    """A block of whole lines (:func:`read_blocks`) as a `Chunk`: numpy finds the lines,
    unless their ``starts`` (offsets, from an earlier pass over the same block) are given."""
    unterminated = buf.size == 0 or buf[-1] != NL
    if starts is None:
        nl = newlines(buf)
        ends = np.append(nl, buf.size) if unterminated else nl
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
    else:
        starts = starts.astype(np.int64)
        ends = np.empty_like(starts)
        ends[:-1] = starts[1:] - 1
        ends[-1] = buf.size if unterminated else buf.size - 1
    return Chunk(buf, first_line, starts, ends - starts, bool(unterminated))


def newlines(buf: np.ndarray, step: int = 1 << 18) -> np.ndarray:
    """Offsets of the newlines of ``buf``, a quarter MiB at a time (a mask of the whole
    block would be as big as the block: fresh pages to fault in, twice the time)."""
    if buf.size <= step:
        return np.flatnonzero(buf == NL)
    parts = [np.flatnonzero(buf[i : i + step] == NL) + i for i in range(0, buf.size, step)]
    return np.concatenate(parts)


def blank_at(chunk: Chunk, rows: np.ndarray, offsets: Sequence[int], byte: int = SP) -> np.ndarray:
    """Mask over ``rows`` (line indexes): every ``offsets`` byte of the line is ``byte``."""
    if rows.size == 0 or not offsets:
        return np.ones(rows.size, dtype=bool)
    idx = chunk.starts[rows][:, None] + np.asarray(offsets, dtype=np.int64)[None, :]
    return (chunk.buf[idx] == byte).all(axis=1)


def candidates(chunk: Chunk, width: int, semicolons: bool = True) -> np.ndarray:
    """Indexes of the terminated lines exactly ``width`` bytes long (with ``semicolons``
    True: and no ``;`` in them, for `read_rows`)."""
    lens = chunk.lens
    if chunk.unterminated:
        lens = lens.copy()
        lens[-1] = -1
    rows = np.flatnonzero(lens == width)
    if not semicolons:
        return rows
    semi = np.flatnonzero(chunk.buf == SEMI)
    if semi.size:
        bad = np.searchsorted(chunk.starts, semi, side="right") - 1
        rows = np.setdiff1d(rows, bad, assume_unique=False)
    return rows


def read_rows(
    chunk: Chunk,
    rows: np.ndarray,
    seps: Sequence[int],
    schema: dict[str, pl.DataType],
    all_end: int | None = None,
    decimal_comma: bool = False,
    row_seps: np.ndarray | None = None,
) -> tuple[pl.DataFrame, np.ndarray]:
    """CSV-parse lines ``rows`` (sorted line indexes) split at byte offsets ``seps``.

    With ``all_end``, a key slot ending there that reads ``all`` is rewritten `` -1``.
    ``row_seps`` (one offset per row of ``rows``) adds a separator whose place varies by
    row (after a left-aligned name).
    Returns the typed frame (one row per kept line, in order) and the line indexes of its
    rows. Lines right after a blank line are not kept (the blank's newline is overwritten
    to comment it out, which joins the two lines); like every line not in the result they
    go back to the caller's rest lines.
    """
    keep = np.zeros(chunk.n, dtype=bool)
    keep[rows] = True
    blank = chunk.lens == 0
    keep[1:] &= ~blank[:-1]
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        return pl.DataFrame(schema=schema), kept
    w = chunk.buf.copy()
    w[chunk.starts[~keep & ~blank]] = HASH
    w[chunk.starts[blank]] = HASH
    s = chunk.starts[kept]
    w[(s[:, None] + np.asarray(seps, dtype=np.int64)[None, :]).ravel()] = SEMI
    if row_seps is not None:
        w[s + row_seps[keep[rows]]] = SEMI
    if all_end is not None:
        a = s[
            (w[s + all_end - 3] == ord("a"))
            & (w[s + all_end - 2] == ord("l"))
            & (w[s + all_end - 1] == ord("l"))
        ]
        w[a + all_end - 3] = SP
        w[a + all_end - 2] = ord("-")
        w[a + all_end - 1] = ord("1")
    # Only the span from the first to the last kept row: nothing outside it is data, and
    # a buffer ending in a comment without newline makes polars warn on stderr.
    first, last = s[0], chunk.starts[kept[-1]] + chunk.lens[kept[-1]] + 1
    frame = pl.read_csv(
        w[first:last].tobytes(),
        has_header=False,
        separator=";",
        quote_char=None,
        comment_prefix="#",
        schema=schema,
        ignore_errors=True,
        truncate_ragged_lines=True,
        decimal_comma=decimal_comma,
        raise_if_empty=False,
    )
    del w
    if frame.height != kept.size:  # cannot happen by construction; never guess
        raise RuntimeError(f"fast path: {frame.height} rows for {kept.size} lines")
    return frame, kept
