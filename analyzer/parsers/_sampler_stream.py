"""Sampler files chunk by chunk: typed fields for well-formed lines, text for the rest.

Used by the cgroup, meminfo and proc_vmstat parsers (format in :mod:`._sampler`). A file
is read in chunks of whole lines (:data:`CHUNK_BYTES`; a file under
:data:`MIN_STREAM_BYTES` is one chunk). A chunk whose bytes are plain printable ASCII
(newline the only control byte, none of the parser's ``forbid`` bytes, no line over
``max_line_bytes``) is *clean*: polars' CSV reader splits all of its lines at single
spaces in one call (:func:`fields`), one typed row per line, and the parser keeps the rows
whose fields pass its checks. Every other line - and every line of a chunk that is not
clean - is a *rest* line: :func:`text_lines` gives it as text, exactly as
``_read.read_lines`` would (invalid UTF-8 replaced, NUL bytes and trailing CRs removed), for
the parser's regular line-by-line expressions. Both paths together see every line once.

The sampler prefix (``<epoch> <path>``) repeats over the lines of one record, so it is
checked and converted once per run of equal prefixes (:func:`prefix_runs`), not per line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _sampler as smp
from analyzer.parsers.base import Coverage, ParseContext, Table

Sink = Callable[[str, pl.DataFrame], None]

#: Bytes per chunk: amortises per-call costs; a chunk, its copies and its rows stay small.
CHUNK_BYTES = 12 << 20
#: Files smaller than this are read as one chunk and their rows returned, not streamed.
MIN_STREAM_BYTES = 8 << 20

NL, SP, COLON = 10, 32, 58


class Chunk:
    """Whole lines of a file: ``mem[:size]`` (``buf`` is a numpy view of it);
    ``first_line`` is the 1-based number of its first line; ``last``: the file's last
    chunk, whose last line is ``unterminated`` when the file ends without a newline.
    Line offsets are computed only when asked for (the fast path rarely needs them)."""

    def __init__(
        self, mem: bytearray, size: int, first_line: int, unterminated: bool, last: bool
    ) -> None:
        self.mem, self.size = mem, size
        self.first_line, self.unterminated, self.last = first_line, unterminated, last
        self.buf = np.frombuffer(mem, dtype=np.uint8, count=size)
        self.n = int(np.count_nonzero(self.buf == NL)) + unterminated
        self._starts: np.ndarray | None = None

    @property
    def starts(self) -> np.ndarray:
        """Byte offset of each line."""
        if self._starts is None:
            ends = np.flatnonzero(self.buf == NL)
            self._starts = np.concatenate(([0], ends[: self.n - 1] + 1)).astype(np.int64)
        return self._starts

    @property
    def lens(self) -> np.ndarray:
        """Length of each line without its newline."""
        ends = np.append(self.starts[1:] - 1, self.size - (not self.unterminated))
        return ends - self.starts

    def line_of(self, offsets: np.ndarray) -> np.ndarray:
        """Index of the line holding each byte offset."""
        return np.searchsorted(self.starts, offsets, side="right") - 1

    def line_nos(self, idx: np.ndarray | None = None) -> pl.Series:
        """1-based line numbers (UInt32) of lines ``idx`` (all lines when None)."""
        nos = np.arange(self.n, dtype=np.int64) if idx is None else idx.astype(np.int64)
        return pl.Series("line_no", nos + self.first_line, dtype=pl.UInt32)

    def longest_ok(self, max_line_bytes: int) -> bool:
        """No line longer than ``max_line_bytes`` (a few ``rfind`` calls, no line index)."""
        pos = 0
        while self.size - pos > max_line_bytes:
            nl = self.mem.rfind(b"\n", pos, pos + max_line_bytes + 1)
            if nl < 0:
                return False
            pos = nl + 1
        return True


def chunk_size(path: Path) -> int:
    """Chunk size for ``path``: :data:`CHUNK_BYTES`, or the whole file when it is small."""
    size = path.stat().st_size
    return CHUNK_BYTES if size >= MIN_STREAM_BYTES else size + 1


def streams(path: Path) -> bool:
    """True when ``path`` is read in several chunks (rows go to ``ctx.sink`` if set)."""
    return path.stat().st_size >= MIN_STREAM_BYTES


def iter_chunks(path: Path, chunk_bytes: int) -> Iterator[Chunk]:
    """Read ``path`` in chunks of whole lines (a line longer than a chunk grows it)."""
    line, carry = 1, b""
    with open(path, "rb", buffering=0) as f:
        while True:
            data = bytearray(len(carry) + chunk_bytes)
            data[: len(carry)] = carry
            view = memoryview(data)
            got = len(carry)
            while got < len(data) and (n := f.readinto(view[got:])):
                got += n
            del view
            final = got < len(data)
            if got == 0:
                return
            cut = got if final else data.rfind(b"\n", 0, got) + 1
            if cut == 0:  # no newline in a whole block: a longer block
                carry, chunk_bytes = bytes(data[:got]), chunk_bytes * 2
                continue
            carry = bytes(data[cut:got])
            chunk = Chunk(data, cut, line, data[cut - 1] != NL, final)
            yield chunk
            line += chunk.n
            if final:
                return


def is_clean(chunk: Chunk, max_line_bytes: int, forbid: bytes = b"") -> bool:
    """Printable ASCII only (newline the only control byte), none of ``forbid``, no line
    longer than ``max_line_bytes``: the conditions for :func:`fields`."""
    buf, mem = chunk.buf, chunk.mem
    if int(buf.max()) >= 127 or np.count_nonzero(buf < SP) != chunk.n - chunk.unterminated:
        return False
    if any(mem.find(bytes([b]), 0, chunk.size) >= 0 for b in forbid):
        return False
    return chunk.longest_ok(max_line_bytes)


def fields(
    chunk: Chunk, schema: dict[str, pl.DataType], pad_after_colon: bool = False
) -> tuple[pl.DataFrame, np.ndarray] | None:
    """One row per line of a clean chunk: the line split at single spaces into ``schema``
    (missing and empty fields are NULL, fields past the schema are dropped: give the
    schema one spare last column to see them). None when the rows do not map one to one
    to the lines (the caller then reads the chunk as text).

    Also returns a mask of the lines that are not in single-space shape, whatever their
    fields say: lines with a run of spaces (with ``pad_after_colon``, a run right after a
    ``:`` counts as one space: ``/proc/meminfo`` pads its values).
    """
    buf = chunk.buf
    bad = np.zeros(chunk.n, dtype=bool)
    if pad_after_colon:
        dup = _second_spaces(buf)
        run = np.flatnonzero(dup[1:] & ~dup[:-1])  # first space of each run of 2+
        wrong = run[(run == 0) | (buf[np.maximum(run - 1, 0)] != COLON)]
        if wrong.size:
            bad[chunk.line_of(wrong)] = True
        data = buf[~dup].tobytes()
    else:
        data = bytes(memoryview(chunk.mem)[: chunk.size])
        if _has_double_space(chunk):
            bad[chunk.line_of(np.flatnonzero(_second_spaces(buf)))] = True
    frame = pl.read_csv(
        data,
        has_header=False,
        separator=" ",
        quote_char=None,
        schema=schema,
        truncate_ragged_lines=True,
        missing_columns="insert",
        extra_columns="ignore",
        ignore_errors=True,
        raise_if_empty=False,
    )
    return (frame, bad) if frame.height == chunk.n else None


def _has_double_space(chunk: Chunk) -> bool:
    """Whether two spaces follow each other anywhere (byte pairs compared as uint16)."""
    for at in (0, 1):
        pairs = np.frombuffer(chunk.mem, dtype=np.uint16, count=(chunk.size - at) // 2, offset=at)
        if np.any(pairs == 0x2020):
            return True
    return False


def _second_spaces(buf: np.ndarray) -> np.ndarray:
    """Mask of the spaces that follow a space."""
    sp = buf == SP
    dup = np.zeros_like(sp)
    np.logical_and(sp[1:], sp[:-1], out=dup[1:])
    return dup


def prefix_runs(frame: pl.DataFrame, **by_path: pl.Expr) -> tuple[pl.Series, pl.DataFrame]:
    """The sampler prefix of every row of :func:`fields` (columns ``e`` and ``p``), checked
    once per run of rows with equal prefix; path facts computed once per distinct path.

    Returns ``run`` (UInt32 per row: its run) and one row per run with ``s_ok`` (a sampler
    prefix), ``ts`` (UTC) and the ``by_path`` columns, expressions over ``path``,
    ``path_dir`` and ``path_file`` (as :func:`._sampler.split_sampler` gives them).
    """
    e, p = frame.get_column("e"), frame.get_column("p")
    new_e = (e != e.shift(1)).fill_null(True)
    first = new_e | (p != p.shift(1)).fill_null(True)
    run = (first.cum_sum() - 1).cast(pl.UInt32)
    ep = pl.col("e")  # once per distinct run of epochs
    epochs = (
        frame.select("e")
        .filter(new_e)
        .select(e_ok=ep.str.contains(smp.EPOCH_TOKEN).fill_null(False), ts=smp.epoch_to_ts(ep))
    )
    heads = frame.select("p").filter(first)
    path = pl.col("p").str.replace_all(r"\040", " ", literal=True)
    paths = (  # once per distinct path
        heads.select(pl.col("p").unique())
        .with_columns(path=path, p_ok=pl.col("p").str.starts_with("/").fill_null(False))
        .with_columns(smp.path_parts(pl.col("path")))
        .select("p", "p_ok", **by_path)
    )
    at = (new_e.cum_sum() - 1).filter(first)
    runs = heads.with_columns(
        epochs.get_column("e_ok").gather(at), epochs.get_column("ts").gather(at)
    )
    runs = runs.join(paths, on="p", how="left", maintain_order="left")
    return run, runs.with_columns(s_ok=pl.col("e_ok") & pl.col("p_ok").fill_null(False))


def text_lines(chunk: Chunk, idx: np.ndarray | None = None, clean: bool = True) -> pl.DataFrame:
    """``line_no`` (UInt32) and ``line`` (String) of lines ``idx`` (all when None), exactly
    as ``_read.read_lines`` gives them. ``clean``: the chunk passed :func:`is_clean`."""
    if idx is None:
        idx = np.arange(chunk.n, dtype=np.int64)
    if idx.size == 0:
        return pl.DataFrame(schema={"line_no": pl.UInt32, "line": pl.String})
    if clean:  # ASCII: the lines' bytes gathered by numpy, read as one column, no Python loop
        starts = chunk.starts[idx]
        lens = chunk.lens[idx] + 1  # with the newline
        if chunk.unterminated and idx[-1] == chunk.n - 1:
            lens[-1] -= 1
        ends = np.cumsum(lens)
        pos = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(starts - (ends - lens), lens)
        text = pl.read_csv(
            chunk.buf[pos].tobytes(),
            has_header=False,
            separator="\x01",  # a clean chunk has no control byte but the newline
            quote_char=None,
            schema={"line": pl.String()},
            empty_string_is_null=False,
            raise_if_empty=False,
        ).get_column("line")
        return pl.DataFrame({"line_no": chunk.line_nos(idx), "line": text})
    text = chunk.buf.tobytes().decode("utf-8", "replace")
    lines = text.split("\n")
    if not chunk.unterminated:
        lines.pop()
    out = pl.DataFrame({"line_no": chunk.line_nos(), "line": lines})
    if "\x00" in text:
        out = out.with_columns(pl.col("line").str.replace_all("\x00", "", literal=True))
    if "\r" in text:  # scan_lines drops one CR before a newline, read_lines one more
        out = out.with_columns(pl.col("line").str.strip_suffix("\r").str.strip_suffix("\r"))
    return out if idx.size == chunk.n else out[idx]


def key_value_rows(
    chunk: Chunk,
    ctx: ParseContext,
    cov: Coverage,
    *,
    schema: dict[str, pl.DataType],
    file: str,
    key_re: str,
    forbid: bytes,
    columns: dict[str, pl.Expr],
    rest: Callable[[pl.LazyFrame, ParseContext, Coverage], pl.DataFrame],
    extra_ok: Callable[[pl.DataFrame], pl.Series] | None = None,
    pad_after_colon: bool = False,
) -> pl.DataFrame:
    """Rows of one chunk of a ``<key> <value>`` sampler file (meminfo, /proc/vmstat).

    Lines of the exact canonical shape — ``<epoch> <path>/[nodeN/]<file> <key> <value>``,
    key matching ``key_re``, nothing after the value, ``extra_ok`` true — are typed from
    their CSV fields (``schema``: e, p, k, v, x and any extra field) and become
    ``line_no, ts, node`` plus ``columns`` (expressions over the fields). Every other line
    goes through ``rest``, the parser's regular expressions. Result ordered by line_no;
    every line counted into ``cov``.
    """
    clean = is_clean(chunk, ctx.max_line_bytes, forbid=forbid)
    got = fields(chunk, schema, pad_after_colon=pad_after_colon) if clean else None
    if got is None:
        return rest(text_lines(chunk, clean=clean).lazy(), ctx, cov)
    f, bad = got
    run, runs = prefix_runs(
        f,
        file_ok=pl.col("path_file").eq(file),
        node=pl.col("path").str.extract(rf"/node(\d+)/{file}$", 1).cast(pl.Int32, strict=False),
    )
    keys = f.get_column("k").unique().drop_nulls()
    good_keys = keys.filter(keys.str.contains(key_re))
    ok = (
        (runs.get_column("s_ok") & runs.get_column("file_ok")).gather(run)
        & f.get_column("k").is_in(good_keys.implode())
        & f.get_column("v").is_not_null()
        & f.get_column("x").is_null()
        & pl.Series(~bad)
    )
    if extra_ok is not None:
        ok = ok & extra_ok(f)
    ok = ok.fill_null(False)
    at = run.filter(ok)
    fast = f.filter(ok).select(
        chunk.line_nos(np.flatnonzero(ok.to_numpy())),
        runs.get_column("ts").gather(at),
        runs.get_column("node").gather(at),
        **columns,
    )
    cov.total += fast.height
    cov.parsed += fast.height
    if fast.height == chunk.n:
        return fast
    other = text_lines(chunk, np.flatnonzero(~ok.to_numpy()))
    return pl.concat([fast, rest(other.lazy(), ctx, cov)]).sort("line_no")


class Output:
    """Where a parser's finished rows go: to ``ctx.sink`` chunk by chunk when the file
    streams and the caller gave a sink, else kept for ``ParseResult.tables``.

    Tables are handed over in declared order, empty ones too (once), but only once a line
    was parsed: a file that then fails with ``ParseError`` has sent nothing.
    """

    def __init__(self, path: Path, sink: Sink | None, tables: dict[str, Table]) -> None:
        self.tables = tables
        self.sink = sink if streams(path) else None
        self.kept: dict[str, list[pl.DataFrame]] = {name: [] for name in tables}
        self.sent: set[str] = set()

    def emit(self, frames: dict[str, pl.DataFrame | pl.LazyFrame], parsed: int) -> None:
        """Conform and hand over ``frames`` (table -> rows); ``parsed``: lines parsed so far."""
        for name, table in self.tables.items():
            if name not in frames:
                continue
            df = table.conform(frames[name]).collect()
            if self.sink is None:
                self.kept[name].append(df)
            elif df.height or (parsed and name not in self.sent):
                self.sink(name, df)
                self.sent.add(name)

    def result(self) -> dict[str, pl.DataFrame | pl.LazyFrame]:
        """The tables for ``ParseResult`` (none when rows went to the sink, which now gets
        the tables it has not seen, empty)."""
        if self.sink is not None:
            for name, table in self.tables.items():
                if name not in self.sent:
                    self.sink(name, table.conform(pl.DataFrame()).collect())
            return {}
        return {
            name: pl.concat(frames) if frames else table.conform(pl.DataFrame())
            for (name, table), frames in zip(self.tables.items(), self.kept.values(), strict=True)
        }
