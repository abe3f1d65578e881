"""GPU starvation: the GPUs idle while the job runs, classified by the host-side cause.

A dip is GPU utilisation below max(20 %, 0.5 × baseline) for ≥ 3 s while the baseline
(median outside dips) is ≥ 50 %, between the job's first and last busy second. Every
second gets a score per cause (`analyzer.detectors._dips`: value / threshold, ≥ 1 means
the cause's threshold was crossed); a dip whose seconds change cause (a CPU-bound phase
running into a checkpoint) is split there, and each part is one finding named after the
cause of most of its interior seconds, else "unexplained" (look at the application).
"""

from __future__ import annotations

from analyzer.detectors import _dips, checkpoint_stall
from analyzer.detectors._base import GPU_DIP, Context, gpu_loss_severity, r, span, unit_of
from analyzer.detectors._dips import Segment
from analyzer.detectors._who import busy_processes, by_command, snapshot_top, with_identity
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, periodicity

NAME = "gpu_starvation"
INPUTS = (
    "gpu_util_mean_pct (nvidia-smi dmon)",
    "optional: pidstat, cpu/io/memory signals, throttled_pct, GPU clocks, dmesg Xid",
)
THRESHOLDS = _dips.THRESHOLDS  # one place: the per-second cause scores live in _dips.py
T = THRESHOLDS
LABELS = {
    "cpu_loader": "CPU-bound data loader",
    "cpu_contention": "CPU contention (all CPUs busy)",
    "cpu_throttle": "CPU quota throttling",
    "io": "I/O wait (disk writes/reads)",
    "memory": "memory reclaim",
    "power_thermal": "GPU power/thermal cap",
    "xid": "GPU error (Xid)",
    "unexplained": "no host-side cause found",
}
REMEDIATION = {
    "cpu_loader": "The input pipeline is CPU-bound: raise DataLoader num_workers (up to the cores per GPU), set persistent_workers=True and prefetch_factor=4, pin_memory=True; move decoding/augmentation to the GPU (NVIDIA DALI) or pre-process the dataset offline.",
    "cpu_contention": "The CPUs were saturated while the GPUs waited: find the consumers (`pidstat -u 1`, `top -H`). If it is the job's own input pipeline (decoding, augmentation, tokenisation), move that work to the GPU (NVIDIA DALI), pre-process offline or cap its threads (OMP_NUM_THREADS, num_workers); if it is other work, pin the trainer and its workers to dedicated cores (taskset / numactl / cpuset.cpus) and lower the rest's weight (`systemctl set-property other.slice CPUWeight=20`).",
    "cpu_throttle": "The job's cgroup hits its CPU quota: raise it (cpu.max / k8s limits.cpu, or drop the CPU limit and keep requests) — see the CPU_THROTTLE finding.",
    "io": "The job waits on storage: make checkpoints asynchronous, stage the dataset on local NVMe or in page cache, and raise DataLoader prefetch_factor — see the CHECKPOINT_STALL / IO_SATURATION findings.",
    "memory": "The host reclaims memory under the job: reduce its footprint or raise the limit, and set vm.min_free_kbytes / vm.watermark_scale_factor to avoid direct reclaim — see MEMORY_PRESSURE.",
    "power_thermal": "The GPUs were clock-capped: check `nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE` (clock event reasons), restore the power limit (`nvidia-smi -pl`) and fix cooling — see GPU_THROTTLE.",
    "xid": "A GPU error interrupted the job: see the GPU_XID finding for the code and what to do.",
    "unexplained": "No host signal explains the dip: profile a step across it (torch.profiler or `nsys profile -t cuda,nvtx,osrt`), check collective waits (NCCL_DEBUG=INFO) and stragglers on other hosts.",
}
#: a CPU-bound loader whose disk reads were high too is copying data (the field guide:
#: "pidstat on the DataLoader process while iostat -x shows disk throughput; if both are
#: high the CPU is copying data"); reads at their baseline: it computes (decode, augment)
LOADER_READ_KB_S = 20 * 1024  # mean disk reads over the segment's interior, at least …
LOADER_READ_RISE = 2.0  # … and this many times the capture's baseline (outside the dips)
LOADER_KINDS = {
    "copying": "the loader's CPU and the disk reads were both high: the CPU is copying data from storage",
    "computing": "disk reads stayed near their baseline: the loader's CPU is computing (decoding, augmenting, tokenising)",
}
COPYING_FIX = "The loader copies data from storage on the CPU: read larger sequential shards (WebDataset/TFRecord/FFCV, `datasets` memory-mapped Arrow) instead of many small files, keep the dataset in page cache or on local NVMe, set pin_memory=True and more num_workers for the reads, and decode on the GPU (NVIDIA DALI, nvjpeg)."


