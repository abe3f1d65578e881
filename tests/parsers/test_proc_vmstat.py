"""Tests of analyzer/parsers/proc_vmstat.py on tests/fixtures/proc_vmstat.

Golden values: jc's expected JSON (independent parser) for the jc sample; hand-read values
from the node_exporter and 6.18 files. Rates and counter resets are checked on a sampler
series built from real fixture lines with the capture's documented prefix.
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
from analyzer.parsers import _read, base, proc_vmstat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "proc_vmstat"
# .json files are jc's expected results, not /proc/vmstat output.
OUTPUTS = sorted(p for p in FIX.iterdir() if p.suffix not in (".json", ".md"))


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = proc_vmstat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _frame(res: base.ParseResult) -> pl.DataFrame:
    return res.tables["proc_vmstat"].lazy().collect()


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    df = _frame(res)
    assert dict(df.schema) == proc_vmstat.TABLES["proc_vmstat"].schema
    assert df["rate_per_s"].null_count() == df.height  # a snapshot has no rates


def test_jc_sample_matches_jc_expected_json() -> None:
    expected = json.loads((FIX / "jc__linux-proc__vmstat.json").read_text())
    df = _frame(_parse(FIX / "jc__linux-proc__vmstat.txt"))
    assert dict(zip(df["key"], df["value"], strict=True)) == expected


def test_hand_read_values_and_gauge_classification() -> None:
    df = _frame(_parse(FIX / "node_exporter-fixtures__vmstat"))
    row = dict(zip(df["key"], df["value"], strict=True))
    assert row["oom_kill"] == 0
    kinds = dict(zip(df["key"], df["counter"], strict=True))
    assert kinds["nr_dirty"] is False and kinds["nr_free_pages"] is False
    assert kinds["pgpgin"] is True and kinds["nr_dirtied"] is True and kinds["oom_kill"] is True
    df = _frame(_parse(FIX / "local-kernel6.18__host-loaded__vmstat"))
    row = dict(zip(df["key"], df["value"], strict=True))
    assert row["nr_free_pages"] == 1276842 and row["numa_hit"] == 25238744


def test_sampler_rates_and_counter_reset(tmp_path: Path) -> None:
    lines = (FIX / "sysstat-tests-root1__vmstat").read_text().splitlines()
    text = "".join(f"1764424800.5 /proc/vmstat {ln}\n" for ln in lines)
    text += "1764424802.5 /proc/vmstat pgfault 999999999999\n"
    text += "1764424802.5 /proc/vmstat nr_dirty 1\n"
    text += "1764424803.5 /proc/vmstat pgfault 10\n"
    p = tmp_path / "proc_vmstat.out"
    p.write_text(text)
    res = _parse(p)
    df = _frame(res)
    pg = df.filter(pl.col("key") == "pgfault")
    first = pg["value"][0]
    assert pg["rate_per_s"].to_list() == [None, (999999999999 - first) / 2.0, None]
    assert df.filter(pl.col("key") == "nr_dirty")["rate_per_s"].to_list() == [None, None]
    assert any("counter reset" in n for n in res.coverage.notes)
    assert proc_vmstat.sniff(text, "proc_vmstat.out") >= 0.9


def test_empty_file_and_garbage(tmp_path: Path) -> None:
    p = tmp_path / "e"
    p.write_bytes(b"")
    assert _frame(_parse(p)).height == 0
    p.write_text("not at all\n")
    with pytest.raises(ParseError):
        _parse(p)


def test_sniff_recognizes_renamed_fixtures_and_rejects_other_tools() -> None:
    for path in OUTPUTS:
        assert proc_vmstat.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name
    others = [
        "MemTotal:  1 kB\nMemFree:  1 kB\nBuffers: 1 kB\nCached: 1 kB\n",
        "anon 1056014336\nfile 11877441536\npgfault 1\npgmajfault 2\nworkingset_refault 0\n",
        "nr_periods 41\nnr_throttled 41\nthrottled_time 3179427297\n",
        "procs -----------memory---------- ---swap-- -----io----\n r  b   swpd   free\n",
    ]
    for text in others:
        assert proc_vmstat.sniff(text, "data.txt") < 0.5


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idx=st.integers(0, len(OUTPUTS) - 1), seed=st.integers(0, 2**32), op=st.integers(0, 2))
def test_mutated_fixtures_never_crash(idx: int, seed: int, op: int) -> None:
    data = mutate(OUTPUTS[idx].read_bytes(), seed, op)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m"
        p.write_bytes(data)
        try:
            res = proc_vmstat.parse(p, base.ParseContext())
        except ParseError:
            return
        res.coverage.check()
        _frame(res)
