"""Run the real capture script (capture/hindsight-capture.sh) and check its bundle.

Each run lasts a few seconds (-d 3 -i 1). The script runs in its own session so
that the tests can check that nothing it started survives it.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from capture_helpers import (
    BPF_DIR,
    SCRIPT,
    SYSSTAT_TOOLS,
    bundle_dir,
    check_manifest,
    extract_tarball,
    have_shell,
    kill_session,
    load_manifest,
    restricted_path,
    run_capture,
    session_processes,
    start_capture,
    timestamps,
    wait_for,
)

SERIES_WITH_TIME = (
    "vmstat",
    "iostat",
    "iostat_json",
    "mpstat",
    "mpstat_irq",
    "sar",
    "pidstat",
    "psi",
    "cgroup",
    "meminfo",
    "proc_vmstat",
    "infiniband",
    "dmesg",
)
# may be empty in a few seconds: no new kernel message, no target cgroup
MAY_BE_EMPTY = {"dmesg"}


def _light_load(tmp: Path) -> list[subprocess.Popen]:
    """A CPU spinner and a small writer, both nice'd and time-limited."""
    spin = subprocess.Popen(
        ["timeout", "8", "nice", "-n", "10", "sh", "-c", "while :; do :; done"],
        start_new_session=True,
    )
    write = subprocess.Popen(
        [
            "timeout",
            "8",
            "sh",
            "-c",
            f"while :; do dd if=/dev/zero of={tmp}/load bs=64k count=64 conv=fsync 2>/dev/null; sleep 0.3; done",
        ],
        start_new_session=True,
    )
    return [spin, write]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)


def _assert_series_in_window(m: dict, bdir: Path, by_name: dict[str, dict]) -> None:
    lo = m["clock"]["start_epoch_s"] - 2
    hi = m["clock"]["end_epoch_s"] + 2
    for name in SERIES_WITH_TIME:
        c = by_name[name]
        if c["status"] != "ok":
            assert c["status"] in {"missing", "skipped"}, c
            continue
        path = bdir / c["output"]
        if name in MAY_BE_EMPTY and path.stat().st_size == 0:
            continue
        assert path.stat().st_size > 0, c
        ts = timestamps(c["tool"], path)
        assert ts, f"no timestamps in {c['output']}"
        outside = [t for t in ts if not lo <= t <= hi]
        assert not outside, f"{name}: {outside[:3]} outside [{lo}, {hi}]"


