"""Benchmark of `hindsight fleet`: N hosts × T of one host shape, one straggler.

Not part of the test run (pytest collects ``test_*.py`` only). Run from the repository root:

    .venv/bin/python -m tests.benchmarks.bench_fleet                 # 64 hosts × 1 h, 16 CPU / 8 GPU
    .venv/bin/python -m tests.benchmarks.bench_fleet --small         # 8 hosts × 5 min: a quick check
    .venv/bin/python -m tests.benchmarks.bench_fleet --hosts 16 --seconds 600 --jobs 2

It generates the bundles with `hindsight synth` (`analyzer.synth.generate`; one host,
``node07`` by default, gets a ``cpu_throttle`` incident over its whole capture — the
straggler), runs ``hindsight fleet`` on them in a subprocess, samples the resident memory
of the whole process tree (the command and its worker processes) every 0.1 s, and prints
one Markdown table row: hosts, capture length, shape, jobs, wall time, CPU time (user +
sys of the command and its workers, which a busy machine does not inflate), peak RSS of the
tree (sum over processes) and of the largest single process, input and dataset sizes,
and whether the straggler was ranked first. ``--repeat N`` runs fleet N times and reports
the median time and the largest peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _gen(args: tuple[str, int, int, int, int, int, bool, str]) -> str:
    hostname, seconds, cpus, gpus, disks, seed, slow, out = args
    from analyzer.synth import generate
    from analyzer.synth.spec import Incident, Spec

    incidents = [Incident("cpu_throttle", 0, seconds)] if slow else []
    spec = Spec(
        hostname=hostname,
        seconds=seconds,
        cpus=cpus,
        gpus=gpus,
        disks=disks,
        seed=seed,
        incidents=incidents,
    )
    return str(generate(spec, Path(out)))


def generate_bundles(folder: Path, a: argparse.Namespace) -> float:
    t0 = time.monotonic()
    jobs = [
        (f"node{i:02d}", a.seconds, a.cpus, a.gpus, a.disks, 1000 + i, f"node{i:02d}" == a.straggler,
         str(folder / f"hindsight-node{i:02d}.tgz"))
        for i in range(a.hosts)
    ]  # fmt: skip
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(_gen, jobs))
    for p in folder.glob("*.ground-truth.json"):  # keep the folder a plain set of bundles
        p.unlink()
    return time.monotonic() - t0


def _tree_rss(root_pid: int) -> tuple[int, int]:
    """(sum, max) resident bytes of ``root_pid`` and its descendants."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier += kids
    sizes = [rss.get(p, 0) for p in tree]
    return sum(sizes), max(sizes, default=0)


def run_fleet(bundles: Path, work: Path, jobs: int) -> dict[str, float | int | str]:
    out = work / "fleet.html"
    cmd = [
        sys.executable,
        "-m",
        "analyzer",
        "fleet",
        str(bundles),
        "-o",
        str(out),
        "--json",
        str(work / "fleet.json"),
        "-j",
        str(jobs),
        "-q",
    ]
    peak = [0, 0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def sample() -> None:
        while proc.poll() is None:
            total, largest = _tree_rss(proc.pid)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], largest)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for workers are included
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(
            f"fleet failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}"
        )
    doc = json.loads((work / "fleet.json").read_text())
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_tree": peak[0],
        "peak_proc": peak[1],
        "first": doc["hosts"][0]["host"],
        "dataset": _size(work / "fleet.dataset"),
    }


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--cpus", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--disks", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=0, help="fleet --jobs (0: its default)")
    ap.add_argument("--straggler", default="node07")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--small", action="store_true", help="8 hosts × 300 s: a quick check")
    ap.add_argument("--keep", type=Path, help="generate into / reuse bundles from this directory")
    a = ap.parse_args(argv)
    if a.small:
        a.hosts, a.seconds = 8, 300
    work = Path(tempfile.mkdtemp(prefix="hindsight-bench-fleet-"))
    try:
        bundles = a.keep or work / "bundles"
        bundles.mkdir(parents=True, exist_ok=True)
        gen_s = 0.0
        if not any(bundles.glob("*.tgz")):
            gen_s = generate_bundles(bundles, a)
        runs = []
        for i in range(a.repeat):
            run_dir = work / f"run{i}"
            run_dir.mkdir()
            runs.append(run_fleet(bundles, run_dir, a.jobs))
            if i < a.repeat - 1:
                shutil.rmtree(run_dir)
        wall = statistics.median(float(r["wall_s"]) for r in runs)
        cpu = statistics.median(float(r["cpu_s"]) for r in runs)
        peak_tree = max(int(r["peak_tree"]) for r in runs)
        peak_proc = max(int(r["peak_proc"]) for r in runs)
        inputs = sum(p.stat().st_size for p in bundles.glob("*.tgz"))
        ok = all(r["first"] == a.straggler for r in runs)
        jobs = a.jobs or min(os.cpu_count() or 1, 4)
        load = os.getloadavg()[0]
        print(
            f"# fleet benchmark {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load {load:.1f}; bundles generated in {gen_s:.0f} s"
        )
        print(
            f"| hosts | capture | shape (CPU/GPU/disk) | jobs | wall (median of {a.repeat}) | CPU (user+sys) | peak RSS, tree | peak RSS, one process | bundles (.tgz) | dataset | straggler first |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print(
            f"| {a.hosts} | {a.seconds} s | {a.cpus}/{a.gpus}/{a.disks} | {jobs} | {wall:.1f} s | {cpu:.0f} s | "
            f"{peak_tree / 2**30:.2f} GiB | {peak_proc / 2**30:.2f} GiB | {inputs / 2**20:.0f} MiB | "
            f"{int(runs[0]['dataset']) / 2**20:.0f} MiB | {'yes' if ok else 'NO: ' + str(runs[0]['first'])} |"
        )
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
