"""`analyze` end to end through the real CLI: a hand-made directory of renamed corpus
files, hostile bundles, exit codes, the DuckDB file and the report."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import duckdb
import pytest

FIX = Path(__file__).parent / "fixtures"


def analyze(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "analyze", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def hand_made(tmp_path: Path) -> Path:
    """Renamed real outputs: names say nothing about the tool."""
    d = tmp_path / "hand-made"
    d.mkdir()
    shutil.copy(FIX / "vmstat/jc__centos-7.7__vmstat-awt.out", d / "first.txt")
    shutil.copy(FIX / "psi/local-kernel6.18__host-loaded__cpu", d / "cpu")
    shutil.copy(
        FIX / "dmesg/local-debian12-utillinux2.38.1-kernel6.18__memcg-oom__dmesg-iso.txt",
        d / "kern.log",
    )
    with open(d / "kern.log", "a") as f:
        f.write(
            "2026-11-29T17:26:00,000000+00:00 INFO: task <script>alert(1)</script>:4242 blocked for more than 120 seconds.\n"
        )
    return d


def test_hand_made_directory_of_renamed_files_loads_every_tool(
    hand_made: Path, tmp_path: Path
) -> None:
    db, report, js = tmp_path / "out.duckdb", tmp_path / "out.html", tmp_path / "out.json"
    run = analyze(hand_made, "-o", report, "--db", db, "--json", js, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "report" in run.stdout and str(report) in run.stdout
    # DuckDB 1.0's storage format (header: 8 checksum bytes, "DUCK", version 64), which
    # DuckDB 1.x clients open; a newer one they refuse (issue #23)
    head = db.read_bytes()[:20]
    assert head[8:12] == b"DUCK" and int.from_bytes(head[12:20], "little") == 64
    con = duckdb.connect(str(db), read_only=True)
    tools = dict(con.sql("SELECT file, tool FROM collectors").fetchall())
    assert tools == {"first.txt": "vmstat", "cpu": "psi", "kern.log": "dmesg"}
    # vmstat -awt golden values (jc's expected output for the same file).
    r, free_kb, active_kb, id_pct = con.sql(
        "SELECT r, free_kb, active_kb, id_pct FROM vmstat"
    ).fetchall()[0]
    assert (r, free_kb, active_kb, id_pct) == (2, 2794864, 312724, 99)
    # PSI: resource from the file name, values read by hand from the file.
    rows = con.sql(
        "SELECT resource, kind, avg10_pct, total_us FROM psi ORDER BY kind DESC"
    ).fetchall()
    assert rows[0][:2] == ("cpu", "some") and rows[0][3] == 51509091
    # The memcg OOM kill from the 6.18 capture, read by hand.
    kill = con.sql(
        "SELECT pid, comm, memcg, anon_rss_kb FROM dmesg WHERE kind = 'oom_kill'"
    ).fetchall()
    assert kill == [(24288, "python3", "/corpus_oom", 65280)]
    cov = con.sql("SELECT sum(lines_parsed), sum(lines_skipped) FROM collectors").fetchall()[0]
    assert cov[0] > 80 and cov[1] == 0
    html = report.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in html
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=\s*["']?https?://""", html)
    assert json.loads(js.read_text())["schema_version"] == 1


def test_hostile_tar_member_is_refused_listed_and_strict_fails(tmp_path: Path) -> None:
    archive = tmp_path / "evil.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = (FIX / "vmstat/jc__centos-7.7__vmstat-awt.out").read_bytes()
        for name in ("b/vmstat.out", "../escape.txt", "/tmp/hindsight-absolute-sentinel"):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("b/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    work = tmp_path / "work"
    work.mkdir()
    run = analyze(archive, "-o", work / "r.html", cwd=work)
    assert run.returncode == 0, run.stderr
    assert "refused ../escape.txt: path traversal" in run.stderr
    assert "refused b/link" in run.stderr
    assert not (tmp_path / "escape.txt").exists()
    assert not Path("/tmp/hindsight-absolute-sentinel").exists()
    strict = analyze(archive, "-o", work / "s.html", "--strict", cwd=work)
    assert strict.returncode == 2
    assert strict.stderr.count("\n") == 1 and "Traceback" not in strict.stderr


@pytest.mark.parametrize("content", [b"", b"\x00garbage" * 100, b"\x1f\x8b\x08\x00" + b"\x00" * 50])
def test_not_a_bundle_exits_2_with_one_line(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(content)
    run = analyze(bad, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("hindsight: error: ") and run.stderr.count("\n") == 1
    assert not list(tmp_path.glob("*.html"))


def test_a_directory_without_any_tool_output_exits_2_naming_what_it_found(
    tmp_path: Path,
) -> None:
    """Issue #23: the demo's companion folder (a script and a workload, no tool output)
    is unusable input: exit 2, one line naming its files, no report written."""
    companion = Path(__file__).resolve().parents[1] / "samples" / "gpu-capture"
    run = analyze(companion, "-o", tmp_path / "r.html", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "no tool output recognised" in run.stderr
    assert "run-on-gpu.sh" in run.stderr and "workload.py" in run.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("magic", "hint"),
    [
        (b"\x28\xb5\x2f\xfd" + b"\x00" * 60, "zstd -d"),
        (b"\x96\xd5\x75\x21\x0c\x06\x01\x00" + b"\x00" * 60, "sadf -j"),
    ],
)
def test_a_zstd_archive_or_a_binary_sa_file_says_what_to_do(
    tmp_path: Path, magic: bytes, hint: str
) -> None:
    """Issue #23: formats users hand over that are not bundles say how to convert them."""
    bad = tmp_path / "input"
    bad.write_bytes(magic)
    run = analyze(bad, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and hint in run.stderr, run.stderr


def test_missing_bundle_path_exits_2(tmp_path: Path) -> None:
    run = analyze(tmp_path / "nope.tgz", cwd=tmp_path)
    assert run.returncode == 2 and "no such file" in run.stderr


def test_default_report_path_is_bundle_name_in_cwd(hand_made: Path, tmp_path: Path) -> None:
    run = analyze(hand_made, "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert (tmp_path / "hand-made.report.html").is_file()


def test_fail_on_exits_3_when_a_finding_reaches_the_severity(tmp_path: Path) -> None:
    """The real H200 sample has major findings (checkpoint stalls) and none critical."""
    sample = Path(__file__).resolve().parent.parent / "samples" / "h200-checkpoint-stall.tgz"
    major = analyze(sample, "-q", "-o", tmp_path / "a.html", "--fail-on", "major", cwd=tmp_path)
    assert major.returncode == 3, major.stderr
    critical = analyze(
        sample, "-q", "-o", tmp_path / "b.html", "--fail-on", "critical", cwd=tmp_path
    )
    assert critical.returncode == 0, critical.stderr
