"""The big-file path of pidstat gives the regular path's table and coverage, row for row.

Every fixture, the real H200 capture's and the synth samples' ``pidstat.out`` are parsed
twice: with the fast path forced on (small blocks, so that headers, patterns and the rows
above a block's first header cross block boundaries; with and without worker threads)
and with it off. Hostile edits (signs, commas, tabs, NUL, CR, trailing blanks, values
that touch or overflow, other headers mid-file, thread rows, user names, banners, a cut
last line, invalid UTF-8, 12-hour clocks, midnight...) and random byte mutations go
through both as well.
"""

from __future__ import annotations

import random
import re
import tarfile
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from mutations import mutate
from polars.testing import assert_frame_equal

from analyzer.parsers import _pidstat_fast, _pidstat_layout, _read, base, pidstat

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "pidstat"
OUTPUTS = sorted(p for p in FIX.iterdir() if p.suffix not in (".json", ".md"))
CLOCK_FIX = FIX / "local-debian12-sysstat12.6.1__pidstat-C-yes-dd-1-3.txt"
MULTI_FIX = FIX / "localbuild-sysstat-12.2.0__pidstat-d-r-C-dd-1-2.txt"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``pidstat.out`` of the H200 capture and of two synth samples (one loses a process)."""
    out = tmp_path_factory.mktemp("real")
    for name in ("h200-checkpoint-stall", "synth-oom_kill", "synth-cpu_contention"):
        with tarfile.open(ROOT / "samples" / f"{name}.tgz") as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("series/pidstat.out"))
            f = tar.extractfile(member)
            assert f is not None
            (out / name).write_bytes(f.read())
    return {p.name: p for p in out.iterdir()}


def _both(
    path: Path, mp: pytest.MonkeyPatch, chunk: int = 2048, workers: int = 0, **kw: object
) -> tuple[base.ParseResult, base.ParseResult, int]:
    """(fast path, regular path, rows the fast path read)."""
    kw.setdefault("tz", "UTC")
    seen: list[int] = []
    read = _pidstat_fast.read

    def spy(*args: object) -> _pidstat_fast.Fast | None:
        got = read(*args)  # type: ignore[arg-type]
        seen.append(0 if got is None else got.rows.height)
        return got

    mp.setattr(_pidstat_fast, "read", spy)
    mp.setattr(_pidstat_fast, "MIN_FAST_BYTES", 0)
    mp.setattr(_pidstat_fast, "CHUNK_BYTES", chunk)
    mp.setattr(_pidstat_fast, "WORKERS", workers)
    fast = pidstat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    mp.setattr(_pidstat_fast, "MIN_FAST_BYTES", 1 << 62)
    slow = pidstat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    return fast, slow, sum(seen)


def _assert_same(fast: base.ParseResult, slow: base.ParseResult) -> None:
    fast.coverage.check()
    a = fast.tables["pidstat"].lazy().collect()
    b = slow.tables["pidstat"].lazy().collect()
    assert_frame_equal(a, b)
    for f in ("total", "parsed", "structure", "skipped", "notes"):
        assert getattr(fast.coverage, f) == getattr(slow.coverage, f), f
    assert fast.meta == slow.meta


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_fast_path_equals_regular_path_on_every_fixture(path: Path, monkeypatch) -> None:
    try:
        fast, slow, _ = _both(path, monkeypatch, chunk=512)
    except base.ParseError:  # the regular path refuses it too
        with pytest.raises(base.ParseError):
            pidstat.parse(path, base.ParseContext(file_name=path.name, tz="UTC"))
        return
    _assert_same(fast, slow)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("chunk", [2048, 65536, 1 << 24])
@pytest.mark.parametrize(
    "name", ["h200-checkpoint-stall", "synth-oom_kill", "synth-cpu_contention"]
)
def test_fast_path_equals_regular_path_on_real_and_synth_captures(
    real, name, chunk, workers, monkeypatch
) -> None:
    fast, slow, rows = _both(real[name], monkeypatch, chunk, workers)
    assert rows == fast.coverage.parsed > 150  # every row by the fast path
    _assert_same(fast, slow)


def test_local_times_and_since_boot_from_the_command(real, monkeypatch) -> None:
    command = "pidstat -u -r -d -w -h -p 1,2 1"
    for path in (real["synth-oom_kill"], _clock_file(real["synth-oom_kill"].parent / "clk")):
        fast, slow, rows = _both(path, monkeypatch, 4096, tz="Europe/Berlin", command=command)
        assert rows > 100
        _assert_same(fast, slow)


def _clock_file(path: Path, src: Path = CLOCK_FIX, repeats: int = 400, start: int = 86000) -> Path:
    """``src`` (24-hour clock rows) repeated with times moving on, across midnight."""
    banner, body = src.read_text().split("\n", 1)
    body = "\n".join(ln for ln in body.split("\n") if not ln.startswith("Average"))
    h, mi, s0 = map(int, re.search(r"^(\d\d):(\d\d):(\d\d)", body, re.M).groups())  # type: ignore[union-attr]
    first = h * 3600 + mi * 60 + s0
    out = [banner]
    for i in range(repeats):

        def shift(m: re.Match[str], base: int = start + 7 * i) -> str:
            s = (base + int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) - first) % 86400
            return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"

        out.append(re.sub(r"^(\d\d):(\d\d):(\d\d)", shift, body, flags=re.M))
    path.write_text("\n".join(out))
    return path


@pytest.mark.parametrize("src", [CLOCK_FIX, MULTI_FIX], ids=["one-report", "two-reports"])
def test_clock_rows_several_reports_and_midnight(src, tmp_path, monkeypatch) -> None:
    path = _clock_file(tmp_path / "clock", src)
    fast, slow, rows = _both(path, monkeypatch, 1024)
    assert rows == fast.coverage.parsed > 500
    assert fast.tables["pidstat"].lazy().collect()["ts"].dt.day().n_unique() == 2
    _assert_same(fast, slow)


def _at(ls: list[str], frac: float, fn: Callable[[str], list[str]], rows: bool = True) -> list[str]:
    """Apply ``fn`` to every ``frac`` of the data rows (deterministic)."""
    rnd = random.Random(7)
    out = []
    for ln in ls:
        if (not rows or ln[:1].isdigit()) and rnd.random() < frac:
            out.extend(fn(ln))
        else:
            out.append(ln)
    return out


def _sub(pattern: str, repl: str) -> Callable[[str], list[str]]:
    return lambda ln: [re.sub(pattern, repl, ln, count=1)]


HDR = "# Time        UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command"
TGID = (
    "# Time        UID      TGID       TID    %usr %system  %guest   %wait    %CPU   CPU  Command"
)

EDITS: dict[str, Callable[[list[str]], list[str]]] = {
    "negative": lambda ls: _at(ls, 0.1, _sub(r"      0\.00 ", "     -1.00 ")),
    "negative_int": lambda ls: _at(ls, 0.05, _sub(r"   1000 ", "     -1 ")),
    "odd_numbers": lambda ls: _at(
        ls,
        0.2,
        lambda ln: [
            re.sub(
                r"   0\.00 ",
                random.Random(len(ln)).choice(
                    [
                        "  1e+05 ",
                        "    nan ",
                        "  +1.00 ",
                        "    .50 ",
                        "     5. ",
                        "   1,50 ",
                        "  0.0 0 ",
                    ]
                ),
                ln,
                count=1,
            )
        ],
    ),
    "more_decimals": lambda ls: _at(ls, 0.05, _sub(r" (\d+)\.(\d\d) ", r"\1.\g<2>0 ")),
    "touching": lambda ls: _at(ls, 0.1, _sub(r" (\d{5,}) ", r"\g<1>12 ")),
    "overflow": lambda ls: _at(ls, 0.1, _sub(r"  (\d{4,}) ", r" 9\1 ")),
    "sixteen_digits": lambda ls: _at(ls, 0.1, _sub(r" (\d{4,}) ", " 1234567890123456 ")),
    "fifteen_digits": lambda ls: _at(ls, 0.1, _sub(r"  +(\d{4,}) ", " 123456789012345 ")),
    "cpu_too_big": lambda ls: _at(
        ls, 0.1, _sub(r"\.\d\d +\d+ +(\d+\.\d\d +){2}", "0.00 99999999999 0.00 0.00 ")
    ),
    "command_spaces": lambda ls: _at(ls, 0.3, lambda ln: [ln + " --arg x=1  /data/a file"]),
    "thread_marks": lambda ls: _at(ls, 0.2, lambda ln: [ln.rsplit(" ", 1)[0] + " |__worker 2G"]),
    "human_looking": lambda ls: _at(ls, 0.01, lambda ln: [ln + " 4.2G"]),
    "command_named_Command": lambda ls: _at(
        ls, 0.05, lambda ln: [ln.rsplit(" ", 1)[0] + " Command"]
    ),
    "trailing_blanks": lambda ls: _at(ls, 0.1, lambda ln: [ln + "   "]),
    "tab": lambda ls: _at(ls, 0.05, lambda ln: [ln.replace("   ", "\t", 1)]),
    "cr": lambda ls: _at(ls, 0.1, lambda ln: [ln + "\r"]),
    "nul": lambda ls: _at(ls, 0.05, lambda ln: [ln.replace(" 0.00", " 0.00\x00", 1)]),
    "non_ascii_command": lambda ls: _at(ls, 0.05, lambda ln: [ln + " pythön \u00a0"]),
    "leading_blanks": lambda ls: _at(ls, 0.1, lambda ln: [" " + ln]),
    "short_epoch": lambda ls: _at(ls, 0.1, lambda ln: [ln[1:]]),
    "long_epoch": lambda ls: _at(ls, 0.1, lambda ln: ["0" + ln]),
    "cut_rows": lambda ls: _at(ls, 0.05, lambda ln: [ln[: len(ln) // 2]]),
    "no_command": lambda ls: _at(ls, 0.05, lambda ln: [ln.rsplit(" ", 1)[0]]),
    "duplicate_rows": lambda ls: _at(ls, 0.05, lambda ln: [ln, ln]),
    "garbage": lambda ls: _at(ls, 0.02, lambda ln: [ln, f"{ln[:20]} ~ 12 x"]),
    "blank_with_spaces": lambda ls: _at(ls, 0.02, lambda ln: [ln, "   "]),
    "average": lambda ls: _at(ls, 0.02, lambda ln: [ln, "Average:" + ln[10:]]),
    "same_header_other_spacing": lambda ls: _at(
        ls, 0.02, lambda ln: [ls[2].replace("   CPU", "  CPU "), ln]
    ),
    "other_report": lambda ls: _at(ls, 0.02, lambda ln: ["", HDR, ln[:91] + "  yes", "", ls[2]]),
    "thread_rows": lambda ls: _at(
        ls,
        0.02,
        lambda ln: [
            "",
            TGID,
            ln[:10]
            + "   1000      4242         -   83.35    9.26    0.00    0.03   92.61     1  a",
            ln[:10]
            + "   1000         -      4243   83.35    9.26    0.00    0.03   92.61     1  |__b",
            "",
            ls[2],
        ],
    ),
    "user_names": lambda ls: _at(
        ls,
        0.02,
        lambda ln: [
            "",
            HDR.replace("   UID", "  USER"),
            ln[:10] + "      root      4242   83.35    9.26    0.00    0.03   92.61     1  yes",
            "",
            ls[2],
        ],
    ),
    "banner_mid_file": lambda ls: _at(
        ls, 0.005, lambda ln: [ln, "", ls[0].replace("2026", "2027"), ""]
    ),
    "rows_before_header": lambda ls: ls[3:9] + ls,
    "no_banner": lambda ls: ls[1:],
    "headers_only": lambda ls: [ln for ln in ls if not ln[:1].isdigit()],
}


@pytest.fixture(scope="module")
def synth_lines(real) -> list[str]:
    return real["synth-oom_kill"].read_text().split("\n")


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_hostile_edits_give_the_same_table_and_coverage(
    edit, synth_lines, tmp_path, monkeypatch
) -> None:
    path = tmp_path / edit
    path.write_text("\n".join(EDITS[edit](list(synth_lines))))
    for workers in (0, 2):
        _assert_same(*_both(path, monkeypatch, 4096, workers)[:2])


@pytest.mark.parametrize("edit", ["negative", "touching", "tab", "cr", "other_report", "average"])
def test_hostile_edits_of_clock_rows(edit, tmp_path, monkeypatch) -> None:
    lines = _clock_file(tmp_path / "src", MULTI_FIX, 200).read_text().split("\n")
    path = tmp_path / edit
    path.write_text("\n".join(EDITS[edit](lines)))
    _assert_same(*_both(path, monkeypatch, 2048)[:2])


@pytest.mark.parametrize("end", ["cut", "no_newline"])
def test_last_line_without_newline(end, real, tmp_path, monkeypatch) -> None:
    data = real["synth-cpu_contention"].read_bytes().rstrip(b"\n")
    path = tmp_path / end
    path.write_bytes(data[:-30] if end == "cut" else data)
    fast, slow, _ = _both(path, monkeypatch, 8192)
    _assert_same(fast, slow)


def test_a_file_that_is_not_utf8_goes_to_the_regular_path_whole(
    real, tmp_path, monkeypatch
) -> None:
    data = bytearray(real["synth-oom_kill"].read_bytes())
    at = data.index(b"python3", len(data) * 2 // 3)
    data[at : at + 1] = b"\xff"
    path = tmp_path / "bad"
    path.write_bytes(bytes(data))
    fast, slow, rows = _both(path, monkeypatch, 8192)
    assert rows == 0
    _assert_same(fast, slow)


@pytest.mark.parametrize("seed", range(12))
def test_random_mutations_give_the_same_result_or_both_fail(
    seed, synth_lines, tmp_path, monkeypatch
) -> None:
    data = "\n".join(synth_lines[:600]).encode()
    path = tmp_path / "m"
    path.write_bytes(mutate(data, seed, seed % 3))
    try:
        fast, slow, _ = _both(path, monkeypatch, 1024)
    except base.ParseError:
        with pytest.raises(base.ParseError):
            pidstat.parse(path, base.ParseContext(file_name="m", tz="UTC"))
        return
    _assert_same(fast, slow)


def test_layouts_of_the_head_take_numeric_headers_only() -> None:
    ctx = base.ParseContext()
    row = "1795960801   1000      4242   83.35    9.26    0.00    0.03   92.61     1  python3"
    (lay,) = _pidstat_layout.layouts(f"{HDR}\n{row}\n", ctx)
    assert lay.epoch and not lay.clock and lay.cols[:3] == ("uid", "pid", "usr_pct")
    assert lay.ends[:3] == (10, 17, 27) and lay.decimals[:3] == (0, 0, 2)
    clock = HDR.replace("# Time  ", "17:23:36")
    (lay,) = _pidstat_layout.layouts(f"{clock}\n{row.replace('1795960801', '17:23:37  ')}\n", ctx)
    assert lay.clock and not lay.epoch
    for refused in (
        TGID,  # thread rows take their TGID from the row above
        HDR.replace("   UID", "  USER"),  # text column
        HDR.replace("# Time  ", "05:23:36 PM"),  # 12-hour clock
    ):
        assert _pidstat_layout.layouts(f"{refused}\n{row}\n", ctx) == []
    assert _pidstat_layout.layouts(f"{HDR}\n", ctx) == []  # no row under it


def test_fast_rows_have_the_columns_and_types_of_the_table(real, monkeypatch) -> None:
    monkeypatch.setattr(_pidstat_fast, "MIN_FAST_BYTES", 0)
    path = real["h200-checkpoint-stall"]
    got = _pidstat_fast.read(
        path,
        base.ParseContext(),
        base.Coverage(),
        _read.read_head(path),
        pidstat.classify,
    )
    assert got is not None and got.rows.height == 160
    schema = pidstat.TABLES["pidstat"].schema
    for c in ("uid", "pid", "cpu", "vsz_kb", "kb_rd_s", "command", "tid"):
        assert got.rows.schema[c] == schema[c], c
    assert got.rows["line_no"].is_sorted() and got.rows["seg"].to_list()[0] == 1
    assert got.rows.schema["line_no"] == pl.UInt32


def test_classify_few_gives_the_regular_classification_of_banners_and_header_copies() -> None:
    ctx = base.ParseContext()
    lines: list[tuple[int, str, bool]] = []
    for path in OUTPUTS:
        for text in path.read_text(errors="replace").split("\n"):
            if _pidstat_layout._BANNER.match(text):
                lines.append((len(lines) + 1, text, False))
            elif _pidstat_layout._is_header(text, ctx) and text.isascii():
                lines.append((len(lines) + 1, text, True))
    assert len(lines) > 100
    few = _pidstat_layout.classify_few(lines, ctx)
    assert few is not None
    frame = pl.LazyFrame(
        {
            "line_no": pl.Series([n for n, _, _ in lines], dtype=pl.UInt32),
            "line": [t for _, t, _ in lines],
            "dup": [d for _, _, d in lines],
        }
    )
    assert_frame_equal(few, pidstat.classify(frame, ctx, streaming=False))
    row = "1795960801   1000      4242   83.35    9.26  python3"
    assert _pidstat_layout.classify_few([*lines, (len(lines) + 1, row, False)], ctx) is None


@pytest.mark.parametrize("cut", [2, 3, 4])
def test_a_short_last_row_is_never_read_past_the_end_of_the_block(
    cut, synth_lines, tmp_path, monkeypatch
) -> None:
    rows = [ln for ln in synth_lines if ln[:1].isdigit()]
    first = rows[0]
    vsz = first.split()[11]  # a value that widened: a pattern ending further right
    wide = first.replace(f" {vsz} ", f" {vsz}99999 ", 1)
    # the last line: long enough to be tried, a bad value (so it is tried with every
    # pattern), shorter than where the widened pattern's values end
    end = len(first) - len(first.split()[-1]) - 2
    usr = first.split()[3]
    short = first.replace(f" {usr} ", " " + "x" * len(usr) + " ", 1)[: end + cut]
    path = tmp_path / "short"
    path.write_text("\n".join([*synth_lines[:40], wide, wide, short]) + "\n")
    fast, slow, rows_read = _both(path, monkeypatch, 1 << 20)
    assert rows_read > 10
    _assert_same(fast, slow)
