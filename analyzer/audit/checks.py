"""The configuration audit's checks: one function per rule of :mod:`analyzer.audit.rules`.

Each takes the snapshot :class:`analyzer.audit.facts.Facts` and the host role and returns
``(observed, status, detail)`` rows; status is ok | deviation | advice | unknown.
"""

from __future__ import annotations

from collections.abc import Callable

from analyzer.audit.facts import UNLIMITED, Facts, cpu_count

Check = tuple[str, str, str]
GIB = 1 << 30


def _missing(what: str) -> list[Check]:
    return [("not captured", "unknown", f"the snapshot has no {what}")]


def swappiness(f: Facts, role: str) -> list[Check]:
    v = f.number("vm.swappiness")
    if v is None:
        return _missing("vm.swappiness")
    swap_total = f.swap_total_kb
    if v <= 10:
        return [(f"{v:.0f}", "ok", "")]
    if swap_total == 0:
        return [(f"{v:.0f}", "ok", "no swap configured, so the value does not matter")]
    return [
        (
            f"{v:.0f}",
            "deviation",
            f"{v:.0f} lets the kernel swap process memory out while page cache could be dropped",
        )
    ]


def thp_enabled(f: Facts, role: str) -> list[Check]:
    v = f.get("thp.enabled")
    if v is None:
        return _missing("transparent_hugepage/enabled")
    if role == "inference" and v == "always":
        return [
            (
                v,
                "deviation",
                "'always' makes khugepaged and fault-time compaction add latency spikes to request handling",
            )
        ]
    if role == "training" and v == "never":
        return [
            (v, "advice", "'never' denies huge pages even to buffers that ask for them (madvise)")
        ]
    return [(v, "ok", "")]


def thp_defrag(f: Facts, role: str) -> list[Check]:
    v = f.get("thp.defrag")
    if v is None:
        return _missing("transparent_hugepage/defrag")
    if v == "always":
        return [
            (
                v,
                "deviation",
                "'always' compacts memory synchronously inside page faults: multi-millisecond stalls",
            )
        ]
    return [(v, "ok", "")]


def overcommit(f: Facts, role: str) -> list[Check]:
    v = f.number("vm.overcommit_memory")
    if v is None:
        return _missing("vm.overcommit_memory")
    if v == 2:
        return [
            (
                "2",
                "deviation",
                "strict accounting refuses the large virtual reservations CUDA and forked workers make",
            )
        ]
    return [(f"{v:.0f}", "ok", "")]


def _dirty(f: Facts, name: str) -> tuple[float | None, str]:
    b, r = f.number(f"vm.{name}_bytes"), f.number(f"vm.{name}_ratio")
    if b:
        return b, f"{b / GIB:.2f} GiB ({name}_bytes)"
    if r is not None and f.mem_total_kb:
        eff = r / 100 * f.mem_total_kb * 1024
        return (
            eff,
            f"{r:.0f}% ≈ up to {eff / GIB:.1f} GiB of {f.mem_total_kb / 1048576:.0f} GiB RAM",
        )
    if r is not None:
        return None, f"{r:.0f}% (RAM size unknown)"
    return None, ""


def dirty(f: Facts, role: str) -> list[Check]:
    bg, bg_text = _dirty(f, "dirty_background")
    hard, hard_text = _dirty(f, "dirty")
    if not bg_text and not hard_text:
        return _missing("vm.dirty_* sysctls")
    observed = f"background {bg_text or '?'}; limit {hard_text or '?'}"
    if bg is None or hard is None:
        return [
            (observed, "unknown", "RAM size unknown: the thresholds in bytes cannot be computed")
        ]
    if bg > 1 * GIB or hard > 4 * GIB:
        status = "deviation" if role == "training" else "advice"
        return [
            (
                observed,
                status,
                "gigabytes of dirty pages pile up and are then flushed in one burst; writers block at the limit",
            )
        ]
    return [(observed, "ok", "")]


def zero_sysctl(key: str, why: str) -> Callable[[Facts, str], list[Check]]:
    def check(f: Facts, role: str) -> list[Check]:
        v = f.number(key)
        if v is None:
            return _missing(key)
        nodes = f.number("numactl.nodes") or f.number("lscpu.numa_nodes")
        if v != 0 and nodes == 1:
            return [(f"{v:.0f}", "ok", "one NUMA node: no effect")]
        return [(f"{v:.0f}", "ok" if v == 0 else "deviation", "" if v == 0 else why)]

    return check


def numa_layout(f: Facts, role: str) -> list[Check]:
    nodes = f.number("numactl.nodes") or f.number("lscpu.numa_nodes")
    if nodes is None:
        return _missing("NUMA layout (numactl -H / lscpu)")
    gpus = {
        k.split(".")[0]: v
        for k, v in f.prefix("nvidia_topo.").items()
        if k.endswith(".numa_affinity")
    }
    text = f"{nodes:.0f} node{'s' if nodes != 1 else ''}"
    if gpus:
        text += "; " + ", ".join(f"{g} → node {n}" for g, n in sorted(gpus.items())[:8])
    if nodes > 1 and f.gpu_count:
        return [
            (
                text,
                "advice",
                "several NUMA nodes: a process bound to the wrong node copies every batch across the CPU interconnect",
            )
        ]
    return [(text, "ok", "")]


