"""The report's panels in page order: the registry of panel builders.

Each entry is (id, title, group, builder); :func:`guarded` runs one builder so that a
store the report did not expect costs that panel, not the page. The builders live in
:mod:`reports.panels_host` and :mod:`reports.panels_devices`, their shared machinery in
:mod:`reports.panels`.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import polars as pl

from reports import panels_devices as D
from reports import panels_host as H
from reports.panels import Frame, Panel
from reports.queries import Store


def guarded(pid: str, title: str, group: str, build: Callable[[], Panel]) -> Panel:
    """Run one panel builder; a store the report did not expect costs that panel, not the page."""
    try:
        panel = build()
        if panel.figure is not None:  # the page shows the title above the chart
            panel.figure["layout"].get("title", {})["text"] = ""
        return panel
    except (duckdb.Error, pl.exceptions.PolarsError, ValueError, TypeError, KeyError) as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return Panel(pid, title, group, absent=f"Could not draw this panel ({reason}).")


def all_panels(store: Store, events: pl.DataFrame, fr: Frame) -> list[Panel]:
    """Every panel in page order (absent ones included, they say why)."""
    specs: list[tuple[str, str, str, Callable[[], Panel]]] = [
        ("p-events", "Kernel events", "Kernel events", lambda: H.events_panel(store, events, fr)),
        ("p-cpu", "CPU", "CPU", lambda: H.cpu_panel(store, fr)),
        ("p-percpu", "Per-CPU busy", "CPU", lambda: H.percpu_panel(store, fr)),
        ("p-runq", "Run queue and CPU pressure", "CPU", lambda: H.runq_panel(store, fr)),
        ("p-mem", "Memory, swap and reclaim", "Memory", lambda: H.memory_panel(store, fr)),
        ("p-psi", "Memory and I/O pressure", "Memory", lambda: H.psi_panel(store, fr)),
        ("p-disk", "Disks", "Disk and network", lambda: D.disk_panel(store, fr)),
        ("p-net", "Network", "Disk and network", lambda: D.net_panel(store, fr)),
        ("p-cgroup", "cgroups", "cgroups", lambda: D.cgroup_panel(store, fr)),
        ("p-gpu", "GPUs", "GPU", lambda: D.gpu_panel(store, fr)),
        (
            "p-bpf",
            "Latency histograms (bpftrace)",
            "Kernel tracing",
            lambda: D.bpf_panel(store, fr),
        ),
    ]
    return [guarded(pid, title, group, build) for pid, title, group, build in specs]
