"""Declared table and header vocabulary of the pidstat parser (see ``pidstat.py``)."""

from __future__ import annotations

import polars as pl

from analyzer.parsers.base import TS, table

F64 = pl.Float64()
I64 = pl.Int64()

TABLES = {
    "pidstat": table(
        "one row per (sample time, PID, TID): all reports of that interval merged",
        ("ts", TS, "", "end of the interval (UTC); NULL when the date is unknown"),
        ("since_boot", pl.Boolean(), "", "values since process start (no interval); NULL unknown"),
        ("uid", I64, "", "real user ID (sysstat >= 10.x; NULL with -U or on 9.x)"),
        ("user", pl.Utf8(), "", "user name (-U)"),
        ("pid", I64, "", "process ID (TGID with -t; thread rows carry their TGID)"),
        ("tid", I64, "", "thread ID of a -t thread row; NULL for the process row"),
        (
            "command",
            pl.Utf8(),
            "",
            "command name, or the full command line with -l ('|__' removed)",
        ),
        ("usr_pct", F64, "%", "%usr: user CPU (per-CPU scale, can exceed 100 with -I off)"),
        ("system_pct", F64, "%", "%system: system CPU"),
        ("guest_pct", F64, "%", "%guest: running a virtual CPU"),
        ("wait_pct", F64, "%", "%wait: runnable but waiting for a CPU (sysstat >= 11.5)"),
        ("cpu_pct", F64, "%", "%CPU: total CPU"),
        ("cpu", pl.Int32(), "", "processor number the task last ran on"),
        ("usr_ms", I64, "ms", "usr-ms: user time (-T CHILD/ALL, cumulative)"),
        ("system_ms", I64, "ms", "system-ms: system time (-T CHILD/ALL)"),
        ("guest_ms", I64, "ms", "guest-ms: guest time (-T CHILD/ALL)"),
        ("minflt_s", F64, "1/s", "minor page faults per second"),
        ("majflt_s", F64, "1/s", "major page faults per second"),
        ("minflt_nr", I64, "", "minflt-nr: minor faults (-T CHILD/ALL)"),
        ("majflt_nr", I64, "", "majflt-nr: major faults (-T CHILD/ALL)"),
        ("vsz_kb", I64, "kB", "virtual size"),
        ("rss_kb", I64, "kB", "resident set size"),
        ("mem_pct", F64, "%", "%MEM: share of physical memory"),
        ("stk_size_kb", I64, "kB", "StkSize: stack reserved (-s)"),
        ("stk_ref_kb", I64, "kB", "StkRef: stack referenced (-s)"),
        ("kb_rd_s", F64, "kB/s", "kB_rd/s: read from storage (NULL where pidstat printed -1)"),
        ("kb_wr_s", F64, "kB/s", "kB_wr/s: written (NULL where -1)"),
        ("kb_ccwr_s", F64, "kB/s", "kB_ccwr/s: cancelled writes (NULL where -1)"),
        ("iodelay_ticks", I64, "ticks", "iodelay: block I/O delay in clock ticks (>= 10.x)"),
        ("cswch_s", F64, "1/s", "voluntary context switches per second"),
        ("nvcswch_s", F64, "1/s", "involuntary context switches per second"),
        ("threads", I64, "", "number of threads (-v)"),
        ("fd_nr", I64, "", "open file descriptors (-v)"),
        ("prio", pl.Int32(), "", "real-time priority (-R)"),
        ("policy", pl.Utf8(), "", "scheduling policy (-R): NORMAL, FIFO, RR, BATCH, IDLE..."),
    )
}

