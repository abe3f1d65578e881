"""Tests of analyzer/parsers/cgroup.py on tests/fixtures/cgroup.

Golden values are read by hand from the fixture files (no jc parser exists for cgroup
files). The sampler series are built from real fixture lines wrapped in the capture's
documented prefix (docs/bundle-format.md); cgroup files have no locale variants.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import mutate

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, cgroup

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cgroup"
# .json files are the golden files beside the fixtures, not control files.
OUTPUTS = sorted(p for p in FIX.iterdir() if p.suffix not in (".json", ".md"))
CG = "/sys/fs/cgroup"


def _parse(path: Path, name: str | None = None) -> base.ParseResult:
    res = cgroup.parse(path, base.ParseContext(file_name=name or path.name))
    res.coverage.check()
    return res


def _t(res: base.ParseResult, table: str) -> pl.DataFrame:
    return res.tables[table].lazy().collect()


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    for name, frame in res.tables.items():
        assert dict(frame.lazy().collect().schema) == cgroup.TABLES[name].schema
    assert any("ts is NULL" in n for n in res.coverage.notes)


def test_v1_throttled_time_ns_normalised_to_usec() -> None:
    df = _t(_parse(FIX / "local-kernel6.18__cgroupv1-cpu__cpu.stat_throttled"), "cgroup_cpu")
    row = df.row(0, named=True)
    assert (row["nr_periods"], row["nr_throttled"], row["throttled_usec"]) == (41, 41, 3179427)
    assert row["cgroup"] is None and row["ts"] is None and row["throttled_pct"] is None


def test_v2_cpu_stat_with_and_without_cpu_controller() -> None:
    row = _t(_parse(FIX / "telegraf__v2__cpu.stat"), "cgroup_cpu").row(0, named=True)
    assert row["usage_usec"] == 98701325189 and row["nr_throttled"] == 6004
    assert row["throttled_usec"] == 19175137007 and row["force_idle_usec"] == 0
    row = _t(_parse(FIX / "telegraf__v2-nocpuctl__cpu.stat"), "cgroup_cpu").row(0, named=True)
    assert row["user_usec"] == 511415566817 and row["nr_periods"] is None


def test_memory_files_by_name_hint() -> None:
    res = _parse(FIX / "local-kernel6.18__cgroupv1-memory__memory.failcnt")
    assert _t(res, "cgroup_memory")["failcnt"].to_list() == [71]
    res = _parse(FIX / "local-kernel6.18__cgroupv1-memory__memory.oom_control_after-oom")
    row = _t(res, "cgroup_memory").row(0, named=True)
    assert row["events_oom_kill"] == 1 and row["under_oom"] == 0
    lim = _t(_parse(FIX / "local-kernel6.18__cgroupv1-cpu__cpu.cfs_quota_us"), "cgroup_limits")
    assert lim.select("key", "value", "unlimited", "source_key").rows() == [
        ("cpu.quota_us", 20000, False, "cpu.cfs_quota_us")
    ]
    stat = _t(_parse(FIX / "telegraf__v2__memory.stat"), "cgroup_memory_stat")
    kv = dict(zip(stat["key"], stat["value"], strict=True))
    assert kv["anon"] == 2471755776 and kv["file_dirty"] == 319488 and kv["pgmajfault"] == 8497
    ev = _t(_parse(FIX / "telegraf__v2__memory.events.local"), "cgroup_memory_stat")
    assert set(ev["file"]) == {"memory.events.local"} and ev.height == 6


def test_kind_from_content_when_renamed() -> None:
    res = _parse(FIX / "telegraf__v2__memory.events", name="data.txt")
    assert _t(res, "cgroup_memory")["events_oom_group_kill"].to_list() == [0]
    res = _parse(FIX / "local-kernel6.18__cgroupv1-memory__memory.stat_after-oom", name="x")
    kv = dict(zip(*_t(res, "cgroup_memory_stat").select("key", "value"), strict=True))
    assert kv["hierarchical_memory_limit"] == 67108864 and kv["pgfault"] == 24018


def _sampler(tmp: Path) -> Path:
    cpu = (FIX / "telegraf__v2__cpu.stat").read_text().splitlines()
    v1 = (FIX / "local-kernel6.18__cgroupv1-cpu__cpu.stat_throttled").read_text().splitlines()
    out = [f"1764424800.5 {CG}/train.slice/cpu.stat {ln}" for ln in cpu]
    out += [f"1764424800.5 {CG}/cpu,cpuacct/train/cpu.stat {ln}" for ln in v1]
    bump = {"usage_usec": 500000, "nr_periods": 10, "nr_throttled": 5, "throttled_usec": 20000}
    for ln in cpu:
        k, v = ln.split()
        out.append(f"1764424801.5 {CG}/train.slice/cpu.stat {k} {int(v) + bump.get(k, 0)}")
    out += [
        f"1764424800.6 {CG}/train.slice/cpu.max 50000 100000",
        f"1764424800.6 {CG}/cpu,cpuacct/train/cpu.shares 1024",
        f"1764424800.6 {CG}/cpu,cpuacct/train/cpu.cfs_quota_us -1",
        f"1764424800.7 {CG}/train.slice/memory.max max",
        f"1764424800.7 {CG}/train.slice/memory.current 2471755776",
        f"1764424800.7 {CG}/memory/train/memory.limit_in_bytes 9223372036854771712",
        f"1764424800.7 {CG}/train.slice/memory.pressure some avg10=0.00 avg60=0.00 avg300=0.00 total=1",
        f"1764424800.8 {CG}/train.slice/io.stat 259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=5 dios=6",
        f"1764424800.8 {CG}/train.slice/io.max 259:0 rbps=max wbps=1048576 riops=max wiops=max",
        f"1764424800.8 {CG}/my\\040group/memory.events oom_kill 3",
    ]
    p = tmp / "cgroup.out"
    p.write_text("\n".join(out) + "\n")
    return p


def test_sampler_series_normalises_v1_and_v2(tmp_path: Path) -> None:
    res = _parse(_sampler(tmp_path))
    assert res.coverage.skipped == {"psi line (psi parser)": 1}
    cpu = _t(res, "cgroup_cpu")
    train = cpu.filter(pl.col("cgroup") == "/train.slice").sort("ts")
    assert train["throttled_pct"].to_list() == [None, 50.0]
    assert train["throttled_ms_per_s"].to_list() == [None, 20.0]
    assert train["usage_pct"].to_list() == [None, 50.0]
    v1 = cpu.filter(pl.col("cgroup") == "/train").row(0, named=True)
    assert v1["throttled_usec"] == 3179427
    lim = _t(res, "cgroup_limits")
    got = {
        (c, k): (v, u)
        for c, k, v, u in lim.select("cgroup", "key", "value", "unlimited").iter_rows()
    }
    assert got[("/train.slice", "cpu.quota_us")] == (50000, False)
    assert got[("/train.slice", "cpu.period_us")] == (100000, False)
    assert got[("/train", "cpu.weight")] == (39, False)  # 1 + (1022 * 9999) // 262142
    assert got[("/train", "cpu.quota_us")] == (None, True)
    assert got[("/train", "memory.max_bytes")] == (None, True)
    assert got[("/train.slice", "memory.max_bytes")] == (None, True)
    assert got[("/train.slice", "io.max.wbps")] == (1048576, False)
    mem = _t(res, "cgroup_memory")
    assert mem.filter(pl.col("cgroup") == "/my group")["events_oom_kill"].to_list() == [3]
    io = _t(res, "cgroup_io").row(0, named=True)
    assert (io["device"], io["rbytes"], io["dios"]) == ("259:0", 1, 6)
    assert str(train["ts"][0]) == "2025-11-29 14:00:00.500000+00:00"


def test_empty_and_garbage(tmp_path: Path) -> None:
    p = tmp_path / "e"
    p.write_bytes(b"")
    res = _parse(p)
    assert all(f.lazy().collect().height == 0 for f in res.tables.values())
    p.write_text("what is this\nno idea\n")
    with pytest.raises(ParseError):
        _parse(p)


def test_sniff_recognizes_renamed_fixtures_and_rejects_other_tools(tmp_path: Path) -> None:
    for path in OUTPUTS:
        head = _read.read_head(path)
        if path.name.endswith(("failcnt", "cfs_quota_us")):
            continue  # a bare number is only recognisable with its file name
        assert cgroup.sniff(head, "data.txt") >= 0.5, path.name
    assert cgroup.sniff(_sampler(tmp_path).read_text(), "cgroup.out") >= 0.9
    others = [
        "nr_free_pages 1276842\nnr_dirty 12\npgpgin 100\npgfault 5\nanon_thp 0\n",
        "MemTotal:  1 kB\nMemFree:  1 kB\n",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        "1764424800.002 /proc/pressure/cpu some avg10=1.20 avg60=0.80 avg300=0.31 total=96242289\n",
        "1764424800.002 /proc/meminfo MemTotal: 1 kB\n1764424800.002 /proc/meminfo MemFree: 1 kB\n",
    ]
    for text in others:
        assert cgroup.sniff(text, "data.txt") < 0.5, text


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idx=st.integers(0, len(OUTPUTS)), seed=st.integers(0, 2**32), op=st.integers(0, 2))
def test_mutated_inputs_never_crash(idx: int, seed: int, op: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        src = _sampler(Path(d)) if idx == len(OUTPUTS) else OUTPUTS[idx]
        data = mutate(src.read_bytes(), seed, op)
        p = Path(d) / "m"
        p.write_bytes(data)
        try:
            res = cgroup.parse(p, base.ParseContext(file_name=src.name))
        except ParseError:
            return
        res.coverage.check()
        for f in res.tables.values():
            f.lazy().collect()
