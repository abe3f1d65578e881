"""Tests of analyzer/parsers/nvidia_dmon.py (fixtures: tests/fixtures/nvidia-smi/*dmon*).

The corpus has one real dmon table (2016 driver, 4 GPUs, no -o DT) and one error-only
paste; golden values are read from them by hand. The current column set with ``-o DT``
is not in the corpus, so it is tested on inline text laid out like a real dmon header
(names from the nvidia-smi man page: gtemp mtemp jpg ofa ccpm). dmon has no locale
variants (it prints integers and a fixed YYYYMMDD date), so no locale replay test.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from blockwise import assert_same_as_one_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, nvidia_dmon

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
DMON = sorted(p for p in FIX.iterdir() if "dmon" in p.name and p.suffix != ".json")
OLD = FIX / "gh-issue__DeepSpeech-178__dmon-s-pucvmet-4gpu-2016.txt"
ERR = FIX / "gh-issue__nvidia-patch-89__dmon-pmon-not-supported.txt"

DT = """\
#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk  pviol  tviol     fb   bar1   ccpm  sbecc  dbecc    pci  rxpci  txpci  nvlrx
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz      %   bool     MB     MB     MB   errs   errs   errs   MB/s   MB/s   MB/s
 20261129   23:59:59      0     71     34     40      0      0      0      0      0      0   1593    210      0      0      0      1      0      0      0      0      0      0      5
 20261129   23:59:59      1    250     71     80     98     45      0      0      0      0   1593   1950     12      1  20480      5      0      0      0      0    300    120    N/A
#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk  pviol  tviol     fb   bar1   ccpm  sbecc  dbecc    pci  rxpci  txpci  nvlrx
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz      %   bool     MB     MB     MB   errs   errs   errs   MB/s   MB/s   MB/s
 20261130   00:00:00      0     70     34      -      -      -      -      -      -      -   1593    210      0      0      0      1      0      -      -      0      0      0      1
