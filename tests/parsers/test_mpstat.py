"""Tests of analyzer/parsers/mpstat.py against tests/fixtures/mpstat.

Golden values come from jc's expected JSON beside each jc ``.out`` file (an independent
parser; it keeps the 12-hour times, and its ``Average`` entries are skipped here because the
parser treats Average blocks as structure) and, for the other files, from reading them by
hand. The de_DE and en_US ``-P ALL`` captures are separate runs, so each is checked against
its own hand-read values; decimal-comma equivalence is checked on a de_DE rendering of a
C-locale file.
"""

from __future__ import annotations

import json
import random
import re
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _read, base, mpstat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "mpstat"
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "h200-checkpoint-stall.tgz"
# jc__*.json are jc's expected results (golden data), not mpstat output.
OUTPUTS = sorted(
    p
    for p in FIX.iterdir()
    if p.name != "PROVENANCE.md"
    and not p.name.endswith(".golden.json")
    and not (p.name.startswith("jc__") and p.suffix == ".json")
)
JC_PAIRS = sorted(
    p for p in OUTPUTS if p.name.startswith("jc__") and p.with_suffix(".json").exists()
)
L = "local-debian12-sysstat12.6.1__mpstat-"
T = "sysstat-12.7.9+__tests__expected.mpstat"


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = mpstat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _t(res: base.ParseResult, name: str) -> pl.DataFrame:
    frame = res.tables[name]
    return frame.collect() if isinstance(frame, pl.LazyFrame) else frame


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed > 0
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    for name, frame in res.tables.items():
        assert dict(frame.schema) == mpstat.TABLES[name].schema  # type: ignore[union-attr]


def _hhmmss(t: str) -> str:
    return datetime.strptime(t, "%I:%M:%S %p").strftime("%H:%M:%S")


@pytest.mark.parametrize("path", JC_PAIRS, ids=lambda p: p.name)
def test_values_match_jc_expected_output(path: Path) -> None:
    expected = [e for e in json.loads(path.with_suffix(".json").read_text()) if "time" in e]
    res = _parse(path, tz="UTC")
    cpu = _t(res, "mpstat_cpu").with_columns(pl.col("ts").dt.strftime("%H:%M:%S").alias("t"))
    jc_cpu = [e for e in expected if e["type"] == "cpu" and "cpu" in e]  # node rows: mpstat_node
    assert cpu.height == len(jc_cpu)
    for got, exp in zip(cpu.to_dicts(), jc_cpu, strict=True):
        assert got["t"] == _hhmmss(exp["time"])
        assert got["cpu"] == (-1 if exp["cpu"] == "all" else int(exp["cpu"]))
        for k, v in exp.items():
            if k.startswith("percent_"):
                assert got[k[8:] + "_pct"] == pytest.approx(v)
    jc_irq = [e for e in expected if e["type"] == "interrupts"]
    if not jc_irq:
        return
    irq = _t(res, "mpstat_irq").with_columns(pl.col("ts").dt.strftime("%H:%M:%S").alias("t"))
    got_map = {
        (r["t"], r["cpu"], "intr_s" if r["kind"] == "sum" else r["irq"].lower() + "_s"): r["per_s"]
        for r in irq.to_dicts()
    }
    n = 0
    for exp in jc_irq:
        cpu_n = -1 if exp["cpu"] == "all" else int(exp["cpu"])
        for k, v in exp.items():
            if k.endswith("_s"):
                assert got_map[(_hhmmss(exp["time"]), cpu_n, k)] == pytest.approx(v), k
                n += 1
    assert n == irq.height


def test_columns_by_version_and_layout_by_hand() -> None:
    old = _t(_parse(FIX / "localbuild-sysstat-9.1.5__mpstat-P-ALL-1-2.txt"), "mpstat_cpu").row(
        0, named=True
    )
    assert (old["cpu"], old["usr_pct"], old["sys_pct"], old["idle_pct"], old["gnice_pct"]) == (
        -1,
        20.40,
        78.61,
        0.0,
        None,
    )
    nul = _t(_parse(FIX / "localbuild-sysstat-11.5.7__mpstat-P-ALL-1-2.txt"), "mpstat_cpu").row(
        2, named=True
    )
    assert (nul["cpu"], nul["usr_pct"], nul["soft_pct"]) == (1, 16.00, 2.00)
    topo = _t(_parse(FIX / (T + "-T")), "mpstat_cpu")
    assert topo.row(0, named=True)["cpu"] == -1 and topo.row(0, named=True)["nice_pct"] == 12.50
    assert topo.row(3, named=True)["idle_pct"] == 95.18
    node = _t(_parse(FIX / (T + "-APN")), "mpstat_node").row(0, named=True)
    assert (node["node"], node["usr_pct"], node["idle_pct"]) == (-1, 2.15, 82.88)


