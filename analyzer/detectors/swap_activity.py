"""Swap activity: pages moving to and from swap while the job runs.

Swap-out alone means the kernel is making room; sustained swap-in means the job (or its
neighbours) waits on disk for its own memory — much slower than RAM.
"""

from __future__ import annotations

import polars as pl

from analyzer.detectors._base import Context, r, span, unit_of
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "swap_activity"
INPUTS = ("swap_in_kb_s / swap_out_kb_s (vmstat si/so, /proc/vmstat pswpin/pswpout, sar -W)",)
THRESHOLDS = {
    "enter_kb_s": 1024.0,  # swap-in + swap-out ≥ 1 MiB/s ...
    "leave_kb_s": 256.0,  # ... until it falls below 256 KiB/s
    "min_s": 5,
    "merge_gap_s": 10,
    "major_in_kb_s": 10240.0,  # mean swap-in ≥ 10 MiB/s ...
    "major_min_s": 30,  # ... for at least 30 s is `major`
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.any_of("swap_in_kb_s", "swap_out_kb_s"):
        return NotEvaluated(NAME, "needs swap rates: vmstat, /proc/vmstat or sar -W")
    both_null = pl.col("swap_in_kb_s").is_null() & pl.col("swap_out_kb_s").is_null()
    total = ctx.signals.select(
        pl.when(~both_null).then(pl.sum_horizontal("swap_in_kb_s", "swap_out_kb_s")).alias("x")
    )["x"]
    wins = ctx.runs(
        total, T["enter_kb_s"], T["leave_kb_s"], min_s=T["min_s"], gap_s=T["merge_gap_s"]
    )
    out = []
    for w in wins:
        dur = (w[1] - w[0]).total_seconds()
        sin = ctx.stat("swap_in_kb_s", w, "mean") or 0.0
        sout = ctx.stat("swap_out_kb_s", w, "mean") or 0.0
        ev = [
            Evidence(c, r(ctx.stat(c, w, h)), r(ctx.baseline(c, exclude=wins)), unit_of(c), h)
            for c, h in (
                ("swap_in_kb_s", "mean"),
                ("swap_in_kb_s", "max"),
                ("swap_out_kb_s", "mean"),
                ("swap_out_kb_s", "max"),
                ("pgmajfault_per_s", "max"),
                ("psi_mem_some_pct", "max"),
            )
            if ctx.has(c)
        ]
        out.append(
            Finding(
                key="SWAP_ACTIVITY",
                kind=NAME,
                title=f"Swapping ({sin / 1024:.1f} MiB/s in, {sout / 1024:.1f} MiB/s out)",
                severity="major"
                if sin >= T["major_in_kb_s"] and dur >= T["major_min_s"]
                else "minor",
                start=w[0],
                end=w[1],
                summary=f"The host swapped at {span(w)}: {sin * dur / 1024:.0f} MiB in and {sout * dur / 1024:.0f} MiB out ({sin / 1024:.1f} / {sout / 1024:.1f} MiB/s on average).",
                impact={
                    "swapped_in_mb": r(sin * dur / 1024, 0),
                    "swapped_out_mb": r(sout * dur / 1024, 0),
                },
                evidence=ev,
                remediation=[
                    "Keep the job's memory in RAM: `sysctl -w vm.swappiness=10` (or 1), or disable swap for its cgroup (`memory.swap.max=0`, k8s: no swap).",
                    "Reduce memory use or add RAM; find the swapped processes with `grep VmSwap /proc/*/status | sort -k2 -n | tail`.",
                ],
            )
        )
    return out
