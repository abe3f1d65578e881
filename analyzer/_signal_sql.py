"""The SQL behind each group of `signals` columns, one `Alt` per source in preference order.

Every query yields ``sec`` (the second, ``second_of(ts)``) and then the group's
columns in order; `analyzer.signals` spreads each sample over the seconds it covers.
"""

from __future__ import annotations

from dataclasses import dataclass

_WHOLE_DISK = "NOT (dev LIKE 'dm-%' OR dev LIKE 'md%' OR dev LIKE 'loop%' OR dev LIKE 'ram%' OR dev LIKE 'zram%')"


@dataclass(frozen=True)
class Alt:
    """One way to fill a group of columns: ``sql`` yields ``sec`` plus the columns."""

    table: str
    sql: str
    note: str = ""


#: bpftrace histogram files by the tool that wrote them (source_file ILIKE pattern)
_HIST_FILES = {"runqlat": "%runqlat%", "biolat": "%biolat%"}


def _hist_p99(tool: str) -> str:
    """p99 per histogram interval of the ``bpf_hist`` rows of one tool's files."""
    return f"""
    WITH h AS (SELECT ts, bucket_low, any_value(bucket_high) AS hi, sum(count) AS c, any_value(unit) AS unit
               FROM bpf_hist WHERE ts IS NOT NULL AND bucket_low IS NOT NULL AND source_file ILIKE '{_HIST_FILES[tool]}'
               GROUP BY ts, bucket_low),
         k AS (SELECT ts, hi, bucket_low,
                      CASE unit WHEN 'nsecs' THEN 0.001 WHEN 'msecs' THEN 1000 WHEN 'secs' THEN 1e6 ELSE 1 END AS f,
                      sum(c) OVER (PARTITION BY ts ORDER BY bucket_low ROWS UNBOUNDED PRECEDING) AS cum,
                      sum(c) OVER (PARTITION BY ts) AS tot FROM h)
    SELECT second_of(ts) AS sec,
           min(CASE WHEN tot > 0 AND cum >= 0.99 * tot THEN coalesce(hi, bucket_low * 2) * f END) AS p99
    FROM k GROUP BY 1"""


