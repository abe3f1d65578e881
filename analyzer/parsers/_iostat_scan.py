"""iostat, big files: one cheap pass that decides whether the rows may be streamed.

Two columns of ``iostat_device`` depend on the whole file, not on a report: the device
header layouts (several layouts, e.g. ``--pretty``, are merged back per device) and
``is_partition`` (a device is a partition when another *device of the file* is its disk,
:func:`._iostat_cols.partitions`). Rows can be handed to the store chunk by chunk only
when neither can change after the first chunk, so before parsing this pass collects,
with numpy on the raw bytes:

- ``names``: the first token of every line that might be a device row: a superset of the
  device names the parse will find. Two kinds of tokens that can take no part in a
  disk/partition pair are left out, ISO ``-t`` stamps and the letterless first tokens of
  lines that start with blanks (``avg-cpu`` rows): neither is a ``<letters><digits>``
  partition nor a disk ending in a letter; a disk ending in a digit has
  ``<disk>p<digits>`` partitions, so any name of that shape makes :func:`streamable` say
  no.
- ``hkeys``: every device header layout of the file (header lines are found by their first
  or last token, then normalized like the parser's ``hkey``).

- ``utf8``: whether every block is valid UTF-8 (blocks end at a newline, so no character
  is cut; a file that is not goes to the regular path, which repairs it).

A line whose first token does not fit the 32-byte window (long, after many blanks, or not
ASCII) is read as text and tokenized with the parser's own regexes. :func:`scan` is the
pass over a whole file; :func:`block` does one block (files of a few blocks take no
separate pass: :mod:`._iostat_fast` scans each block with its rows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from analyzer.parsers import _iostat_cols as c
from analyzer.parsers import _sysstat_fast as fast
from analyzer.parsers import base

_W = 32  # bytes of each line looked at
_DEV_HDR = r"^\s*Device:?\s|\sDevice\s*$"  # iostat.py's device header regex
_ISO = "dddd-dd-ddTdd:dd:ddsdddd"  # iostat -t under S_TIME_FORMAT=ISO (s: + or -)


@dataclass
class Scan:
    """What the pass found: device-name candidates and device header layouts."""

    names: set[str] = field(default_factory=set)
    hkeys: set[str] = field(default_factory=set)
    header: bytes = b""  # a device header line already counted (its copies are skipped)
    starts: list[np.ndarray] = field(default_factory=list)  # line offsets of each block
    utf8: bool = True  # every block is valid UTF-8

    def add(self, other: Scan) -> None:
        """Add the findings of the next block(s)."""
        self.names |= other.names
        self.hkeys |= other.hkeys
        self.utf8 &= other.utf8


def streamable(scan: Scan, hkey: str, ctx: base.ParseContext) -> bool:
    """Whether rows may go to the sink chunk by chunk: one device header layout (``hkey``)
    and no partition among the names (so ``is_partition`` is NULL, or False for a ``-p``
    command line, whatever else the file holds)."""
    if scan.hkeys != {hkey}:
        return False
    if any(re.fullmatch(r".*\dp\d+", n) for n in scan.names):
        return False  # its disk may be a token the pass left out (see the module doc)
    return c.partitions(scan.names, ctx, []) in (None, set())


def scan(path: Path, header: str) -> Scan:
    """One pass over ``path`` (see the module doc); ``header`` is the file's first device
    header line (byte-identical copies of it are not read as text)."""
    out = Scan(header=header.encode())
    out.hkeys.add(re.sub(r"\s+", " ", header.strip()))
    for buf in fast.read_blocks(path, fast.CHUNK_BYTES):
        chunk = fast.chunk_of(buf, 1)
        out.add(block(chunk, out.header))
        out.starts.append(chunk.starts.astype(np.int32))  # the next pass needs no newline search
    return out


def block(chunk: fast.Chunk, header: bytes) -> Scan:
    """One block's findings (names, header layouts, UTF-8 validity)."""
    out = Scan(header=header, utf8=utf8(chunk.buf))
    _block(chunk, out)
    return out


utf8 = fast.utf8  # (kept under this name: the pass's UTF-8 check)


_ISO_LO = np.array([48 if c in "ds" else ord(c) for c in _ISO], dtype=np.uint8)
_ISO_HI = np.array([57 if c in "ds" else ord(c) for c in _ISO], dtype=np.uint8)
_ISO_SIGN = _ISO.index("s")


def _iso_stamps(m: np.ndarray) -> np.ndarray:
    """Rows of ``m`` (``(n, 24)``) that are exactly an ISO stamp line: ``ts`` lines,
    never device rows."""
    sign = m[:, _ISO_SIGN]
    ok = ((m >= _ISO_LO) & (m <= _ISO_HI)) | (np.arange(len(_ISO)) == _ISO_SIGN)
    return ok.all(axis=1) & ((sign == 43) | (sign == 45))


