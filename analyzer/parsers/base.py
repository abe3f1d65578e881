"""The parser contract shared by every `analyzer/parsers/<tool>.py` module.

A parser module exposes three names and nothing else is required of it:

- ``TABLES: dict[str, Table]`` — the schema of every table it produces (column, dtype, unit,
  meaning). `docs/tables.md` is generated from these declarations.
- ``sniff(head: str, name: str) -> float`` — confidence in [0, 1] that a file whose first
  bytes (decoded leniently, at most ``SNIFF_BYTES``) are ``head`` and whose base name is
  ``name`` was produced by this tool. Content decides; the name is only a hint.
- ``parse(path: Path, ctx: ParseContext) -> ParseResult`` — reads the file lazily (files
  can exceed a gigabyte: never one Python string of the whole file), tokenizes with
  polars expressions, then casts once against ``TABLES``.

Every line of the input is accounted for in ``Coverage``: either it contributed to a row
(``parsed``), or it is structure of the tool's output (banners, headers, blank lines:
``structure``), or it was skipped with a reason (``skipped``). ``total`` is the sum of the
three, checked by ``Coverage.check``.

Line bounds: the pipeline hands a parser only files that pass `line_bounds_violation`
(no line longer than ``ctx.max_line_bytes``, at most ``ctx.max_lines`` lines); a file that
fails is not parsed at all and is listed as refused with the reason (docs/limits.md). So
polars never has to hold an over-long line, whatever the parser reads with. Checks that
parsers make themselves against ``ctx`` only matter when they are called directly.
"""

from __future__ import annotations

import codecs
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError as ParseError  # re-exported for parsers

SNIFF_BYTES = 64 * 1024
TS = pl.Datetime("us", "UTC")


@dataclass(frozen=True)
class Column:
    """One column of a table: name, polars dtype, unit ('' when none) and meaning."""

    name: str
    dtype: pl.DataType
    unit: str
    doc: str


@dataclass(frozen=True)
class Table:
    """A declared table schema. ``doc`` says what one row is."""

    doc: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return {c.name: c.dtype for c in self.columns}

    def conform(self, frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
        """Cast ``frame`` to this schema: declared columns in order, missing ones as NULL.

        Columns the frame has but the schema does not are dropped (they must not reach the
        store undocumented). Casts are strict=False only for NULL-able numeric narrowing,
        which parsers are expected to have done already.
        """
        lf = frame.lazy()
        have = set(lf.collect_schema().names())
        if not have:  # a frame without columns has no rows to keep
            return pl.DataFrame(schema=self.schema).lazy()
        exprs = [
            (pl.col(c.name) if c.name in have else pl.lit(None)).cast(c.dtype).alias(c.name)
            for c in self.columns
        ]
        return lf.select(exprs)


def table(doc: str, *columns: tuple[str, pl.DataType, str, str]) -> Table:
    """Shorthand: ``table("one row per sample", ("ts", TS, "", "sample time"), ...)``."""
    return Table(doc=doc, columns=tuple(Column(*c) for c in columns))


@dataclass
class Coverage:
    """Line accounting for one input file.

    ``structure``: reason -> count for lines that are legitimate non-data output of the
    tool (``banner``, ``header``, ``blank``, ``average``...). ``skipped``: reason -> count
    for lines that were not used (garbage, truncated, stderr noise, unknown format).
    """

    total: int = 0
    parsed: int = 0
    structure: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add_structure(self, reason: str, n: int) -> None:
        if n:
            self.structure[reason] = self.structure.get(reason, 0) + int(n)

    def add_skipped(self, reason: str, n: int) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + int(n)

    @property
    def n_structure(self) -> int:
        return sum(self.structure.values())

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def parsed_pct(self) -> float | None:
        """Share of data lines parsed: parsed / (parsed + skipped), in percent."""
        data = self.parsed + self.n_skipped
        return None if data == 0 else 100.0 * self.parsed / data

    def check(self) -> None:
        """Raise AssertionError when lines are unaccounted for (a parser bug, not input)."""
        accounted = self.parsed + self.n_structure + self.n_skipped
        if accounted != self.total:
            raise AssertionError(
                f"coverage does not add up: total={self.total} parsed={self.parsed} "
                f"structure={self.structure} skipped={self.skipped}"
            )


@dataclass
class ParseContext:
    """What a parser may know about the bundle besides its own file.

    All datetimes are timezone-aware UTC. Everything may be None for hand-made bundles.
    ``tz`` is the host's IANA zone name (or a POSIX TZ such as ``UTC0``), used only for
    timestamps printed in local time without an offset. ``command`` is the command line
    the manifest records for this file (e.g. ``vmstat -t -w -S M 1 60``).
    ``boot_time`` is the wall-clock time of boot (from the clock anchors), used to place
    raw ``[seconds]`` kernel timestamps.
    ``sink``, when set (the pipeline sets it to the store), lets a parser of a big file hand
    over finished rows chunk by chunk, ``sink(table, frame)``, instead of returning them in
    ``ParseResult.tables``: memory then stays at a few chunks whatever the file size.
    Parsers may ignore it; without it every row is returned as usual.
    """

    file_name: str = ""
    tz: str | None = None
    capture_start: datetime | None = None
    capture_end: datetime | None = None
    interval_s: float | None = None
    boot_time: datetime | None = None
    command: str | None = None
    host: str | None = None
    max_line_bytes: int = 1024 * 1024
    max_lines: int = 50_000_000
    sink: Callable[[str, pl.DataFrame], None] | None = None


@dataclass
class ParseResult:
    """Tables produced from one file plus its coverage and file-level facts.

    ``tables`` maps a declared table name to a frame; the store conforms it to the
    declared schema. ``meta`` holds facts read from the file itself (``host``, ``kernel``,
    ``date``, ``cpus``, ``tool_version``) that the pipeline may show.
    """

    tables: dict[str, pl.DataFrame | pl.LazyFrame]
    coverage: Coverage
    meta: Mapping[str, object] = field(default_factory=dict)


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
