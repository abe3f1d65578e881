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

Table ``py_stacks``: one row per thread per dump (columns in ``TABLES``); ``stack`` is
folded root → leaf with ``;``, each frame ``function (file:line)``.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.parsers import _sampler, base
from analyzer.parsers._snap_common import lines, snapshot_time, with_snapshot

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

HEADER = r"^hindsight py-spy: pid (\d+)\s*$"
PROCESS = r"^Process (\d+): (.*)$"
PYTHON = r"^Python v(.*)$"
THREAD = r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\)(?:: "(.*)")?\s*$'
FRAME = r"^ {4}(\S.*\(.*\))\s*$"
LOCALS = r"^ {8}(?:Arguments|Locals):\s*$|^ {12}\S"


def sniff(head: str, name: str) -> float:
    """The capture's header, or py-spy's ``Process N:`` + ``Python v`` lines."""
    if re.search(r"^hindsight py-spy: pid \d+", head, re.M):
        return 0.98
    if re.search(r"^Process \d+: .*\nPython v\d", head, re.M):
        return 0.9
    return 0.0


def parse(path: Path, ctx: base.ParseContext) -> base.ParseResult:
    """Parse one file of py-spy dumps (see the module docstring)."""
    cov = base.Coverage()
    df = lines(path, cov.notes)
    phase, ts = snapshot_time(path, ctx, cov.notes)
    line, c = pl.col("line"), pl.col
    kinds = [
        (line.str.contains(THREAD), "thread"),
        (line.str.contains(FRAME), "frame"),
        (line.str.contains(LOCALS), "locals"),
        (line.str.strip_chars() == "", "structure:blank"),
        (line.str.contains(HEADER), "structure:header"),
        (line.str.contains(PROCESS), "structure:process line"),
        (line.str.contains(PYTHON), "structure:python version line"),
        (pl.lit(True), "skipped:unrecognised line"),
    ]
    what = c("what")
    df = df.with_columns(
        what=pl.coalesce(pl.when(cond).then(pl.lit(name)) for cond, name in kinds),
        pid=pl.coalesce(line.str.extract(HEADER, 1), line.str.extract(PROCESS, 1)),
        process=line.str.extract(PROCESS, 2),
        python=line.str.extract(PYTHON, 1),
    )
    # A thread's frame and locals lines follow it; it belongs to the last header or Process
    # line (pid, process) and the last Python line after it.
    i = pl.int_range(pl.len())
    is_proc = what.is_in(["structure:header", "structure:process line"])
    proc_at = pl.when(is_proc).then(i).forward_fill()
    py_at = pl.when(is_proc | (what == "structure:python version line")).then(i).forward_fill()
    df = df.with_columns(
        group=(~what.is_in(["frame", "locals"])).cast(pl.Int64).cum_sum(),
        pid=c("pid").gather(proc_at).cast(pl.Int64, strict=False),  # NULL when it overflows
        process=c("process").gather(proc_at),
        python=c("python").gather(py_at),
    ).with_columns(thread=pl.when(c("pid").is_not_null()).then(line.str.extract_groups(THREAD)))
    opened = (what.first() == "thread") & c("thread").first().is_not_null()
    df = df.with_columns(in_thread=opened.over("group"))
    inside = {"thread": None, "frame": None, "locals": "structure:locals"}
    outside = {"thread": "skipped:thread before any Process line"}
    outside |= dict.fromkeys(["frame", "locals"], "skipped:unrecognised line")
    why = pl.when("in_thread").then(what.replace(inside)).otherwise(what.replace(outside))
    _sampler.tally(cov, df.select(why=why))
    frames = (
        df.filter(c("in_thread") & (what == "frame"))
        .with_columns(f=line.str.extract(FRAME, 1))
        .group_by("group")
        .agg(
            stack=c("f").str.replace_all(";", ":", literal=True).reverse().str.join(";"),
            leaf=c("f").first(),
            frames=pl.len(),
        )
    )
    rows = (
        df.filter(c("in_thread") & (what == "thread"))
        .unnest("thread")
        .join(frames, on="group", how="left")
        .rename({"1": "thread", "2": "state", "3": "thread_name"})
        .with_columns(c("stack").fill_null(""), c("frames").fill_null(0))
    )
    rows = with_snapshot(rows, phase, ts)
    return base.ParseResult({"py_stacks": TABLES["py_stacks"].conform(rows).collect()}, cov)
