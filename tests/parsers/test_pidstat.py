"""Tests of analyzer/parsers/pidstat.py on tests/fixtures/pidstat.

Golden values: jc's expected JSON (independent parser) for the jc CentOS/RHEL samples,
hand-read values for the Debian 12 and localbuild captures, and sysstat's own JSON output
of the same simulated run (``expected.pidstat-At-ALL-JSON``) against its text form.
Locale equivalence: the real de_DE and en_US captures are checked by hand, and the C
capture is re-rendered in de_DE / en_US form (decimal commas, dd.mm.yyyy, AM/PM,
``Durchschn.:``) and must give identical tables.

Captures of the size the capture writes (the H200 capture's and two synth samples'
``pidstat.out``, and clock-time files made from the fixtures) are read in small blocks, so
that headers, learned row shapes and rows cross block boundaries: every row says what its
line says (a plain whitespace split of it), the tables do not depend on the block size,
and hostile edits (signs, commas, tabs, NUL, CR, trailing blanks, values that touch or
overflow, other headers mid-file, thread rows, user names, banners, cut rows, invalid
UTF-8, a last line without newline...) cost only the lines they touch.
"""

from __future__ import annotations

import json
import random
import re
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import polars.selectors as cs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import mutate
from polars.testing import assert_frame_equal

from analyzer.errors import ParseError
from analyzer.parsers import _blocks, _read, base, pidstat

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "pidstat"
# .json files are jc's expected results, not pidstat output (sysstat's own -o JSON
# outputs have no .json suffix and are parsed like the rest).
OUTPUTS = sorted(p for p in FIX.iterdir() if p.suffix not in (".json", ".md"))
DEB = "local-debian12-sysstat12.6.1__"
S127 = "sysstat-12.7.9+__tests__"


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = pidstat.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _df(path: Path, **kw: object) -> pl.DataFrame:
    return _parse(path, **kw).tables["pidstat"].lazy().collect()


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses_fully(path: Path) -> None:
    res = _parse(path)
    df = res.tables["pidstat"].lazy().collect()
    assert dict(df.schema) == pidstat.TABLES["pidstat"].schema
    if path.name.endswith("pidstat-p-unkwn"):  # headers only: the PID does not exist
        assert res.coverage.parsed == 0 and df.height == 0
        return
    assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99
    assert df.height > 0 and df["pid"].null_count() == 0


_JC = {
    "uid": "uid",
    "pid": "pid",
    "percent_usr": "usr_pct",
    "percent_system": "system_pct",
    "percent_guest": "guest_pct",
    "percent_wait": "wait_pct",
    "percent_cpu": "cpu_pct",
    "cpu": "cpu",
    "minflt_s": "minflt_s",
    "majflt_s": "majflt_s",
    "vsz": "vsz_kb",
    "rss": "rss_kb",
    "percent_mem": "mem_pct",
    "stksize": "stk_size_kb",
    "stkref": "stk_ref_kb",
    "kb_rd_s": "kb_rd_s",
    "kb_wr_s": "kb_wr_s",
    "kb_ccwr_s": "kb_ccwr_s",
    "cswch_s": "cswch_s",
    "nvcswch_s": "nvcswch_s",
    "usr_ms": "usr_ms",
    "system_ms": "system_ms",
    "guest_ms": "guest_ms",
    "command": "command",
}


@pytest.mark.parametrize(
    "stem",
    [
        "jc__centos-7.7__pidstat-hdlrsuw-2-5",
        "jc__centos-7.7__pidstat-hdlrsuw",
        "jc__centos-7.7__pidstat-hl",
    ],
)
def test_h_output_matches_jc_expected_json(stem: str) -> None:
    expected = json.loads((FIX / f"{stem}.json").read_text())
    df = _df(FIX / f"{stem}.out")
    assert df.height == len(expected)
    for rec, row in zip(expected, df.iter_rows(named=True), strict=True):
        assert row["ts"] == datetime.fromtimestamp(rec["time"], UTC)
        for k, col in _JC.items():
            if k in rec:
                want = None if k.startswith("kb_") and rec[k] == -1 else rec[k]  # -1 = n/a
                assert row[col] == want, (k, rec, row)


def test_jc_ht_two_reports_merge_into_one_row() -> None:
    expected = json.loads((FIX / "jc__generic__pidstat-ht.json").read_text())
    row = _df(FIX / "jc__generic__pidstat-ht.out").row(0, named=True)
    for rec in expected:
        for k, col in _JC.items():
            if k in rec:
                assert row[col] == rec[k], k
    assert row["ts"] == datetime(2023, 8, 21, 0, 53, 19, tzinfo=UTC)