def segments(ctx: Context) -> list[Segment]:
    """The GPU dips split by cause (shared with checkpoint_stall; cached on the context)."""
    return _dips.segments(ctx, checkpoint_stall.write_bursts(ctx)[0])


def dips_of(ctx: Context, *causes: str) -> list[Window]:
    """Windows of the dip segments with one of ``causes``: the GPU time a host-side
    finding can be charged with (a dip the CPUs caused is not the disk's cost)."""
    return [s.window for s in segments(ctx) if s.cause in causes]


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
    rows = [(s, ctx.gpu_seconds_lost(s.window, base) or 0.0) for s in segments(ctx)]
    causes = {s.cause for s, _ in rows}
    periods = {c: periodicity([s.window[0] for s, _ in rows if s.cause == c]) for c in causes}
    counts = {c: sum(1 for s, _ in rows if s.cause == c) for c in causes}
    out = []
    for seg, lost in rows:
        d, cause = seg.window, seg.cause
        kind, reads = _loader_kind(ctx, seg, dips) if cause == "cpu_loader" else (None, [])
        gmean = ctx.stat("gpu_util_mean_pct", d, "mean")
        per = periods[cause]
        series_lost = sum(x for s, x in rows if s.cause == cause) if per else lost
        ranked = ", ".join(
            f"{LABELS[k]} {v:.1f}"
            for k, v in sorted(seg.scores.items(), key=lambda kv: -kv[1])[:3]
            if v > 0
        )
        split = seg.window != seg.dip
        out.append(
            Finding(
                key="GPU_STARVATION",
                kind=NAME,
                title=f"GPUs idle {(d[1] - d[0]).total_seconds():.0f} s: {LABELS[cause]}",
                severity=gpu_loss_severity(series_lost, capacity) or "minor",
                start=d[0],
                end=d[1],
                summary=f"GPU utilisation averaged {gmean or 0:.0f}% (baseline {base:.0f}%) at {span(d)}, {lost:.0f} GPU-s lost; cause: {LABELS[cause]}"
                + (f" (mean scores: {ranked})" if ranked else "")
                + (
                    f"; part of a longer dip at {span(seg.dip)} whose cause changes"
                    if split
                    else ""
                )
                + (f"; {LOADER_KINDS[kind]}" if kind else "")
                + ".",
                impact={
                    "gpu_seconds_lost": r(lost, 1),
                    "gpu_idle_s": (d[1] - d[0]).total_seconds(),
                    "cause": cause,
                    **({"loader": kind} if kind else {}),
                    **_who_of(ctx, seg),
                },
                evidence=[
                    Evidence(
                        "gpu_util_mean_pct", r(gmean), r(base), "%", "mean in the dip vs baseline"
                    ),
                    Evidence("classification", None, None, "", f"{cause}: {LABELS[cause]}"),
                    *_evidence(ctx, seg, dips),
                    *reads,
                ],
                remediation=[COPYING_FIX if kind == "copying" else REMEDIATION[cause]],
                series=f"GPU_STARVATION:{cause}" if per else None,
                period_s=r(per[0], 1) if per else None,
                occurrences=counts[cause] if per else None,
            )
        )
    return out


_EVIDENCE = (
    ("iowait_pct", "mean"),
    ("psi_io_some_pct", "max"),
    ("throttled_pct", "max"),
    ("runq", "mean"),
    ("psi_cpu_some_pct", "mean"),
    ("cpu_busy_pct", "mean"),
    ("psi_mem_some_pct", "max"),
    ("pgscan_direct_per_s", "max"),
    ("gpu_pviol_max_pct", "max"),
    ("gpu_tviol_any", "max"),
    ("gpu_sm_clock_min_mhz", "min"),
)


