"""Tests of analyzer/parsers/bpftrace.py (fixtures: tests/fixtures/bpftrace, tests/fixtures/bcc).

Golden values are read by hand from the files. bpftrace/bcc print no locale-dependent
numbers or dates, so the "locale" test checks CRLF/NUL equivalence instead.

The 99 % rule: stderr noise (``ERROR: ... RLIMIT_MEMLOCK`` kept on purpose in the local
captures) is not a data line and is excluded. The upstream example transcripts
(``bpftrace-tools__*``, ``bcc-tools__*``) are mostly prose and other tools' printf output
(snoop tables, stacks): they are excluded from the 99 % rule; instead every line that
looks like a histogram bucket must have become a ``bpf_hist`` row, and the other lines
must be accounted for (prose, prompts, unsupported output) — coverage.check() holds.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from blockwise import assert_same_as_one_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, bpftrace

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ALL = sorted(
    p
    for d in ("bpftrace", "bcc")
    for p in (FIX / d).iterdir()
    if p.suffix != ".md" and not p.name.endswith(".golden.json")
)
TRANSCRIPT = ("bpftrace-tools__", "bcc-tools__")
LOCAL = FIX / "bpftrace" / "local-debian12-bpftrace0.17.0-kernel6.18__"
BUCKET_LIKE = re.compile(
    r"^\s*(?:[\[(].*[\])]\s+\d+\s+\|[@ ]*\||\d+( -> \d+)?\s+: \d+\s+\|[*+ ]*\|)\s*$"
)
START = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = bpftrace.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _write(tmp: Path, data: str | bytes, name: str = "data.txt") -> Path:
    p = tmp / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def _rows(res: base.ParseResult, table: str, **eq: object) -> list[dict]:
    df = res.tables[table]
    assert isinstance(df, pl.DataFrame)
    for k, v in eq.items():
        df = df.filter(pl.col(k) == v)
    return df.to_dicts()


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_fixture_parses(path: Path) -> None:
    res = _parse(path)
    for name, frame in res.tables.items():
        assert dict(frame.schema) == bpftrace.TABLES[name].schema  # type: ignore[union-attr]
    cov = res.coverage
    assert "histogram row without header" not in cov.skipped
    if path.name.startswith(TRANSCRIPT):
        lines = path.read_text().splitlines()
        assert res.tables["bpf_hist"].height == sum(bool(BUCKET_LIKE.match(ln)) for ln in lines)
        return
    data = cov.parsed + cov.n_skipped - cov.skipped.get("stderr noise", 0)
    assert data == 0 or 100 * cov.parsed / data >= 99


def test_log2_hist_with_negative_and_single_value_buckets() -> None:
    rows = (
        _parse(FIX / "bpftrace" / "bpftrace-runtime-tests__hist.txt").tables["bpf_hist"].to_dicts()
    )
    got = [(r["bucket_low"], r["bucket_high"], r["count"]) for r in rows]
    assert got == [
        (None, 0, 1),
        (0, 1, 0),
        (1, 2, 0),
        (2, 4, 2),
        (4, 8, 1),
        (8, 16, 0),
        (16, 32, 1),
    ]
    assert {r["map"] for r in rows} == {"@"} and {r["style"] for r in rows} == {"bpftrace"}


def test_keyed_hist_with_k_and_m_suffixes() -> None:
    res = _parse(Path(f"{LOCAL}bitesize.bt_SIGINT-after-5s.txt"))
    dd = _rows(res, "bpf_hist", key="dd")
    assert (dd[0]["map"], dd[0]["bucket_low"], dd[0]["bucket_high"], dd[0]["count"]) == (
        "@",
        4096,
        8192,
        64932,
    )
    big = _rows(res, "bpf_hist", key="kworker/1:0H")[-1]
    assert (big["bucket_low"], big["bucket_high"], big["count"]) == (64 << 20, 128 << 20, 2)
    assert res.coverage.skipped == {"stderr noise": 1}
    assert res.coverage.structure["section title"] == 1


def test_lhist_overflow_stats_and_avg_map() -> None:
    res = _parse(Path(f"{LOCAL}oneliner_lhist-stats-avg.txt"))
    last = res.tables["bpf_hist"].row(-1, named=True)
    assert (last["map"], last["bucket_low"], last["bucket_high"], last["count"], last["unit"]) == (
        "@bytes",
        65536,
        None,
        6000,
        "bytes",
    )
    stats = {r["stat"]: r["value"] for r in _rows(res, "bpf_scalar", map="@s")}
    assert stats == {"count": 80723, "average": 8661, "total": 699159288}
    assert _rows(res, "bpf_scalar", map="@a", key="dd")[0]["value"] == 8663


def test_interval_time_lines_date_from_capture_start_and_exit_dump_is_null() -> None:
    res = _parse(
        Path(f"{LOCAL}oneliner_interval-print-clear-time.txt"), capture_start=START, tz="UTC"
    )
    yes = _rows(res, "bpf_scalar", key="yes")
    assert [r["ts"] for r in yes] == [
        datetime(2026, 11, 29, 17, 25, s, tzinfo=UTC) for s in (49, 50, 51, 52)
    ] + [None]
    assert [r["value"] for r in yes] == [1790189, 1951286, 1746542, 1977425, 1]


def test_time_of_day_without_capture_start_gives_null_ts() -> None:
    res = _parse(Path(f"{LOCAL}oneliner_runqlat-per-interval_print-clear.txt"))
    assert res.tables["bpf_hist"]["ts"].null_count() == res.tables["bpf_hist"].height
    assert any("could not be placed" in n for n in res.coverage.notes)


def test_iso_and_epoch_time_lines(tmp_path: Path) -> None:
    text = "2026-11-29T14:00:10Z\n@n: 5\n1764424800\n@n: 6\n2026-11-29 15:00:00\n@n: 7\n"
    res = _parse(_write(tmp_path, text), tz="Europe/Berlin")
    assert res.tables["bpf_scalar"]["ts"].to_list() == [
        datetime(2026, 11, 29, 14, 0, 10, tzinfo=UTC),
        datetime(2025, 11, 29, 14, 0, 0, tzinfo=UTC),
        datetime(2026, 11, 29, 14, 0, 0, tzinfo=UTC),
    ]


def test_ndjson_keyed_hist_map_and_stats() -> None:
    res = _parse(Path(f"{LOCAL}oneliner_hist-by-comm-f-json.ndjson"))
    dd = _rows(res, "bpf_hist", key="dd")
    assert (
        dd[0]["map"],
        dd[0]["bucket_low"],
        dd[0]["bucket_high"],
        dd[0]["count"],
        dd[0]["style"],
    ) == ("@bytes", 4096, 8192, 45422, "json")
    assert _rows(res, "bpf_scalar", map="@n")[0]["value"] == 48142
    st_ = {r["stat"]: r["value"] for r in _rows(res, "bpf_scalar", map="@st")}
    assert st_ == {"count": 48142, "average": 11643, "total": 560521216}


def test_pretty_printed_json_open_buckets_and_tseries() -> None:
    rows = _parse(FIX / "bpftrace" / "bpftrace-runtime-tests__hist_multiple.json").tables[
        "bpf_hist"
    ]
    curl = rows.filter(pl.col("key") == "curl").to_dicts()
    assert (curl[0]["bucket_low"], curl[0]["bucket_high"], curl[0]["count"]) == (None, 0, 1)
    lh = (
        _parse(FIX / "bpftrace" / "bpftrace-runtime-tests__lhist.json")
        .tables["bpf_hist"]
        .row(-1, named=True)
    )
    assert (lh["bucket_low"], lh["bucket_high"], lh["count"]) == (100, None, 1)
    ts = _parse(FIX / "bpftrace" / "bpftrace-runtime-tests__tseries.json", tz="UTC").tables[
        "bpf_scalar"
    ]
    assert (
        ts["ts"][0] == datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)
        and ts["value"].to_list() == [9.0] * 5
    )
    s = (
        _parse(FIX / "bpftrace" / "bpftrace-runtime-tests__scalar_str.json")
        .tables["bpf_scalar"]
        .row(0, named=True)
    )
    assert (s["value"], s["text"]) == (None, "a b \n d e")


def test_stack_keyed_hist() -> None:
    res = _parse(FIX / "bpftrace" / "bpftrace-tools__biostacks_example.txt")
    keys = res.tables["bpf_hist"]["key"].unique(maintain_order=True).to_list()
    assert keys[0].startswith("blk_account_io_start+1;blk_mq_make_request+1102;") and keys[
        0
    ].endswith("ret_from_fork+53")
    assert res.coverage.structure["stack key (frame)"] == 14 + 18  # lines 15-28 and 35-52


def test_bcc_log2_sections_and_timestamps() -> None:
    res = _parse(FIX / "bcc" / "bcc-tools__biolatency_example.txt", capture_start=START, tz="UTC")
    first = res.tables["bpf_hist"].row(6, named=True)  # "      64 -> 127      : 1        |      |"
    assert (
        first["map"],
        first["key"],
        first["bucket_low"],
        first["bucket_high"],
        first["count"],
        first["unit"],
    ) == ("usecs", "", 64, 128, 1, "usecs")
    ms = _rows(res, "bpf_hist", unit="msecs")[0]  # 06:20:16 then "0 -> 1 : 36"
    assert (ms["bucket_low"], ms["bucket_high"], ms["count"]) == (0, 2, 36)
    assert ms["ts"] == datetime(
        2026, 11, 30, 6, 20, 16, tzinfo=UTC
    )  # before the 17:00 start: next day
    xvdb = _rows(res, "bpf_hist", map="disk", key="xvdb")
    assert len(xvdb) > 0 and all(r["style"] == "bcc" for r in xvdb)
    assert res.coverage.skipped["not tool output (prose)"] > 10


def test_bcc_linear_hist() -> None:
    row = (
        _parse(FIX / "bcc" / "bcc-tools__runqlen_example.txt").tables["bpf_hist"].row(0, named=True)
    )
    assert (row["map"], row["bucket_low"], row["bucket_high"], row["count"], row["unit"]) == (
        "runqlen",
        0,
        1,
        1776,
        None,
    )


def test_crlf_and_nul_give_same_tables(tmp_path: Path) -> None:
    src = Path(f"{LOCAL}oneliner_lhist-stats-avg.txt")
    a = _parse(src)
    b = _parse(
        _write(tmp_path, src.read_bytes().replace(b"\n", b"\r\n").replace(b"@a[", b"@\x00a["))
    )
    for t in ("bpf_hist", "bpf_scalar"):
        assert a.tables[t].equals(b.tables[t])  # type: ignore[union-attr]


def test_empty_and_header_only(tmp_path: Path) -> None:
    res = _parse(_write(tmp_path, ""))
    assert res.tables["bpf_hist"].height == 0 and res.coverage.total == 0
    res = _parse(_write(tmp_path, "Attaching 1 probe...\n@usecs:\n\n"))
    assert res.tables["bpf_hist"].height == 0 and res.coverage.n_skipped == 0


def test_sniff_recognizes_renamed_fixtures_and_rejects_others() -> None:
    for name in (
        "oneliner_runqlat-tracepoints_usecs-hist.txt",
        "oneliner_hist-f-json.ndjson",
        "syscount.bt_SIGINT-after-4s.txt",
    ):
        assert bpftrace.sniff(_read.read_head(Path(f"{LOCAL}{name}")), "data.txt") >= 0.8
    assert (
        bpftrace.sniff(_read.read_head(FIX / "bcc" / "bcc-tools__runqlat_example.txt"), "data.txt")
        >= 0.8
    )
    assert (
        bpftrace.sniff(
            _read.read_head(FIX / "bpftrace" / "bpftrace-runtime-tests__hist.json"), "data.txt"
        )
        >= 0.8
    )
    assert (
        bpftrace.sniff("# gpu   pwr  temp\n# Idx     W     C\n    0   111    83\n", "data.txt")
        < 0.5
    )
    assert (
        bpftrace.sniff(
            "Linux 6.1 (host) \t11/29/26\t_x86_64_\t(2 CPU)\n\n12:00:01 CPU %usr\n", "data.txt"
        )
        < 0.5
    )
    assert bpftrace.sniff("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", "data.txt") < 0.5


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(
        [
            "oneliner_lhist-stats-avg.txt",
            "oneliner_hist-by-comm-f-json.ndjson",
            "bitesize.bt_SIGINT-after-5s.txt",
        ]
    ),
    mode=st.sampled_from(["cut", "garbage", "bytes"]),
)
def test_mutated_input_never_crashes(tmp_path: Path, seed: int, name: str, mode: str) -> None:
    rng = random.Random(seed)
    data = Path(f"{LOCAL}{name}").read_bytes()
    if mode == "cut":
        data = data[: rng.randrange(len(data) + 1)]
    elif mode == "garbage":
        lines = data.split(b"\n")
        for _ in range(rng.randint(1, 4)):
            lines.insert(
                rng.randrange(len(lines) + 1),
                rng.choice(
                    [
                        b"{",
                        b"@x[",
                        b"]:",
                        b"[1, 2)  3 |@|",
                        b"12:00:00",
                        b"\xff",
                        b"  0 -> 1 : 3 |*|",
                    ]
                ),
            )
        data = b"\n".join(lines)
    else:
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        data = bytes(buf)
    path = _write(tmp_path, data, f"m{seed}.txt")
    try:
        res = bpftrace.parse(path, base.ParseContext(capture_start=START))
    except ParseError:
        return
    res.coverage.check()


# --- reading in blocks (analyzer/parsers/_blocks.py) ---------------------------------


def _midnight_text() -> str:
    """Histograms every 2 s across midnight, map values, stats, a stack key, bcc-free."""
    out = ["Attaching 3 probes..."]
    for i in range(40):
        s = (23 * 3600 + 59 * 60 + 30 + 2 * i) % 86400
        out.append(f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}")
        out.append("@usecs[sda]:")
        for lo in (0, 1, 2, 4, 8, 1024):
            hi = lo + 1 if lo < 2 else lo * 2
            lab = (
                f"[{lo}]"
                if lo < 2
                else f"[{lo if lo < 1024 else '1K'}, {hi if hi < 1024 else '2K'})"
            )
            count = (i * 37 + lo) % 900
            out.append(f"{lab:<16} {count:>8} |{'@' * (count // 20):<52}|")
        out += ["", f"@calls[read]: {i}", "@s: count 10, average 5, total 50"]
        out += ["@[", "    func_a+12", "    func_b+4", "]: 3", ""]
        if i % 7 == 6:  # two blank lines: the timestamp stops applying (bpftrace's exit dump)
            out += ["", "", "@usecs[exit]:", f"[1]{' ' * 20}1 |{'@' * 52}|", ""]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("i,path", list(enumerate(ALL)), ids=[p.name for p in ALL])
def test_blocks_of_any_size_give_the_one_block_result(
    i: int, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunk = max((400, 1500, 6000)[i % 3], path.stat().st_size // 8)  # at least ~8 blocks
    assert_same_as_one_block(
        bpftrace, path, (chunk,), monkeypatch, ("bpf_scalar",), tz="UTC", capture_start=START
    )


@pytest.mark.parametrize("variant", ["plain", "crlf", "nul", "bad-utf8", "no-final-newline"])
def test_blocks_carry_timestamps_stacks_and_midnight_across_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    data = _midnight_text().encode()
    data = {
        "plain": data,
        "crlf": data.replace(b"\n", b"\r\n"),
        "nul": data.replace(b"func_a", b"func\x00_a").replace(b"[4, 8)", b"[4,\x00 8)"),
        "bad-utf8": data.replace(b"@calls[read]", b"@calls[r\xffd]"),
        "no-final-newline": data.rstrip(b"\n"),
    }[variant]
    path = _write(tmp_path, data)
    whole = _parse(path, tz="UTC", capture_start=START)
    hist = whole.tables["bpf_hist"]
    assert hist.height == 245 and hist["ts"].null_count() == 5  # the maps after each gap
    assert hist["ts"].drop_nulls().max() == datetime(2026, 11, 30, 0, 0, 48, tzinfo=UTC)
    stacks = _rows(whole, "bpf_scalar", key="func_a+12;func_b+4")
    if variant != "nul":
        assert len(stacks) == 40
    assert_same_as_one_block(
        bpftrace,
        path,
        (60, 400, 2500) if variant == "plain" else (250,),
        monkeypatch,
        ("bpf_scalar",),
        tz="UTC",
        capture_start=START,
    )


def test_canonical_and_irregular_bucket_rows_of_one_map_read_alike(tmp_path: Path) -> None:
    # Rows as bpftrace prints them and irregular ones (a trailing blank, a tab, a 19-digit
    # count, a non-ASCII label) under one header: same map, key and timestamp.
    rows = [
        "[0]                    5 |@@@@                                                |",
        "[1]                    6 |@@@@@                                               | ",
        "[2, 4)\t               7 |@@@@@@                                              |",
        "[4, 8)      1234567890123456789 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|",
        "[8, 16)               9 |@@@@@@@@                                            |",
        "[16, 32é)             10 |@@@@@@@@@                                           |",
        "[32, 64)              11 |@@@@@@@@@@                                          |",
    ]
    path = _write(tmp_path, "17:00:01\n@usecs[nvme0n1]:\n" + "\n".join(rows) + "\n")
    res = _parse(path, tz="UTC", capture_start=START)
    got = res.tables["bpf_hist"].select("map", "key", "bucket_low", "bucket_high", "count")
    assert got.rows() == [
        ("@usecs", "nvme0n1", 0, 1, 5),
        ("@usecs", "nvme0n1", 1, 2, 6),
        ("@usecs", "nvme0n1", 2, 4, 7),
        ("@usecs", "nvme0n1", 4, 8, 1234567890123456789),
        ("@usecs", "nvme0n1", 8, 16, 9),
        ("@usecs", "nvme0n1", 16, None, 10),
        ("@usecs", "nvme0n1", 32, 64, 11),
    ]
    assert res.tables["bpf_hist"]["ts"].unique().to_list() == [
        datetime(2026, 11, 29, 17, 0, 1, tzinfo=UTC)
    ]
    assert res.coverage.parsed == 7


def test_streamed_rows_are_not_returned_again(tmp_path: Path) -> None:
    path = _write(tmp_path, _midnight_text())
    got: list[tuple[str, int]] = []
    ctx = base.ParseContext(
        file_name=path.name,
        tz="UTC",
        capture_start=START,
        sink=lambda n, f: got.append((n, f.height)),
    )
    res = bpftrace.parse(path, ctx)
    assert res.tables == {}
    assert [n for n, _ in got][:2] == ["bpf_hist", "bpf_scalar"]
    assert sum(h for n, h in got if n == "bpf_hist") == 245
