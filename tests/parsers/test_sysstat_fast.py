"""The big-file paths of mpstat and iostat give the regular path's tables, row for row.

Every fixture and the real H200 capture's files are parsed twice: with the big-file path
forced on (tiny chunks, so that headers, reports, roll-over and layouts carry across chunk
boundaries) and with it off; tables and coverage must be identical. With a sink (as in the
pipeline) the streamed frames, put together, must be those tables. Hostile edits (bad
values, separators, other layouts, partitions, bad stamps, CRLF, NUL bytes, a cut last
line, midnight...) go through both as well. The numpy number reader is checked against
the regular path's cast on random text.
"""

from __future__ import annotations

import random
import re
import tarfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal, assert_series_equal

from analyzer.parsers import (
    _iostat_fast,
    _iostat_scan,
    _sysstat_fast,
    _sysstat_swar,
    base,
    iostat,
    mpstat,
)
from analyzer.parsers import _sysstat as s

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"


def _outputs(tool: str, json: bool) -> list[Path]:
    """The tool's fixture outputs, text or JSON (jc's expected ``.json`` excluded)."""
    out = []
    for p in sorted((FIX / tool).iterdir()):
        if p.name == "PROVENANCE.md" or (p.name.startswith("jc__") and p.suffix == ".json"):
            continue
        is_json = p.suffix == ".json" or p.name.endswith("JSON")
        if is_json == json:
            out.append(p)
    return out


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("real")
    names = ("mpstat.out", "mpstat_irq.out", "iostat.out", "iostat_json.out")
    with tarfile.open(SAMPLE) as tar:
        for m in tar.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name in names:
                f = tar.extractfile(m)
                assert f is not None
                (out / name).write_bytes(f.read())
    return {p.name: p for p in out.iterdir()}


def _both(
    module,
    path: Path,
    mp: pytest.MonkeyPatch,
    chunk: int = 4096,
    sink: bool = False,
    passes: int = 1,
    **kw,
) -> tuple[base.ParseResult, base.ParseResult]:
    """(big-file path, regular path) results; with ``sink`` the streamed frames are put
    back into the first result's tables. ``passes=2``: iostat text scans the file first
    (as it does for files over ``ONE_PASS_BYTES``)."""
    got: dict[str, list[pl.DataFrame]] = {}

    def keep(name: str, frame: pl.DataFrame) -> None:
        got.setdefault(name, []).append(frame)

    kw.setdefault("tz", "UTC")
    ctx = base.ParseContext(file_name=path.name, sink=keep if sink else None, **kw)
    mp.setattr(_sysstat_fast, "MIN_FAST_BYTES", 0)
    mp.setattr(_sysstat_fast, "CHUNK_BYTES", chunk)
    mp.setattr(_iostat_fast, "ONE_PASS_BYTES", 1 << 62 if passes == 1 else -1)
    fast = module.parse(path, ctx)
    for name, frames in got.items():
        assert name not in fast.tables, "a table both streamed and returned"
        fast.tables[name] = pl.concat(frames)
    mp.setattr(_sysstat_fast, "MIN_FAST_BYTES", 1 << 62)
    slow = module.parse(path, base.ParseContext(file_name=path.name, **kw))
    return fast, slow


def _frames(res: base.ParseResult) -> dict[str, pl.DataFrame]:
    return {k: (v.collect() if isinstance(v, pl.LazyFrame) else v) for k, v in res.tables.items()}


def _assert_same(fast: base.ParseResult, slow: base.ParseResult) -> None:
    fast.coverage.check()
    a, b = _frames(fast), _frames(slow)
    assert set(a) == set(b)
    for name in a:
        assert_frame_equal(a[name], b[name])
    for f in ("total", "parsed", "structure", "skipped", "notes"):
        assert getattr(fast.coverage, f) == getattr(slow.coverage, f), f
    assert fast.meta == slow.meta


@pytest.mark.parametrize("path", _outputs("mpstat", json=False), ids=lambda p: p.name)
def test_mpstat_fast_path_equals_regular_path_on_every_fixture(path, monkeypatch) -> None:
    _assert_same(*_both(mpstat, path, monkeypatch))


@pytest.mark.parametrize("sink", [False, True], ids=["returned", "streamed"])
@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("path", _outputs("iostat", json=False), ids=lambda p: p.name)
def test_iostat_fast_path_equals_regular_path_on_every_fixture(
    path, sink, passes, monkeypatch
) -> None:
    _assert_same(*_both(iostat, path, monkeypatch, sink=sink, passes=passes))


