"""What kernel reports say (the second half of `analyzer.parsers.dmesg`): `classify` adds
each line's `kind`, the fields it states (pid, comm, Xid code, PCI bus, OOM sizes...) and
`event_id` / `event_kind`, by regex over the message column.

Input: one row per kernel log line (`message`, `rec` = printk record id, `is_cont` = an
unstamped continuation of the record, `stamp_key` = a sub-second stamp or NULL, `ts`,
`uptime_s`). An event holds at most `MAX_EVENT_LINES` lines: a longer run is cut at the
first record start that many lines on, and again from there (`_cap_events`), so a parse
that redoes each block's last event with the next block finds the one-pass events.
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: Longest plausible uptime (100 years, in seconds); the kernel's own limit is ~584 years.
MAX_UPTIME_S = 100 * 365.25 * 86400
MAX_REPORT_GAP_S = 30.0
MAX_EVENT_LINES = 10_000
# Kinds that open a new event (oom_kill joins an open OOM report, see `_OOM_PREV`).
STARTERS = [
    "oom_invoked", "hung_task", "xid", "gpu_fallen_off_bus", "soft_lockup", "rcu_stall", "mce",
    "segfault", "io_error", "panic", "oops",
]  # fmt: skip
_OUT = [
    "kind", "pid", "comm", "xid_code", "pci_bus", "device", "blocked_s", "total_vm_kb",
    "anon_rss_kb", "file_rss_kb", "shmem_rss_kb", "event_id", "event_kind", "memcg",
    "oom_constraint", "uid",
]  # fmt: skip

_XID = (
    r"NVRM: Xid \((?:PCI:)?(?P<xpci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})[^)]*\): "
    r"(?P<xcode>\d+)(?:, pid=(?:'?<unknown>'?|(?P<xpid>\d+)))?(?:, name=(?P<xname>[^,]*))?"
)
_FALLEN = r"fallen off the bus"
_FALLEN_PCI = r"(?:PCI:|NVIDIA GPU |GPU at )(?:0000)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
_OOM_INVOKED = r"^(?P<icomm>.+?) invoked oom-killer: "
# Greedy comm when the sizes follow (comm may hold parentheses: "((resolved))"), else lazy.
_KILLED = (
    r"Killed process (?P<kpid>\d+) \((?P<kcomm>.*)\),? total-vm:(?P<total_vm_kb>\d+)kB, "
    r"anon-rss:(?P<anon_rss_kb>\d+)kB, file-rss:(?P<file_rss_kb>\d+)kB"
    r"(?:, shmem-rss:(?P<shmem_rss_kb>\d+)kB)?(?:, UID:(?P<kuid>\d+))?"
)
_SIZES = ["total_vm_kb", "anon_rss_kb", "file_rss_kb", "shmem_rss_kb"]
_KILLED_SHORT = r"Killed process (?P<kpid2>\d+)(?:, UID (?P<kuid2>\d+),)? \((?P<kcomm2>.*?)\)"
_HUNG = r"(?s)INFO: task (?P<hcomm>.+):(?P<hpid>\d+) blocked for more than (?P<hsec>\d+) seconds"
_SOFT = r"soft lockup - CPU#\d+ stuck for (?P<ssec>\d+)s! \[(?P<scomm>.+):(?P<spid>\d+)\]"
_RCU = r"rcu_\w+ (?:self-)?detected stall|rcu: INFO: \w+ (?:self-)?detected stall|detected stalls on CPUs"
_MCE = r"\[Hardware Error\]|Machine check events logged|Machine Check Exception"
_SEGV = r"^(?P<gcomm>.+?)\[(?P<gpid>\d+)\]: segfault at "
_IOERR = (
    r"I/O error, dev |Buffer I/O error on dev|blk_update_request: (?:critical \w+ )?(?:I/O )?error"
    r"|^nvme nvme\d+: I/O \d+ (?:\(.*?\) )?QID \d+ timeout"
    r"|^nvme nvme\d+: (?:Device not ready; aborting reset|Removing after probe failure"
    r"|controller is down|Disabling device after reset failure)"
    r"|^nvme\d+n\d+: .*I/O Error"
)
_DEVICE = r"I/O error,? (?:on )?dev(?:ice)? ([^\s,]+)|^nvme (nvme\d+): |^(nvme\d+n\d+): "
_PANIC = r"Kernel panic - not syncing"
_OOPS = r"^(?:BUG: unable to handle|BUG: kernel NULL pointer dereference|kernel BUG at |general protection fault)"

# Lines that belong to whatever report is open (stack frames, register dumps, OOM blocks).
_BODY = (
    r"^(?:\s|$|Call Trace:|Call trace:|Backtrace:|Hardware name:|CPU: \d+ (?:UID: \d+ )?PID: "
    r"|Workqueue: |RIP: |RSP: |R[A-Z0-9]{2}: |[ECDFG]S: |CR[0-4]: |Code: |Stack:|Exception stack"
    r"|PGD |P4D |PUD |PMD |PTE |Oops: |Modules linked in:|task: |IP: |\? |<TASK>|</TASK>"
    r"|---\[ end |Kernel Offset:|Mem-Info:|Node \d|lowmem_reserve|\d+ total pagecache"
    r"|\d+ pages |Free swap|Total swap|Swap cache|memory: usage|memory\+swap: usage|kmem: usage"
    r"|swap: usage|Memory cgroup stats for|Tasks state|\[\s*pid\s*\]|\[\s*\d+\]\s+\d+|oom-kill:"
    r"|(?:Memory cgroup )?[Oo]ut of memory: Kill process|oom_reaper: |Task in \S+ killed"
    r"|\S+ cpuset=|Not tainted|Tainted: |\"echo 0 > /proc/sys/kernel/hung_task|task:\S"
    r"|\S+\s+D\s?[0-9a-f]*(?:\s+\d+){2,3}\s+0x|\[<?[0-9a-f]{8,16}>?\]|\[c[0-9a-f]{15}\] |Showing all locks|\d+ locks? held by"
    r"|INFO: lockdep|NVRM: |active_anon:|[a-z_]+ \d+$|[0-9a-f]{4}: |nvme \S+: Abort status"
    r"|=+$)"
)
# What may precede a "Killed process" line inside an OOM report.
_OOM_PREV = (
    r"^(?:oom-kill:|(?:Memory cgroup )?[Oo]ut of memory: Kill process|\[\s*\d+\]\s+\d+|Task in "
    r"|Memory cgroup stats|memory: usage|[a-z_]+ \d+$)"
)


# The kind of a line, first match wins.
_KINDS = [
    ("xid", r"NVRM: Xid \("),
    ("gpu_fallen_off_bus", _FALLEN),
    ("oom_invoked", _OOM_INVOKED),
    ("oom_kill", r"Killed process \d+"),
    ("hung_task", _HUNG),
    ("soft_lockup", _SOFT),
    ("rcu_stall", _RCU),
    ("mce", _MCE),
    ("segfault", _SEGV),
    ("io_error", _IOERR),
    ("panic", _PANIC),
    ("oops", _OOPS),
]


def _int(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.Int64, strict=False)


def classify(df: pl.DataFrame) -> pl.DataFrame:
    """Add kind, extracted fields, event_id and event_kind (see the module doc): the
    input's columns, then those (working columns are dropped)."""
    keep = [c for c in df.columns if c not in _OUT]
    msg = pl.col("message")
    nxt = msg.shift(-1)
    # A record printed over several lines is classified on its joined text (first line only).
    multi = (
        df.filter(pl.col("is_cont").any().over("rec"))
        .group_by("rec")
        .agg(msg.str.join("\n").alias("_rtext"))
    )
    df = df.join(multi, on="rec", how="left", maintain_order="left")
    rtext = pl.coalesce("_rtext", msg)
    # A hung-task comm holding a newline is split over two stamped lines: join with the next.
    hung_split = msg.str.starts_with("INFO: task ") & ~msg.str.contains(_HUNG) & nxt.is_not_null()
    ctext = pl.when(hung_split).then(msg + "\n" + nxt).otherwise(rtext)
    df = df.with_columns(
        pl.when(pl.col("is_cont")).then(pl.lit(None, pl.String)).otherwise(ctext).alias("_t")
    )
    t = pl.col("_t")
    kind = pl.coalesce(pl.when(t.str.contains(rx)).then(pl.lit(name)) for name, rx in _KINDS)
    k = pl.col("kind")
    summary = pl.when(msg.str.starts_with("oom-kill:")).then(msg)
    df = df.with_columns(kind.alias("kind")).with_columns(
        pl.when(k == "xid").then(t).str.extract_groups(_XID).alias("_x"),
        pl.when(k == "oom_kill").then(t).str.extract_groups(_KILLED).alias("_k"),
        pl.when(k == "oom_kill").then(t).str.extract_groups(_KILLED_SHORT).alias("_k2"),
        pl.when(k == "hung_task").then(t).str.extract_groups(_HUNG).alias("_h"),
        pl.when(k == "soft_lockup").then(t).str.extract_groups(_SOFT).alias("_s"),
        pl.when(k == "segfault").then(t).str.extract_groups(_SEGV).alias("_g"),
        pl.when(k == "oom_invoked").then(t).str.extract(_OOM_INVOKED, 1).alias("icomm"),
        pl.when(k == "gpu_fallen_off_bus").then(t).str.extract(_FALLEN_PCI, 1).alias("fpci"),
        pl.coalesce(
            pl.when(k == "io_error").then(t).str.extract(_DEVICE, i) for i in (1, 2, 3)
        ).alias("device"),
        summary.str.extract(r"task_memcg=([^,]*)", 1).alias("_memcg_sum"),
        pl.when(msg.str.starts_with("Task in "))
        .then(msg)
        .str.extract(r"^Task in (\S+) killed as a result of limit", 1)
        .alias("_memcg_old"),
        summary.str.extract(r"oom-kill:constraint=(\w+)", 1).alias("_constraint"),
        summary.str.extract(r"oom-kill:.*[,:]uid=(\d+)", 1).alias("_uid_sum"),
    )
    # Each kind's fields are NULL on the lines of other kinds: a coalesce picks the kind's.
    df = df.unnest("_x", "_k", "_k2", "_h", "_s", "_g")
    xname = pl.col("xname").str.strip_chars()
    blocked = _int(pl.coalesce("hsec", "ssec"))
    comms = ["kcomm", "kcomm2", "icomm", "hcomm", "scomm", "gcomm"]
    df = df.with_columns(
        _int(pl.coalesce("xpid", "kpid", "kpid2", "hpid", "spid", "gpid")).alias("pid"),
        pl.coalesce(pl.when(~xname.is_in(["<unknown>", "'<unknown>'"])).then(xname), *comms).alias(
            "comm"
        ),
        _int(pl.col("xcode")).alias("xid_code"),
        pl.coalesce("xpci", "fpci").str.to_lowercase().alias("pci_bus"),
        pl.when(blocked <= MAX_UPTIME_S).then(blocked).alias("blocked_s"),  # else NULL
        _int(pl.col(_SIZES)),
        _int(pl.coalesce("kuid", "kuid2")).alias("_uid_own"),
    )
    return _events(df).select(*keep, *_OUT)