# group name -> (columns, alternatives in preference order)
GROUPS: dict[str, tuple[tuple[str, ...], tuple[Alt, ...]]] = {
    "cpu": (
        ("cpu_busy_pct", "cpu_user_pct", "cpu_sys_pct", "iowait_pct", "steal_pct"),
        (
            Alt(
                "mpstat_cpu",
                "SELECT second_of(ts) AS sec, avg(100 - idle_pct - iowait_pct), avg(usr_pct + coalesce(nice_pct, 0)), avg(sys_pct + coalesce(irq_pct, 0) + coalesce(soft_pct, 0)), avg(iowait_pct), avg(steal_pct) FROM mpstat_cpu WHERE cpu = -1 AND since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1",
                "mpstat CPU 'all'",
            ),
            Alt(
                "sar_cpu",
                "SELECT second_of(ts) AS sec, avg(100 - idle_pct - iowait_pct), avg(user_pct + coalesce(nice_pct, 0)), avg(system_pct + coalesce(irq_pct, 0) + coalesce(soft_pct, 0)), avg(iowait_pct), avg(steal_pct) FROM sar_cpu WHERE cpu = -1 AND ts IS NOT NULL GROUP BY 1",
                "sar -u CPU all",
            ),
            Alt(
                "vmstat",
                "SELECT second_of(ts) AS sec, avg(100 - id_pct - wa_pct), avg(us_pct), avg(sy_pct), avg(wa_pct), avg(st_pct) FROM vmstat WHERE since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1",
                "vmstat us/sy/id/wa/st",
            ),
            Alt(
                "iostat_cpu",
                "SELECT second_of(ts) AS sec, avg(100 - idle_pct - iowait_pct), avg(user_pct + coalesce(nice_pct, 0)), avg(system_pct), avg(iowait_pct), avg(steal_pct) FROM iostat_cpu WHERE since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1",
                "iostat avg-cpu",
            ),
        ),
    ),
    "irq": (
        ("irq_soft_max_cpu_pct",),
        (
            Alt(
                "mpstat_cpu",
                "SELECT second_of(ts) AS sec, max(coalesce(irq_pct, 0) + coalesce(soft_pct, 0)) FROM mpstat_cpu WHERE cpu >= 0 AND since_boot IS NOT TRUE AND ts IS NOT NULL AND (irq_pct IS NOT NULL OR soft_pct IS NOT NULL) GROUP BY 1",
                "max over CPUs",
            ),
            Alt(
                "sar_cpu",
                "SELECT second_of(ts) AS sec, max(irq_pct + soft_pct) FROM sar_cpu WHERE cpu >= 0 AND irq_pct IS NOT NULL AND ts IS NOT NULL GROUP BY 1",
                "sar -P ALL -u ALL",
            ),
        ),
    ),
    "runq": (
        ("runq", "blocked"),
        (
            Alt(
                "vmstat",
                "SELECT second_of(ts) AS sec, avg(r), avg(b) FROM vmstat WHERE since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1",
                "vmstat r, b",
            ),
            Alt(
                "sar_queue",
                "SELECT second_of(ts) AS sec, avg(runq_sz), avg(blocked) FROM sar_queue WHERE ts IS NOT NULL GROUP BY 1",
                "sar -q",
            ),
        ),
    ),
    "cs": (
        ("cs_per_s",),
        (
            Alt(
                "vmstat",
                "SELECT second_of(ts) AS sec, avg(cs_per_s) FROM vmstat WHERE since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1",
            ),
            Alt(
                "sar_task",
                "SELECT second_of(ts) AS sec, avg(cswch_s) FROM sar_task WHERE ts IS NOT NULL GROUP BY 1",
            ),
        ),
    ),
    "mem": (
        ("mem_available_kb", "dirty_kb", "writeback_kb"),
        (
            Alt(
                "meminfo",
                "SELECT second_of(ts) AS sec, avg(value_kb) FILTER (key = 'MemAvailable'), avg(value_kb) FILTER (key = 'Dirty'), avg(value_kb) FILTER (key = 'Writeback') FROM meminfo WHERE node IS NULL AND ts IS NOT NULL GROUP BY 1",
                "/proc/meminfo",
            ),
            Alt(
                "sar_memory",
                "SELECT second_of(ts) AS sec, avg(kbavail), avg(kbdirty), NULL::DOUBLE FROM sar_memory WHERE ts IS NOT NULL GROUP BY 1",
                "sar -r",
            ),
        ),
    ),
    # Change of Dirty + Writeback from the previous sample, per second of the time between
    # them (their exact stamps): a 5 s sampler's growth is spread over its 5 seconds
    # instead of landing, 5 times too large, in the one second where the value changed.
    "pagecache": (
        ("page_cache_growth_kb_s",),
        (
            Alt(
                "meminfo",
                """SELECT sec, (v - lag(v) OVER w) / nullif(t - lag(t) OVER w, 0) FROM (
                    SELECT second_of(ts) AS sec, avg(epoch(ts)) AS t,
                           avg(value_kb) FILTER (key = 'Dirty') + coalesce(avg(value_kb) FILTER (key = 'Writeback'), 0) AS v
                    FROM meminfo WHERE node IS NULL AND ts IS NOT NULL GROUP BY 1)
                WHERE v IS NOT NULL WINDOW w AS (ORDER BY sec)""",
                "/proc/meminfo Dirty + Writeback: change since the previous sample per second",
            ),
            Alt(
                "sar_memory",
                """SELECT sec, (v - lag(v) OVER w) / nullif(t - lag(t) OVER w, 0) FROM (
                    SELECT second_of(ts) AS sec, avg(epoch(ts)) AS t, avg(kbdirty) AS v
                    FROM sar_memory WHERE ts IS NOT NULL GROUP BY 1)
                WHERE v IS NOT NULL WINDOW w AS (ORDER BY sec)""",
                "sar -r kbdirty: change since the previous sample per second",
            ),
        ),
    ),
    "swap": (
        ("swap_in_kb_s", "swap_out_kb_s"),
        (
            Alt(
                "vmstat",
                "SELECT second_of(ts) AS sec, avg(si_kb_s), avg(so_kb_s) FROM vmstat WHERE since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1",
                "vmstat si/so",
            ),
            Alt(
                "proc_vmstat",
                "SELECT second_of(ts) AS sec, avg(rate_per_s) FILTER (key = 'pswpin') * 4, avg(rate_per_s) FILTER (key = 'pswpout') * 4 FROM proc_vmstat WHERE node IS NULL AND ts IS NOT NULL GROUP BY 1",
                "pswpin/pswpout × 4 kB pages",
            ),
            Alt(
                "sar_swap",
                "SELECT second_of(ts) AS sec, avg(pswpin_s) * 4, avg(pswpout_s) * 4 FROM sar_swap WHERE ts IS NOT NULL GROUP BY 1",
                "sar -W × 4 kB pages",
            ),
        ),
    ),
    # Reclaim by who reclaims (kswapd, direct, khugepaged, proactive: *global* reclaim only)
    # and by what (anon + file: every reclaim, memory-cgroup limit reclaim included, which
    # the kernel does not count under kswapd/direct). Totals take the larger of the two
    # sums, so kernels with only one family (old: per-zone kswapd/direct; new: both) work.
    "reclaim": (
        (
            "pgscan_per_s",
            "pgscan_direct_per_s",
            "pgscan_kswapd_per_s",
            "pgsteal_per_s",
            "pgmajfault_per_s",
            "refault_per_s",
        ),
        (
            Alt(
                "proc_vmstat",
                """SELECT sec,
                    greatest(sum(r) FILTER (key LIKE 'pgscan%' AND key NOT IN ('pgscan_anon', 'pgscan_file', 'pgscan_direct_throttle')),
                             sum(r) FILTER (key IN ('pgscan_anon', 'pgscan_file'))),
                    sum(r) FILTER (key LIKE 'pgscan_direct%' AND key <> 'pgscan_direct_throttle'),
                    sum(r) FILTER (key LIKE 'pgscan_kswapd%'),
                    greatest(sum(r) FILTER (key LIKE 'pgsteal%' AND key NOT IN ('pgsteal_anon', 'pgsteal_file')),
                             sum(r) FILTER (key IN ('pgsteal_anon', 'pgsteal_file'))),
                    sum(r) FILTER (key = 'pgmajfault'),
                    sum(r) FILTER (key IN ('workingset_refault', 'workingset_refault_anon', 'workingset_refault_file'))
                FROM (SELECT second_of(ts) AS sec, key, avg(rate_per_s) AS r FROM proc_vmstat
                      WHERE node IS NULL AND ts IS NOT NULL AND rate_per_s IS NOT NULL
                        AND (key LIKE 'pgscan%' OR key LIKE 'pgsteal%' OR key = 'pgmajfault' OR key LIKE 'workingset_refault%')
                      GROUP BY 1, 2) GROUP BY sec""",
                "/proc/vmstat: scan/steal = max(kswapd + direct + khugepaged + proactive, anon + file)",
            ),
            Alt(
                "sar_paging",
                "SELECT second_of(ts) AS sec, avg(pgscank_s + pgscand_s), avg(pgscand_s), avg(pgscank_s), avg(pgsteal_s), avg(majflt_s), NULL::DOUBLE FROM sar_paging WHERE ts IS NOT NULL GROUP BY 1",
                "sar -B (kswapd + direct only: cgroup limit reclaim not counted)",
            ),
        ),
    ),
    "psi": (
        (
            "psi_cpu_some_pct",
            "psi_mem_some_pct",
            "psi_mem_full_pct",
            "psi_io_some_pct",
            "psi_io_full_pct",
        ),
        (
            Alt(
                "psi",
                """SELECT second_of(ts) AS sec,
                    avg(v) FILTER (resource = 'cpu' AND kind = 'some'), avg(v) FILTER (resource = 'memory' AND kind = 'some'),
                    avg(v) FILTER (resource = 'memory' AND kind = 'full'), avg(v) FILTER (resource = 'io' AND kind = 'some'),
                    avg(v) FILTER (resource = 'io' AND kind = 'full')
                FROM (SELECT ts, resource, kind, coalesce(stall_pct, avg10_pct) AS v FROM psi WHERE source = 'system' AND ts IS NOT NULL)
                GROUP BY 1""",
                "/proc/pressure: stall_pct, else avg10",
            ),
            Alt(
                "sar_psi",
                """SELECT second_of(ts) AS sec,
                    avg(v) FILTER (resource = 'cpu' AND kind = 'some'), avg(v) FILTER (resource = 'memory' AND kind = 'some'),
                    avg(v) FILTER (resource = 'memory' AND kind = 'full'), avg(v) FILTER (resource = 'io' AND kind = 'some'),
                    avg(v) FILTER (resource = 'io' AND kind = 'full')
                FROM (SELECT ts, resource, kind, coalesce(avg_pct, avg10_pct) AS v FROM sar_psi WHERE ts IS NOT NULL) GROUP BY 1""",
                "sar -q PSI",
            ),
        ),
    ),
    "disk": (
        (
            "disk_read_kb_s",
            "disk_write_kb_s",
            "disk_util_max_pct",
            "disk_w_await_max_ms",
            "disk_aqu_sz_max",
        ),
        (
            Alt(
                "iostat_device",
                f"""SELECT sec, sum(rd), sum(wr), max(util), max(wa), max(q) FROM (
                    SELECT second_of(ts) AS sec, device AS dev, avg(coalesce(rkb_s, kb_read_s)) AS rd,
                           avg(coalesce(wkb_s, kb_wrtn_s)) AS wr, avg(util_pct) AS util,
                           avg(coalesce(w_await_ms, await_ms)) AS wa, avg(aqu_sz) AS q
                    FROM iostat_device WHERE since_boot IS NOT TRUE AND is_partition IS NOT TRUE AND is_group IS NOT TRUE
                      AND ts IS NOT NULL GROUP BY 1, 2) WHERE {_WHOLE_DISK} GROUP BY sec""",
                "iostat -x, whole disks",
            ),
            Alt(
                "sar_disk",
                f"""SELECT sec, sum(rd), sum(wr), max(util), max(wa), max(q) FROM (
                    SELECT second_of(ts) AS sec, dev, avg(rkb_s) AS rd, avg(wkb_s) AS wr, avg(util_pct) AS util,
                           avg(await_ms) AS wa, avg(aqu_sz) AS q FROM sar_disk WHERE ts IS NOT NULL GROUP BY 1, 2)
                WHERE {_WHOLE_DISK} AND NOT regexp_matches(dev, '^(sd[a-z]+|vd[a-z]+|xvd[a-z]+)[0-9]+$|^nvme[0-9]+n[0-9]+p[0-9]+$')
                GROUP BY sec""",
                "sar -d (await for w_await)",
            ),
        ),
    ),
    "net": (
        ("net_rx_kb_s", "net_tx_kb_s"),
        (
            Alt(
                "sar_net_dev",
                "SELECT sec, sum(rx), sum(tx) FROM (SELECT second_of(ts) AS sec, iface, avg(rxkb_s) AS rx, avg(txkb_s) AS tx FROM sar_net_dev WHERE iface <> 'lo' AND ts IS NOT NULL GROUP BY 1, 2) GROUP BY sec",
            ),
        ),
    ),
    "neterr": (
        ("net_drop_per_s", "net_err_per_s"),
        (
            Alt(
                "sar_net_edev",
                """SELECT sec, sum(d), sum(e) FROM (SELECT second_of(ts) AS sec, iface,
                    avg(coalesce(rxdrop_s, 0) + coalesce(txdrop_s, 0)) AS d,
                    avg(coalesce(rxerr_s, 0) + coalesce(txerr_s, 0) + coalesce(rxfram_s, 0) + coalesce(rxfifo_s, 0) + coalesce(txfifo_s, 0) + coalesce(txcarr_s, 0)) AS e
                FROM sar_net_edev WHERE iface <> 'lo' AND ts IS NOT NULL GROUP BY 1, 2) GROUP BY sec""",
            ),
        ),
    ),
    "gpu": (
        (
            "gpu_count",
            "gpu_util_mean_pct",
            "gpu_util_min_pct",
            "gpu_power_w",
            "gpu_temp_max_c",
            "gpu_sm_clock_min_mhz",
            "gpu_pviol_max_pct",
            "gpu_tviol_any",
            "gpu_mem_used_mib",
        ),
        (
            Alt(
                "gpu_dmon",
                """SELECT sec, count(*), avg(sm), min(sm), sum(pw), max(tc), min(clk), max(pv), max(tv), sum(fb) FROM (
                    SELECT second_of(ts) AS sec, gpu, avg(sm_pct) AS sm, avg(pwr_w) AS pw, max(gtemp_c) AS tc,
                           min(pclk_mhz) AS clk, max(pviol_pct) AS pv, max(tviol::INT) AS tv, avg(fb_mib) AS fb
                    FROM gpu_dmon WHERE ts IS NOT NULL GROUP BY 1, 2) GROUP BY sec""",
                "nvidia-smi dmon",
            ),
        ),
    ),
    "throttle": (
        ("throttled_pct", "throttled_ms_per_s"),
        (
            Alt(
                "cgroup_cpu",
                "SELECT sec, max(p), max(ms) FROM (SELECT second_of(ts) AS sec, cgroup, avg(throttled_pct) AS p, avg(throttled_ms_per_s) AS ms FROM cgroup_cpu WHERE ts IS NOT NULL GROUP BY 1, 2) GROUP BY sec",
                "max over cgroups",
            ),
        ),
    ),
    "runqlat": (
        ("runqlat_p99_us", "runqlat_interval_s"),
        (Alt("bpf_hist", _hist_p99("runqlat"), "runqlat histogram file"),),
    ),
    "biolat": (
        ("biolat_p99_us", "biolat_interval_s"),
        (Alt("bpf_hist", _hist_p99("biolat"), "biolat/biolatency histogram file"),),
    ),
}
WITH_INTERVAL = {"runqlat", "biolat"}
