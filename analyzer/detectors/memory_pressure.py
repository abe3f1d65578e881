"""Memory pressure: tasks stall on memory (PSI), the kernel reclaims directly, pages refault.

The window is where any of memory PSI some / full or direct-reclaim scanning crosses its
threshold (scores value/threshold ≥ 1, hysteresis to 0.5). Evidence adds kswapd scanning,
pgsteal, refaults, MemAvailable vs baseline, swap, and cgroup memory.events / failcnt
increments in the window.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analyzer.detectors import gpu_starvation
from analyzer.detectors._base import Context, gpu_loss_severity, r, span, unit_of, worst
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import overlap_s

NAME = "memory_pressure"
INPUTS = (
    "psi_mem_some_pct / psi_mem_full_pct (/proc/pressure/memory) or pgscan_direct_per_s (/proc/vmstat, sar -B)",
    "optional: cgroup_memory, meminfo, swap, dmesg OOM kills",
)
THRESHOLDS = {
    "psi_some_pct": 10.0,
    "psi_full_pct": 5.0,
    "direct_scan_abs_per_s": 1000.0,  # direct reclaim ≥ 1000 pages/s ...
    "direct_scan_rel": 10.0,  # ... and 10x its median
    "leave_frac": 0.5,
    "min_s": 5,
    "merge_gap_s": 10,
    "major_full_pct": 10.0,  # mean memory PSI full for `major`
    "oom_follow_s": 60,  # an OOM kill within 60 s after the window makes it `major`
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.any_of("psi_mem_some_pct", "psi_mem_full_pct", "pgscan_direct_per_s"):
        return NotEvaluated(
            NAME,
            "needs memory PSI (/proc/pressure/memory) or reclaim counters (/proc/vmstat or sar -B)",
        )
    parts = []
    if ctx.has("psi_mem_some_pct"):
        parts.append(pl.col("psi_mem_some_pct") / T["psi_some_pct"])
    if ctx.has("psi_mem_full_pct"):
        parts.append(pl.col("psi_mem_full_pct") / T["psi_full_pct"])
    if ctx.has("pgscan_direct_per_s"):
        b = ctx.baseline("pgscan_direct_per_s") or 0.0
        parts.append(
            pl.col("pgscan_direct_per_s")
            / max(T["direct_scan_abs_per_s"], T["direct_scan_rel"] * b)
        )
    score = ctx.signals.select(pl.max_horizontal(parts).alias("x"))["x"]
    wins = ctx.runs(score, 1.0, T["leave_frac"], min_s=T["min_s"], gap_s=T["merge_gap_s"])
    gbase, _ = ctx.gpu_dips()
    dips = gpu_starvation.dips_of(ctx, "memory")
    out = []
    for w in wins:
        ev = []
        for col, how in (
            ("psi_mem_some_pct", "mean"),
            ("psi_mem_full_pct", "mean"),
            ("psi_mem_full_pct", "max"),
            ("pgscan_direct_per_s", "max"),
            ("pgscan_per_s", "max"),
            ("pgsteal_per_s", "max"),
            ("refault_per_s", "max"),
            ("pgmajfault_per_s", "max"),
            ("swap_in_kb_s", "max"),
            ("swap_out_kb_s", "max"),
            ("mem_available_kb", "min"),
        ):
            if ctx.has(col):
                ev.append(
                    Evidence(
                        col,
                        r(ctx.stat(col, w, how)),
                        r(ctx.baseline(col, exclude=wins)),
                        unit_of(col),
                        how,
                    )
                )
        ev += _cgroup_events(ctx, w)
        full = ctx.stat("psi_mem_full_pct", w, "mean")
        some = ctx.stat("psi_mem_some_pct", w, "mean")
        oom = _ooms_after(ctx, w)
        near = [d for d in dips if overlap_s(w, d) > 0]
        lost = sum(ctx.gpu_seconds_lost(d, gbase) or 0.0 for d in near) if near else None
        sev = "major" if (full or 0) >= T["major_full_pct"] or oom else "minor"
        sev = worst(sev, gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None)
        avail = ctx.stat("mem_available_kb", w, "min")
        text = f"Memory pressure at {span(w)}: tasks stalled on memory {some or 0:.0f}% of the time (some), {full or 0:.0f}% (full)"
        if ctx.has("pgscan_direct_per_s"):
            text += f", direct reclaim scanned up to {ctx.stat('pgscan_direct_per_s', w, 'max') or 0:.0f} pages/s"
        if avail is not None:
            text += f", MemAvailable fell to {avail / 1024:.0f} MiB"
        if oom:
            text += f"; followed by {oom} OOM kill(s)"
        impact = {
            "stall_some_pct": r(some),
            "stall_full_pct": r(full),
            "memory_stall_s": r((full or 0) / 100 * (w[1] - w[0]).total_seconds(), 1),
        }
        if lost is not None:
            impact["gpu_seconds_lost"] = r(lost, 1)
        out.append(
            Finding(
                key="MEMORY_PRESSURE",
                kind=NAME,
                title=f"Memory pressure and reclaim ({(w[1] - w[0]).total_seconds():.0f} s)",
                severity=sev,
                start=w[0],
                end=w[1],
                summary=text + ".",
                impact=impact,
                evidence=ev,
                remediation=[
                    "Find what grows: `ps -eo pid,rss,comm --sort=-rss | head`, `pidstat -r 1`; per cgroup `cat memory.stat` (anon vs file).",
                    "Reduce the footprint (smaller batch / prefetch, fewer DataLoader workers — each copies the dataset object) or raise the limit (memory.max / k8s limits.memory); set memory.high a little below memory.max so the job is slowed before it is killed.",
                    "Avoid direct reclaim stalls: keep more memory free (`sysctl -w vm.min_free_kbytes=<~1% of RAM in kB>`, `vm.watermark_scale_factor=200`); drop page cache churn from dataset reads (posix_fadvise DONTNEED / O_DIRECT).",
                    "If compaction stalls appear (THP): `echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag`.",
                ],
            )
        )
    return out


def _ooms_after(ctx: Context, w: tuple) -> int:
    if not ctx.rows("dmesg"):
        return 0
    hi = w[1] + timedelta(seconds=T["oom_follow_s"])
    q = "SELECT count(DISTINCT (pid, comm)) AS n FROM dmesg WHERE kind = 'oom_kill' AND ts >= $lo AND ts < $hi"
    return int(ctx.query(q, {"lo": w[0], "hi": hi})["n"][0] or 0)


def _cgroup_events(ctx: Context, w: tuple) -> list[Evidence]:
    """Increments of memory.events counters and v1 failcnt per cgroup inside the window."""
    if not ctx.rows("cgroup_memory"):
        return []
    cols = ("events_high", "events_max", "events_oom", "events_oom_kill", "failcnt")
    agg = ", ".join(f"max({c}) - min({c}) AS {c}" for c in cols)
    df = ctx.query(
        f"SELECT cgroup, {agg} FROM cgroup_memory WHERE ts >= $lo AND ts <= $hi GROUP BY cgroup",
        {"lo": w[0], "hi": w[1]},
    )
    ev = []
    for row in df.iter_rows(named=True):
        for c in cols:
            if row[c]:
                ev.append(
                    Evidence(
                        f"cgroup {c}",
                        float(row[c]),
                        0.0,
                        "count",
                        f"memory.events increments in {row['cgroup'] or '/'}",
                    )
                )
    return ev
