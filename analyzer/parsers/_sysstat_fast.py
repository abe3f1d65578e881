"""Fast path for big column-aligned sysstat files: numpy finds the rows, polars' CSV reader types them.

A data row of a right-aligned sysstat table (mpstat, iostat, sar) is exactly as wide as
its header and has a blank at the first byte of every field slot (values are narrower
than their slot). For a chunk of the file (``CHUNK_BYTES``, cut at a newline) numpy finds
the line boundaries, keeps the lines of a known width whose slot-start bytes are blanks
(the per-row boundary check), writes a ``;`` into each of those blanks (and into the
time's colons), turns every other line into a ``#`` comment, and polars' multi-threaded
CSV reader parses all kept rows of the chunk in one call against a typed schema.

Everything else goes back to the tool's regular parser as *rest* lines (banners,
headers, blank lines, ``Average:`` blocks, rows that fail the boundary check or whose
fields do not parse: the whitespace-split fallback), so the two paths together see every
line exactly once. Work per chunk is a fixed number of vectorized numpy / polars calls;
no Python code runs per line except for rest lines (a few per report).

Line numbers are 1-based and count ``\\n``; a last line without a newline is *unterminated*
(never a fast row: the tool parser decides whether it was cut).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

#: Bytes read per chunk. Big enough to amortize per-call overhead, small enough that a
#: chunk, its copy and its typed rows stay far below the memory budget.
CHUNK_BYTES = 12 << 20
#: Files smaller than this are parsed by the regular path only (one code path for the
#: small files that tests and demos use; the fast path pays off on big files).
MIN_FAST_BYTES = 8 << 20

NL, SP, SEMI, HASH, COLON = 10, 32, 59, 35, 58


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
    """Read ``path`` in chunks of whole lines (the last one may be unterminated).

    Each chunk owns a fresh writable buffer (``readinto``, no intermediate copies).
    """
    line = 1
    carry = b""
    with open(path, "rb", buffering=0) as f:
        while True:
            data = bytearray(len(carry) + chunk_bytes)
            data[: len(carry)] = carry
            view = memoryview(data)
            got = len(carry)
            while got < len(data) and (n := f.readinto(view[got:])):
                got += n
            final = got < len(data)
            if got == 0:
                return
            cut = got if final else data.rfind(b"\n", 0, got) + 1
            if cut == 0:  # no newline in a whole block: a longer block
                carry = bytes(data[:got])
                chunk_bytes *= 2
                continue
            carry = bytes(data[cut:got])
            del view
            buf = np.frombuffer(data, dtype=np.uint8, count=cut)
            nl = np.flatnonzero(buf == NL)
            unterminated = nl.size == 0 or nl[-1] != cut - 1
            ends = np.append(nl, cut) if unterminated else nl
            starts = np.empty_like(ends)
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
            yield Chunk(buf, line, starts, ends - starts, unterminated)
            line += len(ends)
            if final:
                return


def blank_at(chunk: Chunk, rows: np.ndarray, offsets: Sequence[int], byte: int = SP) -> np.ndarray:
    """Mask over ``rows`` (line indexes): every ``offsets`` byte of the line is ``byte``."""
    if rows.size == 0 or not offsets:
        return np.ones(rows.size, dtype=bool)
    idx = chunk.starts[rows][:, None] + np.asarray(offsets, dtype=np.int64)[None, :]
    return (chunk.buf[idx] == byte).all(axis=1)


def candidates(chunk: Chunk, width: int) -> np.ndarray:
    """Indexes of the terminated lines exactly ``width`` bytes long with no ``;`` in them."""
    lens = chunk.lens
    if chunk.unterminated:
        lens = lens.copy()
        lens[-1] = -1
    rows = np.flatnonzero(lens == width)
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
