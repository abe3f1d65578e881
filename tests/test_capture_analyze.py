"""A real capture on this machine, analysed: every file is recognised and parsed, and
the time series land inside the capture window."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "capture" / "hindsight-capture.sh"


@pytest.mark.capture
def test_real_capture_has_no_unrecognised_or_pending_file(tmp_path: Path) -> None:
    # Its own session, so the whole group (timeout and the shell under it) can be ended.
    load = subprocess.Popen(
        ["timeout", "6", "sh", "-c", "while :; do :; done"], start_new_session=True
    )
    try:
        cap = subprocess.run(
            ["sh", str(SCRIPT), "-d", "3", "-i", "1", "--no-bpf", "-o", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HINDSIGHT_CMD_TIMEOUT": "20"},
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(load.pid, signal.SIGKILL)
        load.wait()
    assert cap.returncode == 0, cap.stderr
    bundle = Path(cap.stdout.strip())
    db = tmp_path / "capture.duckdb"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "analyzer",
            "analyze",
            str(bundle),
            "-q",
            "--db",
            str(db),
            "-o",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    con = duckdb.connect(str(db), read_only=True)
    bad = con.sql(
        "SELECT file, tool, status, reason FROM collectors "
        "WHERE status IN ('unrecognised', 'parser pending', 'failed') "
        "OR (status = 'partial' AND parsed_pct < 99)"
    ).fetchall()
    assert bad == [], bad
    start, end = con.sql("SELECT start_utc, end_utc FROM bundle").fetchall()[0]
    assert start is not None and end is not None
    for table in ("vmstat", "mpstat_cpu", "iostat_device", "psi", "proc_vmstat", "meminfo"):
        n, lo, hi = con.sql(
            f"SELECT count(*), min(ts), max(ts) FROM {table} WHERE ts IS NOT NULL"
        ).fetchall()[0]
        assert n > 0, table
        assert (lo - start).total_seconds() >= -2 and (end - hi).total_seconds() >= -2, (
            table,
            lo,
            hi,
        )
    assert (
        con.sql("SELECT count(*) FROM host_config WHERE key = 'vm.swappiness'").fetchall()[0][0]
        >= 1
    )


@pytest.mark.capture
def test_a_culprit_started_during_the_capture_with_forked_workers_is_named(
    tmp_path: Path,
) -> None:
    """Issue #19: four busy workers forked by one shell, started 4 s into a 20 s capture
    on this machine (2 vCPUs: tasks queue), are the contention finding's "who", with
    their shares added, though they did not exist when the capture began."""
    workers = "for i in 1 2 3 4; do (while :; do :; done) & done; wait"
    cg = _cpu_cgroup(f"hs-test-culprit-{os.getpid()}")  # the culprit's own cgroup
    if cg is not None:
        workers = f'echo $$ > "{cg}/cgroup.procs" && {workers}'
    cap = subprocess.Popen(
        [
            "sh",
            str(SCRIPT),
            "-d",
            "20",
            "-i",
            "1",
            "--no-bpf",
            "--no-gpu",
            "-o",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    time.sleep(4)
    load = subprocess.Popen(["sh", "-c", workers], start_new_session=True)
    try:
        time.sleep(12)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(load.pid, signal.SIGKILL)
        load.wait()
    out, _ = cap.communicate(timeout=120)
    assert cap.returncode == 0
    from analyzer import pipeline

    found = pipeline.run(Path(out.strip()), pipeline.Options(report=None)).findings
    busy = [f for f in found if f["kind"] == "cpu_contention" and f["impact"].get("who")]
    assert busy, [(f["key"], f["summary"]) for f in found]
    who = {g["command"]: g for f in busy for g in f["impact"]["who"]}
    # their share depends on the other load of the machine: at least a quarter of it
    assert "sh" in who and who["sh"]["processes"] >= 3 and who["sh"]["share"] >= 50, who
    if cg is not None:  # named with the cgroup it ran in (proc_cgroup sampler)
        cg.rmdir()
        assert who["sh"]["cgroup"] == f"/{cg.name}", who
        assert who["sh"]["where"] == f"cgroup /{cg.name}", who


def _cpu_cgroup(name: str) -> Path | None:
    """A new cgroup with the cpu controller (v2, else v1 ``cpu``); None unless root."""
    if os.geteuid() != 0:
        return None
    root = Path("/sys/fs/cgroup")
    base = root if (root / "cgroup.controllers").is_file() else root / "cpu"
    try:
        (base / name).mkdir()
    except OSError:
        return None
    return base / name
