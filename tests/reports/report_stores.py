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

FINDINGS = """
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
FULL = (*ISSUE2, FINDINGS, MPSTAT, IOSTAT, GPU)


def build(*scripts: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    for script in scripts:
        con.execute(script)
    return con
