"""Tables produced by `sar` text and `sadf`, and the header-name -> column mapping.

Both parsers (`sar.py`, `sadf.py`) declare the same ``TABLES``; the store appends rows of a
table coming from several files. Each mapped column lists the names it has in sar text /
``sadf -d`` headers (``%user``, ``rxkB/s``) and in ``sadf -j`` JSON (``user``, ``rxkB``),
with an optional scale (old sector-based disk columns are converted to kB: × 0.5).
"""

from __future__ import annotations

import polars as pl

from analyzer.parsers import base

_I, _I32, _F, _S = pl.Int64, pl.Int32, pl.Float64, pl.String
_TS = ("ts", base.TS, "", "sample time (UTC)")

# column -> (dtype, unit, doc, text names, json names); a name "x*0.5" is scaled by 0.5
_Spec = tuple[pl.DataType, str, str, tuple[str, ...], tuple[str, ...]]


def _pct(doc: str, text: tuple[str, ...], js: tuple[str, ...]) -> _Spec:
    return (_F, "%", doc, text, js)


COLUMNS: dict[str, dict[str, _Spec]] = {
    "sar_cpu": {
        "cpu": (_I32, "", "CPU number; -1 = all CPUs", ("CPU",), ("cpu",)),
        "user_pct": _pct(
            "time in user mode (-u ALL: %usr, excludes guest)", ("%user", "%usr"), ("user", "usr")
        ),
        "nice_pct": _pct("time in user mode at nice priority", ("%nice",), ("nice",)),
        "system_pct": _pct(
            "time in kernel mode (-u: includes irq+soft; -u ALL: %sys excludes them)",
            ("%system", "%sys"),
            ("system", "sys"),
        ),
        "iowait_pct": _pct("idle time with outstanding disk I/O", ("%iowait",), ("iowait",)),
        "steal_pct": _pct("time stolen by the hypervisor", ("%steal",), ("steal",)),
        "irq_pct": _pct("time servicing hardware interrupts (-u ALL)", ("%irq",), ("irq",)),
        "soft_pct": _pct("time servicing softirqs (-u ALL)", ("%soft",), ("soft",)),
        "guest_pct": _pct("time running a virtual CPU (-u ALL)", ("%guest",), ("guest",)),
        "gnice_pct": _pct("time running a niced guest (-u ALL)", ("%gnice",), ("gnice",)),
        "idle_pct": _pct("idle time without outstanding disk I/O", ("%idle",), ("idle",)),
    },
    "sar_queue": {
        "runq_sz": (
            _I,
            "tasks",
            "run queue length (running or waiting for a CPU)",
            ("runq-sz",),
            ("runq-sz",),
        ),
        "plist_sz": (_I, "tasks", "number of tasks in the task list", ("plist-sz",), ("plist-sz",)),
        "ldavg_1": (_F, "", "load average, last minute", ("ldavg-1",), ("ldavg-1",)),
        "ldavg_5": (_F, "", "load average, last 5 minutes", ("ldavg-5",), ("ldavg-5",)),
        "ldavg_15": (_F, "", "load average, last 15 minutes", ("ldavg-15",), ("ldavg-15",)),
        "blocked": (
            _I,
            "tasks",
            "tasks blocked waiting for I/O (sysstat >= 10)",
            ("blocked",),
            ("blocked",),
        ),
    },
    "sar_paging": {
        "pgpgin_kb_s": (_F, "kB/s", "kB paged in from disk per second", ("pgpgin/s",), ("pgpgin",)),
        "pgpgout_kb_s": (
            _F,
            "kB/s",
            "kB paged out to disk per second",
            ("pgpgout/s",),
            ("pgpgout",),
        ),
        "fault_s": (_F, "1/s", "page faults (minor + major) per second", ("fault/s",), ("fault",)),
        "majflt_s": (_F, "1/s", "major faults per second", ("majflt/s",), ("majflt",)),
        "pgfree_s": (
            _F,
            "pages/s",
            "pages put on the free list per second",
            ("pgfree/s",),
            ("pgfree",),
        ),
        "pgscank_s": (
            _F,
            "pages/s",
            "pages scanned by kswapd per second",
            ("pgscank/s",),
            ("pgscank",),
        ),
        "pgscand_s": (
            _F,
            "pages/s",
            "pages scanned directly per second",
            ("pgscand/s",),
            ("pgscand",),
        ),
        "pgsteal_s": (_F, "pages/s", "pages reclaimed per second", ("pgsteal/s",), ("pgsteal",)),
        "vmeff_pct": _pct("pgsteal / pgscan (up to sysstat 12.6)", ("%vmeff",), ("vmeff-percent",)),
        "pgprom_s": (
            _F,
            "pages/s",
            "pages promoted to a faster NUMA tier (sysstat 12.7+)",
            ("pgprom/s",),
            ("pgprom",),
        ),
        "pgdem_s": (
            _F,
            "pages/s",
            "pages demoted to a slower NUMA tier (sysstat 12.7+)",
            ("pgdem/s",),
            ("pgdem",),
        ),
    },
    "sar_memory": {
        "kbmemfree": (_I, "kB", "free memory", ("kbmemfree",), ("memfree",)),
        "kbavail": (
            _I,
            "kB",
            "available memory estimate (sysstat 11.5+)",
            ("kbavail",),
            ("avail",),
        ),
        "kbmemused": (_I, "kB", "used memory", ("kbmemused",), ("memused",)),
        "memused_pct": _pct("used memory share", ("%memused",), ("memused-percent",)),
        "kbbuffers": (_I, "kB", "kernel buffers", ("kbbuffers",), ("buffers",)),
        "kbcached": (_I, "kB", "page cache", ("kbcached",), ("cached",)),
        "kbcommit": (
            _I,
            "kB",
            "memory needed for the current workload (committed)",
            ("kbcommit",),
            ("commit",),
        ),
        "commit_pct": _pct(
            "committed memory relative to RAM + swap", ("%commit",), ("commit-percent",)
        ),
        "kbactive": (_I, "kB", "active memory", ("kbactive",), ("active",)),
        "kbinact": (_I, "kB", "inactive memory", ("kbinact",), ("inactive",)),
        "kbdirty": (_I, "kB", "memory waiting to be written back", ("kbdirty",), ("dirty",)),
        "kbshmem": (
            _I,
            "kB",
            "shared memory (sysstat 12.7+)",
            ("kbshmem", "kbshared"),
            ("shmem", "shared"),
        ),
        "kbanonpg": (_I, "kB", "anonymous pages (-r ALL)", ("kbanonpg",), ("anonpg",)),
        "kbslab": (_I, "kB", "slab memory (-r ALL)", ("kbslab",), ("slab",)),
        "kbkstack": (_I, "kB", "kernel stacks (-r ALL)", ("kbkstack",), ("kstack",)),
        "kbpgtbl": (_I, "kB", "page tables (-r ALL)", ("kbpgtbl",), ("pgtbl",)),
        "kbvmused": (_I, "kB", "vmalloc area used (-r ALL)", ("kbvmused",), ("vmused",)),
    },
    "sar_swap_space": {
        "kbswpfree": (_I, "kB", "free swap space", ("kbswpfree",), ("swpfree",)),
        "kbswpused": (_I, "kB", "used swap space", ("kbswpused",), ("swpused",)),
        "swpused_pct": _pct("used swap share", ("%swpused",), ("swpused-percent",)),
        "kbswpcad": (_I, "kB", "swap cached (in swap and in RAM)", ("kbswpcad",), ("swpcad",)),
        "swpcad_pct": _pct("cached swap relative to used swap", ("%swpcad",), ("swpcad-percent",)),
    },
    "sar_swap": {
        "pswpin_s": (_F, "pages/s", "pages swapped in per second (-W)", ("pswpin/s",), ("pswpin",)),
        "pswpout_s": (
            _F,
            "pages/s",
            "pages swapped out per second (-W)",
            ("pswpout/s",),
            ("pswpout",),
        ),
    },
    "sar_task": {
        "proc_s": (_F, "1/s", "tasks created per second (-w)", ("proc/s",), ("proc",)),
        "cswch_s": (_F, "1/s", "context switches per second (-w)", ("cswch/s",), ("cswch",)),
    },
    "sar_io": {
        "tps": (
            _F,
            "1/s",
            "transfers (I/O requests) per second, all devices (-b)",
            ("tps",),
            ("tps",),
        ),
        "rtps": (_F, "1/s", "read requests per second", ("rtps",), ("rtps",)),
        "wtps": (_F, "1/s", "write requests per second", ("wtps",), ("wtps",)),
        "dtps": (_F, "1/s", "discard requests per second (sysstat 12+)", ("dtps",), ("dtps",)),
        "bread_s": (_F, "blocks/s", "512-byte blocks read per second", ("bread/s",), ("bread",)),
        "bwrtn_s": (_F, "blocks/s", "512-byte blocks written per second", ("bwrtn/s",), ("bwrtn",)),
        "bdscd_s": (
            _F,
            "blocks/s",
            "512-byte blocks discarded per second",
            ("bdscd/s",),
            ("bdscd",),
        ),
    },
    "sar_disk": {
        "dev": (_S, "", "block device (name, or devM-N without -p)", ("DEV",), ("disk-device",)),
        "tps": (_F, "1/s", "transfers per second", ("tps",), ("tps",)),
        "rkb_s": (
            _F,
            "kB/s",
            "kB read per second (old rd_sec/s converted)",
            ("rkB/s", "rd_sec/s*0.5"),
            ("rkB", "rd_sec*0.5"),
        ),
        "wkb_s": (
            _F,
            "kB/s",
            "kB written per second (old wr_sec/s converted)",
            ("wkB/s", "wr_sec/s*0.5"),
            ("wkB", "wr_sec*0.5"),
        ),
        "dkb_s": (_F, "kB/s", "kB discarded per second", ("dkB/s",), ("dkB", "dc_sec*0.5")),
        "areq_sz_kb": (
            _F,
            "kB",
            "average request size (old avgrq-sz sectors converted)",
            ("areq-sz", "avgrq-sz*0.5"),
            ("areq-sz", "avgrq-sz*0.5"),
        ),
        "aqu_sz": (_F, "", "average queue length", ("aqu-sz", "avgqu-sz"), ("aqu-sz", "avgqu-sz")),
        "await_ms": (_F, "ms", "average request time (queue + service)", ("await",), ("await",)),
        "svctm_ms": (_F, "ms", "average service time (old versions)", ("svctm",), ("svctm",)),
        "util_pct": _pct("time the device was busy", ("%util",), ("util-percent",)),
    },
    "sar_net_dev": {
        "iface": (_S, "", "network interface", ("IFACE",), ("iface",)),
        "rxpck_s": (_F, "1/s", "packets received per second", ("rxpck/s",), ("rxpck",)),
        "txpck_s": (_F, "1/s", "packets transmitted per second", ("txpck/s",), ("txpck",)),
        "rxkb_s": (_F, "kB/s", "kB received per second", ("rxkB/s",), ("rxkB",)),
        "txkb_s": (_F, "kB/s", "kB transmitted per second", ("txkB/s",), ("txkB",)),
        "rxcmp_s": (_F, "1/s", "compressed packets received per second", ("rxcmp/s",), ("rxcmp",)),
        "txcmp_s": (
            _F,
            "1/s",
            "compressed packets transmitted per second",
            ("txcmp/s",),
            ("txcmp",),
        ),
        "rxmcst_s": (
            _F,
            "1/s",
            "multicast packets received per second",
            ("rxmcst/s",),
            ("rxmcst",),
        ),
        "ifutil_pct": _pct(
            "interface utilisation (sysstat 10+)", ("%ifutil",), ("ifutil-percent",)
        ),
    },
    "sar_net_edev": {
        "iface": (_S, "", "network interface", ("IFACE",), ("iface",)),
        "rxerr_s": (_F, "1/s", "bad packets received per second", ("rxerr/s",), ("rxerr",)),
        "txerr_s": (_F, "1/s", "transmit errors per second", ("txerr/s",), ("txerr",)),
        "coll_s": (_F, "1/s", "collisions per second", ("coll/s",), ("coll",)),
        "rxdrop_s": (
            _F,
            "1/s",
            "received packets dropped per second (no buffer)",
            ("rxdrop/s",),
            ("rxdrop",),
        ),
        "txdrop_s": (
            _F,
            "1/s",
            "transmitted packets dropped per second",
            ("txdrop/s",),
            ("txdrop",),
        ),
        "txcarr_s": (_F, "1/s", "carrier errors per second", ("txcarr/s",), ("txcarr",)),
        "rxfram_s": (_F, "1/s", "frame alignment errors per second", ("rxfram/s",), ("rxfram",)),
        "rxfifo_s": (_F, "1/s", "receive FIFO overruns per second", ("rxfifo/s",), ("rxfifo",)),
        "txfifo_s": (_F, "1/s", "transmit FIFO overruns per second", ("txfifo/s",), ("txfifo",)),
    },
}

