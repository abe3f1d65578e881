"""Tests of analyzer/parsers/interrupts.py (/proc/interrupts, /proc/softirqs) against
tests/fixtures/snapshots. Golden values are read by hand from the files; the kernel prints
no localised numbers, so a CRLF/NUL-damaged copy stands in for a locale replay.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, interrupts

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
FILES = sorted(
    p
    for p in FIX.iterdir()
    if ("interrupts" in p.name or "softirqs" in p.name) and not p.name.endswith(".golden.json")
)


def _parse(path: Path) -> base.ParseResult:
    res = interrupts.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    return res


def test_fixture_set() -> None:
    assert len(FILES) == 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed_pct == 100.0 and res.coverage.structure == {"header": 1}
    ((name, table),) = res.tables.items()
    assert dict(table.schema) == interrupts.TABLES[name].schema  # type: ignore[union-attr]
    assert table["count"].null_count() == 0  # type: ignore[index]


def test_interrupts_rows_chip_and_totals() -> None:
    t = _parse(FIX / "ref-vm__interrupts.start.out").tables["interrupts"]
    rows = {(r["irq"], r["cpu"]): r for r in t.to_dicts()}  # type: ignore[union-attr]
    tty = rows[("26", 1)]
    assert (tty["count"], tty["chip"], tty["hwirq"], tty["name"]) == (
        15,
        "IO-APIC",
        "4-edge",
        "ttyS0",
    )
    assert rows[("26", 0)]["count"] == 0
    assert (rows[("LOC", 0)]["count"], rows[("LOC", 1)]["count"]) == (196638, 202772)
    assert (rows[("LOC", 0)]["chip"], rows[("LOC", 0)]["name"]) == (None, "Local timer interrupts")
    assert rows[("ERR", None)]["count"] == 0 and rows[("MIS", None)]["count"] == 0
    virt = rows[("36", 1)]
    assert (virt["count"], virt["chip"], virt["name"]) == (
        129724,
        "PCI-MSIX-0000:00:02.0",
        "virtio1-req.0",
    )
    wide = _parse(FIX / "ref-h200__interrupts.start.out").tables["interrupts"]
    assert wide.filter(wide["irq"] == "24")["cpu"].to_list() == list(range(16))  # type: ignore[index,union-attr]


def test_softirqs() -> None:
    t = _parse(FIX / "ref-vm__softirqs.start.out").tables["softirqs"]
    rows = {(r["softirq"], r["cpu"]): r["count"] for r in t.to_dicts()}  # type: ignore[union-attr]
    assert (rows[("NET_RX", 0)], rows[("NET_RX", 1)], rows[("BLOCK", 1)]) == (5936, 7140, 129717)
    assert t.height == 20


def test_offline_cpu_numbers_come_from_the_header(tmp_path: Path) -> None:
    p = tmp_path / "interrupts.txt"
    p.write_text(
        "           CPU0       CPU2\n  0:         10          7  IO-APIC   2-edge      timer\n"
    )
    rows = _parse(p).tables["interrupts"].to_dicts()  # type: ignore[union-attr]
    assert [(r["cpu"], r["count"]) for r in rows] == [(0, 10), (2, 7)]


def test_crlf_and_nul_damage_give_the_same_rows(tmp_path: Path) -> None:
    src = FIX / "ref-vm__interrupts.start.out"
    bad = tmp_path / src.name
    bad.write_bytes(src.read_bytes().replace(b"\n", b"\r\n").replace(b"LOC", b"L\x00OC"))
    assert (
        _parse(bad).tables["interrupts"].to_dicts() == _parse(src).tables["interrupts"].to_dicts()
    )  # type: ignore[union-attr]


def test_renamed_fixtures_are_recognised_and_others_rejected() -> None:
    for path in FILES:
        assert interrupts.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name
    for text in (
        "12:00:01 AM  CPU    intr/s\n12:00:02 AM  all   1234.00\n",
        "Linux 6.1.0 (host) \t11/29/2026 \t_x86_64_\t(2 CPU)\n\n12:00:01 AM  CPU  HI/s  TIMER/s\n",
        "Node 0, zone      DMA      0      0      0\n",
        "vm.swappiness = 60\n",
    ):
        assert interrupts.sniff(text, "data.txt") < 0.5


def test_garbage_only_is_a_parse_error(tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    p.write_text("nothing\n")
    with pytest.raises(ParseError):
        interrupts.parse(p, base.ParseContext(file_name=p.name))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 4),
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
            res = interrupts.parse(path, base.ParseContext(file_name=path.name))
        except ParseError:
            return
        res.coverage.check()