def governor(f: Facts, role: str) -> list[Check]:
    govs = {v for k, v in f.prefix("cpufreq.").items() if k.endswith(".scaling_governor")}
    if not govs:
        return [
            (
                "not captured",
                "unknown",
                "no cpufreq in the snapshot (a VM, or a driver without frequency control)",
            )
        ]
    if govs == {"performance"}:
        return [("performance", "ok", "")]
    return [
        (
            ", ".join(sorted(govs)),
            "deviation",
            "cores clock down between bursts and ramp up late: data loading and kernel launches slow down",
        )
    ]


def isolation(f: Facts, role: str) -> list[Check]:
    iso = f.get("cmdline.isolcpus") or f.get("cpu.isolated") or ""
    nohz = f.get("cmdline.nohz_full") or ""
    if (
        f.get("cmdline.isolcpus") is None
        and f.get("cpu.isolated") is None
        and not f.prefix("cmdline.")
    ):
        return _missing("kernel command line")
    observed = f"isolcpus={iso or 'none'}; nohz_full={nohz or 'none'}"
    if role == "training" and iso:
        return [
            (
                observed,
                "advice",
                "isolated CPUs get no load balancing: loader workers only run there when pinned explicitly",
            )
        ]
    if role == "inference" and not iso and not nohz:
        return [
            (
                observed,
                "advice",
                "serving threads share cores with housekeeping and IRQs: tail latency",
            )
        ]
    return [(observed, "ok", "")]


def cgroup_quota(f: Facts, role: str) -> list[Check]:
    rows = []
    for path, lim in sorted(f.cgroups.items()):
        q, p = lim.get("cpu.quota_us"), lim.get("cpu.period_us") or "100000"
        if q is None:
            continue
        if q == UNLIMITED:
            rows.append((f"{path}: no CPU quota", "ok", ""))
            continue
        try:
            cpus = int(q) / int(p)
        except (ValueError, ZeroDivisionError):
            rows.append((f"{path}: cpu quota {q}/{p}", "unknown", "unreadable value"))
            continue
        seen = f.throttled.get(path) or f.throttled.get("/" + path.lstrip("/"))
        detail = f"quota of {cpus:g} CPUs: CFS throttles the group for the rest of each {int(p) / 1000:g} ms period once it is used"
        if seen:
            detail += f"; throttled in up to {seen:.0f}% of periods during the capture"
        status = "deviation" if role == "training" or seen else "advice"
        rows.append((f"{path}: {cpus:g} CPUs ({q}/{p} µs)", status, detail))
    return rows[:20] or [
        (
            "no CPU quota in the snapshot",
            "ok" if f.cgroups else "unknown",
            "" if f.cgroups else "no cgroup limits in the snapshot",
        )
    ]


def cgroup_memory(f: Facts, role: str) -> list[Check]:
    rows = []
    for path, lim in sorted(f.cgroups.items()):
        mx, high = lim.get("memory.max_bytes"), lim.get("memory.high_bytes")
        if mx is None and high is None:
            continue
        text = f"{path}: max {_bytes(mx)}, high {_bytes(high)}"
        if high not in (None, UNLIMITED) and (
            mx == UNLIMITED or (mx and high.isdigit() and mx.isdigit() and int(high) < int(mx))
        ):
            rows.append(
                (
                    text,
                    "deviation",
                    "memory.high below memory.max throttles the group with reclaim long before any limit is hit",
                )
            )
        else:
            rows.append((text, "ok", ""))
    return rows[:20] or [("no memory limit in the snapshot", "ok" if f.cgroups else "unknown", "")]


def _bytes(v: str | None) -> str:
    if v is None:
        return "unset"
    if v == UNLIMITED or not v.isdigit():
        return v
    return f"{int(v) / GIB:.1f} GiB"


def _targets(f: Facts) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for key, value in f.kv.items():
        parts = key.split(".")
        if parts[0] == "sched" and len(parts) == 3 and parts[1].isdigit():
            out.setdefault(parts[1], {})[parts[2]] = value
        elif parts[0] == "nvidia_apps" and len(parts) == 3 and parts[1].isdigit():
            out.setdefault(parts[1], {})["gpu_" + parts[2]] = value
    for pid, info in out.items():
        info["name"] = f.get(f"process.{pid}.status.Name") or info.get("gpu_process_name") or "?"
    return out


