"""The configuration audit's recommendations, one :class:`Rule` per setting.

Each rule states the recommended value for a training host and for an inference host, why it
matters, the fix, and its check (:mod:`analyzer.audit.checks`) returning
``(observed, status, detail)`` rows (status: ok | deviation | advice | unknown).
docs/report.md reproduces this table (``python -m analyzer.audit.rules``); a test keeps them
in step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analyzer.audit.checks import (
    Check,
    affinity,
    cgroup_memory,
    cgroup_quota,
    dirty,
    governor,
    isolation,
    numa_layout,
    overcommit,
    pcie,
    pending,
    persistence,
    power_limit,
    sched_policy,
    swappiness,
    thp_defrag,
    thp_enabled,
    topology,
    zero_sysctl,
)
from analyzer.audit.facts import Facts


@dataclass(frozen=True)
class Rule:
    id: str
    area: str
    setting: str
    training: str
    inference: str
    why: str
    fix: str
    check: Callable[[Facts, str], list[Check]]


RULES: list[Rule] = [
    Rule("SWAPPINESS", "Memory", "vm.swappiness", "≤ 10", "≤ 10",
         "Swapping out loader workers, pinned staging buffers or the server's heap turns a memory squeeze into seconds-long stalls; a low value drops page cache first.",
         "sysctl -w vm.swappiness=10", swappiness),
    Rule("THP_ENABLED", "Memory", "transparent huge pages (enabled)", "madvise or always", "madvise or never",
         "Huge pages cut TLB misses for big host buffers, but 'always' lets background collapsing and fault-time compaction add latency.",
         "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled", thp_enabled),
    Rule("THP_DEFRAG", "Memory", "transparent huge pages (defrag)", "madvise, defer or defer+madvise", "madvise, defer or defer+madvise",
         "'always' compacts memory synchronously in the page-fault path of any process.",
         "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag", thp_defrag),
    Rule("OVERCOMMIT", "Memory", "vm.overcommit_memory", "0 or 1", "0 or 1",
         "Mode 2 (strict) fails allocations against a commit limit: CUDA contexts and forked DataLoader workers reserve far more than they touch.",
         "sysctl -w vm.overcommit_memory=0", overcommit),
    Rule("DIRTY_WRITEBACK", "Memory", "vm.dirty_background_* / vm.dirty_*", "background ≤ 1 GiB, limit ≤ 4 GiB (e.g. 256 MiB / 1 GiB)", "background ≤ 1 GiB, limit ≤ 4 GiB",
         "Percent-based defaults on big-RAM hosts let tens of GB of checkpoint data sit dirty, then flush in one burst; writers (and the training step) block at the limit.",
         "sysctl -w vm.dirty_background_bytes=268435456 vm.dirty_bytes=1073741824", dirty),
    Rule("ZONE_RECLAIM", "NUMA", "vm.zone_reclaim_mode", "0", "0",
         "Reclaiming on the local node instead of allocating from a remote one stalls allocations while other nodes have free memory.",
         "sysctl -w vm.zone_reclaim_mode=0",
         zero_sysctl("vm.zone_reclaim_mode", "local-node reclaim stalls allocations while other nodes have free memory")),
    Rule("NUMA_BALANCING", "NUMA", "kernel.numa_balancing", "0", "0",
         "Automatic NUMA balancing unmaps pages to sample accesses and migrates them: page-fault stalls in hot loops and on DMA buffers; bind explicitly instead.",
         "sysctl -w kernel.numa_balancing=0",
         zero_sysctl("kernel.numa_balancing", "page migration adds fault stalls; bind with numactl instead")),
    Rule("NUMA_LAYOUT", "NUMA", "NUMA nodes and GPU affinity", "trainer and loaders bound to each GPU's node", "server bound to its GPUs' node",
         "Host↔GPU copies from memory on the other socket cross the CPU interconnect.",
         "numactl --cpunodebind=<node> --membind=<node> <command>  (node from nvidia-smi topo -m)", numa_layout),
    Rule("CPU_GOVERNOR", "CPU", "cpufreq scaling governor", "performance", "performance",
         "Power-saving governors clock cores down between bursts: data loading, tokenisation and kernel launches run slower.",
         "cpupower frequency-set -g performance", governor),
    Rule("CPU_ISOLATION", "CPU", "isolcpus / nohz_full", "not needed", "optional: isolate the serving threads' cores",
         "Isolation keeps housekeeping and IRQs off latency-critical cores, but isolated cores are never load-balanced.",
         "kernel cmdline isolcpus=managed_irq,domain,<cpus> nohz_full=<cpus>; then taskset -c <cpus> <server>", isolation),
    Rule("CGROUP_CPU_QUOTA", "cgroups", "cpu.max / cpu.cfs_quota_us", "no quota (cpuset and weights instead)", "quota ≥ peak cores needed",
         "A CFS quota stops the whole group for the rest of each period once used: bursty loaders and NCCL threads stall.",
         "systemctl set-property <unit> CPUQuota=  (or echo max > cpu.max); use cpuset.cpus / CPUWeight", cgroup_quota),
    Rule("CGROUP_MEMORY", "cgroups", "memory.max / memory.high (memory.limit_in_bytes)", "memory.high unset or = memory.max", "memory.high unset or = memory.max",
         "Above memory.high the kernel throttles the group with direct reclaim: allocations stall without an OOM to show for it.",
         "echo max > memory.high  (v2); size memory.max with headroom", cgroup_memory),
    Rule("PROCESS_SCHED", "Processes", "scheduling policy of target processes", "SCHED_OTHER", "SCHED_OTHER (not BATCH/IDLE)",
         "SCHED_IDLE/BATCH tasks lose wake-up races; real-time threads can starve kernel threads.",
         "chrt -o -p 0 <pid>", sched_policy),
    Rule("PROCESS_AFFINITY", "Processes", "CPU affinity of target processes", "≥ loader workers + 1 CPUs per GPU, on the GPU's node", "the GPU's node",
         "Too few allowed CPUs starve loader workers; CPUs on the wrong node slow every host↔GPU copy.",
         "taskset -pc <cpus> <pid>  or  numactl --cpunodebind=<node> <command>", affinity),
    Rule("GPU_PERSISTENCE", "GPU", "persistence mode", "Enabled", "Enabled",
         "Without it the driver re-initialises GPUs whenever no process holds them: seconds of start-up per job and lost clocks settings.",
         "nvidia-smi -pm 1  (or the nvidia-persistenced service)", persistence),
    Rule("GPU_PCIE_LINK", "GPU", "PCIe link width", "maximum width", "maximum width",
         "A link trained at x8 instead of x16 halves host↔GPU bandwidth (check under load: idle links may downshift).",
         "nvidia-smi -q -d PCIE under load; reseat the card / check the riser", pcie),
    Rule("GPU_POWER_LIMIT", "GPU", "enforced power limit", "the board maximum", "the board maximum (or a deliberate cap)",
         "A lowered power limit caps clocks under sustained load.",
         "nvidia-smi -pl <watts>", power_limit),
    Rule("GPU_MEMORY_REPAIR", "GPU", "pending page retirement / row remapping", "none pending", "none pending",
         "Memory repairs take effect only after a GPU reset; until then the faulty rows stay in use.",
         "drain the node, then nvidia-smi -r (or reboot)", pending),
    Rule("GPU_TOPOLOGY", "GPU", "GPU↔GPU links (nvidia-smi topo -m)", "NVLink / PIX between GPUs of one job", "NVLink within a tensor-parallel group",
         "Collectives between GPUs linked only through the CPU interconnect (SYS/NODE) are several times slower.",
         "place tensor-parallel groups on NVLink-connected GPUs (CUDA_VISIBLE_DEVICES)", topology),
]  # fmt: skip


def rules_markdown() -> str:
    """The rules as the Markdown table in docs/report.md (``python -m analyzer.audit.rules``)."""
    out = ["| id | area | setting | training host | inference host | why it matters | fix |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in RULES:
        cells = [f"`{r.id}`", r.area, r.setting, r.training, r.inference, r.why, f"`{r.fix}`"]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(rules_markdown(), end="")
