"""The big-file fast paths of mpstat and iostat give the regular path's tables, row for row.

Every text fixture and the real H200 capture's files are parsed twice: with the fast path
forced on (tiny chunks, so that headers, roll-over and layouts carry across chunk
boundaries) and with it off; tables and coverage must be identical. Hostile edits (bad
values, separators, other tables of the same width, CRLF, NUL bytes, a cut last line,
midnight) go through both as well.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer.parsers import _sysstat_fast, base, iostat, mpstat

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"


def _texts(tool: str) -> list[Path]:
    return sorted(p for p in (FIX / tool).iterdir() if p.suffix in (".txt", ".out") and p.is_file())


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("real")
    with tarfile.open(SAMPLE) as tar:
        for m in tar.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name in ("mpstat.out", "mpstat_irq.out", "iostat.out"):
                f = tar.extractfile(m)
                assert f is not None
                (out / name).write_bytes(f.read())
    return {p.name: p for p in out.iterdir()}


def _both(module, path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int = 4096):
    ctx = base.ParseContext(file_name=path.name, tz="UTC")
    monkeypatch.setattr(_sysstat_fast, "MIN_FAST_BYTES", 0)
    monkeypatch.setattr(_sysstat_fast, "CHUNK_BYTES", chunk)
    fast = module.parse(path, ctx)
    monkeypatch.setattr(_sysstat_fast, "MIN_FAST_BYTES", 1 << 62)
    slow = module.parse(path, ctx)
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


@pytest.mark.parametrize("path", _texts("mpstat"), ids=lambda p: p.name)
def test_mpstat_fast_path_equals_regular_path_on_every_fixture(path, monkeypatch) -> None:
    _assert_same(*_both(mpstat, path, monkeypatch))


@pytest.mark.parametrize("path", _texts("iostat"), ids=lambda p: p.name)
def test_iostat_fast_path_equals_regular_path_on_every_fixture(path, monkeypatch) -> None:
    _assert_same(*_both(iostat, path, monkeypatch))


@pytest.mark.parametrize("name", ["mpstat.out", "mpstat_irq.out"])
@pytest.mark.parametrize("chunk", [2048, 65536, 1 << 24])
def test_mpstat_fast_path_equals_regular_path_on_a_real_capture(
    real, name, chunk, monkeypatch
) -> None:
    fast, slow = _both(mpstat, real[name], monkeypatch, chunk)
    assert fast.coverage.parsed > 1000
    _assert_same(fast, slow)


@pytest.mark.parametrize("chunk", [2048, 1 << 24])
def test_iostat_fast_path_equals_regular_path_on_a_real_capture(real, chunk, monkeypatch) -> None:
    fast, slow = _both(iostat, real["iostat.out"], monkeypatch, chunk)
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

    return {
        "bad_value": bad_value,
        "semicolon": semicolon,
        "node_table": node_table,
        "crlf_nul": crlf_nul,
        "cut_last": cut_last,
        "midnight": midnight,
        "garbage": garbage,
    }


@pytest.mark.parametrize("edit", list(_mpstat_edits()))
def test_mpstat_fast_path_equals_regular_path_on_hostile_edits(
    real, edit, tmp_path, monkeypatch
) -> None:
    path = _edit(real["mpstat.out"], tmp_path / "mpstat.out", _mpstat_edits()[edit])
    _assert_same(*_both(mpstat, path, monkeypatch, 8192))


@pytest.mark.parametrize("edit", ["bad_value", "semicolon", "crlf_nul", "cut_last", "garbage"])
def test_iostat_fast_path_equals_regular_path_on_hostile_edits(
    real, edit, tmp_path, monkeypatch
) -> None:
    def fn(ls):
        i = next(n for n, x in enumerate(ls) if n > 60 and x.startswith("vd"))
        if edit == "bad_value":
            ls[i] = ls[i][:-6] + " x1.00"
        elif edit == "semicolon":
            ls[i] = ls[i][:30] + ";" + ls[i][31:]
        elif edit == "crlf_nul":
            ls[i] += "\r"
            ls[i + 1] = ls[i + 1][:40] + "\x00" + ls[i + 1][40:]
        elif edit == "cut_last":
            ls = [*ls[:-3], ls[-3][:30]]
        else:
            ls = [*ls[:i], "garbage", *ls[i:]]
        return ls

    path = _edit(real["iostat.out"], tmp_path / "iostat.out", fn)
    _assert_same(*_both(iostat, path, monkeypatch, 8192))


def test_rows_stream_to_the_sink_when_one_is_given(real, monkeypatch) -> None:
    monkeypatch.setattr(_sysstat_fast, "MIN_FAST_BYTES", 0)
    monkeypatch.setattr(_sysstat_fast, "CHUNK_BYTES", 16384)
    got: dict[str, int] = {}

    def sink(name: str, frame: pl.DataFrame) -> None:
        got[name] = got.get(name, 0) + frame.height

    path = real["mpstat.out"]
    res = mpstat.parse(path, base.ParseContext(file_name=path.name, tz="UTC", sink=sink))
    assert res.tables == {}
    assert got["mpstat_cpu"] == res.coverage.parsed
