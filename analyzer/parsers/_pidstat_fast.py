"""pidstat, big text files: data rows typed by numpy, every other line by the regular parser.

Used by :func:`analyzer.parsers.pidstat.parse` for text files of at least `MIN_FAST_BYTES`
(the capture's ``pidstat -u -r -d -w -h [-H]``). The file is read in blocks of whole lines
(:func:`._sysstat_fast.read_blocks`); in each block numpy recognises three kinds of line:

- **header copies**: byte for byte a header of the file's head (:mod:`._pidstat_layout`),
  except for its leading ``HH:MM:SS`` when it starts with one (then a valid 24-hour time);
- **blank lines** (empty);
- **data rows** under a header copy, typed by :mod:`._pidstat_rows` (a time, one
  right-aligned number per column of the header, a command name).

Everything else (banners, other headers, ``Average:``, rows with a sign, a comma, a tab,
``nan``, NUL bytes, trailing blanks, rows under a header of another layout, a last line
without newline...) goes to the regular classifier, together with the header copy that
governs each such line, so that both paths together read every line exactly once and the
regular parser sees the same header above each of its rows as in the whole file. A line
that might be a header the head did not show (it ends with ``Command``, with a blank or a
byte that is not printable ASCII, or holds a NUL) stops the fast path until the next
header copy. The regular classifier must agree on each header of the head (it classifies
their first line with the other lines; when these are only banners and header copies, the
same patterns do it in Python: ``_pidstat_layout.classify_few``), else the whole file
takes the regular path, as does a file that is not valid UTF-8.

Blocks are recognised and typed (`_prepare`, optionally on `WORKERS` threads ahead of
this one: numpy releases the GIL), then finished in file order (`_finish`): line
numbers, rows above the block's first header (they belong to the previous block's last
header), the lines for the regular path and the patterns learned.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _pidstat_rows as pr
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers._pidstat_layout import Layout, classify_few, copies, layouts, maybe_headers
from analyzer.parsers._sampler import reason
from analyzer.parsers.base import Coverage, ParseContext

#: Files smaller than this take the regular path only.
MIN_FAST_BYTES = 1 << 20
#: Bytes read per block. Bigger blocks mean fewer parts to put together at the end (a
#: file of up to one block is typed into its final buffers); 12-16 MiB measured best on
#: a 24 h capture (4 MiB: +15 % CPU, 32 MiB: +50 %, cache misses).
CHUNK_BYTES = 16 << 20
#: Threads that read blocks ahead (0: each block in this thread, in turn). On the 2-core VM
#: two workers cost ~10-25 % more CPU (fresh pages in their malloc arenas) for less wall
#: time only on an idle machine; the pipeline already parses two files at a time.
WORKERS = 0

_LINES = {"line_no": pl.UInt32, "line": pl.String}


@dataclass
class Fast:
    """What :func:`read` hands back: ``lines``, the classified lines for the regular path
    (``dup`` marks header copies added only to govern them), ``rows``, the typed fast rows
    (``line_no``, ``seg``, ``block``, ``epoch``, ``ep``, ``sec``, ``hdr_sec``, values,
    ``command``), and ``human``: a fast row's text looks like ``--human`` output."""

    lines: pl.DataFrame
    rows: pl.DataFrame
    human: bool


@dataclass
class _Block:
    """A block as a worker left it: line masks, the last header mark at or above each
    line (-1 none), its layout (-2: a possible header of no layout) and time, the rows
    read per layout (``line`` relative to the block) and the patterns after it."""

    chunk: fast.Chunk
    copy: np.ndarray
    blank: np.ndarray
    usable: np.ndarray
    last: np.ndarray
    gov: np.ndarray
    gsec: np.ndarray
    done: np.ndarray
    rows: dict[int, list[pr.Rows]]
    pats: dict[int, list[pr.Pattern]]


