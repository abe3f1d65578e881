"""Chunked reading of the sampler files (cgroup, meminfo, proc_vmstat): analyzer/parsers/_sampler_stream.py.

Oracles: (1) one chunk for the whole file, rows returned - what the parsers did before
they streamed; (2) the regular line expressions alone (the fast CSV path switched off).
Inputs are real: the parsers' fixtures, sampler series built from fixture lines, the
real H200 capture's and a synth bundle's sampler files, and hostile edits of them.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzer import store as store_module
from analyzer.errors import ParseError
from analyzer.parsers import PARSERS, base
from analyzer.parsers import _cgroup_build as cgb
from analyzer.parsers import _sampler as smp
from analyzer.parsers import _sampler_stream as st
from analyzer.pipeline import Options, run

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
SAMPLES = ROOT / "samples"
TOOLS = {"cgroup": "cgroup", "proc_meminfo": "meminfo", "proc_vmstat": "proc_vmstat"}
CG = "/sys/fs/cgroup"


def _series(tmp: Path) -> list[tuple[str, Path]]:
    """The sampler files of the real H200 capture and of a synth bundle with throttling."""
    out = []
    for bundle in ("h200-checkpoint-stall.tgz", "synth-cpu_throttle.tgz"):
        with tarfile.open(SAMPLES / bundle) as tar:
            for tool, stem in TOOLS.items():
                member = next(m for m in tar.getmembers() if m.name.endswith(f"series/{stem}.out"))
                target = tmp / f"{bundle}-{stem}.out"
                target.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
                out.append((tool, target))
    return out


def _built(tmp: Path) -> list[tuple[str, Path]]:
    """Sampler series built from fixture lines, several samples each, with v1 files."""
    mem = (FIX / "proc_meminfo" / "oomd-fixtures__meminfo").read_text().splitlines()
    vm = (FIX / "proc_vmstat" / "sysstat-tests-root1__vmstat").read_text().splitlines()
    cpu = (FIX / "cgroup" / "telegraf__v2__cpu.stat").read_text().splitlines()
    mstat = (FIX / "cgroup" / "telegraf__v2__memory.stat").read_text().splitlines()
    files: dict[str, list[str]] = {"proc_meminfo": [], "proc_vmstat": [], "cgroup": []}
    for i in range(12):
        t = f"17644248{i:02d}.{i * 7:03d}"
        files["proc_meminfo"] += [f"{t} /proc/meminfo {ln}" for ln in mem]
        files["proc_vmstat"] += [
            f"{t} /proc/vmstat {k} {int(v) + i * i}" for k, v in (x.split() for x in vm)
        ]
        files["proc_vmstat"] += [f"{t} /sys/devices/system/node/node1/vmstat nr_dirty {i}"]
        files["cgroup"] += [
            f"{t} {CG}/train.slice/cpu.stat {k} {int(v) + i * 1000}"
            for k, v in (x.split() for x in cpu)
        ]
        files["cgroup"] += [f"{t} {CG}/train.slice/memory.stat {ln}" for ln in mstat]
        files["cgroup"] += [
            f"{t} {CG}/train.slice/memory.current {100 + i}",
            f"{t} {CG}/train.slice/memory.max max",
            f"{t} {CG}/train.slice/io.stat 259:0 rbytes={i} wbytes=2 rios=3 wios=4 dbytes=0 dios=0",
            f"{t} {CG}/train.slice/io.stat 8:0 rbytes=5 wbytes={i}",
            f"{t} {CG}/train.slice/pids.current 7",
            f"{t} {CG}/train.slice/cpu.pressure some avg10=0.00 avg60=0.00 avg300=0.00 total=1",
            f"{t} {CG}/cpu,cpuacct/train/cpuacct.usage {i * 10**9}",
            f"{t} {CG}/cpu,cpuacct/train/cpu.stat nr_throttled {i}",
            f"{t} {CG}/cpu,cpuacct/train/cpu.max 50000 100000",
            f"{t} {CG}/blkio/train/blkio.throttle.io_service_bytes 8:0 Read {i}",
            f"{t} {CG}/blkio/train/blkio.throttle.io_service_bytes 8:0 Write 9",
            f"{t} {CG}/blkio/train/blkio.throttle.io_service_bytes 8:0 Sync 9",
            f"{t} {CG}/blkio/train/blkio.throttle.io_service_bytes 8:0 Async 0",
            f"{t} {CG}/blkio/train/blkio.throttle.io_serviced 8:0 Discard {i}",
            f"{t} {CG}/train.slice/io.max 259:0 rbps=max wbps=1048576 riops=max wiops=max",
            f"{t} {CG}/train.slice/memory.events.local oom_kill {i}",
            f"{t} {CG}/cpu,cpuacct/train/cpuacct.stat user {i}",
            f"{t} {CG}/cpu,cpuacct/train/cpuacct.stat guest {i}",
            f"{t} {CG}/my\\040group/memory.swap.current {i}",
            f"{t} {CG}/train.slice/memory.swap.current {i}",  # this sample's lines not contiguous
            f"{t} {CG}/blkio/train/blkio.throttle.io_service_bytes 8:0 Total {i + 9}",
            f"{t} {CG}/blkio/train/blkio.throttle.io_service_bytes Total {i + 9}",
            f"{t} {CG}/memory/train/memory.oom_control oom_kill {i // 4}",
        ]
    out = []
    for tool, lines in files.items():
        p = tmp / f"built-{tool}.out"
        p.write_text("\n".join(lines) + "\n")
        out.append((tool, p))
    return out


def _hostile(tmp: Path, inputs: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Edits of each input that the CSV path must hand to the line expressions."""
    edits = {  # one trait each: clean chunks keep the CSV path for their other lines
        "crlf": lambda b: b.replace(b"\n", b"\r\n"),
        "nul": lambda b: b.replace(b" 0\n", b" 0\x00\n", 3),
        "latin1": lambda b: b.replace(b"\n", b"\n\xe9t\xe9 1\n", 1),
        "tabs": lambda b: b.replace(b" ", b"\t", 3),
        "plus": lambda b: b.replace(b" 1", b" +1", 5),
        "minus": lambda b: b.replace(b" 2", b" -2", 5).replace(b" 3", b" --3", 2),
        "overflow": lambda b: b.replace(b" 3", b" 99999999999999999999", 5),
        "spaces": lambda b: b.replace(b" ", b"  ", 40),
        "trailing": lambda b: b.replace(b"\n", b" \n", 30).replace(b"\n", b"  \n", 3),
        "blank": lambda b: b.replace(b"\n", b"\n\n", 7).replace(b"\n", b"\n \n", 3),
        "words": lambda b: b.replace(b"\n", b" extra\n", 9).replace(b"\n", b" x y\n", 3),
        "gapped": lambda b: b.replace(b"\n", b"  x\n", 5).replace(b" kB\n", b" kB  x\n", 5),
        "units": lambda b: b.replace(b" kB\n", b" MB\n", 3).replace(b"0\n", b"0 kB\n", 3),
        "colons": lambda b: b.replace(b":", b" ", 5).replace(b" ", b":", 5),
        "cut": lambda b: b.replace(b"\n", b"\n1764424800.5 /x\n", 2)[:-7],
    }
    out = []
    for tool, src in inputs:
        data = src.read_bytes()[:20_000]
        for name, edit in edits.items():
            p = tmp / f"{src.stem}-{name}"
            p.write_bytes(edit(data))
            out.append((tool, p))
    return out


