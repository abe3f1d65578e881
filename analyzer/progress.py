"""Stage progress for `analyze` on a terminal: quiet for quick runs, one line per stage after.

`Progress` is the ``progress`` callback of `analyzer.pipeline.Options`. Each call names
the stage that starts now. Nothing is printed during the first ``delay_s`` seconds (most
bundles are done by then); once that much time has passed the stage in progress is shown,
and from then on every stage gets a line ``  [  12.3 s] parsing series/mpstat.out (mpstat)``
with the time elapsed since the analysis started. `close()` prints the total when
anything was shown. The CLI only installs it when stderr is a TTY and ``--quiet`` is off,
so pipes and scripts see nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """Delayed per-stage progress lines on ``stream`` (stderr by default)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        delay_s: float = 1.0,
        clean: Callable[[str], str] = str,
    ) -> None:
        self.stream = stream or sys.stderr
        self.clean = clean  # bundle file names reach the terminal: escape them
        self.delay_s = delay_s
        self.t0 = time.monotonic()
        self.stage: str | None = None
        self.shown = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(delay_s, self._late)
        self._timer.daemon = True
        self._timer.start()

    def __call__(self, stage: str) -> None:
        with self._lock:
            self.stage = stage
            if self.shown or time.monotonic() - self.t0 >= self.delay_s:
                self._print(stage)

    def _late(self) -> None:
        with self._lock:
            if not self.shown and self.stage is not None:
                self._print(self.stage)

    def _print(self, stage: str) -> None:
        self.shown = True
        elapsed = time.monotonic() - self.t0
        self.stream.write(f"  [{elapsed:6.1f} s] {self.clean(stage)}\n")
        self.stream.flush()

    def close(self) -> None:
        """Stop the timer; print the total when progress was shown."""
        self._timer.cancel()
        with self._lock:
            if self.shown:
                self.stream.write(f"  [{time.monotonic() - self.t0:6.1f} s] done\n")
                self.stream.flush()