@dataclass
class _State:
    """What carries from block to block: the next line number, the governing mark of the
    last line and its header's time, the last header copy (line number, text), header
    lines already handed to the regular path, patterns per layout and line counts."""

    line: int = 1
    gov: int = -1
    gov_sec: int = -1
    copy: tuple[int, str] | None = None
    added: set[int] = field(default_factory=set)
    pats: dict[int, list[pr.Pattern]] = field(default_factory=dict)
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("row", "hdr", "blank"), 0)
    )


def read(
    path: Path, ctx: ParseContext, cov: Coverage, head: str, classify: Callable
) -> Fast | None:
    """The fast path's rows and the other lines, classified; None when it does not apply
    (small file, no layout in the head, not valid UTF-8, the classifier disagrees about a
    header of the head). Lines it recognised (rows, blanks, header copies) go into ``cov``."""
    if path.stat().st_size < MIN_FAST_BYTES:
        return None
    lays = layouts(head, ctx)
    if not lays:
        return None
    st = _State(pats={k: [pr.Pattern.of(lay.ends)] for k, lay in enumerate(lays)})
    slow: list[pl.DataFrame] = []
    parts: dict[int, list[pr.Rows]] = {}

    def finish(fut: Future) -> bool:
        blk = fut.result()
        if blk is not None:
            slow.extend(_finish(blk, lays, st))
            for k, got in blk.rows.items():
                parts.setdefault(k, []).extend(got)
        return blk is not None

    valid = True
    with ThreadPoolExecutor(max_workers=WORKERS) if WORKERS else _Inline() as pool:
        pending: deque[Future] = deque()
        for buf in fast.read_blocks(path, CHUNK_BYTES):
            snapshot = {k: list(v) for k, v in st.pats.items()}
            pending.append(pool.submit(_prepare, buf, lays, snapshot, ctx.max_line_bytes))
            if len(pending) > WORKERS and not (valid := finish(pending.popleft())):
                break
        while valid and pending:
            valid = finish(pending.popleft())
    if not valid:
        return None  # not valid UTF-8: the regular path repairs it
    heads = [lay.line_no for lay in lays if lay.line_no not in st.added]
    texts = [lay.header for lay in lays if lay.line_no in heads]
    heads_df = pl.DataFrame({"line_no": heads, "line": texts}, schema=_LINES)
    lines = pl.concat([*slow, heads_df.with_columns(dup=pl.lit(True))]).sort("line_no")
    few = classify_few(lines.rows(), ctx) if lines.height <= 256 else None
    classified = classify(lines.lazy(), ctx, streaming=False) if few is None else few
    if few is None and not _agrees(classified, lays):  # (classify_few uses the same re)
        return None
    frames = [pr.frame(lays[k], got) for k, got in sorted(parts.items()) if got]
    human = any(h for _, h in frames)
    rows = _concat([f for f, _ in frames])
    if rows.height:  # segment: banners above the row
        banners = classified.filter(pl.col("banner").is_not_null())["line_no"]
        seg = banners.search_sorted(rows["line_no"], side="left").cast(pl.UInt32)
        rows = rows.with_columns(seg=seg, block=pl.lit(None, pl.UInt32))
    cov.total += sum(st.counts.values())
    cov.parsed += st.counts["row"]
    cov.add_structure("header", st.counts["hdr"])
    cov.add_structure("blank", st.counts["blank"])
    return Fast(classified, rows, human)


class _Inline:
    """An executor without threads (``WORKERS = 0``): runs each call at once."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable, *args: object) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except Exception as e:
            fut.set_exception(e)
        return fut


def _agrees(classified: pl.DataFrame, lays: list[Layout]) -> bool:
    """Whether the regular classifier reads each layout's header as the layout says."""
    want = {lay.line_no: (lay.sig, lay.hdr_tok) for lay in lays}
    got = classified.filter(pl.col("line_no").is_in(list(want)))
    header = reason("structure", "header")
    return got.height == len(want) and all(
        why == header and want[n] == (sig, tok)
        for n, why, sig, tok in got.select("line_no", "why", "sig", "hdr_tok").iter_rows()
    )


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The layouts' rows in line order."""
    if len(frames) < 2:
        return frames[0] if frames else pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed").sort("line_no")


