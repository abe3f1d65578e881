"""Golden checks shared by the parser tests whose fixtures carry an ``.expected.json``
beside them: expected rows per table, coverage, and exact values of chosen rows.

``values`` entries: ``table``, ``where`` (column -> value; a string for a Float64
column is converted with float(), so ``"inf"`` selects the +Inf bucket; null selects
NULL), ``column`` and ``equals`` (floats compared to 1e-12 relative; null means NULL),
and optionally ``rows`` (how many rows ``where`` selects; at least one otherwise).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from analyzer.parsers.base import ParseResult


def fixture_of(golden: Path) -> Path:
    """The fixture a ``<name>.expected.json`` describes: ``<name>.<ext>`` beside it."""
    stem = golden.name.removesuffix(".expected.json")
    (match,) = [
        p
        for p in golden.parent.iterdir()
        if p.name.startswith(stem + ".") and p != golden and not p.name.endswith(".golden.json")
    ]
    return match


def _where(df: pl.DataFrame, where: dict) -> pl.DataFrame:
    for col, want in where.items():
        if want is None:
            df = df.filter(pl.col(col).is_null())
        elif isinstance(want, str) and df.schema[col] == pl.Float64:
            df = df.filter(pl.col(col) == float(want))
        else:
            df = df.filter(pl.col(col) == want)
    return df


def check(res: ParseResult, golden: Path) -> None:
    """Assert that ``res`` holds what ``golden`` expects."""
    want = json.loads(golden.read_text())
    tables = res.tables
    assert {k: v.height for k, v in tables.items()} == want["rows"]
    assert res.coverage.parsed == want["coverage"]["parsed"]
    assert res.coverage.skipped == want["coverage"]["skipped"]
    for c in want["values"]:
        rows = _where(tables[c["table"]], c["where"])
        if "rows" in c:
            assert rows.height == c["rows"], c
        assert rows.height >= 1, c
        if "equals" not in c:
            continue
        for got in rows.get_column(c["column"]).to_list():
            exp = c["equals"]
            if isinstance(exp, float) and got is not None:
                assert math.isclose(got, exp, rel_tol=1e-12), (c, got)
            else:
                assert got == exp, (c, got)
