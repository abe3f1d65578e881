"""The capture's shell samplers: ``<epoch_s> <path> <raw line>`` per line of every file
read each interval (bundle-format.md, "Sampler line format").

`write_lines` is the shared engine: given per-sample value columns for a fixed list of
(path, line prefix) items it writes them sample-major, every line of one read sharing
one ``epoch_s`` with nanoseconds. This module writes ``psi`` (``/proc/pressure/*`` and
the job cgroup's ``*.pressure``) and ``cgroup`` (``cpu.stat``, ``memory.current``,
``memory.swap.current``, ``memory.events``, ``memory.stat``, ``io.stat``,
``pids.current`` of the job cgroup); `analyzer.synth.w_mem` writes meminfo and
/proc/vmstat with the same engine.

Sample::

    1795960800.071234567 /proc/pressure/cpu some avg10=2.01 avg60=1.98 avg300=1.97 total=31544128
    1795960800.071234567 /sys/fs/cgroup/train.slice/cpu.stat nr_throttled 0
"""

from __future__ import annotations

import polars as pl

from analyzer.synth import _fmt
from analyzer.synth.common import Outcome, Sink
from analyzer.synth.devices import disk_names, procs
from analyzer.synth.model import World

CGROUP = "/sys/fs/cgroup/train.slice"
CHUNK = 20_000
MEMSTAT_KEYS = [
    "anon",
    "file",
    "kernel",
    "kernel_stack",
    "pagetables",
    "sock",
    "shmem",
    "zswap",
    "file_mapped",
    "file_dirty",
    "file_writeback",
    "swapcached",
    "anon_thp",
    "inactive_anon",
    "active_anon",
    "inactive_file",
    "active_file",
    "unevictable",
    "slab_reclaimable",
    "slab_unreclaimable",
    "workingset_refault_anon",
    "workingset_refault_file",
    "pgscan",
    "pgsteal",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgfault",
    "pgmajfault",
]


