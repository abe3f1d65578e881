"""What a run leaves behind when it ends, however it ends: nothing of its own.

Every temporary path a run makes (the extracted bundle, UTF-8 scratch copies, outputs
being written, lock files) is registered with `register_cleanup` and removed when the
process ends: at a normal exit or after an exception (``atexit``), and on SIGINT or
SIGTERM, which `install_signal_handlers` turns into: remove every registered path, print
one line (``hindsight: error: interrupted (SIGTERM)``) and exit 130 / 143 at once.

The signal is acted on by a watcher thread woken through `signal.set_wakeup_fd`, so the
exit does not wait for the main thread to come back from a long DuckDB query or polars
collect (those release the GIL; a Python signal handler would only run afterwards).
`use_private_tempdir` points `tempfile` (and child processes, via ``TMPDIR``) at one
registered directory per run, so even scratch space nobody registered goes too.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

_PATHS: dict[Path, None] = {}  # registration order; removed newest first
_LOCK = threading.Lock()
_DYING = threading.Lock()
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def register_cleanup(path: Path | str) -> Path:
    """Remove ``path`` (file or directory tree) when the process ends; returns it."""
    path = Path(path)
    with _LOCK:
        _PATHS[path] = None
    return path


def unregister_cleanup(path: Path | str) -> None:
    """``path`` is no longer temporary (removed already, or renamed into place)."""
    with _LOCK:
        _PATHS.pop(Path(path), None)


def remove(path: Path | str) -> None:
    """Remove a registered path now (its work is done) and forget it."""
    _remove(Path(path))
    unregister_cleanup(path)


def cleanup() -> None:
    """Remove every registered path now (newest first); errors are ignored."""
    with _LOCK:
        paths = list(reversed(_PATHS))
        _PATHS.clear()
    for path in paths:
        _remove(path)


def _remove(path: Path) -> None:
    for _attempt in range(3):  # another thread may still be creating files inside
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        except OSError:
            pass
        if not os.path.lexists(path):
            return


atexit.register(cleanup)


def use_private_tempdir(prefix: str = "hindsight-run-") -> Path:
    """Make a fresh directory in the system temporary directory the one every later
    ``tempfile`` call and every child process (``TMPDIR``) uses; removed at the end."""
    path = register_cleanup(tempfile.mkdtemp(prefix=prefix))
    tempfile.tempdir = str(path)
    os.environ["TMPDIR"] = str(path)
    return path


_INSTALLED: list[bool] = []


def signal_handlers_installed() -> bool:
    """Whether `install_signal_handlers` took effect in this process."""
    return bool(_INSTALLED)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM: clean up, one line on stderr, exit 130 / 143 (main thread only)."""
    if threading.current_thread() is not threading.main_thread() or _INSTALLED:
        return
    _INSTALLED.append(True)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for sig in SIGNAL_EXIT:
        signal.signal(sig, _on_signal)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_fd,), name="hindsight-signals", daemon=True).start()


def _on_signal(signum: int, _frame: object) -> None:
    _die(signum)


def _watch(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        for signum in data:
            if signum in SIGNAL_EXIT:
                _die(signum)


def _die(signum: int) -> None:
    """Exit for ``signum``: the first caller cleans up and ends the process."""
    if not _DYING.acquire(blocking=False):
        while True:  # the other thread is cleaning up and will end the process
            time.sleep(1)
    try:
        _stop_children()
        cleanup()
        name = signal.Signals(signum).name
        os.write(2, f"hindsight: error: interrupted ({name})\n".encode())
    finally:
        os._exit(SIGNAL_EXIT.get(signum, 128 + signum))


def _stop_children() -> None:
    """Worker processes (``fleet --jobs``) go first, so nothing writes into what we remove."""
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(0.5)
