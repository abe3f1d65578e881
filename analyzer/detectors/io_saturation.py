"""I/O saturation: a disk busy and queueing for a sustained time, outside checkpoint bursts.

Per device: %util ≥ 90 together with await ≥ max(20 ms, 5 × the device's median) or a
queue (aqu-sz) ≥ 8. %util alone means little on NVMe/RAID (many requests in parallel), so
it never decides on its own. Windows overlapping a CHECKPOINT_STALL burst are left to
that detector.
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors import checkpoint_stall, gpu_starvation
from analyzer.detectors._base import Context, gpu_loss_severity, r, span, worst
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import overlap_s

NAME = "io_saturation"
INPUTS = ("iostat_device (iostat -x) or sar_disk (sar -d): util, await, aqu-sz per device",)
THRESHOLDS = {
    "util_pct": 90.0,
    "await_abs_ms": 20.0,
    "await_rel": 5.0,
    "aqu_sz": 8.0,
    "min_s": 5,
    "merge_gap_s": 5,
    "major_min_s": 60,
}
T = THRESHOLDS
_Q = {
    "iostat_device": """SELECT device AS dev, second_of(ts) AS ts, avg(util_pct) AS util,
        avg(greatest(coalesce(r_await_ms, 0), coalesce(w_await_ms, 0), coalesce(await_ms, 0))) AS await,
        avg(aqu_sz) AS q, avg(coalesce(rkb_s, kb_read_s)) AS rkb, avg(coalesce(wkb_s, kb_wrtn_s)) AS wkb
        FROM iostat_device WHERE since_boot IS NOT TRUE AND is_partition IS NOT TRUE AND is_group IS NOT TRUE AND ts IS NOT NULL
        AND util_pct IS NOT NULL GROUP BY 1, 2""",
    "sar_disk": """SELECT dev, second_of(ts) AS ts, avg(util_pct) AS util, avg(await_ms) AS await, avg(aqu_sz) AS q,
        avg(rkb_s) AS rkb, avg(wkb_s) AS wkb FROM sar_disk WHERE ts IS NOT NULL GROUP BY 1, 2""",
}


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    table = next((t for t in _Q if ctx.rows(t)), None)
    if table is None:
        return NotEvaluated(NAME, "needs per-device disk statistics: iostat -x (or sar -d)")
    # Only devices that ever reach the %util level can saturate: the others' rows (16
    # disks over a day are over a million) stay in DuckDB; n tells an empty table apart.
    df = ctx.query(
        f"""WITH a AS MATERIALIZED ({_Q[table]}), hot AS (SELECT DISTINCT dev FROM a WHERE util >= {T["util_pct"]})
            SELECT a.*, (SELECT count(*) FROM a) AS n FROM a JOIN hot USING (dev)
            UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT count(*) FROM a)
            WHERE NOT EXISTS (SELECT 1 FROM hot) ORDER BY 1, 2"""
    )
    if df.height == 0 or not df["n"][0]:
        return NotEvaluated(NAME, f"{table} has no %util samples (iostat without -x?)")
    df = df.filter(pl.col("dev").is_not_null())
    skip = checkpoint_stall.stall_windows(ctx)
    gbase, _ = ctx.gpu_dips()
    dips = gpu_starvation.dips_of(ctx, "io")
    out = []
    for (dev,), sub in df.group_by("dev", maintain_order=True):
        base_await = float(sub["await"].median() or 0.0)
        athr = max(T["await_abs_ms"], T["await_rel"] * base_await)
        hot = sub.select(
            pl.when(pl.col("util").is_null())
            .then(None)
            .otherwise(
                (
                    (pl.col("util") >= T["util_pct"])
                    & ((pl.col("await") >= athr) | (pl.col("q") >= T["aqu_sz"]))
                ).cast(pl.Float64)
            )
        ).to_series()
        wins = intervals.as_windows(
            intervals.runs(
                sub["ts"], hot, enter=1.0, min_duration_s=T["min_s"], merge_gap_s=T["merge_gap_s"]
            )
        )
        for w in wins:
            if any(overlap_s(w, c) > 0 for c in skip):
                continue
            inside = sub.filter((pl.col("ts") >= w[0]) & (pl.col("ts") < w[1]))
            outside = sub.filter((pl.col("ts") < w[0]) | (pl.col("ts") >= w[1]))
            dur = (w[1] - w[0]).total_seconds()
            near = [d for d in dips if overlap_s(w, d) > 0]
            lost = sum(ctx.gpu_seconds_lost(d, gbase) or 0.0 for d in near) if near else None
            aw = float(inside["await"].max() or 0.0)
            sev = worst(
                "major" if dur >= T["major_min_s"] and aw >= 2 * athr else "minor",
                gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None,
            )
            ev = [
                Evidence(
                    f"{dev} util_pct",
                    r(inside["util"].mean()),
                    r(outside["util"].median()),
                    "%",
                    "mean",
                ),
                Evidence(
                    f"{dev} await_ms",
                    r(aw, 2),
                    r(base_await, 2),
                    "ms",
                    "peak (max of r_await, w_await)",
                ),
                Evidence(
                    f"{dev} aqu_sz",
                    r(inside["q"].max(), 2),
                    r(outside["q"].median(), 2),
                    "requests",
                    "peak queue",
                ),
                Evidence(
                    f"{dev} read_kb_s",
                    r(inside["rkb"].mean()),
                    r(outside["rkb"].median()),
                    "kB/s",
                    "mean",
                ),
                Evidence(
                    f"{dev} write_kb_s",
                    r(inside["wkb"].mean()),
                    r(outside["wkb"].median()),
                    "kB/s",
                    "mean",
                ),
            ]
            ev += _top_io(ctx, w)
            impact = {"saturated_s": dur}
            if lost is not None:
                impact["gpu_seconds_lost"] = r(lost, 1)
            out.append(
                Finding(
                    key="IO_SATURATION",
                    kind=NAME,
                    title=f"Disk {dev} saturated ({dur:.0f} s)",
                    severity=sev,
                    start=w[0],
                    end=w[1],
                    summary=f"Disk {dev} was {inside['util'].mean() or 0:.0f}% busy at {span(w)} with requests waiting up to {aw:.0f} ms (median {base_await:.1f} ms) and up to {inside['q'].max() or 0:.0f} queued.",
                    impact=impact,
                    evidence=ev,
                    remediation=[
                        "Find who does the I/O: `pidstat -d 1`, `iotop -oP`, per cgroup io.stat.",
                        f"Check the device: `cat /sys/block/{dev}/queue/scheduler` (none for NVMe, mq-deadline for SATA/SAS), queue depth `/sys/block/{dev}/queue/nr_requests`, health `nvme smart-log` / `smartctl -a`.",
                        "Keep training input off the contended device: stage the dataset on local NVMe or in page cache, raise DataLoader prefetch_factor; limit noisy neighbours with io.max / io.weight.",
                    ],
                )
            )
    return out


def _top_io(ctx: Context, w: tuple) -> list[Evidence]:
    if not ctx.rows("pidstat"):
        return []
    df = ctx.query(
        "SELECT pid, any_value(command) AS cmd, avg(coalesce(kb_rd_s, 0) + coalesce(kb_wr_s, 0)) AS io FROM pidstat WHERE tid IS NULL "
        "AND since_boot IS NOT TRUE AND ts >= $lo AND ts < $hi GROUP BY pid HAVING io > 0 ORDER BY io DESC LIMIT 3",
        {"lo": w[0], "hi": w[1]},
    )
    return [
        Evidence(
            "process_io_kb_s",
            r(row["io"]),
            None,
            "kB/s",
            f"pid {row['pid']} {row['cmd']}: read + write",
        )
        for row in df.iter_rows(named=True)
    ]