# ------------------------------------------------------------------ static checks
def test_shellcheck_passes_for_posix_sh() -> None:
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    r = subprocess.run(
        ["shellcheck", "-s", "sh", str(SCRIPT)], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout


def test_embedded_bpftrace_programs_match_the_bt_files() -> None:
    text = SCRIPT.read_text()
    for var, name in (
        ("RUNQLAT_BT", "runqlat.bt"),
        ("BIOLAT_BT", "biolat.bt"),
        ("STACKS_BT", "stacks.bt"),
    ):
        start = text.index(f"{var}='") + len(var) + 2
        end = text.index("'", start)
        embedded = text[start:end]
        on_disk = (BPF_DIR / name).read_text().rstrip("\n")
        assert embedded == on_disk, f"{name} differs from the copy inside the script"


def test_help_exits_zero_and_bad_argument_exits_nonzero(tmp_path: Path) -> None:
    r = subprocess.run(["sh", str(SCRIPT), "-h"], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "Usage:" in r.stdout
    r = subprocess.run(
        ["sh", str(SCRIPT), "--bogus", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode != 0 and "unknown argument" in r.stderr
    assert not list(tmp_path.iterdir()), "a bad command line must not create a bundle"
    r = subprocess.run(
        ["sh", str(SCRIPT), "--irq-interval", "0", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode != 0 and "--irq-interval" in r.stderr
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ full runs
SHELLS = ["dash", "bash", "busybox sh"]


@pytest.mark.capture
@pytest.mark.parametrize("shell", SHELLS)
def test_capture_under_light_load_yields_complete_bundle(tmp_path: Path, shell: str) -> None:
    if not have_shell(shell):
        pytest.skip(f"{shell} not installed")
    out = tmp_path / "out"
    load = _light_load(tmp_path)
    try:
        r = run_capture(out, "-d", "3", "-i", "1", "--pid", str(load[0].pid), shell=shell)
    finally:
        _stop(load)
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(out)
    assert r.stdout.strip() == str(out / (bdir.name + ".tgz"))
    m = load_manifest(bdir)
    by_name = check_manifest(m, bdir)
    assert m["complete"] and not m["interrupted"] and m["stop_reason"] == "duration"
    assert m["targets"]["pids"] == [str(load[0].pid)] or m["targets"]["pids"] == [load[0].pid]
    for tool in SYSSTAT_TOOLS:
        if shutil.which(tool):
            assert by_name[tool]["status"] == "ok", by_name[tool]
    for name in ("psi", "meminfo", "proc_vmstat"):
        assert by_name[name]["status"] == "ok", by_name[name]
    for snap in ("clock.start", "clock.end", "uname.start", "sysctl.start", "df.start", "df.end"):
        assert by_name[snap]["status"] == "ok", by_name[snap]
    if not shutil.which("nvidia-smi"):
        assert by_name["nvidia_dmon"]["status"] == "missing"
        assert "nvidia-smi" in by_name["nvidia_dmon"]["reason"]
    # the JSON twin of iostat is opt-in; mpstat -I runs at the IRQ interval (<= -d 3)
    assert m["options"]["iostat_json"] is False and m["options"]["irq_interval_s"] == 3
    ij = by_name["iostat_json"]
    assert (ij["status"], ij["reason"], ij["output"]) == (
        "skipped",
        "off by default (--iostat-json)",
        None,
    )
    assert not (bdir / "series" / "iostat_json.out").exists()
    if shutil.which("mpstat"):
        assert by_name["mpstat_irq"]["command"].endswith(" 3 1"), by_name["mpstat_irq"]
    _assert_series_in_window(m, bdir, by_name)
    # every .err/.status file belongs to a collector listed in the manifest
    outputs = {c["output"] for c in m["collectors"] if c["output"]}
    for f in list((bdir / "series").iterdir()) + list((bdir / "snap").glob("*.*")):
        if f.is_file() and f.suffix in {".err", ".status"}:
            assert str(f.relative_to(bdir).with_suffix(".out")) in outputs, f
    assert not (bdir / ".state").exists()
    # the tarball holds the same bundle
    x = extract_tarball(out, tmp_path / "x")
    assert load_manifest(x) == m
    assert "summary" in (bdir / "capture.log").read_text()


@pytest.mark.capture
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_capture_yields_tarball_and_stops_everything(tmp_path: Path, sig) -> None:
    out = tmp_path / "out"
    p = start_capture(out, "-d", "60", "-i", "1")
    sid = p.pid  # start_new_session: the script leads its own session and group
    try:
        assert wait_for(
            lambda: (
                any(out.glob("hindsight-*/series/vmstat.out"))
                and any(out.glob("hindsight-*/snap/df.start.status"))
            ),
            timeout=20,
        ), "capture did not start"
        time.sleep(1.5)
        os.killpg(sid, sig)  # like Ctrl-C in a terminal: the whole foreground group
        p.wait(timeout=40)
    finally:
        if p.poll() is None:
            kill_session(sid)
    assert p.returncode == 128 + sig
    assert wait_for(lambda: not session_processes(sid), timeout=10), session_processes(sid)
    x = extract_tarball(out, tmp_path / "x")
    m = load_manifest(x)
    by_name = check_manifest(m, x)
    assert m["complete"] and m["interrupted"] and m["stop_reason"] == "interrupted"
    assert by_name["meminfo"]["status"] == "ok" and by_name["meminfo"]["bytes"] > 0
    if shutil.which("vmstat"):
        assert by_name["vmstat"]["status"] == "ok", by_name["vmstat"]
    assert m["clock"]["end_epoch_s"] - m["clock"]["start_epoch_s"] < 40


@pytest.mark.capture
def test_sigkill_leaves_a_directory_the_analyzer_loads(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = start_capture(out, "-d", "40", "-i", "1")
    sid = p.pid
    try:
        assert wait_for(lambda: any(out.glob("hindsight-*/snap/df.start.status")), timeout=20)
        time.sleep(2)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        bdir = bundle_dir(out)
        m = load_manifest(bdir)
        by_name = check_manifest(m, bdir)
        assert not m["complete"]
        assert by_name["meminfo"]["status"] == "running"
        assert (bdir / "series" / "meminfo.out").stat().st_size > 0
        # the samplers notice that the script is gone and end by themselves
        assert wait_for(lambda: (bdir / "series" / "meminfo.status").exists(), timeout=10)
    finally:
        kill_session(sid)
    analyze = shutil.which("analyze") or (
        str(Path(sys.executable).parent / "analyze")
        if (Path(sys.executable).parent / "analyze").exists()
        else None
    )
    if analyze is None:
        pytest.skip("the analyze CLI is not available yet; the directory checks above passed")
    r = subprocess.run(
        [
            analyze,
            str(bdir),
            "-q",
            "-o",
            str(tmp_path / "report.html"),
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode in (0, 3), r.stderr
    assert (tmp_path / "report.html").stat().st_size > 0


@pytest.mark.capture
def test_without_sysstat_and_nvidia_smi_as_nobody_still_yields_bundle() -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run the script as nobody")
    tmp = Path(tempfile.mkdtemp(prefix="hs-nobody-", dir="/tmp"))
    try:
        os.chmod(tmp, 0o777)
        drop = {"iostat", "mpstat", "sar", "pidstat", "sadc", "sadf", "nvidia-smi", "bpftrace"}
        path = restricted_path(tmp, drop)
        out = tmp / "out"
        out.mkdir()
        os.chmod(out, stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO)
        env = {"PATH": path, "HOME": "/", "LANG": "de_DE.UTF-8"}
        pre = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        r = run_capture(out, "-d", "3", "-i", "1", shell="sh", env=env, preexec=pre)
        assert r.returncode == 0, r.stderr
        bdir = bundle_dir(out)
        m = load_manifest(bdir)
        by_name = check_manifest(m, bdir)
        assert m["user"]["root"] is False and m["user"]["uid"] != 0
        for name in (
            "iostat",
            "mpstat",
            "mpstat_irq",
            "sar",
            "pidstat",
            "nvidia_dmon",
        ):
            assert by_name[name]["status"] == "missing", by_name[name]
            assert "command not found" in by_name[name]["reason"]
        assert by_name["iostat_json"]["status"] == "skipped"  # off unless --iostat-json
        assert by_name["bpf_runqlat"]["status"] in {"missing", "skipped"}
        assert by_name["meminfo"]["status"] == "ok" and by_name["psi"]["status"] == "ok"
        assert "missing" in r.stderr and "iostat" in r.stderr  # says what it skipped
        _assert_series_in_window(m, bdir, by_name)
        assert (out / (bdir.name + ".tgz")).is_file()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.capture
def test_iostat_json_and_irq_interval_options_are_honoured(tmp_path: Path) -> None:
    if not (shutil.which("iostat") and shutil.which("mpstat")):
        pytest.skip("needs sysstat (iostat, mpstat)")
    out = tmp_path / "out"
    r = run_capture(
        out, "-d", "4", "-i", "1", "--iostat-json", "--irq-interval=2", "--no-gpu", "--no-bpf"
    )
    assert r.returncode == 0, r.stderr
    bdir = bundle_dir(out)
    m = load_manifest(bdir)
    by_name = check_manifest(m, bdir)
    assert m["options"]["iostat_json"] is True and m["options"]["irq_interval_s"] == 2
    assert "--iostat-json" in m["args"]
    irq = by_name["mpstat_irq"]
    assert irq["status"] == "ok" and irq["command"].endswith(" 2 2"), irq
    ts = sorted(set(timestamps("mpstat_irq", bdir / irq["output"])))  # headers: previous time
    assert len(ts) == 3 and {round(b - a) for a, b in itertools.pairwise(ts)} == {2}, ts
    ij = by_name["iostat_json"]
    if ij["status"] == "ok":
        assert timestamps("iostat_json", bdir / ij["output"])
    else:  # sysstat < 11.5 has no JSON
        assert ij["status"] == "skipped" and "11.5" in ij["reason"], ij


@pytest.mark.capture
def test_hanging_nvidia_smi_is_timed_out_and_killed(tmp_path: Path) -> None:
    fake = tmp_path / "fakebin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\ntrap '' TERM\nsleep 300\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", HINDSIGHT_CMD_TIMEOUT="2")
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = subprocess.Popen(
        ["sh", str(SCRIPT), "-o", str(out), "-d", "2", "-i", "1"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            kill_session(p.pid)
    assert time.monotonic() - t0 < 45
    assert p.returncode == 0
    assert wait_for(lambda: not session_processes(p.pid), timeout=10), session_processes(p.pid)
    bdir = bundle_dir(out)
    by_name = check_manifest(load_manifest(bdir), bdir)
    assert by_name["nvidia_list.start"]["status"] == "timeout"
    assert by_name["nvidia_dmon"]["status"] in {"failed", "skipped", "timeout"}


@pytest.mark.capture
def test_hostile_arguments_still_give_valid_json(tmp_path: Path) -> None:
    weird = b'/no/such/"cg"\\\x01\ttab\xff\xfe\xc3\xa9'
    out = tmp_path / "out"
    r = run_capture(out, "-d", "1", "--cgroup", weird, "--no-gpu", "--no-bpf")  # type: ignore[arg-type]
    assert r.returncode == 0, r.stderr
    raw = (bundle_dir(out) / "manifest.json").read_bytes()
    m = json.loads(raw.decode("utf-8"))  # strict UTF-8 and strict JSON
    check_manifest(m)
    arg = m["args"][-3]
    assert arg.startswith('/no/such/"cg"\\\x01') and arg.endswith("\ufffd\ufffdé")


@pytest.mark.capture
def test_free_space_floor_stops_before_collecting(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run_capture(out, "-d", "30", "--min-free-mb", str(10**9))
    assert r.returncode == 0, r.stderr
    assert "free" in r.stderr
    bdir = bundle_dir(out)
    m = load_manifest(bdir)
    check_manifest(m, bdir)
    assert m["complete"] and m["stop_reason"] == "disk_floor"


@pytest.mark.capture
def test_max_mb_stops_collecting_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = run_capture(out, "-d", "30", "--max-mb", "0", "--no-gpu", "--no-bpf")
    assert r.returncode == 0, r.stderr
    assert "--max-mb" in r.stderr
    m = load_manifest(bundle_dir(out))
    check_manifest(m)
    assert m["stop_reason"] == "max_mb"
    assert m["clock"]["end_epoch_s"] - m["clock"]["start_epoch_s"] < 20


@pytest.mark.capture
def test_pidstat_sees_a_process_that_started_after_the_capture(tmp_path: Path) -> None:
    """pidstat follows every active task, not the PIDs of the start: a busy loop started
    two seconds in (with a forked child) is in pidstat.out under both PIDs."""
    if not shutil.which("pidstat"):
        pytest.skip("needs sysstat (pidstat)")
    out = tmp_path / "out"
    cap = start_capture(out, "-d", "7", "-i", "1", "--no-gpu", "--no-bpf")
    time.sleep(2.5)
    loop = "sh -c 'while :; do :; done' & while :; do :; done"
    busy = subprocess.Popen(["sh", "-c", loop], start_new_session=True)
    time.sleep(3)
    child = subprocess.run(
        ["pgrep", "-P", str(busy.pid)], capture_output=True, text=True
    ).stdout.split()
    os.killpg(busy.pid, signal.SIGKILL)
    busy.wait()
    assert cap.wait(timeout=90) == 0
    bdir = bundle_dir(out)
    pidstat = check_manifest(load_manifest(bdir), bdir)["pidstat"]
    assert pidstat["status"] == "ok" and " -p " not in pidstat["command"], pidstat
    rows = [ln.split() for ln in (bdir / pidstat["output"]).read_text().splitlines()]
    pids = {r[2] for r in rows if len(r) > 8 and r[0].isdigit() and float(r[7]) >= 50}
    assert str(busy.pid) in pids and child and child[0] in pids, (busy.pid, child, pids)


@pytest.mark.capture
def test_on_a_terminal_a_countdown_shows_and_each_step_is_said_once(tmp_path: Path) -> None:
    """Issue #23: `capture -d N` on a TTY showed no countdown and said 'taking end
    snapshots' twice. Run under a pseudo-terminal (util-linux `script`)."""
    if not shutil.which("script"):
        pytest.skip("needs script (util-linux) for a pseudo-terminal")
    out = tmp_path / "out"
    cmd = f"sh {SCRIPT} -d 4 -i 1 --no-bpf --no-gpu -o {out}"
    r = subprocess.run(
        ["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout[-2000:]
    text = r.stdout.replace("\r", "\n")
    assert "capturing, 3 s left" in text or "capturing, 4 s left" in text, text[-2000:]
    assert text.count("taking end snapshots") == 1, text[-2000:]
    log = (bundle_dir(out) / "capture.log").read_text()
    assert "s left" not in log
