"""Tests of analyzer/parsers/proc_cgroup.py: the golden files beside each fixture in
tests/fixtures/proc_cgroup (values read by hand from the lines), one bad line costing
only itself, and the split of joined lines when a path holds a '|'."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.parsers import base, proc_cgroup
from tests.parsers.golden import check, fixture_of

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "proc_cgroup"
GOLDEN = sorted(FIX.glob("*.expected.json"))


def _parse(path: Path) -> base.ParseResult:
    res = proc_cgroup.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    return res


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_fixture_matches_its_golden_file(golden: Path) -> None:
    check(_parse(fixture_of(golden)), golden)


def test_a_pipe_inside_a_path_stays_in_the_path_and_a_truncated_line_is_counted(
    tmp_path: Path,
) -> None:
    f = tmp_path / "proc_cgroup.out"
    f.write_text(
        "1796184300 10 4:memory:/jobs/a|b|1:cpu:/train\n"
        "garbage\n"
        "1796184305 11 0::/train.slice/x.service"  # no newline: cut short
    )
    res = _parse(f)
    (row,) = res.tables["process_cgroups"].to_dicts()
    assert row["memory_cgroup"] == "/jobs/a|b" and row["cpu_cgroup"] == "/train"
    assert row["cgroup"] == "/train"
    assert res.coverage.skipped == {
        "not '<epoch> <pid> <hierarchy>:<controllers>:<path>|…'": 1,
        "truncated last line (no trailing newline)": 1,
    }


def test_sniff_knows_its_lines_and_not_others() -> None:
    head = (FIX / "local-capture__v1-host.out").read_text()
    assert proc_cgroup.sniff(head, "series/proc_cgroup.out") >= 0.9
    assert proc_cgroup.sniff("Node 0, zone DMA 1 2 3\n", "x") == 0.0
