"""sadf parser (-d, -dh, -U, -T/-t, -p, -j): fixtures, golden values, locales, cross-format checks."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, sadf, sar

FIX = Path(__file__).parent.parent / "fixtures" / "sadf"
FILES = sorted(
    p for p in FIX.iterdir() if p.name != "PROVENANCE.md" and not p.name.endswith(".golden.json")
)
UTC_CTX = base.ParseContext(tz="UTC")
T = "sysstat-12.7.9+__tests__expected."
# `sadf -dh -P ALL -I`: activities repeat per CPU/interrupt in one row ([...] markers), which
# cannot be split per activity; those rows are skipped with a reason (restarts still parse).
BELOW_99 = {T + "sadf-dh": 0.0}


def _parse(name: str, ctx: base.ParseContext = UTC_CTX) -> base.ParseResult:
    return sadf.parse(FIX / name, ctx)


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_fixture_parses_with_full_coverage(path: Path) -> None:
    res = sadf.parse(path, UTC_CTX)
    res.coverage.check()
    assert res.coverage.parsed_pct is not None
    assert res.coverage.parsed_pct >= BELOW_99.get(path.name, 99.0), res.coverage.skipped
    for name, frame in res.tables.items():
        assert dict(frame.schema) == sadf.TABLES[name].schema


def test_dh_with_repeated_items_is_skipped_with_a_reason() -> None:
    res = _parse(T + "sadf-dh")
    assert res.coverage.skipped == {
        "sadf -dh row with several items per activity (not supported)": 5
    }
    assert res.tables["sar_events"].height == 2


def test_d_epoch_golden_values() -> None:
    cpu = _parse("local-debian12-sysstat12.6.1__sadf-d-U-u.csv").tables["sar_cpu"]
    row = cpu.row(0, named=True)
    assert row["ts"] == datetime.fromtimestamp(1795973016, UTC)
    assert (row["cpu"], row["user_pct"], row["system_pct"], row["idle_pct"]) == (
        -1,
        58.0,
        42.0,
        0.0,
    )
    assert cpu.height == 9


def test_dh_glued_header_is_split_per_activity() -> None:
    t = _parse("local-debian12-sysstat12.6.1__sadf-dh-u-q.csv").tables
    q = t["sar_queue"].row(0, named=True)
    assert q["ts"] == _ts("2026-11-29 17:23:36")
    assert (q["runq_sz"], q["plist_sz"], q["ldavg_1"], q["ldavg_15"], q["blocked"]) == (
        15,
        116,
        1.3,
        0.47,
        0,
    )
    assert t["sar_cpu"]["user_pct"][0] == 58.0


def test_p_format_golden_values() -> None:
    cpu = _parse("local-debian12-sysstat12.6.1__sadf-p-u.txt").tables["sar_cpu"].sort("ts")
    row = cpu.row(0, named=True)
    assert row["ts"] == _ts("2026-11-29 17:23:36")
    assert (row["cpu"], row["user_pct"], row["system_pct"]) == (-1, 58.0, 42.0)


def test_json_golden_values() -> None:
    t = _parse("local-debian12-sysstat12.6.1__sadf-j-A.json").tables
    mem = t["sar_memory"].row(0, named=True)
    assert mem["ts"] == _ts("2026-11-29 17:23:36")
    assert (mem["kbmemfree"], mem["kbavail"], mem["memused_pct"], mem["kbvmused"]) == (
        21430720,
        22980988,
        5.67,
        14620,
    )
    assert t["sar_swap_space"]["kbswpfree"][0] == 0
    disk = t["sar_disk"].row(0, named=True)
    assert (disk["dev"], disk["rkb_s"], disk["wkb_s"], disk["areq_sz_kb"], disk["util_pct"]) == (
        "vda",
        4.0,
        1302904.0,
        1754.88,
        60.0,
    )
    cpu1 = t["sar_cpu"].filter(pl.col("cpu") == 1).row(0, named=True)
    assert (cpu1["user_pct"], cpu1["system_pct"], cpu1["soft_pct"]) == (94.0, 3.0, 3.0)


def test_json_sysstat_10_and_glued_lines_of_11_2() -> None:
    t10 = _parse("localbuild-sysstat-10.2.0__sadf-j-u-r-B-q-w.json").tables
    assert (t10["sar_cpu"]["user_pct"][0], t10["sar_cpu"]["system_pct"][0]) == (20.0, 80.0)
    assert t10["sar_paging"]["pgpgout_kb_s"][0] == 1096676.0
    t11 = _parse("localbuild-sysstat-11.2.0__sadf-j-u-r-B-q-w.json").tables
    q = t11["sar_queue"].row(0, named=True)
    assert (q["runq_sz"], q["plist_sz"], q["ldavg_1"]) == (4, 155, 6.62)


def test_locale_replays_identical_and_equal_to_sar_text() -> None:
    res = [_parse(f"replay__sysstat12.6.1__sadf-d-A.{loc}.csv") for loc in ("C", "de_DE", "en_US")]
    for other in res[1:]:
        assert set(other.tables) == set(res[0].tables)
        for name, frame in res[0].tables.items():
            assert other.tables[name].equals(frame), name
    text = sar.parse(
        Path(__file__).parent.parent / "fixtures" / "sar" / "replay__sysstat12.6.1__sar-A.C.txt",
        UTC_CTX,
    )
    for name in (
        "sar_cpu",
        "sar_queue",
        "sar_psi",
        "sar_paging",
        "sar_memory",
        "sar_net_dev",
        "sar_disk",
    ):
        a, b = text.tables[name], res[0].tables[name]
        assert a.sort(a.columns).equals(b.sort(b.columns)), name


def test_d_j_p_of_one_data_file_agree() -> None:
    d, j, p = (_parse(T + f) for f in ("sadf-d", "sadf-j", "sadf-p"))
    for name in (
        "sar_cpu",
        "sar_queue",
        "sar_psi",
        "sar_paging",
        "sar_memory",
        "sar_swap_space",
        "sar_net_dev",
        "sar_disk",
    ):
        a = d.tables[name].sort(d.tables[name].columns)
        for other in (j, p):
            b = other.tables[name]
            assert a.equals(b.sort(b.columns)), name
    assert d.tables["sar_events"].sort("ts").equals(j.tables["sar_events"].sort("ts"))


def test_events_rows() -> None:
    ev = _parse(T + "sadf-d").tables["sar_events"]
    assert ev.rows() == [
        (_ts("2019-04-18 13:37:29"), "restart", "(9 CPU)", 9),
        (_ts("2019-04-18 13:39:09"), "comment", "Testing sysstat!", None),
        (_ts("2019-04-18 13:54:09"), "restart", "(10 CPU)", 10),
    ]


@pytest.mark.parametrize(
    ("name", "tz"), [("sadf-d-T-tz", "America/New_York"), ("sadf-d-t-tz", "Europe/Berlin")]
)
def test_local_zone_names_are_read_in_ctx_tz(name: str, tz: str) -> None:
    ts = _parse(T + name, base.ParseContext(tz=tz)).tables["sar_cpu"]["ts"]
    assert ts[0] == _ts("2019-04-18 13:20:19")  # what `sadf -d` prints as UTC


def test_intr_cpu_star_header_expands_per_cpu() -> None:
    other = _parse(T + "sadf-d").tables["sar_other"]
    row = other.filter(
        (pl.col("section") == "INTR all CPU0 CPU1 CPU2 CPU3 CPU4 CPU5 CPU6 CPU7")
        & (pl.col("item") == "sum")
    )
    assert row.filter(pl.col("metric") == "all")["value"][0] == 31915.3
    assert row.filter(pl.col("metric") == "CPU0")["value"][0] == 5759.67


MUTATE = [
    FIX / (T + "sadf-d-qu"),
    FIX / "local-debian12-sysstat12.6.1__sadf-p-u.txt",
    FIX / "localbuild-sysstat-11.6.5__sadf-j-u-r-B-q-w.json",
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
            res = sadf.parse(p, UTC_CTX)
        except ParseError:
            return
        res.coverage.check()


def test_empty_file_is_not_sadf() -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "data.txt"
        p.write_bytes(b"")
        with pytest.raises(ParseError):
            sadf.parse(p, UTC_CTX)


@pytest.mark.parametrize(
    "name",
    [
        "local-debian12-sysstat12.6.1__sadf-d-n-DEV-EDEV.csv",
        "local-debian12-sysstat12.6.1__sadf-j-A.json",
        "local-debian12-sysstat12.6.1__sadf-p-u.txt",
        T + "sadf-U-se-epoch",
    ],
)
def test_sniff_recognizes_renamed_fixtures(name: str) -> None:
    assert sadf.sniff(_read.read_head(FIX / name), "data.txt") >= 0.8


@pytest.mark.parametrize(
    "text",
    [
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n17:23:36        CPU     %user     %nice   %system   %iowait    %steal     %idle\n",
        '{"sysstat": {"hosts": [{"nodename": "vm", "statistics": [{"avg-cpu": {"user": 1.0}}]}]}}',
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE sysstat PUBLIC "DTD v2.19 sysstat //EN">\n<sysstat>\n',
    ],
    ids=["sar-text", "iostat-json", "psi", "sadf-xml-unsupported"],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert sadf.sniff(text, "data.txt") < 0.5
