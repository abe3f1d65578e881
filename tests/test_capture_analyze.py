"""A real capture on this machine, analysed: every file is recognised and parsed, and
the time series land inside the capture window."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
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
