"""Small in-memory stores for the report tests (a few rows per table, built with SQL).

A plain module, not a conftest: tests import the builders and constants directly.
"""

from __future__ import annotations

import duckdb

HOSTILE = "</script><script>alert(1)</script>"
HOSTILE_FILE = '<img src=x onerror="alert(2)">.log'

BUNDLE = """
CREATE TABLE bundle (
    name VARCHAR, source_path VARCHAR, host VARCHAR, kernel VARCHAR, os VARCHAR, arch VARCHAR,
    cpus INTEGER, start_utc TIMESTAMPTZ, end_utc TIMESTAMPTZ, interval_s DOUBLE,
    timezone VARCHAR, capture_version VARCHAR, format_version INTEGER,
    manifest_present BOOLEAN, interrupted BOOLEAN, analyzer_version VARCHAR,
    analyzed_at TIMESTAMPTZ);
INSERT INTO bundle VALUES ('gpu7-incident', '/tmp/gpu7.tgz', 'gpu7.example', '6.8.0-45-generic',
    'Ubuntu 24.04', 'x86_64', 8, TIMESTAMPTZ '2024-05-01 12:00:00+00',
    TIMESTAMPTZ '2024-05-01 12:10:00+00', 1.0, 'Europe/Berlin', '0.1', 1, true, false, '0.1.0',
    TIMESTAMPTZ '2024-05-02 08:00:00+00');
"""

COLLECTORS = """
CREATE TABLE collectors (
    file VARCHAR, collector VARCHAR, tool VARCHAR, status VARCHAR, bytes BIGINT,
    lines_total BIGINT, lines_parsed BIGINT, lines_structure BIGINT, lines_skipped BIGINT,
    parsed_pct DOUBLE, skip_reasons VARCHAR, notes VARCHAR, stderr_tail VARCHAR,
    exit_code INTEGER, manifest_status VARCHAR, reason VARCHAR, tables VARCHAR);
INSERT INTO collectors VALUES
    ('vmstat.out', 'vmstat', 'vmstat', 'parsed', 4096, 603, 600, 3, 0, 100.0, '{}', NULL, NULL,
     0, 'ok', NULL, 'vmstat'),
    ('dmesg.out', 'dmesg', 'dmesg', 'partial', 2048, 12, 10, 0, 2, 83.3,
     '{"unparsable line": 2}', 'two garbled lines', NULL, 0, 'ok', NULL, 'dmesg'),
    ($$HOSTILE_FILE$$, 'custom', NULL, 'unrecognised', 10, 1, 0, 0, 1, 0.0, 'not json',
     '<b>bold</b>', 'sh: 1: <script>x</script>: not found', 127, 'failed', 'no parser', NULL);
""".replace("$$HOSTILE_FILE$$", "'" + HOSTILE_FILE.replace("'", "''") + "'")

VMSTAT = """
CREATE TABLE vmstat AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, 'clock' AS ts_source,
    false AS since_boot, (i % 7)::BIGINT AS r, (i % 3)::BIGINT AS b, 1024::BIGINT AS swpd_kb,
    (8000000 - i * 1000)::BIGINT AS free_kb, 200000::BIGINT AS buff_kb,
    (4000000 + i * 900)::BIGINT AS cache_kb, 0::BIGINT AS inact_kb, 0::BIGINT AS active_kb,
    0::BIGINT AS si_kb_s, 0::BIGINT AS so_kb_s, 0::BIGINT AS bi_blocks_s,
    (i * 10)::BIGINT AS bo_blocks_s, 1000::BIGINT AS in_per_s, 2000::BIGINT AS cs_per_s,
    20::DOUBLE AS us_pct, 5::DOUBLE AS sy_pct,
    (CASE WHEN i = 300 THEN 60 ELSE 70 END)::DOUBLE AS id_pct,
    (CASE WHEN i = 300 THEN 15 ELSE 5 END)::DOUBLE AS wa_pct, 0::DOUBLE AS st_pct,
    0::DOUBLE AS gu_pct
FROM range(600) t(i);
"""

PSI = """
CREATE TABLE psi AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i * 10) AS ts, 'system' AS source,
    res AS resource, k AS kind, (i % 5)::DOUBLE AS avg10_pct, 0::DOUBLE AS avg60_pct,
    0::DOUBLE AS avg300_pct, (i * 1000)::BIGINT AS total_us, (i % 4)::DOUBLE AS stall_pct
FROM range(60) t(i), (VALUES ('cpu', 'some'), ('io', 'some'), ('io', 'full')) v(res, k);
"""