def _fixtures() -> list[tuple[str, Path]]:
    return [
        (tool, p)
        for tool, d in (
            ("cgroup", "cgroup"),
            ("proc_meminfo", "proc_meminfo"),
            ("proc_vmstat", "proc_vmstat"),
        )
        for p in sorted((FIX / d).iterdir())
        if p.suffix not in (".json", ".md")
    ]


def _head(src: Path, tmp: Path, size: int) -> Path:
    """The first whole lines of ``src``, about ``size`` bytes."""
    data = src.read_bytes()[:size]
    target = tmp / f"{src.name}-head"
    target.write_bytes(data[: data.rfind(b"\n") + 1])
    return target


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path]]:
    """Whole real and synth sampler files, built series and the fixtures."""
    tmp = tmp_path_factory.mktemp("sampler-whole")
    return _fixtures() + _series(tmp) + _built(tmp)


@pytest.fixture(scope="module")
def inputs(
    whole: list[tuple[str, Path]], tmp_path_factory: pytest.TempPathFactory
) -> list[tuple[str, Path]]:
    """Small inputs for many chunks: fixtures, heads of the series, hostile edits."""
    tmp = tmp_path_factory.mktemp("sampler-inputs")
    series = [(tool, _head(p, tmp, 40_000)) for tool, p in whole if p.suffix == ".out"]
    return _fixtures() + series + _hostile(tmp, series)


