"""Run groups of work on a few threads: ``run_groups(fn, groups, workers)``.

The parse stage's work is mostly inside polars, numpy and DuckDB, which release the GIL,
so two files parsed on two threads use both cores of a small machine. Each group runs
in order on one thread; groups are taken biggest first as given. The first exception
stops the groups not yet started and is raised in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

G = TypeVar("G")


def run_groups(fn: Callable[[G], None], groups: Sequence[G], workers: int) -> None:
    """Call ``fn(group)`` for every group, ``workers`` at a time."""
    if workers <= 1 or len(groups) <= 1:
        for group in groups:
            fn(group)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hindsight-parse") as pool:
        futures = [pool.submit(fn, group) for group in groups]
        _done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
        for f in futures:  # in submission order: the same error wins on every run
            if f.done() and not f.cancelled() and f.exception() is not None:
                raise f.exception()  # type: ignore[misc]
