"""Declared tables of the cgroup parser (see ``cgroup.py`` for inputs and semantics)."""

from __future__ import annotations

import polars as pl

from analyzer.parsers.base import TS, table

_TS = ("ts", TS, "", "sample time (UTC); NULL for a snapshot without timestamp")
_CG = (
    "cgroup",
    pl.Utf8(),
    "",
    "cgroup path below /sys/fs/cgroup (v1 mount removed); NULL if unknown",
)
I64 = pl.Int64()
F64 = pl.Float64()

TABLES = {
    "cgroup_cpu": table(
        "one row per (ts, cgroup): cpu.stat / cpuacct counters, units normalised to µs",
        _TS,
        _CG,
        ("usage_usec", I64, "us", "total CPU time (v2 usage_usec; v1 cpuacct.usage ns/1000)"),
        ("user_usec", I64, "us", "user CPU time (v1 cpuacct.stat ticks x 10000, USER_HZ=100)"),
        ("system_usec", I64, "us", "system CPU time (v1 cpuacct.stat ticks x 10000)"),
        ("nice_usec", I64, "us", "nice CPU time (v2, kernel 6.x)"),
        ("force_idle_usec", I64, "us", "core_sched.force_idle_usec (core scheduling)"),
        ("nr_periods", I64, "", "CFS bandwidth periods elapsed (counter)"),
        ("nr_throttled", I64, "", "periods in which the group was throttled (counter)"),
        ("throttled_usec", I64, "us", "time throttled (v2 µs; v1 throttled_time ns/1000)"),
        ("nr_bursts", I64, "", "periods with a burst (counter)"),
        ("burst_usec", I64, "us", "burst time (v2 µs; v1 burst_time ns/1000)"),
        ("wait_usec", I64, "us", "v1 wait_sum (schedstats) ns/1000"),
        ("throttled_pct", F64, "%", "Δnr_throttled/Δnr_periods x 100 since previous sample"),
        ("throttled_ms_per_s", F64, "ms/s", "Δthrottled_usec/1000 per second of wall time"),
        ("usage_pct", F64, "%", "Δusage_usec per wall µs x 100 (100 = one CPU busy)"),
    ),
    "cgroup_memory": table(
        "one row per (ts, cgroup): memory usage, limits (NULL = unlimited) and events",
        _TS,
        _CG,
        ("current_bytes", I64, "bytes", "memory.current / v1 memory.usage_in_bytes"),
        ("max_bytes", I64, "bytes", "memory.max / v1 limit_in_bytes; NULL = unlimited"),
        ("high_bytes", I64, "bytes", "memory.high; NULL = unlimited"),
        ("low_bytes", I64, "bytes", "memory.low protection"),
        ("min_bytes", I64, "bytes", "memory.min protection"),
        ("peak_bytes", I64, "bytes", "memory.peak / v1 max_usage_in_bytes"),
        ("swap_current_bytes", I64, "bytes", "memory.swap.current"),
        ("swap_max_bytes", I64, "bytes", "memory.swap.max; NULL = unlimited"),
        ("memsw_current_bytes", I64, "bytes", "v1 memory.memsw.usage_in_bytes (memory+swap)"),
        ("events_low", I64, "", "memory.events low (counter)"),
        ("events_high", I64, "", "memory.events high: times over memory.high (counter)"),
        ("events_max", I64, "", "memory.events max: times at memory.max (counter)"),
        ("events_oom", I64, "", "memory.events oom: allocations that hit OOM (counter)"),
        ("events_oom_kill", I64, "", "processes OOM-killed (v2 memory.events, v1 oom_control)"),
        ("events_oom_group_kill", I64, "", "memory.events oom_group_kill (counter)"),
        ("failcnt", I64, "", "v1 memory.failcnt: limit hits (counter)"),
        ("under_oom", I64, "", "v1 memory.oom_control under_oom (0/1)"),
    ),
    "cgroup_memory_stat": table(
        "one row per key line of memory.stat, memory.events[.local], memory.swap.events, "
        "memory.oom_control",
        _TS,
        _CG,
        ("file", pl.Utf8(), "", "control file the line came from"),
        ("key", pl.Utf8(), "", "kernel key, e.g. anon, file_dirty, pgmajfault, oom_kill"),
        ("value", I64, "", "bytes for size keys of memory.stat, else counts/pages as printed"),
    ),
    "cgroup_io": table(
        "one row per (ts, cgroup, device): io.stat / v1 blkio.throttle counters",
        _TS,
        _CG,
        ("device", pl.Utf8(), "", "block device maj:min"),
        ("rbytes", I64, "bytes", "bytes read (counter)"),
        ("wbytes", I64, "bytes", "bytes written (counter)"),
        ("rios", I64, "", "read IOs (counter)"),
        ("wios", I64, "", "write IOs (counter)"),
        ("dbytes", I64, "bytes", "bytes discarded (counter)"),
        ("dios", I64, "", "discard IOs (counter)"),
    ),
    "cgroup_limits": table(
        "one row per limit value, v1 and v2 names normalised to one vocabulary",
        _TS,
        _CG,
        (
            "key",
            pl.Utf8(),
            "",
            "cpu.quota_us, cpu.period_us, cpu.weight, cpu.weight_nice, memory.max_bytes, "
            "memory.high_bytes, memory.low_bytes, memory.min_bytes, memory.swap_max_bytes, "
            "memory.soft_limit_bytes, memory.memsw_max_bytes, pids.max, io.max.{rbps,wbps,riops,wiops}",
        ),
        ("value", I64, "", "value in the unit the key names; NULL when unlimited"),
        ("unlimited", pl.Boolean(), "", "true for 'max', quota -1, or a v1 limit >= 2**62"),
        ("device", pl.Utf8(), "", "maj:min for io.max keys, else NULL"),
        ("source_key", pl.Utf8(), "", "original file (cpu.shares is converted to a weight)"),
    ),
}
