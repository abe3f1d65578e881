"""File-level reading shared by every parser: lines, heads, UTF-8 repair, line bounds.

The parser contract (tables, coverage, context, result) is `analyzer.parsers.base`; this
module is how parsers read their file: `read_lines` (a lazy frame of ``line_no``,
``line``), `read_head` (the first bytes, for sniffing and banners), the UTF-8 check and
repaired copy (`needs_utf8_repair`, `utf8_clean_copy`, `remove_scratch`), the per-file line
bounds the pipeline checks before parsing (`line_bounds_violation`), and the token casts
every parser uses (`decimal_number`, `int_number`).
"""

from __future__ import annotations

import codecs
import shutil
import tempfile
from pathlib import Path

import polars as pl

from analyzer.parsers.base import SNIFF_BYTES


def read_lines(path: Path, name: str = "line") -> pl.LazyFrame:
    """Lazily scan ``path`` as one string column ``line`` plus ``line_no`` (1-based, u32).

    Blank lines are kept (they count as lines). A trailing ``\\r`` (CRLF files) and NUL
    bytes are removed. Files that are not valid UTF-8 are first copied once, in chunks,
    with invalid bytes replaced by U+FFFD (see ``utf8_clean_copy``); the caller's
    coverage should note it via ``needs_utf8_repair``. The path is read as it is named,
    never as a glob pattern (a member may be called ``x[1].log`` or ``dmesg*``).
    """
    source = utf8_clean_copy(path) if needs_utf8_repair(path) else path
    lf = pl.scan_lines(source, name=name, glob=False).with_row_index("line_no", offset=1)
    nul, cr = _has_bytes(source, b"\x00", b"\r")
    if nul:  # both are rare: skip the per-line work when the file has none
        lf = lf.with_columns(pl.col(name).str.replace_all("\x00", "", literal=True))
    if cr:
        lf = lf.with_columns(pl.col(name).str.strip_suffix("\r"))
    return lf


def _has_bytes(path: Path, *needles: bytes, chunk: int = 1 << 22) -> list[bool]:
    """Which of the single-byte ``needles`` occur in the file (one streaming pass)."""
    found = [False] * len(needles)
    with open(path, "rb", buffering=0) as f:
        while (block := f.read(chunk)) and not all(found):
            for i, b in enumerate(needles):
                found[i] = found[i] or b in block
    return found


def needs_utf8_repair(path: Path, chunk: int = 1 << 20) -> bool:
    """True when the file is not valid UTF-8, checked by streaming (ASCII chunks are
    skipped at memory speed; only chunks with high bytes go through the decoder)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    buf = bytearray(chunk)  # one buffer for every block: no fresh pages per read
    try:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                block = buf if n == chunk else buf[:n]
                if block.isascii() and not decoder.getstate()[0]:
                    continue
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return True
    return False


_SCRATCH_DIRS: list[Path] = []


def utf8_clean_copy(path: Path, chunk: int = 1 << 22) -> Path:
    """Copy ``path`` into a private temporary directory with invalid bytes replaced.

    The input's own directory is never written to (it may be the user's bundle
    directory). Temporary copies are removed by `remove_scratch()`, else when the process
    ends, however it ends (`analyzer.cleanup`: exit, exception, SIGINT/SIGTERM).
    """
    from analyzer.cleanup import register_cleanup

    scratch = register_cleanup(tempfile.mkdtemp(prefix="hindsight-utf8-"))
    _SCRATCH_DIRS.append(scratch)
    target = scratch / "clean.txt"
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    with open(path, "rb") as src, open(target, "w", encoding="utf-8", newline="") as out:
        while block := src.read(chunk):
            out.write(decoder.decode(block))
        out.write(decoder.decode(b"", final=True))
    return target


def remove_scratch() -> None:
    """Remove the temporary copies made by `utf8_clean_copy`."""
    from analyzer.cleanup import unregister_cleanup

    while _SCRATCH_DIRS:
        scratch = _SCRATCH_DIRS.pop()
        shutil.rmtree(scratch, ignore_errors=True)
        unregister_cleanup(scratch)


def line_bounds_violation(
    path: Path, max_line_bytes: int, max_lines: int, chunk: int = 1 << 22
) -> str | None:
    """Why ``path`` breaks the per-file line bounds, or None when it does not.

    One streaming pass in chunks (~0.07 s/GB): a line is too long when ``max_line_bytes + 1``
    bytes in a row hold no ``\\n`` (length excludes the newline); lines are counted only when
    the file has more bytes than ``max_lines``, since each line takes at least one byte.
    """
    count = path.stat().st_size > max_lines
    lines = offset = start = 0  # start: file offset of the line still open
    with open(path, "rb", buffering=0) as f:
        while block := f.read(chunk):
            first = block.find(b"\n")
            if first < 0:
                first = len(block)
            if offset + first - start > max_line_bytes:
                return _too_long(path, start, max_line_bytes)
            if first < len(block):
                last, pos = block.rfind(b"\n"), first + 1
                while last - pos > max_line_bytes:  # some line inside may be too long
                    r = block.rfind(b"\n", pos, pos + max_line_bytes + 1)
                    if r < 0:
                        return _too_long(path, offset + pos, max_line_bytes)
                    pos = r + 1
                lines += block.count(b"\n") if count else 0
                start = offset + last + 1
            offset += len(block)
            if lines > max_lines:
                return f"more than {max_lines} lines (bound max_lines): file not parsed"
    if count and lines + (offset > start) > max_lines:
        return f"more than {max_lines} lines (bound max_lines): file not parsed"
    return None


def _too_long(path: Path, at: int, max_line_bytes: int) -> str:
    """The message for an over-long line starting at byte ``at`` (its number is counted
    only now: a second partial read, on the rare failing file)."""
    line_no, done = 1, 0
    with open(path, "rb", buffering=0) as f:
        while done < at and (block := f.read(min(1 << 22, at - done))):
            line_no += block.count(b"\n")
            done += len(block)
    return f"line {line_no} is longer than {max_line_bytes} bytes (bound max_line_bytes): file not parsed"


def read_head(path: Path, n: int = SNIFF_BYTES) -> str:
    """First ``n`` bytes of a file decoded leniently (for sniffing and banners)."""
    with open(path, "rb") as f:
        return f.read(n).decode("utf-8", "replace").replace("\x00", "")


def decimal_number(expr: pl.Expr) -> pl.Expr:
    """A numeric token as Float64, accepting a decimal comma (``9,23`` -> 9.23).

    Sysstat under de_DE prints decimal commas; no sysstat field uses a thousands
    separator, so a single comma is always the decimal mark.
    """
    return expr.str.strip_chars().str.replace(",", ".", literal=True).cast(pl.Float64, strict=False)


def int_number(expr: pl.Expr) -> pl.Expr:
    """An integer token as Int64 (NULL when not an integer)."""
    return expr.str.strip_chars().cast(pl.Int64, strict=False)