@pytest.mark.parametrize("sink", [False, True], ids=["returned", "streamed"])
@pytest.mark.parametrize("path", _outputs("iostat", json=True), ids=lambda p: p.name)
def test_iostat_json_in_blocks_equals_whole_file_reader_on_every_fixture(
    path, sink, monkeypatch
) -> None:
    _assert_same(*_both(iostat, path, monkeypatch, chunk=512, sink=sink))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", ["mpstat.out", "mpstat_irq.out"])
@pytest.mark.parametrize("chunk", [2048, 65536, 1 << 24])
def test_mpstat_fast_path_equals_regular_path_on_a_real_capture(
    real, name, chunk, workers, monkeypatch
) -> None:
    monkeypatch.setattr(_sysstat_fast, "workers", lambda size: workers)
    fast, slow = _both(mpstat, real[name], monkeypatch, chunk)
    assert fast.coverage.parsed > 1000
    _assert_same(fast, slow)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("sink", [False, True], ids=["returned", "streamed"])
@pytest.mark.parametrize("chunk", [2048, 1 << 24])
def test_iostat_fast_path_equals_regular_path_on_a_real_capture(
    real, chunk, sink, passes, workers, monkeypatch
) -> None:
    monkeypatch.setattr(_sysstat_fast, "workers", lambda size: workers)
    fast, slow = _both(iostat, real["iostat.out"], monkeypatch, chunk, sink, passes)
    assert fast.coverage.parsed > 300
    _assert_same(fast, slow)


@pytest.mark.parametrize("name", ["mpstat.out", "mpstat_irq.out", "iostat.out"])
def test_fast_paths_read_local_times_in_the_zone_of_the_capture(real, name, monkeypatch) -> None:
    module = iostat if name.startswith("iostat") else mpstat
    fast, slow = _both(module, real[name], monkeypatch, 8192, True, tz="America/New_York")
    _assert_same(fast, slow)


