"""Tests of analyzer/parsers/containers.py: the golden files beside each fixture in
tests/fixtures/containers (values read by hand), and a damaged JSON list costing only
itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.parsers import base, containers
from tests.parsers.golden import check, fixture_of

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "containers"
GOLDEN = sorted(FIX.glob("*.expected.json"))


def _parse(path: Path) -> base.ParseResult:
    res = containers.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    return res


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fixture_matches_its_golden_file(golden: Path) -> None:
    check(_parse(fixture_of(golden)), golden)


def test_an_element_without_an_id_is_left_out_with_a_note() -> None:
    res = _parse(FIX / "public__crictl-ps.end.out")
    assert "1 of 3 containers without an id" in res.coverage.notes


def test_a_cut_json_list_is_skipped_with_its_error(tmp_path: Path) -> None:
    f = tmp_path / "containers_crictl.end.out"
    f.write_text('{"containers": [{"id": "ab"\n')
    res = _parse(f)
    assert res.tables["containers"].height == 0
    (reason,) = res.coverage.skipped
    assert reason.startswith("not JSON:") and res.coverage.skipped[reason] == 1


def test_sniff_tells_the_forms_apart() -> None:
    assert containers.sniff((FIX / "public__crictl-ps.end.out").read_text(), "x") >= 0.9
    assert containers.sniff((FIX / "written__docker-ps.end.out").read_text(), "x") >= 0.85
    assert containers.sniff("Node 0, zone DMA 1 2\n", "x") == 0.0