def _evidence(ctx: Context, seg: Segment, dips: list) -> list[Evidence]:
    """Every cause's inputs over the segment's interior seconds, the scores, the loader."""
    w = seg.interior
    ev = [
        Evidence(
            col, r(v), r(ctx.baseline(col, exclude=dips)), unit_of(col), f"{how} (interior seconds)"
        )
        for col, how in _EVIDENCE
        if (v := ctx.stat(col, w, how)) is not None
    ]
    ev += [
        Evidence(
            f"score_{k}",
            r(v, 2),
            None,
            "",
            f"mean score; labels {seg.share[k] * 100:.0f}% of the seconds",
        )
        for k, v in seg.scores.items()
        if v > 0
    ]
    if seg.share.get("io", 0) > 0 and ctx.stat("disk_write_kb_s", w, "max") is not None:
        ev.append(
            Evidence(
                "disk_write_kb_s",
                r(ctx.stat("disk_write_kb_s", seg.window, "max")),
                None,
                "kB/s",
                "peak",
            )
        )
    if seg.cause in ("cpu_loader", "cpu_contention"):
        ev += _busiest(ctx, w)
    return ev


def _loader_kind(
    ctx: Context, seg: Segment, dips: list[Window]
) -> tuple[str | None, list[Evidence]]:
    """A CPU-bound loader's dip: ``copying`` when the disk reads were high too (mean over
    the interior ≥ `LOADER_READ_KB_S` and ≥ `LOADER_READ_RISE` × the baseline outside the
    dips), ``computing`` when they were not; None without disk data."""
    mean = ctx.stat("disk_read_kb_s", seg.interior, "mean")
    if mean is None:
        return None, []
    base = ctx.baseline("disk_read_kb_s", exclude=dips)
    high = mean >= LOADER_READ_KB_S and (not base or mean >= LOADER_READ_RISE * base)
    kind = "copying" if high else "computing"
    note = f"mean over the dip's interior seconds vs baseline: {LOADER_KINDS[kind]}"
    return kind, [Evidence("disk_read_kb_s", r(mean), r(base), "kB/s", note)]


def _who_of(ctx: Context, seg: Segment) -> dict:
    """``{"who": …}`` for CPU-caused dips: the busiest commands (pidstat), by cgroup."""
    if seg.cause not in ("cpu_loader", "cpu_contention"):
        return {}
    procs = [p for p in busy_processes(ctx, seg.interior) if (p["pcpu"] or 0) >= 1]
    who = by_command(with_identity(ctx, procs, seg.interior))
    return (
        {"who": [g | {"share": r(g["share"]), "unit": "% of one CPU"} for g in who]} if who else {}
    )


def _busiest(ctx: Context, w: Window) -> list[Evidence]:
    """The busiest process of the dip: pidstat's (mean %CPU over the window's reports, at
    least 1 %), else the last ps snapshot's top process (ps: average over its lifetime),
    else nothing — never a process that was idle."""
    top = [p for p in busy_processes(ctx, w) if (p["pcpu"] or 0) >= 1][:1]
    if top:
        p = top[0]
        note = f"busiest process: pid {p['pid']} {p['cmd']} (mean %CPU over the window's pidstat reports)"
        return [Evidence("process_cpu_pct", r(p["pcpu"]), None, "%", note)]
    snap = snapshot_top(ctx, 1)
    if not snap or (snap[0]["cpu_pct"] or 0) < 1:
        return []
    p = snap[0]
    what = " ".join(str(p["args"] or p["comm"] or "?").split())[:80]
    note = (
        f"pidstat saw no busy process here; busiest in the {p['snapshot'] or ''} ps snapshot: "
        f"pid {p['pid']} {what} (ps %CPU: average over the process's lifetime)"
    )
    return [Evidence("process_cpu_pct", r(p["cpu_pct"]), None, "%", note)]
