#!/usr/bin/env python3
"""Make a real capture with an incident injected at a known time, plus its ground truth.

    python samples/real/inject.py SCENARIO [--out samples/real]
    python samples/real/inject.py --list

Runs ``sh capture/hindsight-capture.sh -d D -i I -o DIR --pid ... --cgroup ...`` in the
background, waits until its vmstat has printed a sample, then runs the scenario's schedule
of incidents (CPU quota, contention, write bursts, fio, memory cgroups, OOM kills, host
reclaim, swap, a stopped collector, softirq load), logging for each the epoch time right
before it was started and right after it was stopped (plus the phases the load itself
logs), then waits for the capture and writes ``<out>/<scenario>.tgz`` (the capture's own
tarball, renamed) and ``<out>/<scenario>.truth.json``. ``observe.py`` adds the evidence.

How it runs (needs root, Linux, cgroup v1 cpu/cpuacct/memory hierarchies):

* The work happens in a private PID + mount namespace (``unshare --pid --fork
  --mount-proc``): the capture's ``ps``/``pids`` snapshots and automatic targets then see
  only the capture and the injected loads, never the other processes of the machine (the
  host-wide counters -- /proc/stat, vmstat, iostat, PSI, meminfo -- are not namespaced and
  show everything). tracefs is mounted inside that namespace only, so bpftrace works
  without changing the machine's mounts. The kernel log (dmesg, OOM lines) prints host
  PIDs; the truth lists the namespace PIDs the bundle's ps/pidstat show.
* Every load is started before the capture as ``sh -c 'kill -STOP $$; exec "$@"'`` in its
  own session and cgroups, so its PID is a ``--pid`` target (pidstat follows it, the capture
  follows its cgroups); the incident starts with SIGCONT.
* The outer process (in the machine's namespace) samples the background every 2 s: load
  average, CPU and disk I/O of the processes outside the namespace (other work on the
  machine), recorded in the truth as ``background``.
* Cleanup (also on Ctrl-C / SIGTERM): loads killed (whole process groups), cgroups removed,
  swap file swapped off and deleted, temporary files deleted; the outer process repeats
  the cgroup/swap/file cleanup after the namespace is gone.

Standard library only, plus the programs stress-ng, fio, iperf3, taskset, bpftrace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CAPTURE = ROOT / "capture" / "hindsight-capture.sh"
TMP = Path("/var/tmp/hs-real")  # same disk as / (vda) on the reference VM
CG_PREFIX = "hs-real-"
CG_ROOT = Path("/sys/fs/cgroup")
SWAPFILE = TMP / "swapfile"
ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/root",
    "TERM": "dumb",
}
PY = sys.executable
SELF = str(Path(__file__).resolve())
MB = 1 << 20


# ------------------------------------------------------------------ small helpers
def now() -> float:
    return time.time()


def meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])  # kB
    return out


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cmd_out(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def log(msg: str) -> None:
    print(f"[inject {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cg_dirs(name: str, controllers: tuple[str, ...]) -> dict[str, Path]:
    return {c: CG_ROOT / c / (CG_PREFIX + name) for c in controllers}


def remove_cgroup_dir(d: Path, tries: int = 100) -> bool:
    for _ in range(tries):
        if not d.exists():
            return True
        try:
            for t in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(t), signal.SIGKILL)
            d.rmdir()
            return True
        except OSError:
            time.sleep(0.1)
    return not d.exists()


def cleanup_machine(reason: str) -> None:
    """Everything a scenario may have left on the machine (idempotent)."""
    for ctl in ("cpu", "cpuacct", "memory", "blkio", "cpuset", "pids"):
        base = CG_ROOT / ctl
        if not base.is_dir():
            continue
        for d in base.glob(CG_PREFIX + "*"):
            if d.is_dir() and not remove_cgroup_dir(d):
                log(f"cleanup ({reason}): could not remove {d}")
    if SWAPFILE.exists():
        swaps = Path("/proc/swaps").read_text()
        if str(SWAPFILE) in swaps:
            subprocess.run(["swapoff", str(SWAPFILE)], check=False)
        SWAPFILE.unlink(missing_ok=True)
    for f in TMP.glob("*.dat"):
        f.unlink(missing_ok=True)
    if os.environ.get("HS_KEEP_TMP") != "1":
        for d in TMP.glob("work-*"):
            shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ loads (subcommands)
class PhaseLog:
    def __init__(self, path: str | None) -> None:
        self.f = open(path, "a") if path else None

    def __call__(self, phase: str, **kw: Any) -> None:
        if self.f:
            self.f.write(json.dumps({"t": now(), "phase": phase, **kw}) + "\n")
            self.f.flush()


def load_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="inject.py --load")
    ap.add_argument("name")
    ap.add_argument("--log")
    ap.add_argument("--busy-ms", type=float, default=50)
    ap.add_argument("--cycle-ms", type=float, default=100)
    ap.add_argument("--jitter-ms", type=float, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--path")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--chunk-mb", type=int, default=16)
    ap.add_argument("--fsync", action="store_true")
    ap.add_argument("--writeback-timeout", type=float, default=120)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate-mb-s", type=float, default=64)
    ap.add_argument("--step-mb", type=int, default=16)
    ap.add_argument("--max-mb", type=int, default=4096)
    ap.add_argument("--floor-mb", type=int, default=2400)
    ap.add_argument("--emergency-mb", type=int, default=1500)
    ap.add_argument("--hold-s", type=float, default=30)
    ap.add_argument("--reader")
    ap.add_argument("--retouch-s", type=float, default=40)
    a = ap.parse_args(argv)
    plog = PhaseLog(a.log)
    fn = {
        "duty": _duty,
        "write": _write,
        "read": _read,
        "hog": _hog,
        "fill": _fill,
        "swap": _swap,
        "idle": _idle,
        "mkfile": _mkfile,
        "wburst": _wburst,
    }[a.name]
    plog("begin", pid=os.getpid())
    fn(a, plog)
    plog("exit")
    return 0


def _mkfile(a: argparse.Namespace, plog: PhaseLog) -> None:
    chunk = os.urandom(16 * MB)
    with open(a.path, "wb") as f:
        for _ in range(a.mb // 16):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    _drop_cache(a.path)


def _wburst(a: argparse.Namespace, plog: PhaseLog) -> None:
    """A write burst of a.seconds: rounds of a.mb MB of buffered writes (chunk_mb chunks)
    over the same file from offset 0, each followed by fsync, until a.seconds have passed
    (the round under way is finished); then the file is deleted."""
    buf = os.urandom(a.chunk_mb * MB)
    fd = os.open(a.path, os.O_WRONLY | os.O_CREAT, 0o600)
    end = now() + a.seconds
    rounds = 0
    while now() < end:
        t = now()
        for k in range(a.mb // a.chunk_mb):
            os.pwrite(fd, buf, k * a.chunk_mb * MB)
        w = now()
        os.fsync(fd)
        rounds += 1
        plog("round", n=rounds, write_s=round(w - t, 3), fsync_s=round(now() - w, 3))
    os.close(fd)
    os.unlink(a.path)
    plog("unlink", rounds=rounds, mb=rounds * a.mb)


def _idle(a: argparse.Namespace, plog: PhaseLog) -> None:
    while True:
        time.sleep(3600)


def _duty(a: argparse.Namespace, plog: PhaseLog) -> None:
    """Busy for busy_ms (+- jitter) of CPU time, then sleep the rest of cycle_ms."""
    import random

    rng = random.Random(a.seed)
    while True:
        b = max(0.0, a.busy_ms + rng.uniform(-a.jitter_ms, a.jitter_ms))
        t = time.thread_time()
        while (time.thread_time() - t) * 1000 < b:
            pass
        time.sleep(max(0.0, a.cycle_ms - b) / 1000)


def _dirty_kb() -> int:
    m = meminfo()
    return m["Dirty"] + m["Writeback"]


def _memcg_dirty_kb() -> int | None:
    """Dirty + writeback pages of this process's own (v1) memory cgroup, in kB: unlike
    /proc/meminfo, not mixed with other writers on the machine."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctl, path = line.split(":", 2)
        if "memory" in ctl.split(",") and path not in ("/", ""):
            st = {}
            for x in (
                (CG_ROOT / "memory" / path.lstrip("/") / "memory.stat").read_text().splitlines()
            ):
                k, v = x.split()
                st[k] = int(v)
            return (st.get("dirty", 0) + st.get("writeback", 0)) // 1024
    return None


