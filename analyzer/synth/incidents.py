"""Incident kinds: how each one changes the drivers of a `World` inside its window, and
what a detector should report (``expected_key``).

Every kind has a default duration and parameters (overridable per incident), a real
effect and a *negative control* (``Incident.control``): the same disturbance kept
clearly below the detectors' thresholds (docs/detectors.md) — a 30 % GPU dip instead of
95 % → < 10 %, a 2× write burst instead of 20×, a 60 % IRQ CPU instead of 98 %.
`apply` returns the ground-truth entry of the incident (times in UTC, ``events`` for
kinds made of several bursts). Thresholds are relative to the capture's own baseline,
so incidents should cover well under half of a capture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from analyzer.synth.common import utc
from analyzer.synth.devices import disk_names, gpu_ids, procs
from analyzer.synth.model import GIB_KB, Event, World
from analyzer.synth.spec import Incident, SpecError
from analyzer.synth.w_dmesg import hung_task_lines, oom_lines, xid_lines
from analyzer.synth.w_samplers import CGROUP

GAP_DEFAULT = "vmstat,mpstat,sar,iostat"


@dataclass(frozen=True)
class Kind:
    expected_key: str
    dur_s: float
    params: dict[str, object]
    apply: Callable[[World, Incident, dict], dict]
    may_also: tuple[str, ...] = ()
    doc: str = ""


def _set(w: World, mask: pl.Expr, **cols: object) -> None:
    """Inside ``mask`` overwrite driver columns (values: numbers, Series or exprs)."""
    exprs = []
    for name, value in cols.items():
        v = value if isinstance(value, pl.Expr) else pl.lit(value)
        exprs.append(
            pl.when(mask).then(v).otherwise(pl.col(name)).cast(w.host.schema[name]).alias(name)
        )
    w.host = w.host.with_columns(exprs)


def _progress(w: World, inc: Incident) -> pl.Expr:
    return ((pl.col("epoch") - (w.t0 + inc.start_s)) / inc.dur_s).clip(0.0, 1.0)


def _jit(w: World, inc: Incident, name: str, sd: float = 0.08) -> pl.Series:
    return 1 + w.noise(f"{inc.kind}/{name}/{inc.start_s}", sd).clip(-2.5 * sd, 2.5 * sd)


def checkpoint_stall(w: World, inc: Incident, p: dict) -> dict:
    every, burst = float(p["every_s"]), float(p["burst_s"])
    rate = float(p["size_gb"]) * GIB_KB / burst
    events = []
    t = inc.start_s + 2
    while t + burst <= inc.end_s:
        events.append((t, t + burst))
        t += every
    jit = _jit(w, inc, "rate", 0.06)
    for b0, b1 in events:
        m = w.window(b0, b1)
        phase = ((pl.col("epoch") - (w.t0 + b0)) / burst).clip(0.0, 1.0)
        if inc.control:
            _set(w, m, wr_kb_s=2600.0 * jit, train=pl.col("train") * 0.7)
            continue
        _set(
            w,
            m,
            wr_kb_s=rate * jit,
            train=0.02 + 0.02 * (jit - 1).abs(),
            lvl_trainer=34.0 * jit,
            psi_io_some=0.55 * jit,
            psi_io_full=0.45 * jit,
            iowait=1.5,
            blocked=1.0 + pl.col("blocked"),
            dirty_add_kb=(0.35 * rate * burst) * (1 - (2 * phase - 1).abs()),
            wb_kb=0.08 * rate * burst * jit,
        )
    return {"events": [{"start_utc": utc(w.t0 + a), "end_utc": utc(w.t0 + b)} for a, b in events]}


def cpu_throttle(w: World, inc: Incident, p: dict) -> dict:
    quota = float(p["quota_cores"])
    w.host = w.host.with_columns(quota=pl.lit(quota))
    w.cg_limits["cpu.max"] = f"{int(quota * 100000)} 100000"
    m = w.window(inc.start_s, inc.end_s)
    jit = _jit(w, inc, "thr", 0.1)
    if inc.control:
        _set(w, m, throttle=0.04 * jit, train=pl.col("train") * 0.97)
    else:
        _set(
            w,
            m,
            throttle=(float(p["frac"]) * jit).clip(0.0, 1.0),
            train=0.55 * jit,
            lvl_trainer=62.0 * jit,
            lvl_loader=30.0 * jit,
            psi_cpu_some=pl.col("psi_cpu_some") + 0.08,
        )
    return {"quota_cores": quota}


def _job_kb(w: World) -> float:
    return sum(0.16 if pr.role == "trainer" else 0.02 for pr in procs(w)) * w.mem_total_kb


def oom_kill(w: World, inc: Incident, p: dict) -> dict:
    grow = float(p["grow_frac"]) * w.mem_total_kb
    limit_kb = int(_job_kb(w) + 0.25 * 0.42 * w.mem_total_kb + grow)
    if not inc.control:
        w.cg_limits["memory.max"] = str(limit_kb * 1024)
    m = w.window(inc.start_s, inc.end_s)
    prog = _progress(w, inc)
    late = ((prog - 0.6) / 0.4).clip(0.0, 1.0)
    jit = _jit(w, inc, "mem")
    if inc.control:
        _set(
            w,
            m,
            anon_add_kb=0.6 * grow * prog**1.5,
            psi_mem_some=0.03 * late * jit,
            psi_mem_full=0.008 * late,
            scan_kswapd=3000.0 * late * jit,
        )
        return {"limit_kb": None}
    _set(
        w,
        m,
        anon_add_kb=grow * prog**1.5,
        psi_mem_some=0.38 * late * jit,
        psi_mem_full=0.16 * late * jit,
        scan_direct=30_000.0 * late * jit,
        scan_kswapd=60_000.0 * late * jit,
        allocstall=220.0 * late * jit,
        refault=4000.0 * late * jit,
        train=pl.col("train") * (1 - 0.2 * late),
    )
    victim = procs(w)[-1]
    t_kill = w.t0 + inc.end_s - 0.35
    w.dead_pids[victim.pid] = t_kill
    kill_row = (pl.col("epoch") > t_kill) & (pl.col("epoch") - w.interval <= t_kill)
    _set(w, kill_row, oom_kills=1)
    vm_pages = int((0.05 * w.mem_total_kb + 9_000_000 + grow) / 4)
    tasks = [
        (
            pr.pid,
            1000,
            int((0.5 * w.mem_total_kb + 40_000_000) / 4) if pr.role == "trainer" else vm_pages // 3,
            int((0.16 if pr.role == "trainer" else 0.02) * w.mem_total_kb / 4),
        )
        for pr in procs(w)
    ]
    tasks[-1] = (victim.pid, 1000, vm_pages, int((0.02 * w.mem_total_kb + grow) / 4))
    w.events.append(
        Event(
            t_kill, oom_lines(victim.pid, victim.comm, "/train.slice", limit_kb, tasks, victim.cpu)
        )
    )
    return {
        "victim_pid": victim.pid,
        "victim_comm": victim.comm,
        "cgroup": CGROUP,
        "limit_kb": limit_kb,
        "kill_utc": utc(t_kill),
    }


def memory_pressure(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    ramp = (_progress(w, inc) / 0.25).clip(0.0, 1.0)
    jit = _jit(w, inc, "mem", 0.12)
    if inc.control:
        _set(
            w,
            m,
            anon_add_kb=0.15 * w.mem_total_kb * ramp,
            psi_mem_some=0.04 * ramp * jit,
            psi_mem_full=0.01 * ramp,
            scan_kswapd=4000.0 * ramp * jit,
            scan_direct=300.0 * ramp * jit,
        )
    else:
        _set(
            w,
            m,
            anon_add_kb=0.4 * w.mem_total_kb * ramp,
            psi_mem_some=float(p["psi_some"]) * ramp * jit,
            psi_mem_full=float(p["psi_some"]) * 0.4 * ramp * jit,
            scan_direct=float(p["direct_per_s"]) * ramp * jit,
            scan_kswapd=80_000.0 * ramp * jit,
            allocstall=300.0 * ramp * jit,
            refault=6000.0 * ramp * jit,
            train=pl.col("train") * (1 - 0.3 * ramp),
        )
    return {}


def cpu_contention(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    c = w.spec.cpus
    jit = _jit(w, inc, "cpu", 0.06)
    if inc.control:
        _set(
            w,
            m,
            lvl_other=60.0 * jit,
            lvl_loader=75.0 * jit,
            runq_extra=0.35 * c * jit,
            psi_cpu_some=0.25 * jit,
        )
    else:
        _set(
            w,
            m,
            lvl_trainer=98.0,
            lvl_loader=98.5,
            lvl_other=(97.0 * jit).clip(0.0, 99.5),
            runq_extra=(float(p["runq_per_cpu"]) - 1) * c * jit,
            psi_cpu_some=(0.78 * jit).clip(0.0, 1.0),
            psi_cpu_full=0.12 * jit,
            train=0.5 * jit,
        )
    return {}


def io_saturation(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    disk = int(p["disk"])
    jit = _jit(w, inc, "io", 0.1)
    if inc.control:
        _set(w, m, rd_kb_s=pl.col("rd_kb_s") + 1_500_000.0 * jit, psi_io_some=0.06 * jit)
    else:
        _set(
            w,
            m,
            io_sat=1.0,
            sat_disk=disk,
            psi_io_some=0.62 * jit,
            psi_io_full=0.41 * jit,
            blocked=6.0 * jit,
            iowait=12.0 * jit,
            train=0.45 * jit,
            lvl_loader=22.0 * jit,
        )
    return {"disk": disk_names(w.spec.disks)[disk][0]}


def gpu_starvation(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    cpu = int(p["cpu"])
    jit = _jit(w, inc, "gpu", 0.05)
    if inc.control:
        _set(w, m, train=0.7 * jit, peg_cpu=cpu, peg_pct=70.0 * jit)
    else:
        _set(
            w,
            m,
            train=0.05 * jit,
            peg_cpu=cpu,
            peg_pct=(99.6 * jit).clip(0.0, 100.0),
            lvl_loader=4.0 * jit,
            lvl_trainer=14.0 * jit,
            lvl_other=3.0 * jit,
            rd_kb_s=pl.col("rd_kb_s") * 0.1,
        )
    return {
        "cause": "cpu_data_loader",
        "pegged_cpu": cpu,
        "loader_pid": procs(w)[1 % len(procs(w))].pid,
    }


def gpu_throttle(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    jit = _jit(w, inc, "clk", 0.03)
    if inc.control:
        _set(w, m, gpu_clk=0.92 * jit, gpu_pviol=3.0, gpu_sel=int(p["gpu"]))
    else:
        _set(
            w,
            m,
            gpu_clk=float(p["clock_frac"]) * jit,
            gpu_pviol=(90.0 * jit).clip(0.0, 100.0),
            gpu_capped=1.0,
            gpu_sel=int(p["gpu"]),
            train=0.7 * jit,
        )
    return {}


def gpu_xid(w: World, inc: Incident, p: dict) -> dict:
    g = int(p["gpu"])
    if w.spec.gpus == 0:
        raise SpecError("gpu_xid needs --gpus 1 or more")
    bus, uuid = gpu_ids(w, min(g, w.spec.gpus - 1))
    t = w.t0 + inc.start_s + 0.4
    if inc.control:
        w.events.append(
            Event(
                t,
                [
                    "nvidia-modeset: WARNING: GPU:0: Lost display notification (0:0x00000000); continuing."
                ],
            )
        )
        return {}
    code = int(p["code"])
    w.events.append(Event(t, xid_lines(code, bus, uuid, 4242, "python3")))
    _set(w, w.window(inc.start_s, inc.end_s), train=0.0)
    return {"code": code, "gpu_bus_id": bus}


def hung_task(w: World, inc: Incident, p: dict) -> dict:
    if not inc.control and inc.dur_s < 121:
        raise SpecError(
            "hung_task needs a duration of at least 121 s (kernel.hung_task_timeout_secs is 120)"
        )
    m = w.window(inc.start_s, inc.end_s)
    _set(w, m, blocked=pl.col("blocked") + 1, psi_io_some=pl.col("psi_io_some") + 0.02)
    if not inc.control:
        t = w.t0 + inc.end_s - 0.2
        w.events.append(
            Event(
                t,
                hung_task_lines(str(p["comm"]), int(p["pid"]), int(p["pid"]) - 21, int(inc.dur_s)),
            )
        )
    return {"comm": p["comm"], "pid": p["pid"]}


def irq_hotspot(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    jit = _jit(w, inc, "irq", 0.02)
    if inc.control:  # below the hotspot level (a quarter of the CPU, irq_hotspot.py)
        _set(w, m, hot_cpu=int(p["cpu"]), hot_irq=3.0 * jit, hot_soft=15.0 * jit)
    else:
        _set(
            w,
            m,
            hot_cpu=int(p["cpu"]),
            hot_irq=13.0 * jit,
            hot_soft=(85.0 * jit).clip(0.0, 86.5),
            train=0.9 * jit,
        )
    return {}


def net_errors(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    jit = _jit(w, inc, "net", 0.15)
    scale = 0.006 if inc.control else 1.0
    _set(
        w,
        m,
        net_nic=int(p["nic"]),
        net_drop=float(p["drops_per_s"]) * scale * jit,
        net_err=float(p["errors_per_s"]) * scale * jit,
    )
    if not inc.control:
        _set(w, m, train=pl.col("train") * 0.9)
    return {}


def swap_activity(w: World, inc: Incident, p: dict) -> dict:
    m = w.window(inc.start_s, inc.end_s)
    jit = _jit(w, inc, "swap", 0.15)
    scale = 0.01 if inc.control else 1.0
    _set(w, m, si_kb_s=float(p["si_kb_s"]) * scale * jit, so_kb_s=float(p["so_kb_s"]) * scale * jit)
    if not inc.control:
        _set(
            w,
            m,
            psi_mem_some=0.05 * jit,
            psi_mem_full=0.015 * jit,
            anon_add_kb=0.3 * w.mem_total_kb,
            train=pl.col("train") * 0.85,
        )
    return {}


def sampling_gap(w: World, inc: Incident, p: dict) -> dict:
    names = [c.strip() for c in str(p["collectors"]).split(",") if c.strip()]
    end = inc.end_s
    if inc.control:
        names, end = names[:1], inc.start_s + min(inc.dur_s, 1.5 * w.interval)
    for c in names:
        w.gaps.setdefault(c, []).append((inc.start_s, end))
    return {"collectors": names}


KINDS: dict[str, Kind] = {
    "checkpoint_stall": Kind(
        "CHECKPOINT_STALL",
        240,
        {"every_s": 60, "burst_s": 8, "size_gb": 24},
        checkpoint_stall,
        ("GPU_STARVATION", "IO_SATURATION"),
        "periodic checkpoint write bursts; GPU idle during each",
    ),
    "cpu_throttle": Kind(
        "CPU_THROTTLE",
        90,
        {"quota_cores": 0, "frac": 0.6},
        cpu_throttle,
        ("GPU_STARVATION",),
        "the job cgroup hits its CPU quota (cpu.max)",
    ),
    "oom_kill": Kind(
        "OOM_KILL",
        90,
        {"grow_frac": 0.3},
        oom_kill,
        ("MEMORY_PRESSURE",),
        "a worker's memory ramps to the cgroup limit; the OOM killer kills it",
    ),
    "memory_pressure": Kind(
        "MEMORY_PRESSURE",
        90,
        {"psi_some": 0.3, "direct_per_s": 25_000},
        memory_pressure,
        ("GPU_STARVATION",),
        "reclaim stalls: memory PSI, direct reclaim, refaults",
    ),
    "cpu_contention": Kind(
        "CPU_CONTENTION",
        90,
        {"runq_per_cpu": 2.5},
        cpu_contention,
        ("GPU_STARVATION",),
        "more runnable tasks than CPUs; CPU PSI, run-queue latency",
    ),
    "io_saturation": Kind(
        "IO_SATURATION",
        60,
        {"disk": 0},
        io_saturation,
        ("GPU_STARVATION",),
        "one disk at 100 % with deep queues and slow I/O",
    ),
    "gpu_starvation": Kind(
        "GPU_STARVATION",
        60,
        {"cpu": 0},
        gpu_starvation,
        ("CPU_CONTENTION",),
        "a single-threaded data loader pins one core; GPUs idle",
    ),
    "gpu_throttle": Kind(
        "GPU_THROTTLE",
        90,
        {"gpu": -1, "clock_frac": 0.6},
        gpu_throttle,
        (),
        "GPU power cap: SM clock drops, power at cap, pviol",
    ),
    "gpu_xid": Kind(
        "GPU_XID",
        60,
        {"code": 13, "gpu": 0},
        gpu_xid,
        ("GPU_STARVATION",),
        "NVRM Xid error; the job dies and the GPUs go idle",
    ),
    "hung_task": Kind(
        "HUNG_TASK",
        130,
        {"comm": "tar", "pid": 7311},
        hung_task,
        (),
        "a task blocked in D state past hung_task_timeout_secs",
    ),
    "irq_hotspot": Kind(
        "IRQ_HOTSPOT",
        60,
        {"cpu": 0},
        irq_hotspot,
        (),
        "one CPU saturated by hard+soft IRQs (NIC receive)",
    ),
    "net_errors": Kind(
        "NET_ERRORS",
        60,
        {"nic": 0, "drops_per_s": 600, "errors_per_s": 40},
        net_errors,
        (),
        "receive drops and errors on one NIC",
    ),
    "swap_activity": Kind(
        "SWAP_ACTIVITY",
        60,
        {"si_kb_s": 20_000, "so_kb_s": 30_000},
        swap_activity,
        ("MEMORY_PRESSURE",),
        "swap-in/out",
    ),
    "sampling_gap": Kind(
        "SAMPLING_GAP",
        30,
        {"collectors": GAP_DEFAULT},
        sampling_gap,
        (),
        "collectors skip samples for a while",
    ),
}


def resolve(w: World, inc: Incident) -> dict:
    """Defaults filled in, checked against the host (disk, CPU, GPU, NIC indices)."""
    if inc.kind not in KINDS:
        raise SpecError(f"unknown incident kind {inc.kind!r}; kinds: {', '.join(KINDS)}")
    kind = KINDS[inc.kind]
    p = dict(kind.params) | inc.params
    s = w.spec
    if inc.kind == "cpu_throttle" and not float(p["quota_cores"]):
        p["quota_cores"] = max(1, round(float(w.host["busy_cores"].median() or 1) * 0.8))  # type: ignore[arg-type]
    if inc.kind in ("io_saturation",) and "disk" not in inc.params:
        p["disk"] = min(1, s.disks - 1)
    if inc.kind == "gpu_starvation" and "cpu" not in inc.params:
        p["cpu"] = w.roles.index("loader") if "loader" in w.roles else 0
    bounds = {"disk": s.disks, "cpu": s.cpus, "nic": max(s.nics, 1), "gpu": max(s.gpus, 1)}
    for key, n in bounds.items():
        if key in p and not (-1 <= int(p[key]) < n):  # type: ignore[call-overload]
            raise SpecError(f"{inc.kind}: {key}={p[key]} but the host has {n}")
    if inc.kind in ("net_errors",) and s.nics == 0:
        raise SpecError("net_errors needs --nics 1 or more")
    if inc.kind in ("gpu_throttle", "gpu_starvation") and s.gpus == 0:
        raise SpecError(f"{inc.kind} needs --gpus 1 or more")
    return p


def apply(w: World, inc: Incident) -> dict:
    """Change the world for one incident; return its ground-truth entry."""
    p = resolve(w, inc)
    kind = KINDS[inc.kind]
    extra = kind.apply(w, inc, p)
    entry = {
        "kind": inc.kind,
        "start_utc": utc(w.t0 + inc.start_s),
        "end_utc": utc(w.t0 + inc.end_s),
        "start_s": inc.start_s,
        "dur_s": inc.dur_s,
        "params": p,
        "expected_key": None if inc.control else kind.expected_key,
        "may_also": [] if inc.control else list(kind.may_also),
    }
    if inc.control:
        entry["must_not_key"] = kind.expected_key
    entry.update(extra)
    return entry
