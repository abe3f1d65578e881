"""``py-spy dump`` of Python processes -> ``py_stacks``: each thread's Python stack.

The capture runs ``py-spy dump --pid P`` for every target PID that runs Python, at the
start and at the end (``snap/py_spy.start.out``, ``snap/py_spy.end.out``), each after a
``hindsight py-spy: pid P`` line (py-spy's errors go to the ``.err`` file). py-spy 0.3
and 0.4 print::

    hindsight py-spy: pid 7874
    Process 7874: /usr/bin/python3 /tmp/stk/hot.py
    Python v3.11.2 (/usr/bin/python3.11)

    Thread 7874 (active+gil): "MainThread"
        hot_python_loop (hot.py:4)
        <module> (hot.py:5)

Frames are printed innermost first; a thread's name (``: "MainThread"``) is absent when
py-spy does not know it, thread ids may be hex (``0x7F3A...``). ``--locals`` blocks
(``Arguments:``/``Locals:`` and the indented ``name: value`` lines under them) are
structure.

Table ``py_stacks``: one row per thread per dump: ts/snapshot (capture phase, from the
file name), pid, process (py-spy's ``Process`` line), thread, thread_name, state
(``active``, ``idle``, ``active+gil``...), stack (folded root → leaf with ``;``, each
frame ``function (file:line)``), leaf (the innermost frame), frames.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.parsers import base
from analyzer.parsers._snap_common import lines, snapshot_time

TABLES: dict[str, base.Table] = {
    "py_stacks": base.table(
        "one row per thread of one py-spy dump",
        ("ts", base.TS, "", "snapshot time (UTC); NULL when unknown"),
        ("snapshot", pl.String, "", "'start' or 'end' (capture phase); NULL for hand-made files"),
        ("pid", pl.Int64, "", "process id"),
        ("process", pl.String, "", "the process's command line as py-spy prints it"),
        ("python", pl.String, "", "Python version and interpreter path, as printed"),
        ("thread", pl.String, "", "thread id as printed (decimal or 0x hex)"),
        ("thread_name", pl.String, "", "thread name ('MainThread'...), NULL when not printed"),
        ("state", pl.String, "", "py-spy's thread state: active, idle, active+gil, ..."),
        ("stack", pl.String, "", "folded stack root → leaf, ';' between 'function (file:line)'"),
        ("leaf", pl.String, "", "the innermost frame (what the thread was running)"),
        ("frames", pl.Int32, "", "number of frames"),
    )
}

HEADER = re.compile(r"^hindsight py-spy: pid (\d+)\s*$")
PROCESS = re.compile(r"^Process (\d+): (.*)$")
PYTHON = re.compile(r"^Python v(.*)$")
THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\)(?:: "(.*)")?\s*$')
FRAME = re.compile(r"^ {4}(\S.*\(.*\))\s*$")
LOCALS = re.compile(r"^ {8}(?:Arguments|Locals):\s*$|^ {12}\S")


def sniff(head: str, name: str) -> float:
    """The capture's header, or py-spy's ``Process N:`` + ``Python v`` lines."""
    if re.search(r"^hindsight py-spy: pid \d+", head, re.M):
        return 0.98
    if re.search(r"^Process \d+: .*\nPython v\d", head, re.M):
        return 0.9
    return 0.0


def _pid(text: str) -> int | None:
    """A PID as printed; None when it does not fit the table's Int64 (a damaged file)."""
    n = int(text)
    return n if n < 2**63 else None


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one file of py-spy dumps (see the module docstring)."""
    cov = base.Coverage()
    df = lines(path, cov.notes)
    cov.total = df.height
    phase, ts = snapshot_time(path, ctx, cov.notes)
    rows: list[dict] = []
    pid: int | None = None
    process = python = None
    thread: dict | None = None
    frames: list[str] = []
    pending = 0  # lines of the current thread (parsed once the thread is closed)

    def close() -> None:
        nonlocal thread, frames, pending
        if thread is not None:
            order = frames[::-1]
            rows.append(
                {
                    **thread,
                    "stack": ";".join(f.replace(";", ":") for f in order),
                    "leaf": frames[0] if frames else None,
                    "frames": len(frames),
                }
            )
            cov.parsed += pending
        thread, frames, pending = None, [], 0

    for line in df.get_column("line").to_list():
        if thread is not None and FRAME.match(line):
            frames.append(FRAME.match(line).group(1))  # type: ignore[union-attr]
            pending += 1
            continue
        if thread is not None and LOCALS.match(line):
            cov.add_structure("locals", 1)
            continue
        m = THREAD.match(line)
        if m:
            close()
            if pid is None:
                cov.add_skipped("thread before any Process line", 1)
                continue
            thread = {
                "ts": ts,
                "snapshot": phase,
                "pid": pid,
                "process": process,
                "python": python,
                "thread": m.group(1),
                "state": m.group(2),
                "thread_name": m.group(3),
            }
            pending = 1
            continue
        close()
        if not line.strip():
            cov.add_structure("blank", 1)
        elif m := HEADER.match(line):
            pid, process, python = _pid(m.group(1)), None, None
            cov.add_structure("header", 1)
        elif m := PROCESS.match(line):
            pid, process, python = _pid(m.group(1)), m.group(2), None
            cov.add_structure("process line", 1)
        elif m := PYTHON.match(line):
            python = m.group(1)
            cov.add_structure("python version line", 1)
        else:
            cov.add_skipped("unrecognised line", 1)
    close()
    frame = pl.DataFrame(rows, schema=TABLES["py_stacks"].schema)
    return base.ParseResult({"py_stacks": TABLES["py_stacks"].conform(frame).collect()}, cov)