def _events(df: pl.DataFrame) -> pl.DataFrame:
    msg, k = pl.col("message"), pl.col("kind")
    starter = k.is_in(STARTERS).fill_null(False) & ~pl.col("is_cont")
    key = pl.col("stamp_key")
    same_stamp = key.is_not_null() & (key == key.shift(1))
    body = msg.str.contains(_BODY).fill_null(False)
    # A report is printed in one go: a long pause (or a clock going back) ends it.
    sec = pl.coalesce(pl.col("ts").dt.epoch("us") / 1e6, pl.col("uptime_s"))
    gap = (sec - sec.shift(1)).abs().fill_null(0.0) > MAX_REPORT_GAP_S
    oom_join = (k == "oom_kill") & msg.shift(1).str.contains(_OOM_PREV).fill_null(False)
    joins = oom_join | (k.is_null() & (same_stamp | body))
    cont = pl.col("is_cont") | (~starter & ~gap & joins)
    new_event = ~cont.fill_null(False) | (pl.int_range(pl.len()) == 0)
    starts = _cap_events(df.select(new_event.alias("n"))["n"].to_numpy(), df["is_cont"].to_numpy())
    df = df.with_columns(pl.Series("event_id", np.cumsum(starts, dtype=np.int64)))
    ev = "event_id"
    memcg_ev = pl.coalesce("_memcg_sum", "_memcg_old").drop_nulls().first().over(ev)
    constraint_ev = pl.col("_constraint").drop_nulls().first().over(ev)
    uid_ev = _int(pl.col("_uid_sum")).drop_nulls().first().over(ev)
    memcg_kill = msg.str.starts_with("Memory cgroup out of memory").any().over(ev)
    is_kill = k == "oom_kill"
    return df.with_columns(
        k.drop_nulls().first().over(ev).alias("event_kind"),
        pl.when(is_kill).then(memcg_ev).alias("memcg"),
        pl.when(is_kill)
        .then(pl.coalesce(constraint_ev, pl.when(memcg_kill).then(pl.lit("CONSTRAINT_MEMCG"))))
        .alias("oom_constraint"),
        pl.when(is_kill).then(pl.coalesce("_uid_own", uid_ev)).alias("uid"),
    )


def _cap_events(new: np.ndarray, is_cont: np.ndarray) -> np.ndarray:
    """``new`` (event starts) with events longer than `MAX_EVENT_LINES` lines cut: from an
    event's start, the next cut is the first record start (a line that is not a
    continuation) at least that many lines on. A loop per cut, never per line."""
    cap = MAX_EVENT_LINES
    first = np.flatnonzero(new)
    ends = np.append(first[1:], len(new))
    long = np.flatnonzero(ends - first > cap)
    if not long.size:
        return new
    out = new.copy()
    records = np.flatnonzero(~is_cont)
    for i in long:
        pos, end = int(first[i]), int(ends[i])
        while True:
            j = int(np.searchsorted(records, pos + cap))
            if j == records.size or records[j] >= end:
                break
            pos = int(records[j])
            out[pos] = True
    return out
