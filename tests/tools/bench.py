"""Measure the report's size and render time for a large store: ``python -m tests.tools.bench``.

Builds (or takes) a store, renders the HTML report, then opens it in headless Chromium
(:mod:`reports.browser`) several times and reports the file size and the time until every
chart fired ``plotly_afterplot`` (median of the runs). Figures go to docs/performance.md,
section "Report".

Stores:

- default: :func:`scale_store`, a synthetic day of a 128-CPU, 8-GPU, 16-disk host written
  with SQL straight into the tables the report reads (1 s samples; random values, the worst
  case for size; a checkpoint stall every 30 min plus other findings);
- ``--bundle PATH``: a real or generated bundle (e.g. from ``hindsight synth``), analysed
  with the pipeline first.

Example::

    python -m tests.tools.bench --hours 24 --runs 3
    python -m tests.tools.bench --bundle samples/h200-checkpoint-stall.tgz
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

T0 = "TIMESTAMPTZ '2024-05-01 00:00:00+00'"


def scale_store(
    con: duckdb.DuckDBPyConnection,
    *,
    hours: float = 24,
    step: int = 1,
    cpus: int = 128,
    gpus: int = 8,
    disks: int = 16,
    ifaces: int = 4,
    cgroups: int = 6,
) -> duckdb.DuckDBPyConnection:
    """Fill ``con`` with a synthetic capture of ``hours`` at ``step`` seconds."""
    n = int(hours * 3600 // step)
    secs = int(hours * 3600)
    t = f"{T0} + to_seconds(i * {int(step)})"
    con.execute(f"""
    SELECT setseed(0.42);
    CREATE TABLE bundle AS SELECT 'scale-{float(hours):g}h' AS name, '/tmp/scale.tgz' AS source_path,
        'gpu-scale-01' AS host, '6.8.0-45-generic' AS kernel, 'Ubuntu 24.04 LTS' AS os,
        'x86_64' AS arch, {cpus}::INTEGER AS cpus, {T0} AS start_utc,
        {T0} + to_seconds({secs}) AS end_utc, {int(step)}::DOUBLE AS interval_s,
        'America/Chicago' AS timezone, '0.1.0' AS capture_version, 1 AS format_version,
        true AS manifest_present, false AS interrupted, 0 AS refused_members, NULL AS notes,
        '0.1.0' AS analyzer_version, now() AS analyzed_at;
    CREATE TABLE collectors AS SELECT 'file' || i || '.out' AS file, 'c' || i AS collector,
        'vmstat' AS tool, 'parsed' AS status, 1000000::BIGINT AS bytes, 86400::BIGINT AS lines_total,
        86400::BIGINT AS lines_parsed, 0::BIGINT AS lines_structure, 0::BIGINT AS lines_skipped,
        100.0 AS parsed_pct, '{{}}' AS skip_reasons, NULL AS notes, NULL AS stderr_tail,
        0 AS exit_code, 'ok' AS manifest_status, NULL AS reason, 'vmstat' AS tables FROM range(60) t(i);
    CREATE TABLE vmstat AS SELECT {t} AS ts, false AS since_boot, (random() * 40)::BIGINT AS r,
        (random() * 4)::BIGINT AS b, 0::BIGINT AS swpd_kb, (2e8 - random() * 1e7)::BIGINT AS free_kb,
        1e6::BIGINT AS buff_kb, (3e8 + random() * 1e7)::BIGINT AS cache_kb, 0.0 AS si_kb_s, 0.0 AS so_kb_s,
        random() * 60 AS us_pct, random() * 10 AS sy_pct, random() * 3 AS wa_pct, 0.0 AS st_pct,
        30.0 AS id_pct FROM range({n}) t(i);
    CREATE TABLE mpstat_cpu AS SELECT {t} AS ts, false AS since_boot, c::INTEGER AS cpu,
        random() * 60 AS usr_pct, random() * 8 AS sys_pct, random() * 2 AS iowait_pct, 0.1 AS irq_pct,
        random() AS soft_pct, 0.0 AS steal_pct, random() * 30 AS idle_pct
        FROM range({n}) t(i), range(-1, {cpus}) c(c);
    CREATE TABLE meminfo AS SELECT {t} AS ts, NULL::INTEGER AS node, k AS key,
        (CASE k WHEN 'MemTotal' THEN 2.1e9 WHEN 'SwapTotal' THEN 0 ELSE random() * 1e9 END)::BIGINT AS value_kb
        FROM range({n}) t(i), (VALUES ('MemTotal'), ('MemFree'), ('MemAvailable'), ('Buffers'),
        ('Cached'), ('SReclaimable'), ('Dirty'), ('Writeback'), ('SwapTotal'), ('SwapFree')) v(k);
    CREATE TABLE psi AS SELECT {t} AS ts, 'system' AS source, res AS resource, k AS kind,
        random() * 10 AS avg10_pct, random() * 10 AS stall_pct FROM range({n}) t(i),
        (VALUES ('cpu', 'some'), ('cpu', 'full'), ('memory', 'some'), ('memory', 'full'),
        ('io', 'some'), ('io', 'full')) v(res, k);
    CREATE TABLE iostat_device AS SELECT {t} AS ts, false AS since_boot, 'nvme' || d || 'n1' AS device,
        false AS is_partition, random() * 1e5 AS rkb_s, random() * 2e6 AS wkb_s,
        random() * 5 AS r_await_ms, random() * 200 AS w_await_ms, random() * 100 AS util_pct
        FROM range({n}) t(i), range({disks}) v(d);
    CREATE TABLE sar_net_dev AS SELECT {t} AS ts, 'eth' || d AS iface, random() * 1e6 AS rxkb_s,
        random() * 1e6 AS txkb_s FROM range({n}) t(i), range({ifaces}) v(d);
    CREATE TABLE sar_net_edev AS SELECT {t} AS ts, 'eth' || d AS iface, 0.0 AS rxerr_s, 0.0 AS txerr_s,
        (random() < 0.01)::INTEGER * random() * 100 AS rxdrop_s, 0.0 AS txdrop_s
        FROM range({n}) t(i), range({ifaces}) v(d);
    CREATE TABLE cgroup_cpu AS SELECT {t} AS ts, '/kubepods.slice/pod' || c AS cgroup,
        random() * 30 AS throttled_pct, random() * 50 AS throttled_ms_per_s
        FROM range({n}) t(i), range({cgroups}) v(c);
    CREATE TABLE cgroup_memory AS SELECT {t} AS ts, '/kubepods.slice/pod' || c AS cgroup,
        (random() * 1e11)::BIGINT AS current_bytes FROM range({n}) t(i), range({cgroups}) v(c);
    CREATE TABLE gpu_dmon AS SELECT {t} AS ts, g::INTEGER AS gpu, random() * 100 AS sm_pct,
        random() * 100 AS mem_pct, random() * 700 AS pwr_w, 40 + random() * 40 AS gtemp_c,
        (1000 + random() * 1000)::BIGINT AS pclk_mhz, (random() * 80000)::BIGINT AS fb_mib
        FROM range({n}) t(i), range({gpus}) v(g);
    CREATE TABLE bpf_hist AS SELECT {T0} + to_seconds(i * 10) AS ts, m AS map, '' AS key,
        (1 << b)::BIGINT AS bucket_low, (1 << (b + 1))::BIGINT AS bucket_high,
        (random() * 1000)::BIGINT AS count, 'usecs' AS unit, 'bpftrace' AS style, f AS source_file
        FROM range({secs // 10}) t(i), range(0, 22) u(b),
        (VALUES ('@usecs', 'bpftrace/runqlat.out'), ('@usecs', 'bpftrace/biolat.out')) v(m, f);
    CREATE TABLE dmesg AS SELECT {T0} + to_seconds(i * 97) AS ts,
        CASE WHEN i % 5 = 0 THEN 'xid' WHEN i % 5 = 1 THEN 'io_error' ELSE NULL END AS kind,
        'NVRM: Xid (PCI:0000:3b:00): 79, pid=' || i AS message, i AS line_no FROM range({secs // 97}) t(i);
    CREATE TABLE signals AS SELECT {T0} + to_seconds(i) AS ts, random() * 100 AS cpu_busy_pct,
        random() * 40 AS runq, random() * 4 AS blocked, random() * 10 AS psi_cpu_some_pct,
        random() * 5 AS psi_mem_some_pct, random() * 2 AS psi_mem_full_pct,
        random() * 30 AS psi_io_some_pct, random() * 20 AS psi_io_full_pct,
        random() * 4e7 AS dirty_kb, random() * 1e6 AS writeback_kb, 1.5e9 AS mem_available_kb,
        0.0 AS swap_in_kb_s, 0.0 AS swap_out_kb_s, random() * 1e4 AS pgscan_per_s,
        random() * 100 AS pgscan_direct_per_s, random() * 1e4 AS pgsteal_per_s,
        random() * 10 AS pgmajfault_per_s, random() * 3e7 AS disk_write_kb_s,
        random() * 300 AS disk_w_await_max_ms, random() * 100 AS disk_util_max_pct,
        random() * 100 AS gpu_util_mean_pct, {gpus} AS gpu_count FROM range({secs}) t(i);
    """)
    _findings(con, secs)
    return con


def _findings(con: duckdb.DuckDBPyConnection, secs: int) -> None:
    """A checkpoint stall every 30 min (one chain), plus OOM kills and throttling."""
    periods = secs // 1800
    con.execute(f"""
    CREATE TABLE findings AS
    SELECT i + 1 AS finding_id, 'CHECKPOINT_STALL' AS key, 'checkpoint_stall' AS kind,
        'Checkpoint write burst stalls the job' AS title, 'major' AS severity,
        {T0} + to_seconds(i * 1800 + 600) AS start_ts, {T0} + to_seconds(i * 1800 + 640) AS end_ts,
        40.0 AS duration_s, 'Write burst ' || (i + 1) || ': disk writes peaked at 2200 MB/s.' AS summary,
        '{{"gpu_seconds_lost": 250, "written_mb": 3072}}' AS impact_json, 250.0 AS gpu_seconds_lost,
        'Save checkpoints asynchronously.' || chr(10) || '`sysctl -w vm.dirty_background_bytes=268435456`' AS remediation,
        NULL AS caveats, 'ckpt' AS series, 1800.0 AS period_s, {periods} AS occurrences, 1 AS chain_id,
        i + 1 AS rank FROM range({periods}) t(i)
    UNION ALL
    SELECT {periods} + 1 + i, 'OOM_KILL', 'oom_kill', 'Process killed by the OOM killer', 'critical',
        {T0} + to_seconds(5000 + i * 20000), {T0} + to_seconds(5001 + i * 20000), 1.0,
        'python (pid 4242) was killed.', '{{"processes_killed": 1}}', NULL, 'Raise memory.max.',
        NULL, NULL, NULL, NULL, 2 + i, {periods} + 1 + i FROM range({max(secs // 20000, 1)}) t(i);
    CREATE TABLE chains AS SELECT chain_id, min(rank) AS rank, any_value(title) AS title,
        any_value(severity) AS severity, min(start_ts) AS start_ts, max(end_ts) AS end_ts,
        any_value(summary) AS summary, min(finding_id) AS cause_finding_id,
        string_agg(finding_id::VARCHAR, ',' ORDER BY finding_id) AS finding_ids,
        any_value(period_s) AS period_s, any_value(occurrences) AS occurrences,
        sum(gpu_seconds_lost) AS gpu_seconds_lost FROM findings GROUP BY chain_id;
    CREATE TABLE finding_evidence AS SELECT finding_id, s AS signal, 2.2e6 AS value, 1e4 AS baseline,
        u AS unit, 'peak' AS note FROM findings, (VALUES ('disk_write_kb_s', 'kB/s'),
        ('disk_w_await_max_ms', 'ms'), ('gpu_util_mean_pct', '%')) v(s, u);
    CREATE TABLE finding_log_lines AS SELECT finding_id, 'dmesg.out' AS source_file, 1 AS line_no,
        start_ts AS ts, 'Out of memory: Killed process 4242 (python)' AS text FROM findings WHERE kind = 'oom_kill';
    CREATE TABLE detector_status AS SELECT d AS detector, 'evaluated' AS status, NULL AS reason, 0 AS findings
        FROM (VALUES ('checkpoint_stall'), ('oom_kill'), ('gpu_starvation')) v(d);
    CREATE TABLE host_config AS SELECT {T0} AS ts, 'start' AS snapshot, 'sysctl' AS source, k AS key, v AS value, k || ' = ' || v AS raw
        FROM (VALUES ('vm.swappiness', '60'), ('vm.dirty_ratio', '20'), ('vm.dirty_background_ratio', '10'),
        ('kernel.numa_balancing', '1'), ('numactl.nodes', '2'), ('thp.enabled', 'always')) v(k, v);
    """)


def measure(report: Path, runs: int = 3) -> dict[str, Any]:
    """Size of ``report`` and its render time in headless Chromium (median of ``runs``)."""
    from reports.browser import open_report

    times, busy, errors, charts = [], [], [], 0
    for _ in range(runs):
        with open_report(report) as (_page, load):
            errors += load.errors + [f"request: {u}" for u in load.requests]
            if load.render_ms is not None:
                times.append(load.render_ms)
            if load.main_thread_ms is not None:
                busy.append(load.main_thread_ms)
            charts = load.expected
    return {
        "bytes": report.stat().st_size,
        "charts": charts,
        "render_ms_runs": [round(t) for t in times],
        "render_ms_median": round(statistics.median(times)) if times else None,
        "render_ms_min": round(min(times)) if times else None,
        "main_thread_ms_median": round(statistics.median(busy)) if busy else None,
        "load_average": os.getloadavg()[0],
        "errors": errors[:10],
    }


def main(argv: list[str] | None = None) -> int:
    """Build or analyse, render, measure; print the figures as JSON."""
    ap = argparse.ArgumentParser(
        prog="python -m tests.tools.bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--step", type=int, default=1, help="sampling step of the synthetic store (s)")
    ap.add_argument(
        "--bundle", type=Path, help="analyse this bundle instead of the synthetic store"
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, help="keep the report here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hs-bench-") as tmp:
        report = args.out or Path(tmp) / "report.html"
        t = time.perf_counter()
        if args.bundle:
            from analyzer.pipeline import Options, run
            from reports.render import HOST

            run(args.bundle, Options(report=report, db=Path(tmp) / "b.duckdb"), HOST)
            build_s = render_s = None
            total_s = time.perf_counter() - t
        else:
            from reports.html import render_html

            con = scale_store(duckdb.connect(), hours=args.hours, step=args.step)
            build_s = time.perf_counter() - t
            t = time.perf_counter()
            render_html(con, report)
            render_s = time.perf_counter() - t
            total_s = build_s + render_s
        result = {"source": str(args.bundle or f"scale_store(hours={args.hours:g}, step={args.step})"),
                  "store_s": build_s, "render_html_s": render_s, "total_s": round(total_s, 2),
                  **measure(report, args.runs)}  # fmt: skip
    print(
        json.dumps(
            result, indent=2, default=lambda v: round(v, 2) if isinstance(v, float) else str(v)
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
