"""Tests of analyzer/parsers/iostat.py against tests/fixtures/iostat.

Golden values come from jc's expected JSON beside each jc ``.out`` file (an independent
parser) and, for the local captures, local builds and sysstat test outputs, from reading
the files by hand. The de_DE / en_US / ISO ``-x -t`` captures are separate runs (their
numbers differ), so each is checked against its own hand-read values, and the decimal-comma
equivalence is checked on a de_DE rendering of the C-locale file. Hostile edits of the real
H200 capture (samples/h200-checkpoint-stall.tgz) check what each damage costs, with rows
streamed to a sink and the file read in blocks of a few bytes to a few MB.
"""

from __future__ import annotations

import json
import random
import re
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _read, base, iostat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "iostat"
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "h200-checkpoint-stall.tgz"
# jc__*.json are jc's expected results (golden data), not iostat output; *.golden.json
# are what the parse stage stores (tests/parsers_digest/test_golden.py).
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
L = "local-debian12-sysstat12.6.1__iostat-"
T = "sysstat-12.7.9+__tests__expected.iostat"


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = iostat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _t(res: base.ParseResult, name: str) -> pl.DataFrame:
    frame = res.tables[name]
    return frame.collect() if isinstance(frame, pl.LazyFrame) else frame


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    if path.name == T + "-foo":  # `iostat -d foo`: a header for a device that does not exist
        assert res.coverage.parsed == 0 and not res.coverage.skipped
        return
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    for name, frame in res.tables.items():
        assert dict(frame.schema) == iostat.TABLES[name].schema  # type: ignore[union-attr]


_JC_DEV = {
    "avgrq_sz": "avgrq_sz_sectors",
    "avgqu_sz": "aqu_sz",
    "await": "await_ms",
    "svctm": "svctm_ms",
    "percent_util": "util_pct",
    "aqu_sz": "aqu_sz",
}


def _jc_key(key: str) -> tuple[str, float] | None:
    if key in _JC_DEV:
        return _JC_DEV[key], 1.0
    if key.startswith("percent_"):
        return key[len("percent_") :] + "_pct", 1.0
    if key.endswith("_await"):
        return key + "_ms", 1.0
    if key.endswith("areq_sz"):
        return key + "_kb", 1.0
    if key.startswith(("mb_", "rmb", "wmb", "dmb")) or key[1:4] == "mb_":
        return key.replace("mb", "kb", 1), 1024.0
    return key, 1.0


@pytest.mark.parametrize("path", JC_PAIRS, ids=lambda p: p.name)
def test_values_match_jc_expected_output(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text())
    res = _parse(path)
    cpu = _t(res, "iostat_cpu").to_dicts()
    dev = _t(res, "iostat_device").to_dicts()
    jc_cpu = [e for e in expected if e["type"] == "cpu"]
    jc_dev = [e for e in expected if e["type"] == "device"]
    assert len(cpu) == len(jc_cpu) and len(dev) == len(jc_dev)
    for got, exp in zip(cpu, jc_cpu, strict=True):
        for k, v in exp.items():
            if k.startswith("percent_"):
                assert got[k[8:] + "_pct"] == pytest.approx(v)
    for got, exp in zip(dev, jc_dev, strict=True):
        assert got["device"] == exp["device"]
        for k, v in exp.items():
            if k in ("device", "type"):
                continue
            col, factor = _jc_key(k)  # type: ignore[misc]
            assert got[col] == pytest.approx(v * factor), (k, col)


def test_extended_columns_of_each_version_by_hand() -> None:
    old = _t(_parse(FIX / "localbuild-sysstat-9.1.5__iostat-x-1-2.txt"), "iostat_device").row(
        0, named=True
    )
    assert (old["rrqm_s"], old["r_s"], old["avgrq_sz_sectors"], old["aqu_sz"]) == (
        9.58,
        1450.53,
        92.67,
        0.14,
    )
    assert (old["await_ms"], old["svctm_ms"], old["util_pct"]) == (0.08, 0.05, 8.90)
    new = _t(_parse(FIX / (L + "x-LC_C-1-3.txt")), "iostat_device").row(1, named=True)
    assert (new["w_s"], new["wkb_s"], new["dareq_sz_kb"], new["f_s"]) == (
        1184.0,
        1114764.0,
        65536.0,
        18.0,
    )
    assert (new["f_await_ms"], new["aqu_sz"], new["util_pct"], new["svctm_ms"]) == (
        0.06,
        0.53,
        47.60,
        None,
    )
    d12 = _t(_parse(FIX / "sysstat-12.1.6__tests__expected.iostat-x"), "iostat_device").row(
        0, named=True
    )
    assert (d12["d_s"], d12["aqu_sz"], d12["util_pct"], d12["f_s"]) == (0.0, 0.10, 0.46, None)