DMESG = f"""
CREATE TABLE dmesg (ts TIMESTAMPTZ, ts_source VARCHAR, uptime_s DOUBLE, facility VARCHAR,
    level VARCHAR, caller VARCHAR, event_id VARCHAR, kind VARCHAR, message VARCHAR,
    line_no BIGINT, pid BIGINT, comm VARCHAR, memcg VARCHAR, anon_rss_kb BIGINT,
    xid_code INTEGER, device VARCHAR);
INSERT INTO dmesg VALUES
    (TIMESTAMPTZ '2024-05-01 12:05:00+00', 'uptime', 1000.0, 'kern', 'err', NULL, NULL,
     'oom_kill', 'Out of memory: Killed process 4242 (python) {HOSTILE}', 1, 4242, 'python',
     '/job', 123456, NULL, NULL),
    (TIMESTAMPTZ '2024-05-01 12:06:00+00', 'uptime', 1060.0, 'kern', 'warn', NULL, NULL,
     'xid', 'NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus', 2, NULL, NULL,
     NULL, NULL, 79, '0000:3b:00'),
    (TIMESTAMPTZ '2024-05-01 12:07:00+00', 'uptime', 1120.0, 'kern', 'info', NULL, NULL,
     NULL, 'eth0: link up', 3, NULL, NULL, NULL, NULL, NULL, NULL);
"""

LEGACY_FINDINGS = """
CREATE TABLE findings (key VARCHAR, kind VARCHAR, title VARCHAR, severity VARCHAR,
    start_ts TIMESTAMPTZ, end_ts TIMESTAMPTZ, summary VARCHAR, impact VARCHAR,
    remediation VARCHAR);
INSERT INTO findings VALUES
    ('OOM_KILL', 'memory', 'Process killed by the OOM killer', 'critical',
     TIMESTAMPTZ '2024-05-01 12:04:30+00', TIMESTAMPTZ '2024-05-01 12:05:00+00',
     'python <pid 4242> was killed', '1 process killed', 'Raise the memory limit'),
    ('IO_PRESSURE', 'io', 'I/O pressure', 'minor', TIMESTAMPTZ '2024-05-01 12:03:00+00',
     TIMESTAMPTZ '2024-05-01 12:04:00+00', NULL, NULL, NULL);
"""

# The analyzer's tables (analyzer/findings.py): findings, evidence, log lines, chains, status.
FINDINGS = f"""
CREATE TABLE findings (finding_id BIGINT, key VARCHAR, kind VARCHAR, title VARCHAR,
    severity VARCHAR, start_ts TIMESTAMPTZ, end_ts TIMESTAMPTZ, duration_s DOUBLE,
    summary VARCHAR, impact_json VARCHAR, gpu_seconds_lost DOUBLE, remediation VARCHAR,
    caveats VARCHAR, series VARCHAR, period_s DOUBLE, occurrences BIGINT, chain_id BIGINT,
    rank BIGINT);
INSERT INTO findings VALUES
    (1, 'MEMORY_PRESSURE', 'memory_pressure', 'Memory pressure stalled tasks', 'major',
     TIMESTAMPTZ '2024-05-01 12:03:00+00', TIMESTAMPTZ '2024-05-01 12:04:45+00', 105,
     'Memory pressure peaked at 42% some-stall.', '{{"memory_stall_s": 30.5, "stall_some_pct": 42}}',
     NULL, 'Lower vm.swappiness: `sysctl -w vm.swappiness=10`', NULL, NULL, NULL, NULL, 1, 1),
    (2, 'OOM_KILL', 'oom_kill', 'Process killed by the OOM killer', 'critical',
     TIMESTAMPTZ '2024-05-01 12:04:30+00', TIMESTAMPTZ '2024-05-01 12:05:00+00', 30,
     'python <pid 4242> was killed', '{{"processes_killed": 1, "gpu_seconds_lost": 80}}', 80,
     'Raise the memory limit: `echo 64G > /sys/fs/cgroup/job/memory.max`' || chr(10) ||
     'Find the leak: `{HOSTILE}`', 'Collectors missed samples at 12:04:50.', NULL, NULL, NULL,
     1, 2),
    (3, 'IO_SATURATION', 'io_saturation', 'Disk saturated', 'minor',
     TIMESTAMPTZ '2024-05-01 12:01:00+00', TIMESTAMPTZ '2024-05-01 12:01:40+00', 40,
     'nvme0n1 was 100% busy.', 'not json', 12.5, NULL, NULL, NULL, NULL, NULL, 2, 3);
CREATE TABLE chains (chain_id BIGINT, rank BIGINT, title VARCHAR, severity VARCHAR,
    start_ts TIMESTAMPTZ, end_ts TIMESTAMPTZ, summary VARCHAR, cause_finding_id BIGINT,
    finding_ids VARCHAR, period_s DOUBLE, occurrences BIGINT, gpu_seconds_lost DOUBLE);
INSERT INTO chains VALUES
    (1, 1, 'Memory pressure → oom kill', 'critical', TIMESTAMPTZ '2024-05-01 12:03:00+00',
     TIMESTAMPTZ '2024-05-01 12:05:00+00', 'Memory pressure built up until python was killed.',
     1, '1,2', NULL, NULL, 80),
    (2, 2, 'Disk saturated', 'minor', TIMESTAMPTZ '2024-05-01 12:01:00+00',
     TIMESTAMPTZ '2024-05-01 12:01:40+00', 'nvme0n1 was 100% busy.', 3, '3', NULL, NULL, 12.5);
CREATE TABLE finding_evidence (finding_id BIGINT, signal VARCHAR, value DOUBLE,
    baseline DOUBLE, unit VARCHAR, note VARCHAR);
INSERT INTO finding_evidence VALUES
    (1, 'psi_mem_some_pct', 42, 1.5, '%', 'peak'),
    (1, 'mem_available_kb', 1048576, 8388608, 'kB', 'minimum'),
    (2, 'psi_mem_some_pct', 40, 1.5, '%', 'peak'),
    (2, 'classification', NULL, NULL, '', 'cgroup OOM');
CREATE TABLE finding_log_lines (finding_id BIGINT, source_file VARCHAR, line_no BIGINT,
    ts TIMESTAMPTZ, text VARCHAR);
INSERT INTO finding_log_lines VALUES
    (2, 'dmesg.out', 1, TIMESTAMPTZ '2024-05-01 12:05:00+00',
     'Out of memory: Killed process 4242 (python) {HOSTILE}');
CREATE TABLE detector_status (detector VARCHAR, status VARCHAR, reason VARCHAR, findings BIGINT);
INSERT INTO detector_status VALUES
    ('memory_pressure', 'evaluated', NULL, 1), ('oom_kill', 'evaluated', NULL, 1),
    ('io_saturation', 'evaluated', NULL, 1),
    ('cpu_throttle', 'not evaluated', 'needs cgroup_cpu with CFS counters', 0);
"""

