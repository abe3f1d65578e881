"""The report stays under 5 MB for a 24 h, 128-CPU bundle.

Chart payload depends on the point budget (≈2000 per trace, 1200 heatmap columns), not on the
sample count, so a 24 h capture sampled every 10 s (1.1 M mpstat rows) yields the same page
size as a 1 s one while keeping the test fast. Random values are the worst case for size.
"""

from __future__ import annotations

from pathlib import Path

from report_stores import BUNDLE, COLLECTORS, FINDINGS, build

from reports.html import render_html

T0 = "TIMESTAMPTZ '2024-05-01 12:00:00+00'"
STEP = 10
N = 86_400 // STEP
TABLES = f"""
UPDATE bundle SET end_utc = start_utc + INTERVAL 1 DAY, cpus = 128, interval_s = {STEP};
CREATE TABLE vmstat AS SELECT {T0} + to_seconds(i * {STEP}) AS ts,
    (random() * 10)::BIGINT r, (random() * 3)::BIGINT b, 0::BIGINT swpd_kb,
    (8e6 - i)::BIGINT free_kb, 2e5::BIGINT buff_kb, (4e6 + i)::BIGINT cache_kb,
    random() * 50 us_pct, random() * 10 sy_pct, random() * 5 wa_pct, 0.0 st_pct,
    35.0 id_pct FROM range({N}) t(i);
CREATE TABLE mpstat_cpu AS SELECT {T0} + to_seconds(i * {STEP}) AS ts, c::INTEGER cpu,
    random() * 50 usr_pct, 5.0 sys_pct, 1.0 iowait_pct, 0.0 irq_pct, 0.0 soft_pct,
    0.0 steal_pct, random() * 40 idle_pct FROM range({N}) t(i), range(-1, 128) c(c);
CREATE TABLE psi AS SELECT {T0} + to_seconds(i * {STEP}) AS ts, 'system' source,
    res resource, k kind, random() * 10 avg10_pct, random() * 10 stall_pct
    FROM range({N}) t(i), (VALUES ('cpu', 'some'), ('memory', 'some'), ('memory', 'full'),
    ('io', 'some'), ('io', 'full'), ('irq', 'full')) v(res, k);
CREATE TABLE iostat_device AS SELECT {T0} + to_seconds(i * {STEP}) AS ts,
    'nvme' || d || 'n1' device, random() * 1e5 rkb_s, random() * 1e5 wkb_s,
    random() * 100 util_pct FROM range({N}) t(i), range(16) v(d);
CREATE TABLE gpu_dmon AS SELECT {T0} + to_seconds(i * {STEP}) AS ts, g::INTEGER gpu,
    random() * 100 sm_pct, random() * 700 pwr_w FROM range({N}) t(i), range(8) v(g);
CREATE TABLE dmesg AS SELECT {T0} + to_seconds(i * 40) AS ts,
    CASE WHEN i % 3 = 0 THEN 'xid' WHEN i % 3 = 1 THEN 'io_error' END kind,
    'message ' || i message FROM range(2000) t(i);
"""


def test_day_long_128_cpu_report_is_under_5_mb(tmp_path: Path) -> None:
    con = build(BUNDLE, COLLECTORS, FINDINGS, TABLES)
    page = render_html(con, tmp_path / "big.html")
    size = page.stat().st_size
    assert size < 5_000_000, size
    text = page.read_text(encoding="utf-8")
    assert "too many to mark on every chart, shown here only: xid, io_error" in text
    assert "top 8 of 16 by peak util_pct" in text
