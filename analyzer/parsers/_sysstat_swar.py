"""Typing the numbers of fixed-width sysstat rows with numpy alone (no CSV reader).

sysstat right-aligns every value under its header, so in a row of known layout each value
ends at a fixed byte. :class:`Numbers` reads 8 characters at a time as one little-endian
64-bit word and, with a few dozen integer operations per word on whole arrays (SWAR:
SIMD within a register), checks the text and turns it into its value. A row matrix of
:data:`BLOCK_ROWS` rows keeps every temporary in the CPU cache.

What is accepted is deliberately narrow: ``[blank][blanks][digits][.digits]`` with a
fixed number of decimals per slot (the regular parser accepts more: signs, exponents,
``nan``...). Text that does not match is *not ok*, never guessed: the caller hands those
rows to the tool's regular parser. Accepted text gets exactly the regular parser's value:
the digits form an integer (at most 15 of them, exact), divided once by 10**decimals,
which IEEE rounds correctly, i.e. to the same double as parsing the decimal text.

Also here: ``HH:MM:SS`` times (:func:`clock`) and the row matrices (:func:`row_blocks`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np

SP, COLON = 32, 58  # the bytes of a blank and of ':'

#: Rows typed per numpy step: small enough that the temporaries stay in the CPU cache.
BLOCK_ROWS = 8192

_U = np.uint64
_HI = _U(0x8080808080808080)
_LO7 = _U(0x7F7F7F7F7F7F7F7F)
_A76 = _U(0x7676767676767676)
_X30 = _U(0x3030303030303030)
_X20 = _U(0x2020202020202020)
_M0F = _U(0x0F0F0F0F0F0F0F0F)
_M00FF = _U(0x00FF00FF00FF00FF)
_M0000FFFF = _U(0x0000FFFF0000FFFF)


def _mask(positions: Sequence[int] | range, value: int = 0x80) -> int:
    """A word with ``value`` in each byte of ``positions`` (0 = first character)."""
    return sum(value << (8 * k) for k in positions)


_LOCAL = threading.local()


def _scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A uint64 work array of this thread, reused from block to block (its pages are
    faulted in once per thread instead of once per block). Never handed to a caller;
    at most a few MB (``BLOCK_ROWS`` words per slot), freed with the thread."""
    pool = _LOCAL.__dict__
    size = math.prod(shape)
    a = pool.get(name)
    if a is None or a.size < size:
        a = pool[name] = np.empty(max(size, 1), dtype=_U)
    return a[:size].reshape(shape)


def _words(m: np.ndarray, offsets: Sequence[int], scratch: str | None = None) -> np.ndarray:
    """``(len(offsets), n)`` little-endian words at byte ``offsets`` of each row of ``m``
    (in this thread's work array ``scratch`` when named)."""
    n, width = m.shape
    shape = (len(offsets), n)
    out = _scratch(scratch, shape) if scratch else np.empty(shape, dtype=_U)
    for j, o in enumerate(offsets):
        out[j] = np.ndarray((n,), dtype="<u8", buffer=m, offset=o, strides=(width,))
    return out


def _digits_left(t: np.ndarray, nd: np.ndarray) -> None:
    """``nd`` (in place) <- 0x80 in every byte of ``t`` (= word ^ '0'*8) that is not 0..9.
    The high bit is masked before adding, so no carry crosses bytes."""
    np.bitwise_and(t, _LO7, out=nd)
    nd += _A76
    nd |= t
    nd &= _HI


def _parse8(v: np.ndarray) -> None:
    """In place: eight digits 0..9, one per byte, first character lowest -> their value."""
    v *= _U(2561)
    v >>= _U(8)
    v &= _M00FF
    v *= _U(6553601)
    v >>= _U(16)
    v &= _M0000FFFF
    v *= _U(42949672960001)
    v >>= _U(32)


