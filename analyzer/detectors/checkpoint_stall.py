"""Checkpoint stalls: periodic disk-write bursts, and the GPU idle time they cause.

A write burst is a run of seconds where disk writes, write latency or page-cache writes
(growth of Dirty + Writeback) jump well above the capture's own baseline. Bursts that
repeat evenly (≥ 3, spacing CV < 0.25) are checkpoints; a non-periodic burst counts when
a GPU dip segment caused by I/O lies within 3 s of it. The finding's window is the burst
together with those segments: a checkpoint stalls the job from the moment the state is
copied out, before the disk sees a byte. iowait is not used to detect: busy CPUs hide it
(a CPU with runnable work is never "iowait"; real captures show ~0 % during the burst).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analyzer.detectors import _dips
from analyzer.detectors._base import Context, gpu_loss_severity, r, span
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, overlap_s, periodicity

NAME = "checkpoint_stall"
INPUTS = (
    "disk_write_kb_s or disk_w_await_max_ms (iostat -x / sar -d)",
    "optional: gpu_util_mean_pct, dirty_kb, writeback_kb, disk_aqu_sz_max, disk_util_max_pct, psi_io_*, biolat_p99_us",
)
THRESHOLDS = {
    "write_abs_kb_s": 51200.0,  # a burst writes at least 50 MB/s ...
    "write_rel": 5.0,  # ... and 5x the capture's median write rate
    "page_cache_abs_kb_s": 102400.0,  # or page-cache writes at least 100 MB/s ...
    "await_abs_ms": 20.0,  # or w_await at least 20 ms ...
    "await_rel": 5.0,  # ... and 5x its median
    "leave_frac": 0.5,  # hysteresis: the burst lasts while above half the entry level
    "min_s": 2,
    "merge_gap_s": 3,
    "periodic_min_count": 3,
    "periodic_max_cv": 0.25,
    "gpu_pad_s": 3,  # a GPU dip within 3 s of a burst belongs to it
}
T = THRESHOLDS


def _rates(ctx: Context) -> dict[str, pl.Series]:
    """The burst signals: disk writes, write latency and page-cache writes (growth of
    Dirty + Writeback per second: what the application wrote before write-back reaches the
    disk — a checkpoint written with buffered I/O and fsync'd at the end shows here first)."""
    out = {}
    for col in ("disk_write_kb_s", "disk_w_await_max_ms"):
        if ctx.has(col):
            out[col] = ctx.signals[col]
    if ctx.has("dirty_kb"):
        pc = pl.col("dirty_kb") + (pl.col("writeback_kb") if ctx.has("writeback_kb") else 0.0)
        v = ctx.signals.select("ts", pc.alias("v"))
        # growth per second between consecutive samples (a slow sampler skips seconds)
        rate = (
            v.filter(pl.col("v").is_not_null())
            .with_columns(
                r=(pl.col("v").diff() / pl.col("ts").diff().dt.total_seconds()).clip(
                    lower_bound=0.0
                )
            )
            .select("ts", "r")
        )
        out["page_cache_write_kb_s"] = v.join(rate, on="ts", how="left")["r"].alias(
            "page_cache_write_kb_s"
        )
    return out


_LEVELS = {
    "disk_write_kb_s": ("write_abs_kb_s", "write_rel"),
    "page_cache_write_kb_s": ("page_cache_abs_kb_s", "write_rel"),
    "disk_w_await_max_ms": ("await_abs_ms", "await_rel"),
}


def write_bursts(ctx: Context) -> tuple[list[Window], dict[str, float | None]]:
    """Write-burst windows and the baselines used (cached on the context)."""
    if "write_bursts" in ctx.cache:
        return ctx.cache["write_bursts"]
    base: dict[str, float | None] = {}
    windows: list[Window] = []
    rates = _rates(ctx) if ctx.any_of("disk_write_kb_s", "disk_w_await_max_ms") else {}
    for _ in range(2):  # second pass: baselines outside the first pass's bursts
        if not rates:
            break
        outside = ~ctx.mask(windows)
        ratios = []
        for col, values in rates.items():
            kept = values.filter(outside).drop_nulls()
            base[col] = float(kept.median()) if kept.len() else None  # type: ignore[arg-type]
            absolute, rel = (T[k] for k in _LEVELS[col])
            ratios.append(values / max(absolute, rel * (base[col] or 0.0)))
        score = pl.DataFrame(ratios).select(pl.max_horizontal(pl.all()).alias("x"))["x"]
        windows = ctx.runs(score, 1.0, T["leave_frac"], min_s=T["min_s"], gap_s=T["merge_gap_s"])
    ctx.cache["write_bursts"] = (windows, base)
    ctx.cache["write_rates"] = rates
    return windows, base


def io_segments(ctx: Context) -> list[_dips.Segment]:
    """GPU-dip segments caused by I/O (see `analyzer.detectors._dips`)."""
    return [s for s in _dips.segments(ctx, write_bursts(ctx)[0]) if s.cause == "io"]


def stall_windows(ctx: Context) -> list[Window]:
    """The bursts this detector reports (periodic ones, or ones the GPUs idled in)."""
    if "checkpoint_windows" not in ctx.cache:
        bursts, _ = write_bursts(ctx)
        per = periodicity(
            [a for a, _ in bursts],
            min_count=int(T["periodic_min_count"]),
            max_cv=T["periodic_max_cv"],
        )
        segs = io_segments(ctx)
        keep = [w for w in bursts if per or any(_near(w, s.window) for s in segs)]
        ctx.cache["checkpoint_windows"] = keep
        ctx.cache["checkpoint_period"] = per
    return ctx.cache["checkpoint_windows"]


def _near(w: Window, d: Window) -> bool:
    pad = timedelta(seconds=T["gpu_pad_s"])
    return overlap_s((w[0] - pad, w[1] + pad), d) > 0


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.any_of("disk_write_kb_s", "disk_w_await_max_ms"):
        return NotEvaluated(NAME, "needs disk write throughput or latency: iostat -x (or sar -d)")
    stalls = stall_windows(ctx)
    _, base = write_bursts(ctx)
    per = ctx.cache.get("checkpoint_period")
    gbase, _ = ctx.gpu_dips()
    segs = [s.window for s in io_segments(ctx)]
    capacity = ctx.gpu_capacity_s()
    occ = []
    for w in stalls:
        near = [d for d in segs if _near(w, d)]
        lost = (
            sum(ctx.gpu_seconds_lost(d) or 0.0 for d in near) if near else ctx.gpu_seconds_lost(w)
        )
        occ.append((w, near, lost))
    total_lost = sum(x[2] or 0.0 for x in occ) if ctx.has("gpu_util_mean_pct") else None
    severity = gpu_loss_severity(total_lost, capacity) or "minor"
    if total_lost is not None and total_lost < 1 and severity == "info":
        severity = "minor" if per else "info"
    out = []
    for i, (w, near, lost) in enumerate(occ, 1):
        window = (min([w[0], *(d[0] for d in near)]), max([w[1], *(d[1] for d in near)]))
        out.append(
            _finding(ctx, i, len(occ), w, window, near, lost, base, gbase, per, severity, stalls)
        )
    return out


def _finding(
    ctx: Context,
    i: int,
    n: int,
    burst: Window,
    window: Window,
    near: list[Window],
    lost: float | None,
    base: dict,
    gbase: float | None,
    per: tuple[float, float] | None,
    severity: str,
    stalls: list[Window],
) -> Finding:
    wr = ctx.stat("disk_write_kb_s", burst, "max")
    aw = ctx.stat("disk_w_await_max_ms", burst, "max")
    iow = ctx.stat("iowait_pct", burst, "mean")
    gmin = ctx.stat("gpu_util_mean_pct", window, "min")
    pcw = ctx.cache.get("write_rates", {}).get("page_cache_write_kb_s")
    ev = [
        Evidence("disk_write_kb_s", r(wr), r(base.get("disk_write_kb_s")), "kB/s", "peak"),
        Evidence(
            "disk_w_await_max_ms", r(aw, 2), r(base.get("disk_w_await_max_ms"), 2), "ms", "peak"
        ),
    ]
    if pcw is not None:
        peak = pcw.filter(ctx.mask([burst])).max()
        ev.append(
            Evidence(
                "page_cache_write_kb_s",
                r(peak),  # type: ignore[arg-type]
                r(base.get("page_cache_write_kb_s")),
                "kB/s",
                "peak growth of Dirty + Writeback (buffered writes)",
            )
        )
    for col, unit, how in (
        ("disk_aqu_sz_max", "requests", "max"),
        ("disk_util_max_pct", "%", "max"),
        ("dirty_kb", "kB", "max"),
        ("writeback_kb", "kB", "max"),
        ("psi_io_some_pct", "%", "max"),
        ("psi_io_full_pct", "%", "max"),
        ("biolat_p99_us", "us", "max"),
    ):
        if ctx.has(col):
            ev.append(
                Evidence(
                    col,
                    r(ctx.stat(col, burst, how)),
                    r(ctx.baseline(col, exclude=stalls)),
                    unit,
                    "peak",
                )
            )
    if iow is not None:
        note = (
            "mean; near zero — busy CPUs hide iowait, so it is not used to detect"
            if iow < 5
            else "mean"
        )
        ev.append(
            Evidence("iowait_pct", r(iow), r(ctx.baseline("iowait_pct", exclude=stalls)), "%", note)
        )
    if gmin is not None:
        ev.append(
            Evidence(
                "gpu_util_mean_pct", r(gmin), r(gbase), "%", "minimum in the window vs baseline"
            )
        )
    mb = (ctx.stat("disk_write_kb_s", burst, "sum") or 0.0) / 1024
    impact = {"write_burst_s": (burst[1] - burst[0]).total_seconds(), "written_mb": r(mb, 0)}
    if lost is not None:
        impact |= {
            "gpu_seconds_lost": r(lost, 1),
            "gpu_idle_s": sum((d[1] - d[0]).total_seconds() for d in near),
        }
    text = f"Write burst {i} of {n} at {span(burst)}: disk writes peaked at {(wr or 0) / 1024:.0f} MB/s"
    if wr and base.get("disk_write_kb_s"):
        text += f" ({wr / max(base['disk_write_kb_s'], 1.0):.0f}× the median)"
    if aw is not None:
        text += f", w_await {aw:.0f} ms"
    if near and gmin is not None and gbase is not None:
        text += (
            f"; GPU utilisation fell from {gbase:.0f}% to {gmin:.0f}% ({lost or 0:.0f} GPU-s lost)"
        )
    if per:
        text += f"; repeats every {per[0]:.0f} s"
    return Finding(
        key="CHECKPOINT_STALL",
        kind=NAME,
        title=f"Checkpoint write burst stalls the job ({(burst[1] - burst[0]).total_seconds():.0f} s)"
        if near
        else f"Periodic write burst ({(burst[1] - burst[0]).total_seconds():.0f} s)",
        severity=severity,
        start=window[0],
        end=window[1],
        summary=text + ".",
        impact=impact,
        evidence=ev,
        remediation=[
            "Take the write off the training step: save checkpoints asynchronously (e.g. torch.distributed.checkpoint.async_save, or copy the state to CPU and write from a background thread).",
            "Make write-back continuous instead of bursty: `sysctl -w vm.dirty_background_bytes=268435456 vm.dirty_bytes=1073741824` (256 MiB / 1 GiB) so writers are not blocked at the dirty limit.",
            "Write checkpoints to a different device than the dataset and stagger ranks' writes; check the device with `iostat -x 1` during a checkpoint (aqu-sz, w_await).",
            "Checkpoint less often or smaller (sharded/incremental checkpoints) if the device cannot absorb the burst.",
        ],
        series="CHECKPOINT_STALL" if per else None,
        period_s=r(per[0], 1) if per else None,
        occurrences=n if per else None,
    )