SIGNALS = """
CREATE TABLE signals AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts,
    (CASE WHEN i BETWEEN 180 AND 285 THEN 40 ELSE 1 END)::DOUBLE AS psi_mem_some_pct,
    (8388608 - CASE WHEN i BETWEEN 180 AND 300 THEN 7000000 ELSE 0 END)::DOUBLE AS mem_available_kb,
    (i % 7)::DOUBLE AS runq, (i % 3)::DOUBLE AS blocked, (i * 100)::DOUBLE AS dirty_kb,
    NULL::DOUBLE AS writeback_kb, (i % 100)::DOUBLE AS gpu_util_mean_pct
FROM range(600) t(i);
CREATE TABLE signal_sources (signal VARCHAR, source_table VARCHAR, step_s DOUBLE, note VARCHAR);
INSERT INTO signal_sources VALUES ('runq', 'vmstat', 1, NULL), ('psi_mem_some_pct', 'psi', 10, NULL);
"""

NET_CGROUP_BPF = """
CREATE TABLE sar_net_dev AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, d AS iface,
    (i * 10)::DOUBLE AS rxkb_s, 5::DOUBLE AS txkb_s FROM range(120) t(i), (VALUES ('eth0'), ('lo')) v(d);
CREATE TABLE sar_net_edev AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, 'eth0' AS iface,
    0::DOUBLE AS rxerr_s, 0::DOUBLE AS txerr_s, (i % 10 = 0)::INTEGER::DOUBLE AS rxdrop_s,
    0::DOUBLE AS txdrop_s FROM range(120) t(i);
CREATE TABLE cgroup_cpu AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, '/job.slice' AS cgroup,
    (i % 50)::DOUBLE AS throttled_pct, (i % 20)::DOUBLE AS throttled_ms_per_s FROM range(120) t(i);
CREATE TABLE cgroup_memory AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, '/job.slice' AS cgroup,
    (1073741824 + i * 1000000)::BIGINT AS current_bytes FROM range(120) t(i);
CREATE TABLE bpf_hist AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i * 10) AS ts, '@usecs' AS map,
    '' AS key, (1 << b)::BIGINT AS bucket_low, (1 << (b + 1))::BIGINT AS bucket_high,
    (10 + b * i)::BIGINT AS count, 'usecs' AS unit, 'bpftrace' AS style,
    'bpftrace/runqlat.out' AS source_file FROM range(12) t(i), range(0, 12) u(b);
CREATE TABLE stack_samples AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:10+00' + to_seconds(i * 10) AS ts, 10.0 AS interval_s,
    4242::BIGINT AS pid, 'python3' AS comm, s AS stack, 3 AS user_frames, k AS kernel_frames,
    split_part(s, ';', -1) AS leaf, (40 + i)::BIGINT AS samples
FROM range(11) t(i), (VALUES ('main;train_step;matmul', 0), ('main;load;read;vfs_read_[k]', 1)) v(s, k);
CREATE TABLE stack_slices AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:10+00' + to_seconds(i * 10) AS ts, 10.0 AS interval_s,
    (90 + 2 * i)::BIGINT AS samples, (80 + 2 * i)::BIGINT AS samples_shown, 2::BIGINT AS stacks_shown
FROM range(11) t(i);
"""