class _Window:
    """Per-slot constants (``(k, 1)`` columns) of one 8-character word of the slots'
    windows. Roles of the window's characters: *pre* (left of the slot: read as blank),
    *start* (the slot's first byte: a blank), *lead* (blank or digit, no blank after a
    digit), *digit*, *dot*."""

    def __init__(self, roles: list[list[str]], comma: bool) -> None:
        def col(values: list[int]) -> np.ndarray:
            return np.array(values, dtype=_U)[:, None]

        def at(r: list[str], *names: str) -> list[int]:
            return [k for k, x in enumerate(r) if x in names]

        self.req = col([_mask(at(r, "digit", "dot", "start")) for r in roles])
        self.reqval = col([_mask(at(r, "dot", "start")) for r in roles])
        self.lead = col([_mask(at(r, "lead")) for r in roles])
        self.fill = col([_mask(range(8), 0x20) ^ _mask(at(r, "dot"), 0x20 ^ 0x2E) for r in roles])
        force = [_mask(at(r, "pre"), 0xFF) for r in roles]
        self.force = col(force) if any(force) else None
        self.keep = col([(1 << 64) - 1 - f for f in force])
        self.comma = col([_mask(at(r, "dot"), 0x02) for r in roles]) if comma else None

    def check(self, w: np.ndarray, tag: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """In place on ``w``: ``(t = w ^ '0'*8, non-digit flags, bad)``; ``bad`` (which
        reuses ``w``) is nonzero where a required digit is not one, the dot or slot start
        is a digit, a non-digit is not the blank or point expected there, or a blank
        follows a digit. ``t`` and the flags are this thread's work arrays ``tag``."""
        if self.force is not None:
            w &= self.keep
            w |= _X20 & self.force
        if self.comma is not None:
            w |= self.comma  # ',' -> '.'; '.' stays
        t = np.bitwise_xor(w, _X30, out=_scratch(tag + "t", w.shape))
        nd = _scratch(tag + "nd", w.shape)
        _digits_left(t, nd)
        x = np.right_shift(nd, _U(7), out=_scratch(tag + "x", w.shape))
        x *= _U(0xFF)
        w ^= self.fill
        w &= x
        np.bitwise_and(nd, self.req, out=x)
        x ^= self.reqval
        w |= x
        np.bitwise_xor(nd, _HI, out=x)
        x <<= _U(8)
        x &= nd
        x &= self.lead
        w |= x
        return t, nd, w


class Numbers:
    """Right-aligned numbers in fixed byte slots of rows: ``slots`` are ``(start, end,
    decimals)``. ``start`` is the slot's first byte and must be a blank (a value that
    overflows its slot shifts the row and fails); the value ends at ``end`` with exactly
    ``decimals`` digits after the point (``,`` too when ``comma``), at least one digit
    before it and blanks only before that. ``alt`` maps a slot index to ``(text,
    value)``: that slot may instead hold ``text`` right-aligned (mpstat's ``all`` = -1).

    A slot wider than 9 bytes takes two words per value. With ``narrow`` (for every slot,
    or per slot), a value is first read from one word (its slot's bytes before that word
    must then be blanks: a value of at most 8 characters), and only the rows where that
    fails are read again with two words: the same ``ok`` and values, for about half the
    work when values are short.
    """

    def __init__(
        self,
        slots: Sequence[tuple[int, int, int]],
        comma: bool = False,
        alt: dict[int, tuple[str, float]] | None = None,
        narrow: bool | Sequence[bool] = False,
    ) -> None:
        self.k = len(slots)
        one: list[tuple[int, list[str], int]] = []
        two: list[tuple[int, list[str], int]] = []
        short = [narrow] * self.k if isinstance(narrow, bool) else list(narrow)
        size = [8 if short[j] or e - s <= 9 else 16 for j, (s, e, _) in enumerate(slots)]
        for j, (s, e, d) in enumerate(slots):
            if not 0 <= d <= 6 or e - 2 - d <= s:
                raise ValueError(f"slot {(s, e, d)} cannot hold a number")
            n = size[j]  # the slot's first byte may lie left of the window
            if e - n < 0:
                raise ValueError(f"slot {(s, e, d)} starts too close to the row start")
            (one if n == 8 else two).append((j, _roles(s, e, d, n), d))
        # Values come out one-word slots first: `row[j]` is slot j's row of the result.
        self.order = np.array([j for j, _, _ in one + two], dtype=np.intp)
        self.row = np.argsort(self.order)
        # Bytes of a slot left of its window must be blanks: whole words where they can.
        self.blanks: list[tuple[int, int]] = []  # (row, byte): one byte
        self.blank_words: list[tuple[int, int, np.uint64]] = []  # (row, offset, mask)
        for j, (s, e, _) in enumerate(slots):
            b = e - size[j]
            while b > s:
                o = max(b - 8, 0)
                lo = max(s, o)
                if b - lo == 1:
                    self.blanks.append((int(self.row[j]), lo))
                else:
                    mask = _mask(range(lo - o, b - o), 0xFF)
                    self.blank_words.append((int(self.row[j]), o, _U(mask)))
                b = lo
        self._one = _Group(one, slots, 8, comma) if one else None
        self._two = _Group(two, slots, 16, comma) if two else None
        self.alt = []
        for j, (text, value) in (alt or {}).items():
            s, e, _ = slots[j]
            if len(text) > min(8, e - s - 1):
                raise ValueError(f"{text!r} does not fit slot {slots[j]}")
            raw = text.rjust(min(8, e - s)).encode("ascii")
            mask = _U(_mask(range(8 - len(raw), 8), 0xFF))
            self.alt.append(
                (j, e - 8, mask, _U(int.from_bytes(raw.rjust(8, b"\0"), "little")), value)
            )
        self._wide = [
            int(self.row[j]) for j, (s, e, _) in enumerate(slots) if e - s > 9 and short[j]
        ]
        self._again = Numbers(slots, comma, alt) if self._wide else None

    def __call__(
        self, m: np.ndarray, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``m`` (``(n, width)`` uint8, C-contiguous) -> ``ok`` ``(k, n)`` bool and
        ``values`` ``(k, n)`` float64 (meaningless where not ok; written into ``out``
        when given). Row ``row[j]`` of both belongs to slot ``j`` (one-word slots first)."""
        alts = [(j, (_words(m, [o])[0] & mask) == val, v) for j, o, mask, val, v in self.alt]
        vals = np.empty((self.k, m.shape[0]), dtype=np.float64) if out is None else out
        n1 = 0 if self._one is None else self._one.idx.size
        if self._two is None:
            ok = self._one(m, vals)
        elif self._one is None:
            ok = self._two(m, vals)
        else:
            ok = np.concatenate([self._one(m, vals[:n1]), self._two(m, vals[n1:])])
        win = ok.copy() if self._again is not None else None  # the windows alone
        for r, b in self.blanks:  # column by column: numpy reduces short rows slowly
            ok[r] &= m[:, b] == SP
        if self.blank_words:
            w = _words(m, [o for _, o, _ in self.blank_words], "bw")
            for i, (r, _, mask) in enumerate(self.blank_words):
                w[i] &= mask
                ok[r] &= w[i] == (_X20 & mask)
        for j, eq, v in alts:
            r = self.row[j]
            ok[r] |= eq
            vals[r][eq] = v
        if win is not None:  # a wide slot's window read fine but a blank before it is not:
            w = self._wide  # perhaps a longer value; two words read every slot of such rows
            bad = np.flatnonzero((win[w] & ~ok[w]).any(axis=0))
            if bad.size:  # (rows in slot order; a window that fails fails with two words too)
                ok2, vals2 = self._again(m[bad])
                src = self._again.row[self.order]  # its rows in the order of ours
                ok[:, bad] = ok2[src]
                vals[:, bad] = vals2[src]
        return ok, vals


def _roles(s: int, e: int, d: int, n: int) -> list[str]:
    """Role of each character of the ``n``-character window ending at ``e``."""
    a = e - n
    dot = n - 1 - d if d else None
    digits = {n - 2 - d, *range(n - d, n)} if d else {n - 1}
    out = []
    for k in range(n):
        if a + k < s:
            out.append("pre")
        elif a + k == s:
            out.append("start")
        elif k == dot:
            out.append("dot")
        else:
            out.append("digit" if k in digits else "lead")
    return out


class _Group:
    """The slots read with windows of ``n`` (8 or 16) characters."""

    def __init__(
        self,
        items: list[tuple[int, list[str], int]],
        slots: Sequence[tuple[int, int, int]],
        n: int,
        comma: bool,
    ) -> None:
        self.idx = np.array([j for j, _, _ in items])
        self.lo_off = [slots[j][1] - 8 for j, _, _ in items]
        self.hi_off = [slots[j][1] - 16 for j, _, _ in items]
        self.lo = _Window([r[n - 8 :] for _, r, _ in items], comma)
        self.hi = _Window([r[:8] for _, r, _ in items], comma) if n == 16 else None
        dots = [r[n - 8 :].index("dot") if "dot" in r[n - 8 :] else None for _, r, _ in items]
        col = lambda v: np.array(v, dtype=_U)[:, None]  # noqa: E731
        self.keep_low = col([_mask(range(p), 0x0F) if p is not None else 0 for p in dots])
        self.keep_high = col([_mask(range(p + 1 if p is not None else 0, 8), 0x0F) for p in dots])
        shifts = {8 if p is not None else 0 for p in dots}
        self.shift = (
            _U(shifts.pop()) if len(shifts) == 1 else col([8 if p is not None else 0 for p in dots])
        )
        self.carry = col([0x0F if p is not None else 0 for p in dots])
        scales = {10.0**d for _, _, d in items}
        self.scale = (
            scales.pop() if len(scales) == 1 else np.array([10.0**d for _, _, d in items])[:, None]
        )
        self.lo_lead0 = col([0x80 if r[n - 8] == "lead" else 0 for _, r, _ in items])

    def _digits(self, t: np.ndarray, x: np.ndarray) -> None:
        """In place: ``t`` (word ^ '0'*8, checked) -> its digits without the point."""
        np.bitwise_and(t, self.keep_low, out=x)
        x <<= self.shift
        t &= self.keep_high
        t |= x

    def __call__(self, m: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """``ok`` of the rows ``m``; their values go into ``vals``."""
        tl, ndl, bad = self.lo.check(_words(m, self.lo_off, "lw"), "l")
        if self.hi is None:
            ok = bad == 0
            self._digits(tl, ndl)
            _parse8(tl)
            np.true_divide(tl, self.scale, out=vals)
            return ok
        th, ndh, bad_hi = self.hi.check(_words(m, self.hi_off, "hw"), "h")
        bad |= bad_hi
        ndh ^= _HI  # digit flags of hi
        ndh >>= _U(56)  # hi's last character -> lo's first
        ndh &= ndl
        ndh &= self.lo_lead0  # a blank right after a digit, across the words
        bad |= ndh
        ok = bad == 0
        self._digits(tl, ndl)
        np.right_shift(th, _U(56), out=ndl)
        ndl &= self.carry  # hi's last digit moves into lo when the point was removed
        tl |= ndl
        th &= _M0F
        th <<= self.shift
        _parse8(th)
        _parse8(tl)
        th *= _U(100_000_000)  # at most 15 digits: below 2**53, exact as a double
        th += tl
        np.true_divide(th, self.scale, out=vals)
        return ok


_CLOCK_ND = _U(_mask([2, 5]))
_CLOCK_COLONS = _U(_mask([2, 5], 0xFF))
_CLOCK_COLON_VAL = _U(_mask([2, 5], COLON))


def clock(m: np.ndarray, at: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``HH:MM:SS`` at byte ``at`` of each row -> ``ok`` and seconds of day (int32). Only
    a valid 24-hour time with seconds below 60 is ok."""
    w = _words(m, [at], "cw")[0]
    t = np.bitwise_xor(w, _X30, out=_scratch("ct", w.shape))
    nd = _scratch("cnd", w.shape)
    _digits_left(t, nd)
    ok = nd == _CLOCK_ND
    w &= _CLOCK_COLONS
    ok &= w == _CLOCK_COLON_VAL
    p = np.multiply(t, _U(10), out=_scratch("cp", w.shape))
    t >>= _U(8)
    p += t  # byte k: 10 * digit k + digit k+1 (no carry: every byte is below 256)
    h = (p & _U(0xFF)).astype(np.int32)
    mi = ((p >> _U(24)) & _U(0xFF)).astype(np.int32)
    s = ((p >> _U(48)) & _U(0xFF)).astype(np.int32)
    ok &= (h < 24) & (mi < 60) & (s < 60)
    h *= 3600
    mi *= 60
    h += mi
    h += s
    return ok, h


def block_rows(k: int) -> int:
    """Rows per block for rows of ``k`` numbers: `BLOCK_ROWS`, fewer for many numbers
    (each work array holds ``k`` words per row: about 64 k words at most)."""
    return max(2048, min(BLOCK_ROWS, (1 << 16) // max(k, 1)))