#: A header line: ``PID``/``TGID`` ... ``Command`` at the end.
HEADER_RE = r"\s(PID|TGID)\s.*\sCommand\s*$"
#: The column names of a header, from its first ID column to ``Command``.
SIG_RE = r"((?:UID|USER|PID|TGID)\s.*Command)\s*$"
#: The first token of a header (its time, or ``#`` of ``# Time``).
HDR_TOK_RE = r"^\s*(\S+(?:\s[AaPp]\.?[Mm]\.?)?)"
#: A row's time: ``HH:MM:SS`` (12-hour marker glued on) or epoch seconds.
TIME_TOKEN = r"^(\d{1,2}:\d{2}:\d{2}(?:[AaPp]\.?[Mm]\.?)?|\d{9,11})$"
#: A 12-hour marker after the time (``PM``, ``p.m.``).
AMPM_RE = r"^[AaPp]\.?[Mm]\.?(\s|$)"
#: A ``--human`` value (``4.2G``, ``359.4%``) somewhere in a row's text.
HUMAN_RE = r"\d[BkKMGTP%](\s|$)"

#: header token -> column
COLUMNS = {
    "UID": "uid",
    "USER": "user",
    "PID": "pid",
    "TGID": "tgid",
    "TID": "tid",
    "%usr": "usr_pct",
    "%system": "system_pct",
    "%guest": "guest_pct",
    "%wait": "wait_pct",
    "%CPU": "cpu_pct",
    "CPU": "cpu",
    "usr-ms": "usr_ms",
    "system-ms": "system_ms",
    "guest-ms": "guest_ms",
    "minflt/s": "minflt_s",
    "majflt/s": "majflt_s",
    "minflt-nr": "minflt_nr",
    "majflt-nr": "majflt_nr",
    "VSZ": "vsz_kb",
    "RSS": "rss_kb",
    "%MEM": "mem_pct",
    "StkSize": "stk_size_kb",
    "StkRef": "stk_ref_kb",
    "kB_rd/s": "kb_rd_s",
    "kB_wr/s": "kb_wr_s",
    "kB_ccwr/s": "kb_ccwr_s",
    "iodelay": "iodelay_ticks",
    "cswch/s": "cswch_s",
    "nvcswch/s": "nvcswch_s",
    "threads": "threads",
    "fd-nr": "fd_nr",
    "prio": "prio",
    "policy": "policy",
}
#: columns kept as text
TEXT = {"user", "policy", "command"}
#: I/O columns where sysstat prints -1 for "not available"
SENTINEL = ("kb_rd_s", "kb_wr_s", "kb_ccwr_s")


def finish_number(v: pl.Expr, c: str) -> pl.Expr:
    """A Float64 value of column ``c`` -> its declared type (``-1`` sentinels become NULL;
    integers rounded as printed). Both parse paths type their values with it."""
    if c in SENTINEL:
        v = pl.when(v < 0).then(None).otherwise(v)
    dtype = TABLES["pidstat"].schema.get(c, I64)
    return v.round(0).cast(dtype, strict=False) if dtype != F64 else v


#: JSON (-o JSON, 12.7) key -> column, per report section
JSON_KEYS = {
    "UID": "uid",
    "USER": "user",
    "PID": "pid",
    "TGID": "tgid",
    "TID": "tid",
    "usr": "usr_pct",
    "system": "system_pct",
    "guest": "guest_pct",
    "wait": "wait_pct",
    "cpu": "cpu_pct",
    "cpu_nr": "cpu",
    "usr_ms": "usr_ms",
    "system_ms": "system_ms",
    "guest_ms": "guest_ms",
    "minflt/s": "minflt_s",
    "majflt/s": "majflt_s",
    "minflt_nr": "minflt_nr",
    "majflt_nr": "majflt_nr",
    "VSZ": "vsz_kb",
    "RSS": "rss_kb",
    "MEM": "mem_pct",
    "StkSize": "stk_size_kb",
    "StkRef": "stk_ref_kb",
    "kB_rd/s": "kb_rd_s",
    "kB_wr/s": "kb_wr_s",
    "kB_ccwr/s": "kb_ccwr_s",
    "iodelay": "iodelay_ticks",
    "cswch/s": "cswch_s",
    "nvcswch/s": "nvcswch_s",
    "threads": "threads",
    "fd-nr": "fd_nr",
    "prio": "prio",
    "policy": "policy",
    "cmd": "command",
}