def test_udrw_reports_merge_per_pid_and_12h_clock() -> None:
    df = _df(FIX / f"{DEB}pidstat-udrw-C-en_US-1-3.txt")
    assert df.height == 6
    dd = df.filter(pl.col("pid") == 21653).row(0, named=True)
    assert dd["ts"] == datetime(2026, 11, 29, 17, 23, 37, tzinfo=UTC)
    assert (dd["minflt_s"], dd["kb_wr_s"], dd["iodelay_ticks"], dd["cswch_s"]) == (
        331.19,
        60135.78,
        0,
        60.55,
    )
    assert dd["usr_pct"] is None and dd["since_boot"] is False
    yes = df.filter(pl.col("pid") == 21411)["nvcswch_s"].to_list()
    assert yes == [1055.96, 694.0, 527.72]


def test_old_versions_without_uid_or_wait() -> None:
    row = _df(FIX / "localbuild-sysstat-9.1.5__pidstat-u-C-yes-1-2.txt").row(0, named=True)
    assert (row["uid"], row["pid"], row["usr_pct"], row["cpu_pct"], row["wait_pct"]) == (
        None,
        3625,
        20.75,
        76.42,
        None,
    )
    row = _df(FIX / "localbuild-sysstat-11.5.7__pidstat-u-C-yes-1-2.txt").row(1, named=True)
    assert (row["uid"], row["wait_pct"], row["cpu"]) == (0, 37.62, 0)  # NUL bytes in the file


def test_threads_command_lines_and_since_boot() -> None:
    df = _df(FIX / f"{S127}expected.pidstat-l")
    first = df.row(0, named=True)
    assert (first["pid"], first["tid"], first["command"]) == (7900, None, "/usr/bin/gnome-shell")
    thr = df.filter(pl.col("tid") == 10334).row(0, named=True)
    assert (thr["pid"], thr["command"]) == (7900, "dconf worker")
    assert df["since_boot"].unique().to_list() == [False]
    assert _df(FIX / f"{S127}expected.pidstat")["since_boot"].unique().to_list() == [True]
    hud = FIX / f"{DEB}pidstat-hud-C-1-3.txt"
    assert _df(hud)["since_boot"].unique().to_list() == [None]
    cmd = 'pidstat -h -u -d -C "^(yes|dd)$" 1 3'
    assert _df(hud, command=cmd)["since_boot"].unique().to_list() == [False]


def test_human_units_and_user_names() -> None:
    row = _df(FIX / f"{S127}expected.pidstat-I").row(0, named=True)
    assert row["vsz_kb"] == round(4.2 * 1024 * 1024) and row["rss_kb"] == round(253.0 * 1024)
    assert row["usr_pct"] == 359.4 and row["kb_rd_s"] == 411.8
    row = _df(FIX / f"{S127}expected.pidstat-U").row(0, named=True)
    assert (row["user"], row["uid"], row["usr_ms"]) == ("testusr", None, 112090)


def test_sysstat_json_agrees_with_text_output() -> None:
    text = _df(FIX / f"{S127}expected.pidstat-At")
    js = _df(FIX / f"{S127}expected.pidstat-At-ALL-JSON")
    both = text.join(js, on=["ts", "pid", "tid"], how="inner", suffix="_j", nulls_equal=True)
    assert both.height == text.height == 15
    for c in ["uid", "command", "usr_pct", "cpu", "vsz_kb", "kb_rd_s", "cswch_s", "threads"]:
        pairs = both.select(c, f"{c}_j").drop_nulls(c).rows()
        assert pairs and all(a == b for a, b in pairs), c
    row = _df(FIX / f"{S127}expected1.pidstat-C-JSON").row(0, named=True)
    assert (row["ts"], row["pid"], row["cpu_pct"]) == (
        datetime.fromtimestamp(1591016004, UTC),
        8741,
        0.16,
    )


def test_real_de_DE_capture_and_time_zone() -> None:
    path = FIX / f"{DEB}pidstat-u-C-de_DE-1-2.txt"
    res = _parse(path)
    row = res.tables["pidstat"].lazy().collect().row(0, named=True)
    assert (row["usr_pct"], row["system_pct"], row["wait_pct"], row["cpu_pct"]) == (
        15.09,
        65.09,
        16.98,
        80.19,
    )
    assert row["ts"] == datetime(2026, 11, 29, 17, 23, 37, tzinfo=UTC)
    assert any("time zone unknown" in n for n in res.coverage.notes)
    assert res.coverage.structure["average"] == 2
    berlin = _df(path, tz="Europe/Berlin").row(0, named=True)
    assert berlin["ts"] == datetime(2026, 11, 29, 16, 23, 37, tzinfo=UTC)


