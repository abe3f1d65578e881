"""Helpers for the --app-metrics / --app-log tests: the test service, a load generator,
a training-like log writer. Real processes and sockets, no mocks."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "samples" / "real" / "service.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    proc: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"


def start_service(*args: str, port: int = 0) -> Service:
    """Start samples/real/service.py; returns once it listens."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVICE), "--port", str(port), *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("ready "), line
    return Service(proc, int(line.split()[1]))


def stop_service(s: Service) -> None:
    s.proc.terminate()
    try:
        s.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        s.proc.kill()
        s.proc.wait()
    if s.proc.stdout is not None:
        s.proc.stdout.close()


@contextlib.contextmanager
def service(*args: str, port: int = 0) -> Iterator[Service]:
    s = start_service(*args, port=port)
    try:
        yield s
    finally:
        stop_service(s)


@dataclass
class Load:
    """``threads`` clients calling /infer?ms=``ms`` back to back until stopped."""

    port: int
    ms: float = 5.0
    threads: int = 2
    done: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _run(self) -> None:
        url = f"http://127.0.0.1:{self.port}/infer?ms={self.ms}"
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    r.read()
                self.done += 1
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)  # the service is restarting

    def __enter__(self) -> Load:
        for _ in range(self.threads):
            t = threading.Thread(target=self._run, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)


@dataclass
class StepLog:
    """Writes ``step N/1000 loss=…`` to ``path`` every ``step_s`` seconds, like a
    training loop (flushed line by line); ``written`` holds (time, step)."""

    path: Path
    step_s: float = 0.25
    written: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        with open(self.path, "a", buffering=1) as f:
            step = 0
            nxt = time.monotonic()
            while not self._stop.is_set():
                step += 1
                f.write(f"[rank0] step {step}/1000 loss={3.0 - step * 0.001:.4f} lr=1e-4\n")
                f.write(f"[rank0] data loader: prefetched batch {step + 1}\n")  # not matched
                self.written.append((time.time(), step))
                nxt += self.step_s
                self._stop.wait(max(0.0, nxt - time.monotonic()))

    def __enter__(self) -> StepLog:
        self.path.touch()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
