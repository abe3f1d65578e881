"""Parse a kernel log block by block (private helper of `analyzer.parsers.dmesg`).

Memory stays at a few blocks of `_blocks.CHUNK_BYTES` whatever the file size:

- Pass 1 (text logs only): the whole file's `TextFacts` (is it timestamped, does it hold
  /dev/kmsg records, where are its first stamp and first blank line), a few boolean
  regexes per line, block by block. A file of one block is read once.
- Pass 2: each block's lines, after the lines carried over from the block before, are
  tokenized, assembled into rows, placed on the clock, classified and grouped into
  events. The rows of every event but the last go to ``ctx.sink`` (`_blocks.Rows`). The
  last event may go on in the next block: the lines it was made of (for `dmesg --json`,
  also those of the record still open) are carried over and parsed again with the next
  block, and counted in the coverage only then. Event ids go on from block to block.

The carry is bounded: an event holds at most `MAX_EVENT_LINES` lines, a record
`MAX_CONT_LINES` continuation lines, a JSON record `MAX_JSON_RECORD_LINES` lines. The
result is the one-block parse's, row for row, whatever the block size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, base
from analyzer.parsers._dmesg_classify import classify
from analyzer.parsers._dmesg_clock import SKIP_RANGE, ClockNotes, place_on_clock
from analyzer.parsers._dmesg_rows import json_roles, json_rows, text_rows
from analyzer.parsers._dmesg_tokens import SKIP_CONT, TextFacts, json_lines, tokenize_text

_CARRIED_ROLES = ("row", "cont", SKIP_CONT)  # roles that depend on the lines before
# What `classify` and the carry read besides the table's own columns.
_ROW_COLS = {"rec", "is_cont", "stamp_key", "src_line", "_unknown_month"}


@dataclass
class _State:
    """What goes on from block to block."""

    carry: pl.DataFrame | None = None  # lines (line_no, line) to parse again
    events: int = 0  # events handed over so far
    roles: Counter[str] = field(default_factory=Counter)  # role -> lines, as counted
    rows: int = 0
    ts_known: int = 0
    uptimes: int = 0
    kernel: str | None = None
    kernelish: bool = False
    clock: ClockNotes = field(default_factory=ClockNotes)


@dataclass(frozen=True)
class Log:
    """How to read one file: JSON or text (syzkaller header or not), its table, and the
    regex of kernel words that makes a file without stamps a kernel log."""

    table: base.Table
    json: bool
    syz: bool
    words: str


def parse(path: Path, ctx: base.ParseContext, log: Log) -> base.ParseResult:
    """Parse ``path`` block by block (see the module doc)."""
    facts, blocks, scan = _first_pass(path, ctx, log)
    # A text log without a single stamp is a kernel log only if some line says so.
    words = None if log.json or (facts is not None and facts.n_stamped) else log.words
    state = _State()
    out = _blocks.Rows(ctx, {"dmesg": log.table})
    total = 0
    for block in blocks:
        lines = block.lines
        total += lines.height
        if state.carry is not None:
            lines = pl.concat([state.carry, lines])
        rows = _hand_over(_block(lines, block.last, ctx, log, facts, state), words, state)
        out.put({"dmesg": rows})
    if state.carry is not None:  # a reader that did not flag its last block
        rows = _hand_over(_block(state.carry, True, ctx, log, facts, state), words, state)
        out.put({"dmesg": rows})
    cov = _coverage(total, state)
    if words is not None and state.rows and not state.kernelish:
        raise ParseError(f"{path.name}: no kernel log timestamps and no kernel messages")
    notes = ["file is not valid UTF-8: invalid bytes replaced by U+FFFD"] if scan.repaired else []
    notes += state.clock.lines()
    if state.rows and not state.ts_known and state.uptimes:
        notes.append("raw uptimes only and ctx.boot_time unknown: ts is NULL")
    cov.notes[:] = notes
    meta: dict[str, object] = {"kernel": state.kernel} if state.kernel else {}
    empty = log.table.conform(pl.DataFrame()).collect()
    return base.ParseResult(tables=dict(out.tables({"dmesg": empty})), coverage=cov, meta=meta)


def _first_pass(
    path: Path, ctx: base.ParseContext, log: Log
) -> tuple[TextFacts | None, Iterable[_blocks.Block], _blocks.Blocks]:
    """The text facts (None for JSON), the blocks of pass 2, and the reader that saw every
    block (its ``repaired`` tells about invalid UTF-8 once read through). A file of one
    block keeps that block (and its split lines) for pass 2."""
    if log.json:
        blocks = _blocks.Blocks(path)
        return None, blocks, blocks
    facts = TextFacts(ctx.max_line_bytes)
    scan = _blocks.Blocks(path)
    first, n = None, 0
    for block in scan:
        n += 1
        first = block if n == 1 else None
        facts.add(block.lines.filter(pl.col("line_no") <= ctx.max_lines))
    blocks: Iterable[_blocks.Block] = (
        [first] if first is not None else (_blocks.Blocks(path) if n else [])
    )
    return facts, blocks, scan


def _block(
    lines: pl.DataFrame,
    last: bool,
    ctx: base.ParseContext,
    log: Log,
    facts: TextFacts | None,
    state: _State,
) -> pl.DataFrame:
    """The finished rows of ``lines`` (the carried lines, then a block's); counts the
    roles of the lines that are not carried again and sets ``state.carry``."""
    beyond = pl.col("line_no") > ctx.max_lines
    state.roles["skip:beyond max_lines"] += int(lines.select(beyond.sum()).item())
    lines = lines.filter(~beyond)
    if log.json:
        tok = json_roles(json_lines(lines))
        rows = place_on_clock(json_rows(tok), ctx, state.clock)
        bad_recs = rows.filter(pl.col("_bad"))["rec"].implode()
        bad = pl.col("rec").is_in(bad_recs) & (pl.col("role") == "row")
        context = ~tok["capped"]
        open_from = int(tok["rec_line"][-1]) if tok.height else None
    else:
        assert facts is not None
        tok = tokenize_text(lines, facts, log.syz)
        rows = place_on_clock(text_rows(tok), ctx, state.clock)
        bad_lines = rows.filter(pl.col("_bad"))["line_no"].implode()
        bad = pl.col("line_no").cast(pl.Int64).is_in(bad_lines)
        context = tok["role"].is_in(_CARRIED_ROLES)
        open_from = None
    roles = tok.select(
        pl.col("line_no").cast(pl.Int64),
        pl.when(bad).then(pl.lit("skip:" + SKIP_RANGE)).otherwise("role").alias("role"),
    )
    del tok  # the block's biggest frame: not needed from here on
    need = [c for c in rows.columns if c in _ROW_COLS or c in log.table.schema]
    rows = classify(rows.filter(~pl.col("_bad")).select(need))
    carry_from = None
    if not last:
        starts = [open_from] if open_from is not None else []
        if rows.height:
            last_event = rows["event_id"][-1]
            starts.append(int(rows.filter(pl.col("event_id") == last_event)["src_line"].min()))
            rows = rows.filter(pl.col("event_id") < last_event)
        carry_from = min(starts) if starts else None
    keep = (roles["line_no"] >= (carry_from if carry_from is not None else 1 << 62)) & context
    state.carry = lines.filter(keep) if keep.any() else None
    state.roles.update(dict(roles.filter(~keep)["role"].value_counts().iter_rows()))
    return rows


def _hand_over(rows: pl.DataFrame, words: str | None, state: _State) -> pl.DataFrame:
    """``rows`` with event ids going on from the earlier blocks'; notes what the file-level
    facts need (rows, clocks, kernel version, and the kernel ``words`` when asked)."""
    if not rows.height:
        return rows
    rows = rows.with_columns(pl.col("event_id") + state.events)
    state.events = int(rows["event_id"].max())
    state.rows += rows.height
    state.ts_known += rows.height - rows["ts"].null_count()
    state.uptimes += rows.height - rows["uptime_s"].null_count()
    state.clock.unknown_month += int(rows["_unknown_month"].sum())
    if state.kernel is None:
        kernel = rows["message"].str.extract(r"^Linux version (\S+)", 1).drop_nulls()
        state.kernel = kernel[0] if len(kernel) else None
    if words is not None and not state.kernelish:
        state.kernelish = bool(rows["message"].str.contains(words).any())
    return rows


def _coverage(total: int, state: _State) -> base.Coverage:
    cov = base.Coverage(total=total)
    for role, n in state.roles.items():
        if role in ("row", "cont"):
            cov.parsed += n
        elif role.startswith("structure:"):
            cov.add_structure(role.removeprefix("structure:"), n)
        else:
            cov.add_skipped(role.removeprefix("skip:"), n)
    return cov