def _prepare(
    buf: np.ndarray, lays: list[Layout], pats: dict[int, list[pr.Pattern]], max_bytes: int
) -> _Block | None:
    """Worker: recognise the lines of a block and read the rows under its own header
    copies (line numbers and the rows above its first header are left to `_finish`).
    None when the block is not valid UTF-8."""
    if buf.size and buf.max() > 0x7F and not _utf8(buf):
        return None
    chunk = fast.chunk_of(buf, 0)
    starts, lens, n = chunk.starts, chunk.lens, chunk.n
    words = np.ndarray((max(buf.size - 7, 0),), dtype="<u8", buffer=buf, strides=(1,))
    term = np.ones(n, dtype=bool)
    if chunk.unterminated:
        term[-1] = False
    mark = np.full(n, -1, dtype=np.int32)  # layout of a header copy; -2 a possible header
    hsec = np.full(n, -1, dtype=np.int32)
    for k, lay in enumerate(lays):
        idx, sec = copies(buf, words, starts, lens, term, lay)
        mark[idx] = k
        hsec[idx] = sec
    copy = mark >= 0
    mark[maybe_headers(buf, starts, lens) & ~copy] = -2
    last = np.maximum.accumulate(np.where(mark != -1, np.arange(n), -1))
    gov = np.where(last >= 0, mark[np.maximum(last, 0)], -1)
    gsec = np.where(last >= 0, hsec[np.maximum(last, 0)], -1)
    blk = _Block(
        chunk,
        copy,
        (lens == 0) & term,
        term & (mark == -1) & (lens <= max_bytes),
        last,
        gov,
        gsec,
        np.zeros(n, dtype=bool),
        {},
        pats,
    )
    # With one layout the rows above the block's first header (under the previous
    # block's last one) are most likely its rows too: read them now, `_finish` decides.
    ahead = (last == -1) if len(lays) == 1 else np.zeros(n, dtype=bool)
    for k, lay in enumerate(lays):
        sel = blk.usable & ((gov == k) | ahead)
        blk.rows[k] = _read(blk, np.flatnonzero(sel), lay, gsec, pats[k])
    return blk


def _read(
    blk: _Block, rows: np.ndarray, lay: Layout, gsec: np.ndarray, pats: list[pr.Pattern]
) -> list[pr.Rows]:
    rows = rows[blk.chunk.lens[rows] >= lay.ends[-1] + 2]
    if not rows.size:
        return []
    got, ok = pr.read(blk.chunk, rows, lay, gsec[rows], pats)
    blk.done[rows[ok]] = True
    return got


