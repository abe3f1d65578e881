"""Tests of analyzer/parsers/py_spy.py (fixture: tests/fixtures/py_spy, real py-spy 0.4.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import check

from analyzer.parsers import py_spy
from analyzer.parsers.base import ParseContext, ParseResult
from analyzer.sniff import MIN_CONFIDENCE

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "py_spy"
GOLDEN = sorted(FIX.glob("*.expected.json"))


def _parse(path: Path) -> ParseResult:
    res = py_spy.parse(path, ParseContext(file_name=path.name))
    res.coverage.check()
    return res


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fixture_matches_its_expected_rows_coverage_and_values(golden: Path) -> None:
    path = golden.with_name(golden.name.removesuffix(".expected.json") + ".out")
    assert py_spy.sniff(path.read_text()[:65536], path.name) >= MIN_CONFIDENCE
    check(_parse(path), golden)


def test_locals_are_structure_and_garbage_is_skipped(tmp_path: Path) -> None:
    p = tmp_path / "py_spy.end.out"
    p.write_text(
        "Process 12: python3 x.py\nPython v3.12.1 (/usr/bin/python3.12)\n\n"
        'Thread 0x7F3A12 (active): "MainThread"\n    f (x.py:3)\n        Arguments:\n'
        "            n: 3\n    <module> (x.py:9)\nsomething else\n"
    )
    res = _parse(p)
    (row,) = res.tables["py_stacks"].to_dicts()
    assert (row["thread"], row["stack"], row["snapshot"]) == (
        "0x7F3A12",
        "<module> (x.py:9);f (x.py:3)",
        "end",
    )
    assert res.coverage.structure["locals"] == 2
    assert res.coverage.skipped == {"unrecognised line": 1}
