"""Timing helpers: run a command, get its wall time and peak RSS; medians of repeats."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    """One child process: wall seconds, ``wait4`` max RSS (MiB; includes the memory of
    the parent it was forked from), exit code, stdout, stderr."""

    wall: float
    rss_mb: float
    rc: int
    out: str
    err: str = ""
    cpu: float = 0.0  # user + system seconds of the child (all its threads)


def run(cmd: list[str], stdin: Path | None = None, timeout: float = 3600) -> Run:
    """Run ``cmd`` (stdout captured, stderr to a pipe that is drained at the end)."""
    t0 = time.perf_counter()
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            cmd, stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
        )
        deadline = t0 + timeout
        out = b""
        # communicate() would reap the child; wait4 is needed for its own rusage.
        import threading

        chunks: list[bytes] = []
        errs: list[bytes] = []
        readers = [
            threading.Thread(target=lambda: chunks.append(proc.stdout.read())),  # type: ignore[union-attr]
            threading.Thread(target=lambda: errs.append(proc.stderr.read())),  # type: ignore[union-attr]
        ]
        for r in readers:
            r.start()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        for r in readers:
            r.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out = b"".join(chunks)
        if proc.returncode:
            sys.stderr.write(b"".join(errs).decode("utf-8", "replace")[-2000:])
    finally:
        if stdin:
            fin.close()  # type: ignore[union-attr]
    err = b"".join(errs).decode("utf-8", "replace")
    cpu = usage.ru_utime + usage.ru_stime
    return Run(
        wall, usage.ru_maxrss / 1024, proc.returncode, out.decode("utf-8", "replace"), err, cpu
    )


def median_runs(cmd: list[str], repeats: int, stdin: Path | None = None) -> list[Run]:
    return [run(cmd, stdin) for _ in range(repeats)]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def wc_seconds(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``wc -l`` on ``path`` (the same-run yardstick)."""
    r = run(["wc", "-l", str(path)])
    return r.wall, r.cpu


def parse_child(tool: str, path: Path) -> tuple[dict[str, object], Run]:
    r = run([sys.executable, "-m", "tests.benchmarks.child", "parse", tool, str(path)])
    if r.rc:
        raise RuntimeError(f"parse child failed for {path} ({tool}): rc={r.rc}")
    return json.loads(r.out.strip().splitlines()[-1]), r


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"
