"""Swap activity: pages moving to and from swap while the job runs.

Swap-out alone means the kernel is making room; sustained swap-in means the job (or its
neighbours) waits on disk for its own memory — much slower than RAM. Each window names
the memory cgroups whose swap grew or shrank in it (v2 memory.swap.current, v1
memory.stat swap) and their limits: a cgroup swapping at its own limit is not the host
running out of memory.
"""

from __future__ import annotations

import polars as pl

from analyzer.detectors import _memcg
from analyzer.detectors._base import Context, r, span, unit_of
from analyzer.detectors._who import by_command, memory_users, with_identity
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window

NAME = "swap_activity"
INPUTS = (
    "swap_in_kb_s / swap_out_kb_s (vmstat si/so, /proc/vmstat pswpin/pswpout, sar -W)",
    "optional: cgroup_memory / cgroup_memory_stat (which cgroup swapped), proc_vmstat",
)
THRESHOLDS = {
    "enter_kb_s": 1024.0,  # swap-in + swap-out ≥ 1 MiB/s ...
    "leave_kb_s": 256.0,  # ... until it falls below 256 KiB/s
    "min_s": 5,
    "merge_gap_s": 10,
    "major_in_kb_s": 10240.0,  # mean swap-in ≥ 10 MiB/s ...
    "major_min_s": 30,  # ... for at least 30 s is `major`
    "cgroup_min_mb": 16.0,  # a cgroup whose swap changed by ≥ 16 MiB in the window is named
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
    return [_finding(ctx, w, wins) for w in wins]


def _finding(ctx: Context, w: Window, wins: list[Window]) -> Finding:
    dur = (w[1] - w[0]).total_seconds()
    sin = ctx.stat("swap_in_kb_s", w, "mean") or 0.0
    sout = ctx.stat("swap_out_kb_s", w, "mean") or 0.0
    note = f"over {span(w)}; baseline = median outside the swap windows"
    ev = [
        Evidence(
            c, r(ctx.stat(c, w, h)), r(ctx.baseline(c, exclude=wins)), unit_of(c), f"{h} {note}"
        )
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
    ev += _pswp(ctx, w)
    cgs = _cgroups(ctx, w)
    ev += [_cg_evidence(c, w) for c in cgs]
    text = f"The host swapped at {span(w)}: {sin * dur / 1024:.0f} MiB in and {sout * dur / 1024:.0f} MiB out ({sin / 1024:.1f} / {sout / 1024:.1f} MiB/s on average)"
    if cgs:
        text += "; " + "; ".join(_cg_text(c) for c in cgs)
    impact = {"swapped_in_mb": r(sin * dur / 1024, 0), "swapped_out_mb": r(sout * dur / 1024, 0)}
    if cgs:
        impact["cgroups"] = [c["cgroup"] for c in cgs]
    # swap-ins are major faults: who faulted most in the window (pidstat majflt/s)
    procs = with_identity(ctx, memory_users(ctx, w), w)
    if who := by_command(procs, key="majflt"):
        impact["who"] = [g | {"share": r(g["share"], 0), "unit": "major faults"} for g in who]
    return Finding(
        key="SWAP_ACTIVITY",
        kind=NAME,
        title=f"Swapping ({sin / 1024:.1f} MiB/s in, {sout / 1024:.1f} MiB/s out)",
        severity="major" if sin >= T["major_in_kb_s"] and dur >= T["major_min_s"] else "minor",
        start=w[0],
        end=w[1],
        summary=text + ".",
        impact=impact,
        evidence=ev,
        remediation=[
            "Keep the job's memory in RAM: `sysctl -w vm.swappiness=10` (or 1), or disable swap for its cgroup (`memory.swap.max=0`, k8s: no swap).",
            "Reduce memory use or add RAM (or raise the cgroup's limit when it swaps at its own limit); find the swapped processes with `grep VmSwap /proc/*/status | sort -k2 -n | tail`.",
        ],
    )


def _pswp(ctx: Context, w: Window) -> list[Evidence]:
    """Pages swapped in / out over ``w`` from /proc/vmstat (increase of pswpin / pswpout)."""
    if not ctx.rows("proc_vmstat"):
        return []
    df = ctx.query(
        "SELECT key, arg_max(value, ts) FILTER (ts < $hi) - arg_max(value, ts) FILTER (ts < $lo) AS d "
        "FROM proc_vmstat WHERE node IS NULL AND ts IS NOT NULL AND ts < $hi AND key IN ('pswpin', 'pswpout') GROUP BY key",
        {"lo": w[0], "hi": w[1]},
    )
    return [
        Evidence(
            f"{k}_mb",
            r(d * _memcg.PAGE_BYTES / _memcg.MIB, 0),
            None,
            "MiB",
            f"/proc/vmstat {k} increase over {span(w)} × 4 KiB",
        )
        for k, d in df.iter_rows()
        if d is not None
    ]


def _cgroups(ctx: Context, w: Window) -> list[dict]:
    """Memory cgroups whose swap changed by ≥ cgroup_min_mb over ``w`` (largest first)."""
    if not ctx.rows("cgroup_memory"):
        return []
    df = _memcg.frame(ctx)
    us = pl.col("ts").dt.epoch("us")
    lo, hi = int(w[0].timestamp() * 1e6), int(w[1].timestamp() * 1e6)
    got = (
        df.filter((us >= lo) & (us < hi) & pl.col("swap_bytes").is_not_null())
        .sort("ts")
        .group_by("cgroup")
        .agg(
            first=pl.col("swap_bytes").first() / _memcg.MIB,
            last=pl.col("swap_bytes").last() / _memcg.MIB,
            peak=pl.col("swap_bytes").max() / _memcg.MIB,
            limit=pl.col("limit_bytes").max() / _memcg.MIB,
            usage=pl.col("usage_bytes").max() / _memcg.MIB,
        )
        .with_columns(change=pl.col("last") - pl.col("first"))
        .filter(
            (pl.col("change").abs() >= T["cgroup_min_mb"])
            | (pl.col("peak") - pl.col("first") >= T["cgroup_min_mb"])
        )
        .sort(pl.col("change").abs(), descending=True)
    )
    return got.to_dicts()


def _cg_text(c: dict) -> str:
    lim = (
        f" (limit {c['limit']:.0f} MiB, usage up to {c['usage'] or 0:.0f} MiB)"
        if c["limit"]
        else ""
    )
    return f"memory cgroup {c['cgroup']}{lim}: swap {c['first']:.0f} → {c['last']:.0f} MiB (peak {c['peak']:.0f})"


def _cg_evidence(c: dict, w: Window) -> Evidence:
    lim = f"{c['limit']:.0f} MiB" if c["limit"] else "unknown"
    return Evidence(
        "cgroup_swap",
        r(c["change"], 0),
        r(c["first"], 0),
        "MiB",
        f"change of {c['cgroup']}'s swap over {span(w)} (v2 memory.swap.current, v1 memory.stat "
        f"swap); baseline = at the window's start; memory limit {lim}",
    )