def _parse(tool: str, path: Path, stream: bool) -> tuple[dict[str, pl.DataFrame], dict] | str:
    """Tables (rows in emission order) and coverage of one parse; the error text if any."""
    got: dict[str, list[pl.DataFrame]] = {}

    def sink(name: str, frame: pl.DataFrame) -> None:
        got.setdefault(name, []).append(frame)

    ctx = base.ParseContext(file_name=path.name, sink=sink if stream else None)
    try:
        res = PARSERS[tool].parse(path, ctx)
    except ParseError as e:
        return str(e)
    res.coverage.check()
    for name, frame in res.tables.items():
        sink(name, frame.lazy().collect())
    tables = {
        n: pl.concat([PARSERS[tool].TABLES[n].conform(f).collect() for f in fs])
        for n, fs in got.items()
    }
    cov = res.coverage
    return tables, {
        "total": cov.total,
        "parsed": cov.parsed,
        "structure": cov.structure,
        "skipped": cov.skipped,
        "notes": cov.notes,
        "meta": dict(res.meta),
    }


def _same(a: tuple | str, b: tuple | str, what: str) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b, what
        return
    assert a[1] == b[1], what
    assert list(a[0]) == list(b[0]), what
    for name in a[0]:
        try:
            assert_frame_equal(a[0][name], b[0][name])
        except AssertionError as e:
            raise AssertionError(f"{what} {name}: {e}") from None