def _to_12h(m: re.Match[str]) -> str:
    h = int(m[1])
    return f"{(h % 12) or 12:02d}:{m[2]} {'PM' if h >= 12 else 'AM'}"


def test_decimal_comma_and_12h_renderings_parse_same_values_as_c_locale(tmp_path: Path) -> None:
    src = (FIX / f"{DEB}pidstat-C-yes-dd-1-3.txt").read_text()
    banner, body = src.split("\n", 1)
    de = banner.replace("11/29/26", "29.11.2026") + "\n" + re.sub(r"(\d)\.(\d)", r"\1,\2", body)
    de = de.replace("Average:", "Durchschn.:")
    us = re.sub(r"\b(\d\d):(\d\d:\d\d)\b", _to_12h, src.replace("11/29/26", "11/29/2026"))
    c_df = _df(FIX / f"{DEB}pidstat-C-yes-dd-1-3.txt")
    for name, text in (("de", de), ("us", us)):
        p = tmp_path / name
        p.write_text(text)
        assert _df(p).equals(c_df), name


def test_midnight_rollover(tmp_path: Path) -> None:
    src = (FIX / f"{DEB}pidstat-C-yes-dd-1-3.txt").read_text()
    for old, new in (
        ("17:23:36", "23:59:58"),
        ("17:23:37", "23:59:59"),
        ("17:23:38", "00:00:00"),
        ("17:23:39", "00:00:01"),
    ):
        src = src.replace(old, new)
    p = tmp_path / "m"
    p.write_text(src)
    ts = _df(p)["ts"].to_list()
    assert ts[0] == datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC)
    assert ts[-1] == datetime(2026, 11, 30, 0, 0, 1, tzinfo=UTC)


def test_empty_headers_only_and_garbage(tmp_path: Path) -> None:
    p = tmp_path / "e"
    p.write_bytes(b"")
    assert _df(p).height == 0
    p.write_text("nothing\nto see\n")
    with pytest.raises(ParseError):
        _parse(p)


def test_sniff_recognizes_renamed_fixtures_and_rejects_other_tools() -> None:
    for path in OUTPUTS:
        assert pidstat.sniff(_read.read_head(path), "data.txt") >= 0.5, path.name
    others = [
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n17:23:36     CPU    %usr   %nice    %sys %iowait\n",
        "Linux 6.1 (vm) \t11/29/26 \t_x86_64_\t(2 CPU)\n\nDevice            r/s     w/s     rkB/s\n",
        "procs -----------memory----------\n r  b   swpd   free\n",
        "MemTotal:  1 kB\nMemFree:  1 kB\n",
    ]
    for text in others:
        assert pidstat.sniff(text, "data.txt") < 0.5


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idx=st.integers(0, len(OUTPUTS) - 1), seed=st.integers(0, 2**32), op=st.integers(0, 2))
def test_mutated_fixtures_never_crash(idx: int, seed: int, op: int) -> None:
    data = mutate(OUTPUTS[idx].read_bytes(), seed, op)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m"
        p.write_bytes(data)
        try:
            res = pidstat.parse(p, base.ParseContext())
        except ParseError:
            return
        res.coverage.check()
        res.tables["pidstat"].lazy().collect()


# --------------------------------------------------------------------------- big files


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


def _blocked(
    path: Path, mp: pytest.MonkeyPatch, chunk: int = 4096, **kw: object
) -> base.ParseResult:
    """``path`` parsed in blocks of about ``chunk`` bytes (coverage checked)."""
    mp.setattr(_blocks, "CHUNK_BYTES", chunk)
    kw.setdefault("tz", "UTC")
    res = _parse(path, **kw)
    mp.undo()
    return res


def _table(res: base.ParseResult) -> pl.DataFrame:
    return res.tables["pidstat"].lazy().collect()