def _write(a: argparse.Namespace, plog: PhaseLog) -> None:
    """A checkpoint: a.mb MB of buffered writes in chunk_mb chunks, then fsync (or let the
    kernel write it back), then delete the file."""
    base = _dirty_kb()
    buf = os.urandom(a.chunk_mb * MB)
    fd = os.open(a.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    plog("write_start", dirty_kb=base, memcg_dirty_kb=_memcg_dirty_kb())
    for _ in range(a.mb // a.chunk_mb):
        os.write(fd, buf)
    plog("write_end", dirty_kb=_dirty_kb(), memcg_dirty_kb=_memcg_dirty_kb())
    if a.fsync:
        os.fsync(fd)
        plog("fsync_end", dirty_kb=_dirty_kb(), memcg_dirty_kb=_memcg_dirty_kb())
    os.close(fd)
    if not a.fsync:
        # the kernel's flusher writes it back (dirty_expire_centisecs); wait until this
        # cgroup's dirty + writeback pages are (nearly) gone
        limit = now() + a.writeback_timeout
        own = _memcg_dirty_kb() is not None
        first = None
        while now() < limit:
            d = _memcg_dirty_kb() if own else _dirty_kb() - base
            if first is None and d is not None and d < a.mb * 1024 * 0.95:
                first = now()
                plog("writeback_seen", kb_left=d, source="memcg" if own else "meminfo")
            if d is not None and d < a.mb * 1024 // 20:  # within 5 % of the write
                break
            time.sleep(0.05)
        plog("writeback_done", kb_left=d, source="memcg" if own else "meminfo")
    os.unlink(a.path)
    plog("unlink")


def _drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read(a: argparse.Namespace, plog: PhaseLog) -> None:
    """Re-read a file (bigger than the cgroup's limit) for a.seconds."""
    _drop_cache(a.path)
    plog("read_start")
    end = now() + a.seconds
    loops, total = 0, 0
    while now() < end:
        with open(a.path, "rb", buffering=0) as f:
            while True:
                b = f.read(MB)
                if not b:
                    break
                total += len(b)
                if now() >= end:
                    break
        loops += 1
    plog("read_end", loops=loops, mb=total // MB)


def _touch(n_mb: int) -> bytearray:
    b = bytearray(n_mb * MB)
    b[::4096] = b"\x01" * len(range(0, len(b), 4096))
    return b


def _hog(a: argparse.Namespace, plog: PhaseLog) -> None:
    """Grow anonymous memory at rate_mb_s until killed (or max_mb, then hold)."""
    held = []
    t0 = now()
    plog("grow_start")
    while len(held) * a.step_mb < a.max_mb:
        held.append(_touch(a.step_mb))
        mb = len(held) * a.step_mb
        if mb % 128 == 0:
            plog("rss", mb=mb)
        time.sleep(max(0.0, t0 + mb / a.rate_mb_s - now()))
    plog("max_reached", mb=len(held) * a.step_mb)
    while True:
        time.sleep(3600)


def _fill(a: argparse.Namespace, plog: PhaseLog) -> None:
    """Host reclaim: allocate anonymous memory until MemAvailable < floor_mb (the page
    cache is reclaimed to make room), hold it for hold_s (optionally re-reading a file, so
    the kernel keeps reclaiming), then free it. Frees memory at once if MemAvailable falls
    under emergency_mb (other work on the machine must never be OOM-killed)."""
    Path("/proc/self/oom_score_adj").write_text("1000")
    held: list[bytearray] = []
    plog("ramp_start", avail_mb=meminfo()["MemAvailable"] // 1024)
    t0 = now()
    while meminfo()["MemAvailable"] // 1024 > a.floor_mb + a.step_mb:
        held.append(_touch(a.step_mb))
        time.sleep(max(0.0, t0 + len(held) * a.step_mb / a.rate_mb_s - now()))
    m = meminfo()
    plog(
        "ramp_end",
        held_mb=len(held) * a.step_mb,
        avail_mb=m["MemAvailable"] // 1024,
        free_mb=m["MemFree"] // 1024,
        cached_mb=m["Cached"] // 1024,
    )
    stop = threading.Event()
    reader_stats = {"mb": 0}

    def reader() -> None:
        while not stop.is_set():
            with open(a.reader, "rb", buffering=0) as f:
                while not stop.is_set():
                    b = f.read(MB)
                    if not b:
                        break
                    reader_stats["mb"] += len(b) / MB

    th = None
    if a.reader:
        th = threading.Thread(target=reader, daemon=True)
        th.start()
        plog("reader_start")
    end = now() + a.hold_s
    min_avail = 1 << 40
    while now() < end:
        av = meminfo()["MemAvailable"] // 1024
        min_avail = min(min_avail, av)
        if av < a.emergency_mb and held:
            while held and meminfo()["MemAvailable"] // 1024 < a.floor_mb:
                for _ in range(min(4, len(held))):
                    held.pop()
            plog("emergency_release", held_mb=len(held) * a.step_mb, avail_mb=av)
        time.sleep(0.2)
    stop.set()
    if th:
        th.join(5)
        plog("reader_end", mb=round(reader_stats["mb"]))
    plog("hold_end", min_avail_mb=min_avail, held_mb=len(held) * a.step_mb)
    held.clear()
    plog("released", avail_mb=meminfo()["MemAvailable"] // 1024)


def _swap(a: argparse.Namespace, plog: PhaseLog) -> None:
    """In a memory cgroup smaller than it: allocate a.mb (the overflow is swapped out),
    wait for SIGUSR1, then re-touch every page for retouch_s (swap-in + swap-out)."""
    got = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: got.set())
    held = []
    t0 = now()
    plog("alloc_start")
    while len(held) * a.step_mb < a.mb:
        held.append(_touch(a.step_mb))
        time.sleep(max(0.0, t0 + len(held) * a.step_mb / a.rate_mb_s - now()))
    plog("alloc_end", mb=len(held) * a.step_mb)
    while not got.is_set():
        time.sleep(0.05)
    plog("retouch_start")
    end = now() + a.retouch_s
    passes = 0
    while now() < end:
        for b in held:
            b[::4096] = b"\x02" * len(range(0, len(b), 4096))
            if now() >= end:
                break
        passes += 1
    plog("retouch_end", passes=passes)


# ------------------------------------------------------------------ the run (inside the namespace)
class Proc:
    def __init__(self, name: str, argv: list[str], popen: subprocess.Popen, log_path: Path) -> None:
        self.name, self.argv, self.p, self.log_path = name, argv, popen, log_path
        self.pid = popen.pid
        self.cgroups: list[str] = []
        self.started: float | None = None
        self.running_at: float | None = None
        self.ended: float | None = None
        self.returncode: int | None = None

    def phases(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(x) for x in self.log_path.read_text().splitlines() if x.strip()]

    def phase(self, name: str) -> float | None:
        for e in self.phases():
            if e["phase"] == name:
                return e["t"]
        return None


def _proc_state(pid: int) -> tuple[str, str] | None:
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = st[st.index("(") + 1 : st.rindex(")")]
    return st[st.rindex(")") + 2], comm


class Run:
    def __init__(self, scenario: str, out: Path) -> None:
        self.scenario = scenario
        self.out = out
        self.work = TMP / f"work-{scenario}"
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.procs: list[Proc] = []
        self.cgroups: list[Path] = []
        self.cg_specs: list[str] = []
        self.incidents: list[dict[str, Any]] = []
        self.background: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.cap: subprocess.Popen | None = None
        self.cap_args: list[str] = []
        self.t0 = 0.0
        self.duration = 0
        self.interval = 1
        self.swap_on = False
        self.files: list[Path] = []
        self.facts: dict[str, Any] = {}
        self.description = ""
        self.truth_extra: dict[str, Any] = {}  # more top-level truth keys (the service's)
        self.finish_hooks: list[Callable[[dict[str, Any]], None]] = []  # see finish()

    # -- setup before the capture
    def cgroup(
        self,
        name: str,
        controllers: tuple[str, ...] = ("cpu", "cpuacct", "memory"),
        spec: bool = True,
        **limits: Any,
    ) -> dict[str, Path]:
        """Make cgroup CG_PREFIX+name in each controller (v1), set its limits and (spec)
        pass it to the capture with --cgroup."""
        dirs = cg_dirs(name, controllers)
        for c, d in dirs.items():
            d.mkdir(exist_ok=True)
            self.cgroups.append(d)
            if c == "cpu" and "quota_us" in limits:
                (d / "cpu.cfs_period_us").write_text(str(limits.get("period_us", 100000)))
                (d / "cpu.cfs_quota_us").write_text(str(limits["quota_us"]))
            if c == "memory" and "mem_limit" in limits:
                (d / "memory.limit_in_bytes").write_text(str(limits["mem_limit"]))
        if spec:
            self.cg_specs.append(CG_PREFIX + name)
        return dirs

    def default_memcg(self) -> Path:
        """Loads without a memory cgroup of their own go into one unlimited memory cgroup
        per scenario (else they would stay in the memory cgroup this tool was started in,
        and the capture, following the cgroups of each --pid, would record that one)."""
        d = CG_ROOT / "memory" / (CG_PREFIX + self.scenario)
        if d not in self.cgroups:
            self.cgroup(self.scenario, ("memory",), spec=False)
        return d

    def proc(
        self, name: str, argv: list[str], cgroup: dict[str, Path] | None = None, target: bool = True
    ) -> Proc:
        """Spawn argv stopped (it starts at cont()); in its own session and cgroups."""
        log_path = self.work / f"{name}.phases.jsonl"
        full = ["sh", "-c", 'kill -STOP $$; exec "$@"', "hs-load", *argv]
        out = open(self.work / f"{name}.out", "w")
        p = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=ENV,
            start_new_session=True,
            cwd=self.work,
        )
        pr = Proc(name, argv, p, log_path)
        for _ in range(500):
            s = _proc_state(p.pid)
            if s and s[0] == "T":
                break
            time.sleep(0.01)
        else:
            raise RuntimeError(f"{name}: the wrapper did not stop itself")
        cg = dict(cgroup or {})
        if "memory" not in cg:
            cg["memory"] = self.default_memcg()
        for _c, d in cg.items():
            (d / "cgroup.procs").write_text(str(p.pid))
            pr.cgroups.append(str(d))
        pr.target = target  # type: ignore[attr-defined]
        self.procs.append(pr)
        return pr

    def helper(
        self,
        name: str,
        load: str,
        *args: str,
        cgroup: dict[str, Path] | None = None,
        prefix: list[str] | None = None,
    ) -> Proc:
        argv = [
            *(prefix or []),
            PY,
            SELF,
            "--load",
            load,
            "--log",
            str(self.work / f"{name}.phases.jsonl"),
            *args,
        ]
        return self.proc(name, argv, cgroup)

    def make_file(self, name: str, mb: int, cgroup: dict[str, Path] | None = None) -> Path:
        """A file of random data (a 16 MB random block repeated), written and fsynced now
        (before the capture) by a process in `cgroup`, then dropped from the page cache."""
        path = TMP / f"{self.scenario}-{name}.dat"
        self.files.append(path)
        log(f"writing {path} ({mb} MB)")
        self.run_now(
            f"mk-{name}",
            [PY, SELF, "--load", "mkfile", "--path", str(path), "--mb", str(mb)],
            cgroup,
        )
        return path

    def run_now(self, name: str, argv: list[str], cgroup: dict[str, Path] | None = None) -> None:
        """Run argv to completion now (setup before the capture), inside `cgroup`."""
        pr = self.proc(name, argv, cgroup, target=False)
        self.procs.remove(pr)
        self.cont(pr)
        if pr.p.wait() != 0:
            raise RuntimeError(
                f"setup step {name} failed: {(self.work / (name + '.out')).read_text()[-500:]}"
            )

    def swap(self, mb: int) -> None:
        SWAPFILE.unlink(missing_ok=True)
        subprocess.run(["fallocate", "-l", f"{mb}M", str(SWAPFILE)], check=True)
        SWAPFILE.chmod(0o600)
        subprocess.run(["mkswap", str(SWAPFILE)], check=True, capture_output=True)
        r = subprocess.run(["swapon", str(SWAPFILE)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"swapon failed: {r.stderr.strip()}")
        self.swap_on = True
        log(f"swap on: {SWAPFILE} ({mb} MB)")

    # -- the capture
    def start_capture(
        self, duration: int, interval: int = 1, extra: list[str] | None = None
    ) -> None:
        self.duration, self.interval = duration, interval
        capdir = self.work / "capture"
        capdir.mkdir()
        args = ["-d", str(duration), "-i", str(interval), "-o", str(capdir)]
        for pr in self.procs:
            if getattr(pr, "target", True):
                args += ["--pid", str(pr.pid)]
        for c in self.cg_specs:
            args += ["--cgroup", c]
        args += extra or []
        self.cap_args = args
        self.facts = host_facts()
        self.facts["load_avg_start"] = loadavg()
        self.facts["mem_start_kb"] = {
            k: meminfo()[k] for k in ("MemTotal", "MemFree", "MemAvailable", "Cached", "SwapTotal")
        }
        log("capture: sh capture/hindsight-capture.sh " + " ".join(args))
        script = self.capture_script()
        self.cap_log = open(self.work / "capture-console.log", "w")
        self.cap = subprocess.Popen(
            ["sh", str(script), *args],
            stdout=subprocess.PIPE,
            stderr=self.cap_log,
            env=ENV,
            start_new_session=True,
            cwd=ROOT,
            text=True,
        )
        self.cap_started = now()
        limit = now() + 60
        while now() < limit:
            for f in capdir.glob("hindsight-*/series/vmstat.out"):
                rows = [
                    x for x in f.read_text().splitlines() if re.search(r"\d\d:\d\d:\d\d\s*$", x)
                ]
                if len(rows) >= 2:  # the since-boot row and the first 1-interval sample
                    self.t0 = now()
                    log(f"capture sampling since {self.t0:.3f}")
                    return
            if self.cap.poll() is not None:
                raise RuntimeError("the capture exited before sampling")
            time.sleep(0.1)
        raise RuntimeError("the capture did not start sampling within 60 s")

    def capture_script(self) -> Path:
        """A private copy of the capture script, run instead of the file in the working
        tree: sh reads a script as it runs it, so an edit of the working tree during a
        capture of several minutes would break the running capture. HEAD's version when
        git has one (what a commit names), else the working tree's; recorded in the truth."""
        dest = self.work / "hindsight-capture.sh"
        head = subprocess.run(
            ["git", "-C", str(ROOT), "show", "HEAD:capture/hindsight-capture.sh"],
            capture_output=True,
        )
        commit = cmd_out(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
        if head.returncode == 0 and head.stdout:
            dest.write_bytes(head.stdout)
            self.script_source = f"git HEAD {commit}: capture/hindsight-capture.sh"
        else:
            shutil.copyfile(CAPTURE, dest)
            self.script_source = "the working tree's capture/hindsight-capture.sh"
        import hashlib

        self.script_sha256 = hashlib.sha256(dest.read_bytes()).hexdigest()
        return dest

    def at(self, offset: float) -> None:
        time.sleep(max(0.0, self.t0 + offset - now()))

    def cont(self, *procs: Proc) -> float:
        """SIGCONT; records the time right before it and when the load was seen running
        (its wrapper has exec'd the load)."""
        t = now()
        for pr in procs:
            pr.started = now()
            os.killpg(pr.pid, signal.SIGCONT)
        for pr in procs:
            limit = now() + 3
            while now() < limit:
                s = _proc_state(pr.pid)
                try:
                    cmd = Path(f"/proc/{pr.pid}/cmdline").read_bytes()
                except OSError:
                    cmd = b""
                if s is None or (s[0] != "T" and b"kill -STOP" not in cmd):
                    pr.running_at = now()  # the wrapper has exec'd the load
                    break
                time.sleep(0.001)
        return t

    def stop(self, *procs: Proc) -> float:
        for pr in procs:
            if pr.p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pr.pid, signal.SIGKILL)
        for pr in procs:
            pr.p.wait()
            pr.ended = now()
            pr.returncode = pr.p.returncode
        return now()

    def wait(self, pr: Proc, timeout: float | None = None) -> float:
        try:
            pr.p.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{pr.name}: still running after {timeout} s, killed")
            return self.stop(pr)
        pr.ended = now()
        pr.returncode = pr.p.returncode
        with contextlib.suppress(
            ProcessLookupError
        ):  # the rest of its group (stress-ng, fio workers)
            os.killpg(pr.pid, signal.SIGKILL)
        return pr.ended

    def incident(
        self,
        id: str,
        kind: str,
        start: float,
        end: float,
        procs: list[Proc],
        params: dict[str, Any],
        expected: dict[str, Any],
        cgroup: Any = None,
        phases: dict[str, float | None] | None = None,
        why_kind: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        ph: dict[str, Any] = {}
        for pr in procs:
            ph[f"{pr.name}.sigcont"] = pr.started
            ph[f"{pr.name}.running"] = pr.running_at
            for e in pr.phases():
                key = f"{pr.name}.{e['phase']}"
                if key not in ph:
                    ph[key] = e["t"]
            ph[f"{pr.name}.exited"] = pr.ended
        ph.update(phases or {})
        self.incidents.append(
            {
                "id": id,
                "kind": kind,
                **({"why_kind": why_kind} if why_kind else {}),
                "start": round(start, 3),
                "end": round(end, 3),
                "duration_s": round(end - start, 3),
                "pids": [pr.pid for pr in procs],
                "commands": {pr.name: " ".join(pr.argv) for pr in procs},
                "exit_codes": {pr.name: pr.returncode for pr in procs},
                "cgroup": cgroup
                if cgroup is not None
                else sorted({c for pr in procs for c in pr.cgroups}) or None,
                "params": params,
                "phases": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in ph.items()},
                "phase_details": {pr.name: pr.phases() for pr in procs if pr.phases()},
                "expected": expected,
                "observed": None,
                **(extra or {}),
            }
        )

    def finish(self) -> None:
        assert self.cap is not None
        log("waiting for the capture to finish")
        stdout, _ = self.cap.communicate(timeout=self.duration + 300)
        self.cap_log.close()
        self.facts["load_avg_end"] = loadavg()
        if self.cap.returncode != 0:
            raise RuntimeError(
                f"capture exited {self.cap.returncode}; see {self.work}/capture-console.log"
            )
        bundle = Path(stdout.strip().splitlines()[-1])
        dest = self.out / f"{self.scenario}.tgz"
        shutil.copyfile(bundle, dest)
        man = json.loads((Path(str(bundle)[:-4]) / "manifest.json").read_text())
        cs = float(man["clock"]["start_epoch_s"])
        ce = float(man["clock"]["end_epoch_s"])
        for inc in self.incidents:
            inc["offset_s"] = round(inc["start"] - cs, 3)
        truth = {
            "scenario": self.scenario,
            "description": self.description,
            "bundle": dest.name,
            "bundle_top_dir": bundle.name[:-4],
            "made_with": {
                "inject": f"python samples/real/inject.py {self.scenario}",
                "capture_command": "sh capture/hindsight-capture.sh " + " ".join(self.cap_args),
                "capture_args": self.cap_args,
                "capture_script": {
                    "source": getattr(self, "script_source", None),
                    "sha256": getattr(self, "script_sha256", None),
                },
                "namespaces": "capture and loads ran in a private PID + mount namespace "
                "(unshare --pid --fork --mount-proc); tracefs mounted there only; "
                "PIDs are namespace PIDs (dmesg prints host PIDs)",
                "capture_start_epoch": cs,
                "capture_end_epoch": ce,
                "capture_process_started": round(self.cap_started, 3),
                "sampling_seen": round(self.t0, 3),
                "interval_s": self.interval,
                "duration_s": self.duration,
                "host": self.facts,
                "swap_file": str(SWAPFILE) if self.swap_on else None,
                "notes": self.notes,
            },
            "background": self.background,
            "incidents": self.incidents,
            "quiet_windows": quiet_windows(self.incidents, cs, ce, self.duration, self.t0),
            **self.truth_extra,
        }
        for hook in self.finish_hooks:  # e.g. the service's latency record, summarised
            try:
                hook(truth)
            except Exception as e:  # the bundle and the rest of the truth still count
                self.notes.append(f"finish hook {getattr(hook, '__name__', hook)} failed: {e!r}")
        (self.out / f"{self.scenario}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        log(f"wrote {dest} ({dest.stat().st_size // 1024} KiB) and {self.scenario}.truth.json")

    def cleanup(self) -> None:
        for pr in self.procs:
            if pr.p.poll() is None:
                try:
                    os.killpg(pr.pid, signal.SIGCONT)
                    os.killpg(pr.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pr.p.wait()
        if self.cap is not None and self.cap.poll() is None:
            self.cap.terminate()
            try:
                self.cap.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.cap.pid, signal.SIGKILL)
        for d in self.cgroups:
            remove_cgroup_dir(d)
        if self.swap_on:
            subprocess.run(["swapoff", str(SWAPFILE)], check=False)
            SWAPFILE.unlink(missing_ok=True)
        for f in self.files:
            f.unlink(missing_ok=True)


def quiet_windows(
    incs: list[dict[str, Any]], cs: float, ce: float, duration: int, t0: float
) -> list[dict[str, float]]:
    """Stretches with no injected incident: from 5 s after sampling started (start
    snapshots) to 5 s before each incident, from 15 s after each incident (after-effects:
    writeback, refaults) to the next, and to the end of the series (-d after start)."""
    spans = sorted((i["start"], i["end"]) for i in incs)
    out = []
    a = max(cs, t0) + 5
    for s, e in spans:
        if s - 5 - a >= 10:
            out.append({"start": round(a, 3), "end": round(s - 5, 3)})
        a = max(a, e + 15)
    z = cs + duration - 2
    if z - a >= 10:
        out.append({"start": round(a, 3), "end": round(z, 3)})
    return out


def host_facts() -> dict[str, Any]:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    v1 = sorted(
        {
            o
            for line in mounts
            if line.split()[2] == "cgroup"
            for o in line.split()[3].split(",")
            if o in ("cpu", "cpuacct", "cpuset", "memory", "blkio", "pids", "devices", "freezer")
        }
    )
    v2 = [line.split()[1] for line in mounts if line.split()[2] == "cgroup2"]
    m = meminfo()
    return {
        "hostname": platform.node(),
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "cgroup": f"v1 ({', '.join(v1)} each mounted at /sys/fs/cgroup/<controller>)"
        + (f"; cgroup2 also mounted at {', '.join(v2)} with no controllers in use" if v2 else ""),
        "mem_total_mb": m["MemTotal"] // 1024,
        "swap_total_mb": m["SwapTotal"] // 1024,
        "disk": "virtio vda (ext4, no journal), about 300 MB/s buffered write+fsync, 1.6 GB/s direct 64k-1M writes",
        "sysctl": {
            k: Path(f"/proc/sys/vm/{k}").read_text().strip()
            for k in (
                "dirty_ratio",
                "dirty_background_ratio",
                "dirty_expire_centisecs",
                "swappiness",
            )
        },
        "tools": {
            "sysstat": cmd_out(["vmstat", "-V"]).splitlines()[0]
            if cmd_out(["vmstat", "-V"])
            else None,
            "sysstat_iostat": (cmd_out(["iostat", "-V"]).splitlines() or [None])[0],
            "stress-ng": cmd_out(["stress-ng", "--version"]),
            "fio": cmd_out(["fio", "--version"]),
            "bpftrace": cmd_out(["bpftrace", "--version"]),
            "iperf3": (cmd_out(["iperf3", "--version"]).splitlines() or [None])[0],
            "python": platform.python_version(),
        },
    }


# ------------------------------------------------------------------ scenarios
SCENARIOS: dict[str, tuple[str, Callable[[Run], None]]] = {}


def scenario(name: str, doc: str) -> Callable:
    def deco(fn: Callable[[Run], None]) -> Callable[[Run], None]:
        SCENARIOS[name] = (doc, fn)
        return fn

    return deco


BUSY = ["sh", "-c", "while :; do :; done"]


@scenario(
    "cpu-throttle",
    "v1 CPU quota: strong (busy loop at 20 % of a CPU), mild-steady (60 % demand under 55 %), mild-bursty (45 +- 25 % under 55 %)",
)
def sc_cpu_throttle(r: Run) -> None:
    strong = r.cgroup("thr-strong", ("cpu", "cpuacct"), quota_us=20000)
    steady = r.cgroup("thr-steady", ("cpu", "cpuacct"), quota_us=55000)
    bursty = r.cgroup("thr-bursty", ("cpu", "cpuacct"), quota_us=55000)
    # nice -10: the loads get the CPU they ask for even on this busy shared host (load 2-8 from
    # other work); without it a 60 % demand got only ~27 % and never reached its quota
    nice = ["nice", "-n", "-10"]
    p1 = r.proc("busy", [*nice, *BUSY], strong)
    p2 = r.helper(
        "duty60", "duty", "--busy-ms", "6", "--cycle-ms", "10", cgroup=steady, prefix=nice
    )
    p3 = r.helper(
        "duty45j",
        "duty",
        "--busy-ms",
        "45",
        "--cycle-ms",
        "100",
        "--jitter-ms",
        "25",
        cgroup=bursty,
        prefix=nice,
    )
    r.start_capture(420)
    r.at(50)
    a = r.cont(p1)
    r.at(90)
    z = r.stop(p1)
    r.incident(
        "throttle-strong",
        "cpu_throttle",
        a,
        z,
        [p1],
        {
            "quota_us": 20000,
            "period_us": 100000,
            "demand": "1 busy thread (100 % of a CPU)",
            "nice": -10,
        },
        {
            "text": "quota = 20 % of one CPU, demand 100 %: most 100 ms periods end throttled; usage pinned "
            "at <= 20 % of a CPU, tens of ms of every period throttled",
            "throttled_periods_pct": ">= 60",
            "usage_pct_of_cpu": "<= 20",
            "throttled_ms_per_s": "~300-800",
        },
    )
    r.at(150)
    a = r.cont(p2)
    r.at(210)
    z = r.stop(p2)
    r.incident(
        "throttle-mild-steady",
        "cpu_throttle",
        a,
        z,
        [p2],
        {
            "quota_us": 55000,
            "period_us": 100000,
            "demand": "6 ms CPU every 10 ms (60 % of a CPU)",
            "nice": -10,
        },
        {
            "text": "quota 55 % just under a steady 60 % demand: when the process gets the CPU it asks for, "
            "nearly every period runs out of quota a few ms before its end, so most periods are "
            "throttled but only for ~5 ms each (mild: ~4 % of the time); fewer periods throttle when "
            "the busy host leaves the process less CPU (at nice 0 on a busier host: 4-16 %)",
            "throttled_periods_pct": "~30-100",
            "throttled_ms_per_s": "~20-50",
            "usage_pct_of_cpu": "~50-55",
        },
    )
    r.at(270)
    a = r.cont(p3)
    r.at(330)
    z = r.stop(p3)
    r.incident(
        "throttle-mild-bursty",
        "cpu_throttle",
        a,
        z,
        [p3],
        {
            "quota_us": 55000,
            "period_us": 100000,
            "nice": -10,
            "demand": "45 +- 25 ms CPU per 100 ms cycle (mean 45 % of a CPU, bursts to 70 %)",
        },
        {
            "text": "mean demand below the quota; only the bursts exceed it: a minority of periods throttle "
            "(measured before at nice 0: ~5 %; 11 % on a busier host), around the cpu_throttle entry "
            "threshold (10 %): an analyzer may rightly report nothing, info or minor",
            "throttled_periods_pct": "~5-25",
            "usage_pct_of_cpu": "~40-50",
        },
    )


@scenario(
    "cpu-contention",
    "host-wide (stress-ng --cpu 6), pinned (4 workers on CPU 1), exactly-nproc (stress-ng --cpu 2)",
)
def sc_cpu_contention(r: Run) -> None:
    job = r.cgroup("contention", ("cpu", "cpuacct"))
    p1 = r.proc("cpu6", ["stress-ng", "--cpu", "6", "--timeout", "40s"], job)
    p2 = r.proc("pin4", ["taskset", "-c", "1", "stress-ng", "--cpu", "4", "--timeout", "40s"], job)
    p3 = r.proc("cpu2", ["stress-ng", "--cpu", "2", "--timeout", "40s"], job)
    r.start_capture(390)
    r.at(50)
    a = r.cont(p1)
    z = r.wait(p1, 60)
    r.incident(
        "contention-host",
        "cpu_contention",
        a,
        z,
        [p1],
        {"workers": 6, "cpus": 2, "tool": "stress-ng --cpu 6 (all CPUs)"},
        {
            "text": "6 busy workers + the background on 2 CPUs: run queue ~8 (>= 3 x CPUs), %idle ~0 "
            "on both CPUs, CPU PSI some high",
            "vmstat_r": ">= 6",
            "idle_pct_all": "< 5",
        },
    )
    r.at(160)
    a = r.cont(p2)
    z = r.wait(p2, 60)
    r.incident(
        "contention-pinned",
        "cpu_contention",
        a,
        z,
        [p2],
        {"workers": 4, "pinned_cpu": 1, "tool": "taskset -c 1 stress-ng --cpu 4"},
        {
            "text": "4 workers pinned to CPU 1: CPU 1 100 % busy, 3 of them always waiting; CPU 0 keeps "
            "only the background load (not idle: other work runs there)",
            "cpu1_idle_pct": "~0",
            "vmstat_r": ">= 4",
        },
    )
    r.at(270)
    a = r.cont(p3)
    z = r.wait(p3, 60)
    r.incident(
        "contention-nproc",
        "cpu_contention",
        a,
        z,
        [p3],
        {"workers": 2, "cpus": 2, "tool": "stress-ng --cpu 2 (as many workers as CPUs)"},
        {
            "text": "2 busy workers on 2 CPUs on top of a background of ~2-3 runnable tasks: both CPUs "
            "busy, run queue ~4-5 (the milder case)",
            "vmstat_r": ">= 3",
            "idle_pct_all": "< 5",
        },
    )


def _ckpt(r: Run, name: str, mb: int, fsync: bool) -> Proc:
    args = ["--path", str(r.work / f"{name}.ckpt"), "--mb", str(mb), "--chunk-mb", "16"]
    if fsync:
        args.append("--fsync")
    return r.helper(name, "write", *args, cgroup=r._job)  # type: ignore[attr-defined]


def _ckpt_incident(
    r: Run,
    pr: Proc,
    id: str,
    kind: str,
    a: float,
    z: float,
    mb: int,
    fsync: bool,
    periodic: str | None,
    why: str,
) -> None:
    if fsync:
        text = (
            f"{mb} MB of buffered writes then fsync: the page cache fills at memory speed (Dirty up to "
            f"~{mb} MB), then the disk writes ~{mb} MB in a few seconds (wkB/s far above the median, "
            "w_await and aqu-sz up, %util high); after fsync the file is deleted (ext4 discards the blocks: "
            "iostat d/s, dkB/s)"
        )
    else:
        text = (
            f"{mb} MB of buffered writes without fsync: Dirty jumps by ~{mb} MB within ~1-2 s, the disk "
            "sees nothing until the flusher writes it back (dirty_expire_centisecs = 30 s after the write, "
            "then at disk speed); the file is deleted once Dirty+Writeback are back near the baseline"
        )
    r.incident(
        id,
        kind,
        a,
        z,
        [pr],
        {
            "mb": mb,
            "fsync": fsync,
            "chunk_mb": 16,
            "periodic": periodic,
            "path": "/var/tmp/hs-real/work-*/ (vda, ext4)",
        },
        {"text": text, "disk_write_mb": f"~{mb}", "dirty_peak_mb": f"up to ~{mb}"},
        why_kind=why,
    )


@scenario("ckpt-periodic-fsync", "3 checkpoints of 1.2 GB written + fsync, 60 s apart, at -i 1")
def sc_ckpt_periodic_fsync(r: Run) -> None:
    r._job = r.cgroup("ckpt", ("cpu", "cpuacct", "memory"))  # type: ignore[attr-defined]
    ps = [_ckpt(r, f"ckpt{k}", 1200, True) for k in range(3)]
    r.start_capture(330)
    for k, pr in enumerate(ps):
        r.at(60 + 60 * k)
        a = r.cont(pr)
        z = r.wait(pr, 55)
        _ckpt_incident(
            r,
            pr,
            f"checkpoint-{k + 1}",
            "checkpoint_stall",
            a,
            z,
            1200,
            True,
            "every 60 s",
            "periodic write bursts (3, 60 s apart): checkpoint_stall reports periodic bursts even "
            "without GPU data (docs/detectors.md)",
        )


@scenario(
    "ckpt-periodic-buffered", "3 checkpoints of 1.2 GB buffered writes without fsync, 75 s apart"
)
def sc_ckpt_periodic_buffered(r: Run) -> None:
    r._job = r.cgroup("ckpt", ("cpu", "cpuacct", "memory"))  # type: ignore[attr-defined]
    ps = [_ckpt(r, f"ckpt{k}", 1200, False) for k in range(3)]
    r.start_capture(330)
    for k, pr in enumerate(ps):
        r.at(50 + 75 * k)
        a = r.cont(pr)
        z = r.wait(pr, 70)
        _ckpt_incident(
            r,
            pr,
            f"checkpoint-{k + 1}",
            "checkpoint_stall",
            a,
            z,
            1200,
            False,
            "every 75 s",
            "periodic page-cache write bursts (3, 75 s apart): checkpoint_stall counts page-cache "
            "growth (Dirty+Writeback) as a burst; each is followed ~30 s later by the writeback "
            "to disk",
        )


@scenario(
    "ckpt-oneoff", "one-off checkpoints: 1.5 GB + fsync, then 1.5 GB buffered (no fsync), at -i 1"
)
def sc_ckpt_oneoff(r: Run) -> None:
    r._job = r.cgroup("ckpt", ("cpu", "cpuacct", "memory"))  # type: ignore[attr-defined]
    p1 = _ckpt(r, "ckpt-fsync", 1500, True)
    p2 = _ckpt(r, "ckpt-buffered", 1500, False)
    r.start_capture(330)
    r.at(60)
    a = r.cont(p1)
    z = r.wait(p1, 60)
    _ckpt_incident(
        r,
        p1,
        "checkpoint-fsync",
        "io_saturation",
        a,
        z,
        1500,
        True,
        None,
        "a single write burst with no GPU data: docs/detectors.md leaves one-off checkpoints to "
        "io_saturation (which needs >= 5 s of %util >= 90 with await or aqu-sz high; a burst "
        "shorter than that may give no finding)",
    )
    r.at(180)
    a = r.cont(p2)
    z = r.wait(p2, 90)
    _ckpt_incident(
        r,
        p2,
        "checkpoint-buffered",
        "io_saturation",
        a,
        z,
        1500,
        False,
        None,
        "a single buffered write burst (page cache first, disk writeback ~30 s later): one-off, "
        "so io_saturation rather than checkpoint_stall; the writeback may be too short or too "
        "gentle to saturate the disk",
    )


@scenario(
    "ckpt-periodic-coarse",
    "3 checkpoints of 1.2 GB + fsync, 60 s apart, capture at -i 5 (coarse sampling)",
)
def sc_ckpt_coarse(r: Run) -> None:
    r._job = r.cgroup("ckpt", ("cpu", "cpuacct", "memory"))  # type: ignore[attr-defined]
    ps = [_ckpt(r, f"ckpt{k}", 1200, True) for k in range(3)]
    r.start_capture(360, interval=5)
    for k, pr in enumerate(ps):
        r.at(60 + 60 * k)
        a = r.cont(pr)
        z = r.wait(pr, 55)
        _ckpt_incident(
            r,
            pr,
            f"checkpoint-{k + 1}",
            "checkpoint_stall",
            a,
            z,
            1200,
            True,
            "every 60 s",
            "periodic write bursts seen through 5 s samples: each burst (a few s) is averaged into "
            "one or two samples",
        )
    r.notes.append(
        "capture at -i 5: every collector (vmstat, iostat, mpstat, samplers) samples every 5 s"
    )


@scenario(
    "io-neighbour",
    "a neighbour saturates the disk: fio randwrite direct=1 (64k qd16, then 4k qd32), 40 s each",
)
def sc_io_neighbour(r: Run) -> None:
    job = r.cgroup("io", ("cpu", "cpuacct", "memory"))
    f = r.make_file("fio", 1024)
    base = [
        "fio",
        "--name=neighbour",
        f"--filename={f}",
        "--size=1G",
        "--rw=randwrite",
        "--direct=1",
        "--ioengine=libaio",
        "--runtime=40",
        "--time_based",
        "--group_reporting",
    ]
    p1 = r.proc("fio64k", [*base, "--bs=64k", "--iodepth=16"], job)
    p2 = r.proc("fio4k", [*base, "--bs=4k", "--iodepth=32"], job)
    r.start_capture(330)
    r.at(50)
    a = r.cont(p1)
    z = r.wait(p1, 70)
    r.incident(
        "fio-64k-qd16",
        "io_saturation",
        a,
        z,
        [p1],
        {
            "rw": "randwrite",
            "bs": "64k",
            "iodepth": 16,
            "direct": 1,
            "runtime_s": 40,
            "file": "1 GiB",
        },
        {
            "text": "vda at ~100 % util for 40 s, ~1.5 GB/s of 64k writes, aqu-sz ~14-16 (>= 8), w_await ~1 ms "
            "(a fast virtual disk: the queue, not the latency, shows the saturation)",
            "util_pct": ">= 90",
            "aqu_sz": ">= 8",
            "write_mb_s": "~1000-1700",
        },
    )
    r.at(170)
    a = r.cont(p2)
    z = r.wait(p2, 70)
    r.incident(
        "fio-4k-qd32",
        "io_saturation",
        a,
        z,
        [p2],
        {
            "rw": "randwrite",
            "bs": "4k",
            "iodepth": 32,
            "direct": 1,
            "runtime_s": 40,
            "file": "1 GiB",
        },
        {
            "text": "tens of thousands of 4k writes per second, aqu-sz ~10-25, w_await well under 1 ms; fio is "
            "CPU-bound on 2 busy vCPUs, so %util stays mostly below 90 % (40-60 % in a test before): a "
            "heavy neighbour that meets io_saturation's %util >= 90 rule rarely if at all",
            "util_pct": "mostly < 90",
            "aqu_sz": ">= 8",
            "w_s": "~40000-100000",
        },
    )


@scenario(
    "memcg-pressure",
    "v1 memory cgroups far below the file working set (256 MB and 900 MB limits, 1 GB file re-read)",
)
def sc_memcg_pressure(r: Run) -> None:
    small = r.cgroup("memcg-256m", ("memory", "cpuacct"), mem_limit=256 * MB)
    near = r.cgroup("memcg-900m", ("memory", "cpuacct"), mem_limit=900 * MB)
    fa = r.make_file("a", 1024)
    fb = r.make_file("b", 1024)
    p1 = r.helper("reader256", "read", "--path", str(fa), "--seconds", "60", cgroup=small)
    p2 = r.helper("reader900", "read", "--path", str(fb), "--seconds", "60", cgroup=near)
    r.start_capture(330)
    r.at(50)
    a = r.cont(p1)
    z = r.wait(p1, 90)
    r.incident(
        "memcg-256m-reread",
        "memory_pressure",
        a,
        z,
        [p1],
        {"limit_mb": 256, "file_mb": 1024, "access": "sequential re-read for 60 s"},
        {
            "text": "usage pinned at the 256 MB limit, memory.failcnt climbing ~1000+/s, file refaults "
            "(~2 GB/s re-read from disk: iostat rkB/s up); reclaim of clean cache is cheap so host "
            "memory PSI stays low (~1-2 % some, measured before) -- host-level memory_pressure "
            "thresholds (PSI some 10 %) may not be met; the cgroup counters are the evidence",
            "failcnt_per_s": ">= 500",
            "usage_vs_limit": "~100 %",
            "host_psi_mem_some_pct": "~0-3",
        },
    )
    r.at(170)
    a = r.cont(p2)
    z = r.wait(p2, 90)
    r.incident(
        "memcg-900m-thrash",
        "memory_pressure",
        a,
        z,
        [p2],
        {"limit_mb": 900, "file_mb": 1024, "access": "sequential re-read for 60 s"},
        {
            "text": "a working set just above the limit: refaulted pages can be recognised as workingset "
            "(thrashing) and tasks stall on refaults: host memory PSI some of a few percent (7 % in a "
            "20 s test before the library was made; it varies with the host), failcnt climbing, "
            "usage at the 900 MB limit",
            "failcnt_per_s": ">= 500",
            "host_psi_mem_some_pct": "~1-10",
        },
    )


@scenario(
    "memcg-oom",
    "memory hogs in v1 memory cgroups grow until the kernel OOM-kills them (512 MB fast, 1 GB slow)",
)
def sc_memcg_oom(r: Run) -> None:
    a_cg = r.cgroup("oom-512m", ("memory", "cpuacct"), mem_limit=512 * MB)
    b_cg = r.cgroup("oom-1g", ("memory", "cpuacct"), mem_limit=1024 * MB)
    p1 = r.helper(
        "hog512", "hog", "--rate-mb-s", "64", "--step-mb", "16", "--max-mb", "4096", cgroup=a_cg
    )
    p2 = r.helper(
        "hog1g", "hog", "--rate-mb-s", "24", "--step-mb", "8", "--max-mb", "4096", cgroup=b_cg
    )
    r.start_capture(330)
    for pr, at, lim, rate, id, cgn in (
        (p1, 50, 512, 64, "oom-512m-fast", "oom-512m"),
        (p2, 150, 1024, 24, "oom-1g-slow", "oom-1g"),
    ):
        r.at(at)
        a = r.cont(pr)
        z = r.wait(pr, 120)
        kill = dmesg_kill(cgn, pr.pid)
        r.incident(
            id,
            "oom_kill",
            a,
            z,
            [pr],
            {"limit_mb": lim, "growth_mb_s": rate, "no_swap": True},
            {
                "text": f"anonymous memory grows at {rate} MB/s to the {lim} MB limit (~{lim / rate:.0f} s), "
                "then failcnt climbs and the memcg OOM killer kills the hog (SIGKILL, exit -9): a "
                "'Memory cgroup out of memory: Killed process' line in dmesg and memory.oom_control "
                "oom_kill +1",
                "kill_after_s": f"~{lim / rate:.0f}",
                "exit_code": -9,
            },
            phases={"oom_kill_dmesg": kill.get("epoch") if kill else None},
            why_kind="kernel OOM kill (memcg)",
        )
        r.incidents[-1]["oom_dmesg"] = kill
        r.incidents[-1]["point_event"] = {
            "what": "the kernel's OOM kill ('Killed process' line in dmesg)",
            "t": kill.get("epoch") if kill else None,
        }


def dmesg_kill(cg_name: str, ns_pid: int) -> dict[str, Any] | None:
    """The kernel's report of the kill of the hog in memory cgroup cg_name: its
    'oom-kill:' line (oom_memcg=/<cg>) and the 'Killed process' line after it. dmesg prints
    host PIDs; ISO times are the kernel's (boot time + monotonic clock)."""
    time.sleep(0.5)
    lines = cmd_out(["dmesg", "--time-format", "iso"]).splitlines()
    want = f"oom_memcg=/{CG_PREFIX}{cg_name},"
    at = None
    for i, line in enumerate(lines):
        if "oom-kill:" in line and want in line:
            at = i
    if at is None:
        return None
    kill = next((x for x in lines[at : at + 5] if "Killed process" in x), None)
    first = at
    while first > 0 and at - first < 80 and "invoked oom-killer" not in lines[first]:
        first -= 1

    def epoch(line: str) -> float | None:
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d+)([+-])(\d\d):?(\d\d)", line)
        if not m:
            return None
        import datetime as _dt

        base = _dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=_dt.UTC)
        off = (1 if m.group(3) == "+" else -1) * (int(m.group(4)) * 3600 + int(m.group(5)) * 60)
        return round(base.timestamp() - off + int(m.group(2)) / 10 ** len(m.group(2)), 6)

    hp = re.search(r"Killed process (\d+)", kill or "")
    return {
        "invoked_line": lines[first] if "invoked oom-killer" in lines[first] else None,
        "oom_kill_line": lines[at],
        "killed_line": kill,
        "epoch_invoked": epoch(lines[first]),
        "epoch": epoch(kill or lines[at]),
        "host_pid": int(hp.group(1)) if hp else None,
        "ns_pid": ns_pid,
    }


@scenario(
    "host-reclaim",
    "host-level reclaim: page cache full (8 GB file), anonymous memory to ~90 % of RAM twice (the 2nd with a streaming reader)",
)
def sc_host_reclaim(r: Run) -> None:
    job = r.cgroup("reclaim", ("cpu", "cpuacct", "memory"))
    big = r.make_file("big", 8192, job)
    log("reading it into the page cache")
    r.run_now("cache-fill", ["cat", str(big)], job)
    m = meminfo()
    r.notes.append(
        f"before the capture: an 8 GB file was written and read into the page cache "
        f"(Cached {m['Cached'] // 1024} MB, MemFree {m['MemFree'] // 1024} MB at capture start)"
    )
    floor = max(2400, m["MemTotal"] // 1024 // 10)
    args = [
        "--floor-mb",
        str(floor),
        "--emergency-mb",
        "1500",
        "--step-mb",
        "128",
        "--rate-mb-s",
        "1500",
    ]
    p1 = r.helper("fill1", "fill", *args, "--hold-s", "30", cgroup=job)
    p2 = r.helper("fill2", "fill", *args, "--hold-s", "40", "--reader", str(big), cgroup=job)
    r.start_capture(360)
    r.at(60)
    a = r.cont(p1)
    z = r.wait(p1, 120)
    r.incident(
        "reclaim-anon-ramp",
        "memory_pressure",
        a,
        z,
        [p1],
        {
            "floor_mb_available": floor,
            "ramp_mb_s": 1500,
            "hold_s": 30,
            "mem_total_mb": m["MemTotal"] // 1024,
        },
        {
            "text": "anonymous memory ramps at ~1.5 GB/s until MemAvailable ~floor (~90 % of RAM in use): free "
            "memory reaches the watermarks and kswapd reclaims the page cache (pgscan_kswapd, "
            "pgsteal_kswapd up; Cached drops by several GB); possibly some direct reclaim "
            "(allocstall) and memory PSI during the ramp; no swap, no OOM",
            "pgscan_kswapd": "> 0 (GBs)",
            "cached_drop_mb": "> 4000",
            "mem_available_min_mb": f"~{floor}",
        },
    )
    r.at(200)
    a = r.cont(p2)
    z = r.wait(p2, 120)
    r.incident(
        "reclaim-anon-plus-reader",
        "memory_pressure",
        a,
        z,
        [p2],
        {
            "floor_mb_available": floor,
            "ramp_mb_s": 1500,
            "hold_s": 40,
            "reader": "8 GB file re-read during the hold",
        },
        {
            "text": "same ramp, then a streaming reader while memory is held at the floor: kswapd (and maybe "
            "direct reclaim) keeps reclaiming the cache the reader fills, for the whole 40 s hold",
            "pgscan_per_s_during_hold": "> 0 for most seconds",
        },
    )


@scenario(
    "swap",
    "swap file on; a 768 MB process in a 256 MB memory cgroup is swapped out, later re-touches its pages",
)
def sc_swap(r: Run) -> None:
    r.swap(2048)
    cg = r.cgroup("swap-256m", ("memory", "cpuacct"), mem_limit=256 * MB)
    p = r.helper(
        "swapper",
        "swap",
        "--mb",
        "768",
        "--step-mb",
        "16",
        "--rate-mb-s",
        "96",
        "--retouch-s",
        "40",
        cgroup=cg,
    )
    r.start_capture(330)
    r.at(50)
    a = r.cont(p)
    limit = now() + 60
    while now() < limit and p.phase("alloc_end") is None:
        time.sleep(0.1)
    z1 = p.phase("alloc_end") or now()
    r.at(170)
    a2 = now()
    os.kill(p.pid, signal.SIGUSR1)
    z2 = r.wait(p, 90)
    r.incident(
        "swap-out",
        "swap_activity",
        a,
        z1,
        [p],
        {"alloc_mb": 768, "alloc_mb_s": 96, "memcg_limit_mb": 256, "swap_mb": 2048},
        {
            "text": "the process allocates 768 MB at 96 MB/s in a 256 MB cgroup: from ~3 s on, the overflow "
            "(~512 MB) is swapped out (vmstat so ~96 MB/s, pswpout up, SwapFree down by ~512 MB)",
            "swap_out_mb": "~512",
            "so_kb_s": "~50000-100000",
        },
    )
    r.incidents[-1]["phases"]["note"] = (
        "the process stays alive (idle, pages swapped out) until swap-thrash"
    )
    r.incident(
        "swap-thrash",
        "swap_activity",
        a2,
        z2,
        [p],
        {"retouch_s": 40, "memcg_limit_mb": 256, "resident_mb": 768},
        {
            "text": "the same process re-touches all 768 MB for 40 s: every pass swaps ~512 MB in and out "
            "(vmstat si and so both high, major faults), then exits (swap freed)",
            "si_kb_s": "> 10000",
            "so_kb_s": "> 10000",
        },
        phases={"sigusr1": a2},
    )
    r.notes.append(
        f"swap: a 2048 MB swap file ({SWAPFILE}) was swapped on before the capture and off after it"
    )


def _capture_children(cap_pid: int) -> list[tuple[int, str, str]]:
    """(pid, comm, cmdline) of every descendant of the capture script."""
    kids: dict[int, list[int]] = {}
    info = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            st = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2 :].split()[1])
        comm = st[st.index("(") + 1 : st.rindex(")")]
        kids.setdefault(ppid, []).append(int(d.name))
        info[int(d.name)] = (comm, cmd)
    out, todo = [], [cap_pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append((c, *info[c]))
            todo.append(c)
    return out


@scenario(
    "stopped-collector",
    "SIGSTOP of the capture's vmstat (20 s), mpstat (20 s), then of the samplers' ticker (25 s)",
)
def sc_stopped(r: Run) -> None:
    job = r.cgroup("job", ("cpu", "cpuacct"))
    idle = r.helper("job", "idle", cgroup=job)
    r.cont(idle)
    r.start_capture(330)

    def pick(pred: Callable[[str, str], bool]) -> list[int]:
        assert r.cap is not None
        return [p for p, comm, cmd in _capture_children(r.cap.pid) if pred(comm, cmd)]

    plan = [
        ("stop-vmstat", 50, 20, lambda c, cmd: c == "vmstat", "vmstat"),
        (
            "stop-mpstat",
            140,
            20,
            lambda c, cmd: c == "mpstat" and " -I " not in f" {cmd} ",
            "mpstat -P ALL",
        ),
        (
            "stop-samplers",
            230,
            25,
            lambda c, cmd: "hindsight-ticker" in cmd,
            "the samplers' ticker loop (psi, cgroup, meminfo, proc_vmstat share it)",
        ),
    ]
    for id, at, secs, pred, what in plan:
        r.at(at)
        pids = pick(lambda c, cmd, pred=pred: pred(c, cmd) and c != "timeout")
        if id == "stop-samplers":  # the ticker's shells, then the sleep the loop waits for
            pids += [p for p in pick(lambda c, cmd: c == "sleep") if _ppid(p) in pids]
        if not pids:
            raise RuntimeError(f"{id}: no process found to stop")
        a = now()
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        r.at(at + secs)
        for p in reversed(pids):
            os.kill(p, signal.SIGCONT)
        z = now()
        cmds = {
            str(p): next(
                (cmd[:160] for pp, c, cmd in _capture_children(r.cap.pid) if pp == p),  # type: ignore[union-attr]
                "(exited)",
            )
            for p in pids
        }
        r.incidents.append(
            {
                "id": id,
                "kind": "sampling_gap",
                "start": round(a, 3),
                "end": round(z, 3),
                "duration_s": round(z - a, 3),
                "pids": pids,
                "commands": cmds,
                "cgroup": None,
                "params": {"signal": "SIGSTOP then SIGCONT", "stopped_s": secs, "collector": what},
                "phases": {"sigstop": round(a, 3), "sigcont": round(z, 3)},
                "expected": {
                    "text": f"no new samples from {what} for ~{secs} s (one gap of ~{secs} s between two "
                    "consecutive timestamps), every other collector unaffected",
                    "largest_gap_s": f"~{secs}",
                },
                "observed": None,
            }
        )


def _ppid(pid: int) -> int:
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
        return int(st[st.rindex(")") + 2 :].split()[1])
    except OSError:
        return -1


@scenario(
    "softirq",
    "softirq load on CPU 1: stress-ng --udp-flood pinned to CPU 1, then iperf3 TCP over loopback pinned to CPU 1 (40 s each)",
)
def sc_softirq(r: Run) -> None:
    job = r.cgroup("net", ("cpu", "cpuacct"))
    p1 = r.proc(
        "udpflood", ["taskset", "-c", "1", "stress-ng", "--udp-flood", "1", "--timeout", "40s"], job
    )
    p2 = r.proc(
        "iperf3",
        [
            "sh",
            "-c",
            "iperf3 -s -1 -p 5299 -A 1 >/dev/null 2>&1 & sleep 0.5; "
            "exec iperf3 -c 127.0.0.1 -p 5299 -t 40 -A 1",
        ],
        job,
    )
    r.start_capture(300)
    r.at(50)
    a = r.cont(p1)
    z = r.wait(p1, 60)
    r.incident(
        "udp-flood-cpu1",
        "irq_hotspot",
        a,
        z,
        [p1],
        {"tool": "stress-ng --udp-flood 1", "cpu": 1, "seconds": 40},
        {
            "text": "UDP packets to random local ports, all on CPU 1: NET_RX softirq runs on CPU 1 (%soft "
            "~35-55 % of CPU 1 measured before, ~0 on CPU 0) -- below irq_hotspot's 80 % rule",
            "cpu1_soft_pct": "35-55",
            "cpu0_soft_pct": "~0",
        },
    )
    r.at(160)
    a = r.cont(p2)
    z = r.wait(p2, 60)
    r.incident(
        "iperf3-loopback-cpu1",
        "irq_hotspot",
        a,
        z,
        [p2],
        {"tool": "iperf3 TCP 127.0.0.1, client and server -A 1", "cpu": 1, "seconds": 40},
        {
            "text": "~15 Gbit/s of loopback TCP on CPU 1: %soft on CPU 1 of some tens of percent (18-27 % in "
            "a test before), the rest %sys; below irq_hotspot's 80 % rule",
            "cpu1_soft_pct": "~15-50",
        },
    )


# ------------------------------------------------------------------ the test service (symptom first)
SERVICE = HERE / "service.py"
#: the histogram's upper bounds (s): fine around the quiet ~11 ms, up to 10 s
SVC_BUCKETS = "0.005,0.01,0.0125,0.015,0.02,0.025,0.03,0.04,0.05,0.075,0.1,0.15,0.2,0.3,0.5,0.75,1,1.5,2,3,5,10"
#: the load generator: open loop, 25 requests/s of 10 ms CPU each (~27 % of a CPU with the
#: HTTP overhead), 8 workers
SVC_LOAD = {"rate": 25, "ms": 10, "threads": 8, "timeout_s": 60}
#: cpu.shares of the service's and the load generator's cgroups (v1; default 1024): the
#: other agents' work on this machine (root cgroup, nice 0: 1024 per task) then takes at
#: most a small share of the CPU the service runs on, so quiet time stays quiet; an
#: injected neighbour gets its own weight (`_shares`)
SVC_SHARES = 8192


def _shares(cg: dict[str, Path], shares: int) -> None:
    (cg["cpu"] / "cpu.shares").write_text(str(shares))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _service(
    r: Run,
    cgroup: dict[str, Path],
    load_cgroup: dict[str, Path],
    pin: str | None = None,
    load_pin: str | None = None,
    fsync_log: Path | None = None,
) -> tuple[Proc, Proc, str]:
    """samples/real/service.py (``--burn cpu``, its latency record in the work directory)
    in ``cgroup`` (pinned with taskset to CPU ``pin``), and its load generator in
    ``load_cgroup``; both started (the load ~5 s before the capture); returns them and the
    --app-metrics URL. The truth gets ``service`` (how, the load's parameters) and, at the
    end, the service's own latency record summarised (`_latency_truth`)."""
    port = _free_port()
    record = r.work / "latency.txt"
    _shares(cgroup, SVC_SHARES)
    _shares(load_cgroup, SVC_SHARES)
    taskset = ["taskset", "-c", pin] if pin else []
    argv = [
        *taskset, PY, str(SERVICE), "--port", str(port), "--burn", "cpu",
        "--record", str(record), "--comm", "hs-svc", "--buckets", SVC_BUCKETS,
        *(["--fsync-log", str(fsync_log)] if fsync_log else []),
    ]  # fmt: skip
    svc = r.proc("service", argv, cgroup)
    base = f"http://127.0.0.1:{port}"
    largv = [
        *(["taskset", "-c", load_pin] if load_pin else []), PY, str(SERVICE), "load",
        "--url", base, "--rate", str(SVC_LOAD["rate"]), "--ms", str(SVC_LOAD["ms"]),
        "--threads", str(SVC_LOAD["threads"]), "--timeout", str(SVC_LOAD["timeout_s"]),
        "--duration", "0", "--log", str(r.work / "load.log"), "--comm", "hs-load",
    ]  # fmt: skip
    load = r.proc("load", largv, load_cgroup)
    r.cont(svc)
    limit = now() + 20
    while "ready" not in (r.work / "service.out").read_text():
        if now() > limit or svc.p.poll() is not None:
            raise RuntimeError(f"the service did not start: {(r.work / 'service.out').read_text()}")
        time.sleep(0.05)
    r.cont(load)
    r.truth_extra["service"] = {
        "what": "samples/real/service.py: GET /infer?ms=N burns N ms of the handler thread's CPU "
        "time (--burn cpu), histogram demo_request_latency_seconds scraped with --app-metrics; "
        "latency = from the handler's start to its answer (fsync of the request log included "
        "where --fsync-log is given)",
        "pid": svc.pid,
        "command": " ".join(argv),
        "cgroup": svc.cgroups,
        "cpu_affinity": pin or "all",
        "cpu_shares": SVC_SHARES,
        "url": f"{base}/metrics",
        "buckets_s": SVC_BUCKETS,
        "fsync_log": str(fsync_log) if fsync_log else None,
        "load": {
            **SVC_LOAD,
            "pid": load.pid,
            "command": " ".join(largv),
            "cgroup": load.cgroups,
            "cpu_affinity": load_pin or "all",
            "cpu_shares": SVC_SHARES,
            "mode": "open loop: request k due at start + k / rate, sent by the first free worker",
            "started": round(load.started or 0, 3),
        },
    }
    r.finish_hooks.append(lambda t: _latency_truth(t, record))
    time.sleep(5)  # the service warms up before the capture
    return svc, load, f"{base}/metrics"


def _lat_summary(lat: list[float]) -> dict[str, Any]:
    """n, p50, p99, max of latencies in seconds, as ms (nearest rank)."""
    if not lat:
        return {"n": 0}
    xs = sorted(lat)

    def q(p: float) -> float:
        return round(
            1000 * xs[max(0, min(len(xs) - 1, -(-int(p * 1000) * len(xs) // 1000) - 1))], 2
        )

    return {"n": len(xs), "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": round(1000 * xs[-1], 2)}


def _latency_truth(truth: dict[str, Any], record: Path) -> None:
    """The service's own record (``<completion epoch> <latency s>`` per request): p50/p99
    over the capture, per incident, in the quiet windows, outside every incident; and per
    second (the second the request completed in, as the histogram observes it)."""
    rows = []
    for line in record.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            rows.append((float(parts[0]), float(parts[1])))
    mw = truth["made_with"]
    cs, ce = mw["capture_start_epoch"], mw["capture_end_epoch"]
    cap = [(t, v) for t, v in rows if cs <= t <= ce]
    incs = truth["incidents"]

    def inside(t: float, spans: list[dict[str, Any]]) -> bool:
        return any(float(s["start"]) <= t <= float(s["end"]) for s in spans)

    lat = truth["service"].setdefault("latency", {})
    lat["source"] = "the service's --record file (every request), not the histogram"
    lat["capture"] = _lat_summary([v for _, v in cap])
    lat["quiet_windows"] = _lat_summary([v for t, v in cap if inside(t, truth["quiet_windows"])])
    lat["outside_incidents"] = _lat_summary([v for t, v in cap if not inside(t, incs)])
    for inc in incs:
        inc["service_latency"] = _lat_summary(
            [v for t, v in cap if float(inc["start"]) <= t <= float(inc["end"])]
        )
    per: dict[int, list[float]] = {}
    for t, v in cap:
        per.setdefault(int(t), []).append(v)
    lat["per_second_columns"] = ["epoch_s", "n", "p50_ms", "p99_ms", "max_ms"]
    lat["per_second"] = [
        [s, (m := _lat_summary(v))["n"], m["p50_ms"], m["p99_ms"], m["max_ms"]]
        for s, v in sorted(per.items())
    ]


SVC_QUOTA_US, SVC_QUOTA_S = 20000, 35


@scenario(
    "svc-quota",
    "the test service (25 req/s of 10 ms CPU) in a v1 cpu cgroup: cfs_quota_us 20 % of a CPU for 35 s, 3 times",
)
def sc_svc_quota(r: Run) -> None:
    cg = r.cgroup("svc", ("cpu", "cpuacct"))
    svc, _load, url = _service(r, cg, r.cgroup("svc-load", ("cpu", "cpuacct")))
    quota = cg["cpu"] / "cpu.cfs_quota_us"
    r.start_capture(300, extra=["--app-metrics", url])
    for k, off in enumerate((60, 150, 235)):
        r.at(off)
        a = now()
        quota.write_text(str(SVC_QUOTA_US))
        r.at(off + SVC_QUOTA_S)
        quota.write_text("-1")
        z = now()
        r.incident(
            f"svc-quota-{k + 1}",
            "cpu_throttle",
            a,
            z,
            [],
            {
                "quota_us": SVC_QUOTA_US,
                "period_us": 100000,
                "seconds": SVC_QUOTA_S,
                "demand": "25 req/s x 10 ms CPU + HTTP overhead: ~25-30 % of a CPU",
            },
            {
                "text": "the service's demand (~27 % of a CPU) over a 20 % quota: most periods "
                "throttled, requests queue in the service (8 in flight at most), P99 from ~15 ms "
                "to hundreds of ms; back to the quiet level within seconds of the quota's removal",
                "symptom": "P99 of demo_request_latency_seconds up",
            },
            cgroup=[str(cg["cpu"])],
            phases={"quota_set": a, "quota_removed": z},
            extra={"pids": [svc.pid], "symptom_group": "cpu_quota"},
        )


@scenario(
    "svc-contention",
    "the test service pinned to CPU 1; stress-ng --cpu 4 pinned to CPU 1 for 30 s, 3 times",
)
def sc_svc_contention(r: Run) -> None:
    cg = r.cgroup("svc", ("cpu", "cpuacct"))
    svc, _load, url = _service(r, cg, r.cgroup("svc-load", ("cpu", "cpuacct")), "1", "0")
    nb = r.cgroup("neighbour", ("cpu", "cpuacct"))
    _shares(nb, 4 * SVC_SHARES)  # 4 workers, each weighing as much as the service
    ns = [
        r.proc(f"neighbour{k + 1}", ["taskset", "-c", "1", "stress-ng", "--cpu", "4", "--timeout", "30s"], nb)
        for k in range(3)
    ]  # fmt: skip
    r.start_capture(300, extra=["--app-metrics", url])
    for k, off in enumerate((60, 150, 235)):
        r.at(off)
        a = r.cont(ns[k])
        z = r.wait(ns[k], 45)
        r.incident(
            f"svc-contention-{k + 1}",
            "cpu_contention",
            a,
            z,
            [ns[k]],
            {
                "tool": "taskset -c 1 stress-ng --cpu 4 --timeout 30s",
                "cpu": 1,
                "service_cpu": 1,
                "load_generator_cpu": 0,
                "cpu_shares": 4 * SVC_SHARES,
                "service_cpu_shares": SVC_SHARES,
            },
            {
                "text": "4 busy workers on the service's CPU: the service gets ~1/5 of CPU 1, "
                "less than its ~27 % demand: run queue +4, CPU PSI up, requests queue, P99 up "
                "to hundreds of ms",
                "symptom": "P99 of demo_request_latency_seconds up",
            },
            extra={"service_pid": svc.pid, "symptom_group": "cpu_contention"},
        )


@scenario(
    "svc-writeburst",
    "the test service (pinned to CPU 1) fsyncs a request log on vda; 25 s write bursts (1 GB rounds + fsync, writer on CPU 0), 3 times",
)
def sc_svc_writeburst(r: Run) -> None:
    cg = r.cgroup("svc", ("cpu", "cpuacct"))
    svc, _load, url = _service(
        r, cg, r.cgroup("svc-load", ("cpu", "cpuacct")), "1", "0", fsync_log=r.work / "requests.log"
    )
    wcg = r.cgroup("writer", ("cpu", "cpuacct", "memory"))
    ws = [
        r.helper(f"burst{k + 1}", "wburst", "--path", str(r.work / f"burst{k + 1}.dat"),
                 "--mb", "1024", "--chunk-mb", "16", "--seconds", "25",
                 cgroup=wcg, prefix=["taskset", "-c", "0"])
        for k in range(3)
    ]  # fmt: skip
    r.start_capture(300, extra=["--app-metrics", url])
    for k, off in enumerate((60, 150, 235)):
        r.at(off)
        a = r.cont(ws[k])
        z = r.wait(ws[k], 60)
        r.incident(
            f"svc-writeburst-{k + 1}",
            "io_saturation",
            a,
            z,
            [ws[k]],
            {
                "mb_per_round": 1024,
                "chunk_mb": 16,
                "fsync": "after every round",
                "seconds": 25,
                "writer_cpu": 0,
                "service_cpu": 1,
                "path": "/var/tmp/hs-real/work-svc-writeburst/ (vda, ext4)",
            },
            {
                "text": "GBs of buffered writes + fsync for 25 s: the disk's queue full of the "
                "writer's writeback (w_await tens of ms, aqu-sz up, Dirty/Writeback up); every "
                "request's fsync of its log line waits behind it: P99 up",
                "symptom": "P99 of demo_request_latency_seconds up",
            },
            why_kind="write bursts without GPU data: io_saturation (or checkpoint_stall when "
            "the bursts look periodic: 3 bursts 85-90 s apart); buffered bursts rarely reach "
            "%util 90 on this disk (README)",
            extra={
                "also_kinds": ["checkpoint_stall"],
                "service_pid": svc.pid,
                "symptom_group": "io",
            },
        )


def _svc_noisy(r: Run, pin: str) -> None:
    """The pair: a continuous neighbour (2 busy workers pinned to CPU 1) all along; the
    service pinned to CPU ``pin`` (1: shares the neighbour's CPU; 0: away from it). Every
    cgroup has the same name in both (memory ones too, not the per-scenario default), so
    that ``hindsight diff`` of the pair compares like with like."""
    ctl = ("cpu", "cpuacct", "memory")
    cg = r.cgroup("svc", ctl)
    nbcg = r.cgroup("neighbour", ctl)
    _shares(nbcg, 2 * SVC_SHARES)  # 2 workers, each weighing as much as the service
    nb = r.proc(
        "neighbour", ["taskset", "-c", "1", "stress-ng", "--cpu", "2", "--timeout", "400s"], nbcg
    )
    a = r.cont(nb)
    svc, _load, url = _service(r, cg, r.cgroup("svc-load", ctl), pin)
    r.start_capture(180, extra=["--app-metrics", url])
    r.at(181)
    z = r.stop(nb)
    shared = pin == "1"
    r.incident(
        "noisy-neighbour",
        "cpu_contention",
        a,
        z,
        [nb],
        {
            "tool": "taskset -c 1 stress-ng --cpu 2",
            "neighbour_cpu": 1,
            "service_cpu": int(pin),
            "cpu_shares": 2 * SVC_SHARES,
            "service_cpu_shares": SVC_SHARES,
            "all_along": "started before the capture, stopped after its last sample",
        },
        {
            "text": (
                "the service shares CPU 1 with 2 busy workers: it gets ~1/3 of the CPU for a "
                "~27 % demand, so every request waits in the run queue: P99 high all along (no "
                "symptom window expected: the whole capture is the baseline)"
            )
            if shared
            else (
                "the same neighbour on CPU 1; the service is pinned to CPU 0, away from it: its "
                "P99 stays at the quiet level (host-wide run queue still +2)"
            ),
            "symptom": "P99 high all along" if shared else "P99 quiet all along",
        },
        extra={
            "service_pid": svc.pid,
            "symptom_group": "cpu_contention" if shared else None,
            "all_capture": True,
        },
    )
    r.truth_extra["pair"] = {
        "before": "svc-noisy-before",
        "after": "svc-noisy-after",
        "change": "the service (comm hs-svc) pinned from CPU 1 (the neighbour's) to CPU 0 with "
        "taskset -c: the pids snapshot's taskset line (sched.hs-svc.cpu_affinity) differs",
    }


@scenario(
    "svc-noisy-before",
    "pair, before: the test service and a continuous noisy neighbour (stress-ng --cpu 2) share CPU 1 (180 s)",
)
def sc_svc_noisy_before(r: Run) -> None:
    _svc_noisy(r, "1")


@scenario(
    "svc-noisy-after",
    "pair, after: the same neighbour on CPU 1, the test service pinned to CPU 0 (180 s)",
)
def sc_svc_noisy_after(r: Run) -> None:
    _svc_noisy(r, "0")


@scenario("quiet-1", "no incident: only what the machine does anyway (other agents' work)")
def sc_quiet1(r: Run) -> None:
    job = r.cgroup("job", ("cpu", "cpuacct"))
    idle = r.helper("job", "idle", cgroup=job)
    r.cont(idle)
    r.start_capture(300)
    r.at(300)


@scenario(
    "quiet-2",
    "no incident: background plus a light neighbour (stress-ng --cpu 1 --cpu-load 20) all along",
)
def sc_quiet2(r: Run) -> None:
    job = r.cgroup("neighbour", ("cpu", "cpuacct"))
    nb = r.proc(
        "neighbour", ["stress-ng", "--cpu", "1", "--cpu-load", "20", "--timeout", "400s"], job
    )
    r.cont(nb)
    r.background.append(
        {
            "what": "light neighbour: stress-ng --cpu 1 --cpu-load 20 (one worker at ~20 % of a CPU)",
            "pid": nb.pid,
            "cgroup": nb.cgroups,
            "start": round(nb.started or 0, 3),
            "note": "started before the capture, killed after it",
        }
    )
    time.sleep(5)
    r.start_capture(300)
    r.at(300)


@scenario(
    "smoke",
    "(tests this tool: 45 s, one 10 s busy loop under a 20 % quota; not part of the library)",
)
def sc_smoke(r: Run) -> None:
    cg = r.cgroup("smoke", ("cpu", "cpuacct"), quota_us=20000)
    p = r.proc("busy", BUSY, cg)
    r.start_capture(45)
    r.at(15)
    a = r.cont(p)
    r.at(25)
    z = r.stop(p)
    r.incident(
        "smoke-throttle", "cpu_throttle", a, z, [p], {"quota_us": 20000}, {"text": "throttled"}
    )


# ------------------------------------------------------------------ inner / outer
def inner_main(scenario_name: str, out: Path) -> int:
    r = Run(scenario_name, out)
    stop = {"sig": None}

    def on_sig(signum: int, _frame: Any) -> None:
        stop["sig"] = signum
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sig)
    signal.signal(signal.SIGHUP, on_sig)
    signal.signal(signal.SIGINT, on_sig)
    ok = False
    try:
        Path("/sys/kernel/tracing").mkdir(exist_ok=True)
        if (
            subprocess.run(
                ["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True
            ).returncode
            != 0
        ):
            r.notes.append("tracefs could not be mounted: bpftrace will fail")
        doc, fn = SCENARIOS[scenario_name]
        r.description = doc
        fn(r)
        r.finish()
        ok = True
    except KeyboardInterrupt:
        log(f"interrupted (signal {stop['sig']}): cleaning up, no bundle written")
    finally:
        r.cleanup()
        if ok and os.environ.get("HS_KEEP_TMP") != "1":
            shutil.rmtree(r.work, ignore_errors=True)
    return 0 if ok else 1


class Background(threading.Thread):
    """Every 2 s: load average, CPU and disk I/O of the processes outside the namespace."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.own_ns = os.readlink("/proc/self/ns/pid")
        self.stop_ev = threading.Event()
        self.rows: list[list[Any]] = []
        self.hz = os.sysconf("SC_CLK_TCK")

    def snap(self) -> dict[int, tuple[str, int, int, int]]:
        out = {}
        me = os.getpid()
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == me:
                continue
            try:
                if os.readlink(d / "ns/pid") != self.own_ns:
                    continue
                st = (d / "stat").read_text()
                comm = st[st.index("(") + 1 : st.rindex(")")]
                f = st[st.rindex(")") + 2 :].split()
                cpu = int(f[11]) + int(f[12])
                rb = wb = 0
                for line in (d / "io").read_text().splitlines():
                    if line.startswith("read_bytes:"):
                        rb = int(line.split()[1])
                    elif line.startswith("write_bytes:"):
                        wb = int(line.split()[1])
                out[int(d.name)] = (comm, cpu, rb, wb)
            except (OSError, ValueError):
                continue
        return out

    def run(self) -> None:
        prev, tp = self.snap(), now()
        while not self.stop_ev.wait(2.0):
            cur, tc = self.snap(), now()
            dt = tc - tp
            cpu_by: dict[str, float] = {}
            rd = wr = 0
            for pid, (comm, cpu, rb, wb) in cur.items():
                if pid in prev:
                    _, c0, r0, w0 = prev[pid]
                    cpu_by[comm] = cpu_by.get(comm, 0) + (cpu - c0) / self.hz / dt * 100
                    rd += max(0, rb - r0)
                    wr += max(0, wb - w0)
            top = sorted(cpu_by.items(), key=lambda kv: -kv[1])[:3]
            self.rows.append(
                [
                    round(tc, 1),
                    loadavg()[0],
                    round(sum(cpu_by.values()), 1),
                    round(rd / dt / MB, 1),
                    round(wr / dt / MB, 1),
                    " ".join(f"{c}:{v:.0f}" for c, v in top if v >= 5),
                ]
            )
            prev, tp = cur, tc


def outer_main(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("inject.py needs root (cgroups, swap, bpftrace, dmesg)", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.keep_tmp:
        os.environ["HS_KEEP_TMP"] = "1"
    TMP.mkdir(parents=True, exist_ok=True)
    cleanup_machine("before")
    bg = Background()
    bg.start()
    ps_start = cmd_out(["ps", "-eo", "comm,pcpu,rss", "--sort=-pcpu", "--no-headers"]).splitlines()[
        :8
    ]
    la0 = loadavg()
    cmd = [
        "unshare",
        "--pid",
        "--fork",
        "--mount-proc",
        "--propagation",
        "private",
        PY,
        SELF,
        "--inner",
        args.scenario,
        "--out",
        str(out),
    ]
    p = subprocess.Popen(cmd, env={**ENV, **({"HS_KEEP_TMP": "1"} if args.keep_tmp else {})})
    prev_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the inner one gets it and cleans up

    def fwd(signum: int, _f: Any) -> None:
        with contextlib.suppress(OSError):
            p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, fwd)
    rc = p.wait()
    signal.signal(signal.SIGINT, prev_int)
    bg.stop_ev.set()
    bg.join(5)
    cleanup_machine("after")
    ps_end = cmd_out(["ps", "-eo", "comm,pcpu,rss", "--sort=-pcpu", "--no-headers"]).splitlines()[
        :8
    ]
    tf = out / f"{args.scenario}.truth.json"
    if rc == 0 and tf.exists():
        t = json.loads(tf.read_text())
        cs, ce = t["made_with"]["capture_start_epoch"], t["made_with"]["capture_end_epoch"]
        rows = [r for r in bg.rows if cs - 2 <= r[0] <= ce + 2]
        t["background"].insert(
            0,
            {
                "what": "the machine's own work: other agents' test suites and tools ran in parallel (not "
                "controlled); sampled every 2 s from outside the capture's namespace",
                "load_avg_before": la0,
                "top_processes_before": [" ".join(x.split()) for x in ps_start],
                "top_processes_after": [" ".join(x.split()) for x in ps_end],
                "series_columns": [
                    "epoch",
                    "load1",
                    "foreign_cpu_pct_of_one_cpu",
                    "foreign_read_mb_s",
                    "foreign_write_mb_s",
                    "top_foreign_comm:cpu_pct",
                ],
                "series": rows,
                "summary": _bg_summary(rows),
                "kernel_log_events": _kernel_events(cs, ce, t),
                "kernel_log_before_capture": _kernel_before(cs),
            },
        )
        annotate_quiet(t)
        tf.write_text(json.dumps(t, indent=1) + "\n")
    return rc


def annotate_quiet(t: dict[str, Any]) -> None:
    """Per quiet window and incident: what the rest of the machine did there (from the 2 s
    background series): a quiet window is free of injected incidents, not of other work."""
    rows = t["background"][0].get("series", [])
    for w in [*t["quiet_windows"], *t["incidents"]]:
        rs = [r for r in rows if w["start"] <= r[0] <= w["end"] + 2]
        if not rs:
            continue
        w["foreign"] = {
            "cpu_pct_max": max(r[2] for r in rs),
            "write_mb_s_max": max(r[4] for r in rs),
            "read_mb_s_max": max(r[3] for r in rs),
            "write_bursts_over_50mb_s": [[r[0], r[4], r[5]] for r in rs if r[4] >= 50],
        }


KERNEL_EVENT = re.compile(
    r"oom-kill:|Killed process|invoked oom-killer|blocked for more than|I/O error|"
    r"segfault|soft lockup|hung_task|Out of memory|Adding \d+k swap|swapoff|Xid"
)


def _kernel_events(cs: float, ce: float, truth: dict[str, Any]) -> list[dict[str, Any]]:
    """Notable kernel log lines during the capture, and whether this scenario caused them
    (an OOM kill in one of its cgroups): others come from the rest of the machine."""
    ours = {c.rsplit("/", 1)[-1] for i in truth["incidents"] for c in (i.get("cgroup") or [])}
    out = []
    for line in cmd_out(["dmesg", "--time-format", "iso"]).splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d+)\+00:?00\s", line)
        if not m or not KERNEL_EVENT.search(line):
            continue
        import datetime as _dt

        t = (
            _dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
            .replace(tzinfo=_dt.UTC)
            .timestamp()
        )
        t += int(m.group(2)) / 10 ** len(m.group(2))
        if cs - 1 <= t <= ce + 1:
            mine = any(f"/{c}," in line or f"/{c} " in line for c in ours) or str(SWAPFILE) in line
            out.append({"t": round(t, 6), "line": line[:300], "from_this_scenario": bool(mine)})
    for i, o in enumerate(
        out
    ):  # an OOM report: 'invoked oom-killer', 'oom-kill:...', 'Killed process'
        if "oom-kill:" in o["line"] and o["from_this_scenario"]:
            for j in (i - 1, i + 1):
                if 0 <= j < len(out) and (
                    "invoked oom-killer" in out[j]["line"] or "Killed process" in out[j]["line"]
                ):
                    out[j]["from_this_scenario"] = True
    return out


def _kernel_before(cs: float) -> dict[str, Any]:
    """What the ring buffer (the bundle's snap/dmesg_full) already held: OOM kills before the
    capture (earlier scenarios and tests on this machine), so that reports of them are not
    taken for incidents of this capture."""
    kills = []
    for line in cmd_out(["dmesg", "--time-format", "iso"]).splitlines():
        if "Killed process" in line or "oom-kill:" in line:
            kills.append(line)
    before = [x for x in kills if x[:19] < time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cs))]
    return {
        "oom_kill_lines_before_capture": len([x for x in before if "Killed process" in x]),
        "last": before[-2:],
    }


def backfill(truth_path: Path) -> None:
    """Add kernel_log_events / kernel_log_before_capture to a truth file made before they existed."""
    t = json.loads(truth_path.read_text())
    cs, ce = t["made_with"]["capture_start_epoch"], t["made_with"]["capture_end_epoch"]
    bg = t["background"][0]
    bg.setdefault("kernel_log_events", _kernel_events(cs, ce, t))
    bg.setdefault("kernel_log_before_capture", _kernel_before(cs))
    annotate_quiet(t)
    truth_path.write_text(json.dumps(t, indent=1) + "\n")


def _bg_summary(rows: list[list[Any]]) -> dict[str, Any]:
    if not rows:
        return {}
    import statistics as st

    cpu = [r[2] for r in rows]
    wr = [r[4] for r in rows]
    rd = [r[3] for r in rows]
    bursts = [[r[0], r[4], r[5]] for r in rows if r[4] >= 50]
    return {
        "load1_min_max": [min(r[1] for r in rows), max(r[1] for r in rows)],
        "foreign_cpu_pct_median": round(st.median(cpu), 1),
        "foreign_cpu_pct_max": max(cpu),
        "foreign_write_mb_s_median": round(st.median(wr), 1),
        "foreign_write_mb_s_max": max(wr),
        "foreign_read_mb_s_max": max(rd),
        "foreign_write_bursts_over_50mb_s": bursts,
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--load":
        return load_main(sys.argv[2:])
    if len(sys.argv) > 2 and sys.argv[1] == "--backfill":
        for p in sys.argv[2:]:
            backfill(Path(p))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="?")
    ap.add_argument("--out", default=str(HERE))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--keep-tmp", action="store_true", help="keep the work directory (capture dir, load logs)"
    )
    args = ap.parse_args()
    if args.list or not args.scenario:
        for k, (doc, _) in SCENARIOS.items():
            print(f"{k:24s} {doc}")
        return 0
    if args.scenario not in SCENARIOS:
        print(f"unknown scenario {args.scenario!r}; --list", file=sys.stderr)
        return 2
    if args.inner:
        return inner_main(args.scenario, Path(args.out))
    return outer_main(args)


if __name__ == "__main__":
    sys.exit(main())
