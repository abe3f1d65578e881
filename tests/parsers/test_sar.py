"""sar text parser: every fixture, golden values read by hand, locales, hostile input, sniff."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from blockwise import assert_same_as_one_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, sar

FIX = Path(__file__).parent.parent / "fixtures" / "sar"
FILES = sorted(
    p for p in FIX.iterdir() if p.name != "PROVENANCE.md" and not p.name.endswith(".golden.json")
)
UTC0 = base.ParseContext(tz="UTC0")
# Upstream output where sar itself printed rows that do not fit their header: 6 USB rows
# after the `CPU MHz` section without a `BUS` header, and an offline CPU row with one
# field missing. They are skipped with a reason; the rest of the file parses.
BELOW_99 = {"sysstat-12.7.9+__tests__expected.data-ini": 98.0}


def _parse(name: str, ctx: base.ParseContext = UTC0) -> base.ParseResult:
    return sar.parse(FIX / name, ctx)


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_fixture_parses_with_full_coverage(path: Path) -> None:
    res = sar.parse(path, UTC0)
    res.coverage.check()
    assert res.coverage.parsed_pct is not None
    assert res.coverage.parsed_pct >= BELOW_99.get(path.name, 99.0), res.coverage.skipped
    for name, frame in res.tables.items():
        assert dict(frame.schema) == sar.TABLES[name].schema


def test_c_locale_live_cpu_golden_values() -> None:
    cpu = _parse("local-debian12-sysstat12.6.1__sar-u-LC_C-1-3.txt").tables["sar_cpu"]
    assert cpu.height == 3
    row = cpu.row(0, named=True)
    assert row["ts"] == _ts("2026-11-29 17:23:37")
    assert (row["cpu"], row["user_pct"], row["system_pct"], row["idle_pct"]) == (
        -1,
        55.5,
        44.5,
        0.0,
    )
    assert cpu["iowait_pct"].to_list() == [0.0, 0.0, 1.0]


def test_de_de_live_run_decimal_comma_golden_values() -> None:
    cpu = _parse("local-debian12-sysstat12.6.1__sar-u-de_DE-1-3.txt").tables["sar_cpu"]
    assert cpu["user_pct"].to_list() == [55.5, 57.79, 49.5]
    assert cpu["iowait_pct"].to_list() == [0.0, 0.0, 0.99]
    assert cpu["ts"][2] == _ts("2026-11-29 17:23:39")


def test_en_us_live_run_12_hour_clock_golden_values() -> None:
    res = _parse("local-debian12-sysstat12.6.1__sar-u-en_US-1-3.txt")
    cpu = res.tables["sar_cpu"]
    assert cpu["ts"].to_list() == [_ts(f"2026-11-29 17:23:3{s}") for s in (7, 8, 9)]
    assert cpu["user_pct"].to_list() == [55.78, 57.0, 50.0]
    assert res.coverage.structure["average"] == 1


def test_locale_replays_of_one_sa_file_give_identical_values() -> None:
    results = [_parse(f"replay__sysstat12.6.1__sar-A.{loc}.txt") for loc in ("C", "de_DE", "en_US")]
    ref = results[0].tables
    assert {"sar_cpu", "sar_queue", "sar_psi", "sar_paging", "sar_memory", "sar_net_dev"} <= set(
        ref
    )
    for other in results[1:]:
        assert set(other.tables) == set(ref)
        for name, frame in ref.items():
            assert other.tables[name].equals(frame), name


def test_replay_golden_values_read_from_the_file() -> None:
    t = _parse("replay__sysstat12.6.1__sar-A.C.txt").tables
    first = t["sar_paging"].row(0, named=True)
    assert first["ts"] == _ts("2026-11-29 18:17:39")
    assert (first["pgpgout_kb_s"], first["pgfree_s"], first["vmeff_pct"]) == (284672.0, 458.0, 0.0)
    assert first["pgprom_s"] is None
    mem = t["sar_memory"].row(0, named=True)
    assert (mem["kbmemfree"], mem["kbavail"], mem["kbmemused"], mem["memused_pct"]) == (
        23836940,
        24248748,
        97036,
        0.39,
    )
    assert mem["kbshmem"] is None  # 12.6.1 has no kbshmem


def test_midnight_rollover_adds_a_day() -> None:
    t = _parse("sysstat-12.7.9+__tests__expected.sar-cd").tables
    want = [_ts("2019-05-01 23:59:59"), _ts("2019-05-02 00:00:00")]
    assert t["sar_cpu"]["ts"].to_list() == want
    assert t["sar_task"]["ts"].to_list() == want  # next activity restarts at the file start
    assert t["sar_task"]["cswch_s"].to_list() == [46287.74, 64945.01]


def test_sysstat_9_memory_has_no_kbavail() -> None:
    mem = _parse("localbuild-sysstat-9.1.5__sar-r-f.txt").tables["sar_memory"]
    row = mem.row(0, named=True)
    assert (row["kbmemfree"], row["kbmemused"], row["memused_pct"], row["kbcommit"]) == (
        22717408,
        1966676,
        7.97,
        432560,
    )
    assert row["kbavail"] is None and row["kbactive"] is None


def test_sysstat_12_7_paging_pgprom_and_memory_kbshmem() -> None:
    t = _parse("sysstat-12.7.9+__tests__expected.sar-A").tables
    pg = t["sar_paging"].row(0, named=True)
    assert (pg["pgsteal_s"], pg["pgprom_s"], pg["pgdem_s"], pg["vmeff_pct"]) == (
        0.55,
        179.85,
        31.7,
        None,
    )
    assert t["sar_memory"]["kbshmem"][0] == 87980
    net = t["sar_net_dev"].filter(pl.col("iface") == "virbr0-1").row(0, named=True)
    assert (net["rxpck_s"], net["txkb_s"], net["rxmcst_s"]) == (22.46, 0.13, 320.82)


def test_psi_sections_become_rows_per_resource_and_kind() -> None:
    psi = _parse("sysstat-12.7.9+__tests__expected.sar-qALL").tables["sar_psi"]
    io_full = psi.filter((pl.col("resource") == "io") & (pl.col("kind") == "full")).row(
        0, named=True
    )
    assert (
        io_full["avg10_pct"],
        io_full["avg60_pct"],
        io_full["avg300_pct"],
        io_full["avg_pct"],
    ) == (0.45, 0.33, 0.2, 1.29)
    assert psi.height == 5


def test_restarts_and_comments_become_events_in_ctx_tz() -> None:
    res = _parse("sysstat-12.7.9+__tests__expected.sar-ISO", base.ParseContext(tz="Europe/Berlin"))
    ev = res.tables["sar_events"]
    assert ev["event"].to_list() == ["restart", "comment", "restart"]
    assert ev["cpus"].to_list() == [9, None, 10]
    assert ev["detail"][1] == "Testing sysstat!"
    assert ev["ts"][0] == _ts("2019-04-18 11:37:29")  # 13:37:29 CEST


def test_colored_output_parses_like_plain() -> None:
    plain = _parse("sysstat-12.7.9+__tests__expected.sar-ISO").tables
    colored = _parse("sysstat-12.7.9+__tests__expected.sar-always").tables
    assert colored["sar_cpu"].equals(plain["sar_cpu"])


def test_unmapped_sections_are_kept_in_long_form() -> None:
    other = _parse("sysstat-12.7.9+__tests__expected.sar-A").tables["sar_other"]
    loc = other.filter((pl.col("section") == "INTR all") & (pl.col("item") == "LOC"))
    assert loc.select("ts", "metric", "value").rows() == [
        (_ts("2020-06-01 12:53:21"), "all", 34485.34),
        (_ts("2020-06-01 12:53:22"), "all", 0.0),
    ]


def test_without_tz_times_are_assumed_utc_and_noted() -> None:
    res = _parse("sysstat-12.7.9+__tests__expected.sar-u", base.ParseContext())
    assert any("UTC" in n for n in res.coverage.notes)


MUTATE = [
    FIX / "sysstat-12.7.9+__tests__expected.sar-ISO",
    FIX / "local-debian12-sysstat12.6.1__sar-q-ALL-1-2.txt",
    FIX / "local-debian12-sysstat12.6.1__sar-u-en_US-1-3.txt",
    FIX / "sysstat-12.7.9+__tests__expected.sar-iface",
]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=hs.integers(0, len(MUTATE) - 1),
    cut=hs.floats(0, 1),
    garbage=hs.lists(hs.tuples(hs.floats(0, 1), hs.binary(max_size=60)), max_size=5),
)
def test_mutated_files_never_crash(
    which: int, cut: float, garbage: list[tuple[float, bytes]]
) -> None:
    data = MUTATE[which].read_bytes()
    data = data[: int(len(data) * cut) or len(data)]
    for pos, junk in garbage:
        i = int(len(data) * pos)
        data = data[:i] + b"\n" + junk + b"\n" + data[i:]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "data.txt"
        p.write_bytes(data)
        try:
            res = sar.parse(p, UTC0)
        except ParseError:
            return
        res.coverage.check()


def test_empty_and_header_only_files() -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "data.txt"
        p.write_bytes(b"")
        assert sar.parse(p, UTC0).tables == {}
        p.write_text(
            "Linux 6.1 (h) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n17:00:00  CPU %user %nice %system %iowait %steal %idle\n"
        )
        res = sar.parse(p, UTC0)
        res.coverage.check()
        assert res.tables == {} and res.coverage.structure == {"banner": 1, "blank": 1, "header": 1}


@pytest.mark.parametrize(
    "name",
    [
        "local-debian12-sysstat12.6.1__sar-q-1-2.txt",
        "replay__sysstat12.6.1__sar-A.de_DE.txt",
        "localbuild-sysstat-9.1.5__sar-r-f.txt",
        "sysstat-12.7.9+__tests__expected.sar-qPSI",
    ],
)
def test_sniff_recognizes_renamed_fixtures(name: str) -> None:
    assert sar.sniff(_read.read_head(FIX / name), "data.txt") >= 0.9


@pytest.mark.parametrize(
    "text",
    [
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n17:23:36     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n17:23:37     all   55.00    0.00   44.00    0.00    0.00    1.00    0.00    0.00    0.00    0.00\n",
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\navg-cpu:  %user   %nice %system %iowait  %steal   %idle\n          27.03    0.00    7.06    0.12    0.00   65.79\n",
        "procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n",
        "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle\nvm;1;2026-11-29 17:23:36 UTC;-1;58.00;0.00;42.00;0.00;0.00;0.00\n",
    ],
    ids=["mpstat", "iostat", "vmstat", "sadf"],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert sar.sniff(text, "data.txt") < 0.5


# --- reading in blocks ------------------------------------------------------------------

UNORDERED = ("sar_other", "sar_psi")  # grouped by section in a one-block parse


def _sar_a_text() -> str:
    """``sar -q -w -n SOFT`` style report every second across midnight, with an
    ``Average:`` block and a restart in the middle (24-hour clock, C locale)."""
    out = ["Linux 6.8.0-49-generic (gpu01) \t2026-11-29 \t_x86_64_\t(128 CPU)", ""]
    for i in range(50):
        a, b = ((23 * 3600 + 59 * 60 + 30 + i + d) % 86400 for d in (0, 1))
        ta = f"{a // 3600:02d}:{a % 3600 // 60:02d}:{a % 60:02d}"
        tb = f"{b // 3600:02d}:{b % 3600 // 60:02d}:{b % 60:02d}"
        out += [f"{ta}       proc/s   cswch/s", f"{tb}      {i:7.2f}  {i * 31.5:8.2f}", ""]
        out += [f"{ta}      runq-sz  plist-sz   ldavg-1   ldavg-5  ldavg-15   blocked"]
        out += [f"{tb}      {i:7d}  {2000 + i:8d}  {i / 10:8.2f}      1.00      0.50   {i % 3:7d}"]
        out += ["", f"{ta}        CPU   total/s   dropd/s squeezd/s"]
        out += [f"{tb}        all   {i * 10:7.2f}      0.00      0.00", ""]
        if i == 20:
            out += [f"{tb}     LINUX RESTART\t(128 CPU)", ""]
        if i == 30:
            out += ["Average:       proc/s   cswch/s", "Average:         1.00      2.00", ""]
    return "\n".join(out) + "\n"


def test_midnight_and_runs_carry_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "sar.out"
        p.write_text(_sar_a_text())
        t = sar.parse(p, UTC0).tables
        assert t["sar_task"].height == 50
        ts = t["sar_task"]["ts"]
        assert ts[29] == _ts("2026-11-30 00:00:00")  # the clock went back: +1 day
        assert ts[31] == _ts("2026-11-29 00:00:02")  # a run restarts after Average:
        assert t["sar_events"].height == 1
        assert_same_as_one_block(sar, p, (90, 700, 4000), monkeypatch, UNORDERED, tz="UTC0")


def test_sections_keep_the_order_of_their_first_header_whatever_its_clock() -> None:
    text = (
        "Linux 6.1 (h) \t2026-11-29 \t_x86_64_\t(2 CPU)\n\n"
        "05:00:04 PM        CPU    intr/s\n05:00:05 PM        all      3.00\n"
        "17:00:06        CPU   total/s\n17:00:07        all      4.00\n"
        "05:00:08 PM        CPU    intr/s\n05:00:09 PM        all      5.00\n"
    )
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "sar.out"
        p.write_text(text)
        other = sar.parse(p, UTC0).tables["sar_other"]
    assert other.select("section", "value").rows() == [
        ("CPU intr/s", 3.0),
        ("CPU intr/s", 5.0),
        ("CPU total/s", 4.0),
    ]


@pytest.mark.parametrize("i,path", list(enumerate(FILES)), ids=[p.name for p in FILES])
def test_blocks_of_any_size_give_the_one_block_result(
    i: int, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunk = max((300, 1200, 5000)[i % 3], path.stat().st_size // 6)  # at least ~6 blocks
    assert_same_as_one_block(sar, path, (chunk,), monkeypatch, UNORDERED, tz="UTC0")


def test_the_byte_screen_never_misses_a_human_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # `_may_be_human` only skips the exact pass when no line can hold a --human value.
    screen = sar._may_be_human
    monkeypatch.setattr(sar, "_may_be_human", lambda path: True)  # `_human`: the exact pass
    for path in FILES:
        data = path.read_bytes()
        for variant in (data, data.replace(b" 0.00", b" 0.0K"), data + b"\n17:00:01 all 5M"):
            with tempfile.TemporaryDirectory() as d:
                p = Path(d) / "data.txt"
                p.write_bytes(variant)
                assert screen(p) or not sar._human(p), path.name
    assert sar._human(FIX / "sysstat-12.7.9+__tests__expected.sar-human")


def test_human_suffix_late_in_the_file_makes_every_block_human(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `--human` is decided for the whole file: a suffix in the last block also changes how
    # an early `1e3` (a number without --human, not one with it) is read.
    rows = ["Linux 6.1 (h) \t2026-11-29 \t_x86_64_\t(2 CPU)", ""]
    rows += ["00:00:00      pswpin/s pswpout/s"]
    rows += [f"00:00:{i + 1:02d}          1e3     {i:5d}" for i in range(40)]
    plain = "\n".join(rows) + "\n"
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "sar.out"
        p.write_text(plain)
        swap = sar.parse(p, UTC0).tables["sar_swap"]
        assert swap["pswpin_s"].to_list() == [1000.0] * 40
        p.write_text(plain + "00:01:00          1.0M      2.0k\n")
        swap = sar.parse(p, UTC0).tables["sar_swap"]
        assert swap["pswpin_s"].to_list() == [None] * 40 + [1024.0]
        assert swap["pswpout_s"].to_list() == [float(i) for i in range(40)] + [2.0]
        assert_same_as_one_block(sar, p, (200, 700), monkeypatch, tz="UTC0")


def _hostile_sar() -> str:
    """`_sar_a_text` with rows and headers that do not fit their header's columns or are
    not what they seem: a row before any header, interface names that make a line an
    event, a leap second, an invalid time, tabs, dashes, overflowing and wide values,
    header spacing variants, an Average block and a restart in the middle."""
    lines = _sar_a_text().splitlines()
    lines[2:2] = [
        "23:59:29         1.00      2.00",  # a row before any header
        "",
        "23:59:30        IFACE   rxpck/s   txpck/s    rxkB/s    txkB/s   rxcmp/s   txcmp/s  rxmcst/s   %ifutil",
        "23:59:31          COM      9.00     14.00     13.32     12.39      0.00      0.00      0.00      0.00",
        "23:59:31        LINUX     10.00     14.00     13.32     12.39      0.00      0.00      0.00      0.00",
        "23:59:31         eno1  10109.00   2621.00  14657.53   2359.23      0.00      0.00      0.00      0.47",
        "23:59:31         eno1  10109.00   2621.00  14657.53   2359.23      0.00      0.00      0.00  1234567.47",
        "23:59:31         eno1         -   2621.00  14657.53   2359.23      0.00      0.00      0.00      0.47",
        "23:59:31         eno1    1,5   2621.00  14657.53   2359.23      0.00      0.00      0.00      0.47",
        "23:59:31         eno1   1 5   2621.00  14657.53   2359.23      0.00      0.00      0.00      0.47",
        "",
    ]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i == 60:
            out += ["23:59:59      pswpin/s pswpout/s", "23:59:60          1.00      2.00", ""]
        if i == 80:
            out += ["00:00:10     runq-sz  plist-sz   ldavg-1   ldavg-5  ldavg-15   blocked"]
            out += ["00:00:11           3       209      1.30      0.96      0.47         0", ""]
        if i == 90:
            out += ["00:00:20       proc/s   cswch/s", "00:00:60         1.00      2.00", ""]
            out += ["00:00:21       proc/s   cswch/s", "00:00:22\t1.00      2.00", ""]
            out += ["00:00:23       proc/s   cswch/s", "00:00:24         1.00   2.00e3", ""]
            out += ["00:00:23       proc/s   cswch/s", "00:00:24         1.0000      2", ""]
            out += ["24:00:25       proc/s   cswch/s", "00:00:26         3.00      4.00", ""]
    return "\n".join(out) + "\n"


def test_rows_that_do_not_fit_their_header_are_read_as_split_at_blanks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "sar.out"
        p.write_text(_hostile_sar())
        res = sar.parse(p, UTC0)
        assert_same_as_one_block(sar, p, (300, 2000), monkeypatch, UNORDERED, tz="Europe/Berlin")
    t = res.tables
    # `COM …` starts a comment; `LINUX` is an interface name (no `LINUX RESTART`)
    assert t["sar_events"].filter(pl.col("event") == "comment")["detail"].to_list() == [
        "     9.00     14.00     13.32     12.39      0.00      0.00      0.00      0.00"
    ]
    net = t["sar_net_dev"]
    assert net["iface"].to_list() == ["LINUX", "eno1", "eno1", "eno1", "eno1"]
    assert net["rxpck_s"].to_list() == [10.0, 10109.0, 10109.0, None, 1.5]
    assert net["ifutil_pct"].to_list() == [0.0, 0.47, 1234567.47, 0.47, 0.47]
    task = t["sar_task"]
    cswch = dict(zip(task["ts"].dt.strftime("%H:%M:%S").to_list(), task["cswch_s"], strict=True))
    assert (cswch["00:01:00"], cswch["00:00:22"]) == (2.0, 2.0)  # leap second; a tab
    assert t["sar_swap"]["ts"].to_list() == [_ts("2026-11-30 00:00:00")]  # 23:59:60
    assert cswch["00:00:24"] == 2.0  # `2.00e3` read as 2000 at 00:00:24 too
    assert sorted(task.filter(pl.col("ts").dt.strftime("%H:%M:%S") == "00:00:24")["cswch_s"]) == [
        2.0,
        2000.0,
    ]
    assert res.coverage.skipped == {
        "data row without a section header": 1,
        "field count differs from its section header": 1,
        "unrecognized line (not sar output)": 1,
    }
    # the row under the header with an invalid time (24:00:25) belongs to the header before
    assert task.filter(pl.col("cswch_s") == 4.0).height == 1
