"""Jobs on a few threads, biggest first among those whose prerequisites are done.

The parse stage queues files in archive order while the archive is still being read;
a day-long ``mpstat.out`` (a third of the parse work) comes fifth. Taking the biggest
ready file whenever a thread frees up starts it seconds earlier, so the stage does not
end with one core idle while the other finishes it. ``after`` lists the futures a job
must wait for (files writing the same tables): such a job only becomes ready once they
are done, so no thread ever blocks on another job and there is no deadlock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any


class BiggestFirst:
    """``workers`` threads; `submit` jobs with a size and prerequisites, `shutdown` at the end."""

    def __init__(self, workers: int, name: str = "worker") -> None:
        self._cv = threading.Condition()
        self._ready: list[tuple[int, int, Future, Callable[[], Any]]] = []  # heap by -size
        self._waiting: list[tuple[int, int, Future, Callable[[], Any], list[Future]]] = []
        self._seq = itertools.count()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}") for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[], Any], size: int, after: Sequence[Future] = ()) -> Future:
        """Run ``fn()`` once every future in ``after`` is done; its result as a future."""
        future: Future = Future()
        entry = (-size, next(self._seq), future, fn, list(after))
        with self._cv:
            if self._closed:
                raise RuntimeError("scheduler is shut down")
            self._waiting.append(entry)
        for f in after:
            f.add_done_callback(self._release)
        self._release(None)
        return future

    def shutdown(self, cancel: bool = True) -> None:
        """Stop the threads once the running jobs end; jobs not started are cancelled
        (``cancel``) or still run first."""
        with self._cv:
            self._closed = True
            if cancel:
                for entry in self._ready + self._waiting:
                    entry[2].cancel()
                self._ready.clear()
                self._waiting.clear()
            self._cv.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()

    def _release(self, _done: Future | None) -> None:
        with self._cv:
            still = []
            for entry in self._waiting:
                if all(f.done() for f in entry[4]):
                    heapq.heappush(self._ready, entry[:4])
                else:
                    still.append(entry)
            self._waiting = still
            self._cv.notify_all()

    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._ready and not (self._closed and not self._waiting):
                    self._cv.wait()
                if not self._ready:
                    return
                _size, _seq, future, fn = heapq.heappop(self._ready)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as e:  # handed to whoever waits on the future
                future.set_exception(e)
