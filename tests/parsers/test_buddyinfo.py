"""Tests of analyzer/parsers/buddyinfo.py against tests/fixtures/snapshots (golden values
read by hand; the kernel prints no localised numbers, so a CRLF/NUL-damaged copy stands in
for a locale replay)."""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, buddyinfo

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
FILES = sorted(
    p for p in FIX.iterdir() if "buddyinfo" in p.name and not p.name.endswith(".golden.json")
)


def _rows(path: Path, **kw: object) -> list[dict]:
    res = buddyinfo.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res.tables["buddyinfo"].to_dicts()  # type: ignore[union-attr]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = buddyinfo.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    assert res.coverage.parsed_pct == 100.0
    assert dict(res.tables["buddyinfo"].schema) == buddyinfo.TABLES["buddyinfo"].schema  # type: ignore[union-attr]


def test_values_per_zone_and_order() -> None:
    end = datetime(2026, 11, 29, 18, 49, 55, tzinfo=UTC)
    rows = {
        (r["zone"], r["order"]): r
        for r in _rows(FIX / "ref-vm__buddyinfo.start.out", capture_end=end)
    }
    assert len(rows) == 33
    assert (rows[("Normal", 2)]["free_blocks"], rows[("Normal", 10)]["free_blocks"]) == (35959, 27)
    assert (rows[("DMA32", 10)]["free_blocks"], rows[("DMA", 8)]["free_blocks"]) == (752, 1)
    assert {r["node"] for r in rows.values()} == {0}
    assert rows[("DMA", 0)]["snapshot"] == "start" and rows[("DMA", 0)]["ts"] is None
    end_rows = _rows(FIX / "ref-h200__buddyinfo.end.out", capture_end=end)
    assert {r["ts"] for r in end_rows} == {end}


def test_crlf_and_nul_damage_give_the_same_rows(tmp_path: Path) -> None:
    src = FIX / "ref-vm__buddyinfo.start.out"
    bad = tmp_path / src.name
    bad.write_bytes(src.read_bytes().replace(b"\n", b"\r\n").replace(b"zone", b"zo\x00ne"))
    assert _rows(bad) == _rows(src)


def test_renamed_fixtures_are_recognised_and_others_rejected() -> None:
    for path in FILES:
        assert buddyinfo.sniff(_read.read_head(path), "data.txt") >= 0.5
    for text in (
        "MemTotal:  1 kB\n",
        "           CPU0\n  0:  1  IO-APIC 2-edge timer\n",
        "vm.swappiness = 60\n",
    ):
        assert buddyinfo.sniff(text, "data.txt") < 0.5


def test_garbage_only_is_a_parse_error(tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    p.write_text("nothing\n")
    with pytest.raises(ParseError):
        buddyinfo.parse(p, base.ParseContext(file_name=p.name))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 1),
    cut=st.floats(0, 1),
    garbage=st.lists(st.binary(max_size=60), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_mutated_files_never_crash(which: int, cut: float, garbage: list[bytes], seed: int) -> None:
    data = FILES[which].read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.9 else data
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / FILES[which].name
        path.write_bytes(b"\n".join(lines))
        try:
            res = buddyinfo.parse(path, base.ParseContext(file_name=path.name))
        except ParseError:
            return
        res.coverage.check()