#: How a header is recognised: table -> names that must all be present.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "sar_cpu": ("CPU", "%idle"),
    "sar_queue": ("runq-sz",),
    "sar_paging": ("pgpgin/s",),
    "sar_memory": ("kbmemfree",),
    "sar_swap_space": ("kbswpfree",),
    "sar_swap": ("pswpin/s",),
    "sar_task": ("cswch/s",),
    "sar_io": ("tps", "bread/s"),
    "sar_disk": ("DEV", "tps"),
    "sar_net_dev": ("IFACE", "rxpck/s"),
    "sar_net_edev": ("IFACE", "rxerr/s"),
}
#: sadf -j activity key -> table (array items and single objects alike).
JSON_ACTIVITIES: dict[str, str] = {
    "cpu-load": "sar_cpu",
    "cpu-load-all": "sar_cpu",
    "queue": "sar_queue",
    "paging": "sar_paging",
    "memory": "sar_memory",
    "swap-pages": "sar_swap",
    "process-and-context-switch": "sar_task",
    "io": "sar_io",
    "disk": "sar_disk",
    "net-dev": "sar_net_dev",
    "net-edev": "sar_net_edev",
}
#: item-name columns of unmapped sections (their value is text, not a metric).
KEY_NAMES = frozenset(
    {
        "CPU",
        "INTR",
        "TTY",
        "DEV",
        "IFACE",
        "FILESYSTEM",
        "FCHOST",
        "BUS",
        "TEMP",
        "FAN",
        "IN",
        "DEVICE",
        "BAT",
        "manufact",
        "product",
        "status",
    }
)
#: trailing free-text columns (may hold blanks, or be empty)
TEXT_NAMES = frozenset({"manufact", "product", "FILESYSTEM", "DEVICE"})
PSI_PREFIX = {
    "%scpu": ("cpu", "some"),
    "%sio": ("io", "some"),
    "%fio": ("io", "full"),
    "%smem": ("memory", "some"),
    "%fmem": ("memory", "full"),
}
PSI_SUFFIX = {"-10": "avg10_pct", "-60": "avg60_pct", "-300": "avg300_pct", "": "avg_pct"}


