"""Tests of analyzer/parsers/nvidia_smi_q.py (fixtures: tests/fixtures/nvidia-smi, -q text and XML).

Golden values are read by hand from the telegraf XML test files and the text snippets.
nvidia-smi has no locale variants (it ignores LANG for -q), so there is no locale test.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, nvidia_smi_q

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
Q_FILES = sorted(
    p
    for p in FIX.iterdir()
    if (p.suffix == ".xml" or "__q-" in p.name) and not p.name.endswith(".golden.json")
)
A100 = FIX / "telegraf__a100-sxm4-v12.xml"
DUAL = FIX / "telegraf-pr17482__dual_a5000-v13.xml"
T4 = FIX / "telegraf__tesla-t4.xml"
GTX = FIX / "telegraf__gtx-1660-ti.xml"
TEXT = FIX / "gh-issue__sysmon-12__q-text-head-driver-450.txt"
OLD_TEXT = FIX / "gh-issue__gnome-shell-system-monitor-356__q-d-memory-util-driver-375.txt"
FRAG = FIX / "gh-issue__ollama-10393__q-text-fragment-clocks-event-reasons.txt"


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = nvidia_smi_q.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _write(tmp: Path, data: str | bytes, name: str = "data.txt") -> Path:
    p = tmp / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("path", Q_FILES, ids=lambda p: p.name)
def test_every_q_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    frame = res.tables["gpu_info"]
    assert dict(frame.schema) == nvidia_smi_q.TABLES["gpu_info"].schema  # type: ignore[union-attr]
    assert frame.height >= 1
    # the only skipped line in the corpus is the pasted shell prompt of the sysmon snippet
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= (
        96 if path == TEXT else 99
    )


def test_xml_v12_golden_values() -> None:
    row = _parse(A100, tz="UTC").tables["gpu_info"].row(0, named=True)
    assert row["ts"] == datetime(2023, 8, 4, 11, 44, 30, tzinfo=UTC)
    assert (row["gpu"], row["pci_bus_id"], row["name"]) == (
        0,
        "00000000:01:00.0",
        "NVIDIA A100-SXM4-80GB",
    )
    assert row["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert (row["driver_version"], row["cuda_version"], row["vbios"]) == (
        "535.54.03",
        "12.2",
        "92.00.36.00.02",
    )
    assert (row["persistence_mode"], row["compute_mode"], row["mig_mode"]) == (
        "Disabled",
        "Default",
        "Enabled",
    )
    assert (
        row["power_draw_w"],
        row["power_limit_w"],
        row["enforced_power_limit_w"],
        row["max_power_limit_w"],
    ) == (67.03, 500.0, 500.0, 500.0)
    assert (row["temp_c"], row["temp_slowdown_c"], row["temp_shutdown_c"]) == (27, 89, 92)
    assert (row["mem_total_mib"], row["mem_used_mib"]) == (81920, 50)
    assert (
        row["sm_clock_mhz"],
        row["mem_clock_mhz"],
        row["max_sm_clock_mhz"],
        row["max_mem_clock_mhz"],
    ) == (1275, 1593, 1410, 1593)
    assert (row["ecc_mode"], row["ecc_volatile_uncorrected"], row["ecc_aggregate_uncorrected"]) == (
        "Enabled",
        0,
        0,
    )
    assert row["retired_pages"] is None and row["remapped_rows_pending"] is None  # N/A in the file
    assert row["throttle_reasons_active"] == ""
    assert (row["pcie_gen"], row["pcie_gen_max"], row["pcie_width"], row["pcie_width_max"]) == (
        4,
        4,
        16,
        16,
    )


def test_xml_v13_two_gpus_and_new_power_element_names() -> None:
    df = _parse(DUAL).tables["gpu_info"]
    assert df["gpu"].to_list() == [0, 1]
    assert df["pci_bus_id"].to_list() == ["00000000:81:00.0", "00000000:C1:00.0"]
    assert df["power_draw_w"][0] == 6.41  # average_power_draw (instant is 6.52)
    assert df["mem_used_mib"].to_list() == [22437, 17253]
    assert df["throttle_reasons_active"].to_list() == ["gpu_idle", "gpu_idle"]
    assert df["remapped_rows_pending"].to_list() == [False, False]


def test_xml_without_doctype_old_throttle_element_names() -> None:
    row = _parse(GTX).tables["gpu_info"].row(0, named=True)
    assert (row["name"], row["power_limit_w"], row["power_draw_w"]) == (
        "Graphics Device",
        130.0,
        8.93,
    )
    assert row["throttle_reasons_active"] == "gpu_idle" and row["ecc_mode"] is None


def test_xml_retired_pages() -> None:
    row = _parse(T4).tables["gpu_info"].row(0, named=True)
    assert (row["retired_pages"], row["retired_pages_pending"]) == (0, False)


def test_text_golden_values() -> None:
    res = _parse(TEXT, tz="UTC")
    row = res.tables["gpu_info"].row(0, named=True)
    assert row["ts"] == datetime(2020, 10, 10, 17, 2, 53, tzinfo=UTC)
    assert (row["gpu"], row["pci_bus_id"], row["name"]) == (
        0,
        "00000000:01:00.0",
        "GeForce GTX 780",
    )
    assert (row["driver_version"], row["cuda_version"]) == ("450.66", "11.0")
    assert row["uuid"] == "GPU-a230e637-c9e1-1b61-3830-a437b874d88d"
    assert (row["vbios"], row["persistence_mode"], row["mig_mode"]) == (
        "80.80.31.00.0D",
        "Disabled",
        None,
    )
    assert res.coverage.skipped == {"shell prompt, not nvidia-smi output": 1}


def test_old_text_without_cuda_version() -> None:
    row = _parse(OLD_TEXT).tables["gpu_info"].row(0, named=True)
    assert (row["pci_bus_id"], row["driver_version"], row["cuda_version"]) == (
        "0000:01:00.0",
        "375.66",
        None,
    )
    assert (row["mem_total_mib"], row["mem_used_mib"], row["compute_mode"]) == (
        1995,
        1934,
        "Default",
    )


def test_text_fragment_has_null_gpu_and_active_event_reasons() -> None:
    res = _parse(FRAG)
    row = res.tables["gpu_info"].row(0, named=True)
    assert row["gpu"] is None and row["throttle_reasons_active"] == "gpu_idle"
    assert (row["mem_total_mib"], row["mem_used_mib"], row["performance_state"]) == (
        16376,
        8415,
        "P8",
    )
    assert any("fragment" in n for n in res.coverage.notes)


def test_truncated_xml_keeps_complete_gpus(tmp_path: Path) -> None:
    text = DUAL.read_text()
    cut = text.index('<gpu id="00000000:C1:00.0">') + 500
    res = _parse(_write(tmp_path, text[:cut], "q.xml"))
    assert res.tables["gpu_info"]["pci_bus_id"].to_list() == ["00000000:81:00.0"]
    assert res.coverage.skipped.get("incomplete <gpu> element (truncated)", 0) > 0


def test_entity_declarations_are_refused(tmp_path: Path) -> None:
    bomb = '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a "aaaaaaaaaa">\n<!ENTITY b "&a;&a;&a;&a;">\n]>\n<nvidia_smi_log><driver_version>&b;</driver_version></nvidia_smi_log>\n'
    res = _parse(_write(tmp_path, bomb, "q.xml"))
    assert res.tables["gpu_info"].height == 0
    assert res.coverage.n_skipped == res.coverage.total


def test_empty_and_foreign_xml(tmp_path: Path) -> None:
    assert _parse(_write(tmp_path, "")).tables["gpu_info"].height == 0
    with pytest.raises(ParseError):
        nvidia_smi_q.parse(_write(tmp_path, "<html><body/></html>\n"), base.ParseContext())


def test_sniff_recognizes_renamed_fixtures_and_rejects_others() -> None:
    for p in (A100, GTX, TEXT, FRAG):
        assert nvidia_smi_q.sniff(_read.read_head(p), "data.txt") >= 0.8, p.name
    assert (
        nvidia_smi_q.sniff("# gpu   pwr  temp\n# Idx     W     C\n    0   111    83\n", "data.txt")
        < 0.5
    )
    assert (
        nvidia_smi_q.sniff("MemTotal:       16318480 kB\nMemFree:         1234 kB\n", "data.txt")
        < 0.5
    )
    assert nvidia_smi_q.sniff("[    0.000000] Linux version 6.1.0\n", "data.txt") < 0.5


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    src=st.sampled_from([GTX, TEXT, FRAG]),
    mode=st.sampled_from(["cut", "garbage", "bytes"]),
)
def test_mutated_input_never_crashes(tmp_path: Path, seed: int, src: Path, mode: str) -> None:
    rng = random.Random(seed)
    data = src.read_bytes()
    if mode == "cut":
        data = data[: rng.randrange(len(data) + 1)]
    elif mode == "garbage":
        lines = data.split(b"\n")
        for _ in range(rng.randint(1, 4)):
            lines.insert(
                rng.randrange(len(lines) + 1),
                rng.choice([b"<gpu>", b"junk : x", b"</a>", b"    Clocks", b"\xff"]),
            )
        data = b"\n".join(lines)
    else:
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        data = bytes(buf)
    path = _write(tmp_path, data, f"m{seed}.txt")
    try:
        res = nvidia_smi_q.parse(path, base.ParseContext())
    except ParseError:
        return
    res.coverage.check()
