"""Tests of analyzer/parsers/processes.py (``ps`` snapshots) against tests/fixtures/snapshots.

Golden values are read by hand from the files. ps runs under LC_ALL=C in the capture and
prints no localised numbers; the equivalence test checks a CRLF/NUL-damaged copy instead.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, processes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
FILES = sorted(
    p
    for p in FIX.iterdir()
    if "ps" in p.name.split("__")[-1][:3] and not p.name.endswith(".golden.json")
)


def _rows(name: str, **kw: object) -> list[dict]:
    path = FIX / name
    res = processes.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res.tables["processes"].to_dicts()  # type: ignore[union-attr]


def test_fixture_set() -> None:
    assert len(FILES) == 7


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = processes.parse(path, base.ParseContext(file_name=path.name))
    res.coverage.check()
    assert res.coverage.parsed_pct == 100.0 and res.coverage.structure == {"header": 1}
    table = res.tables["processes"]
    assert dict(table.schema) == processes.TABLES["processes"].schema  # type: ignore[union-attr]
    assert table["pid"].null_count() == 0  # type: ignore[index]


def test_capture_top_cpu_list() -> None:
    start = datetime(2026, 11, 29, 18, 40, 41, tzinfo=UTC)
    rows = _rows("ref-vm__ps_cpu.start.out", capture_start=start)
    r = rows[0]
    assert (r["pid"], r["ppid"], r["user"], r["pri"], r["ni"], r["psr"], r["state"]) == (
        10711,
        6015,
        "root",
        19,
        0,
        1,
        "Sl",
    )
    assert (r["cpu_pct"], r["mem_pct"], r["rss_kb"], r["vsz_kb"], r["nlwp"], r["elapsed_s"]) == (
        54.4,
        1.6,
        395192,
        3287528,
        12,
        23,
    )
    assert (r["comm"], r["args"]) == (
        "python",
        ".venv/bin/python /tmp/perf.py psi /tmp/big_psi.out",
    )
    assert (r["ts"], r["snapshot"], r["ranking"], r["rank"]) == (start, "start", "cpu", 1)
    assert len(rows) == 92


def test_capture_top_rss_list_negative_nice_and_kernel_thread() -> None:
    rows = {r["pid"]: r for r in _rows("ref-vm__ps_rss.end.out")}
    init = rows[1]
    assert (init["ni"], init["pri"], init["state"], init["comm"], init["elapsed_s"]) == (
        -10,
        29,
        "S<Ll",
        "process_api",
        1239,
    )
    assert {r["ranking"] for r in rows.values()} == {"rss"}
    assert {r["snapshot"] for r in rows.values()} == {"end"}


def test_comm_with_spaces_and_realtime_dash() -> None:
    rows = _rows("handmade__ps_cpu-comm-spaces.start.out")
    assert (rows[0]["comm"], rows[0]["args"]) == (
        "Web Content",
        "/usr/lib/firefox/firefox -contentproc -childID 1",
    )
    assert (rows[0]["cpu_pct"], rows[0]["rss_kb"]) == (812.5, 41943040)
    assert (rows[1]["pri"], rows[1]["ni"], rows[1]["comm"]) == (None, None, "migration/3")


def test_ps_aux_ps_ef_and_busybox() -> None:
    aux = _rows("ref-h200__ps-aux.txt")[0]
    assert (aux["user"], aux["pid"], aux["cpu_pct"], aux["vsz_kb"], aux["rss_kb"], aux["tty"]) == (
        "root",
        1,
        4.4,
        71236,
        8132,
        "?",
    )
    assert (aux["state"], aux["start"], aux["cpu_time_s"], aux["comm"]) == ("SLl", "18:49", 1, None)
    assert aux["args"].startswith("/process_api --firecracker-init")
    ef = _rows("ref-h200__ps-ef.txt")[1]
    assert (ef["pid"], ef["ppid"], ef["cpu_pct"], ef["cpu_time_s"], ef["args"]) == (
        2,
        0,
        0.0,
        0,
        "[kthreadd]",
    )
    bb = _rows("handmade__ps-busybox.txt")
    assert (bb[0]["vsz_kb"], bb[0]["rss_kb"], bb[1]["vsz_kb"]) == (1229, 512, 12288)  # 1.2m, 12m
    assert (bb[1]["comm"], bb[1]["args"]) == ("sshd", "/usr/sbin/sshd -D")


def test_crlf_and_nul_damage_give_the_same_rows(tmp_path: Path) -> None:
    name = "ref-h200__ps_cpu.start.out"
    bad = tmp_path / name
    bad.write_bytes(
        (FIX / name).read_bytes().replace(b"\n", b"\r\n").replace(b"root", b"ro\x00ot", 2)
    )
    res = processes.parse(bad, base.ParseContext(file_name=name))
    assert res.tables["processes"].to_dicts() == _rows(name)  # type: ignore[union-attr]


def test_renamed_fixtures_are_recognised_and_others_rejected() -> None:
    for path in FILES:
        assert processes.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name
    for text in (
        "# Time        UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command\n",
        "12:00:01 AM   UID       PID    %usr %system  %guest    %CPU   CPU  Command\n",
        "Filesystem     1K-blocks    Used Available Use% Mounted on\n/dev/sda1 100 50 50 50% /\n",
        "           CPU0       CPU1\n  0:         10          0  IO-APIC   2-edge      timer\n",
    ):
        assert processes.sniff(text, "data.txt") < 0.5


def test_garbage_only_is_a_parse_error(tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    p.write_text("no header here\n")
    with pytest.raises(ParseError):
        processes.parse(p, base.ParseContext(file_name=p.name))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 6),
    cut=st.floats(0, 1),
    garbage=st.lists(st.binary(max_size=60), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_mutated_files_never_crash(which: int, cut: float, garbage: list[bytes], seed: int) -> None:
    data = FILES[which].read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.9 else data
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / FILES[which].name
        path.write_bytes(b"\n".join(lines))
        try:
            res = processes.parse(path, base.ParseContext(file_name=path.name))
        except ParseError:
            return
        res.coverage.check()
