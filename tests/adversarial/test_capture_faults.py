"""The capture side under faults, each followed by the real `analyze` on what it left:

- one collector (vmstat) SIGKILLed mid-write while a fake `nvidia-smi` hangs;
- the output filesystem fills up (a 3 MiB tmpfs, root only);
- a run as `nobody` (covered for the bundle in tests/capture; here: analyze reads it).

Each must leave a bundle that `analyze` reads (exit 0) with the failure visible in the
manifest and in the collectors table. The real script runs in its own session; only the
processes of that session are ever signalled."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hostile import REPO, analyze

sys.path.insert(0, str(REPO / "tests" / "capture"))
from capture_helpers import (
    SCRIPT,
    bundle_dir,
    kill_session,
    session_processes,
    wait_for,
)

pytestmark = pytest.mark.capture
QUICK = ["-d", "5", "-i", "1", "--no-bpf"]


def manifest(bdir: Path) -> dict:
    return json.loads((bdir / "manifest.json").read_text(encoding="utf-8"))


def collectors(bdir: Path) -> dict[str, dict]:
    return {c["name"]: c for c in manifest(bdir)["collectors"]}


@pytest.fixture(scope="module")
def killed_collector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture whose vmstat collector gets SIGKILL mid-write and whose nvidia-smi hangs."""
    tmp = tmp_path_factory.mktemp("killed")
    fake = tmp / "fakebin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\ntrap '' TERM\nsleep 300\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", HINDSIGHT_CMD_TIMEOUT="2")
    out = tmp / "out"
    p = subprocess.Popen(
        ["sh", str(SCRIPT), "-o", str(out), *QUICK],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        vmstat = lambda: [pid for pid, _, comm in session_processes(p.pid) if comm == "vmstat"]  # noqa: E731
        assert wait_for(lambda: bool(vmstat()) and any(out.glob("*/series/vmstat.out")), 20)
        assert wait_for(lambda: next(out.glob("*/series/vmstat.out")).stat().st_size > 300, 10)
        for pid in vmstat():  # only the collector of this capture's own session
            os.kill(pid, signal.SIGKILL)
        p.wait(timeout=90)
    finally:
        kill_session(p.pid)
    assert p.returncode == 0
    return bundle_dir(out)


def test_sigkilled_collector_leaves_a_bundle_analyze_reads(
    killed_collector: Path, tmp_path: Path
) -> None:
    tgz = killed_collector.with_name(killed_collector.name + ".tgz")
    outcome = analyze(tgz, tmp_path / "out")
    outcome.assert_ok()
    rows = {r.get("collector"): r for r in outcome.rows}
    assert rows["vmstat"]["exit_code"] == 137  # the kill is visible in coverage
    assert rows["vmstat"]["status"] in {"parsed", "partial"}  # what it wrote before dying
    assert rows["nvidia_list.start"]["manifest_status"] == "timeout"


def test_sigkilled_collector_is_recorded_as_failed_in_the_manifest(killed_collector: Path) -> None:
    m = manifest(killed_collector)
    vm = collectors(killed_collector)["vmstat"]
    assert m["complete"] is True and m["stop_reason"] == "duration"
    assert vm["exit_code"] == 137
    assert vm["status"] == "failed", vm
    assert vm["reason"] == "killed by signal 9 before the capture stopped", vm
    assert collectors(killed_collector)["meminfo"]["status"] == "ok"  # the others ran on


def test_collectors_ended_by_the_capture_itself_stay_ok(killed_collector: Path) -> None:
    """dmesg -W runs until the capture stops it: SIGTERM (143) is not a failure."""
    dm = collectors(killed_collector)["dmesg"]
    assert (dm["status"], dm["exit_code"], dm["reason"]) == ("ok", 143, "stopped by the capture")


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture into a 3 MiB tmpfs with ~370 KiB left: collectors hit ENOSPC."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path_factory.mktemp("tmpfs")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    keep = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    try:
        with open(mnt / "fill", "wb") as f:
            f.write(b"\0" * (2700 << 10))
        args = ["sh", str(SCRIPT), "-o", str(mnt / "out"), *QUICK, "--no-gpu", "--min-free-mb", "0"]
        p = subprocess.run(
            args, capture_output=True, timeout=120, start_new_session=True, check=False
        )
        assert p.returncode == 0, p.stderr[-2000:]
        shutil.copytree(bundle_dir(mnt / "out"), keep / "bundle", symlinks=True)
        for tgz in (mnt / "out").glob("*.tgz"):
            shutil.copy(tgz, keep / "bundle.tgz")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    return keep


def test_full_disk_still_leaves_a_bundle_analyze_reads(disk_full: Path, tmp_path: Path) -> None:
    """The tarball when the script managed to write one, else its directory."""
    tgz = disk_full / "bundle.tgz"
    outcome = analyze(tgz if tgz.exists() else disk_full / "bundle", tmp_path)
    outcome.assert_ok()
    assert "not final (complete: false)" not in (outcome.doc["bundle"]["notes"] or "")
    assert any(r["status"] in {"parsed", "partial"} for r in outcome.rows)


def test_full_disk_is_recorded_in_the_manifest(disk_full: Path) -> None:
    bdir = disk_full / "bundle"
    m = manifest(bdir)
    assert m["complete"] is True and m["stop_reason"] in {"disk_full", "disk_floor"}, m
    assert not list(bdir.rglob("*.tmp")) and not (bdir / ".state").exists()
    by_name = collectors(bdir)
    # every series collector has its real exit status (the reserve made room for them)
    for c in by_name.values():
        if c["kind"] == "series" and c["output"]:
            assert c["status"] in {"ok", "failed", "timeout"} and c["exit_code"] is not None, c
            assert (bdir / c["output"].replace(".out", ".status")).read_text().startswith("rc=")
    # what could not run says why; nothing is left out of the manifest
    assert "the output filesystem is full" in (bdir / "capture.log").read_text()
    assert {"vmstat", "mpstat", "meminfo", "clock.start", "clock.end"} <= set(by_name)


def test_capture_as_nobody_gives_a_bundle_analyze_reads(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run the script as nobody")
    tmp = Path(tempfile.mkdtemp(prefix="hs-nobody-", dir="/tmp"))
    try:
        os.chmod(tmp, 0o777)
        pre = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        env = {"PATH": os.environ["PATH"], "HOME": "/", "LANG": "C"}
        args = [*pre, "sh", str(SCRIPT), "-o", str(tmp / "out"), *QUICK, "--no-gpu"]
        t0 = time.monotonic()
        r = subprocess.run(
            args, capture_output=True, env=env, timeout=120, start_new_session=True, check=False
        )
        assert r.returncode == 0, r.stderr[-2000:]
        bdir = bundle_dir(tmp / "out")
        assert manifest(bdir)["user"]["root"] is False
        outcome = analyze(bdir.with_name(bdir.name + ".tgz"), tmp_path_factory.mktemp("nobody"))
        outcome.assert_ok()
        assert outcome.by_file()["series/vmstat.out"]["status"] in {"parsed", "partial"}
        assert time.monotonic() - t0 < 100
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
