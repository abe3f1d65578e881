"""CPU contention: more runnable tasks than CPUs, tasks waiting to run (PSI, run-queue latency).

The score per second is the largest of runq / (1.5 × CPUs) (runq as the median of a centred
5 s window: vmstat samples one instant), cpu PSI some / 50 %, runqlat p99 / max(5 ms, 5 ×
its median) and CPU busy / max(90 %, median busy + 25) (every CPU busy: a CPU-bound phase
saturates the host even when few tasks wait); a window starts at 1 and lasts down to 0.66.
The busiest processes (pidstat %CPU and %wait) in the window are named.
"""

from __future__ import annotations

import polars as pl

from analyzer.detectors import gpu_starvation
from analyzer.detectors._base import Context, gpu_loss_severity, r, span, unit_of, worst
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import overlap_s

NAME = "cpu_contention"
INPUTS = (
    "runq + cpus (vmstat / sar -q), or psi_cpu_some_pct, or runqlat_p99_us",
    "optional: pidstat, cs_per_s",
)
THRESHOLDS = {
    "runq_per_cpu": 1.5,
    "runq_smooth_s": 5,  # vmstat r is one instant: centred 5 s median (single spikes are noise)
    "busy_pct": 90.0,  # or every CPU busy ...
    "busy_over_baseline": 25.0,  # ... well above the capture's usual level
    "psi_cpu_some_pct": 50.0,
    "runqlat_abs_us": 5000.0,
    "runqlat_rel": 5.0,
    "leave": 0.66,
    "min_s": 10,
    "merge_gap_s": 5,
    "major_runq_per_cpu": 2.0,
    "major_psi_pct": 80.0,
    "major_min_s": 60,
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    parts = []
    if ctx.has("runq") and ctx.cpus:
        runq = pl.col("runq").rolling_median(T["runq_smooth_s"], min_samples=3, center=True)
        parts.append(runq / (T["runq_per_cpu"] * ctx.cpus))
    if ctx.has("psi_cpu_some_pct"):
        parts.append(pl.col("psi_cpu_some_pct") / T["psi_cpu_some_pct"])
    if ctx.has("cpu_busy_pct"):
        thr = max(T["busy_pct"], (ctx.baseline("cpu_busy_pct") or 0.0) + T["busy_over_baseline"])
        # only at or above its level: a host that is always 80 % busy is not held in a window
        parts.append(
            pl.when(pl.col("cpu_busy_pct") >= thr).then(pl.col("cpu_busy_pct") / thr).otherwise(0.0)
        )
    if ctx.has("runqlat_p99_us"):
        parts.append(
            pl.col("runqlat_p99_us")
            / max(T["runqlat_abs_us"], T["runqlat_rel"] * (ctx.baseline("runqlat_p99_us") or 0))
        )
    if not parts:
        return NotEvaluated(
            NAME,
            "needs the run queue and CPU count (vmstat / sar -q), CPU PSI, or a runqlat histogram",
        )
    score = ctx.signals.select(pl.max_horizontal(parts).alias("x"))["x"]
    wins = ctx.runs(score, 1.0, T["leave"], min_s=T["min_s"], gap_s=T["merge_gap_s"])
    gbase, _ = ctx.gpu_dips()
    dips = gpu_starvation.dips_of(ctx, "cpu_contention", "cpu_loader")
    out = []
    for w in wins:
        dur = (w[1] - w[0]).total_seconds()
        runq, psi = ctx.stat("runq", w, "mean"), ctx.stat("psi_cpu_some_pct", w, "mean")
        ev = [
            Evidence(c, r(ctx.stat(c, w, h)), r(ctx.baseline(c, exclude=wins)), unit_of(c), h)
            for c, h in (
                ("runq", "mean"),
                ("psi_cpu_some_pct", "mean"),
                ("runqlat_p99_us", "max"),
                ("cpu_busy_pct", "mean"),
                ("cs_per_s", "mean"),
            )
            if ctx.has(c)
        ]
        if ctx.cpus:
            ev.append(Evidence("cpus", float(ctx.cpus), None, "count", "logical CPUs"))
        procs = _top(ctx, w)
        ev += [
            Evidence(
                "process_cpu_pct",
                r(p["cpu"]),
                None,
                "%",
                f"pid {p['pid']} {p['cmd']}: %CPU (wait {p['wait'] or 0:.0f}%)",
            )
            for p in procs
        ]
        big = (runq or 0) >= T["major_runq_per_cpu"] * (ctx.cpus or 1e9) or (psi or 0) >= T[
            "major_psi_pct"
        ]
        near = [d for d in dips if overlap_s(w, d) > 0]
        lost = sum(ctx.gpu_seconds_lost(d, gbase) or 0.0 for d in near) if near else None
        sev = worst(
            "major" if big and dur >= T["major_min_s"] else "minor",
            gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None,
        )
        who = ", ".join(f"{p['cmd']} ({p['cpu']:.0f}%)" for p in procs[:3])
        text = f"CPU contention at {span(w)}"
        if runq is not None and ctx.cpus:
            text += f": {runq:.0f} runnable tasks on {ctx.cpus} CPUs"
        busy = ctx.stat("cpu_busy_pct", w, "mean")
        if busy is not None and busy >= T["busy_pct"]:
            text += f", the CPUs {busy:.0f}% busy"
        if psi is not None:
            text += f", tasks waited for a CPU {psi:.0f}% of the time"
        impact = {"cpu_wait_pct": r(psi)} if psi is not None else {}
        if lost is not None:
            impact["gpu_seconds_lost"] = r(lost, 1)
        out.append(
            Finding(
                key="CPU_CONTENTION",
                kind=NAME,
                title=f"CPU contention ({dur:.0f} s)",
                severity=sev,
                start=w[0],
                end=w[1],
                summary=text + (f"; busiest: {who}" if who else "") + ".",
                impact=impact,
                evidence=ev,
                remediation=[
                    "Find the CPU consumers: `pidstat -u -w 1`, `top -H` (threads), `ps -eLo pid,tid,psr,pcpu,comm --sort=-pcpu | head`.",
                    "Pin the trainer and its loader workers to dedicated cores (taskset / numactl --cpunodebind / cpuset.cpus) and keep other services off them.",
                    "Cap thread pools to the cores available: OMP_NUM_THREADS, torch.set_num_threads, DataLoader num_workers ≤ cores per GPU.",
                    "Lower the weight of background work: `systemctl set-property background.slice CPUWeight=20` (or nice/chrt -b).",
                ],
            )
        )
    return out


def _top(ctx: Context, w: tuple, n: int = 5) -> list[dict]:
    if not ctx.rows("pidstat"):
        return []
    return ctx.query(
        "SELECT pid, any_value(command) AS cmd, avg(cpu_pct) AS cpu, avg(wait_pct) AS wait FROM pidstat WHERE tid IS NULL AND since_boot IS NOT TRUE "
        "AND ts >= $lo AND ts < $hi GROUP BY pid HAVING avg(cpu_pct) >= 1 ORDER BY cpu DESC LIMIT $n",
        {"lo": w[0], "hi": w[1], "n": int(n)},
    ).to_dicts()
