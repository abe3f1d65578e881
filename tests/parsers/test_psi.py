"""Tests of analyzer/parsers/psi.py against tests/fixtures/psi.

Golden values are read by hand from the fixture files. PSI is printed by the kernel,
never localised, so there is no locale replay in the corpus; the equivalence test
checks that CRLF/NUL-damaged copies give the same values. The sampler-format fixture is
hand-made (see tests/fixtures/psi/PROVENANCE.md); its totals were chosen so that the
expected stall percentages are round numbers.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from blockwise import assert_same_as_one_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, psi

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "psi"
FILES = sorted(p for p in FIX.iterdir() if p.suffix not in (".md", ".json"))
SAMPLER = FIX / "sampler-format-example.out"


def _parse(path: Path, name: str | None = None, **kw: object) -> base.ParseResult:
    ctx = base.ParseContext(file_name=path.name if name is None else name, **kw)  # type: ignore[arg-type]
    res = psi.parse(path, ctx)
    res.coverage.check()
    return res


def _rows(res: base.ParseResult) -> list[dict]:
    return res.tables["psi"].to_dicts()  # type: ignore[union-attr]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    assert res.coverage.parsed > 0
    assert res.coverage.parsed_pct == 100.0
    assert dict(res.tables["psi"].schema) == psi.TABLES["psi"].schema  # type: ignore[union-attr]


def test_raw_system_file_values_and_resource_from_name() -> None:
    rows = _rows(_parse(FIX / "node_exporter-fixtures__io"))
    assert [
        (r["kind"], r["avg10_pct"], r["avg60_pct"], r["avg300_pct"], r["total_us"]) for r in rows
    ] == [
        ("some", 0.18, 0.34, 0.10, 159886802),
        ("full", 0.18, 0.34, 0.10, 159229614),
    ]
    assert {(r["source"], r["resource"]) for r in rows} == {("system", "io")}
    assert all(r["ts"] is None and r["stall_pct"] is None for r in rows)


def test_irq_file_without_trailing_newline_has_only_full() -> None:
    rows = _rows(_parse(FIX / "node_exporter-fixtures__irq"))
    assert [(r["resource"], r["kind"], r["total_us"]) for r in rows] == [("irq", "full", 8494)]


def test_old_kernel_cpu_has_only_some() -> None:
    rows = _rows(_parse(FIX / "sysstat-tests-root2__cpu"))
    assert [(r["kind"], r["total_us"]) for r in rows] == [("some", 1481906)]


def test_cgroup_file_resource_from_name_source_unknown() -> None:
    res = _parse(FIX / "telegraf__cgroup-v2__memory.pressure")
    rows = _rows(res)
    assert {(r["source"], r["resource"]) for r in rows} == {(None, "memory")}
    assert rows[1]["total_us"] == 250662
    assert any("source NULL" in n for n in res.coverage.notes)


def test_resource_and_source_from_command_line() -> None:
    path = FIX / "local-kernel6.18__cgroupv2-unified-root__cpu.pressure"
    rows = _rows(_parse(path, "x", command="cat /sys/fs/cgroup/unified/cpu.pressure"))
    assert {(r["source"], r["resource"]) for r in rows} == {("/sys/fs/cgroup/unified", "cpu")}
    assert rows[0]["avg10_pct"] == 14.27 and rows[0]["total_us"] == 42528875


def test_renamed_raw_file_has_null_resource_and_a_note() -> None:
    res = _parse(FIX / "local-kernel6.18__host-idle__memory", "data.txt")
    assert {r["resource"] for r in _rows(res)} == {None}
    assert any("resource NULL" in n for n in res.coverage.notes)
    assert {
        r["resource"] for r in _rows(_parse(FIX / "sysstat-tests-root1__io", "io.pressure"))
    } == {"io"}


def test_legacy_layout_rows_with_null_total() -> None:
    res = _parse(FIX / "oomd-fixtures-SYNTHETIC__legacy-format-extra-rows__memory.pressure")
    rows = _rows(res)
    assert [
        (r["kind"], r["avg10_pct"], r["avg60_pct"], r["avg300_pct"], r["total_us"]) for r in rows
    ] == [
        ("some", 1.11, 2.22, 3.33, None),
        ("full", 4.44, 5.55, 6.66, None),
    ]
    assert res.meta["legacy_aggr"] == [128544748770]
    assert res.coverage.structure == {
        "legacy aggr line (value in meta)": 1,
        "legacy padding row (0 0 0)": 4,
    }


def test_sampler_format_times_sources_and_stall_pct() -> None:
    t = _parse(SAMPLER, "psi.out").tables["psi"]
    assert t.height == 33
    cpu = t.filter((pl.col("source") == "system") & (pl.col("resource") == "cpu"))
    some = cpu.filter(pl.col("kind") == "some")
    assert some["ts"].to_list() == [
        datetime(2025, 11, 29, 14, 0, s, 2114, tzinfo=UTC) for s in (0, 1, 2)
    ]
    assert some["stall_pct"].to_list() == [None, 20.0, 10.0]
    assert some["avg10_pct"].to_list() == [1.20, 4.58, 5.47]
    io = t.filter(pl.col("resource") == "io").sort("kind")
    assert io["stall_pct"].to_list() == [None, 10.0, 10.0, None, 25.0, 25.0]
    job = t.filter(pl.col("source") == "/sys/fs/cgroup/system.slice/nightly job.service")
    assert job.filter(pl.col("kind") == "some")["stall_pct"].to_list() == [None, 30.0, 30.0]
    train = t.filter(
        (pl.col("source") == "/sys/fs/cgroup/train.slice") & (pl.col("kind") == "some")
    )
    assert train["resource"].to_list() == ["memory"] * 3
    assert train["stall_pct"].to_list() == [None, 5.0, 0.0]


def test_counter_reset_and_non_increasing_time_give_null_stall(tmp_path: Path) -> None:
    text = (
        "1764424800 /proc/pressure/io some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n"
        "1764424801 /proc/pressure/io some avg10=0.00 avg60=0.00 avg300=0.00 total=500\n"
        "1764424801 /proc/pressure/io some avg10=0.00 avg60=0.00 avg300=0.00 total=900\n"
        "1764424803 /proc/pressure/io some avg10=0.00 avg60=0.00 avg300=0.00 total=20900\n"
    )
    p = tmp_path / "psi.out"
    p.write_text(text)
    stall = _parse(p).tables["psi"]["stall_pct"].to_list()
    assert stall == [None, None, None, 1.0]


def test_truncated_sampler_line_is_skipped(tmp_path: Path) -> None:
    p = tmp_path / "psi.out"
    p.write_bytes(SAMPLER.read_bytes()[:-9])
    res = _parse(p)
    assert res.tables["psi"].height == 32
    assert res.coverage.skipped == {"truncated last line (no trailing newline)": 1}


def test_crlf_and_nul_bytes_give_the_same_values(tmp_path: Path) -> None:
    ref = _parse(SAMPLER).tables["psi"]
    p = tmp_path / "psi.out"
    p.write_bytes(SAMPLER.read_bytes().replace(b"\n", b"\r\n").replace(b"some", b"so\x00me"))
    assert _parse(p).tables["psi"].equals(ref)


def test_noise_lines_counted_and_garbage_file_refused(tmp_path: Path) -> None:
    p = tmp_path / "psi.out"
    body = SAMPLER.read_text().splitlines(True)
    body[3:3] = ["1764424800.1 /proc/pressure/irq cat: read error\n", "garbage ###\n", "\n"]
    p.write_text("".join(body))
    res = _parse(p)
    assert res.tables["psi"].height == 33
    assert res.coverage.skipped == {"sampler line without PSI content": 1, "unrecognized line": 1}
    assert res.coverage.structure == {"blank": 1}
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert _parse(empty).tables == {}
    bad = tmp_path / "bad"
    bad.write_text("not pressure\n")
    with pytest.raises(ParseError):
        psi.parse(bad, base.ParseContext())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    src=st.sampled_from(FILES),
    cut=st.floats(0, 1),
    noise=st.lists(st.binary(max_size=40), max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_mutated_files_never_crash(src: Path, cut: float, noise: list[bytes], seed: int) -> None:
    data = src.read_bytes()
    data = data[: int(len(data) * cut)] if cut < 0.9 else data
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for n in noise:
        lines.insert(rnd.randrange(len(lines) + 1), n)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "data.txt"
        p.write_bytes(b"\n".join(lines))
        try:
            res = psi.parse(p, base.ParseContext(file_name="data.txt"))
        except ParseError:
            return
        res.coverage.check()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_sniff_recognises_renamed_fixture(path: Path) -> None:
    assert psi.sniff(_read.read_head(path), "data.txt") >= 0.5


@pytest.mark.parametrize(
    "text",
    [
        "procs -----------memory----------\n r  b   swpd   free   buff  cache\n",
        "nr_free_pages 5357036\npgpgin 2892865\n",
        "MemTotal:       24684084 kB\nMemFree:        21430380 kB\n",
        "1764424800 /sys/fs/cgroup/a/cpu.stat usage_usec 123\n"
        "1764424800 /sys/fs/cgroup/a/cpu.stat user_usec 100\n"
        "1764424800 /sys/fs/cgroup/a/cpu.stat system_usec 23\n",
        "",
    ],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert psi.sniff(text, "cpu") < 0.5


# --- reading in blocks (analyzer/parsers/_blocks.py) ---------------------------------


def _mixed_text() -> str:
    """Sampler lines of three paths (one cgroup with an escaped blank) and both kinds,
    a counter reset half way, raw snapshot lines, legacy lines and blank lines."""
    out: list[str] = []
    totals: dict[tuple[str, str], int] = {}
    paths = ("/proc/pressure/cpu", "/proc/pressure/io", "/sys/fs/cgroup/a\\040b/cpu.pressure")
    for i in range(60):
        for path in paths:
            for kind in ("some", "full"):
                key = (path, kind)
                totals[key] = 3 if i == 30 else totals.get(key, 0) + (i * 7919 + len(path)) % 5000
                out.append(
                    f"{1795960800 + i}.{i * 1234567 % 10**9:09d} {path} {kind} "
                    f"avg10={i % 5}.{i % 100:02d} avg60=1.00 avg300=0.50 total={totals[key]}"
                )
        if i % 20 == 5:
            out += ["some avg10=0.00 avg60=0.00 avg300=0.00 total=12", ""]
        if i == 40:
            out += ["aggr 128544748770", "some 1.11 2.22 3.33", "0 0 0", "oops"]
    return "\n".join(out) + "\n"


def test_stall_pct_continues_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cpu.pressure"
    path.write_text(_mixed_text())
    t = _parse(path).tables["psi"]
    io = t.filter((pl.col("resource") == "io") & (pl.col("kind") == "some"))
    assert io.height == 60 and io["stall_pct"].null_count() == 2  # first sample, reset
    assert_same_as_one_block(psi, path, (150, 1000, 6000), monkeypatch)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_blocks_of_any_size_give_the_one_block_result(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same_as_one_block(psi, path, (64, 500), monkeypatch)


# --- the sampler's lines and the other spellings of a PSI line ----------------------


def _sampler_text(seconds: int = 40, paths: int = 3) -> str:
    """Sampler lines as the capture writes them: every path, some and full, each second."""
    out = []
    for t in range(seconds):
        for p in range(paths):
            path = (
                "/proc/pressure/cpu" if p == 0 else f"/sys/fs/cgroup/job{p:03d}.slice/io.pressure"
            )
            for k, kind in enumerate(("some", "full")):
                total = 10**10 + t * 977 * (p + 1) + k
                out.append(
                    f"{1795960800 + t}.{568406082 + p} {path} {kind} avg10={t % 7}.{p:02d} "
                    f"avg60={t % 13}.5{k} avg300=0.0{t % 10} total={total}"
                )
    return "\n".join(out) + "\n"


def test_odd_blanks_give_the_values_of_the_samplers_single_blanks(tmp_path: Path) -> None:
    text = _sampler_text(12, 3)
    odd = [
        (lambda s: s.replace(" ", "\t", 2), lambda s: s.replace(" ", "  "))[i % 2](ln)
        if i % 3
        else f"  {ln}\t "
        for i, ln in enumerate(text.splitlines())
    ]
    plain, spaced = tmp_path / "plain.out", tmp_path / "odd.out"
    plain.write_text(text)
    spaced.write_text("\n".join(odd) + "\n")
    want = _parse(plain).tables["psi"]
    assert want.height == 72 and want["stall_pct"].null_count() == 6
    assert _parse(spaced).tables["psi"].equals(want)


_LINE = "1795960800.568406082 /proc/pressure/cpu some avg10=3.18 avg60=3.18 avg300=3.18 total=404"


@pytest.mark.parametrize(
    ("line", "verdict"),
    [
        (_LINE.replace("avg10=3.18", "avg10=113.18"), "parsed"),
        (_LINE.replace("avg300=3.18", "avg300=3.181"), "parsed"),
        (_LINE.replace("total=404", "total=9999999999999999999"), "parsed"),
        (
            _LINE.replace("total=404", "total=99999999999999999999"),
            "sampler line without PSI content",
        ),
        (_LINE.replace("avg60=3.18", "avg60=x"), "sampler line without PSI content"),
        (_LINE.replace("avg60=3.18", "avg60=+3.18"), "sampler line without PSI content"),
        (_LINE.replace("avg60=3.18", "avg60=3."), "sampler line without PSI content"),
        (_LINE.replace(" some ", " sometimes "), "sampler line without PSI content"),
        (_LINE.replace(".568406082", ""), "parsed"),
        (_LINE.replace("1795960800", "0001795960800"), "unrecognized line"),
        (_LINE.replace(".568406082", ".5684060821"), "sampler line without PSI content"),
        (_LINE.replace("/proc/pressure/cpu", "/proc/pressure/" + "x" * 70), "parsed"),
        (_LINE + " x", "sampler line without PSI content"),
        ("some avg10=0.00 avg60=0.00 avg300=0.00 total=12", "parsed"),
    ],
)
def test_what_a_line_is_read_as(tmp_path: Path, line: str, verdict: str) -> None:
    p = tmp_path / "psi.out"
    p.write_text(_LINE + "\n" + line + "\n")
    cov = _parse(p).coverage
    assert (cov.parsed, cov.skipped) == ((2, {}) if verdict == "parsed" else (1, {verdict: 1}))


def test_sampler_values_are_read_exactly(tmp_path: Path) -> None:
    p = tmp_path / "psi.out"
    lines = [
        _LINE.replace(".568406082", ".999999999").replace("404", "9223372036854775807"),
        _LINE.replace(".568406082", "").replace("/cpu", "/" + "x" * 70),
        _LINE.replace("404", "9223372036854775808"),  # beyond Int64
    ]
    p.write_text("\n".join(lines) + "\n")
    rows = _rows(_parse(p))
    assert rows[0]["ts"] == datetime(2026, 11, 29, 14, 0, 0, 999999, tzinfo=UTC)  # not rounded
    assert rows[0]["total_us"] == 2**63 - 1 and rows[2]["total_us"] is None
    assert rows[1]["ts"] == datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    assert rows[1]["resource"] == "x" * 70 and rows[1]["source"] == "system"
    assert rows[0]["avg10_pct"] == 3.18 and rows[1]["stall_pct"] is None


@pytest.mark.parametrize("chunk", [700, 5000])
def test_many_paths_and_damaged_lines_give_the_one_block_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    lines = _sampler_text(20, 40).splitlines()
    lines[5] = lines[5].replace(" ", "\t", 1)
    lines[9] = lines[9].replace("avg60=", "avg60=x")
    del lines[70]  # a sample without one of its lines
    lines.insert(90, lines[90])  # a line twice
    path = tmp_path / "psi.out"
    path.write_text("\n".join(lines) + "\n" + lines[-1][:30])  # cut while being written
    res = _parse(path)
    assert res.tables["psi"].height == len(lines) - 1
    assert res.coverage.skipped == {
        "sampler line without PSI content": 1,
        "truncated last line (no trailing newline)": 1,
    }
    assert_same_as_one_block(psi, path, (chunk,), monkeypatch)
