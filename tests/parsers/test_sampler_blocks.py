"""The sampler files (cgroup, meminfo, proc_vmstat) read block by block (`_blocks.Blocks`).

Oracle: the same file read as one block, rows returned. Inputs are real: the parsers'
fixtures, sampler series built from fixture lines, the real H200 capture's and a synth
bundle's sampler files, and hostile edits of them (CRLF, NUL, Latin-1, tabs, signs,
overflow, runs of spaces, blank lines, extra words, cut lines).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import duckdb
import polars as pl
import pytest
from blockwise import assert_same_as_one_block
from blockwise import parse as parse_in_blocks

from analyzer import store as store_module
from analyzer.errors import ParseError
from analyzer.parsers import PARSERS, _blocks, base, cgroup
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
    """Edits of each input, one trait each (the other lines stay well-formed)."""
    edits = {
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
        for tool in TOOLS
        for p in sorted((FIX / tool).iterdir())
        if not p.name.endswith((".json", ".md"))
    ]


def _head(src: Path, tmp: Path, size: int) -> Path:
    """The first whole lines of ``src``, about ``size`` bytes."""
    data = src.read_bytes()[:size]
    target = tmp / f"{src.name}-head"
    target.write_bytes(data[: data.rfind(b"\n") + 1])
    return target


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path]]:
    """Whole real and synth sampler files and the built series."""
    tmp = tmp_path_factory.mktemp("sampler-whole")
    return _series(tmp) + _built(tmp)


@pytest.fixture(scope="module")
def inputs(
    whole: list[tuple[str, Path]], tmp_path_factory: pytest.TempPathFactory
) -> list[tuple[str, Path]]:
    """Small inputs for many blocks: fixtures, heads of the series, hostile edits."""
    tmp = tmp_path_factory.mktemp("sampler-inputs")
    series = [(tool, _head(p, tmp, 40_000)) for tool, p in whole]
    return _fixtures() + series + _hostile(tmp, series)


def test_small_blocks_give_the_whole_file_tables_and_coverage(
    inputs: list[tuple[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for tool, p in inputs:
        module = PARSERS[tool]
        try:
            parse_in_blocks(module, p, None, monkeypatch)
        except ParseError:  # then every block size fails the same way
            with pytest.raises(ParseError):
                parse_in_blocks(module, p, 1000, monkeypatch)
            continue
        assert_same_as_one_block(module, p, (1000, 8192), monkeypatch)  # cuts records anywhere


def test_big_file_rows_reach_the_sink_block_by_block(
    whole: list[tuple[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_blocks, "CHUNK_BYTES", 8192)
    for tool, path in whole:
        if not path.name.startswith("h200"):
            continue
        calls: list[tuple[str, int]] = []

        def sink(name: str, frame: pl.DataFrame, calls: list = calls) -> None:
            calls.append((name, frame.height))

        res = PARSERS[tool].parse(path, base.ParseContext(file_name=path.name, sink=sink))
        assert res.tables == {}
        assert len(calls) > 10
        assert sum(n for _, n in calls) >= res.coverage.parsed * (tool != "cgroup")
        first = [n for n, _ in calls][: len(PARSERS[tool].TABLES)]
        assert first == list(PARSERS[tool].TABLES)  # declared order


def test_cgroup_rows_of_one_sample_stay_one_row_across_a_block_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [f"1764424800.5 {CG}/a/memory.current 1", f"1764424800.5 {CG}/a/memory.events oom 2"]
    lines += [f"1764424801.5 {CG}/a/memory.current 3", f"1764424801.5 {CG}/a/memory.events oom 4"]
    p = tmp_path / "cgroup.out"
    p.write_text("\n".join(lines) + "\n")
    tables, _, _ = parse_in_blocks(cgroup, p, len(lines[0]) + 5, monkeypatch)  # a line a block
    mem = tables["cgroup_memory"]
    assert mem.select("current_bytes", "events_oom").rows() == [(1, 2), (3, 4)]


def test_a_sampler_parse_failing_midway_leaves_no_streamed_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = _blocks.Blocks

    def small(path: Path, *args: object, **kw: object) -> _blocks.Blocks:
        if path.name == "cgroup.out":  # only cgroup.out in small blocks
            kw["chunk_bytes"] = 16384
        return blocks(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_blocks, "Blocks", small)
    monkeypatch.setattr(store_module, "BULK_ROWS", 1)  # streamed rows reach DuckDB at once
    real = cgroup._Builder.tables
    calls = {"n": 0}

    def flaky(self: cgroup._Builder, tok: pl.DataFrame, final: bool) -> dict[str, pl.DataFrame]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected failure")
        return real(self, tok, final)

    monkeypatch.setattr(cgroup._Builder, "tables", flaky)
    db = tmp_path / "failed.duckdb"
    result = run(SAMPLES / "h200-checkpoint-stall.tgz", Options(report=None, db=db))
    failed = [r for r in result.collectors if r["status"] == "failed"]
    assert [r["file"] for r in failed] == ["series/cgroup.out"]
    con = duckdb.connect(str(db), read_only=True)
    try:
        have = {
            r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()
        }
        written = [t for t in cgroup.TABLES if t in have]
        assert written  # rows were streamed before the failure...
        for table in written:  # ...and none of them is left
            q = f"SELECT count(*) FROM {table} WHERE source_file = 'series/cgroup.out'"
            assert con.sql(q).fetchall() == [(0,)], table
    finally:
        con.close()
    assert calls["n"] == 3


def test_time_going_back_across_a_block_cut_loses_no_line(
    whole: list[tuple[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock step back: the second half of a file written again after its first half.
    Blocks may then build wide rows and deltas differently (documented), but every line
    is accounted for exactly as in one block and nothing fails."""
    for tool, src in whole:
        if not src.name.startswith("built-"):
            continue
        lines = src.read_bytes().splitlines(keepends=True)
        p = tmp_path / src.name
        p.write_bytes(b"".join(lines[len(lines) // 2 :] + lines))
        _, one, _ = parse_in_blocks(PARSERS[tool], p, None, monkeypatch)
        _, many, _ = parse_in_blocks(PARSERS[tool], p, 2000, monkeypatch)
        assert (one.total, one.parsed, one.structure, one.skipped) == (
            many.total,
            many.parsed,
            many.structure,
            many.skipped,
        )