def _says(path: Path, tz: str = "UTC") -> pl.DataFrame:
    """What each data row of a one-report file says, read with a plain whitespace split:
    the header's names, the banner date plus the row's clock in ``tz`` (a step back is
    midnight) or its epoch seconds."""
    banner, *lines = path.read_text().split("\n")
    day = datetime.strptime(banner.split()[3], "%m/%d/%y") if "/" in banner else None
    names: list[str] = []
    rows, last, days = [], -1, 0
    for ln in lines:
        toks = ln.split()
        if ln.endswith("Command"):
            names = toks[2:] if toks[0] == "#" else toks[1:]
        elif toks and toks[0][0].isdigit():
            row = {pidstat.COLUMNS[n]: float(v) for n, v in zip(names[:-1], toks[1:], strict=False)}
            if ":" in toks[0]:
                h, m, sec = map(int, toks[0].split(":"))
                days += h * 3600 + m * 60 + sec < last
                last = h * 3600 + m * 60 + sec
                assert day is not None
                local = day + timedelta(days=days, seconds=last)
                row["ts"] = local.replace(tzinfo=ZoneInfo(tz)).astimezone(UTC)
            else:
                row["ts"] = datetime.fromtimestamp(int(toks[0]), UTC)
            row["command"] = " ".join(toks[len(names) :])
            rows.append(row)
    df = pl.DataFrame(rows)
    kb = [c for c in pidstat.SENTINEL if c in df.columns]
    df = df.with_columns(pl.when(pl.col(c) >= 0).then(c).alias(c) for c in kb)
    return df.group_by("ts", "pid", maintain_order=True).agg(pl.all().drop_nulls().first())