def test_units_are_normalised_to_kb() -> None:
    mb = _t(_parse(FIX / "localbuild-sysstat-10.2.0__iostat-dm-1-2.txt"), "iostat_device").row(
        0, named=True
    )
    assert mb["kb_read_s"] == pytest.approx(8.50 * 1024) and mb["kb_read"] == 8970 * 1024
    blk = _t(_parse(FIX / (T + "-ev")), "iostat_device").row(0, named=True)
    assert blk["kb_read_s"] == pytest.approx(444.28 / 2) and blk["kb_read"] == 3195498 // 2
    gb = _t(_parse(FIX / (T + "-Gz")), "iostat_device").row(0, named=True)
    assert gb["kb_read"] == 1024 * 1024
    xs = _t(_parse(FIX / (L + "xs-1-2.txt")), "iostat_device").row(0, named=True)
    assert (xs["tps"], xs["kb_s"], xs["rqm_s"], xs["await_ms"], xs["areq_sz_kb"]) == (
        73.99,
        15237.87,
        40.31,
        0.80,
        205.93,
    )
    s = _t(_parse(FIX / (T + "-s")), "iostat_device").row(2, named=True)
    assert (s["device"], s["kb_wrtn_dscd_s"], s["kb_wrtn_dscd"]) == ("sdq", 25.21, 181305)


def test_human_and_pretty_tables_are_merged_per_device() -> None:
    res = _parse(FIX / (L + "x-human-1-2.txt"))
    row = _t(res, "iostat_device").row(1, named=True)
    assert (row["device"], row["w_s"], row["f_s"], row["util_pct"]) == ("vda", 1157.0, 17.0, 46.8)
    assert row["wkb_s"] == pytest.approx(1.0 * 1024**2) and row["dareq_sz_kb"] == pytest.approx(
        64.0 * 1024
    )
    assert _t(res, "iostat_cpu").row(0, named=True)["user_pct"] == 26.5
    pretty = _t(_parse(FIX / (T + "-x-pretty")), "iostat_device")
    assert pretty.height == 5 and pretty.row(2, named=True)["d_await_ms"] == 14.24


def test_nul_bytes_of_11_5_7_are_ignored() -> None:
    res = _parse(FIX / "localbuild-sysstat-11.5.7__iostat-x-1-2.txt")
    assert _t(res, "iostat_cpu").row(0, named=True)["user_pct"] == 27.23
    assert _t(res, "iostat_device").row(1, named=True)["util_pct"] == 40.40


def test_partitions_groups_and_since_boot_flags() -> None:
    p = _t(_parse(FIX / (T + "-p-ALL")), "iostat_device")
    flags = dict(zip(p["device"].head(16), p["is_partition"].head(16), strict=True))
    assert flags["sda"] is False and flags["sda12"] is True and flags["sdb"] is False
    plain = _t(_parse(FIX / (T + "-x")), "iostat_device")
    assert plain["is_partition"].null_count() == plain.height
    g = _t(_parse(FIX / (T + "-g")), "iostat_device")
    assert g.filter(pl.col("is_group"))["device"].to_list()[:2] == ["disks", "other"]
    first = _t(_parse(FIX / (L + "x-LC_C-1-3.txt")), "iostat_device")["since_boot"].to_list()
    assert first == [True, False, False]
    y = _t(_parse(FIX / (L + "xy-1-2.txt")), "iostat_device")["since_boot"].to_list()
    assert y == [False, False]
    ycmd = _parse(FIX / (T + "-ym"), command="iostat -ym 1 2")
    assert not any(_t(ycmd, "iostat_cpu")["since_boot"])