def sample_epochs(w: World, collector: str) -> pl.DataFrame:
    """``k`` and the printed ``epoch_s`` (9 decimals) of each sampler read (k = 0..N)."""
    frac_ns = int((w.start_epoch - w.t0) * 1e9) + 40_000_000
    jit = (_fmt.uniform(w.host.height, w.spec.seed, "sampler-jitter") * 3e6).cast(pl.Int64)
    ns = (w.host["epoch"] * 1_000_000_000 + frac_ns + jit).alias("ns")
    f = pl.DataFrame({"k": w.host["k"], "ns": ns})
    for gs, ge in w.gaps.get(collector, []):
        lo, hi = (w.t0 + gs) * 1_000_000_000, (w.t0 + ge) * 1_000_000_000
        f = f.filter(~((pl.col("ns") > lo) & (pl.col("ns") < hi)))
    return f.with_columns(
        stamp=pl.concat_str(
            [
                (pl.col("ns") // 1_000_000_000).cast(pl.String),
                pl.lit("."),
                (pl.col("ns") % 1_000_000_000).cast(pl.String).str.zfill(9),
            ]
        )
    )


def write_lines(sink: Sink, stamps: pl.DataFrame, items: list[tuple[str, pl.Series]]) -> None:
    """Write, for every sample in ``stamps`` (columns k, stamp), one line per item:
    ``<stamp> <prefix><value>``; each item's Series has one value per k (0..N)."""
    m = len(items)
    for c0 in range(0, stamps.height, CHUNK):
        st = stamps.slice(c0, CHUNK)
        ks = st["k"]
        cols = [
            (prefix + v.gather(ks)) if isinstance(v, pl.Series) else None for prefix, v in items
        ]
        src = pl.concat(cols)  # type: ignore[arg-type]
        t = st.height
        r = pl.int_range(0, t * m, eager=True)
        body = src.gather((r % m) * t + r // m)
        lines = _fmt.join([st["stamp"].gather(r // m), body], " ")
        sink.write(_fmt.to_bytes(lines))


def _psi_line(h: pl.DataFrame, name: str) -> pl.Series:
    parts: list[pl.Series | str] = []
    for i, win in enumerate((10, 60, 300)):
        parts += [("" if i == 0 else " ") + f"avg{win}=", _fmt.num(h[f"{name}_avg{win}"], 0)]
    parts += [" total=", _fmt.num(h[f"{name}_total"], 0, 0)]
    return _fmt.join(parts, "")


def write_psi(w: World, sink: Sink) -> Outcome:
    h = w.host
    items = []
    for res in ("cpu", "memory", "io"):
        short = "mem" if res == "memory" else res
        items += [
            (f"/proc/pressure/{res} some ", _psi_line(h, f"{short}_some")),
            (f"/proc/pressure/{res} full ", _psi_line(h, f"{short}_full")),
        ]
    items.append(("/proc/pressure/irq full ", _psi_line(h, "irq_full")))
    for res in ("cpu", "memory", "io"):
        short = "mem" if res == "memory" else res
        items += [
            (f"{CGROUP}/{res}.pressure some ", _psi_line(h, f"cg_{short}_some")),
            (f"{CGROUP}/{res}.pressure full ", _psi_line(h, f"cg_{short}_full")),
        ]
    write_lines(sink, sample_epochs(w, "psi"), items)
    return Outcome(rc=143, averages=False)


def cgroup_frame(w: World) -> pl.DataFrame:
    """Cumulative counters and gauges of the job cgroup per sample (k = 0..N)."""
    iv = float(w.interval)
    job = (
        w.procs.filter(pl.col("alive"))
        .group_by("k")
        .agg(  # type: ignore[union-attr]
            rss=pl.col("rss").sum(),
            cpu=(pl.col("usr") + pl.col("sys")).sum(),
            wr=pl.col("kb_wr").sum(),
            rd=pl.col("kb_rd").sum(),
        )
    )
    h = (
        w.host.join(job, on="k", how="left")
        .sort("k")
        .with_columns(pl.col("rss", "cpu", "wr", "rd").fill_null(0.0))
    )
    quota = pl.col("quota") > 0
    periods = pl.when(quota).then(10.0 * iv).otherwise(0.0)
    h = h.with_columns(
        usage=(pl.col("cpu") / 100 * 1e6 * iv).cum_sum() + 91_234_567_890,
        periods=periods.cum_sum().round(0),
        throttled=(periods * pl.col("throttle")).round(0).cum_sum(),
        thr_usec=(pl.col("throttle") * 380_000.0 * iv).round(0).cum_sum(),
        mem_cur=(pl.col("rss") + 0.25 * pl.col("cache_kb") + 0.25 * pl.col("dirty_kb")) * 1024,
        wbytes=(pl.col("wr") * 1024 * iv).cum_sum() + 7_340_032_000,
        rbytes=(pl.col("rd") * 1024 * iv).cum_sum() + 51_539_607_552,
        cg_scan_direct=(pl.col("scan_direct") * 0.9 * iv).cum_sum(),
        cg_scan_kswapd=(pl.col("scan_kswapd") * 0.5 * iv).cum_sum(),
        cg_pgfault=(pl.col("pgfault_s") * 0.7 * iv).cum_sum() + 48_000_000,
        cg_refault=(pl.col("refault") * 0.8 * iv).cum_sum() + 1200,
        oom_kill=pl.col("oom_kills").cum_sum(),
        ev_max=(pl.col("psi_mem_full") * 40 * iv).round(0).cum_sum(),
        ev_high=(pl.col("psi_mem_some") * 80 * iv).round(0).cum_sum(),
    )
    return h.with_columns(
        cg_steal_direct=pl.col("cg_scan_direct") * 0.81,
        cg_steal_kswapd=pl.col("cg_scan_kswapd") * 0.93,
    )


def write_cgroup(w: World, sink: Sink) -> Outcome:
    h = cgroup_frame(w)
    n = h.height
    const = lambda v: pl.Series([str(v)] * n)  # noqa: E731
    num = lambda s: _fmt.num(s, 0, 0)  # noqa: E731
    cs = f"{CGROUP}/cpu.stat "
    items: list[tuple[str, pl.Series]] = [
        (cs + "usage_usec ", num(h["usage"])),
        (cs + "user_usec ", num(h["usage"] * 0.89)),
        (cs + "system_usec ", num(h["usage"] * 0.11)),
        (cs + "nice_usec ", const(0)),
        (cs + "nr_periods ", num(h["periods"])),
        (cs + "nr_throttled ", num(h["throttled"])),
        (cs + "throttled_usec ", num(h["thr_usec"])),
        (cs + "nr_bursts ", const(0)),
        (cs + "burst_usec ", const(0)),
        (f"{CGROUP}/memory.current ", num(h["mem_cur"])),
        (f"{CGROUP}/memory.swap.current ", num(h["swap_used_kb"] * 1024 * 0.8)),
    ]
    ev = f"{CGROUP}/memory.events "
    items += [
        (ev + "low ", const(0)),
        (ev + "high ", num(h["ev_high"])),
        (ev + "max ", num(h["ev_max"])),
        (ev + "oom ", num(h["oom_kill"])),
        (ev + "oom_kill ", num(h["oom_kill"])),
        (ev + "oom_group_kill ", const(0)),
    ]
    anon = h["rss"] * 1024
    file_b = h["cache_kb"] * 0.25 * 1024
    stat = {
        "anon": anon,
        "file": file_b,
        "kernel": h["slab_kb"] * 0.05 * 1024 + 52_000_000,
        "kernel_stack": pl.Series([1_769_472.0] * n),
        "pagetables": anon / 480,
        "sock": pl.Series([0.0] * n),
        "shmem": h["shmem_kb"] * 0.5 * 1024,
        "zswap": pl.Series([0.0] * n),
        "file_mapped": file_b * 0.04,
        "file_dirty": h["dirty_kb"] * 0.25 * 1024,
        "file_writeback": h["wb_kb"] * 0.9 * 1024,
        "swapcached": pl.Series([0.0] * n),
        "anon_thp": anon * 0.6,
        "inactive_anon": anon * 0.3,
        "active_anon": anon * 0.7,
        "inactive_file": file_b * 0.6,
        "active_file": file_b * 0.4,
        "unevictable": pl.Series([0.0] * n),
        "slab_reclaimable": h["slab_kb"] * 0.03 * 1024,
        "slab_unreclaimable": h["slab_kb"] * 0.01 * 1024,
        "workingset_refault_anon": pl.Series([0.0] * n),
        "workingset_refault_file": h["cg_refault"],
        "pgscan": h["cg_scan_direct"] + h["cg_scan_kswapd"],
        "pgsteal": h["cg_steal_direct"] + h["cg_steal_kswapd"],
        "pgscan_kswapd": h["cg_scan_kswapd"],
        "pgscan_direct": h["cg_scan_direct"],
        "pgsteal_kswapd": h["cg_steal_kswapd"],
        "pgsteal_direct": h["cg_steal_direct"],
        "pgfault": h["cg_pgfault"],
        "pgmajfault": pl.Series([412.0] * n),
    }
    items += [(f"{CGROUP}/memory.stat {k} ", num(stat[k].floor())) for k in MEMSTAT_KEYS]
    data = disk_names(w.spec.disks)[min(1, w.spec.disks - 1)]
    dev = f"{data[1]}:{data[2]}"
    io = _fmt.join(
        [
            f"{dev} rbytes=",
            num(h["rbytes"]),
            " wbytes=",
            num(h["wbytes"]),
            " rios=",
            num(h["rbytes"] / 131072),
            " wios=",
            num(h["wbytes"] / 65536),
            " dbytes=0 dios=0",
        ],
        "",
    )
    items += [
        (f"{CGROUP}/io.stat ", io),
        (f"{CGROUP}/pids.current ", const(9 + 30 * len(procs(w)))),
    ]
    write_lines(sink, sample_epochs(w, "cgroup"), items)
    return Outcome(rc=143, averages=False)
