"""Data from before the page: the capture converts the host's own sysstat daily files
(``sa*``, written by sadc) with ``sadf -j`` and the analyzer places them before the
capture window, marked as history."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from capture_helpers import bundle_dir, check_manifest, load_manifest, run_capture

pytestmark = pytest.mark.capture
# a daily file of another day of the month than today (on the 2nd, "sa02" is today's)
STALE = f"sa{int(time.strftime('%d')) % 28 + 1:02d}"

SADC = next(
    (
        p
        for p in ("/usr/lib/sysstat/sadc", "/usr/lib64/sa/sadc", "/usr/libexec/sysstat/sadc")
        if os.path.exists(p)
    ),
    None,
)


def _records(path: Path) -> list[str]:
    doc = json.loads(path.read_text())  # valid JSON, cut or not
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    return [f"{s['timestamp']['date']} {s['timestamp']['time']}" for s in stats]


@pytest.fixture(scope="module")
def sa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if SADC is None or not shutil.which("sadf"):
        pytest.skip("needs sysstat's sadc and sadf")
    d = tmp_path_factory.mktemp("sa")
    today = d / f"sa{time.strftime('%d')}"
    subprocess.run([SADC, "-S", "XALL", "1", "4", str(today)], check=True, timeout=30)
    old = d / "sa01x"  # not a daily-file name: ignored
    old.write_bytes(today.read_bytes())
    stale = d / STALE  # a daily file not written for three days: outside the window
    stale.write_bytes(today.read_bytes())
    past = time.time() - 3 * 86400
    os.utime(stale, (past, past))
    return d


def test_sysstat_daily_file_is_converted_cut_at_the_window_and_marked_as_history(
    sa_dir: Path, tmp_path: Path
) -> None:
    today = next(p for p in sa_dir.iterdir() if p.name not in ("sa01x", STALE))
    full = subprocess.run(
        ["sadf", "-j", str(today), "--", "-q"], capture_output=True, text=True, check=True
    )
    stamps = [
        f"{s['timestamp']['date']} {s['timestamp']['time']}"
        for s in json.loads(full.stdout)["sysstat"]["hosts"][0]["statistics"]
    ]
    assert len(stamps) >= 3
    until = stamps[-1]  # pretend the capture started at the last record
    env = dict(
        os.environ,
        HINDSIGHT_SA_DIRS=f"{sa_dir} /no/such/dir {sa_dir}",
        HINDSIGHT_HISTORY_UNTIL=until.replace(" ", "T") + "Z",
    )
    out = tmp_path / "out"
    r = run_capture(out, "-d", "1", "--no-gpu", "--no-bpf", env=env)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(out)
    m = load_manifest(bdir)
    by_name = check_manifest(m, bdir)
    rel = f"history/{today.name}.out"
    assert m["history"] == {"hours": 6, "until_utc": until.replace(" ", "T") + "Z", "files": [rel]}
    c = by_name[f"history.{today.name}"]
    assert c["kind"] == "history" and c["status"] == "ok" and c["tool"] == "sadf"
    kept = _records(bdir / rel)
    assert kept == stamps[:-1], "records from the capture window on are left out"
    assert "left out" in (bdir / f"history/{today.name}.err").read_text()
    assert f"history.{STALE}" not in by_name and "history.sa01x" not in by_name

    from analyzer.pipeline import Options, run

    res = run(bdir, Options())
    row = next(c for c in res.collectors if c["file"] == rel)
    assert row["status"] == "parsed" and row["tool"] == "sadf"
    assert "history" in row["notes"] and "sar_cpu" in row["tables"]
    hist = res.bundle["history_start_utc"]
    assert hist is not None and hist < res.bundle["start_utc"]
    assert hist.strftime("%Y-%m-%d %H:%M:%S") == stamps[0]


def test_history_hours_zero_converts_nothing(sa_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ, HINDSIGHT_SA_DIRS=str(sa_dir))
    out = tmp_path / "out"
    r = run_capture(out, "-d", "1", "--no-gpu", "--no-bpf", "--history-hours", "0", env=env)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(out)
    by_name = check_manifest(load_manifest(bdir), bdir)
    assert (
        by_name["history"]["status"] == "skipped"
        and by_name["history"]["reason"] == "--history-hours 0"
    )
    assert not (bdir / "history").exists()