@pytest.mark.parametrize(
    ("name", "user", "idle"),
    [
        ("xt-de_DE-1-3.txt", 26.55, 66.25),
        ("xt-en_US-1-3.txt", 26.54, 66.26),
        ("xt-ISO-1-3.txt", 26.55, 66.26),
    ],
)
def test_locale_stamps_and_numbers(name: str, user: float, idle: float) -> None:
    res = _parse(FIX / (L + name), tz="UTC")
    cpu = _t(res, "iostat_cpu")
    assert cpu["ts"].to_list() == [
        datetime(2026, 11, 29, 17, 23, s, tzinfo=UTC) for s in (36, 37, 38)
    ]
    assert set(cpu["ts_source"]) == {"printed"}
    assert (cpu["user_pct"][0], cpu["idle_pct"][0]) == (user, idle)
    assert _t(res, "iostat_device")["wkb_s"].min() > 1000  # decimal comma read as a decimal mark


def test_decimal_comma_locale_parses_same_values_as_c_locale(tmp_path: Path) -> None:
    src = FIX / (L + "x-LC_C-1-3.txt")
    text = src.read_text().replace("11/29/26", "29.11.2026")
    body = [
        ln if not ln[:1].isspace() and not ln.startswith("vda") else ln.replace(".", ",")
        for ln in text.splitlines()
    ]
    de = tmp_path / "data.txt"
    de.write_text("\n".join(body) + "\n")
    a, b = _parse(src), _parse(de)
    for name in ("iostat_cpu", "iostat_device"):
        assert _t(a, name).equals(_t(b, name))


def test_times_printed_in_local_zone_and_derived() -> None:
    res = _parse(FIX / (L + "xt-en_US-1-3.txt"), tz="Europe/Berlin")
    assert _t(res, "iostat_cpu")["ts"][0] == datetime(2026, 11, 29, 16, 23, 36, tzinfo=UTC)
    iso = _parse(FIX / (L + "xt-ISO-1-3.txt"), tz="America/New_York")  # offset printed: zone unused
    assert _t(iso, "iostat_cpu")["ts"][0] == datetime(2026, 11, 29, 17, 23, 36, tzinfo=UTC)
    start = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)
    der = _t(
        _parse(FIX / (L + "LC_C-1-3.txt"), capture_start=start, interval_s=1.0), "iostat_device"
    )
    assert (
        der["ts"][2] == datetime(2026, 11, 29, 17, 0, 2, tzinfo=UTC)
        and der["ts_source"][0] == "derived"
    )
    none = _parse(FIX / (L + "LC_C-1-3.txt"))
    assert _t(none, "iostat_device")["ts"].null_count() == 3 and none.coverage.notes


def test_json_output_matches_text_columns() -> None:
    res = _parse(FIX / (L + "x-o-JSON-t-1-2.json"), tz="UTC")
    dev = _t(res, "iostat_device").row(1, named=True)
    assert (dev["device"], dev["w_s"], dev["wkb_s"], dev["wrqm_pct"], dev["util_pct"]) == (
        "vda",
        1255.0,
        1180340.0,
        6.55,
        50.0,
    )
    assert (
        dev["ts"] == datetime(2026, 11, 29, 17, 23, 37, tzinfo=UTC) and dev["since_boot"] is False
    )
    assert res.meta["host"] == "vm" and res.meta["cpus"] == 2
    g = _t(_parse(FIX / (T + "-g-JSON")), "iostat_device").row(2, named=True)
    assert (g["device"], g["is_group"], g["kb_read"]) == ("disks", True, 1562 * 1024)
    old = _t(_parse(FIX / "localbuild-sysstat-11.5.7__iostat-x-o-JSON-1-2.json"), "iostat_device")
    assert old.row(0, named=True)["svctm_ms"] == 0.06


def _mutate(data: bytes, seed: int, how: str) -> bytes:
    rnd = random.Random(seed)
    if how == "truncate":
        return data[: rnd.randrange(len(data) + 1)]
    if how == "garbage":
        lines = data.split(b"\n")
        for _ in range(3):
            lines.insert(
                rnd.randrange(len(lines) + 1),
                rnd.choice([b"iostat: error", b"\x00\xff junk", b"vda 1 2", b"Device x", b"   "]),
            )
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
        res = iostat.parse(p, base.ParseContext(file_name=p.name))
    except ParseError:
        return
    res.coverage.check()