def sched_policy(f: Facts, role: str) -> list[Check]:
    rows = []
    for pid, info in sorted(_targets(f).items(), key=lambda kv: int(kv[0])):
        pol = info.get("policy")
        who = f"pid {pid} {info['name']}"
        if pol is None:
            rows.append(
                (
                    f"{who}: not captured",
                    "unknown",
                    "not a --pid target of the capture: policy and affinity not recorded",
                )
            )
        elif pol in ("SCHED_IDLE", "SCHED_BATCH") and (pol == "SCHED_IDLE" or role == "inference"):
            rows.append(
                (
                    f"{who}: {pol}",
                    "deviation",
                    f"{pol} tasks lose every wake-up race to normal tasks",
                )
            )
        elif pol in ("SCHED_FIFO", "SCHED_RR"):
            rows.append(
                (
                    f"{who}: {pol} prio {info.get('priority', '?')}",
                    "advice",
                    "real-time threads can starve kernel threads (hung tasks, RCU stalls)",
                )
            )
        else:
            rows.append((f"{who}: {pol}", "ok", ""))
    return rows[:20] or _missing("scheduling snapshot of target processes")


def affinity(f: Facts, role: str) -> list[Check]:
    rows = []
    nodes = f.number("numactl.nodes") or f.number("lscpu.numa_nodes") or 1
    for pid, info in sorted(_targets(f).items(), key=lambda kv: int(kv[0])):
        aff = info.get("affinity_list") or f.get(f"process.{pid}.status.Cpus_allowed_list")
        if aff is None:
            continue
        n, who = cpu_count(aff), f"pid {pid} {info['name']}"
        if n is not None and n < 2 and role == "training":
            rows.append(
                (
                    f"{who}: CPUs {aff}",
                    "deviation",
                    "one CPU for the trainer and its loader workers",
                )
            )
        elif n is not None and f.cpus and n >= f.cpus and nodes > 1 and f.gpu_count:
            rows.append((f"{who}: all {n} CPUs", "advice", "not bound to the GPUs' NUMA node"))
        else:
            rows.append((f"{who}: CPUs {aff}", "ok", ""))
    return rows[:20] or _missing("CPU affinity of target processes")


def gpu_rows(f: Facts, test: Callable[[dict], Check | None], what: str) -> list[Check]:
    if not f.gpus:
        return _missing(f"nvidia-smi -q ({what})") if f.gpu_count else [("no GPU seen", "ok", "")]
    out = [c for g in f.gpus if (c := test(g)) is not None]
    return out or [(f"all {len(f.gpus)} GPUs", "ok", "")]


def persistence(f: Facts, role: str) -> list[Check]:
    return gpu_rows(f, lambda g: (f"GPU {g.get('gpu')}: {g.get('persistence_mode')}", "deviation", "the driver tears down and re-initialises the GPU between jobs")
                    if str(g.get("persistence_mode") or "").lower() == "disabled" else None, "persistence mode")  # fmt: skip


def pcie(f: Facts, role: str) -> list[Check]:
    def t(g: dict) -> Check | None:
        w, wm = g.get("pcie_width"), g.get("pcie_width_max")
        if isinstance(w, int) and isinstance(wm, int) and w < wm:
            return (
                f"GPU {g.get('gpu')}: x{w} of x{wm}",
                "deviation",
                "the link trained narrower than it can: host↔GPU copies are slower",
            )
        return None

    return gpu_rows(f, t, "PCIe link")


def power_limit(f: Facts, role: str) -> list[Check]:
    def t(g: dict) -> Check | None:
        e, m = g.get("enforced_power_limit_w"), g.get("max_power_limit_w")
        if isinstance(e, float) and isinstance(m, float) and e < 0.95 * m:
            return (
                f"GPU {g.get('gpu')}: {e:.0f} W of {m:.0f} W",
                "advice",
                "a lowered power limit caps clocks under load",
            )
        return None

    return gpu_rows(f, t, "power limit")


def pending(f: Facts, role: str) -> list[Check]:
    def t(g: dict) -> Check | None:
        if g.get("retired_pages_pending") or g.get("remapped_rows_pending"):
            return (
                f"GPU {g.get('gpu')}: memory repair pending",
                "deviation",
                "retired pages / row remapping take effect only after a GPU reset",
            )
        return None

    return gpu_rows(f, t, "memory repair state")


def topology(f: Facts, role: str) -> list[Check]:
    links = {
        k: v
        for k, v in f.prefix("nvidia_topo.").items()
        if k.count(".") == 1 and k.split(".")[1].startswith("GPU")
    }
    if not links:
        return (
            _missing("nvidia-smi topo -m") if f.gpu_count > 1 else [("one GPU or none", "ok", "")]
        )
    slow = sorted({k for k, v in links.items() if v in ("SYS", "NODE")})
    kinds = ", ".join(sorted({v for v in links.values() if v != "X"})) or "-"
    if slow and role == "training":
        return [
            (
                f"links: {kinds}; {len(slow) // 2 or 1} GPU pair(s) via the CPU interconnect",
                "advice",
                "all-reduce between those GPUs crosses PCIe host bridges / sockets",
            )
        ]
    return [(f"links: {kinds}", "ok", "")]
