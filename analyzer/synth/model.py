"""The simulated host: *drivers* per sample, which incidents change, then derived state.

A `World` holds one row per sample ``k = 0..N`` (``epoch = t0 + k × interval``; row k
describes the interval ``(epoch - interval, epoch]``; row 0 is the moment the capture
starts). Generation is three steps: `baseline` sets every driver to a healthy training
host (GPUs ~95 % busy, trainer cores busy, loaders half busy, light disk writes); each
incident overwrites drivers inside its window (`analyzer.synth.incidents`); `derive`
integrates the drivers into the state the tools report (memory, counters, PSI averages)
and `analyzer.synth.devices` expands them per disk, GPU, NIC and process.

Driver columns (host frame; % are 0..100, fractions 0..1):

| column | unit | meaning |
|---|---|---|
| ``train`` | fraction | training progress rate: GPU SM busy ≈ 95 % × train |
| ``lvl_trainer`` / ``lvl_loader`` / ``lvl_other`` | % | busy share of each CPU role |
| ``peg_cpu`` / ``peg_pct`` | index / % | one CPU pinned busy (CPU-bound loader), -1 none |
| ``hot_cpu`` / ``hot_irq`` / ``hot_soft`` | index / % / % | one CPU in hard/soft IRQ, -1 none |
| ``iowait`` | % | share of idle CPU time waiting on I/O |
| ``runq_extra`` / ``blocked`` | tasks | runnable beyond busy cores / uninterruptible tasks |
| ``wr_kb_s`` / ``wr_disk`` / ``rd_kb_s`` / ``io_slow`` / ``io_sat`` | kB/s, index, kB/s, ×, 0..1 | bulk writes to one disk, dataset reads, latency multiplier, saturation |
| ``dirty_add_kb`` / ``wb_kb`` | kB | Dirty above baseline / Writeback |
| ``anon_add_kb`` | kB | anonymous memory above baseline (memory ramps) |
| ``scan_direct`` / ``scan_kswapd`` / ``refault`` / ``allocstall`` | 1/s | reclaim activity |
| ``si_kb_s`` / ``so_kb_s`` | kB/s | swap-in / swap-out |
| ``psi_*`` | fraction | stall share: cpu/mem/io some and full, host and job cgroup (``cg_``) |
| ``throttle`` / ``quota`` | fraction / cores | cgroup periods throttled, CPU quota (0 = none) |
| ``oom_kills`` | count | OOM kills in the interval |
| ``gpu_clk`` / ``gpu_pviol`` / ``gpu_capped`` | fraction / % / 0-1 | SM clock vs max, power-violation share, power at cap |
| ``net_rx_mult`` / ``net_drop`` / ``net_err`` | × / 1/s / 1/s | network load factor, drops and errors on the incident NIC |
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.spec import Spec

KIB = 1024
GIB_KB = 1024 * 1024


@dataclass
class Event:
    """Kernel log lines emitted at ``epoch`` (float seconds; each line gets +µs)."""

    epoch: float
    lines: list[str]


@dataclass
class World:
    """Everything the writers need. Frames are polars; see the module docstring."""

    spec: Spec
    t0: int
    start_epoch: float
    boot_epoch: float
    host: pl.DataFrame
    roles: list[str]
    mem_total_kb: int
    swap_total_kb: int
    events: list[Event] = field(default_factory=list)
    gaps: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    disks: pl.DataFrame | None = None
    gpus: pl.DataFrame | None = None
    nics: pl.DataFrame | None = None
    procs: pl.DataFrame | None = None
    cg_limits: dict[str, str] = field(default_factory=dict)
    dead_pids: dict[int, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.spec.samples

    @property
    def interval(self) -> int:
        return self.spec.interval

    def noise(self, stream: str, sd: float, smooth: float = 0.0) -> pl.Series:
        """Gaussian jitter for every row (× spec.noise); ``smooth`` in (0, 1) makes it
        an AR(1)-like slow wander (exponential smoothing, rescaled to ``sd``)."""
        z = _fmt.normal(self.host.height, self.spec.seed, stream)
        if smooth > 0:
            z = z.ewm_mean(alpha=1 - smooth, adjust=False) / ((1 - smooth) / (1 + smooth)) ** 0.5
        return z * (sd * self.spec.noise)

    def sticky(self, stream: str, sd: float, p: float, quantum: float = 1.0) -> pl.Series:
        """Jitter that holds its value and moves only on a fraction ``p`` of the samples,
        in steps of ``quantum`` (slow kernel quantities: RSS in 2 MiB pages, slab...)."""
        move = _fmt.uniform(self.host.height, self.spec.seed, stream + "/when") < p
        z = self.noise(stream, sd, 0.9)
        held = pl.DataFrame({"z": z, "m": move}).select(
            pl.when(pl.col("m") | (pl.int_range(0, pl.len()) == 0)).then(pl.col("z")).forward_fill()
        )
        return (held.to_series() / quantum).round(0) * quantum

    def window(self, start_s: float, end_s: float, col: str = "epoch") -> pl.Expr:
        """Rows whose interval ends inside ``(start, end]`` seconds from the start."""
        return (pl.col(col) > self.t0 + start_s) & (pl.col(col) <= self.t0 + end_s)


def cpu_roles(cpus: int, gpus: int) -> list[str]:
    """CPU 0 housekeeping/IRQs, one trainer core per GPU, loader cores, the rest idle-ish."""
    roles = ["other"] * cpus
    trainers = min(max(gpus, 1), max(cpus - 1, 1))
    loaders = min(max(1, 2 * max(gpus, 1)), max(cpus - 1 - trainers, 0))
    for c in range(1, 1 + trainers):
        roles[c % cpus] = "trainer"
    for c in range(1 + trainers, 1 + trainers + loaders):
        roles[c] = "loader"
    return roles


def baseline(spec: Spec) -> World:
    """A healthy training host: every driver at its normal level with jitter."""
    t0 = int(spec.start.timestamp())
    n = spec.samples
    frac = 0.05 + 0.9 * _fmt.uniform(1, spec.seed, "start-frac")[0]
    uptime = 3 * 86400 + 86400 * 20 * _fmt.uniform(1, spec.seed, "uptime")[0]
    mem_total = max(32, 8 * spec.cpus) * GIB_KB - 1_234_567
    k = pl.int_range(0, n + 1, dtype=pl.Int64, eager=True)
    host = pl.DataFrame({"k": k, "epoch": t0 + k * spec.interval})
    w = World(
        spec=spec,
        t0=t0,
        start_epoch=t0 + frac,
        boot_epoch=t0 + frac - uptime,
        host=host,
        roles=cpu_roles(spec.cpus, spec.gpus),
        mem_total_kb=mem_total,
        swap_total_kb=8 * GIB_KB,
    )
    w.host = host.with_columns(
        train=(1.0 + w.noise("train", 0.012)).clip(0.9, 1.0),
        lvl_trainer=88.0 + w.noise("lvl_trainer", 3.0, 0.6),
        lvl_loader=45.0 + w.noise("lvl_loader", 5.0, 0.6),
        lvl_other=4.0 + w.noise("lvl_other", 1.0, 0.5),
        peg_cpu=pl.lit(-1, pl.Int32),
        peg_pct=pl.lit(0.0),
        hot_cpu=pl.lit(-1, pl.Int32),
        hot_irq=pl.lit(0.0),
        hot_soft=pl.lit(0.0),
        iowait=(0.15 + w.noise("iowait", 0.1)).clip(0.0, 1.0),
        runq_extra=(0.4 + w.noise("runq", 0.8)).clip(0.0),
        blocked=(w.noise("blocked", 0.4) - 0.2).clip(0.0),
        wr_kb_s=pl.lit(0.0),
        wr_disk=pl.lit(min(1, spec.disks - 1), pl.Int32),
        rd_kb_s=(95_000.0 * max(spec.gpus, 1) + w.noise("rd", 12_000.0, 0.5)).clip(0.0),
        io_slow=pl.lit(1.0),
        io_sat=pl.lit(0.0),
        sat_disk=pl.lit(-1, pl.Int32),
        dirty_add_kb=pl.lit(0.0),
        wb_kb=(w.sticky("wb", 400.0, 0.2, 4.0) ** 2 / 400.0).clip(0.0, 4000.0).round(0),
        anon_add_kb=pl.lit(0.0),
        scan_direct=pl.lit(0.0),
        scan_kswapd=pl.lit(0.0),
        refault=(w.noise("refault", 3.0) ** 2).clip(0.0),
        allocstall=pl.lit(0.0),
        si_kb_s=pl.lit(0.0),
        so_kb_s=pl.lit(0.0),
        psi_cpu_some=(0.02 + w.noise("psi_cpu", 0.01, 0.8)).clip(0.0, 1.0),
        psi_cpu_full=pl.lit(0.0),
        psi_mem_some=pl.lit(0.0),
        psi_mem_full=pl.lit(0.0),
        psi_io_some=(0.004 + w.noise("psi_io", 0.004, 0.5)).clip(0.0, 1.0),
        psi_io_full=(0.002 + w.noise("psi_iof", 0.002, 0.5)).clip(0.0, 1.0),
        throttle=pl.lit(0.0),
        quota=pl.lit(0.0),
        oom_kills=pl.lit(0, pl.Int64),
        gpu_clk=pl.lit(1.0),
        gpu_pviol=pl.lit(0.0),
        gpu_capped=pl.lit(0.0),
        gpu_sel=pl.lit(-1, pl.Int32),
        net_rx_mult=(1.0 + w.noise("net", 0.08, 0.7)).clip(0.2),
        net_drop=pl.lit(0.0),
        net_err=pl.lit(0.0),
        net_nic=pl.lit(0, pl.Int32),
    )
    return w


def _psi_avgs(frac: pl.Expr, interval: int, name: str, uptime: float = 0.0) -> list[pl.Expr]:
    """Kernel-style running averages (avg10/60/300, %) and cumulative total (µs); the
    total starts from the stall accumulated since boot at the first sample's level."""
    out = []
    for win in (10, 60, 300):
        alpha = 1 - pow(2.718281828459045, -interval / win)
        out.append((frac.ewm_mean(alpha=alpha, adjust=False) * 100).alias(f"{name}_avg{win}"))
    since_boot = (frac.first() * 0.8 * uptime * 1e6).round(0)
    out.append(((frac * interval * 1e6).cum_sum() + since_boot).alias(f"{name}_total"))
    return out