def test_empty_and_foreign_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    res = _parse(empty)
    assert res.coverage.total == 0 and not res.tables
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("procs -----------memory----------\n r  b   swpd   free\n")
    with pytest.raises(ParseError):
        iostat.parse(foreign, base.ParseContext())


@pytest.mark.parametrize(
    "name",
    [
        L + "x-LC_C-1-3.txt",
        "jc__centos-7.7__iostat.out",
        T + "-h",
        L + "o-JSON-de_DE-1-2.json",
        L + "dmz-1-3.txt",
    ],
)
def test_sniff_recognizes_renamed_fixtures(name: str) -> None:
    assert iostat.sniff(_read.read_head(FIX / name), "data.txt") >= 0.9


@pytest.mark.parametrize(
    "text",
    [
        "procs -----------memory---------- ---swap--\n r  b   swpd   free   buff  cache\n",
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n17:23:36     CPU    %usr   %nice    %sys %iowait    %irq   %soft\n",
        "[    0.000000] Linux version 6.1.0\n",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    ],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert iostat.sniff(text, "iostat.out") < 0.5


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The H200 capture's ``iostat -t -x -y 1 160`` text and ``-o JSON`` files."""
    out = tmp_path_factory.mktemp("real")
    with tarfile.open(SAMPLE) as tar:
        for m in tar.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name in ("iostat.out", "iostat_json.out"):
                f = tar.extractfile(m)
                assert f is not None
                (out / name).write_bytes(f.read())
    return {p.name: p for p in out.iterdir()}


def _streamed(path: Path, **kw: object) -> base.ParseResult:
    """The parse with a sink, as in the pipeline: the streamed frames back as tables."""
    got: dict[str, list[pl.DataFrame]] = {}
    ctx = base.ParseContext(file_name=path.name, sink=lambda n, f: got.setdefault(n, []).append(f))
    for k, v in kw.items():
        setattr(ctx, k, v)
    res = iostat.parse(path, ctx)
    res.coverage.check()
    assert not res.tables or not got, "a table both streamed and returned"
    res.tables.update({name: pl.concat(frames) for name, frames in got.items()})
    return res


def _edit(edit: str, ls: list[str]) -> list[str]:
    """``iostat.out`` of the real capture, damaged as ``edit`` says."""
    rows = [n for n, x in enumerate(ls) if n > 60 and x.startswith("vd")]
    i = rows[0]
    if edit == "bad_value":
        ls[i] = ls[i][:-6] + " x1.00"
    elif edit == "semicolon":
        ls[i] = ls[i][:30] + ";" + ls[i][31:]
    elif edit == "crlf_nul":
        ls[i] += "\r"
        ls[i + 1] = ls[i + 1][:40] + "\x00" + ls[i + 1][40:]
    elif edit == "cut_last":
        ls = [*ls[:-3], ls[-3][:30]]
    elif edit == "garbage":
        ls = [*ls[:i], "garbage", *ls[i:]]
    elif edit == "late_partition":  # vda1 beside the last vda only: -p output after all
        j = max(n for n, x in enumerate(ls) if x.startswith("vda "))
        ls = [*ls[: j + 1], ls[j].replace("vda ", "vda1", 1), *ls[j + 1 :]]
    elif edit == "second_layout":
        hdr = next(x for x in ls if x.startswith("Device"))
        basic = "Device             tps    kB_read/s    kB_wrtn/s    kB_read    kB_wrtn"
        row = "vda               1.00         0.00        12.00          0         12"
        ls = [*ls[:i], "", basic, row, "", hdr, *ls[i:]]
    elif edit == "bad_stamps":
        stamps = [n for n, x in enumerate(ls) if re.match(r"\d{4}-\d\d-\d\dT", x)]
        ls[stamps[3]] = "2026-02-30T18:45:05+0000"
        ls[stamps[4]] = "2026-11-29T25:45:05+0000"
    elif edit == "wide_row":
        ls[i] = ls[i].replace("    0.00", "123456789.00", 1)
    elif edit == "tab_and_spaces":
        ls[i] = "vda\t" + ls[i][4:]
        ls = [*ls[: i + 1], "      ", *ls[i + 1 :]]
    elif edit == "cpu_row_letter":
        n = next(n for n, x in enumerate(ls) if n > i and x.startswith("avg-cpu"))
        ls[n + 1] = ls[n + 1][:-5] + "9x.27"
    return ls


#: edit -> (lines parsed less than the real file, skipped lines, device rows, notes added)
_EDITS = {
    "bad_value": (1, {"device row does not match its header": 1}, 319, []),
    "semicolon": (1, {"device row does not match its header": 1}, 319, []),
    "crlf_nul": (0, {}, 320, []),
    "cut_last": (0, {}, 320, []),  # the cut line is a blank one
    "garbage": (0, {"device row does not match its header": 1}, 320, []),
    "late_partition": (-1, {}, 321, []),
    "second_layout": (-1, {}, 321, [iostat.NO_TIME_NOTE]),  # a report without its stamp
    "bad_stamps": (0, {}, 320, [iostat.NO_TIME_NOTE]),
    "wide_row": (0, {}, 320, []),  # read by whitespace split
    "tab_and_spaces": (1, {"unrecognized line": 1}, 319, []),
    "cpu_row_letter": (1, {"unrecognized line": 1}, 320, []),
}


@pytest.mark.parametrize("edit", list(_EDITS))
def test_damage_to_a_real_capture_costs_only_the_damaged_lines(real, edit, tmp_path) -> None:
    path = tmp_path / "iostat.out"
    path.write_text("\n".join(_edit(edit, real["iostat.out"].read_text().split("\n"))))
    cmd = "iostat -t -x -y 1 160"
    clean, res = _streamed(real["iostat.out"], command=cmd), _streamed(path, command=cmd)
    less, skipped, rows, notes = _EDITS[edit]
    assert clean.coverage.parsed - res.coverage.parsed == less
    assert res.coverage.skipped == skipped
    assert _t(res, "iostat_device").height == rows
    assert res.coverage.notes == clean.coverage.notes + notes


def test_a_partition_anywhere_in_the_file_sets_is_partition_on_every_row(real, tmp_path) -> None:
    path = tmp_path / "iostat.out"
    path.write_text("\n".join(_edit("late_partition", real["iostat.out"].read_text().split("\n"))))
    dev = _t(_streamed(path), "iostat_device")
    flags = dev.group_by("device").agg(pl.col("is_partition").unique())
    assert dict(flags.iter_rows()) == {"vda": [False], "vda1": [True], "vdb": [False]}
    assert _t(_streamed(real["iostat.out"]), "iostat_device")["is_partition"].null_count() == 320


@pytest.mark.parametrize("name", ["iostat.out", "iostat_json.out"])
def test_rows_of_the_real_capture_go_to_the_sink(real, name) -> None:
    got: dict[str, int] = {}
    ctx = base.ParseContext(
        file_name=name, tz="UTC", sink=lambda n, f: got.update({n: got.get(n, 0) + f.height})
    )
    res = iostat.parse(real[name], ctx)
    assert res.tables == {} and got == {"iostat_device": 320, "iostat_cpu": 160}
    assert res.coverage.parsed == 480


def test_invalid_utf8_is_replaced_and_noted(real, tmp_path) -> None:
    data = bytearray(real["iostat.out"].read_bytes())
    at = data.index(b"\n", len(data) * 2 // 3) + 3  # inside a line far from the start
    data[at : at + 1] = b"\xff"
    path = tmp_path / "iostat.out"
    path.write_bytes(bytes(data))
    res = _streamed(path)
    assert res.coverage.notes[0] == "file is not valid UTF-8: invalid bytes replaced"
    assert res.coverage.parsed == 480


@pytest.mark.parametrize("chunk", [61, 4096])
@pytest.mark.parametrize(
    "name", ["iostat.out", "iostat_json.out", L + "x-human-1-2.txt", T + "-p-ALL", T + "-g"]
)
def test_tables_do_not_depend_on_the_block_size(real, name, chunk, monkeypatch) -> None:
    path = real.get(name, FIX / name)
    whole = _streamed(path, tz="UTC")
    monkeypatch.setattr(_blocks, "CHUNK_BYTES", chunk)
    blocks = _streamed(path, tz="UTC")
    assert set(blocks.tables) == set(whole.tables)
    for table in whole.tables:
        assert _t(blocks, table).equals(_t(whole, table)), table
    assert blocks.coverage == whole.coverage and blocks.meta == whole.meta