def _tables() -> dict[str, base.Table]:
    docs = {
        "sar_cpu": "one row per CPU (or all) per sample: sar -u / -u ALL / -P, sadf cpu-load",
        "sar_queue": "one row per sample: run queue and load averages (sar -q)",
        "sar_paging": "one row per sample: paging statistics (sar -B)",
        "sar_memory": "one row per sample: memory utilisation (sar -r [ALL])",
        "sar_swap_space": "one row per sample: swap space utilisation (sar -S)",
        "sar_swap": "one row per sample: swapping activity (sar -W)",
        "sar_task": "one row per sample: task creation and context switches (sar -w)",
        "sar_io": "one row per sample: I/O totals over all devices (sar -b)",
        "sar_disk": "one row per block device per sample (sar -d)",
        "sar_net_dev": "one row per interface per sample (sar -n DEV)",
        "sar_net_edev": "one row per interface per sample: error counters (sar -n EDEV)",
    }
    out = {
        t: base.table(docs[t], _TS, *((c, s[0], s[1], s[2]) for c, s in cols.items()))
        for t, cols in COLUMNS.items()
    }
    out["sar_psi"] = base.table(
        "one row per resource and kind per sample: pressure stall information (sar -q PSI/ALL, sysstat 12.3+)",
        _TS,
        ("resource", _S, "", "cpu, io or memory"),
        ("kind", _S, "", "some (at least one task stalled) or full (all non-idle tasks stalled)"),
        ("avg10_pct", _F, "%", "kernel's 10 s running average"),
        ("avg60_pct", _F, "%", "kernel's 60 s running average"),
        ("avg300_pct", _F, "%", "kernel's 300 s running average"),
        ("avg_pct", _F, "%", "share of the last sample interval spent stalled"),
    )
    out["sar_events"] = base.table(
        "one row per restart or comment record of the sa data file (deduplicated)",
        _TS,
        ("event", _S, "", "'restart' (LINUX RESTART: the host booted) or 'comment' (sadc -C)"),
        ("detail", _S, "", "comment text, or the restart's '(N CPU)' note"),
        ("cpus", _I32, "", "CPU count after a restart (NULL for comments)"),
    )
    out["sar_other"] = base.table(
        "one row per value of an activity without a dedicated table (e.g. -I, -v, -n SOCK, -F), long format",
        _TS,
        (
            "section",
            _S,
            "",
            "the section's header names joined by spaces (or the sadf -j activity key)",
        ),
        (
            "item",
            _S,
            "",
            "item names of the row (CPU, INTR, IFACE, FILESYSTEM... joined by '|'), NULL if none",
        ),
        ("metric", _S, "", "column name as printed (e.g. intr/s, %fsused)"),
        ("value", _F, "", "numeric value in the unit the tool printed (NULL when not a number)"),
        ("text", _S, "", "the raw token when it is not a number, else NULL"),
    )
    return out


TABLES: dict[str, base.Table] = _tables()
