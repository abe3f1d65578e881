"""Tests of analyzer/parsers/vmstat.py against the corpus fixtures in tests/fixtures/vmstat.

Golden values come from jc's expected JSON beside each jc .out file (an independent
parser) and, for the procps-ng 4.0.2 captures, from reading the files by hand.
The corpus has no locale replays for vmstat (procps prints integers only, no dates
except -t's fixed ISO form), so the locale test checks line-ending/NUL equivalence.
"""

from __future__ import annotations

import json
import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from blockwise import assert_same_as_one_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, vmstat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vmstat"
OUTPUTS = sorted(p for p in FIX.iterdir() if p.suffix not in (".json", ".md"))
JC_PAIRS = sorted(p for p in OUTPUTS if p.with_suffix(".json").exists())
LOCAL = "local-debian12-procps4.0.2__"


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = vmstat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _write(tmp: Path, text: str | bytes, name: str = "data.txt") -> Path:
    p = tmp / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed > 0
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    assert res.tables, "some table produced"
    for name, frame in res.tables.items():
        assert dict(frame.schema) == vmstat.TABLES[name].schema  # type: ignore[union-attr]


_JC_VM = {
    "runnable_procs": "r",
    "uninterruptible_sleeping_procs": "b",
    "virtual_mem_used": "swpd_kb",
    "free_mem": "free_kb",
    "buffer_mem": "buff_kb",
    "cache_mem": "cache_kb",
    "inactive_mem": "inact_kb",
    "active_mem": "active_kb",
    "swap_in": "si_kb_s",
    "swap_out": "so_kb_s",
    "blocks_in": "bi_blocks_s",
    "blocks_out": "bo_blocks_s",
    "interrupts": "in_per_s",
    "context_switches": "cs_per_s",
    "user_time": "us_pct",
    "system_time": "sy_pct",
    "idle_time": "id_pct",
    "io_wait_time": "wa_pct",
    "stolen_time": "st_pct",
}
_JC_DISK = {
    "disk": "disk",
    "total_reads": "reads_total",
    "merged_reads": "reads_merged",
    "sectors_read": "read_sectors",
    "reading_ms": "read_ms",
    "total_writes": "writes_total",
    "merged_writes": "writes_merged",
    "sectors_written": "write_sectors",
    "writing_ms": "write_ms",
    "current_io": "io_cur",
    "io_seconds": "io_s",
}


@pytest.mark.parametrize("path", JC_PAIRS, ids=lambda p: p.name)
def test_values_match_jc_expected_json(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text())
    # the jc CentOS -t captures were taken in PDT: give the parser that zone
    res = _parse(path, tz="America/Los_Angeles")
    is_disk = "disk" in expected[0]
    got = res.tables["vmstat_disk" if is_disk else "vmstat"].to_dicts()  # type: ignore[union-attr]
    assert len(got) == len(expected)
    for exp, row in zip(expected, got, strict=True):
        for jc_key, col in (_JC_DISK if is_disk else _JC_VM).items():
            assert row[col] == exp[jc_key], (jc_key, row)
        if exp.get("timestamp"):
            local = datetime.strptime(exp["timestamp"], "%Y-%m-%d %H:%M:%S")
            if exp["timezone"] == "UTC":
                assert row["ts"] == datetime.fromtimestamp(exp["epoch_utc"], UTC)
            else:  # PDT = UTC-7
                assert row["ts"] == local.replace(tzinfo=UTC) + timedelta(hours=7)
            assert row["ts_source"] == "printed"


def test_timestamp_zone_from_command_tz_prefix() -> None:
    path = FIX / f"{LOCAL}vmstat-tw-1-3_TZ-Europe-Berlin.txt"
    res = _parse(path, command="TZ=Europe/Berlin vmstat -t -w 1 3")
    t = res.tables["vmstat"]
    assert t["ts"].to_list() == [
        datetime(2026, 11, 29, 17, 23, s, tzinfo=UTC) for s in (36, 37, 38)
    ]
    assert t["gu_pct"].to_list() == [0.0, 0.0, 0.0]
    assert t["bo_blocks_s"][1] == 1186484.0 and t["free_kb"][0] == 21425440
    assert t["since_boot"].to_list() == [True, False, False]


def test_named_zone_without_host_zone_is_assumed_utc_and_noted() -> None:
    res = _parse(FIX / f"{LOCAL}vmstat-tw-1-3_TZ-Europe-Berlin.txt")
    assert res.tables["vmstat"]["ts"][0] == datetime(2026, 11, 29, 18, 23, 36, tzinfo=UTC)
    assert any("'CET'" in n and "assumed UTC" in n for n in res.coverage.notes)