@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("name", ["mpstat.out", "mpstat_irq.out", "iostat.out"])
def test_a_file_that_is_not_utf8_goes_to_the_regular_path_whole(
    real, name, passes, tmp_path, monkeypatch
) -> None:
    data = bytearray(real[name].read_bytes())
    at = data.index(b"\n", len(data) * 2 // 3) + 3  # a line far from the start
    data[at : at + 1] = b"\xff"
    path = tmp_path / name
    path.write_bytes(bytes(data))
    module = iostat if name.startswith("iostat") else mpstat
    fast, slow = _both(module, path, monkeypatch, 8192, True, passes)
    assert "file is not valid UTF-8: invalid bytes replaced" in fast.coverage.notes
    _assert_same(fast, slow)


@pytest.mark.parametrize("command", [None, "iostat -t -x -y -o JSON 1 160"])
@pytest.mark.parametrize("chunk", [1024, 65536, 1 << 24])
def test_iostat_json_in_blocks_equals_whole_file_reader_on_a_real_capture(
    real, chunk, command, monkeypatch
) -> None:
    fast, slow = _both(iostat, real["iostat_json.out"], monkeypatch, chunk, True, command=command)
    assert fast.coverage.parsed > 300
    _assert_same(fast, slow)


def _edit(src: Path, dst: Path, fn) -> Path:
    lines = src.read_text().split("\n")
    dst.write_text("\n".join(fn(lines)))
    return dst


def _mpstat_edits() -> dict[str, object]:
    def bad_value(ls):
        ls[40] = ls[40][:-6] + " x1.00"
        return ls

    def semicolon(ls):
        ls[41] = ls[41][:20] + ";" + ls[41][21:]
        return ls

    def node_table(ls):
        i = next(n for n, x in enumerate(ls) if n > 100 and "CPU" in x)
        hdr = ls[i].replace("     CPU", "    NODE")
        return [*ls[:i], hdr, ls[i + 1], "", *ls[i:]]

    def crlf_nul(ls):
        ls[60] += "\r"
        ls[61] = ls[61][:30] + "\x00" + ls[61][30:]
        return ls

    def cut_last(ls):
        return [*ls[:-1], ls[-1][:25]] if ls[-1] else [*ls[:-2], ls[-2][:25]]

    def midnight(ls):
        def shift(m: re.Match) -> str:
            h, mi, s = int(m[1]), int(m[2]), int(m[3])
            t = (h * 3600 + mi * 60 + s + 5 * 3600 + 14 * 60) % 86400
            return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"

        return [re.sub(r"^(\d\d):(\d\d):(\d\d)", shift, x) for x in ls]

    def garbage(ls):
        return [*ls[:70], "garbage line", "12:00:00 all", *ls[70:]]

    def bad_times(ls):
        rows = [n for n, x in enumerate(ls) if re.match(r"\d\d:\d\d:\d\d +\d", x)]
        for n, t in zip(rows[5:9], ["24:00:00", "12:60:00", "12:00:60", "1x:00:00"], strict=True):
            ls[n] = t + ls[n][8:]
        return ls

    def wide_value(ls):
        rows = [n for n, x in enumerate(ls) if re.match(r"\d\d:\d\d:\d\d +\d", x)]
        ls[rows[3]] = ls[rows[3]][:-6] + "1234.567"
        return ls

    def banner_again(ls):  # a restarted capture: banner, blank, a header of the same layout
        i = next(n for n, x in enumerate(ls) if n > 100 and "CPU" in x)
        return [*ls[:i], ls[0], "", *ls[i:]]

    def no_banner(ls):  # no date: NULL times
        return ls[1:]

    return {
        "no_banner": no_banner,
        "banner_again": banner_again,
        "bad_value": bad_value,
        "semicolon": semicolon,
        "node_table": node_table,
        "crlf_nul": crlf_nul,
        "cut_last": cut_last,
        "midnight": midnight,
        "garbage": garbage,
        "bad_times": bad_times,
        "wide_value": wide_value,
    }


@pytest.mark.parametrize("name", ["mpstat.out", "mpstat_irq.out"])
@pytest.mark.parametrize("edit", list(_mpstat_edits()))
def test_mpstat_fast_path_equals_regular_path_on_hostile_edits(
    real, edit, name, tmp_path, monkeypatch
) -> None:
    path = _edit(real[name], tmp_path / name, _mpstat_edits()[edit])
    _assert_same(*_both(mpstat, path, monkeypatch, 8192))


def _iostat_edit(edit: str, ls: list[str]) -> list[str]:
    rows = [n for n, x in enumerate(ls) if n > 60 and x.startswith("vd")]
    i = rows[0]
    hdr = next(x for x in ls if x.startswith("Device"))
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
    elif edit == "partition":  # vda1 beside vda: -p output, is_partition is set
        ls = [*ls[:i], ls[i].replace("vda ", "vda1", 1), *ls[i:]]
    elif edit == "second_layout":
        basic = "Device             tps    kB_read/s    kB_wrtn/s    kB_read    kB_wrtn"
        row = "vda               1.00         0.00        12.00          0         12"
        ls = [*ls[:i], "", basic, row, "", hdr, *ls[i:]]
    elif edit == "named_like_structure":
        ls[rows[1]] = "Device" + ls[rows[1]][6:]
        ls[rows[3]] = "avg-cpu:x" + ls[rows[3]][9:]
    elif edit == "bad_stamps":
        stamps = [n for n, x in enumerate(ls) if re.match(r"\d{4}-\d\d-\d\dT", x)]
        ls[stamps[3]] = "2026-02-30T18:45:05+0000"
        ls[stamps[4]] = "2026-11-29T25:45:05+0000"
        ls[stamps[5]] = "2026-11-29 18:45:05"
    elif edit == "wide_row":
        ls[i] = ls[i].replace("    0.00", "123456789.00", 1)
    elif edit == "tab_and_spaces":
        ls[i] = "vda\t" + ls[i][4:]
        ls = [*ls[: i + 1], "      ", *ls[i + 1 :]]
    elif edit == "banner_again":
        ls = [*ls[:i], "", ls[0], "", *ls[i:]]
    elif edit == "row_without_header":
        stamp = next(n for n, x in enumerate(ls) if n > i and re.match(r"\d{4}-", x))
        ls = [*ls[: stamp + 1], ls[i], *ls[stamp + 1 :]]
    elif edit == "cpu_row_letter":
        n = next(n for n, x in enumerate(ls) if n > i and x.startswith("avg-cpu"))
        ls[n + 1] = ls[n + 1][:-5] + "9x.27"
    elif edit == "header_twice":
        ls = [*ls[:i], hdr, *ls[i:]]
    return ls


_IOSTAT_EDITS = [
    "bad_value",
    "semicolon",
    "crlf_nul",
    "cut_last",
    "garbage",
    "partition",
    "second_layout",
    "named_like_structure",
    "bad_stamps",
    "wide_row",
    "tab_and_spaces",
    "banner_again",
    "row_without_header",
    "cpu_row_letter",
    "header_twice",
]


@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("sink", [False, True], ids=["returned", "streamed"])
@pytest.mark.parametrize("edit", _IOSTAT_EDITS)
def test_iostat_fast_path_equals_regular_path_on_hostile_edits(
    real, edit, sink, passes, tmp_path, monkeypatch
) -> None:
    path = _edit(real["iostat.out"], tmp_path / "iostat.out", lambda ls: _iostat_edit(edit, ls))
    cmd = "iostat -t -x -y 1 160"
    fast, slow = _both(iostat, path, monkeypatch, 8192, sink, passes, command=cmd)
    _assert_same(fast, slow)
    names = set(_frames(slow)["iostat_device"].get_column("device").unique().to_list())
    assert names <= _iostat_scan.scan(path, "").names  # the first pass misses no device


@pytest.mark.parametrize("edit", [*_IOSTAT_EDITS, "layout_at_the_end"])
def test_iostat_streams_in_one_pass_what_it_streams_after_a_first_pass(
    real, edit, tmp_path, monkeypatch
) -> None:
    def edited(ls: list[str]) -> list[str]:
        if edit != "layout_at_the_end":
            return _iostat_edit(edit, ls)
        basic = "Device             tps    kB_read/s    kB_wrtn/s    kB_read    kB_wrtn"
        return [*ls, "", basic, "vdb               1.00         0.00        12.00          0  12"]

    path = _edit(real["iostat.out"], tmp_path / "iostat.out", edited)
    monkeypatch.setattr(_sysstat_fast, "MIN_FAST_BYTES", 0)
    monkeypatch.setattr(_sysstat_fast, "CHUNK_BYTES", 8192)

    def streamed(one_pass: int) -> tuple[set[str], set[str]]:
        monkeypatch.setattr(_iostat_fast, "ONE_PASS_BYTES", one_pass)
        got: set[str] = set()
        ctx = base.ParseContext(file_name=path.name, tz="UTC", sink=lambda n, f: got.add(n))
        return got, set(iostat.parse(path, ctx).tables)

    assert streamed(1 << 62) == streamed(-1)


def _json_edit(edit: str, ls: list[str]) -> list[str]:
    disks = [n for n, x in enumerate(ls) if '"disk_device"' in x]
    i = disks[4]
    if edit == "malformed":
        ls[i] = ls[i][:60]
        ls[disks[6]] = ls[disks[6]].replace('"w/s": ', '"w/s":  ', 1)
    elif edit == "partition":
        ls = [*ls[:i], ls[i].replace('"vda"', '"vda1"'), *ls[i:]]
    elif edit == "stamp_after_rows":
        stamp = next(n for n in range(i, 0, -1) if '"timestamp"' in ls[n])
        ls = [*ls[:stamp], *ls[stamp + 1 : i + 1], ls[stamp], *ls[i + 1 :]]
    elif edit == "crlf_nul":
        ls[i] += "\r"
        ls[disks[5]] = ls[disks[5]][:30] + "\x00" + ls[disks[5]][30:]
    elif edit == "cut_last":
        ls = [*ls[: disks[-1]], ls[disks[-1]][:50]]
    elif edit == "time_only_and_garbage":
        stamp = next(n for n, x in enumerate(ls) if n > i and '"timestamp"' in x)
        ls[stamp] = re.sub(r'"\d{4}-\d\d-\d\dT([\d:]+)\+0000"', r'"\1"', ls[stamp])
        ls = [*ls[:i], "garbage", *ls[i:]]
    return ls


@pytest.mark.parametrize(
    "edit",
    ["malformed", "partition", "stamp_after_rows", "crlf_nul", "cut_last", "time_only_and_garbage"],
)
def test_iostat_json_in_blocks_equals_whole_file_reader_on_hostile_edits(
    real, edit, tmp_path, monkeypatch
) -> None:
    src = real["iostat_json.out"]
    path = _edit(src, tmp_path / "iostat_json.out", lambda ls: _json_edit(edit, ls))
    _assert_same(*_both(iostat, path, monkeypatch, 4096, True))


def test_rows_stream_to_the_sink_when_one_is_given(real, monkeypatch) -> None:
    monkeypatch.setattr(_sysstat_fast, "MIN_FAST_BYTES", 0)
    monkeypatch.setattr(_sysstat_fast, "CHUNK_BYTES", 16384)
    for module, name, table in (
        (mpstat, "mpstat.out", "mpstat_cpu"),
        (iostat, "iostat.out", "iostat_device"),
        (iostat, "iostat_json.out", "iostat_device"),
    ):
        got: dict[str, int] = {}

        def sink(name: str, frame: pl.DataFrame, got=got) -> None:
            got[name] = got.get(name, 0) + frame.height

        path = real[name]
        res = module.parse(path, base.ParseContext(file_name=path.name, tz="UTC", sink=sink))
        assert res.tables == {}, name
        assert sum(got.values()) == res.coverage.parsed and got[table] > 100, name


def test_iostat_keeps_device_rows_whole_when_partitions_need_the_whole_file(
    real, tmp_path, monkeypatch
) -> None:
    path = _edit(real["iostat.out"], tmp_path / "p.out", lambda ls: _iostat_edit("partition", ls))
    fast, slow = _both(iostat, path, monkeypatch, 8192, sink=True)
    assert "iostat_device" in fast.tables and fast.tables["iostat_device"].height > 100
    flags = _frames(fast)["iostat_device"].group_by("device").agg(pl.col("is_partition").first())
    assert dict(flags.iter_rows()) == {"vda": False, "vda1": True, "vdb": False}
    _assert_same(fast, slow)


def _number_cases(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    alphabet = "0123456789 .,-xe+\t"
    out = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.4:
            v = f"{rnd.choice([0, rnd.random() * 10 ** rnd.randint(0, 13)]):.{rnd.randint(0, 3)}f}"
        elif r < 0.75:
            v = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 20)))
        else:
            v = "".join(rnd.choice("0123456789 .") for _ in range(rnd.randint(1, 20)))
        out.append(v)
    return out


