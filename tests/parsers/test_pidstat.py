"""Tests of analyzer/parsers/pidstat.py on tests/fixtures/pidstat.

Golden values: jc's expected JSON (independent parser) for the jc CentOS/RHEL samples,
hand-read values for the Debian 12 and localbuild captures, and sysstat's own JSON output
of the same simulated run (``expected.pidstat-At-ALL-JSON``) against its text form.
Locale equivalence: the real de_DE and en_US captures are checked by hand, and the C
capture is re-rendered in de_DE / en_US form (decimal commas, dd.mm.yyyy, AM/PM,
``Durchschn.:``) and must give identical tables.
"""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import mutate

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, pidstat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "pidstat"
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