def test_dst_gap_gives_null_ts_and_overlap_takes_the_earliest(tmp_path: Path) -> None:
    src = (FIX / f"{LOCAL}vmstat-tw-1-3_TZ-Europe-Berlin.txt").read_text().splitlines(True)
    rows = [src[2].replace("2026-11-29 18:23:36", "2026-03-29 02:30:00")]
    rows.append(src[3].replace("2026-11-29 18:23:37", "2026-10-25 02:30:00"))
    res = _parse(_write(tmp_path, "".join(src[:2] + rows)), tz="Europe/Berlin")
    t = res.tables["vmstat"]
    assert t["ts"].to_list() == [None, datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]
    assert t["ts_source"].to_list() == [None, "printed"]
    assert any("NULL ts" in n for n in res.coverage.notes)


def test_unit_megabytes_from_command_normalised_to_kb() -> None:
    path = FIX / f"{LOCAL}vmstat-w-SM-1-3.txt"
    t = _parse(path, command="vmstat -w -S M 1 3").tables["vmstat"]
    assert t["free_kb"].to_list() == [20927 * 1024] * 3
    assert t["cache_kb"][0] == 1779 * 1024 and t["bo_blocks_s"][1] == 1049156.0
    assert t["gu_pct"][0] == 0.0 and t["r"][0] == 27
    noted = _parse(path)
    assert noted.tables["vmstat"]["free_kb"][0] == 20927
    assert any("KiB" in n for n in noted.coverage.notes)
    small_k = _parse(path, command="vmstat -wSk 1 3").tables["vmstat"]
    assert small_k["free_kb"][0] == round(20927 * 1000 / 1024)


def test_header_repeat_and_one_header_give_25_rows() -> None:
    rep = _parse(FIX / f"{LOCAL}vmstat-1-25_header-repeat.txt")
    one = _parse(FIX / f"{LOCAL}vmstat-n-1-25_one-header.txt")
    assert rep.tables["vmstat"].height == 25 and one.tables["vmstat"].height == 25
    assert rep.coverage.structure == {"header": 4}
    row = rep.tables["vmstat"].row(21, named=True)  # first row after the repeated header
    assert (row["r"], row["bi_blocks_s"], row["bo_blocks_s"], row["sy_pct"]) == (
        4,
        36.0,
        1088800.0,
        63.0,
    )
    assert rep.tables["vmstat"]["since_boot"].sum() == 1


def test_without_t_rows_get_derived_ts_only_with_a_start_time() -> None:
    path = FIX / f"{LOCAL}vmstat-1-3.txt"
    start = datetime(2026, 11, 29, 17, 23, 36, tzinfo=UTC)
    t = _parse(path, capture_start=start, command="vmstat 1 3").tables["vmstat"]
    assert t["ts"].to_list() == [
        datetime(2026, 11, 29, 17, 23, s, tzinfo=UTC) for s in (36, 37, 38)
    ]
    assert t["ts_source"].to_list() == ["derived"] * 3
    bare = _parse(path)
    assert bare.tables["vmstat"]["ts"].null_count() == 3
    assert bare.tables["vmstat"]["ts_source"].null_count() == 3
    assert any("ts is NULL" in n for n in bare.coverage.notes)


def test_no_first_flag_clears_since_boot() -> None:
    t = _parse(FIX / f"{LOCAL}vmstat-1-3.txt", command="vmstat -y 1 3").tables["vmstat"]
    assert not t["since_boot"].any()


def test_active_inactive_layout() -> None:
    t = _parse(FIX / f"{LOCAL}vmstat-a-1-3.txt").tables["vmstat"]
    assert (t["inact_kb"][0], t["active_kb"][0], t["r"][0]) == (1712012, 1040900, 36)
    assert t["buff_kb"].null_count() == 3


def test_disk_report_with_timestamps() -> None:
    t = _parse(FIX / f"{LOCAL}vmstat-dt-1-2.txt").tables["vmstat_disk"]
    vda = t.filter(pl.col("disk") == "vda")
    assert vda["write_sectors"].to_list() == [10925840, 13106088]
    assert vda["ts"][1] == datetime(2026, 11, 29, 17, 23, 37, tzinfo=UTC)
    assert t.height == 20