def test_interrupt_tables_are_stored_long() -> None:
    res = _parse(FIX / (L + "I-ALL-1-1.txt"))
    irq = _t(res, "mpstat_irq")
    assert irq.filter(pl.col("kind") == "sum")["per_s"].to_list() == [2723.00]
    hard = irq.filter((pl.col("kind") == "hard") & (pl.col("cpu") == 1))
    assert dict(zip(hard["irq"], hard["per_s"], strict=True))["36"] == 1145.00
    assert hard.height == 35 and "LOC" in hard["irq"].to_list()
    soft = irq.filter((pl.col("kind") == "soft") & (pl.col("cpu") == 0))
    assert dict(zip(soft["irq"], soft["per_s"], strict=True))["RCU"] == 230.00
    s = _t(_parse(FIX / (L + "I-SUM-1-2.txt")), "mpstat_irq")
    assert s["per_s"].to_list() == [2849.00, 2300.00]


def test_since_boot_only_for_one_shot_reports() -> None:
    one = _t(_parse(FIX / "jc__centos-7.7__mpstat.out"), "mpstat_cpu")
    assert one["since_boot"].to_list() == [True]
    iv = _t(_parse(FIX / (L + "LC_C-1-3.txt")), "mpstat_cpu")
    assert not any(iv["since_boot"])
    js = _t(_parse(FIX / (T + "-T-JSON"), command="mpstat -o JSON -T -P ALL"), "mpstat_cpu")
    assert all(js["since_boot"])
    unknown = _t(_parse(FIX / (T + "-T-JSON")), "mpstat_cpu")
    assert unknown["since_boot"].null_count() == unknown.height


@pytest.mark.parametrize(
    ("name", "usr", "sys"),
    [
        ("P-ALL-de_DE-1-3.txt", 55.50, 43.50),
        ("P-ALL-en_US-1-3.txt", 55.50, 43.00),
        ("P-ALL-ISO-1-2.txt", 55.56, 43.43),
    ],
)
def test_locale_dates_times_and_numbers(name: str, usr: float, sys: float) -> None:
    res = _parse(FIX / (L + name), tz="UTC")
    cpu = _t(res, "mpstat_cpu")
    assert cpu["ts"][0] == datetime(2026, 11, 29, 17, 23, 37, tzinfo=UTC)
    assert cpu["ts"][-1] >= datetime(2026, 11, 29, 17, 23, 38, tzinfo=UTC)
    assert (cpu["usr_pct"][0], cpu["sys_pct"][0]) == (usr, sys)
    assert res.coverage.structure["average"] == 4


def test_decimal_comma_locale_parses_same_values_as_c_locale(tmp_path: Path) -> None:
    src = FIX / "localbuild-sysstat-12.2.0__mpstat-P-ALL-1-2.txt"
    lines = (
        src.read_text()
        .replace("11/29/26", "29.11.2026")
        .replace("Average:", "Durchschn.:")
        .splitlines()
    )
    de = tmp_path / "data.txt"
    de.write_text(
        "\n".join(ln if ln.startswith("Linux") else ln.replace(".", ",") for ln in lines) + "\n"
    )
    a, b = _parse(src), _parse(de)
    assert _t(a, "mpstat_cpu").equals(_t(b, "mpstat_cpu"))
    assert b.coverage.structure == a.coverage.structure


