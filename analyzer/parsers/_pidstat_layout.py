"""Which headers of a pidstat file the fast path (:mod:`._pidstat_fast`) reads, and how.

A :class:`Layout` is a header line of the file's head (its first 64 KiB) with the first
data row under it: the header's text (what copies of it must repeat byte for byte, except
a leading ``HH:MM:SS``), the table columns of its values (numbers only: no ``USER``,
``policy``, ``TGID`` or ``TID``), where the time and each value end in that first row
and in the header, each value's number of decimals, and whether rows start with epoch
seconds or ``HH:MM:SS``. Headers are recognised here with Python's ``re`` and the same
patterns as the regular classifier (:mod:`.pidstat`), which must later agree on each of
them (:func:`._pidstat_fast.read` checks), so a disagreement costs speed, never rows.
:func:`classify_few` gives the regular classifier's frame for banners and header copies,
the lines a big file usually leaves to the regular path (tested equal on every fixture).

In a block of the file, :func:`copies` finds the lines that copy a layout's header and
:func:`maybe_headers` the lines the regular classifier might take for another header.

Example: ``# Time        UID       PID    %usr ... nvcswch/s  Command`` over
``1795960801   1000      4242   83.35 ...     42.68  python3`` gives ``clock=False``,
``epoch=True``, ``cols=("uid", "pid", "usr_pct", ...)``, ``ends=(10, 17, 27, 35, ...)``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from analyzer.parsers import _sysstat as ss
from analyzer.parsers import _sysstat_swar as swar
from analyzer.parsers._pidstat_schema import (
    AMPM_RE,
    COLUMNS,
    HDR_TOK_RE,
    HEADER_RE,
    SIG_RE,
    TEXT,
    TIME_TOKEN,
)
from analyzer.parsers._sampler import reason
from analyzer.parsers.base import ParseContext

_NUM = re.compile(r"\d+(?:\.(\d{1,6}))?")
_CLOCK = re.compile(r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d")
_EPOCH = re.compile(r"\d{9,11}")
_TOKEN = re.compile(r"\S+")
_BLANKS = re.compile(r"\s+")
# the regular classifier's patterns, compiled once
_HEADER, _SIG, _HDR_TOK = re.compile(HEADER_RE), re.compile(SIG_RE), re.compile(HDR_TOK_RE)
_BANNER, _AVERAGE, _TIME = (
    re.compile(ss.BANNER_PL),
    re.compile(ss.AVERAGE_RE),
    re.compile(ss.TIME_RE),
)
_TIME_TOKEN, _AMPM = re.compile(TIME_TOKEN), re.compile(AMPM_RE)
SP = 32
_TAIL = np.frombuffer(b"Command", dtype=np.uint8)


@dataclass(frozen=True)
class Layout:
    """A header of the file's head whose rows the fast path reads.

    ``header``: its text; ``line_no``: its line in the head; ``sig``/``hdr_tok``: what
    the regular classifier must find in it; ``clock``: it starts with its own
    ``HH:MM:SS`` (copies may differ there); ``cols``: table columns of its values;
    ``ends``: where the time and each value end in its first row; ``head_ends``: where the
    names of the values end in the header; ``decimals`` per value; ``epoch``: rows start
    with epoch seconds (else ``HH:MM:SS``)."""

    header: str
    line_no: int
    sig: str
    hdr_tok: str
    clock: bool
    cols: tuple[str, ...]
    ends: tuple[int, ...]
    head_ends: tuple[int, ...]
    decimals: tuple[int, ...]
    epoch: bool


def layouts(head: str, ctx: ParseContext) -> list[Layout]:
    """Fast-readable layouts among the header lines of ``head``, each with the first row
    below it (``re`` here; :func:`read` has the regular classifier confirm them)."""
    texts = head.split("\n")[:-1]  # the head may cut its last line
    out: list[Layout] = []
    seen: set[str] = set()  # headers up to their leading time
    for i, (text, row) in enumerate(itertools.pairwise(texts)):
        key = text[8:] if _CLOCK.fullmatch(text[:8]) else text
        if key not in seen and _is_header(text, ctx):
            seen.add(key)
            lay = _layout(text, i + 1, row)
            if lay is not None:
                out.append(lay)
    return out


def _is_header(text: str, ctx: ParseContext) -> bool:
    """What the regular classifier calls a header (not a banner, not ``Average:``)."""
    return (
        len(text.encode()) <= ctx.max_line_bytes
        and _HEADER.search(text) is not None
        and _BANNER.match(text) is None
        and _AVERAGE.match(text) is None
    )


def _layout(text: str, line_no: int, row: str) -> Layout | None:
    if not (_plain(text) and _plain(row)):
        return None
    sig_m, tok_m = _SIG.search(text), _HDR_TOK.match(text)
    if sig_m is None or tok_m is None:
        return None
    sig = _BLANKS.sub(" ", sig_m[1])
    cols = [COLUMNS.get(n) for n in sig.split(" ")[:-1]]
    if any(c is None or c in TEXT or c in ("tgid", "tid") for c in cols) or len(set(cols)) < len(
        cols
    ):
        return None
    hdr_tok = tok_m[1]
    clock = _CLOCK.fullmatch(text[:8]) is not None and hdr_tok == text[:8]
    if not clock and _TIME.match(hdr_tok):  # a time of another form
        return None
    toks = list(_TOKEN.finditer(row))
    if len(toks) < len(cols) + 2:
        return None
    t0 = toks[0].group()
    epoch = _EPOCH.fullmatch(t0) is not None
    if not epoch and not (toks[0].start() == 0 and _CLOCK.fullmatch(t0)):
        return None
    nums = [_NUM.fullmatch(t.group()) for t in toks[1 : len(cols) + 1]]
    ends = tuple(t.end() for t in toks[: len(cols) + 1])
    if any(m is None for m in nums) or ends[0] > 16:
        return None
    return Layout(
        header=text,
        line_no=line_no,
        sig=sig,
        hdr_tok=hdr_tok,
        clock=clock,
        cols=tuple(c for c in cols if c),
        ends=ends,
        head_ends=tuple(t.end() for t in _TOKEN.finditer(text))[-len(cols) - 1 : -1],
        decimals=tuple(len(m[1] or "") for m in nums if m is not None),
        epoch=epoch,
    )


def _plain(text: str) -> bool:
    return text.isascii() and text.isprintable()


def classify_few(lines: list[tuple[int, str, bool]], ctx: ParseContext) -> pl.DataFrame | None:
    """``pidstat.classify`` of ``lines`` (``line_no``, ``line``, ``dup``) when they are all
    banners (printable ASCII and tabs) or, marked ``dup``, copies of the head's headers:
    the lines a big file usually leaves to the regular path. The same frame, computed
    with the same patterns in Python instead of compiling polars expressions for a few
    lines. None when another kind of line is there."""
    out: dict[str, list] = {c: [] for c in _CLASSIFIED}
    seg = block = 0
    sig = hdr_tok = None
    for line_no, text, dup in lines:
        if len(text.encode()) > ctx.max_line_bytes or not _plain(text.replace("\t", " ")):
            return None
        banner = _BANNER.match(text) is not None
        if not banner and not (dup and _is_header(text, ctx)):
            return None
        seg += banner
        if not banner:  # a header: what its block's rows take
            block += 1
            sig_m, tok_m = _SIG.search(text), _HDR_TOK.match(text)
            if sig_m is None or tok_m is None:
                return None
            sig, hdr_tok = _BLANKS.sub(" ", sig_m[1]), tok_m[1]
        tok, space, after = text.lstrip().partition(" ")
        rest = after.lstrip() if space else None
        ampm = rest is not None and _AMPM.match(rest) is not None
        time_tok = None
        if _TIME_TOKEN.match(tok):
            time_tok = tok + " " + rest[:2] if ampm and rest is not None else tok
        if ampm and rest is not None:
            rest = rest[2:].lstrip()
        values = (
            line_no,
            seg,
            block,
            time_tok,
            rest,
            reason("structure", "banner" if banner else "header"),
            dup,
            sig if block else None,
            hdr_tok if block else None,
            text if banner else None,
        )
        for c, v in zip(_CLASSIFIED, values, strict=True):
            out[c].append(v)
    return pl.DataFrame(out, schema=_CLASSIFIED)


_CLASSIFIED = {
    "line_no": pl.UInt32,
    "seg": pl.UInt32,
    "block": pl.UInt32,
    "time_tok": pl.String,
    "rest": pl.String,
    "why": pl.String,
    "dup": pl.Boolean,
    "sig": pl.String,
    "hdr_tok": pl.String,
    "banner": pl.String,
}


def copies(
    buf: np.ndarray,
    words: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    term: np.ndarray,
    lay: Layout,
) -> tuple[np.ndarray, np.ndarray]:
    """Lines that are copies of ``lay``'s header and their times (seconds, -1 none)."""
    text = lay.header.encode()
    width = len(text)
    cand = np.flatnonzero((lens == width) & term)
    first = 8 if lay.clock else 0
    if width - first >= 8:
        hdr = np.frombuffer(text, dtype=np.uint8)
        for off in [*range(first, width - 8, 8), width - 8]:
            want = hdr[off : off + 8].view("<u8")[0]
            cand = cand[words[starts[cand] + off] == want]
    else:  # too short for one word: byte by byte
        for off in range(first, width):
            cand = cand[buf[starts[cand] + off] == text[off]]
    sec = np.full(cand.size, -1, dtype=np.int32)
    if lay.clock and cand.size:
        ok, sec = swar.clock(words[starts[cand]].view(np.uint8).reshape(-1, 8))
        cand, sec = cand[ok], sec[ok]
    return cand, sec


def maybe_headers(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Lines the regular classifier might take for a header (HEADER_RE ends with
    ``Command``, then blanks): they end with ``Command``, or with a blank or a byte that
    is not printable ASCII, or hold a NUL (removed before classifying)."""
    out = np.zeros(starts.size, dtype=bool)
    some = np.flatnonzero(lens > 0)
    last = buf[starts[some] + lens[some] - 1]
    out[some] = (last <= SP) | (last > 0x7E)
    tail = some[(last == ord("d")) & (lens[some] >= 7)]
    if tail.size:
        at = (starts[tail] + lens[tail] - 7)[:, None] + np.arange(7)
        out[tail[(buf[at] == _TAIL).all(axis=1)]] = True
    if buf.size and buf.min() == 0:  # NUL bytes
        out[np.searchsorted(starts, np.flatnonzero(buf == 0), side="right") - 1] = True
    return out