def _finish(blk: _Block, lays: list[Layout], st: _State) -> list[pl.DataFrame]:
    """In file order: number the block's lines, read the rows above its first header
    (under the previous block's last one), count, and return the lines for the regular
    path with the header copies that govern them."""
    chunk = blk.chunk
    chunk.first_line = st.line
    st.line += chunk.n
    for k, got in blk.pats.items():  # patterns the worker learned
        known = {p.key for p in st.pats[k]}
        st.pats[k] += [p for p in got if p.key not in known][: pr.MAX_PATTERNS - len(st.pats[k])]
    top = blk.usable & (blk.last == -1)  # rows above the block's first header
    if len(lays) == 1:  # read ahead under layout 0 (`_prepare`)
        _settle_top(blk, int(top.sum() and np.flatnonzero(top)[-1] + 1), st)
    elif st.gov >= 0:  # under the previous block's last header: they come first
        gsec = np.full(chunk.n, st.gov_sec, dtype=np.int32)
        got = _read(blk, np.flatnonzero(top), lays[st.gov], gsec, st.pats[st.gov])
        blk.rows[st.gov] = got + blk.rows[st.gov]
    for got in blk.rows.values():
        for r in got:
            r.line = r.line + chunk.first_line
    rest = np.flatnonzero(~(blk.blank | blk.copy | blk.done))
    slow = [_lines(chunk, rest).with_columns(dup=pl.lit(False))] if rest.size else []
    slow += _governing(chunk, blk.copy, rest, st)
    st.counts["row"] += int(blk.done.sum())
    st.counts["hdr"] += int(blk.copy.sum())
    st.counts["blank"] += int(blk.blank.sum())
    if chunk.n and blk.last[-1] >= 0:
        st.gov, st.gov_sec = int(blk.gov[-1]), int(blk.gsec[-1])
    if blk.copy.any():  # printable ASCII, like the header it copies
        i = int(np.flatnonzero(blk.copy)[-1])
        a, b = int(chunk.starts[i]), int(chunk.starts[i] + chunk.lens[i])
        st.copy = (chunk.first_line + i, chunk.buf[a:b].tobytes().decode("ascii"))
    return slow


def _settle_top(blk: _Block, ntop: int, st: _State) -> None:
    """The rows read ahead among the first ``ntop`` lines of the block: under a copy of
    the layout's header (the previous block's last mark), they get its time; else (no
    header yet, or a possible header of no layout) they go to the regular path."""
    if not ntop:
        return
    if st.gov == 0:
        for r in blk.rows[0]:
            r.gsec[r.line < ntop] = st.gov_sec
        return
    kept = []
    for r in blk.rows[0]:
        cut = int(np.searchsorted(r.line, ntop))
        blk.done[r.line[:cut]] = False
        if cut < r.line.size:
            kept.append(r.tail(cut))
    blk.rows[0] = kept


def _governing(
    chunk: fast.Chunk, copy: np.ndarray, rest: np.ndarray, st: _State
) -> list[pl.DataFrame]:
    """The header copies governing the lines ``rest`` (the last copy above each), each
    once per file, marked ``dup`` (counted already)."""
    if not rest.size:
        return []
    above = np.maximum.accumulate(np.where(copy, np.arange(chunk.n), -1))[rest]
    out = []
    if above[0] == -1 and st.copy is not None and st.copy[0] not in st.added:
        st.added.add(st.copy[0])
        out.append(pl.DataFrame({"line_no": [st.copy[0]], "line": [st.copy[1]]}, schema=_LINES))
    idx = above[above >= 0]  # sorted: keep the first of each run
    idx = idx[np.r_[True, idx[1:] != idx[:-1]]] if idx.size else idx
    line_nos = chunk.line_nos(idx)
    keep = np.array([n not in st.added for n in line_nos.tolist()], dtype=bool)
    if keep.any():
        out.append(_lines(chunk, idx[keep]))
        st.added.update(line_nos[keep].tolist())
    return [f.with_columns(dup=pl.lit(True)) for f in out]


def _lines(chunk: fast.Chunk, idx: np.ndarray) -> pl.DataFrame:
    """``chunk.lines(idx)``; a few lines built from Python values (polars then never
    looks at a numpy array: that first look costs more than the lines)."""
    if idx.size > 1000:
        return chunk.lines(idx)
    mv = memoryview(chunk.buf)
    starts, lens = chunk.starts[idx].tolist(), chunk.lens[idx].tolist()
    text = [
        str(mv[a : a + n], "utf-8", "replace").replace("\x00", "").removesuffix("\r")
        for a, n in zip(starts, lens, strict=True)
    ]
    return pl.DataFrame({"line_no": chunk.line_nos(idx).tolist(), "line": text}, schema=_LINES)


def _utf8(buf: np.ndarray) -> bool:
    try:
        buf.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