def derive(w: World) -> None:
    """Turn drivers into host state: memory, CPU totals, counters and PSI averages."""
    spec, h = w.spec, w.host
    total = w.mem_total_kb
    base_anon = 0.22 * total
    base_cache = 0.42 * total
    h = h.with_columns(
        anon_kb=(base_anon + w.sticky("anon", 0.002 * total, 0.08, 2048.0) + pl.col("anon_add_kb")),
        dirty_kb=(
            60_000.0 + w.sticky("dirty", 25_000.0, 0.5, 4.0).abs() + pl.col("dirty_add_kb")
        ).clip(0.0),
        slab_kb=0.018 * total + w.sticky("slab", 0.0005 * total, 0.05, 4.0),
        shmem_kb=pl.lit(0.012 * total),
        buff_kb=pl.lit(0.004 * total),
        swap_used_kb=(pl.col("so_kb_s") - pl.col("si_kb_s")).cum_sum() * spec.interval
        + 0.01 * w.swap_total_kb,
    )
    # page cache yields to anonymous memory (reclaim); free is what is left
    h = h.with_columns(
        cache_kb=pl.min_horizontal(
            pl.lit(base_cache) + w.sticky("cache", 0.003 * total, 0.3, 4.0),
            pl.lit(0.96 * total) - pl.col("anon_kb") - pl.col("slab_kb") - pl.col("buff_kb"),
        ).clip(0.01 * total),
        swap_used_kb=pl.col("swap_used_kb").clip(0.0, w.swap_total_kb),
    )
    h = h.with_columns(
        free_kb=(
            pl.lit(total)
            - pl.col("anon_kb")
            - pl.col("cache_kb")
            - pl.col("slab_kb")
            - pl.col("buff_kb")
            - 0.01 * total
        ).clip(0.005 * total),
    )
    h = h.with_columns(
        avail_kb=pl.col("free_kb") + 0.85 * pl.col("cache_kb") + 0.5 * pl.col("slab_kb"),
        busy_cores=sum(
            pl.col(f"lvl_{r}").clip(0.0, 100.0) / 100 * w.roles.count(r)
            for r in ("trainer", "loader", "other")
        )
        + pl.when(pl.col("peg_cpu") >= 0).then(pl.col("peg_pct") / 100).otherwise(0.0),
    )
    h = h.with_columns(runq=(pl.col("busy_cores") + pl.col("runq_extra")).clip(0.0))
    h = h.with_columns(
        pgfault_s=(4500.0 + w.noise("pgfault", 600.0)).clip(0.0),
        pgmajfault_s=(
            w.noise("majflt", 0.6).abs() + 0.4 * pl.col("refault") + pl.col("si_kb_s") / 4
        ),
        pgsteal_kswapd_s=0.93 * pl.col("scan_kswapd"),
        pgsteal_direct_s=0.81 * pl.col("scan_direct"),
    )
    h = h.with_columns(
        pgfree_s=pl.col("pgfault_s") * 1.02
        + pl.col("pgsteal_kswapd_s")
        + pl.col("pgsteal_direct_s")
        + 250.0,
    )
    for res in ("cpu", "mem", "io"):
        h = h.with_columns(
            pl.min_horizontal(f"psi_{res}_full", f"psi_{res}_some").alias(f"psi_{res}_full")
        )
    up = w.start_epoch - w.boot_epoch
    cg_cpu_some = (pl.col("psi_cpu_some") * 0.6 + pl.col("throttle") * 0.6).clip(0.0, 1.0)
    cg_cpu_full = (pl.col("psi_cpu_some") * 0.4 + pl.col("throttle") * 0.5).clip(0.0, 1.0)
    h = h.with_columns(
        *_psi_avgs(pl.col("psi_cpu_some"), spec.interval, "cpu_some", up),
        *_psi_avgs(pl.col("psi_cpu_full"), spec.interval, "cpu_full", up),
        *_psi_avgs(pl.col("psi_mem_some"), spec.interval, "mem_some", up),
        *_psi_avgs(pl.col("psi_mem_full"), spec.interval, "mem_full", up),
        *_psi_avgs(pl.col("psi_io_some"), spec.interval, "io_some", up),
        *_psi_avgs(pl.col("psi_io_full"), spec.interval, "io_full", up),
        *_psi_avgs(cg_cpu_some, spec.interval, "cg_cpu_some", up),
        *_psi_avgs(cg_cpu_full, spec.interval, "cg_cpu_full", up),
        *_psi_avgs(pl.col("psi_mem_some") * 0.95, spec.interval, "cg_mem_some", up),
        *_psi_avgs(pl.col("psi_mem_full") * 0.9, spec.interval, "cg_mem_full", up),
        *_psi_avgs(pl.col("psi_io_some") * 0.9, spec.interval, "cg_io_some", up),
        *_psi_avgs(pl.col("psi_io_full") * 0.8, spec.interval, "cg_io_full", up),
        *_psi_avgs(
            pl.lit(0.0005) + w.noise("psi_irq", 0.0003).abs(), spec.interval, "irq_full", up
        ),
    )
    w.host = h.with_columns(
        (pl.col(c).cast(pl.Float64).fill_nan(0.0).fill_null(0.0))
        for c in h.columns
        if c.endswith(("_avg10", "_avg60", "_avg300", "_total"))
    )