def test_times_zone_rollover_and_epoch(tmp_path: Path) -> None:
    res = _parse(FIX / (L + "LC_C-1-3.txt"), tz="Europe/Berlin")
    assert _t(res, "mpstat_cpu")["ts"][0] == datetime(2026, 11, 29, 16, 23, 37, tzinfo=UTC)
    text = (
        (FIX / (L + "I-SUM-1-2.txt"))
        .read_text()
        .replace("17:23:37", "23:59:59")
        .replace("17:23:38", "00:00:00")
    )
    p = tmp_path / "data.txt"
    p.write_text(text)
    ts = _t(_parse(p, tz="UTC"), "mpstat_irq")["ts"].to_list()
    assert ts == [
        datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC),
        datetime(2026, 11, 30, 0, 0, 0, tzinfo=UTC),
    ]
    u = _t(_parse(FIX / (T + "-U")), "mpstat_cpu")["ts"].to_list()
    assert u == [datetime.fromtimestamp(1591016001, UTC), datetime.fromtimestamp(1591016002, UTC)]


def test_json_matches_text_of_same_version() -> None:
    res = _parse(FIX / (T + "-A-JSON"), tz="UTC")
    cpu = _t(res, "mpstat_cpu").row(1, named=True)
    assert (cpu["cpu"], cpu["usr_pct"], cpu["idle_pct"]) == (0, 2.71, 94.14)
    assert cpu["ts"] == datetime(2020, 6, 1, 12, 53, 21, tzinfo=UTC)
    irq = _t(res, "mpstat_irq")
    assert irq.filter(pl.col("kind") == "sum")["per_s"][0] == 35525.06
    soft = irq.filter(
        (pl.col("kind") == "soft") & (pl.col("cpu") == 0) & (pl.col("irq") == "TIMER")
    )
    assert soft["per_s"].to_list() == [13.09]
    assert _t(res, "mpstat_node").height == 3


def _mutate(data: bytes, seed: int, how: str) -> bytes:
    rnd = random.Random(seed)
    if how == "truncate":
        return data[: rnd.randrange(len(data) + 1)]
    if how == "garbage":
        lines = data.split(b"\n")
        for _ in range(3):
            junk = rnd.choice(
                [b"mpstat: error", b"\x00\xff junk", b"12:00:00 all 1", b"12:00:00 CPU x", b"  "]
            )
            lines.insert(rnd.randrange(len(lines) + 1), junk)
        return b"\n".join(lines)
    pos = rnd.randrange(len(data) + 1)
    return data[:pos] + rnd.randbytes(rnd.randrange(1, 40)) + data[pos:]


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    idx=st.integers(0, len(OUTPUTS) - 1),
    seed=st.integers(0, 2**32),
    how=st.sampled_from(["truncate", "garbage", "bytes"]),
)
def test_mutated_files_never_crash(tmp_path: Path, idx: int, seed: int, how: str) -> None:
    p = tmp_path / "data.txt"
    p.write_bytes(_mutate(OUTPUTS[idx].read_bytes(), seed, how))
    try:
        res = mpstat.parse(p, base.ParseContext(file_name=p.name))
    except ParseError:
        return
    res.coverage.check()


def test_empty_and_foreign_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert not _parse(empty).tables
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("procs -----------memory----------\n r  b   swpd   free\n")
    with pytest.raises(ParseError):
        mpstat.parse(foreign, base.ParseContext())


@pytest.mark.parametrize(
    "name",
    [L + "A-1-1.txt", "jc__centos-7.7__mpstat.out", L + "I-SUM-1-2.txt", T + "-A-JSON", T + "-U"],
)
def test_sniff_recognizes_renamed_fixtures(name: str) -> None:
    assert mpstat.sniff(_read.read_head(FIX / name), "data.txt") >= 0.9


