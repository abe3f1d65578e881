"""What may cause what: the known host-side mechanisms behind an application symptom.

Causes need mechanisms (docs/detectors.md "Correlation"): a candidate whose activity
overlaps a symptom window is named a *cause* only when `MECHANISMS` holds a group that
contains the candidate (a signals column or a finding kind) **and** lists the symptom's
kind. Everything else that overlaps is *concurrent*. The table, with its words, is
docs/symptoms.md "Mechanisms"; change both together.

Per signals column: the direction in which it is *active* (`DIRECTION`: ``up``, ``down``
or ``either``; default ``either``) and the smallest change that counts (`floor`, in the
column's unit: noise on a quiet signal is not activity).
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.signals import SIGNALS

LATENCY, STEP, THROUGHPUT, VALUE = "latency", "step_time", "throughput", "value"
ALL_KINDS = frozenset({LATENCY, STEP, THROUGHPUT})


@dataclass(frozen=True)
class Mechanism:
    """A cause group: its signals, its finding kinds, the symptom kinds it slows, why."""

    signals: tuple[str, ...]
    findings: tuple[str, ...]
    symptoms: frozenset[str]
    words: str
    short: str  # the cause in two or three words, for "… leads by 1 s"


MECHANISMS: dict[str, Mechanism] = {
    "cpu_quota": Mechanism(
        ("throttled_pct", "throttled_ms_per_s"),
        ("cpu_throttle",),
        ALL_KINDS,
        "CFS quota throttling: once a cgroup has used its cpu.max quota its threads wait "
        "for the next period (100 ms by default), so requests and steps in flight stall",
        "throttling",
    ),
    "cpu_contention": Mechanism(
        ("runq", "psi_cpu_some_pct", "runqlat_p99_us", "steal_pct"),
        ("cpu_contention",),
        ALL_KINDS,
        "CPU contention: runnable threads wait in the run queue for a CPU, so work is "
        "served late and latency jitters",
        "CPU contention",
    ),
    "io": Mechanism(
        (
            "disk_write_kb_s",
            "page_cache_growth_kb_s",
            "dirty_kb",
            "writeback_kb",
            "disk_read_kb_s",
            "disk_w_await_max_ms",
            "disk_util_max_pct",
            "disk_aqu_sz_max",
            "psi_io_some_pct",
            "psi_io_full_pct",
            "biolat_p99_us",
            "iowait_pct",
            "blocked",
        ),
        ("checkpoint_stall", "io_saturation", "hung_task"),
        ALL_KINDS,
        "write burst / I/O stall: writers block in balance_dirty_pages or fsync and reads "
        "wait on a saturated disk, so a step that checkpoints or loads data, or a request "
        "that does I/O, stalls",
        "the I/O",
    ),
    "memory": Mechanism(
        (
            "psi_mem_some_pct",
            "psi_mem_full_pct",
            "pgscan_direct_per_s",
            "pgscan_per_s",
            "pgsteal_per_s",
            "swap_in_kb_s",
            "swap_out_kb_s",
            "pgmajfault_per_s",
            "refault_per_s",
            "mem_available_kb",
        ),
        ("memory_pressure", "swap_activity", "oom_kill"),
        ALL_KINDS,
        "memory pressure: tasks stall in direct reclaim and wait for major faults and "
        "swap-ins of the pages they need",
        "memory pressure",
    ),
    "gpu_throttle": Mechanism(
        ("gpu_sm_clock_min_mhz", "gpu_pviol_max_pct", "gpu_tviol_any", "gpu_temp_max_c"),
        ("gpu_throttle",),
        ALL_KINDS,
        "GPU clocks held down by the power or thermal limit: every kernel runs slower",
        "the GPU throttling",
    ),
    "irq": Mechanism(
        ("irq_soft_max_cpu_pct",),
        ("irq_hotspot",),
        frozenset({LATENCY, THROUGHPUT}),
        "interrupt load: a CPU saturated by hard and soft IRQs runs the threads placed on it late",
        "the IRQ load",
    ),
    "network": Mechanism(
        ("net_drop_per_s", "net_err_per_s"),
        ("net_errors",),
        frozenset({LATENCY, THROUGHPUT}),
        "dropped or bad packets are retransmitted (TCP's retransmission timeout starts at "
        "200 ms), so requests on those connections wait",
        "packet loss",
    ),
    "gpu_error": Mechanism(
        (),
        ("gpu_xid",),
        ALL_KINDS,
        "a GPU error (Xid) stalls or kills the work on that GPU",
        "the GPU error",
    ),
}

#: signals columns that are not evidence of anything (counts, interval lengths)
NOT_CANDIDATES = frozenset({"ts", "cpus", "gpu_count", "runqlat_interval_s", "biolat_interval_s"})

#: the bad direction of signals whose direction is known; the rest count both ways
DIRECTION: dict[str, str] = {
    "mem_available_kb": "down",
    "gpu_sm_clock_min_mhz": "down",
    **{
        c: "up"
        for m in MECHANISMS.values()
        for c in m.signals
        if c not in ("mem_available_kb", "gpu_sm_clock_min_mhz")
    },
}

#: smallest change that counts, by unit (a signal's own value in `FLOOR_OF` wins)
FLOOR_BY_UNIT: dict[str, float] = {
    "%": 5.0, "tasks": 2.0, "1/s": 10.0, "kB": 131072.0, "kB/s": 10240.0,
    "pages/s": 1000.0, "ms": 5.0, "requests": 1.0, "W": 50.0, "C": 5.0, "MHz": 100.0,
    "0/1": 0.5, "MiB": 1024.0, "ms/s": 50.0, "us": 1000.0,
}  # fmt: skip
FLOOR_OF: dict[str, float] = {
    "cs_per_s": 5000.0,
    "net_err_per_s": 1.0,
    "mem_available_kb": 1048576.0,  # 1 GiB
    "net_rx_kb_s": 1024.0,
    "net_tx_kb_s": 1024.0,
}
UNIT_OF = {c.name: c.unit for c in SIGNALS.columns}
#: signals whose values are the bounds of a log2 histogram's buckets (bpftrace's runqlat and
#: biolat p99): they move in steps of 2x, so one step up is the histogram's resolution (a
#: p99 crossing one bucket boundary), not a change; active from two steps up (`min_ratio`)
LOG2_BUCKETS = frozenset({"runqlat_p99_us", "biolat_p99_us"})


def candidates() -> list[str]:
    """The signals columns ranked against every symptom window, in table order."""
    return [c.name for c in SIGNALS.columns if c.name not in NOT_CANDIDATES]


def floor(col: str) -> float:
    return FLOOR_OF.get(col, FLOOR_BY_UNIT.get(UNIT_OF.get(col, ""), 1.0))


def min_ratio(col: str) -> float:
    """The smallest ``value / baseline`` that counts for ``col`` (1: no such rule)."""
    return 4.0 if col in LOG2_BUCKETS else 1.0


def direction(col: str) -> str:
    return DIRECTION.get(col, "either")


def group_of(candidate: str, candidate_type: str, symptom_kind: str) -> str | None:
    """The mechanism group linking ``candidate`` (a signals column, or a finding kind
    when ``candidate_type`` is ``finding``) to a symptom of ``symptom_kind``; None: none."""
    for name, m in MECHANISMS.items():
        pool = m.findings if candidate_type == "finding" else m.signals
        if candidate in pool and symptom_kind in m.symptoms:
            return name
    return None
