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
from dataclasses import dataclass

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


@dataclass
class Layout:
    """What the file's head says: its device table and avg-cpu header, device names."""

    hkey: str
    header: bytes
    width: int
    numbers: swar.Numbers  # the value slots; the first from byte 0, the name blanked
    cols: list[tuple[int, str, float, bool]]  # (slot, column, factor to kB, is_int)
    avg: bytes  # the file's first avg-cpu header (b"" when none)
    cpu: swar.Numbers | None
    cpu_cols: list[tuple[int, str]]
    cpu_lead: int  # bytes under "avg-cpu:" (blank in a row)
    names: list[str]
    keys: np.ndarray  # (n, 2) words of the names, sorted by `_hash`
    hashes: np.ndarray

    def codes(self, keys: np.ndarray) -> np.ndarray:
        """Index in `names` of each token (``(n, 2)`` words), -1 when not a known name."""
        if not self.names:
            return np.full(keys.shape[0], -1)
        h = _hash(keys)
        at = np.minimum(np.searchsorted(self.hashes, h), len(self.names) - 1)
        hit = (self.keys[:, 0][at] == keys[:, 0]) & (self.keys[:, 1][at] == keys[:, 1])
        return np.where(hit, at, -1)


def _hash(keys: np.ndarray) -> np.ndarray:
    return keys[:, 0] ^ (keys[:, 1] * np.uint64(0x9E3779B97F4A7C15))


@dataclass
class Prepared:
    """A chunk as the worker leaves it: fast device rows and the kinds it could tell."""

    chunk: fast.Chunk
    rows: np.ndarray  # fast device rows (chunk line index)
    code: np.ndarray  # their device (index in Layout.names)
    vals: np.ndarray  # (slots, rows)
    rest: np.ndarray  # every other line, in order
    kind: np.ndarray  # its kind code, -1 when only the regular classifier can tell
    cpu: np.ndarray  # positions in rest of avg-cpu rows typed here
    cpu_vals: np.ndarray


def layout(head: str, scanned: scan.Scan | None) -> tuple[Layout, pl.DataFrame] | None:
    """The fast layout and the classified lines of the file's head, or None when the file
    is not for this path."""
    lines = pl.DataFrame({"line": head.split("\n")[:-1]}).with_row_index("line_no", offset=1)
    hd = io._reports(io.classify_lines(lines))
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
        numbers = swar.Numbers(slots)
        cpu, cpu_cols, avg = _cpu_layout(avg_line[0] if avg_line else "", hd)
        lead = s.header_layout(avg.decode()).ends[0] if avg else 0
    except ValueError:
        return None
    known = sorted(
        n
        for n in (scanned.names if scanned else set())
        if n not in ("Device", "Device:") and not n.startswith("avg-cpu:") and len(n) <= 16
    )
    keys = np.zeros((len(known), 2), dtype=np.uint64)
    for j, n in enumerate(known):
        raw = n.encode("ascii").ljust(16, b"\0")
        keys[j] = np.frombuffer(raw, "<u8")
    order = np.argsort(_hash(keys), kind="stable")
    hashes = _hash(keys)[order]
    if np.unique(hashes).size != hashes.size:
        return None  # two names with one hash: not worth a special case
    return Layout(
        hkey, hline.encode(), lay.width, numbers, cols, avg, cpu, cpu_cols, lead,
        [known[j] for j in order], keys[order], hashes,
    ), hd  # fmt: skip


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


def prepare(buf: np.ndarray, lay: Layout, starts: np.ndarray | None = None) -> Prepared:
    """The worker's part: fast device rows and known structure lines of one block
    (``starts``: its line offsets, when known)."""
    if starts is not None and (
        starts[-1] >= buf.size or not (buf[starts[1:].astype(np.int64) - 1] == fast.NL).all()
    ):
        starts = None  # not the block the first pass saw: find the lines again
    chunk = fast.chunk_of(buf, 0, starts)
    rows = fast.candidates(chunk, lay.width, semicolons=False)
    first = chunk.buf[chunk.starts[rows]]
    rows = rows[(first > 32) & (first < 127)]
    plain, keys, end = scan.first_tokens(chunk.buf, chunk.starts[rows])
    code = lay.codes(keys)
    ok = plain & (code >= 0) & (chunk.buf[chunk.starts[rows] + end] == 32)
    rows, code, end = rows[ok], code[ok], end[ok]
    vals = np.empty((lay.numbers.k, rows.size), dtype=np.float64)
    good = np.empty(rows.size, dtype=bool)
    name = scan.TOKEN_MASK[end]  # (rows, 2) words: 0xFF over each name's bytes
    for sl, m in swar.row_blocks(chunk, rows, lay.width):
        w = m[:, :16].view("<u8")  # the name is not part of the first number: blanks
        w &= ~name[sl]
        w |= name[sl] & np.uint64(0x2020202020202020)
        okv, _ = lay.numbers(m, out=vals[:, sl])
        good[sl] = okv.all(axis=0)
    if not good.all():
        rows, code, vals = rows[good], code[good], vals[:, good]
    rest = np.ones(chunk.n, dtype=bool)
    rest[rows] = False
    return _known(
        Prepared(
            chunk, rows, code, vals, np.flatnonzero(rest), np.empty(0), np.empty(0), np.empty(0)
        ),
        lay,
    )


def _known(p: Prepared, lay: Layout) -> Prepared:
    """Kinds of the rest lines that bytes alone tell; avg-cpu rows typed."""
    chunk, rest = p.chunk, p.rest
    kind = np.full(rest.size, -1, dtype=np.int8)
    kind[chunk.lens[rest] == 0] = BLANK
    kind[scan.copies(chunk, rest, kind == -1, lay.header)] = DEV_HDR
    kind[scan.copies(chunk, rest, kind == -1, lay.avg)] = AVG
    kind[scan.iso_stamps(chunk, rest) & (kind == -1)] = TS
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
