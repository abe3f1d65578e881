"""The flight recorder (--ring), run for real: a 1-minute ring with a small --max-mb for
about 100 s, through several slot rotations, cutting bundles on a PSI trigger fired by a
memory load in a memory cgroup, on a dmesg trigger repeated within its cool-down, on
SIGUSR1 and on --dump, then stopped with SIGTERM.

One recorder run serves every test of this module (fixture ``run``)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest
from capture_helpers import (
    SCRIPT,
    check_manifest,
    kill_session,
    session_processes,
    timestamps,
    wait_for,
)

pytestmark = pytest.mark.capture

MAX_MB = 6
PSI_TRIGGER = "psi:memory:some:avg10>1"
DMESG_MARK = "hindsight-ring-test-mark"
DMESG_TRIGGER = f"dmesg:{DMESG_MARK}"
COOLDOWN = 12


def _disk_bytes(root: Path) -> int:
    """Allocated bytes under ``root``, bundles (*.tgz) excluded."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith((".tgz", ".tgz.part")):
                continue
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
    return total


class _Monitor(threading.Thread):
    """Samples disk use and the slot files of the ring every 0.3 s."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out, self.stop, self.max_bytes = out, threading.Event(), 0
        self.slots: set[int] = set()
        self.max_slots_per_collector = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.max_bytes = max(self.max_bytes, _disk_bytes(self.out))
            per: dict[str, int] = {}
            for p in self.out.glob("hindsight-recorder-*/series/*.[0-9]*"):
                name, _, slot = p.name.rpartition(".")
                if slot.isdigit():
                    self.slots.add(int(slot))
                    per[name] = per.get(name, 0) + 1
            self.max_slots_per_collector = max([self.max_slots_per_collector, *per.values()])
            time.sleep(0.3)


def _memory_cgroup(tmp: Path) -> Path | None:
    """A fresh memory cgroup (v2 or v1) limited to 32 MiB, or None."""
    if os.geteuid() != 0:
        return None
    for parent, limit in (
        (Path("/sys/fs/cgroup"), "memory.max"),
        (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
    ):
        if not (parent / "cgroup.procs").exists():
            continue
        if (
            limit == "memory.max"
            and "memory" not in (parent / "cgroup.subtree_control").read_text()
        ):
            continue
        cg = parent / f"hindsight-test-{os.getpid()}"
        try:
            cg.mkdir()
            (cg / limit).write_text(str(32 << 20))
            return cg
        except OSError:
            with contextlib.suppress(OSError):
                cg.rmdir()
    return None


def _memory_load(tmp: Path, cg: Path) -> list[subprocess.Popen]:
    """Three readers thrashing a 192 MiB file through the page cache of a 32 MiB cgroup."""
    big = tmp / "big"
    with open(big, "wb") as f:
        for _ in range(192):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())  # clean pages: dropped from the cache below, re-read in the cgroup
    subprocess.run(["dd", f"if={big}", "iflag=nocache", "count=0", "status=none"], check=False)
    procs = []
    for _ in range(3):
        procs.append(
            subprocess.Popen(
                [
                    "sh",
                    "-c",
                    f'echo $$ > {cg}/cgroup.procs && exec timeout 60 sh -c "while :; do cat {big} >/dev/null; done"',
                ],
                start_new_session=True,
            )
        )
    return procs


def _new_bundles(out: Path, seen: set[Path]) -> list[Path]:
    return sorted(p for p in out.glob("hindsight-*.tgz") if p not in seen)


def _cut_by(tgz: Path) -> str:
    """``source:name`` of what cut a bundle (``signal:SIGUSR1``, ``trigger:dmesg:...``)."""
    errors = (OSError, tarfile.TarError, KeyError, ValueError, TypeError, StopIteration)
    with contextlib.suppress(*errors), tarfile.open(tgz) as tf:
        name = next(n for n in tf.getnames() if n.endswith("/manifest.json"))
        trig = json.load(tf.extractfile(name))["trigger"]  # type: ignore[arg-type]
        return f"{trig['source']}:{trig['name']}"
    return ""


def _wait_bundle(out: Path, seen: set[Path], timeout: float, cut_by: str = "") -> Path | None:
    """The next new bundle; with ``cut_by``, the next one cut for that reason (the PSI
    trigger can fire again on a busy shared host: such bundles are passed over)."""
    found: list[Path] = []

    def look() -> bool:
        for p in _new_bundles(out, seen):
            if not cut_by or _cut_by(p) == cut_by:
                found.append(p)
                return True
            seen.add(p)
        return False

    wait_for(look, timeout, step=0.5)
    if found:
        seen.add(found[0])
        return found[0]
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not shutil.which("timeout"):
        pytest.skip("needs coreutils timeout")
    tmp = tmp_path_factory.mktemp("ring")
    out = tmp / "out"
    out.mkdir()
    err = open(tmp / "recorder.stderr", "wb")
    std = open(tmp / "recorder.stdout", "wb")
    args = ["--ring", "1", "-i", "1", "--max-mb", str(MAX_MB), "--no-gpu", "--no-bpf"]
    args += ["--history-hours", "0", "--cooldown", str(COOLDOWN)]
    args += ["--trigger", PSI_TRIGGER, "--trigger", DMESG_TRIGGER]
    t0 = time.monotonic()
    p = subprocess.Popen(
        ["sh", str(SCRIPT), "-o", str(out), *args],
        stdin=subprocess.DEVNULL,
        stdout=std,
        stderr=err,
        start_new_session=True,
    )
    mon = _Monitor(out)
    mon.start()
    res: dict = {"out": out, "tmp": tmp, "bundles": {}, "pid": p.pid}
    seen: set[Path] = set()
    cg = _memory_cgroup(tmp)
    load: list[subprocess.Popen] = []
    try:
        assert wait_for(lambda: any(out.glob("hindsight-recorder-*/series/vmstat.[0-9]*")), 30)
        # a second recorder in the same directory is refused
        second = subprocess.run(
            ["sh", str(SCRIPT), "-o", str(out), "--ring", "1"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        res["second"] = second
        # 1. memory pressure in a memory cgroup -> the PSI trigger
        if cg is not None:
            load = _memory_load(tmp, cg)
            res["load_start"] = time.time()
            res["bundles"]["psi"] = _wait_bundle(out, seen, 60)
            res["slots_at_first_cut"] = set(mon.slots)
            res["load_end"] = time.time()
            for q in load:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(q.pid, signal.SIGKILL)
                q.wait(timeout=10)
        # 2. a dmesg trigger three times within its cool-down -> one bundle
        if os.access("/dev/kmsg", os.W_OK) and shutil.which("dmesg"):
            wait_for(lambda: time.monotonic() - t0 > 0, 0)
            time.sleep(max(0.0, COOLDOWN + 1 - (time.time() - res.get("load_end", 0))))
            for _ in range(3):
                Path("/dev/kmsg").write_text(f"{DMESG_MARK}\n")
                time.sleep(1)
            res["bundles"]["dmesg"] = _wait_bundle(out, seen, 30, f"trigger:{DMESG_TRIGGER}")
            time.sleep(COOLDOWN)  # no second dmesg bundle
            res["extra_after_dmesg"] = [
                p for p in _new_bundles(out, seen) if _cut_by(p) == f"trigger:{DMESG_TRIGGER}"
            ]
        # 3. SIGUSR1 once the recorder has run longer than its ring
        time.sleep(max(0.0, 68 - (time.monotonic() - t0)))
        # at least one slot rotated out (6 slot numbers seen; the phase of the 15 s slots
        # against the start decides whether 68 s already span six)
        wait_for(lambda: len(mon.slots) >= 6, 20, step=0.5)
        os.kill(p.pid, signal.SIGUSR1)
        res["bundles"]["signal"] = _wait_bundle(out, seen, 40, cut_by="signal:SIGUSR1")
        # 4. --dump from another shell
        d = subprocess.run(
            ["sh", str(SCRIPT), "--dump", "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        res["dump"] = d
        if d.returncode == 0:
            seen.add(Path(d.stdout.strip()))
        res.setdefault("slots_at_first_cut", set(mon.slots))
        time.sleep(2)
        res["slots_at_stop"] = set(mon.slots)
        # 5. SIGTERM
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
        res["rc"] = p.returncode
        res["left"] = wait_for(lambda: not session_processes(p.pid), 15) or session_processes(p.pid)
    finally:
        mon.stop.set()
        mon.join(timeout=5)
        for q in load:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(q.pid, signal.SIGKILL)
        if p.poll() is None:
            kill_session(p.pid)
            p.wait(timeout=10)
        err.close()
        std.close()
        if cg is not None:
            wait_for(lambda: not cg.exists() or not (cg / "cgroup.procs").read_text().strip(), 10)
            with contextlib.suppress(OSError):
                cg.rmdir()
    res["mon"] = mon
    res["cgroup"] = cg is not None
    res["stderr"] = (tmp / "recorder.stderr").read_text(errors="replace")
    res["stdout"] = (tmp / "recorder.stdout").read_text(errors="replace")
    res["elapsed"] = time.monotonic() - t0
    (tmp / "observed.json").write_text(  # for a failing run: what the monitor saw
        json.dumps(
            {"max_bytes": mon.max_bytes, "slots": sorted(mon.slots), "elapsed": res["elapsed"]}
        )
    )
    return res


def _extract(tgz: Path, dest: Path) -> Path:
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            assert m.isfile() or m.isdir(), m.name
        tf.extractall(dest, filter="data")
    (top,) = list(dest.iterdir())
    return top


def test_disk_use_stays_under_max_mb_across_rotations(run: dict) -> None:
    mon = run["mon"]
    assert run["elapsed"] > 68  # ran longer than its 60 s ring (the SIGUSR1 waits for that)
    assert len(mon.slots) >= 6, f"only {len(mon.slots)} slots seen: too few rotations"
    assert mon.max_slots_per_collector <= 6  # RING_KEEP + 1 kept, + the one being cut over
    assert 0 < mon.max_bytes <= MAX_MB * 1024 * 1024, mon.max_bytes


def test_sigusr1_and_dump_each_cut_a_valid_bundle_of_the_last_window(run: dict) -> None:
    d = run["dump"]
    assert d.returncode == 0, d.stderr
    dumped = Path(d.stdout.strip())
    assert dumped.is_file() and dumped.name.endswith(".tgz")
    for key, tgz, source in (
        ("signal", run["bundles"]["signal"], "signal"),
        ("dump", dumped, "request"),
    ):
        assert tgz is not None, f"no bundle for {key}"
        b = _extract(tgz, run["tmp"] / f"x-{key}")
        m = json.loads((b / "manifest.json").read_text())
        by_name = check_manifest(m, b)
        assert m["complete"] and m["stop_reason"] == "dump"
        assert m["trigger"]["source"] == source
        assert m["ring"]["minutes"] == 1 and m["ring"]["segment_s"] == 15
        start, end = m["clock"]["start_epoch_s"], m["clock"]["end_epoch_s"]
        assert end - start >= 60, "the bundle covers the whole last ring window"
        assert by_name["vmstat"]["status"] == "ok"
        for name in ("vmstat", "mpstat", "psi", "meminfo"):
            c = by_name[name]
            ts = timestamps(c["tool"], b / c["output"])
            if name == "vmstat":  # its first row, kept with the header, is the since-boot summary
                ts = ts[1:]
            assert ts and min(ts) >= start - 2 and max(ts) <= end + 2, name
            assert max(ts) - min(ts) >= 50, f"{name} covers {max(ts) - min(ts):.0f} s"
        assert (b / "snap" / "uname.start.out").is_file() and (b / "snap" / "df.end.out").is_file()


def test_dumped_bundle_analyses_with_every_series_parsed(run: dict) -> None:
    from analyzer.pipeline import Options
    from analyzer.pipeline import run as analyse

    b = run["tmp"] / "x-signal"
    b = next(b.iterdir()) if b.exists() else _extract(run["bundles"]["signal"], b)
    r = analyse(b, Options())
    statuses = {
        c["file"]: c["status"]
        for c in r.collectors
        if c.get("file", "")
        and str(c["file"]).startswith("series/")
        and str(c["file"]).endswith(".out")
    }
    for f in (
        "series/vmstat.out",
        "series/mpstat.out",
        "series/iostat.out",
        "series/sar.out",
        "series/meminfo.out",
    ):
        assert statuses.get(f) == "parsed", (f, statuses.get(f))
    assert r.bundle["trigger"] == "SIGUSR1" and r.bundle["trigger_utc"] is not None


def test_psi_trigger_from_memory_load_cuts_a_bundle_naming_it(run: dict) -> None:
    if not run["cgroup"]:
        pytest.skip("no memory cgroup could be created (needs root and a memory controller)")
    tgz = run["bundles"]["psi"]
    assert tgz is not None, "the PSI trigger did not cut a bundle: " + run["stderr"][-2000:]
    m = json.loads((_extract(tgz, run["tmp"] / "x-psi") / "manifest.json").read_text())
    t = m["trigger"]
    assert t["source"] == "trigger" and t["name"] == PSI_TRIGGER
    assert run["load_start"] - 2 <= t["epoch_s"] <= run["load_end"] + 2
    assert re.match(r"memory some avg10=\d", t["value"])
    assert m["ring"]["triggers"] == [PSI_TRIGGER, DMESG_TRIGGER]


def test_flapping_trigger_is_held_back_by_the_cool_down(run: dict) -> None:
    if "dmesg" not in run["bundles"]:
        pytest.skip("/dev/kmsg is not writable here")
    tgz = run["bundles"]["dmesg"]
    assert tgz is not None
    m = json.loads((_extract(tgz, run["tmp"] / "x-dmesg") / "manifest.json").read_text())
    assert m["trigger"]["name"] == DMESG_TRIGGER and DMESG_MARK in m["trigger"]["value"]
    assert run["extra_after_dmesg"] == []
    assert run["stderr"].count("ignored, cool-down") >= 2


def test_recorder_keeps_running_after_dumps_and_stops_cleanly_on_sigterm(run: dict) -> None:
    assert max(run["slots_at_stop"]) > max(run["slots_at_first_cut"]), (
        "rotation went on after dumps"
    )
    assert run["rc"] == 0, run["stderr"][-2000:]
    assert run["left"] is True, run["left"]
    ring = next(run["out"].glob("hindsight-recorder-*"))
    assert not (ring / "recorder.pid").exists()
    m = json.loads((ring / "manifest.json").read_text())
    assert m["complete"] and m["stop_reason"] == "interrupted"
    assert m["ring"]["dumps"] is None or m["ring"]["dumps"] >= 0
    bundles = [line for line in run["stdout"].splitlines() if line.endswith(".tgz")]
    assert len(bundles) >= 2  # each bundle's path is printed on stdout (the journal under systemd)
    second = run["second"]
    assert second.returncode != 0 and "already runs" in second.stderr


def test_bad_trigger_and_dump_without_recorder_fail_without_a_directory(tmp_path: Path) -> None:
    r = subprocess.run(
        ["sh", str(SCRIPT), "-o", str(tmp_path), "--ring", "1", "--trigger", "psi:memory:avg10>x"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode != 0 and "bad --trigger" in r.stderr
    r = subprocess.run(
        ["sh", str(SCRIPT), "-o", str(tmp_path), "--trigger", "dmesg:x"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode != 0 and "--ring" in r.stderr
    r = subprocess.run(
        ["sh", str(SCRIPT), "--dump", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode != 0 and "no running flight recorder" in r.stderr
    assert not list(tmp_path.iterdir())
