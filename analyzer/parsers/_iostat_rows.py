"""iostat, big files: what the worker threads do with a block (:mod:`._iostat_fast`).

From the file's head, :func:`layout` takes the device table to read fast (``Device``
first, its columns' slots and decimals), the ``avg-cpu`` header and the device names the
first pass found (:mod:`._iostat_scan`). :func:`prepare` then types one block with numpy
alone: a device row is a line as wide as the header whose first token is a known device
name, followed by one right-aligned number per column (:class:`._sysstat_swar.Numbers`,
the name blanked out of the first slot); the well-known structure lines are told from
their bytes (blank lines, byte copies of the first ``avg-cpu`` and device headers, ISO
``-t`` stamps, ``avg-cpu`` rows right after a header copy). Every other line is left for
the regular classifier (:mod:`._iostat_chunk`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _iostat_scan as scan
from analyzer.parsers import _sysstat as s
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import _sysstat_swar as swar
from analyzer.parsers import iostat as io

KINDS = ("other", "blank", "banner", "avg", "cpu", "dev_hdr", "ts", "truncated")
OTHER, BLANK, BANNER, AVG, CPU, DEV_HDR, TS, TRUNC = range(8)
_MARKS = [DEV_HDR, BLANK, BANNER, AVG, CPU, TS]  # lines that end a device table
_RESETS = [BLANK, BANNER, AVG, CPU, TS]
_EVENTS = [TS, AVG, DEV_HDR]
_HUMAN = r"\d[.,]\d[kMGTPE%](\s|$)"


class Names:
    """Device names (the first pass's candidates), looked up by their bytes: ``codes``."""

    def __init__(self, names: set[str]) -> None:
        known = sorted(
            n
            for n in names
            if n not in ("Device", "Device:")
            and not n.startswith("avg-cpu:")
            and len(n) <= 16
            and n.isascii()  # fast rows start with an ASCII name
        )
        keys = np.zeros((len(known), 2), dtype=np.uint64)
        for j, n in enumerate(known):
            keys[j] = np.frombuffer(n.encode("ascii").ljust(16, b"\0"), "<u8")
        order = np.argsort(_hash(keys), kind="stable")
        self.names = [known[j] for j in order]
        self.keys, self.hashes = keys[order], _hash(keys)[order]
        # two names with one hash: not worth a special case (the fast path declines)
        self.ok = np.unique(self.hashes).size == self.hashes.size

    def codes(self, keys: np.ndarray) -> np.ndarray:
        """Index in `names` of each token (``(n, 2)`` words), -1 when not a known name."""
        if not self.names:
            return np.full(keys.shape[0], -1)
        h = _hash(keys)
        at = np.minimum(np.searchsorted(self.hashes, h), len(self.names) - 1)
        hit = (self.keys[:, 0][at] == keys[:, 0]) & (self.keys[:, 1][at] == keys[:, 1])
        return np.where(hit, at, -1)


@dataclass
class Layout:
    """What the file's head says: its device table and avg-cpu header."""

    hkey: str
    header: bytes
    width: int
    numbers: swar.Numbers  # the value slots; the first from byte 0, the name blanked
    cols: list[tuple[int, str, float, bool]]  # (slot, column, factor to kB, is_int)
    avg: bytes  # the file's first avg-cpu header (b"" when none)
    cpu: swar.Numbers | None
    cpu_cols: list[tuple[int, str]]
    cpu_lead: int  # bytes under "avg-cpu:" (blank in a row)
    banner: bytes = b""  # the head's banner line (b"" when none or not plain ASCII)


def _hash(keys: np.ndarray) -> np.ndarray:
    return keys[:, 0] ^ (keys[:, 1] * np.uint64(0x9E3779B97F4A7C15))


@dataclass
class Prepared:
    """A chunk as the worker leaves it: fast device rows and the kinds it could tell."""

    chunk: fast.Chunk
    rows: np.ndarray  # fast device rows (chunk line index)
    code: np.ndarray  # their device (index in names)
    vals: np.ndarray  # (slots, rows)
    rest: np.ndarray  # every other line, in order
    kind: np.ndarray  # its kind code, -1 when only the regular classifier can tell
    cpu: np.ndarray  # positions in rest of avg-cpu rows typed here
    cpu_vals: np.ndarray
    names: list[str] = field(default_factory=list)  # device names of `code`


def head_lines(head: str) -> pl.DataFrame:
    """The file's head through the regular classifier, reports numbered."""
    lines = pl.DataFrame({"line": head.split("\n")[:-1]}).with_row_index("line_no", offset=1)
    return io._reports(io.classify_lines(lines))


def layout(hd: pl.DataFrame) -> Layout | None:
    """The fast layout from the classified head (:func:`head_lines`), or None when the
    file is not for this path."""
    sample = hd.filter(pl.col("kind").is_in(["cpu", "other"]))["line"].head(50)
    if sample.len() < 50:
        return None
    text = "\n".join(sample)
    if re.search(_HUMAN, text) or s.uses_decimal_comma(text):
        return None
    hdr = hd.filter(pl.col("kind") == "dev_hdr").head(1)
    if not hdr.height:
        return None
    hkey, hline = hdr.get_column("hkey")[0], hdr.get_column("line")[0]
    lay = s.header_layout(hline)
    names, ends = lay.names, lay.ends
    if names[0] not in ("Device", "Device:") or len(names) < 3 or lay.starts[0] != 0:
        return None
    first = hd.filter((pl.col("kind") == "other") & (pl.col("dev_ctx") == hdr["line_no"][0]))
    if not first.height or len(hline) != lay.width:
        return None
    row = first.get_column("line")[0]
    dec = [_decimals(row[ends[i - 1] : ends[i]]) for i in range(1, len(ends))]
    slots = [(0, ends[1], dec[0])] + [
        (ends[i - 1], ends[i], dec[i - 1]) for i in range(2, len(ends))
    ]
    cols, taken = [], set()
    for i in range(1, len(names)):
        col = c.device_column(names[i])
        if col is not None and col[0] not in taken:  # a mangled header: first wins
            taken.add(col[0])
            cols.append((i - 1, *col))
    avg_line = hd.filter(pl.col("kind") == "avg").get_column("line").head(1).to_list()
    try:
        numbers = swar.Numbers(slots, narrow=True)
        cpu, cpu_cols, avg = _cpu_layout(avg_line[0] if avg_line else "", hd)
        lead = s.header_layout(avg.decode()).ends[0] if avg else 0
    except ValueError:
        return None
    banner = hd.filter(pl.col("kind") == "banner").get_column("line").head(1).to_list()
    plain = banner and banner[0].isascii() and "\r" not in banner[0]
    return Layout(
        hkey, hline.encode(), lay.width, numbers, cols, avg, cpu, cpu_cols, lead,
        banner[0].encode() if plain else b"",
    )  # fmt: skip


def _decimals(text: str) -> int:
    m = re.search(r"\.(\d+)\s*$", text)
    return len(m[1]) if m else 0


def _cpu_layout(avg: str, hd: pl.DataFrame) -> tuple[swar.Numbers | None, list, bytes]:
    """Decoder of the avg-cpu rows under the file's first avg-cpu header ``avg``."""
    rows = hd.filter(pl.col("kind") == "cpu").get_column("line").head(1).to_list()
    if not avg or not rows or len(rows[0]) != len(avg):
        return None, [], avg.encode()
    lay = s.header_layout(avg)
    ends = lay.ends
    slots = [
        (ends[i - 1], ends[i], _decimals(rows[0][ends[i - 1] : ends[i]]))
        for i in range(1, len(ends))
    ]
    cols = [(i - 1, c.CPU_COLUMNS.get(n.lstrip("%"))) for i, n in enumerate(lay.names) if i]
    return swar.Numbers(slots), [(j, col) for j, col in cols if col], avg.encode()


def prepare(
    buf: np.ndarray, lay: Layout, names: Names, starts: np.ndarray | None = None
) -> Prepared:
    """The worker's part: fast device rows and known structure lines of one block
    (``starts``: its line offsets, when known)."""
    if starts is not None and (
        starts[-1] >= buf.size or not (buf[starts[1:].astype(np.int64) - 1] == fast.NL).all()
    ):
        starts = None  # not the block the first pass saw: find the lines again
    return prepare_chunk(fast.chunk_of(buf, 0, starts), lay, names)


def candidates(chunk: fast.Chunk, lay: Layout) -> tuple[np.ndarray, ...]:
    """The lines that may be fast device rows (as wide as the device header, a graphic
    first character) and their first token: ``(rows, plain, keys, end)``
    (:func:`._iostat_scan.first_tokens`)."""
    rows = fast.candidates(chunk, lay.width, semicolons=False)
    first = chunk.buf[chunk.starts[rows]]
    rows = rows[(first > 32) & (first < 127)]
    return rows, *scan.first_tokens(chunk.buf, chunk.starts[rows])


def prepare_chunk(
    chunk: fast.Chunk, lay: Layout, names: Names, cand: tuple[np.ndarray, ...] | None = None
) -> Prepared:
    """:func:`prepare` of a block whose lines are known (``cand``: its :func:`candidates`,
    when already found)."""
    rows, plain, keys, end = cand if cand is not None else candidates(chunk, lay)
    code = names.codes(keys)
    ok = plain & (code >= 0) & (chunk.buf[chunk.starts[rows] + end] == 32)
    rows, code, end = rows[ok], code[ok], end[ok]
    vals = np.empty((lay.numbers.k, rows.size), dtype=np.float64)
    good = np.empty(rows.size, dtype=bool)
    name = scan.TOKEN_MASK[end]  # (rows, 2) words: 0xFF over each name's bytes
    for sl, m in swar.row_blocks(chunk, rows, lay.width, swar.block_rows(lay.numbers.k)):
        w = m[:, :16].view("<u8")  # the name is not part of the first number: blanks
        w &= ~name[sl]
        w |= name[sl] & np.uint64(0x2020202020202020)
        okv, _ = lay.numbers(m, out=vals[:, sl])
        good[sl] = okv.all(axis=0)
    if not good.all():
        rows, code, vals = rows[good], code[good], vals[:, good]
    rest = np.ones(chunk.n, dtype=bool)
    rest[rows] = False
    p = Prepared(
        chunk, rows, code, vals, np.flatnonzero(rest), np.empty(0), np.empty(0), np.empty(0)
    )
    p.names = names.names
    return _known(p, lay)


def _known(p: Prepared, lay: Layout) -> Prepared:
    """Kinds of the rest lines that bytes alone tell; avg-cpu rows typed."""
    chunk, rest = p.chunk, p.rest
    kind = np.full(rest.size, -1, dtype=np.int8)
    kind[chunk.lens[rest] == 0] = BLANK
    kind[scan.copies(chunk, rest, kind == -1, lay.header)] = DEV_HDR
    kind[scan.copies(chunk, rest, kind == -1, lay.avg)] = AVG
    kind[scan.iso_stamps(chunk, rest) & (kind == -1)] = TS
    kind[scan.copies(chunk, rest, kind == -1, lay.banner)] = BANNER  # the head's banner again
    p.kind = kind
    p.cpu, p.cpu_vals = np.empty(0, dtype=np.int64), np.empty((0, 0))
    if lay.cpu is None:
        return p
    after = np.flatnonzero((kind == -1)[1:] & (kind[:-1] == AVG) & (rest[1:] == rest[:-1] + 1)) + 1
    after = after[chunk.lens[rest[after]] == len(lay.avg)]
    if not after.size:
        return p
    m = np.lib.stride_tricks.sliding_window_view(chunk.buf, len(lay.avg))[chunk.starts[rest[after]]]
    ok, vals = lay.cpu(m)
    ok = ok.all(axis=0) & (m[:, : lay.cpu_lead] == 32).all(axis=1)  # no token under avg-cpu:
    kind[after[ok]] = CPU
    p.cpu, p.cpu_vals = after[ok], vals[:, ok]
    return p