def iso_utc(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ISO stamp lines ``m`` (``(n, 24)``, :func:`iso_stamps`) -> ``(done, us)``: UTC
    microseconds since the epoch, as :func:`._sysstat.stamp_to_utc` reads them (invalid
    date or time -> ``us`` is `NO_TIME`, i.e. NULL). ``done`` is False for years outside
    1970-2199, left to ``stamp_to_utc``."""
    d = m.astype(np.int64) - 48

    def num(*at: int) -> np.ndarray:
        out = np.zeros(m.shape[0], dtype=np.int64)
        for k in at:
            out = out * 10 + d[:, k]
        return out

    y, mo, day = num(0, 1, 2, 3), num(5, 6), num(8, 9)
    h, mi, sec = num(11, 12), num(14, 15), num(17, 18)
    off = (num(20, 21) * 60 + num(22, 23)) * np.where(m[:, 19] == 45, -1, 1)
    done = (y >= 1970) & (y <= 2199)
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    dim = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(mo, 0, 12)]
    dim = dim + (leap & (mo == 2))
    valid = (mo >= 1) & (mo <= 12) & (day >= 1) & (day <= dim) & (h < 24) & (mi < 60) & (sec < 61)
    # days since 1970-01-01 (H. Hinnant's days_from_civil)
    yy = y - (mo <= 2)
    era = yy // 400
    yoe = yy - era * 400
    doy = (153 * (mo + np.where(mo > 2, -3, 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    us = ((days * 86400 + h * 3600 + mi * 60 + sec) - off * 60) * 1_000_000
    return done, np.where(valid, us, NO_TIME)


NO_TIME = -(1 << 62)  # iso_utc of an invalid stamp


_U = np.uint64
_HI = _U(0x8080808080808080)
TOKEN_MASK = np.array(
    [[(1 << (8 * min(e, 8))) - 1, (1 << (8 * max(e - 8, 0))) - 1] for e in range(17)],
    dtype=_U,
)


def first_tokens(buf: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The token at byte 0 of the lines at ``starts`` (each with 16 bytes of ``buf`` from
    there, the first a graphic ASCII character): ``(plain, keys, end)``. ``plain`` when the
    token is ASCII and ends, within 16 bytes, at a blank (space, tab, newline...);
    ``keys`` are its bytes as two zero-padded words, ``end`` its length."""
    b = np.lib.stride_tricks.sliding_window_view(buf, 16)[starts]
    end = np.argmax(b <= 32, axis=1)  # first blank, control or newline
    term = b[np.arange(starts.size), end]
    keys = b.view("<u8") & TOKEN_MASK[end]
    plain = (term == 32) | ((term >= 9) & (term <= 13))
    plain &= ((keys[:, 0] | keys[:, 1]) & _HI) == 0
    return plain, keys, end


def _block(chunk: fast.Chunk, out: Scan) -> None:
    """Add one block's tokens and header layouts to ``out``."""
    buf, starts, lens = chunk.buf, chunk.starts, chunk.lens
    first = buf[np.minimum(starts, buf.size - 1)]
    word = (lens > 0) & (starts + 16 <= buf.size) & (first > 32) & (first < 127)
    idx = np.flatnonzero(word)
    plain, keys, _ = first_tokens(buf, starts[idx])
    keys = keys[plain]
    _keys(keys, out)
    dev = np.zeros(idx.size, dtype=bool)
    dev[plain] = ((keys[:, 0] == _DEVICE) | (keys[:, 0] == _DEVICE_COLON)) & (keys[:, 1] == 0)
    odd = [
        idx[~plain],
        idx[dev & ~copies(chunk, idx, dev, out.header)],
        np.flatnonzero(~word & (lens > 0) & (first != 32)),
    ]
    # Lines starting with a blank: read their token in a 32-byte window; skip numbers.
    sp = np.flatnonzero((first == 32) & (lens > 0))
    if sp.size:
        odd.append(sp[~_blank_numbers(chunk, sp)])
    flat = np.unique(np.concatenate(odd))
    if flat.size:  # ISO stamps (tokens longer than 16) are known lines: drop them
        flat = flat[~iso_stamps(chunk, flat)]
    rest = np.union1d(flat, np.flatnonzero(_tails(chunk)))
    if rest.size:
        _text_lines(chunk.lines(rest), out)


_DEVICE = np.frombuffer(b"Device\0\0", "<u8")[0]
_DEVICE_COLON = np.frombuffer(b"Device:\0", "<u8")[0]
AVG_CPU = np.frombuffer(b"avg-cpu:", "<u8")[0]


def iso_stamps(chunk: fast.Chunk, rows: np.ndarray) -> np.ndarray:
    """Mask over ``rows``: the line is exactly an ISO ``-t`` stamp (a ``ts`` line)."""
    buf, starts, lens = chunk.buf, chunk.starts, chunk.lens
    out = np.zeros(rows.size, dtype=bool)
    cand = (lens[rows] == len(_ISO)) & (starts[rows] + len(_ISO) <= buf.size)
    if cand.any():
        view = np.lib.stride_tricks.sliding_window_view(buf, len(_ISO))
        out[cand] = _iso_stamps(view[starts[rows[cand]]])
    return out


def _blank_numbers(chunk: fast.Chunk, rows: np.ndarray) -> np.ndarray:
    """Mask over ``rows`` (lines starting with a blank): the first token is ASCII without
    a letter and ends within 32 bytes, or the line is blank."""
    buf, starts, lens = chunk.buf, chunk.starts, chunk.lens
    ok = starts[rows] + _W <= buf.size
    out = np.zeros(rows.size, dtype=bool)
    if not ok.any():
        return out
    m = np.lib.stride_tricks.sliding_window_view(buf, _W)[starts[rows[ok]]]
    pos = np.arange(_W)[None, :]
    ws = (m == 32) | ((m >= 9) & (m <= 13)) | (pos >= lens[rows[ok]][:, None])
    first = np.argmax(~ws, axis=1)
    after = ws & (pos > first[:, None])
    end = np.argmax(after, axis=1)
    in_tok = (pos >= first[:, None]) & (pos < end[:, None])
    letter = ((m | 0x20) >= 97) & ((m | 0x20) <= 122)
    bad = ((letter | (m >= 0x80) | (m < 32)) & in_tok).any(axis=1)
    out[ok] = ws.all(axis=1) | (after.any(axis=1) & ~bad)
    return out


def key_hash(keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each token (``(n, 2)`` words) for sorted lookups."""
    return keys[:, 0] ^ (keys[:, 1] * _U(0x9E3779B97F4A7C15))


def _keys(keys: np.ndarray, out: Scan) -> None:
    """Add the distinct tokens (``(n, 2)`` words, zero-padded) to ``out.names``."""
    out.names |= distinct(keys)


def distinct(keys: np.ndarray) -> set[str]:
    """The distinct tokens among ``keys`` (``(n, 2)`` words, zero-padded ASCII)."""
    names: set[str] = set()
    h = key_hash(keys)
    while h.size:  # the names repeat: the first rows hold (nearly) all of them
        u, first = np.unique(h[:4096], return_index=True)
        at = np.minimum(np.searchsorted(u, h), u.size - 1)
        hit = u[at] == h
        same = (keys[first][at[hit]] == keys[hit]).all()
        new = keys[first] if same else np.unique(keys, axis=0)  # a hash collision: exact
        for a, b in new:
            raw = int(a).to_bytes(8, "little") + int(b).to_bytes(8, "little")
            names.add(raw.rstrip(b"\0").decode("ascii"))
        if not same:
            break
        keys, h = keys[~hit], h[~hit]
    return names


def copies(chunk: fast.Chunk, idx: np.ndarray, rows: np.ndarray, line: bytes) -> np.ndarray:
    """Mask over ``idx``: the line is ``rows``-selected and byte-identical to ``line``."""
    out = np.zeros(idx.size, dtype=bool)
    same = rows & (chunk.lens[idx] == len(line))
    if line and same.any():
        view = np.lib.stride_tricks.sliding_window_view(chunk.buf, len(line))
        got = view[chunk.starts[idx[same]]]
        out[same] = (got == np.frombuffer(line, np.uint8)).all(axis=1)
    return out


def _tails(chunk: fast.Chunk) -> np.ndarray:
    """Lines that may end in ``<blank>Device<blanks>``: ending in ``Device`` or a blank."""
    buf, starts, lens = chunk.buf, chunk.starts, chunk.lens
    end = starts + lens
    last = buf[np.maximum(end - 1, 0)]
    out = (lens > 0) & ((last == 32) | ((last >= 9) & (last <= 13)))
    e = np.flatnonzero((last == 101) & (lens >= 7))  # ends in "e"
    if e.size:
        view = np.lib.stride_tricks.sliding_window_view(buf, 6)
        out[e] |= (view[end[e] - 6] == np.frombuffer(b"Device", np.uint8)).all(axis=1)
    return out


def _text_lines(lines: pl.DataFrame, out: Scan) -> None:
    """Tokens and header layouts of lines read as text (``line``)."""
    got = lines.select(
        pl.col("line").str.extract(r"^\s*(\S+)").alias("tok"),
        pl.when(pl.col("line").str.contains(_DEV_HDR))
        .then(pl.col("line").str.strip_chars().str.replace_all(r"\s+", " "))
        .alias("hkey"),
    )
    out.names.update(got.get_column("tok").drop_nulls().unique().to_list())
    out.hkeys.update(got.get_column("hkey").drop_nulls().unique().to_list())