def test_summary_lists() -> None:
    s = _parse(FIX / f"{LOCAL}vmstat-s.txt").tables["vmstat_summary"]
    d = {r["key"]: (r["value"], r["unit"]) for r in s.to_dicts()}
    assert d["total_memory"] == (24684084, "kB")
    assert d["io_wait_cpu_ticks"] == (341, "ticks")
    assert d["boot_time"] == (1795972360, "epoch_s")
    assert d["forks"] == (21480, "count")
    dd = _parse(FIX / f"{LOCAL}vmstat-D.txt").tables["vmstat_summary"]
    d = {r["key"]: (r["value"], r["unit"]) for r in dd.to_dicts()}
    assert d["disks"] == (10, "count") and d["milli_weighted_io"] == (38, "ms")
    assert d["written_sectors"] == (10925952, "sectors")


def test_crlf_and_nul_bytes_give_the_same_values(tmp_path: Path) -> None:
    src = FIX / f"{LOCAL}vmstat-t-1-3.txt"
    ref = _parse(src).tables["vmstat"]
    dirty = src.read_bytes().replace(b"\n", b"\r\n").replace(b" 0 ", b" \x000 ", 1)
    got = _parse(_write(tmp_path, dirty)).tables["vmstat"]
    assert got.equals(ref)


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    text = (FIX / f"{LOCAL}vmstat-1-3.txt").read_text()
    res = _parse(_write(tmp_path, text[:-20]))
    assert res.tables["vmstat"].height == 2
    assert res.coverage.skipped == {"truncated last line (no trailing newline)": 1}


def test_empty_header_only_and_garbage_files(tmp_path: Path) -> None:
    assert _parse(_write(tmp_path, "", "a")).tables == {}
    head = "".join((FIX / f"{LOCAL}vmstat-1-3.txt").read_text().splitlines(True)[:2])
    res = _parse(_write(tmp_path, head, "b"))
    assert res.tables == {} and res.coverage.structure == {"header": 2}
    with pytest.raises(ParseError):
        vmstat.parse(_write(tmp_path, "hello\nworld\n", "c"), base.ParseContext())


def test_garbage_and_stderr_lines_are_counted(tmp_path: Path) -> None:
    lines = (FIX / f"{LOCAL}vmstat-1-3.txt").read_text().splitlines(True)
    lines.insert(3, "vmstat: Unable to create system stat structure\n")
    lines.insert(4, "#### garbage ####\n")
    lines.insert(5, " 1 2 3\n")
    res = _parse(_write(tmp_path, "".join(lines)))
    assert res.tables["vmstat"].height == 3
    assert res.coverage.skipped == {
        "vmstat error message": 1,
        "unrecognized line": 1,
        "row does not fit its header (field count or header layout)": 1,
    }


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    src=st.sampled_from(OUTPUTS),
    cut=st.floats(0, 1),
    noise=st.lists(st.binary(max_size=40), max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_mutated_files_never_crash(src: Path, cut: float, noise: list[bytes], seed: int) -> None:
    data = src.read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.9 else data
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for n in noise:
        lines.insert(rnd.randrange(len(lines) + 1), n)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "data.txt"
        p.write_bytes(b"\n".join(lines))
        try:
            res = vmstat.parse(p, base.ParseContext(file_name="data.txt", tz="Europe/Berlin"))
        except ParseError:
            return
        res.coverage.check()


BLOCKWISE = ("vmstat-1-25_header-repeat.txt", "vmstat-dt-1-2.txt", "vmstat-s.txt")
BLOCKWISE += ("vmstat-tw-1-3_TZ-Europe-Berlin.txt",)


@pytest.mark.parametrize("path", [FIX / (LOCAL + n) for n in BLOCKWISE], ids=lambda p: p.name)
def test_tables_do_not_depend_on_the_block_size(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = datetime(2026, 11, 29, 17, 23, 36, tzinfo=UTC)
    assert_same_as_one_block(
        vmstat,
        path,
        (60, 700),
        monkeypatch,
        capture_start=start,
        interval_s=1.0,
        tz="Europe/Berlin",
    )


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_sniff_recognises_renamed_fixture(path: Path) -> None:
    assert vmstat.sniff(_read.read_head(path), "data.txt") >= 0.5


@pytest.mark.parametrize(
    "text",
    [
        "Linux 6.1.0 (host) \t11/29/26 \t_x86_64_\t(2 CPU)\n\navg-cpu:  %user   %nice %system\n",
        "nr_free_pages 5357036\nnr_zone_inactive_anon 1\npgpgin 2892865\n",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        "MemTotal:       24684084 kB\nMemFree:        21430380 kB\n",
        "17:23:36     CPU    %usr   %nice    %sys %iowait\n",
    ],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert vmstat.sniff(text, "vmstat") < 0.5