"""


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = nvidia_dmon.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _write(tmp: Path, text: str | bytes, name: str = "data.txt") -> Path:
    p = tmp / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


@pytest.mark.parametrize("path", DMON, ids=lambda p: p.name)
def test_every_dmon_fixture_parses(path: Path) -> None:
    res = _parse(path)
    frame = res.tables["gpu_dmon"]
    assert dict(frame.schema) == nvidia_dmon.TABLES["gpu_dmon"].schema  # type: ignore[union-attr]
    if path == ERR:  # error text only: nothing is data, every line has a reason
        assert res.coverage.parsed == 0 and frame.height == 0
        assert res.coverage.skipped["nvidia-smi error message (no data)"] == 4
    else:
        assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99


def test_old_driver_single_temp_column_maps_to_gtemp() -> None:
    df = _parse(OLD).tables["gpu_dmon"]
    assert df.height == 4 and df["gpu"].to_list() == [0, 1, 2, 3]
    row = df.row(
        3, named=True
    )  # "    3    86    70    18     6     0     0  4513  1784     0     0 11660     2     -     -     0    62     5"
    assert (
        row["pwr_w"] == 86 and row["gtemp_c"] == 70 and row["sm_pct"] == 18 and row["mem_pct"] == 6
    )
    assert row["mclk_mhz"] == 4513 and row["pclk_mhz"] == 1784 and row["fb_mib"] == 11660
    assert row["bar1_mib"] == 2 and row["sbecc"] is None and row["dbecc"] is None
    assert row["pci_errors"] == 0 and row["rxpci_mb_s"] == 62 and row["txpci_mb_s"] == 5
    assert row["tviol"] is False and row["mtemp_c"] is None and row["ts"] is None


def test_without_time_columns_ts_is_null_with_note() -> None:
    res = _parse(OLD)
    assert res.tables["gpu_dmon"]["ts"].null_count() == 4
    assert any("no Date/Time" in n for n in res.coverage.notes)


def test_dt_output_multi_gpu_repeated_header_and_dash_as_null(tmp_path: Path) -> None:
    res = _parse(_write(tmp_path, DT), tz="UTC0")
    df = res.tables["gpu_dmon"]
    assert res.coverage.parsed == 3 and res.coverage.structure == {"header": 4}
    assert df["ts"].to_list() == [
        datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC),
        datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC),
        datetime(2026, 11, 30, 0, 0, 0, tzinfo=UTC),
    ]
    g1 = df.row(1, named=True)
    assert (g1["gpu"], g1["pwr_w"], g1["mtemp_c"], g1["sm_pct"], g1["pviol_pct"], g1["tviol"]) == (
        1,
        250,
        80,
        98,
        12,
        True,
    )
    assert (g1["fb_mib"], g1["rxpci_mb_s"], g1["txpci_mb_s"]) == (20480, 300, 120)
    last = df.row(2, named=True)
    assert last["mtemp_c"] is None and last["sm_pct"] is None and last["sbecc"] is None
    other = res.tables["gpu_dmon_other"]
    assert other["metric"].unique().to_list() == ["nvlrx"] and other["unit"][0] == "MB/s"
    assert other["value"].to_list() == [5.0, None, 1.0]
    assert not any("assumed" in n for n in res.coverage.notes)


def test_crlf_line_ends_give_the_same_tables(tmp_path: Path) -> None:
    want = _parse(_write(tmp_path, DT), tz="UTC").tables
    got = _parse(_write(tmp_path, DT.replace("\n", "\r\n"), "crlf.txt"), tz="UTC").tables
    assert sorted(got) == sorted(want)
    assert all(got[n].equals(want[n], null_equal=True) for n in want)


def test_dt_times_read_in_context_timezone(tmp_path: Path) -> None:
    df = _parse(_write(tmp_path, DT), tz="Europe/Berlin").tables["gpu_dmon"]
    assert df["ts"][0] == datetime(2026, 11, 29, 22, 59, 59, tzinfo=UTC)


def test_time_only_takes_capture_date_and_rolls_over_midnight(tmp_path: Path) -> None:
    text = "#Time        gpu    pwr\n#HH:MM:SS    Idx      W\n 23:59:59      0     71\n 00:00:01      0     70\n"
    start = datetime(2026, 11, 29, 23, 59, 58, tzinfo=UTC)
    res = _parse(_write(tmp_path, text), capture_start=start, tz="UTC")
    df = res.tables["gpu_dmon"]
    assert df["ts"].to_list() == [
        datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC),
        datetime(2026, 11, 30, 0, 0, 1, tzinfo=UTC),
    ]
    assert df["ts_source"].to_list() == ["derived-date"] * 2
    res = _parse(_write(tmp_path, text))  # no capture start: never invent a date
    assert res.tables["gpu_dmon"]["ts"].null_count() == 2


def test_garbage_and_short_rows_are_skipped_with_reasons(tmp_path: Path) -> None:
    lines = DT.splitlines()
    text = "\n".join(
        [*lines[:3], "hello world", " 20261129   23:59:59      0     71", "\x00\x00", *lines[3:]]
    )
    res = _parse(_write(tmp_path, text + "\r\n"))
    assert res.coverage.parsed == 3
    assert res.coverage.skipped["column count differs from header"] == 1
    assert res.coverage.skipped["unrecognized line"] == 1


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    assert _parse(_write(tmp_path, "")).tables["gpu_dmon"].height == 0
    res = _parse(_write(tmp_path, "\n".join(DT.splitlines()[:2])))
    assert res.tables["gpu_dmon"].height == 0 and res.coverage.n_structure == 2


def test_sniff_recognizes_renamed_fixtures_and_rejects_others() -> None:
    assert nvidia_dmon.sniff(_read.read_head(OLD), "data.txt") >= 0.9
    assert nvidia_dmon.sniff(DT, "data.txt") >= 0.9
    assert (
        nvidia_dmon.sniff(
            "procs -----------memory---------- ---swap--\n r  b   swpd   free\n", "data.txt"
        )
        < 0.5
    )
    assert (
        nvidia_dmon.sniff(
            "Linux 6.1 (host) \t11/29/26\t_x86_64_\t(2 CPU)\n\n12:00:01 CPU %usr\n", "data.txt"
        )
        < 0.5
    )
    assert nvidia_dmon.sniff("@usecs:\n[1]   3 |@@@@|\n", "data.txt") < 0.5


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    which=st.sampled_from(["old", "dt"]),
    mode=st.sampled_from(["cut", "garbage", "bytes"]),
)
def test_mutated_input_never_crashes(tmp_path: Path, seed: int, which: str, mode: str) -> None:
    rng = random.Random(seed)
    data = OLD.read_bytes() if which == "old" else DT.encode()
    if mode == "cut":
        data = data[: rng.randrange(len(data) + 1)]
    elif mode == "garbage":
        lines = data.split(b"\n")
        for _ in range(rng.randint(1, 4)):
            lines.insert(
                rng.randrange(len(lines) + 1),
                rng.choice([b"oops", b"# gpu", b"  7 x y", b"-", b"\xff\xfe"]),
            )
        data = b"\n".join(lines)
    else:
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256) if buf else 0
        data = bytes(buf)
    path = _write(tmp_path, data, f"m{seed}.txt")
    try:
        res = nvidia_dmon.parse(path, base.ParseContext())
    except ParseError:
        return
    res.coverage.check()


# --- reading in blocks, and rows that do not look like dmon's --------------------------


def _time_only_text() -> str:
    """``-o T`` across midnight, two GPUs, header groups with and without an unknown
    metric (``nvlrx``: NULL-able values), repeated headers as dmon prints them."""
    out: list[str] = []
    t = 23 * 3600 + 59 * 60 + 40
    for g in range(12):
        extra = g % 4 < 2
        out.append("#Time        gpu     sm    mem" + ("   nvlrx" if extra else "") + "     fb")
        out.append("#HH:MM:SS    Idx      %      %" + ("    MB/s" if extra else "") + "     MB")
        for _ in range(3):
            s = t % 86400
            for gpu in range(2):
                row = (
                    f" {s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d} {gpu:>6} {g * 7 % 100:>6}"
                )
                row += f" {gpu * 31 % 100:>6}"
                if extra:
                    row += f" {['-', '12', 'N/A', '3.5'][(g + gpu) % 4]:>7}"
                out.append(row + f" {g * 997 % 80000:>6}")
            t += 1
    return "\n".join(out) + "\n"


def test_time_only_output_rolls_over_midnight_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, _time_only_text())
    start = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    res = _parse(path, capture_start=start, tz="UTC")
    dmon = res.tables["gpu_dmon"]
    assert dmon.height == 72 and dmon["ts"].max() == datetime(2026, 11, 30, 0, 0, 15, tzinfo=UTC)
    other = res.tables["gpu_dmon_other"]
    assert other.height == 36 and other["value"].null_count() == 18  # '-' and 'N/A'
    assert_same_as_one_block(
        nvidia_dmon, path, (100, 700, 3000), monkeypatch, capture_start=start, tz="UTC"
    )


@pytest.mark.parametrize("path", DMON, ids=lambda p: p.name)
def test_blocks_of_any_size_give_the_one_block_result(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same_as_one_block(nvidia_dmon, path, (300, 2000), monkeypatch, tz="UTC")


_ROW = DT.splitlines()[2]
_AT = datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)


@pytest.mark.parametrize(
    ("row", "want"),
    [
        (_ROW.replace("20261129", "20261131"), {"ts": None}),  # not a calendar day
        (
            _ROW.replace("20261129", "20240229"),
            {"ts": datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)},
        ),
        (
            _ROW.replace("20261129", "19691231"),
            {"ts": datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)},
        ),
        (_ROW.replace("23:59:59", "24:00:00"), {"ts": None}),
        (_ROW.replace("23:59:59", "23:59:60"), {"ts": _AT + timedelta(seconds=1)}),  # strptime
        (_ROW.replace("     71     34", "   0071     34"), {"pwr_w": 71.0}),
        (_ROW.replace("     71     34", "   71.5     34"), {"pwr_w": 71.5}),
        (_ROW.replace("   1593    210", "   15.5    210"), {"mclk_mhz": None}),  # not an integer
        (
            _ROW.replace(
                "      0      0      0      0      0      5",
                "     +1     -0    1e3    nan    inf      5",
            ),
            {"sbecc": 1, "dbecc": 0, "pci_errors": None, "txpci_mb_s": float("inf")},
        ),
        (_ROW.replace("      0", "  99999999999", 1), {"gpu": None}),  # beyond Int32
        (_ROW.replace(" 20261129", "20261129 "), {"ts": _AT, "gpu": 0}),  # no leading blank
        (_ROW.replace("     71     34", "     71\t   34"), {"pwr_w": 71.0, "gtemp_c": 34.0}),
        (_ROW.replace("   1593    210", "   1593 123456"), {"pclk_mhz": 123456}),  # too wide
        (_ROW.replace("      0      5", "     0,5      5"), {"txpci_mb_s": 0.5}),  # decimal comma
        (_ROW.replace("     71     34", "     71  3 4"), None),  # two tokens in one slot
        (_ROW.replace("     71     34", "     71      "), None),  # a slot without a token
    ],
)
def test_each_row_is_read_by_its_tokens(tmp_path: Path, row: str, want: dict | None) -> None:
    res = _parse(_write(tmp_path, "\n".join([*DT.splitlines()[:2], row, _ROW]) + "\n"), tz="UTC")
    got = res.tables["gpu_dmon"].to_dicts()
    assert got[-1]["ts"] == _AT and got[-1]["pwr_w"] == 71.0  # the row as dmon prints it
    if want is None:
        assert len(got) == 1 and res.coverage.skipped == {"column count differs from header": 1}
        return
    assert len(got) == 2 and {k: got[0][k] for k in want} == want
    assert res.tables["gpu_dmon_other"]["value"].to_list() == [5.0, 5.0]


def test_a_mangled_header_skips_the_rows_it_does_not_fit(tmp_path: Path) -> None:
    lines = DT.splitlines()
    lines[0] = lines[0].replace("#Date   ", "#Date  -")  # a 26th name; the rows have 25
    res = _parse(_write(tmp_path, "\n".join(lines[:4]) + "\n"), tz="UTC")
    assert res.coverage.parsed == 0
    assert res.coverage.skipped == {"column count differs from header": 2}
