"""The detector registry: one module per kind (see `analyzer/detectors/_base.py`).

Each module exposes ``NAME``, ``INPUTS`` (what it reads), ``THRESHOLDS`` (documented in
docs/detectors.md) and ``detect(ctx) -> list[Finding] | NotEvaluated``. Keep this a plain
literal; the order is the evaluation order (no detector depends on another's output: shared
computations are cached on the context).
"""

from types import ModuleType

from analyzer.detectors import (
    checkpoint_stall,
    cpu_contention,
    cpu_throttle,
    gpu_starvation,
    gpu_throttle,
    gpu_xid,
    hung_task,
    io_saturation,
    irq_hotspot,
    memory_pressure,
    net_errors,
    oom_kill,
    sampling_gap,
    swap_activity,
)

DETECTORS: list[ModuleType] = [
    checkpoint_stall,
    cpu_throttle,
    oom_kill,
    memory_pressure,
    cpu_contention,
    io_saturation,
    gpu_starvation,
    gpu_throttle,
    gpu_xid,
    hung_task,
    irq_hotspot,
    net_errors,
    swap_activity,
    sampling_gap,
]