@pytest.mark.parametrize("comma", [False, True])
@pytest.mark.parametrize(
    "slot", [(3, 11, 2), (5, 11, 2), (3, 9, 0), (2, 11, 2), (4, 20, 2), (10, 20, 1), (1, 23, 3)]
)
def test_numpy_numbers_are_the_regular_casts_or_refused(slot, comma) -> None:
    start, end, dec = slot
    width = 24
    cases = _number_cases(hash(slot) % 1000 + comma, 20000)
    fields, lines = [], []
    rnd = random.Random(1)
    for v in cases:
        if comma and rnd.random() < 0.5:
            v = v.replace(".", ",")
        fld = v[-(end - start) :].rjust(end - start)
        if rnd.random() < 0.1:
            fld = "x" + fld[1:]
        lines.append(("".join(rnd.choice("ab c1.") for _ in range(start)) + fld).ljust(width, "z"))
        fields.append(fld)
    m = np.frombuffer("".join(lines).encode(), np.uint8).reshape(len(lines), width).copy()
    ok, vals = _sysstat_swar.Numbers([slot], comma)(m)
    ok, vals = ok[0], vals[0]
    ref = pl.DataFrame({"x": [f[1:] for f in fields]}).select(s.number(pl.col("x"), comma=comma))
    ref = ref.to_series().to_numpy()
    point = r"[.,]" if comma else r"\."
    strict = re.compile(r" +\d+" + (point + r"\d{" + str(dec) + "}" if dec else ""))
    assert all(strict.fullmatch(f) for f in np.array(fields)[ok])  # nothing else is accepted
    assert (vals[ok] == ref[ok]).all()  # and it gets the regular path's value
    assert ok.sum() > 500


