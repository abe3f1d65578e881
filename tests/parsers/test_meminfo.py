"""Tests of analyzer/parsers/meminfo.py (tool ``proc_meminfo``) on tests/fixtures/proc_meminfo.

Golden values: jc's expected JSON (independent parser) for the jc sample, and values read
by hand from the node_exporter and 6.18 files. /proc/meminfo has no locale variants; the
sampler form is built from real fixture lines wrapped in the capture's documented prefix.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import mutate

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, meminfo

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "proc_meminfo"
# .json files are jc's expected results, not /proc/meminfo output.
OUTPUTS = sorted(p for p in FIX.iterdir() if p.suffix not in (".json", ".md"))


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = meminfo.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _frame(res: base.ParseResult) -> pl.DataFrame:
    return res.tables["meminfo"].lazy().collect()


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    df = _frame(res)
    assert dict(df.schema) == meminfo.TABLES["meminfo"].schema
    assert df["ts"].null_count() == df.height
    assert any("ts is NULL" in n for n in res.coverage.notes)


def test_jc_sample_matches_jc_expected_json() -> None:
    expected = json.loads((FIX / "jc__linux-proc__meminfo.json").read_text())
    df = _frame(_parse(FIX / "jc__linux-proc__meminfo.txt"))
    got = {
        k: (kb if kb is not None else c)
        for k, kb, c in df.select("key", "value_kb", "count").iter_rows()
    }
    assert got == expected


def test_hand_read_values_and_unitless_keys() -> None:
    df = _frame(_parse(FIX / "node_exporter-fixtures__meminfo"))
    row = dict(zip(df["key"], df["value_kb"], strict=True))
    assert row["MemTotal"] == 3742148
    assert row["Active(anon)"] == 2020004
    assert "MemAvailable" not in row  # pre-3.14 kernel
    huge = df.filter(pl.col("key") == "HugePages_Total")
    assert huge["value_kb"].to_list() == [None] and huge["count"].to_list() == [0]
    df = _frame(_parse(FIX / "local-kernel6.18__host-loaded__meminfo"))
    row = dict(zip(df["key"], df["value_kb"], strict=True))
    assert (
        row["Zswapped"] == 0
        and row["VmallocTotal"] == 34359738367
        and row["DirectMap1G"] == 25165824
    )


def test_sampler_series_gets_utc_timestamps_and_nodes(tmp_path: Path) -> None:
    lines = (FIX / "oomd-fixtures__meminfo").read_text().splitlines()
    text = "".join(f"1764424800.25 /proc/meminfo {ln}\n" for ln in lines)
    text += "".join(f"1764424801 /proc/meminfo {ln}\n" for ln in lines)
    text += "1764424801 /sys/devices/system/node/node1/meminfo Node 1 MemFree:  1234 kB\n"
    text += "1764424801 /proc/pressure/cpu some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    p = tmp_path / "meminfo.out"
    p.write_text(text)
    res = _parse(p)
    df = _frame(res)
    assert res.coverage.parsed == 2 * len(lines) + 1
    assert res.coverage.skipped == {"sampler line of another file": 1}
    first = df.filter(pl.col("key") == "MemAvailable")
    assert first["value_kb"].to_list() == [49878948, 49878948]
    assert str(first["ts"][0]) == "2025-11-29 14:00:00.250000+00:00"
    node = df.filter(pl.col("node") == 1)
    assert node.select("key", "value_kb").rows() == [("MemFree", 1234)]
    assert meminfo.sniff(text, "meminfo.out") >= 0.9


def test_crlf_nul_and_garbage_are_accounted(tmp_path: Path) -> None:
    raw = (FIX / "sysstat-tests-root1__meminfo").read_bytes()
    p = tmp_path / "x"
    p.write_bytes(raw.replace(b"\n", b"\r\n").replace(b"kB", b"k\x00B", 1) + b"garbage here\n\n")
    res = _parse(p)
    assert res.coverage.skipped == {"not a meminfo line": 1}
    assert res.coverage.structure == {"blank": 1}
    assert _frame(res).filter(pl.col("key") == "MemTotal")["value_kb"].to_list() == [8144960]


def test_empty_file_gives_empty_table_and_garbage_raises(tmp_path: Path) -> None:
    p = tmp_path / "empty"
    p.write_bytes(b"")
    assert _frame(_parse(p)).height == 0
    p.write_text("hello\nworld\n")
    with pytest.raises(ParseError):
        _parse(p)


def test_sniff_recognizes_renamed_fixtures_and_rejects_other_tools() -> None:
    for path in OUTPUTS:
        assert meminfo.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name
    others = [
        "nr_free_pages 1276842\nnr_dirty 12\npgpgin 100\npgfault 5\n",
        "procs -----------memory----------\n r  b   swpd   free\n 1  0      0 123 \n",
        "anon 1056014336\nfile 11877441536\npgfault 1\n",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    ]
    for text in others:
        assert meminfo.sniff(text, "data.txt") < 0.5


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idx=st.integers(0, len(OUTPUTS) - 1), seed=st.integers(0, 2**32), op=st.integers(0, 2))
def test_mutated_fixtures_never_crash(idx: int, seed: int, op: int) -> None:
    data = mutate(OUTPUTS[idx].read_bytes(), seed, op)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m"
        p.write_bytes(data)
        try:
            res = meminfo.parse(p, base.ParseContext())
        except ParseError:
            return
        res.coverage.check()
        _frame(res)
