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

How a parser reads its file (lines, head, UTF-8 repair, line bounds, token casts) is
`analyzer.parsers._read`; this module is only the contract.

Line bounds: the pipeline hands a parser only files that pass `_read.line_bounds_violation`
(no line longer than ``ctx.max_line_bytes``, at most ``ctx.max_lines`` lines); a file that
fails is not parsed at all and is listed as refused with the reason (docs/limits.md). So
polars never has to hold an over-long line, whatever the parser reads with. Checks that
parsers make themselves against ``ctx`` only matter when they are called directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

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