@pytest.mark.parametrize("comma", [False, True])
def test_narrow_numbers_give_the_two_word_reading_of_every_row(comma) -> None:
    slots = [(5, 16, 2), (16, 27, 2), (27, 35, 1), (35, 52, 3), (52, 57, 0)]
    width = 58
    rnd = random.Random(7)
    cases = _number_cases(11 + comma, 40000)
    lines = []
    for i in range(0, len(cases) - len(slots), len(slots)):
        row = "ab c1"
        for (start, end, dec), v in zip(slots, cases[i : i + len(slots)], strict=True):
            if rnd.random() < 0.9:  # mostly well-formed values, some of them long
                v = f"{rnd.random() * 10 ** rnd.randint(0, 10):.{dec}f}"
            v = v.replace(".", ",") if comma and rnd.random() < 0.5 else v
            row += v[-(end - start) :].rjust(end - start)
        lines.append(row.ljust(width, "z"))
    m = np.frombuffer("".join(lines).encode(), np.uint8).reshape(len(lines), width).copy()
    full = _sysstat_swar.Numbers(slots, comma)
    narrow = _sysstat_swar.Numbers(slots, comma, narrow=True)
    ok, vals = full(m)
    ok2, vals2 = narrow(m)
    for j in range(len(slots)):
        a, b = full.row[j], narrow.row[j]
        assert (ok[a] == ok2[b]).all()
        assert (vals[a][ok[a]] == vals2[b][ok2[b]]).all()
    assert (ok.sum(axis=1) > 1000).all() and (~ok).sum(axis=1).min() > 500
    assert ok.all(axis=0).sum() > 500


