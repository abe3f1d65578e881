"""Issue #19, "where in the code": a real capture (as root, with bpftrace) of a CPU-bound C
program and a CPU-bound Python loop, analysed; its stacks land in ``stack_samples`` with
the hot functions, py-spy's dump names the Python function, and the report's flame graph
shows the C hot function in real Chromium. Without bpftrace (``--no-bpf``) the capture
still succeeds and the report says why there are no stacks.

The C program is built here with ``cc -O1 -g -fno-omit-frame-pointer`` (bpftrace's
``ustack`` walks frame pointers); Debian's Python has none, so under bpftrace its stacks are
interpreter frames (``_PyEval_EvalFrameDefault``) and only py-spy gives ``hot_python_loop``.

The perf fallback: the same capture with bpftrace hidden from PATH (a folder of symlinks
to every other command) runs ``perf record`` (``perf_stacks``) into the same tables, and
the flame graph shows the C hot function.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.capture.capture_helpers import restricted_path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "capture" / "hindsight-capture.sh"
HOT_C = r"""
#include <stdint.h>
#include <stdio.h>
__attribute__((noinline)) uint64_t hot_c_inner(uint64_t x) {
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}
int main(void) { uint64_t x = 1; for (;;) { x = hot_c_inner(x); if (x == 3) break; } printf("%llu\n", (unsigned long long)x); return 0; }
"""
HOT_PY = "def hot_python_loop():\n    x = 0\n    while True:\n        x = (x * 31 + 7) % 1000003\n\n\nhot_python_loop()\n"

pytestmark = [pytest.mark.capture, pytest.mark.slow]


@dataclass
class Captured:
    db: Path
    report: Path
    py_spy: bool


def _env() -> dict[str, str]:
    # the venv's bin first: py-spy is installed there (pip install py-spy)
    path = f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin"
    return {"PATH": path, "HINDSIGHT_CMD_TIMEOUT": "30"}


def _capture_and_analyse(out: Path, *args: str, path: str | None = None) -> tuple[Path, Path]:
    env = _env() if path is None else {**_env(), "PATH": path}
    cap = subprocess.run(
        ["sh", str(SCRIPT), "-i", "1", "--no-gpu", *args, "-o", str(out / "bundle")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert cap.returncode == 0, cap.stderr
    bundle = Path(cap.stdout.strip())
    db, report = out / "c.duckdb", out / "report.html"
    run = subprocess.run(
        [sys.executable, "-m", "analyzer", "analyze", str(bundle), "-q", "--db", str(db), "-o", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return db, report


def _compile_hot_c(tmp: Path) -> Path:
    """The CPU-bound C program, with frame pointers and symbols (skips without a compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc) for the CPU-bound C program")
    (tmp / "hot.c").write_text(HOT_C)
    subprocess.run([cc, "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(tmp / "hot_c"), str(tmp / "hot.c")], check=True)  # fmt: skip
    return tmp / "hot_c"


@contextlib.contextmanager
def _running(*argvs: list[str]) -> Iterator[list[subprocess.Popen]]:
    """The workloads, each in its own session, killed (with their children) afterwards."""
    procs = [subprocess.Popen(a, start_new_session=True) for a in argvs]
    try:
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    if os.geteuid() != 0:
        pytest.skip("bpftrace stacks need root")
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace not installed")
    tmp = tmp_path_factory.mktemp("stacks")
    hot_c = _compile_hot_c(tmp)
    (tmp / "hot.py").write_text(HOT_PY)
    py = shutil.which("python3", path="/usr/bin:/usr/local/bin") or sys.executable
    with _running([str(hot_c)], [py, str(tmp / "hot.py")]) as procs:
        pids = [a for p in procs for a in ("--pid", str(p.pid))]
        db, report = _capture_and_analyse(tmp, "-d", "24", *pids)
    have_spy = (Path(sys.executable).parent / "py-spy").exists() or shutil.which(
        "py-spy"
    ) is not None
    return Captured(db, report, have_spy)


def _skip_if_bpftrace_lost_the_stacks(db: Path) -> None:
    """bpftrace 0.17 prints an empty stack for a sample whose stack-id lookup failed
    ("failed to look up stack id N (pid P): -9" in its stderr), and nothing at all when its
    perf event descriptors went bad ("ioctl(PERF_EVENT_IOC_DISABLE) failed: Bad file
    descriptor"): a state of the host, seen on this VM after hours of concurrent bpftrace
    runs (docs/capture.md). When most of the C workload's samples lost their stack that way,
    there is nothing to check about our stack handling: skip, saying so."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        err = con.sql(
            "SELECT coalesce(stderr_tail, '') FROM collectors WHERE collector = 'bpf_stacks'"
        ).fetchall()
        lost, total = con.sql(
            "SELECT coalesce(sum(samples) FILTER (WHERE leaf = '[no stack]'), 0), "
            "coalesce(sum(samples), 0) FROM stack_samples WHERE comm = 'hot_c'"
        ).fetchall()[0]
    finally:
        con.close()
    text = err[0][0] if err else ""
    broken = "failed to look up stack id" in text or "Bad file descriptor" in text
    if broken and (total == 0 or lost > total / 2):
        pytest.skip(
            f"bpftrace lost the stacks of {lost} of {total} samples (stack-id lookups or its "
            "perf event descriptors failed: see bpf_stacks' stderr)"
        )


def test_the_hot_functions_of_both_workloads_are_in_stack_samples(captured: Captured) -> None:
    _skip_if_bpftrace_lost_the_stacks(captured.db)
    con = duckdb.connect(str(captured.db), read_only=True)
    (status,) = con.sql("SELECT status FROM collectors WHERE collector = 'bpf_stacks'").fetchall()
    assert status[0] == "parsed", status
    by_comm = dict(
        con.sql(
            "SELECT comm, sum(samples) FROM stack_samples WHERE comm IN ('hot_c', 'python3') GROUP BY comm"
        ).fetchall()
    )
    # two CPU-bound processes on this VM's 2 CPUs, 49 Hz, at least one 10 s slice: ~490
    # samples each on an idle VM; a shared VM (load 7) gives them far less
    assert by_comm.get("hot_c", 0) >= 50 and by_comm.get("python3", 0) >= 50, by_comm
    hot = con.sql(
        "SELECT sum(samples) FROM stack_samples WHERE comm = 'hot_c' AND leaf = 'hot_c_inner'"
    ).fetchall()[0][0]
    assert hot and hot >= 0.8 * by_comm["hot_c"], (hot, by_comm)
    interp = con.sql(
        "SELECT sum(samples) FROM stack_samples WHERE comm = 'python3' "
        "AND stack LIKE '%_PyEval_EvalFrameDefault%'"
    ).fetchall()[0][0]
    assert interp and interp > 0
    slices = con.sql("SELECT count(*), max(samples) FROM stack_slices").fetchall()[0]
    assert slices[0] >= 1 and slices[1] > 0


def test_py_spy_names_the_python_hot_function(captured: Captured) -> None:
    if not captured.py_spy:
        pytest.skip("py-spy not installed (pip install py-spy into the venv)")
    con = duckdb.connect(str(captured.db), read_only=True)
    leaves = con.sql("SELECT snapshot, leaf FROM py_stacks ORDER BY snapshot").fetchall()
    assert ("start", "hot_python_loop (hot.py:4)") in leaves, leaves
    assert ("end", "hot_python_loop (hot.py:4)") in leaves, leaves


def test_the_flame_graph_shows_the_c_hot_function_in_chromium(captured: Captured, chromium) -> None:  # type: ignore[no-untyped-def]
    _skip_if_bpftrace_lost_the_stacks(captured.db)
    with chromium.open(captured.report) as (page, load):
        assert not load.errors and not load.requests, (load.errors, load.requests)
        graph = page.locator("#flame-all")
        assert graph.is_visible()
        node = graph.locator(".fl", has_text="hot_c_inner").first
        assert node.is_visible()
        box = node.bounding_box()
        full = graph.bounding_box()
        assert box and full and box["width"] > 0.1 * full["width"]  # a hot function is wide
        assert "samples" in (node.get_attribute("title") or "")
        assert graph.locator(".fl-proc", has_text="hot_c [").count() == 1
        assert graph.locator(".fl", has_text="_PyEval_EvalFrameDefault").count() >= 1
        if captured.py_spy:
            assert "hot_python_loop" in page.locator("#stacks .py-stacks").inner_text()


def test_without_bpftrace_the_capture_succeeds_and_the_report_says_why(
    tmp_path: Path, chromium
) -> None:  # type: ignore[no-untyped-def]
    _db, report = _capture_and_analyse(tmp_path, "-d", "3", "--no-bpf")
    with chromium.open(report) as (page, load):
        assert not load.errors, load.errors
        text = page.locator("#stacks").inner_text()
        assert (
            "No sampled stacks: the stack collectors: bpf_stacks was skipped: --no-bpf; "
            "perf_stacks was skipped: --no-bpf." in text
        ), text
        assert page.locator("#flame-all").count() == 0


@pytest.fixture(scope="module")
def captured_perf(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    """The perf fallback: bpftrace hidden from PATH, perf there, the C program running."""
    if os.geteuid() != 0:
        pytest.skip("perf record -a needs root")
    if shutil.which("perf") is None:
        pytest.skip("perf not installed")
    tmp = tmp_path_factory.mktemp("perf-stacks")
    hot_c = _compile_hot_c(tmp)
    path = restricted_path(tmp, {"bpftrace"}, first=(str(Path(sys.executable).parent),))
    with _running([str(hot_c)]) as (proc,):
        # 10 s perf files: 36 s gives two or three slices even when the fold is slow
        db, report = _capture_and_analyse(tmp, "-d", "36", "--pid", str(proc.pid), path=path)
    return Captured(db, report, False)


def test_without_bpftrace_perf_samples_the_hot_function_into_stack_samples(
    captured_perf: Captured,
) -> None:
    con = duckdb.connect(str(captured_perf.db), read_only=True)
    status = dict(
        con.sql(
            "SELECT collector, status FROM collectors WHERE collector IN ('bpf_stacks', 'perf_stacks')"
        ).fetchall()
    )
    assert status == {"bpf_stacks": "missing", "perf_stacks": "parsed"}, status
    total = con.sql("SELECT sum(samples) FROM stack_samples WHERE comm = 'hot_c'").fetchall()[0][0]
    hot = con.sql(
        "SELECT sum(samples) FROM stack_samples WHERE comm = 'hot_c' AND leaf = 'hot_c_inner'"
    ).fetchall()[0][0]
    # one CPU-bound process on 2 CPUs at 49 Hz: ~490 samples per 10 s slice when idle
    assert total and total >= 50, total
    assert hot and hot >= 0.8 * total, (hot, total)
    sql = "SELECT count(*), min(interval_s), max(samples) FROM stack_slices"
    slices = con.sql(sql).fetchall()[0]
    assert slices[0] >= 1 and slices[2] > 0, slices
    assert slices[1] is None or 9.0 <= slices[1] <= 30.0, slices


def test_without_bpftrace_the_flame_graph_shows_perfs_hot_function_in_chromium(
    captured_perf: Captured, chromium
) -> None:  # type: ignore[no-untyped-def]
    with chromium.open(captured_perf.report) as (page, load):
        assert not load.errors and not load.requests, (load.errors, load.requests)
        graph = page.locator("#flame-all")
        assert graph.is_visible()
        node = graph.locator(".fl", has_text="hot_c_inner").first
        assert node.is_visible()
        box, full = node.bounding_box(), graph.bounding_box()
        assert box and full and box["width"] > 0.1 * full["width"]
        assert graph.locator(".fl-proc", has_text="hot_c [").count() == 1
