"""The ``meminfo`` (every line of /proc/meminfo, kernel 6.8 key set) and ``proc_vmstat``
(the capture's filtered /proc/vmstat keys) samplers, in the sampler line format of
`analyzer.synth.w_samplers`. /proc/vmstat counters are cumulative since boot.

Sample::

    1795960800.071234567 /proc/meminfo MemTotal:       66874345 kB
    1795960800.071234567 /proc/vmstat pgscan_direct 0
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.common import Outcome, Sink
from analyzer.synth.model import World
from analyzer.synth.w_samplers import sample_epochs, write_lines

# /proc/meminfo of a 6.8 kernel, in order: (key, has " kB")
MEMINFO_KEYS = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "Active(anon)",
    "Inactive(anon)",
    "Active(file)",
    "Inactive(file)",
    "Unevictable",
    "Mlocked",
    "SwapTotal",
    "SwapFree",
    "Zswap",
    "Zswapped",
    "Dirty",
    "Writeback",
    "AnonPages",
    "Mapped",
    "Shmem",
    "KReclaimable",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "SecPageTables",
    "NFS_Unstable",
    "Bounce",
    "WritebackTmp",
    "CommitLimit",
    "Committed_AS",
    "VmallocTotal",
    "VmallocUsed",
    "VmallocChunk",
    "Percpu",
    "HardwareCorrupted",
    "AnonHugePages",
    "ShmemHugePages",
    "ShmemPmdMapped",
    "FileHugePages",
    "FilePmdMapped",
    "Unaccepted",
    "HugePages_Total",
    "HugePages_Free",
    "HugePages_Rsvd",
    "HugePages_Surp",
    "Hugepagesize",
    "Hugetlb",
    "DirectMap4k",
    "DirectMap2M",
    "DirectMap1G",
]
NO_UNIT = {"HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp"}
VMSTAT_KEYS = [
    "nr_free_pages",
    "nr_slab_reclaimable",
    "nr_slab_unreclaimable",
    "workingset_refault_anon",
    "workingset_refault_file",
    "nr_anon_pages",
    "nr_mapped",
    "nr_file_pages",
    "nr_dirty",
    "nr_writeback",
    "nr_writeback_temp",
    "nr_shmem",
    "nr_dirtied",
    "nr_written",
    "nr_dirty_threshold",
    "nr_dirty_background_threshold",
    "pgpgin",
    "pgpgout",
    "pswpin",
    "pswpout",
    "allocstall_dma",
    "allocstall_dma32",
    "allocstall_normal",
    "allocstall_movable",
    "allocstall_device",
    "pgfault",
    "pgmajfault",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgsteal_khugepaged",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgscan_khugepaged",
    "pgscan_direct_throttle",
    "pgscan_anon",
    "pgscan_file",
    "pgsteal_anon",
    "pgsteal_file",
    "kswapd_inodesteal",
    "kswapd_low_wmark_hit_quickly",
    "kswapd_high_wmark_hit_quickly",
    "drop_pagecache",
    "drop_slab",
    "oom_kill",
    "compact_migrate_scanned",
    "compact_free_scanned",
    "compact_isolated",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "compact_daemon_wake",
    "compact_daemon_migrate_scanned",
    "compact_daemon_free_scanned",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
]


def meminfo_frame(w: World) -> dict[str, pl.Series]:
    """Every meminfo key -> kB values per sample (k = 0..N)."""
    h = w.host
    n = h.height
    total = float(w.mem_total_kb)
    c = lambda v: pl.Series([float(v)] * n)  # noqa: E731
    anon, cache, slab = h["anon_kb"], h["cache_kb"], h["slab_kb"]
    swap_free = w.swap_total_kb - h["swap_used_kb"]
    return {
        "MemTotal": c(total),
        "MemFree": h["free_kb"],
        "MemAvailable": h["avail_kb"],
        "Buffers": h["buff_kb"],
        "Cached": cache,
        "SwapCached": h["swap_used_kb"] * 0.02,
        "Active": anon * 0.7 + cache * 0.4,
        "Inactive": anon * 0.3 + cache * 0.6,
        "Active(anon)": anon * 0.7,
        "Inactive(anon)": anon * 0.3,
        "Active(file)": cache * 0.4,
        "Inactive(file)": cache * 0.6,
        "Unevictable": c(31_244),
        "Mlocked": c(27_652),
        "SwapTotal": c(w.swap_total_kb),
        "SwapFree": swap_free,
        "Zswap": c(0),
        "Zswapped": c(0),
        "Dirty": h["dirty_kb"],
        "Writeback": h["wb_kb"],
        "AnonPages": anon * 0.98,
        "Mapped": cache * 0.03,
        "Shmem": h["shmem_kb"],
        "KReclaimable": slab * 0.62,
        "Slab": slab,
        "SReclaimable": slab * 0.6,
        "SUnreclaim": slab * 0.4,
        "KernelStack": c(38_912 + 1024 * w.spec.cpus),
        "PageTables": anon / 480,
        "SecPageTables": c(0),
        "NFS_Unstable": c(0),
        "Bounce": c(0),
        "WritebackTmp": c(0),
        "CommitLimit": c(total / 2 + w.swap_total_kb),
        "Committed_AS": anon * 1.6,
        "VmallocTotal": c(34_359_738_367),
        "VmallocUsed": c(312_664),
        "VmallocChunk": c(0),
        "Percpu": c(8_448 * w.spec.cpus),
        "HardwareCorrupted": c(0),
        "AnonHugePages": (anon * 0.55 / 2048).floor() * 2048,
        "ShmemHugePages": c(0),
        "ShmemPmdMapped": c(0),
        "FileHugePages": c(0),
        "FilePmdMapped": c(0),
        "Unaccepted": c(0),
        "HugePages_Total": c(0),
        "HugePages_Free": c(0),
        "HugePages_Rsvd": c(0),
        "HugePages_Surp": c(0),
        "Hugepagesize": c(2048),
        "Hugetlb": c(0),
        "DirectMap4k": c(1_349_516),
        "DirectMap2M": c(total * 0.3 // 2048 * 2048),
        "DirectMap1G": c(total * 0.7 // 1048576 * 1048576),
    }


def write_meminfo(w: World, sink: Sink) -> Outcome:
    vals = meminfo_frame(w)
    items = []
    for key in MEMINFO_KEYS:
        label = f"{key + ':':<16}" if len(key) < 16 else f"{key}: "
        text = _fmt.num(vals[key].floor(), 24 - len(label), 0)
        if key not in NO_UNIT:
            text = text + " kB"
        items.append((f"/proc/meminfo {label}", text))
    write_lines(sink, sample_epochs(w, "meminfo"), items)
    return Outcome(rc=143, averages=False)


def vmstat_counters(w: World) -> dict[str, pl.Series]:
    """/proc/vmstat values per sample: gauges in pages, counters cumulative since boot."""
    h = w.host
    n = h.height
    iv = float(w.interval)
    up = w.start_epoch - w.boot_epoch
    disks = w.disks.group_by("k").agg(rd=pl.col("rkb").sum(), wr=pl.col("wkb").sum()).sort("k")  # type: ignore[union-attr]
    pages = lambda kb: (kb / 4).floor()  # noqa: E731
    cum = lambda rate, base: ((rate * iv).cum_sum() + base).floor()  # noqa: E731
    c = lambda v: pl.Series([float(v)] * n)  # noqa: E731
    wr_pages, rd = disks["wr"] / 4, disks["rd"]
    scan_k, scan_d = h["scan_kswapd"], h["scan_direct"]
    steal_k, steal_d = h["pgsteal_kswapd_s"], h["pgsteal_direct_s"]
    dirty_thr = (h["avail_kb"] * 0.2 / 4).floor()
    vals = {
        "nr_free_pages": pages(h["free_kb"]),
        "nr_slab_reclaimable": pages(h["slab_kb"] * 0.6),
        "nr_slab_unreclaimable": pages(h["slab_kb"] * 0.4),
        "workingset_refault_anon": cum(h["si_kb_s"] / 4, 0),
        "workingset_refault_file": cum(h["refault"], up * 2),
        "nr_anon_pages": pages(h["anon_kb"] * 0.98),
        "nr_mapped": pages(h["cache_kb"] * 0.03),
        "nr_file_pages": pages(h["cache_kb"] + h["buff_kb"]),
        "nr_dirty": pages(h["dirty_kb"]),
        "nr_writeback": pages(h["wb_kb"]),
        "nr_writeback_temp": c(0),
        "nr_shmem": pages(h["shmem_kb"]),
        "nr_dirtied": cum(wr_pages, up * 600),
        "nr_written": cum(wr_pages, up * 598),
        "nr_dirty_threshold": dirty_thr,
        "nr_dirty_background_threshold": (dirty_thr / 2).floor(),
        "pgpgin": cum(rd, up * 60_000),
        "pgpgout": cum(disks["wr"], up * 2_400),
        "pswpin": cum(h["si_kb_s"] / 4, 1_024),
        "pswpout": cum(h["so_kb_s"] / 4, 20_480),
        "allocstall_dma": c(0),
        "allocstall_dma32": c(0),
        "allocstall_normal": cum(h["allocstall"], 0),
        "allocstall_movable": cum(h["allocstall"] * 0.3, 0),
        "allocstall_device": c(0),
        "pgfault": cum(h["pgfault_s"], up * 4_000),
        "pgmajfault": cum(h["pgmajfault_s"], up * 0.5),
        "pgsteal_kswapd": cum(steal_k, 0),
        "pgsteal_direct": cum(steal_d, 0),
        "pgsteal_khugepaged": c(0),
        "pgscan_kswapd": cum(scan_k, 0),
        "pgscan_direct": cum(scan_d, 0),
        "pgscan_khugepaged": c(0),
        "pgscan_direct_throttle": c(0),
        "pgscan_anon": cum((scan_k + scan_d) * 0.3, 0),
        "pgscan_file": cum((scan_k + scan_d) * 0.7, 0),
        "pgsteal_anon": cum((steal_k + steal_d) * 0.3, 0),
        "pgsteal_file": cum((steal_k + steal_d) * 0.7, 0),
        "kswapd_inodesteal": c(0),
        "kswapd_low_wmark_hit_quickly": cum((scan_k > 0).cast(pl.Float64), 3),
        "kswapd_high_wmark_hit_quickly": cum((scan_k > 0).cast(pl.Float64) * 0.5, 1),
        "drop_pagecache": c(0),
        "drop_slab": c(0),
        "oom_kill": h["oom_kills"].cum_sum().cast(pl.Float64),
        "compact_migrate_scanned": cum(scan_d * 0.1, 0),
        "compact_free_scanned": cum(scan_d * 0.2, 0),
        "compact_isolated": cum(scan_d * 0.02, 0),
        "compact_stall": cum(h["allocstall"] * 0.05, 0),
        "compact_fail": cum(h["allocstall"] * 0.04, 0),
        "compact_success": cum(h["allocstall"] * 0.01, 0),
        "compact_daemon_wake": cum((scan_k > 0).cast(pl.Float64) * 0.2, 12),
        "compact_daemon_migrate_scanned": c(0),
        "compact_daemon_free_scanned": c(0),
        "thp_fault_alloc": cum(h["pgfault_s"] * 0.001, up * 2),
        "thp_fault_fallback": cum(h["allocstall"] * 0.5, 0),
        "thp_fault_fallback_charge": c(0),
    }
    return vals


def write_proc_vmstat(w: World, sink: Sink) -> Outcome:
    vals = vmstat_counters(w)
    items = [(f"/proc/vmstat {k} ", _fmt.num(vals[k], 0, 0)) for k in VMSTAT_KEYS]
    write_lines(sink, sample_epochs(w, "proc_vmstat"), items)
    return Outcome(rc=143, averages=False)