def test_numpy_clock_is_the_regular_clock_or_refused() -> None:
    rnd = random.Random(4)
    times = [
        f"{rnd.randint(0, 30):02d}:{rnd.randint(0, 70):02d}:{rnd.randint(0, 70):02d}"
        for _ in range(20000)
    ] + ["1x:00:00", "12-00:00", "12:00:0 "]
    m = np.frombuffer("".join(times).encode(), np.uint8).reshape(len(times), 8).copy()
    ok, sec = _sysstat_swar.clock(m)
    ref = pl.Series(times).to_frame("t").select(s.clock_seconds(pl.col("t"))).to_series()
    assert ok.sum() > 5000 and not ok[-3:].any()
    assert (sec[ok] == ref.to_numpy()[ok]).all()


def test_numpy_iso_stamps_are_the_regular_stamps() -> None:
    rnd = random.Random(9)
    cases = []
    for _ in range(30000):
        y = rnd.choice([1970, 2000, 2024, 2100, 2199, rnd.randint(1970, 2199)])
        mo, d = rnd.choice([rnd.randint(0, 13), 2]), rnd.choice([rnd.randint(0, 32), 29])
        h, mi, sec = rnd.randint(0, 25), rnd.randint(0, 61), rnd.randint(0, 61)
        off = f"{rnd.choice('+-')}{rnd.randint(0, 99):02d}{rnd.randint(0, 99):02d}"
        cases.append(f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{sec:02d}{off}")
    m = np.frombuffer("".join(cases).encode(), np.uint8).reshape(-1, 24)
    done, us = _iostat_scan.iso_utc(m)
    assert done.all()
    mine = (
        pl.Series(us)
        .to_frame("us")
        .select(
            pl.when(pl.col("us") != _iostat_scan.NO_TIME)
            .then(pl.col("us"))
            .cast(pl.Datetime("us"))
            .dt.replace_time_zone("UTC")
        )
    )
    ref = pl.DataFrame({"x": cases}).select(s.stamp_to_utc(pl.col("x"), "Europe/Berlin"))
    assert_series_equal(mine.to_series(), ref.to_series(), check_names=False)


def test_chunk_lines_are_the_same_text_by_python_or_by_arrow(monkeypatch) -> None:
    data = b"a b\n\nx\x00y\r\n  Device  \r\n\xc3\xa9t\xc3\xa9\nlast"
    chunk = _sysstat_fast.chunk_of(np.frombuffer(data, np.uint8), 7)
    idx = np.array([0, 1, 2, 3, 4, 5])
    few = chunk.lines(idx)
    monkeypatch.setattr(_sysstat_fast, "_FEW_LINES", 0)
    assert_frame_equal(chunk.lines(idx), few)
    assert few.get_column("line").to_list() == ["a b", "", "xy", "  Device  ", "été", "last"]
    assert few.get_column("line_no").to_list() == [7, 8, 9, 10, 11, 12]
    assert chunk.unterminated


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_blocks_cut_in_memory_are_whole_lines_of_the_file(chunk, tmp_path) -> None:
    data = b"a\n" + b"x" * 300 + b"\n\n" + b"".join(b"%d line\n" % i for i in range(500)) + b"end"
    path = tmp_path / "f.out"
    path.write_bytes(data)
    mem = list(_sysstat_fast.split_blocks(_sysstat_fast.read_all(path), chunk))
    disk = list(_sysstat_fast.read_blocks(path, chunk))
    for blocks in (mem, disk):
        assert b"".join(b.tobytes() for b in blocks) == data
        assert all(b[-1] == 10 for b in blocks[:-1]) and all(b.size for b in blocks)
