"""GPU starvation: the GPUs idle while the job runs, classified by the host-side cause.

A dip is GPU utilisation below max(20 %, 0.5 × baseline) for ≥ 3 s while the baseline
(median outside dips) is ≥ 50 %, between the job's first and last busy second. Each dip
gets a score per cause (value / threshold, ≥ 1 means the cause's threshold was crossed);
the highest score ≥ 1 names the cause, else the dip is "unexplained" (look at the app).
"""

from __future__ import annotations

from datetime import timedelta

from analyzer.detectors import checkpoint_stall
from analyzer.detectors._base import GPU_DIP, Context, gpu_loss_severity, r, span, unit_of
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, overlap_s, periodicity

NAME = "gpu_starvation"
INPUTS = (
    "gpu_util_mean_pct (nvidia-smi dmon)",
    "optional: pidstat, cpu/io/memory signals, throttled_pct, GPU clocks, dmesg Xid",
)
THRESHOLDS = {
    **{f"dip_{k}": v for k, v in GPU_DIP.items()},
    "iowait_pct": 10.0,
    "psi_io_some_pct": 20.0,
    "throttled_pct": 20.0,
    "loader_proc_cpu_pct": 90.0,  # one process pegging (at least) one core ...
    "loader_max_busy_frac": 0.5,  # ... while fewer than half the cores are busy
    "runq_per_cpu": 1.5,
    "psi_cpu_some_pct": 50.0,
    "psi_mem_some_pct": 10.0,
    "pgscan_direct_per_s": 1000.0,
    "pviol_pct": 10.0,
    "clock_drop_frac": 0.85,
    "xid_lookback_s": 30,
    "context_pad_s": 2,
}
T = THRESHOLDS
LABELS = {
    "cpu_loader": "CPU-bound data loader",
    "cpu_contention": "CPU contention",
    "cpu_throttle": "CPU quota throttling",
    "io": "I/O wait (disk writes/reads)",
    "memory": "memory reclaim",
    "power_thermal": "GPU power/thermal cap",
    "xid": "GPU error (Xid)",
    "unexplained": "no host-side cause found",
}
REMEDIATION = {
    "cpu_loader": "The input pipeline is CPU-bound: raise DataLoader num_workers (up to the cores per GPU), set persistent_workers=True and prefetch_factor=4, pin_memory=True; move decoding/augmentation to the GPU (NVIDIA DALI) or pre-process the dataset offline.",
    "cpu_contention": "Give the trainer dedicated cores: pin it and its loader workers (taskset / numactl --cpunodebind / cpuset.cpus) and move other work away or lower its weight (`systemctl set-property other.slice CPUWeight=20`).",
    "cpu_throttle": "The job's cgroup hits its CPU quota: raise it (cpu.max / k8s limits.cpu, or drop the CPU limit and keep requests) — see the CPU_THROTTLE finding.",
    "io": "The job waits on storage: make checkpoints asynchronous, stage the dataset on local NVMe or in page cache, and raise DataLoader prefetch_factor — see the CHECKPOINT_STALL / IO_SATURATION findings.",
    "memory": "The host reclaims memory under the job: reduce its footprint or raise the limit, and set vm.min_free_kbytes / vm.watermark_scale_factor to avoid direct reclaim — see MEMORY_PRESSURE.",
    "power_thermal": "The GPUs were clock-capped: check `nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE` (clock event reasons), restore the power limit (`nvidia-smi -pl`) and fix cooling — see GPU_THROTTLE.",
    "xid": "A GPU error interrupted the job: see the GPU_XID finding for the code and what to do.",
    "unexplained": "No host signal explains the dip: profile a step across it (torch.profiler or `nsys profile -t cuda,nvtx,osrt`), check collective waits (NCCL_DEBUG=INFO) and stragglers on other hosts.",
}


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.has("gpu_util_mean_pct"):
        return NotEvaluated(NAME, "needs GPU utilisation: nvidia-smi dmon")
    base, dips = ctx.gpu_dips()
    if base is None or base < GPU_DIP["min_baseline_pct"]:
        return NotEvaluated(
            NAME,
            f"GPU utilisation baseline {base or 0:.0f}% < {GPU_DIP['min_baseline_pct']:.0f}%: the job was not GPU-bound during the capture",
        )
    capacity = ctx.gpu_capacity_s()
    rows = []
    for d in dips:
        cause, scores, ev = _classify(ctx, d, dips)
        rows.append((d, cause, scores, ev, ctx.gpu_seconds_lost(d, base) or 0.0))
    periods = {
        c: periodicity([d[0] for d, cc, *_ in rows if cc == c]) for c in {x[1] for x in rows}
    }
    counts = {c: sum(1 for x in rows if x[1] == c) for c in periods}
    out = []
    for d, cause, scores, ev, lost in rows:
        gmean = ctx.stat("gpu_util_mean_pct", d, "mean")
        per = periods[cause]
        series_lost = sum(x[4] for x in rows if x[1] == cause) if per else lost
        ranked = ", ".join(
            f"{LABELS[k]} {v:.1f}"
            for k, v in sorted(scores.items(), key=lambda kv: -kv[1])[:3]
            if v > 0
        )
        out.append(
            Finding(
                key="GPU_STARVATION",
                kind=NAME,
                title=f"GPUs idle {(d[1] - d[0]).total_seconds():.0f} s: {LABELS[cause]}",
                severity=gpu_loss_severity(series_lost, capacity) or "minor",
                start=d[0],
                end=d[1],
                summary=f"GPU utilisation averaged {gmean or 0:.0f}% (baseline {base:.0f}%) at {span(d)}, {lost:.0f} GPU-s lost; cause: {LABELS[cause]}"
                + (f" (scores: {ranked})" if ranked else "")
                + ".",
                impact={
                    "gpu_seconds_lost": r(lost, 1),
                    "gpu_idle_s": (d[1] - d[0]).total_seconds(),
                    "cause": cause,
                },
                evidence=[
                    Evidence(
                        "gpu_util_mean_pct", r(gmean), r(base), "%", "mean in the dip vs baseline"
                    ),
                    Evidence("classification", None, None, "", f"{cause}: {LABELS[cause]}"),
                    *ev,
                ],
                remediation=[REMEDIATION[cause]],
                series=f"GPU_STARVATION:{cause}" if per else None,
                period_s=r(per[0], 1) if per else None,
                occurrences=counts[cause] if per else None,
            )
        )
    return out