def _same_rows(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """``got`` holds ``want``'s rows in its order: every value of ``want``'s columns."""
    cols = [c for c in want.columns if c in got.columns]
    got = got.select(cols).with_columns(cs.numeric().cast(pl.Float64))
    assert_frame_equal(got, want.select(cols), check_dtypes=False)


@pytest.mark.parametrize(
    "name", ["h200-checkpoint-stall", "synth-oom_kill", "synth-cpu_contention"]
)
def test_big_captures_say_what_their_rows_say_in_any_block_size(real, name, monkeypatch) -> None:
    path = real[name]
    want = _says(path)
    whole = _blocked(path, monkeypatch, 1 << 23)
    assert whole.coverage.parsed == want.height > 150
    _same_rows(_table(whole), want)
    for chunk in (4096, 65536):
        res = _blocked(path, monkeypatch, chunk)
        assert_frame_equal(_table(res), _table(whole))
        assert res.coverage == whole.coverage and res.meta == whole.meta


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_fixture_tables_do_not_depend_on_the_block_size(path, monkeypatch) -> None:
    try:
        whole = _blocked(path, monkeypatch, 1 << 23)
    except ParseError:
        return
    for chunk in (64, 300):
        res = _blocked(path, monkeypatch, chunk)
        assert_frame_equal(_table(res), _table(whole))
        assert res.coverage == whole.coverage and res.meta == whole.meta


CLOCK_FIX = FIX / f"{DEB}pidstat-C-yes-dd-1-3.txt"
MULTI_FIX = FIX / "localbuild-sysstat-12.2.0__pidstat-d-r-C-dd-1-2.txt"


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
    res = _blocked(path, monkeypatch, 2048)
    df = _table(res)
    assert df["ts"].dt.day().unique().sort().to_list() == [29, 30]
    assert df["since_boot"].unique().to_list() == [False]
    _same_rows(df, _says(path))  # the reports of one interval merged into one row
    assert_frame_equal(_table(_blocked(path, monkeypatch, 1 << 23)), df)


def test_local_times_and_since_boot_from_the_command(real, tmp_path, monkeypatch) -> None:
    command = "pidstat -u -r -d -w -h -p 1,2 1"
    for path in (real["synth-oom_kill"], _clock_file(tmp_path / "clk")):
        res = _blocked(path, monkeypatch, 4096, tz="Europe/Berlin", command=command)
        df = _table(res)
        assert df["since_boot"].unique().to_list() == [False]
        _same_rows(df, _says(path, "Europe/Berlin"))  # epoch rows stay UTC
    assert any("time zone" not in n for n in res.coverage.notes) or not res.coverage.notes


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
_ODD = ["  1e+05 ", "    nan ", "  +1.00 ", "    .50 ", "     5. ", "   1,50 ", "  0.0 0 "]

EDITS: dict[str, Callable[[list[str]], list[str]]] = {
    "negative": lambda ls: _at(ls, 0.1, _sub(r"      0\.00 ", "     -1.00 ")),
    "negative_int": lambda ls: _at(ls, 0.05, _sub(r"   1000 ", "     -1 ")),
    "odd_numbers": lambda ls: _at(
        ls,
        0.2,
        lambda ln: [re.sub(r"   0\.00 ", random.Random(len(ln)).choice(_ODD), ln, count=1)],
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
#: edits whose lines say what they said before: the table does not change
SAME = {"trailing_blanks", "cr", "nul", "duplicate_rows"}


@pytest.fixture(scope="module")
def synth_lines(real) -> list[str]:
    return real["synth-oom_kill"].read_text().split("\n")


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_hostile_edits_cost_only_their_lines(edit, synth_lines, tmp_path, monkeypatch) -> None:
    edited = EDITS[edit](list(synth_lines))
    path = tmp_path / edit
    text = "\n".join(edited)
    path.write_text(text)
    res = _blocked(path, monkeypatch, 8192)
    assert res.coverage.total == text.count("\n") + (not text.endswith("\n"))
    got = _table(res)
    (tmp_path / "orig").write_text("\n".join(synth_lines))
    before = _says(tmp_path / "orig")
    if edit == "headers_only":
        assert got.height == 0 and res.coverage.parsed == 0
        return
    # every second none of whose rows was touched reads as before (all of them for SAME)
    a, b = Counter(synth_lines), Counter(edited)
    touched = {ln.split()[0] for ln in (a - b) + (b - a) if ln[:1].isdigit()}
    touched = set() if edit in SAME else touched
    untouched = ~pl.col("ts").dt.epoch("s").cast(pl.String).is_in(sorted(touched))
    _same_rows(got.filter(untouched), before.filter(untouched))
    assert_frame_equal(_table(_blocked(path, monkeypatch, 1 << 23)), got)


@pytest.mark.parametrize("end", ["cut", "no_newline"])
def test_last_line_without_newline(end, real, tmp_path, monkeypatch) -> None:
    data = real["synth-cpu_contention"].read_bytes().rstrip(b"\n")
    path = tmp_path / end
    path.write_bytes(data[:-30] if end == "cut" else data)
    res = _blocked(path, monkeypatch, 8192)
    want = _says(real["synth-cpu_contention"])
    if end == "cut":  # the cut row does not match its header
        assert res.coverage.skipped == {"row does not match its header": 1}
        want = want.head(want.height - 1)
    _same_rows(_table(res), want)


def test_a_file_that_is_not_utf8_costs_only_the_bad_byte(real, tmp_path, monkeypatch) -> None:
    data = bytearray(real["synth-oom_kill"].read_bytes())
    at = data.index(b"python3", len(data) * 2 // 3)
    data[at : at + 1] = b"\xff"
    path = tmp_path / "bad"
    path.write_bytes(bytes(data))
    got = _table(_blocked(path, monkeypatch, 8192))
    want = _says(real["synth-oom_kill"])
    assert got["command"].to_list().count("\ufffdython3") == 1
    _same_rows(got.drop("command"), want.drop("command"))


@pytest.mark.parametrize("seed", range(12))
def test_random_mutations_of_big_files_never_crash(
    seed, synth_lines, tmp_path, monkeypatch
) -> None:
    data = "\n".join(synth_lines[:600]).encode()
    path = tmp_path / "m"
    path.write_bytes(mutate(data, seed, seed % 3))
    try:
        res = _blocked(path, monkeypatch, 1024)
    except ParseError:
        return
    assert_frame_equal(_table(_blocked(path, monkeypatch, 1 << 23)), _table(res))


@pytest.mark.parametrize("cut", [2, 3, 4])
def test_a_short_last_row_says_what_is_left_of_it(cut, synth_lines, tmp_path, monkeypatch) -> None:
    rows = [ln for ln in synth_lines if ln[:1].isdigit()]
    first = rows[0]
    vsz = first.split()[11]  # a value that widened: a row shape ending further right
    wide = first.replace(f" {vsz} ", f" {vsz}99999 ", 1)
    # the last line, a second later: a bad %usr, cut shorter than the wide rows' values
    end = len(first) - len(first.split()[-1]) - 2
    usr = first.split()[3]
    short = str(int(first[:10]) + 3600) + first[10:].replace(
        f" {usr} ", " " + "x" * len(usr) + " ", 1
    )
    path = tmp_path / "short"
    path.write_text("\n".join([*synth_lines[:40], wide, wide, short[: end + cut]]) + "\n")
    df = _table(_blocked(path, monkeypatch, 1 << 20))
    last = df.row(-1, named=True)
    assert (last["usr_pct"], last["command"]) == (None, "python3"[: cut - 2])
    assert last["vsz_kb"] == int(vsz) and last["nvcswch_s"] == float(first.split()[-2])
