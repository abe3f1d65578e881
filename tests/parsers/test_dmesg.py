"""Tests of analyzer/parsers/dmesg.py against the corpus fixtures in tests/fixtures/dmesg.

Golden values were read by hand from the fixture files (the same memcg OOM kill captured
with ten dmesg output modes on one Debian 12 VM, Xid lines from gpud, hung tasks from
syzkaller); the util-linux JSON files are the independent rendering of the same records
as util-linux's own text outputs.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.errors import ParseError
from analyzer.parsers import _read, base, dmesg

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "dmesg"
FILES = sorted(
    p for p in FIX.iterdir() if p.suffix != ".md" and not p.name.endswith(".golden.json")
)
OOM = "local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-"
OOM_VARIANTS = [
    "raw.txt",
    "T.txt",
    "iso.txt",
    "r.txt",
    "x.txt",
    "json.json",
    "delta.txt",
    "ctime-TZ-Berlin-de_DE.txt",
    "ctime-en_US.txt",
]
# Files where lines that are not kernel output are skipped on purpose (so below 99 %):
# syslog/journal logs interleaving other programs' lines, a shell prompt pasted into the
# cadvisor log, and util-linux's indentation test that concatenates a --notime block (no
# stamp, no indent) into a timestamped log. Their skip reasons are asserted instead.
MIXED = {
    "cadvisor-oomparser__containerOomExampleLog.txt",
    "cadvisor-oomparser__systemOomExampleLog.txt",
    "gh-issue__raspberrypi-linux-6661__journalctl-nvme-boot-separator.txt",
    "util-linux-tests__indentation.txt",
}
MIXED_REASONS = {
    "syslog line from a non-kernel program",
    "unstamped line in a timestamped log (not kernel output)",
}


def _parse(path: Path, **kw: object) -> base.ParseResult:
    res = dmesg.parse(path, base.ParseContext(file_name=path.name, **kw))  # type: ignore[arg-type]
    res.coverage.check()
    return res


def _frame(path: Path, **kw: object) -> pl.DataFrame:
    out = _parse(path, **kw).tables["dmesg"]
    assert isinstance(out, pl.DataFrame)
    return out


def _write(tmp: Path, text: str | bytes, name: str = "data.txt") -> Path:
    p = tmp / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_with_full_coverage(path: Path) -> None:
    res = _parse(path)
    out = res.tables["dmesg"]
    assert isinstance(out, pl.DataFrame) and out.height > 0
    assert dict(out.schema) == dmesg.TABLES["dmesg"].schema
    assert out["message"].null_count() == 0
    assert out["event_id"].null_count() == 0
    if path.name in MIXED:
        assert set(res.coverage.skipped) <= MIXED_REASONS
    else:
        assert res.coverage.parsed_pct is not None and res.coverage.parsed_pct >= 99


@pytest.mark.parametrize("variant", OOM_VARIANTS)
def test_same_memcg_oom_kill_is_found_in_every_output_mode(variant: str) -> None:
    out = _frame(FIX / (OOM + variant))
    assert out.height == 79
    kill = out.filter(pl.col("kind") == "oom_kill")
    assert kill.select(
        "pid",
        "comm",
        "uid",
        "memcg",
        "oom_constraint",
        "total_vm_kb",
        "anon_rss_kb",
        "file_rss_kb",
        "shmem_rss_kb",
    ).rows() == [(24288, "python3", 0, "/corpus_oom", "CONSTRAINT_MEMCG", 85460, 65280, 6724, 0)]
    invoked = out.filter(pl.col("kind") == "oom_invoked")
    assert invoked["comm"].to_list() == ["python3"]
    assert invoked["line_no"].to_list() == [
        kill["line_no"][0] - 78 if variant != "json.json" else 6
    ]
    # the whole report is one event, opened by the oom_invoked line
    assert out["event_id"].n_unique() == 1
    assert set(out["event_kind"].to_list()) == {"oom_invoked"}


@pytest.mark.parametrize(
    ("variant", "tz"),
    [
        ("iso.txt", None),
        ("T.txt", None),
        ("ctime-en_US.txt", "UTC"),
        ("ctime-TZ-Berlin-de_DE.txt", "Europe/Berlin"),
    ],
)
def test_localised_ctime_and_iso_give_the_same_utc_clock(variant: str, tz: str | None) -> None:
    out = _frame(FIX / (OOM + variant), tz=tz)
    first = out.row(0, named=True)
    want = datetime(2026, 11, 29, 17, 25, 8, tzinfo=UTC)
    assert first["ts"].replace(microsecond=0) == want
    assert first["ts_source"] == ("iso" if variant == "iso.txt" else "ctime")
    if variant == "iso.txt":
        assert first["ts"] == want.replace(microsecond=543172)


def test_raw_uptime_is_placed_with_boot_time_and_matches_iso() -> None:
    boot = datetime(2026, 11, 29, 17, 25, 8, 543172, tzinfo=UTC) - timedelta(seconds=748.543172)
    raw = _frame(FIX / (OOM + "raw.txt"), boot_time=boot)
    iso = _frame(FIX / (OOM + "iso.txt"))
    assert raw["ts_source"].unique().to_list() == ["boot+uptime"]
    assert raw["ts"].to_list() == iso["ts"].to_list()
    assert raw["uptime_s"][0] == pytest.approx(748.543172)


def test_raw_without_boot_time_keeps_ts_null_with_a_note() -> None:
    res = _parse(FIX / (OOM + "raw.txt"))
    out = res.tables["dmesg"]
    assert isinstance(out, pl.DataFrame)
    assert out["ts"].null_count() == out.height
    assert any("boot_time" in n for n in res.coverage.notes)


def test_priority_decode_and_delta_prefixes() -> None:
    r = _frame(FIX / (OOM + "r.txt")).row(0, named=True)
    x = _frame(FIX / (OOM + "x.txt")).row(-1, named=True)
    d = _frame(FIX / (OOM + "delta.txt")).row(1, named=True)
    assert (r["facility"], r["level"], r["uptime_s"]) == ("kern", "warn", 748.543172)
    assert (x["facility"], x["level"]) == ("kern", "err")
    assert d["delta_s"] == pytest.approx(0.000137) and d["uptime_s"] is None
    assert d["message"].startswith("CPU: 0 UID: 0 PID: 24288 Comm: python3")


def test_util_linux_json_matches_its_raw_input() -> None:
    js = _frame(FIX / "util-linux-tests__cid-json.json")
    raw = _frame(FIX / "util-linux-tests__cid-input-raw-r.txt")
    cols = ["facility", "level", "uptime_s", "caller", "message"]
    assert js.select(cols).rows() == raw.select(cols).rows()
    assert js.row(10, named=True)["caller"] == "T10"
    assert raw.row(9, named=True)["facility"] == "user"  # <9> = user.alert


def test_kmsg_dump_with_nul_separators_and_dictionary_lines() -> None:
    res = _parse(FIX / "util-linux-tests__kmsg-input.bin")
    out = res.tables["dmesg"]
    assert isinstance(out, pl.DataFrame)
    assert res.coverage.structure["kmsg dictionary (KEY=value)"] == 20
    js = _frame(FIX / "util-linux-tests__kmsg-file.json")
    assert (
        out.select("level", "uptime_s", "message").rows()
        == js.select("level", "uptime_s", "message").rows()
    )
    assert out["message"][1].startswith("Command line: initrd=\\ucode.img")
    assert out["seq"][-1] == 2619
    boot = datetime(2026, 1, 1, tzinfo=UTC)
    gpud = _frame(FIX / "gpud__kmsg-records.log", boot_time=boot).row(0, named=True)
    assert gpud["ts_source"] == "kmsg+boot"
    assert gpud["ts"] == boot + timedelta(microseconds=206764307)


def test_multiple_time_formats_on_one_line() -> None:
    out = _frame(FIX / "util-linux-tests__timestamp-format-multiple.txt")
    row = out.row(12, named=True)
    assert row["uptime_s"] == 1728.0 and row["message"] == "example[12]"
    assert row["ts"] == datetime(2009, 2, 14, 0, 0, 18, 123456, tzinfo=UTC)
    assert row["ts_source"] == "iso"
    ctime = _frame(FIX / "util-linux-tests__timestamp-format-delta-ctime.txt").row(12, named=True)
    assert ctime["ts"] == datetime(2009, 2, 14, 0, 0, 18, tzinfo=UTC)
    assert ctime["delta_s"] == 397.0 and ctime["message"] == "example[12]"


def test_caller_id_and_binary_comm_hung_task() -> None:
    out = _frame(FIX / "syzkaller-report__hung-task-callerid-5.9-arm64.txt")
    hung = out.filter(pl.col("kind") == "hung_task").row(0, named=True)
    assert (hung["comm"], hung["pid"], hung["blocked_s"], hung["caller"]) == (
        "syz-fuzzer",
        4433,
        143,
        "T1478",
    )
    assert hung["uptime_s"] == pytest.approx(610.334229)
    # the hung-task report (header, task line, trace) is one event
    assert out.filter(pl.col("event_id") == hung["event_id"]).height >= 20
    binary = _frame(FIX / "syzkaller-report__hung-task-binary-comm.txt")
    b = binary.filter(pl.col("kind") == "hung_task").row(0, named=True)
    assert (b["pid"], b["blocked_s"]) == (18088, 143) and "\n" in b["comm"]


@pytest.mark.parametrize(
    ("name", "comm", "pid", "secs"),
    [
        ("syzkaller-report__hung-task-120s-4.15.txt", "syz-executor0", 10244, 120),
        ("syzkaller-report__hung-task-6.0.txt", "kworker/u4:6", 5166, 143),
        ("syzkaller-report__hung-task-notimestamp-5.10-arm.txt", "syz-executor.0", 10324, 122),
        ("npd-kernel-log-generator__docker_hung.txt", "docker", 20744, 120),
    ],
)
def test_hung_tasks(name: str, comm: str, pid: int, secs: int) -> None:
    res = _parse(FIX / name)
    out = res.tables["dmesg"]
    assert isinstance(out, pl.DataFrame)
    hung = out.filter(pl.col("kind") == "hung_task")
    assert hung.select("comm", "pid", "blocked_s").rows() == [(comm, pid, secs)]
    if name.startswith("syzkaller"):
        assert res.coverage.structure["syzkaller metadata header"] == 3


def test_xid_fields_from_gpud_and_old_drivers() -> None:
    out = _frame(FIX / "gpud__dmesg-T-xid-119.log")
    xid = out.filter(pl.col("kind") == "xid")
    assert xid.select("xid_code", "pid", "comm", "pci_bus").row(0) == (
        119,
        2024380,
        "nvidia-smi",
        "0000:9b:00",
    )
    assert xid.height == 5
    # the GSP RPC tables and the stack dump after the first Xid belong to its event
    first = out.filter(pl.col("event_id") == xid["event_id"][0])
    assert first.height >= 30
    readme = _frame(FIX / "gpud-readme__dmesg-ctime-xid-13-109.txt")
    codes = readme.filter(pl.col("kind") == "xid").select("xid_code", "pid", "comm").rows()
    assert codes[0] == (13, None, None) and codes[3] == (109, 1797828, "pt_main_thread")
    old = _frame(FIX / "gh-issue__Bumblebee-677__xid-old-format-2015.txt")
    assert old["xid_code"].to_list() == [32, 32, 31] and old["pid"].null_count() == 3


def test_gpu_fallen_off_bus_multiline_record_is_one_event() -> None:
    out = _frame(FIX / "gh-issue__NVSentinel-155__nvrm-fallen-off-bus-multiline.txt")
    first = out.row(0, named=True)
    assert (first["kind"], first["pci_bus"]) == ("gpu_fallen_off_bus", "0000:b3:00")
    assert out["message"][2] == "NVRM: fallen off the bus and is not responding to commands."
    assert out["uptime_s"][:3].to_list() == [1843.308145] * 3  # continuation lines inherit
    assert out["event_id"][:3].n_unique() == 1


def test_old_and_syslog_oom_wordings() -> None:
    npd = _frame(FIX / "npd-kernel-log-generator__oom_kill.txt")
    assert npd.filter(pl.col("kind") == "oom_kill").select(
        "pid", "comm", "anon_rss_kb", "shmem_rss_kb", "oom_constraint"
    ).rows() == [(1012, "heapster", 306328, 12345, "CONSTRAINT_MEMCG")]
    assert npd["event_id"].n_unique() == 1
    docker = _frame(FIX / "gh-issue__docker-for-linux-1001__syslog-oom-killed-process.txt")
    kills = docker.filter(pl.col("kind") == "oom_kill")
    assert kills["comm"].to_list() == ["python3", "(resolved)", "python3", "(resolved)"]
    assert kills["pid"].to_list() == [15784, 15925, 15783, 15934]
    assert docker["event_id"].n_unique() == 4  # each kill + its oom_reaper line
    cad = _frame(FIX / "cadvisor-oomparser__containerOomExampleLog.txt")
    k = cad.filter(pl.col("kind") == "oom_kill").row(0, named=True)
    assert (k["pid"], k["memcg"], k["anon_rss_kb"]) == (13536, "/mem2", 920)


def test_syslog_year_from_capture_start_and_timezone() -> None:
    path = FIX / "gh-issue__docker-for-linux-1001__syslog-oom-killed-process.txt"
    start = datetime(2021, 5, 16, 8, 0, tzinfo=UTC)
    out = _frame(path, capture_start=start, tz="Europe/Berlin")
    assert out["ts"][0] == datetime(2021, 5, 15, 21, 9, 30, tzinfo=UTC)
    assert out["ts_source"][0] == "syslog"
    res = _parse(path)
    assert res.tables["dmesg"]["ts"].null_count() == 8  # type: ignore[index]
    assert any("no year" in n for n in res.coverage.notes)
    jan = _frame(path, capture_start=datetime(2022, 1, 2, tzinfo=UTC))
    assert jan["ts"][0].year == 2021  # a May line in a January capture is last year's


def test_journal_boot_separator_and_foreign_lines() -> None:
    res = _parse(FIX / "gh-issue__raspberrypi-linux-6661__journalctl-nvme-boot-separator.txt")
    assert res.coverage.structure == {"journal separator": 1}
    assert res.coverage.skipped == {"syslog line from a non-kernel program": 7}
    assert res.coverage.parsed == 4


def test_io_errors_and_segfaults() -> None:
    nv = _frame(FIX / "gh-issue__propolis-1156__nvme-timeout-io-error-modern.txt")
    io = nv.filter(pl.col("kind") == "io_error")
    assert io["device"].to_list()[:4] == ["nvme0", "nvme0", "nvme0n1", "nvme0n1"]
    seg = _frame(FIX / "gpud__dmesg-decode-iso-segfault.log")
    assert seg.select("kind", "comm", "pid").rows()[0] == ("segfault", "pt_main_thread", 2536443)


def test_message_is_kept_verbatim(tmp_path: Path) -> None:
    text = "[  1.000000] <script>alert(1)</script>\n[  2.000000]  indented frame+0x1/0x2\n"
    out = _frame(_write(tmp_path, text))
    assert out["message"].to_list() == ["<script>alert(1)</script>", " indented frame+0x1/0x2"]


def test_crlf_nul_ansi_and_truncated_last_line(tmp_path: Path) -> None:
    text = b"[  1.000000] a\r\n\x00[  2.000000] \x1b[1mb\x1b[0m\r\n[  3.0000"
    res = _parse(_write(tmp_path, text))
    out = res.tables["dmesg"]
    assert isinstance(out, pl.DataFrame)
    assert out["message"].to_list()[:2] == ["a", "b"]
    assert res.coverage.total == 3


def test_not_a_kernel_log_raises_parse_error(tmp_path: Path) -> None:
    with pytest.raises(ParseError):
        dmesg.parse(
            _write(tmp_path, "procs ---memory---\n r  b   swpd\n 1  0 0\n"), base.ParseContext()
        )
    assert _parse(_write(tmp_path, "")).tables["dmesg"].height == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_sniff_recognises_renamed_fixtures(path: Path) -> None:
    assert dmesg.sniff(_read.read_head(path), "data.txt") >= 0.5


@pytest.mark.parametrize(
    "text",
    [
        "procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n"
        " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st\n"
        " 1  0      0 123456   7890 456789    0    0     1     2   10   20  1  1 98  0  0\n",
        "Linux 6.18.44 (host) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n"
        "17:25:08     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %idle\n"
        "17:25:09     all    1.00    0.00    0.50    0.00    0.00    0.00    0.00   98.50\n",
        "1764424800.002 /proc/pressure/cpu some avg10=1.20 avg60=0.80 avg300=0.31 total=96\n",
        "# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec\n# Idx     W      C      C     %\n"
        "    0    62     40      -     0     0     0     0\n",
    ],
)
def test_sniff_rejects_other_tools(text: str) -> None:
    assert dmesg.sniff(text, "data.txt") < 0.5


_SAMPLES = [
    FIX / (OOM + "raw.txt"),
    FIX / "util-linux-tests__kmsg-input.bin",
    FIX / (OOM + "json.json"),
    FIX / "cadvisor-oomparser__containerOomExampleLog.txt",
    FIX / "syzkaller-report__hung-task-binary-comm.txt",
]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    idx=st.integers(0, len(_SAMPLES) - 1),
    cut=st.floats(0, 1),
    garbage=st.lists(st.binary(max_size=60), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_mutated_files_never_crash(idx: int, cut: float, garbage: list[bytes], seed: int) -> None:
    data = _SAMPLES[idx].read_bytes()
    data = data[: int(len(data) * cut)]
    lines = data.split(b"\n")
    rnd = random.Random(seed)
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g)
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), b"\n".join(lines))
        try:
            res = dmesg.parse(
                path,
                base.ParseContext(tz="Europe/Berlin", boot_time=datetime(2026, 1, 1, tzinfo=UTC)),
            )
        except ParseError:
            return
        res.coverage.check()
        out = res.tables["dmesg"]
        assert isinstance(out, pl.DataFrame)
        assert dict(out.schema) == dmesg.TABLES["dmesg"].schema


def test_limits_skip_long_lines_and_lines_beyond_max_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "[  1.000000] a\n[  2.000000] " + "x" * 200 + "\n[  3.000000] c\n")
    res = _parse(path, max_line_bytes=100, max_lines=2)
    assert res.coverage.skipped == {"line longer than max_line_bytes": 1, "beyond max_lines": 1}
    assert res.tables["dmesg"]["message"].to_list() == ["a"]  # type: ignore[index]


def test_journalctl_short_iso_precise_previous_boot_log_sniffs_as_dmesg() -> None:
    """The capture's `journalctl -k -b -1 -o short-iso-precise` snapshot is a kernel log."""
    head = (
        "2026-11-29T17:25:08.123456+00:00 gpu01 kernel: Linux version 6.1.0\n"
        "2026-11-29T17:25:09.000001+00:00 gpu01 kernel: NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.\n"
    )
    assert dmesg.sniff(head, "journal_prev.start.out") >= 0.9