def _classify(
    ctx: Context, d: Window, dips: list[Window]
) -> tuple[str, dict[str, float], list[Evidence]]:
    pad = timedelta(seconds=T["context_pad_s"])
    w = (d[0] - pad, d[1] + pad)
    s: dict[str, float] = {}
    ev: list[Evidence] = []

    def val(col: str, how: str = "max") -> float | None:
        v = ctx.stat(col, w, how)
        if v is not None:
            ev.append(Evidence(col, r(v), r(ctx.baseline(col, exclude=dips)), unit_of(col), how))
        return v

    io = [
        (val("iowait_pct", "mean") or 0) / T["iowait_pct"],
        (val("psi_io_some_pct") or 0) / T["psi_io_some_pct"],
    ]
    if any(overlap_s(w, b) > 0 for b in checkpoint_stall.write_bursts(ctx)[0]):
        io.append(1.5)
        ev.append(Evidence("write_burst", 1.0, None, "", "a disk write burst overlaps the dip"))
    s["io"] = max(io)
    s["cpu_throttle"] = (val("throttled_pct") or 0) / T["throttled_pct"]
    cpus = ctx.cpus or 0
    runq = val("runq", "mean")
    s["cpu_contention"] = max(
        (runq or 0) / (T["runq_per_cpu"] * cpus) if cpus else 0,
        (val("psi_cpu_some_pct", "mean") or 0) / T["psi_cpu_some_pct"],
    )
    busy = val("cpu_busy_pct", "mean")
    s["cpu_loader"] = 0.0
    if (
        ctx.rows("pidstat")
        and busy is not None
        and busy < 100 * T["loader_max_busy_frac"]
        and s["cpu_contention"] < 1
    ):
        top = ctx.query(
            f"SELECT pid, any_value(command) AS cmd, avg(cpu_pct) AS cpu FROM pidstat WHERE tid IS NULL AND since_boot IS NOT TRUE "
            f"AND ts >= '{d[0].isoformat()}' AND ts < '{d[1].isoformat()}' GROUP BY pid ORDER BY cpu DESC NULLS LAST LIMIT 1"
        )
        if top.height and top["cpu"][0] is not None:
            ev.append(
                Evidence(
                    "process_cpu_pct",
                    r(top["cpu"][0]),
                    None,
                    "%",
                    f"busiest process: pid {top['pid'][0]} {top['cmd'][0]}",
                )
            )
            s["cpu_loader"] = (
                top["cpu"][0] / T["loader_proc_cpu_pct"] * 1.1
                if top["cpu"][0] >= T["loader_proc_cpu_pct"]
                else 0.0
            )
    s["memory"] = max(
        (val("psi_mem_some_pct") or 0) / T["psi_mem_some_pct"],
        (val("pgscan_direct_per_s") or 0) / T["pgscan_direct_per_s"],
    )
    pt = [(val("gpu_pviol_max_pct") or 0) / T["pviol_pct"], 1.5 * (val("gpu_tviol_any") or 0)]
    clk, clk_base = (
        ctx.stat("gpu_sm_clock_min_mhz", w, "min"),
        ctx.baseline("gpu_sm_clock_min_mhz", exclude=dips),
    )
    if clk is not None and clk_base:
        pt.append(1.2 if clk < T["clock_drop_frac"] * clk_base else 0.0)
    s["power_thermal"] = max(pt)
    s["xid"] = 0.0
    if ctx.rows("dmesg"):
        lo = d[0] - timedelta(seconds=T["xid_lookback_s"])
        n = ctx.query(
            f"SELECT count(*) AS n FROM dmesg WHERE kind IN ('xid', 'gpu_fallen_off_bus') AND ts >= '{lo.isoformat()}' AND ts < '{d[1].isoformat()}'"
        )["n"][0]
        if n:
            s["xid"] = 2.0
            ev.append(
                Evidence(
                    "xid_events", float(n), None, "count", "Xid lines in the dip or the 30 s before"
                )
            )
    cause = max(s, key=lambda k: s[k])
    return (cause if s[cause] >= 1.0 else "unexplained"), s, ev
