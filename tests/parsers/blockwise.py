"""Parse a file in small blocks with a sink, and compare with the one-block parse.

Shared by the tests of the block-reading parsers (bpftrace, nvidia_dmon, psi, sar): a
parse whose blocks are a few hundred bytes (rows streamed to a sink, as the pipeline
does) must give the same rows, coverage, notes and meta as reading the file in one block.
Tables listed in ``unordered`` are compared as multisets: their whole-file row order
groups rows by section or statistic, which a block-by-block parse can only do per block.
Which tables exist is compared, not the order they were first written in.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from analyzer.parsers import _blocks, base


def parse(
    module: ModuleType, path: Path, chunk: int | None, mp: pytest.MonkeyPatch, **ctx: object
) -> tuple[dict[str, pl.DataFrame], base.Coverage, dict[str, object]]:
    """Tables (streamed rows then returned ones), coverage and meta of one parse;
    ``chunk``: block size in bytes with a sink, None for one block and no sink."""
    sent: dict[str, list[pl.DataFrame]] = {}

    def sink(name: str, frame: pl.DataFrame) -> None:
        sent.setdefault(name, []).append(module.TABLES[name].conform(frame).collect())

    with mp.context() as m:
        m.setattr(_blocks, "CHUNK_BYTES", chunk or (1 << 40))
        c = base.ParseContext(file_name=path.name, sink=sink if chunk else None, **ctx)  # type: ignore[arg-type]
        res = module.parse(path, c)
    res.coverage.check()
    if chunk and sent:
        assert not res.tables, "streamed rows must not be returned again"
    for name, frame in res.tables.items():
        sent.setdefault(name, []).append(module.TABLES[name].conform(frame).collect())
    tables = {name: pl.concat(frames) for name, frames in sent.items()}
    return tables, res.coverage, dict(res.meta)


def assert_same_as_one_block(
    module: ModuleType,
    path: Path,
    chunks: tuple[int, ...],
    mp: pytest.MonkeyPatch,
    unordered: tuple[str, ...] = (),
    **ctx: object,
) -> None:
    """Every block size in ``chunks`` gives the one-block tables, coverage and meta."""
    whole = parse(module, path, None, mp, **ctx)
    for chunk in chunks:
        assert_same_parse(parse(module, path, chunk, mp, **ctx), whole, unordered, chunk)


Parsed = tuple[dict[str, pl.DataFrame], base.Coverage, dict[str, object]]


def assert_same_parse(
    got: Parsed, want: Parsed, unordered: tuple[str, ...] = (), label: object = None
) -> None:
    """Two results of `parse` agree: coverage, notes, meta, which tables, and each table's
    schema and rows (in order, except the ``unordered`` tables)."""
    tables, c, m = got
    whole, cov, meta = want
    assert (c.total, c.parsed, c.structure, c.skipped, c.notes) == (
        cov.total,
        cov.parsed,
        cov.structure,
        cov.skipped,
        cov.notes,
    ), label
    assert m == meta, label
    assert sorted(tables) == sorted(whole), label
    for name, frame in whole.items():
        have = tables[name]
        assert have.schema == frame.schema, (name, label)
        if name in unordered:
            have, frame = (
                have.sort(pl.all(), nulls_last=True),
                frame.sort(pl.all(), nulls_last=True),
            )
        assert have.equals(frame, null_equal=True), (name, label)