def test_small_chunks_give_the_whole_file_tables_and_coverage(
    inputs: list[tuple[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = [_parse(tool, p, stream=False) for tool, p in inputs]
    monkeypatch.setattr(st, "MIN_STREAM_BYTES", 0)
    for chunk in (1000, 8192):  # cuts records (a sample's lines) anywhere
        monkeypatch.setattr(st, "CHUNK_BYTES", chunk)
        for (tool, p), expected in zip(inputs, whole, strict=True):
            _same(_parse(tool, p, stream=True), expected, f"{tool} {p.name} chunk={chunk}")


def test_csv_path_gives_what_the_line_expressions_give(
    whole: list[tuple[str, Path]], inputs: list[tuple[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = whole + inputs
    fast = [_parse(tool, p, stream=False) for tool, p in cases]
    monkeypatch.setattr(st, "is_clean", lambda *a, **k: False)
    for (tool, p), got in zip(cases, fast, strict=True):
        _same(got, _parse(tool, p, stream=False), f"{tool} {p.name}")


def test_clean_sampler_lines_take_the_csv_path(
    whole: list[tuple[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    rest = {"lines": 0}
    real = smp.tally

    def counting(coverage: base.Coverage, frame: pl.DataFrame, col: str = "why") -> None:
        rest["lines"] += frame.height  # only the line expressions tally a frame
        real(coverage, frame, col)

    monkeypatch.setattr(smp, "tally", counting)
    total = 0
    for tool, p in whole:
        if p.suffix != ".out":
            continue
        rest["lines"] = 0
        res = _parse(tool, p, stream=False)
        assert not isinstance(res, str)
        total += res[1]["total"]
        # every line but cpu.max (one per built cgroup sample) takes the CSV path
        assert rest["lines"] == (12 if p.name == "built-cgroup.out" else 0), p.name
    assert total > 100_000


def test_big_file_rows_reach_the_sink_chunk_by_chunk(
    whole: list[tuple[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "MIN_STREAM_BYTES", 0)
    monkeypatch.setattr(st, "CHUNK_BYTES", 8192)
    for tool, path in whole:
        if not path.name.startswith("h200"):
            continue
        calls: list[tuple[str, int]] = []

        def sink(name: str, frame: pl.DataFrame, calls: list = calls) -> None:
            calls.append((name, frame.height))

        ctx = base.ParseContext(file_name=path.name, sink=sink)
        res = PARSERS[tool].parse(path, ctx)
        assert res.tables == {}
        assert len(calls) > 10
        assert sum(n for _, n in calls) >= res.coverage.parsed * (tool != "cgroup")
        first = [n for n, _ in calls][: len(PARSERS[tool].TABLES)]
        assert first == list(PARSERS[tool].TABLES)  # declared order, as before streaming


def test_cgroup_rows_of_one_sample_stay_one_row_across_a_chunk_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [f"1764424800.5 {CG}/a/memory.current 1", f"1764424800.5 {CG}/a/memory.events oom 2"]
    lines += [f"1764424801.5 {CG}/a/memory.current 3", f"1764424801.5 {CG}/a/memory.events oom 4"]
    p = tmp_path / "cgroup.out"
    p.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(st, "MIN_STREAM_BYTES", 0)
    monkeypatch.setattr(st, "CHUNK_BYTES", len(lines[0]) + 5)  # one line per chunk
    res = _parse("cgroup", p, stream=True)
    assert not isinstance(res, str)
    mem = res[0]["cgroup_memory"]
    assert mem.select("current_bytes", "events_oom").rows() == [(1, 2), (3, 4)]


def test_a_sampler_parse_failing_midway_leaves_no_streamed_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "MIN_STREAM_BYTES", 0)
    monkeypatch.setattr(st, "CHUNK_BYTES", 16384)
    monkeypatch.setattr(store_module, "BULK_ROWS", 1)  # streamed rows reach DuckDB at once
    real = cgb.Builder.add
    calls = {"n": 0}

    def flaky(self: cgb.Builder, tok: pl.DataFrame, final: bool = False) -> dict[str, pl.DataFrame]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected failure")
        return real(self, tok, final)

    monkeypatch.setattr(cgb.Builder, "add", flaky)
    db = tmp_path / "failed.duckdb"
    result = run(SAMPLES / "h200-checkpoint-stall.tgz", Options(report=None, db=db))
    failed = [r for r in result.collectors if r["status"] == "failed"]
    assert [r["file"] for r in failed] == ["series/cgroup.out"]
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        have = {
            r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()
        }
        written = [t for t in PARSERS["cgroup"].TABLES if t in have]
        assert written  # rows were streamed before the failure...
        for table in written:  # ...and none of them is left
            q = f"SELECT count(*) FROM {table} WHERE source_file = 'series/cgroup.out'"
            assert con.sql(q).fetchall() == [(0,)], table
    finally:
        con.close()
    assert calls["n"] == 3


def test_time_going_back_across_a_chunk_cut_loses_no_line(
    whole: list[tuple[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock step back: the second half of a file written again after its first half.
    Chunks may then build wide rows and deltas differently (documented), but every line
    is accounted for exactly as in one chunk and nothing fails."""
    monkeypatch.setattr(st, "MIN_STREAM_BYTES", 0)
    for tool, src in whole:
        if not src.name.startswith("built-"):
            continue
        lines = src.read_bytes().splitlines(keepends=True)
        p = tmp_path / src.name
        p.write_bytes(b"".join(lines[len(lines) // 2 :] + lines))
        monkeypatch.setattr(st, "CHUNK_BYTES", 1 << 30)
        one = _parse(tool, p, stream=True)
        monkeypatch.setattr(st, "CHUNK_BYTES", 2000)
        many = _parse(tool, p, stream=True)
        assert not isinstance(one, str) and not isinstance(many, str)
        assert {k: v for k, v in one[1].items() if k != "notes"} == {
            k: v for k, v in many[1].items() if k != "notes"
        }
