"""Who in memory findings (issue #19), on real captures of the real-incident library:
the process that swapped or whose RSS grew is named with its share, from pidstat; a
memory cgroup's finding names only its own processes, which needs the proc_cgroup
sampler (these bundles predate it: nobody is named rather than a stranger)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.pipeline import Options, run

REAL = Path(__file__).resolve().parents[2] / "samples" / "real"


def _findings(name: str) -> tuple[list[dict], dict]:
    truth = json.loads((REAL / f"{name}.truth.json").read_text())
    return run(REAL / f"{name}.tgz", Options()).findings, truth


@pytest.fixture(scope="module")
def swap() -> tuple[list[dict], dict]:
    return _findings("swap")


def test_swapping_names_the_swapper_by_its_major_faults(swap) -> None:
    found, truth = swap
    (pid,) = {p for i in truth["incidents"] for p in i["pids"]}
    swaps = [f for f in found if f["kind"] == "swap_activity"]
    assert len(swaps) == 2
    for f in swaps:
        top = f["impact"]["who"][0]
        assert top["pids"] == [pid] and top["unit"] == "major faults" and top["share"] > 0


def test_a_memory_cgroup_finding_without_the_cgroup_sampler_names_nobody(swap) -> None:
    found, _ = swap
    cg = [f for f in found if f["kind"] == "memory_pressure" and f["impact"].get("cgroup")]
    assert cg and all("who" not in f["impact"] for f in cg)


def test_host_memory_pressure_names_the_process_whose_rss_grew() -> None:
    found, truth = _findings("host-reclaim")
    ramp = next(i for i in truth["incidents"] if i["id"] == "reclaim-anon-ramp")
    f = next(f for f in found if f["kind"] == "memory_pressure" and f["impact"].get("who"))
    top = f["impact"]["who"][0]
    assert top["pids"] == ramp["pids"] and top["unit"] == "MB RSS grown"
    assert top["share"] >= 1000  # the ramp allocated GBs