@pytest.mark.parametrize(
    "text",
    [
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\navg-cpu:  %user   %nice %system %iowait  %steal   %idle\n",
        "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz\n",
        "procs -----------memory---------- ---swap--\n r  b   swpd   free   buff  cache\n",
        "17:23:36      UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command\n",
    ],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert mpstat.sniff(text, "mpstat.out") < 0.5


# A real capture (the H200 sample): ``mpstat -P ALL 1`` and ``mpstat -I SUM,SCPU -P ALL 1``,
# 16 CPUs, read in blocks of a few KiB so that reports, headers, layouts and the midnight
# roll-over cross block boundaries.


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("real")
    with tarfile.open(SAMPLE) as tar:
        for m in tar.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name in ("mpstat.out", "mpstat_irq.out"):
                f = tar.extractfile(m)
                assert f is not None
                (out / name).write_bytes(f.read())
    return {p.name: p for p in out.iterdir()}


def _in_blocks(path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch, **kw: object):
    """``path`` parsed in blocks of about ``chunk`` bytes, rows streamed to a sink: the
    result, its tables put together from the streamed frames, and the number of frames."""
    got: dict[str, list[pl.DataFrame]] = {}

    def sink(name: str, frame: pl.DataFrame) -> None:
        got.setdefault(name, []).append(frame)

    monkeypatch.setattr(_blocks, "CHUNK_BYTES", chunk)
    res = mpstat.parse(path, base.ParseContext(file_name=path.name, sink=sink, **kw))  # type: ignore[arg-type]
    monkeypatch.undo()
    assert res.tables == {}, "rows both streamed and returned"
    res.coverage.check()
    return res, {k: pl.concat(v) for k, v in got.items()}, sum(map(len, got.values()))


def _same(a: base.ParseResult, tables: dict[str, pl.DataFrame], b: base.ParseResult) -> None:
    assert set(tables) == set(b.tables)
    for name, frame in tables.items():
        assert frame.equals(_t(b, name)), name
    for f in ("total", "parsed", "structure", "skipped", "notes"):
        assert getattr(a.coverage, f) == getattr(b.coverage, f), f
    assert a.meta == b.meta


@pytest.mark.parametrize("name", ["mpstat.out", "mpstat_irq.out"])
def test_tables_do_not_depend_on_the_block_size(real, name, monkeypatch) -> None:
    whole = _parse(real[name], tz="UTC")
    assert whole.coverage.parsed > 2000
    res, tables, frames = _in_blocks(real[name], 4096, monkeypatch, tz="UTC")
    assert frames > 20
    _same(res, tables, whole)


@pytest.mark.parametrize("chunk", [1, 7, 64])
@pytest.mark.parametrize(
    "name", [L + "I-ALL-1-1.txt", T + "-APN", "jc__centos-7.7__mpstat-A-2-5.out", T + "-U"]
)
def test_blocks_of_a_few_bytes_give_the_same_tables(name, chunk, monkeypatch) -> None:
    res, tables, _ = _in_blocks(FIX / name, chunk, monkeypatch)
    _same(res, tables, _parse(FIX / name))


def test_rows_stream_to_the_sink_when_one_is_given(real) -> None:
    got: dict[str, int] = {}

    def sink(name: str, frame: pl.DataFrame) -> None:
        got[name] = got.get(name, 0) + frame.height

    path = real["mpstat.out"]
    res = mpstat.parse(path, base.ParseContext(file_name=path.name, tz="UTC", sink=sink))
    assert res.tables == {}
    assert got == {"mpstat_cpu": res.coverage.parsed} and res.coverage.parsed == 2720


def test_local_times_are_read_in_the_zone_of_the_capture(real, monkeypatch) -> None:
    for name, table in (("mpstat.out", "mpstat_cpu"), ("mpstat_irq.out", "mpstat_irq")):
        utc = _t(_parse(real[name], tz="UTC"), table)["ts"]
        _, ny, _ = _in_blocks(real[name], 8192, monkeypatch, tz="America/New_York")
        assert utc[0] == datetime(2026, 11, 29, 18, 45, 6, tzinfo=UTC)
        assert ((ny[table]["ts"] - utc) == timedelta(hours=5)).all()  # EST in November


def _lines(path: Path) -> list[str]:
    return path.read_text().split("\n")


def _rows_of(lines: list[str]) -> list[int]:
    return [n for n, x in enumerate(lines) if re.match(r"\d\d:\d\d:\d\d +(all|\d)", x)]


def test_midnight_roll_over_carries_across_blocks(real, tmp_path, monkeypatch) -> None:
    def later(m: re.Match) -> str:  # 18:45:05 + 5:14:52 = 23:59:57
        t = (int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + 5 * 3600 + 14 * 60 + 52) % 86400
        return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"

    p = tmp_path / "mpstat.out"
    p.write_text(
        "\n".join(re.sub(r"^(\d\d):(\d\d):(\d\d)", later, x) for x in _lines(real["mpstat.out"]))
    )
    _, tables, _ = _in_blocks(p, 2048, monkeypatch, tz="UTC")
    ts = tables["mpstat_cpu"]["ts"]
    assert ts.is_sorted() and ts.null_count() == 0
    assert ts[0] == datetime(2026, 11, 29, 23, 59, 58, tzinfo=UTC)
    assert ts[-1] - ts[0] == timedelta(seconds=159)  # 160 reports, one a second


def test_a_row_wider_than_its_header_is_read_by_whitespace_split(real, tmp_path) -> None:
    ls = _lines(real["mpstat_irq.out"])
    n = next(i for i in _rows_of(ls) if len(ls[i]) > 100)  # a -I SCPU row (11 columns)
    ls[n] = ls[n][:-11] + " 12345678.50"  # RCU/s pushes the row one column right
    p = tmp_path / "mpstat_irq.out"
    p.write_text("\n".join(ls))
    irq = _t(_parse(p, tz="UTC"), "mpstat_irq")
    cpu = int(ls[n].split()[1])
    t = datetime.strptime("2026-11-29 " + ls[n][:8], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    row = irq.filter((pl.col("ts") == t) & (pl.col("cpu") == cpu) & (pl.col("kind") == "soft"))
    assert row["irq"].to_list()[-1] == "RCU" and row["per_s"][-1] == 12345678.5
    assert row["per_s"].to_list()[:-1] == [float(v) for v in ls[n].split()[2:-1]]


def test_a_value_that_does_not_read_skips_its_row_or_only_that_interrupt(real, tmp_path) -> None:
    for name, table, skipped in (
        ("mpstat.out", "mpstat_cpu", {"row does not match its header": 1}),
        ("mpstat_irq.out", "mpstat_irq", {}),  # the row's other 9 softirqs are kept
    ):
        ls = _lines(real[name])
        n = next(i for i in _rows_of(ls) if len(ls[i]) > 90)
        ls[n] = ls[n][:-6] + " x1.00"  # the last column
        p = tmp_path / name
        p.write_text("\n".join(ls))
        res = _parse(p, tz="UTC")
        clean = _t(_parse(real[name], tz="UTC"), table)
        assert _t(res, table).height == clean.height - 1
        assert res.coverage.skipped == skipped


def test_a_banner_after_the_first_block_still_dates_every_row(real, tmp_path, monkeypatch) -> None:
    ls = _lines(real["mpstat.out"])
    p = tmp_path / "mpstat.out"
    p.write_text("\n".join([*ls[2:1500], ls[0], *ls[1500:]]))  # the banner moved down
    res, tables, _ = _in_blocks(p, 4096, monkeypatch, tz="UTC")
    ts = tables["mpstat_cpu"]["ts"]
    assert ts.null_count() == 0 and ts[0] == datetime(2026, 11, 29, 18, 45, 6, tzinfo=UTC)
    assert res.meta["date"] == "2026-11-29" and res.coverage.structure["banner"] == 1


def test_not_utf8_bytes_are_replaced_and_counted(real, tmp_path, monkeypatch) -> None:
    data = bytearray(real["mpstat.out"].read_bytes())
    at = data.index(b"\n", len(data) * 2 // 3) + 3  # a row's time: 18:\xff...
    data[at : at + 1] = b"\xff"
    p = tmp_path / "mpstat.out"
    p.write_bytes(bytes(data))
    res, tables, _ = _in_blocks(p, 8192, monkeypatch, tz="UTC")
    assert res.coverage.notes == ["file is not valid UTF-8: invalid bytes replaced"]
    assert res.coverage.skipped == {"unrecognized line": 1}
    assert tables["mpstat_cpu"].height == 2719


def test_rows_before_any_header_and_past_64_layouts_are_skipped(tmp_path) -> None:
    hdr = "17:23:36     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle"
    row = "17:23:37     all   56.00    0.00   43.00    0.00    0.00    1.00    0.00    0.00    0.00    0.00"
    ls = ["Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)", "", row]
    for i in range(66):  # one more blank column before the time each time: a new layout
        ls += [
            "",
            hdr.replace("CPU ", "CPU" + " " * (i + 1)),
            row.replace("all ", "all" + " " * (i + 1)),
        ]
    p = tmp_path / "data.txt"
    p.write_text("\n".join(ls) + "\n")
    res = _parse(p, tz="UTC")
    assert res.coverage.parsed == 64
    assert res.coverage.skipped == {
        "row without a table header above it": 1,
        "more than 64 distinct header layouts": 2,
    }