HOST_CONFIG = f"""
CREATE TABLE host_config (ts TIMESTAMPTZ, snapshot VARCHAR, source VARCHAR, key VARCHAR,
    value VARCHAR, raw VARCHAR);
INSERT INTO host_config SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00', 'start', 'x', k, v, NULL
FROM (VALUES ('vm.swappiness', '60'), ('vm.dirty_ratio', '20'),
    ('vm.dirty_background_ratio', '10'), ('vm.overcommit_memory', '2'),
    ('thp.enabled', 'always'), ('thp.defrag', 'always'), ('kernel.numa_balancing', '1'),
    ('numactl.nodes', '2'), ('cmdline.quiet', ''),
    ('cpufreq.cpu0.scaling_governor', 'powersave'), ('cpufreq.cpu1.scaling_governor', 'performance'),
    ('cgroup.train.slice.cpu.max', '200000 100000'),
    ('cgroup.legacy/job.cpu.cfs_quota_us', '-1'),
    ('cgroup.legacy/job.memory.limit_in_bytes', '9223372036854771712'),
    ('sched.4242.policy', 'SCHED_BATCH'), ('sched.4242.affinity_list', '0'),
    ('process.4242.status.Name', '{HOSTILE}'),
    ('process.4242.cmdline', 'torchrun --nproc-per-node 8 train.py')) v(k, v);
INSERT INTO host_config VALUES (TIMESTAMPTZ '2024-05-01 12:10:00+00', 'end', 'x',
    'vm.swappiness', '10', NULL);
CREATE TABLE meminfo AS SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' AS ts, NULL::INTEGER AS node,
    k AS key, v::BIGINT AS value_kb, NULL::BIGINT AS count
FROM (VALUES ('MemTotal', 263000000), ('SwapTotal', 8000000)) t(k, v);
"""

MPSTAT = """
CREATE TABLE mpstat_cpu AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, cpu::INTEGER AS cpu,
    10::DOUBLE AS usr_pct, 5::DOUBLE AS sys_pct, (cpu % 3)::DOUBLE AS iowait_pct,
    0::DOUBLE AS irq_pct, 0::DOUBLE AS soft_pct, 0::DOUBLE AS steal_pct,
    (85 - cpu % 3)::DOUBLE AS idle_pct
FROM range(120) t(i), range(-1, 4) c(cpu);
"""

IOSTAT = """
CREATE TABLE iostat_device AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, d AS device,
    100::DOUBLE AS rkb_s, (i * 50)::DOUBLE AS wkb_s, 1::DOUBLE AS r_await_ms,
    3::DOUBLE AS w_await_ms, 0.5::DOUBLE AS aqu_sz, (i % 100)::DOUBLE AS util_pct
FROM range(120) t(i), (VALUES ('nvme0n1'), ('sda')) v(d);
"""

GPU = """
CREATE TABLE gpu_dmon AS
SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' + to_seconds(i) AS ts, g::INTEGER AS gpu,
    (i % 100)::DOUBLE AS sm_pct, 10::DOUBLE AS mem_pct, 300::DOUBLE AS pwr_w,
    60::DOUBLE AS gtemp_c, 1400::DOUBLE AS pclk_mhz, 1600::DOUBLE AS mclk_mhz,
    40000::DOUBLE AS fb_mib
FROM range(120) t(i), range(2) v(g);
"""

ISSUE2 = (BUNDLE, COLLECTORS, VMSTAT, PSI, DMESG)
FULL = (*ISSUE2, FINDINGS, SIGNALS, MPSTAT, IOSTAT, GPU, NET_CGROUP_BPF, HOST_CONFIG)


def build(*scripts: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    for script in scripts:
        con.execute(script)
    return con
