"""Hostile files inside an otherwise fine bundle, through the real `analyze`: each ends in
a successful analysis whose coverage (the ``collectors`` rows) says what happened to the
bad file. Nothing is invented: rows come only from lines that were in the input."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import Jail
from hostile import FIX, VMSTAT, analyze

IOSTAT_ISO = FIX / "iostat" / "local-debian12-sysstat12.6.1__iostat-xt-ISO-1-3.txt"
DMESG = FIX / "dmesg" / "local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-iso.txt"
VM_HEAD, VM_ROWS = VMSTAT.splitlines(keepends=True)[:2], VMSTAT.splitlines(keepends=True)[2:]


def vm_row(stamp: str) -> bytes:
    """One vmstat -t data row at ``stamp`` ('YYYY-MM-DD HH:MM:SS')."""
    return VM_ROWS[1][: -len(b"2026-11-29 17:23:37\n")] + stamp.encode() + b"\n"


def run(jail: Jail, files: dict[str, bytes], *options: str):  # type: ignore[no-untyped-def]
    d = jail.root / "bundle"
    d.mkdir()
    for name, data in files.items():
        (d / name).write_bytes(data)
    db = jail.root / "out" / "a.duckdb"
    outcome = analyze(d, jail.root / "out", "--db", str(db), *options)
    outcome.assert_ok()
    return outcome, duckdb.connect(str(db), read_only=True)


def test_empty_file_is_listed_as_empty(jail: Jail) -> None:
    outcome, _ = run(jail, {"vmstat.out": VMSTAT, "iostat.out": b""})
    row = outcome.by_file()["iostat.out"]
    assert row["status"] == "empty" and row["bytes"] == 0


def test_file_of_only_headers_is_empty_not_failed(jail: Jail) -> None:
    outcome, _ = run(jail, {"vmstat.out": b"".join(VM_HEAD * 3)})
    row = outcome.by_file()["vmstat.out"]
    assert row["status"] == "empty" and row["lines_parsed"] == 0 and row["lines_skipped"] == 0
    assert row["lines_structure"] == 6


def test_binary_garbage_is_unrecognised_and_not_parsed(jail: Jail) -> None:
    files = {
        "vmstat.out": VMSTAT,
        "random.out": os.urandom(100_000),  # ~10 % control bytes: binary or just unknown text
        "elf": b"\x7fELF\x02\x01\x01" + bytes(range(32)) * 3000,
    }
    outcome, con = run(jail, files)
    for name in ("random.out", "elf"):
        row = outcome.by_file()[name]
        assert row["status"] == "unrecognised" and not row.get("tables"), row
    assert "binary" in outcome.by_file()["elf"]["reason"]
    assert [t for (t,) in con.sql("SELECT DISTINCT source_file FROM vmstat").fetchall()] == [
        "vmstat.out"
    ]


def test_nul_bytes_and_invalid_utf8_inside_lines_keep_the_rows(jail: Jail) -> None:
    dirty = VM_HEAD[0] + VM_HEAD[1] + VM_ROWS[0].replace(b"  0", b" \x000", 1)
    dirty += VM_ROWS[1][:-1] + b" \xff\xfe\n" + VM_ROWS[2]
    outcome, con = run(jail, {"vmstat.out": dirty})
    row = outcome.by_file()["vmstat.out"]
    assert row["lines_total"] == 5
    assert row["lines_parsed"] + row["lines_skipped"] == 3, row
    assert con.sql("SELECT count(*) FROM vmstat").fetchall()[0][0] == row["lines_parsed"]


def test_crlf_line_ends_parse_the_same_values_as_lf(jail: Jail) -> None:
    crlf = {
        "vmstat.out": VMSTAT.replace(b"\n", b"\r\n"),
        "iostat.out": IOSTAT_ISO.read_bytes().replace(b"\n", b"\r\n"),
        "kern.log": DMESG.read_bytes().replace(b"\n", b"\r\n"),
    }
    outcome, con = run(jail, crlf)
    lf_dir = jail.root / "lf"
    lf_dir.mkdir()
    for name, data in crlf.items():
        (lf_dir / name).write_bytes(data.replace(b"\r\n", b"\n"))
    lf_db = jail.root / "lf.duckdb"
    analyze(lf_dir, jail.root / "lf-out", "--db", str(lf_db)).assert_ok()
    lf = duckdb.connect(str(lf_db), read_only=True)
    for table in ("vmstat", "iostat_device", "dmesg"):
        q = f"SELECT * EXCLUDE (source_file) FROM {table} ORDER BY ALL"
        assert con.sql(q).fetchall() == lf.sql(q).fetchall(), table
    assert {r["status"] for r in outcome.rows} == {"parsed"}


def test_decimal_comma_and_point_mixed_in_one_file_parse_alike(jail: Jail) -> None:
    lines = IOSTAT_ISO.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    mixed = b"".join(lines[:half]) + b"".join(
        ln if ln[:1].isalpha() or b"T" in ln else ln.replace(b".", b",") for ln in lines[half:]
    )
    outcome, con = run(jail, {"point.out": IOSTAT_ISO.read_bytes(), "mixed.out": mixed})
    q = "SELECT * EXCLUDE (source_file) FROM iostat_device WHERE source_file = '{}' ORDER BY ALL"
    assert con.sql(q.format("mixed.out")).fetchall() == con.sql(q.format("point.out")).fetchall()
    assert outcome.by_file()["mixed.out"]["status"] == "parsed"


def test_clock_going_backwards_and_duplicate_samples_keep_every_row_as_given(jail: Jail) -> None:
    rows = [
        vm_row(t) for t in ("2026-11-29 17:23:40", "2026-11-29 17:23:38", "2026-11-29 17:23:38")
    ]
    data = b"".join(VM_HEAD) + VM_ROWS[0] + b"".join(rows) + rows[1]
    outcome, con = run(jail, {"vmstat.out": data})
    row = outcome.by_file()["vmstat.out"]
    assert row["lines_parsed"] == 5 and row["lines_skipped"] == 0
    stamps = [r[0].strftime("%H:%M:%S") for r in con.sql("SELECT ts FROM vmstat").fetchall()]
    assert stamps.count("17:23:38") == 3 and "17:23:40" in stamps  # as given, none invented


def test_two_hosts_files_mixed_in_one_bundle_are_noted(jail: Jail) -> None:
    other = IOSTAT_ISO.read_bytes().replace(b"(vm)", b"(other-host)", 1)
    outcome, _ = run(jail, {"a-iostat.out": IOSTAT_ISO.read_bytes(), "b-iostat.out": other})
    assert "2 different hosts (other-host, vm)" in outcome.doc["bundle"]["notes"]
    assert "2 different hosts" in outcome.report.read_text(encoding="utf-8")


def test_status_companion_with_absurd_exit_codes_does_not_stop_the_analysis(jail: Jail) -> None:
    files = {"vmstat.out": VMSTAT, "vmstat.status": b"rc=--5 rc=\xc2\xb2 rc=99999999999999\n"}
    outcome, _ = run(jail, files)
    assert outcome.by_file()["vmstat.out"]["exit_code"] is None


def test_huge_stderr_companion_is_read_by_its_tail_only(jail: Jail) -> None:
    files = {"vmstat.out": VMSTAT, "vmstat.err": b"noise\n" * 200_000 + b"the last words\n"}
    outcome, _ = run(jail, files)
    assert outcome.by_file()["vmstat.out"]["stderr_tail"].endswith("the last words")


def test_timestamps_years_apart_finish_in_bounded_time_and_memory(tmp_path: Path) -> None:
    d = tmp_path / "bundle"
    d.mkdir()
    rows = [
        vm_row("2001-09-16 20:31:30"),
        vm_row("2001-09-16 20:31:31"),
        vm_row("2024-09-16 20:31:30"),
    ]
    (d / "vmstat.out").write_bytes(b"".join(VM_HEAD) + VM_ROWS[0] + b"".join(rows))

    def cap_memory() -> None:  # never let the failure take the CI machine down with it
        resource.setrlimit(resource.RLIMIT_AS, (12 << 30, 12 << 30))  # address space, not RSS

    cmd = [
        sys.executable,
        "-m",
        "analyzer",
        "analyze",
        str(d),
        "-q",
        "-o",
        str(tmp_path / "r.html"),
    ]
    try:
        r = subprocess.run(
            cmd, capture_output=True, timeout=120, preexec_fn=cap_memory, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("analyze did not finish within 120 s (the signals grid must stay bounded)")
    assert r.returncode == 0, r.stderr[-500:]
