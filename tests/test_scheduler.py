"""The parse stage's scheduler: biggest ready job first, prerequisites respected."""

from __future__ import annotations

import threading
import time

import pytest

from analyzer.scheduler import BiggestFirst


def test_the_biggest_ready_job_runs_first() -> None:
    gate = threading.Event()
    order: list[str] = []
    pool = BiggestFirst(1)
    first = pool.submit(gate.wait, 1)  # holds the only thread while the others queue
    jobs = [
        pool.submit(lambda n=n: order.append(n), size)
        for n, size in (("a", 5), ("b", 50), ("c", 20))
    ]
    gate.set()
    for j in [first, *jobs]:
        j.result(timeout=10)
    pool.shutdown()
    assert order == ["b", "c", "a"]


def test_a_job_waits_for_its_prerequisites_however_small_they_are() -> None:
    order: list[str] = []
    pool = BiggestFirst(2)

    def slow(name: str) -> None:
        time.sleep(0.2)
        order.append(name)

    small = pool.submit(lambda: slow("small"), 1)
    big = pool.submit(lambda: order.append("big"), 1000, after=[small])
    big.result(timeout=10)
    pool.shutdown()
    assert order == ["small", "big"]


def test_errors_reach_the_caller_and_dependents_still_run() -> None:
    pool = BiggestFirst(2)

    def boom() -> None:
        raise ValueError("bad file")

    failed = pool.submit(boom, 10)
    after = pool.submit(lambda: "ran", 1, after=[failed])
    with pytest.raises(ValueError, match="bad file"):
        failed.result(timeout=10)
    assert after.result(timeout=10) == "ran"
    pool.shutdown()


def test_shutdown_cancels_jobs_not_started() -> None:
    gate = threading.Event()
    pool = BiggestFirst(1)
    running = pool.submit(gate.wait, 1)
    queued = pool.submit(lambda: None, 1)
    time.sleep(0.05)
    threading.Timer(0.1, gate.set).start()
    pool.shutdown(cancel=True)
    assert running.done() and queued.cancelled()
