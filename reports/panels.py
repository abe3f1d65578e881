"""Time-aligned chart panels: SQL over the store in, :mod:`reports.charts` figures out.

Each ``*_panel`` function returns a :class:`Panel`: a figure, or, when its table is absent or
empty, one line saying what is missing. Every figure gets the same x range so that the panels
line up and zoom together; the finding/event shapes common to all panels travel once in the
page payload and the page script adds them to every chart.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl

from reports import charts
from reports.queries import Store, quote

MAX_DEVICES = 8


@dataclass
class Panel:
    """One chart slot of the report."""

    id: str
    title: str
    section: str  # "timeline" or "panels"
    figure: dict[str, Any] | None = None
    absent: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Frame:
    """What every panel shares: the x range (epoch ms)."""

    x_range: tuple[int, int] | None


def events_frame(store: Store, limit: int = 5000) -> pl.DataFrame:
    """Classified dmesg events (kind not null) with x and an HTML-escaped hover text."""
    if not store.usable("dmesg", "ts", "kind"):
        return pl.DataFrame(schema={"x": pl.Int64, "kind": pl.String, "text": pl.String})
    cols = store.present("dmesg", ["kind", "message"])
    df = store.frame("dmesg", cols, where="kind IS NOT NULL", order="ts", limit=limit)
    msg = df["message"] if "message" in df.columns else pl.Series([""] * df.height)
    texts = [html.escape(f"{k}: {(m or '')[:200]}") for k, m in zip(df["kind"], msg, strict=True)]
    return df.select("x", "kind").with_columns(text=pl.Series(texts, dtype=pl.String))


def events_panel(store: Store, events: pl.DataFrame, fr: Frame) -> Panel:
    panel = Panel("p-events", "Kernel events", "timeline")
    if not store.usable("dmesg"):
        panel.absent = "No kernel log: the dmesg table is absent or empty."
    elif events.height == 0:
        untimed = "kind" in store.columns("dmesg") and store.scalar(
            "SELECT count(*) FROM dmesg WHERE kind IS NOT NULL"
        )
        panel.absent = (
            f"{untimed} classified events have no wall-clock time: see the table below."
            if untimed
            else "dmesg parsed: no classified events (OOM, Xid, hung task, I/O error…)."
        )
    else:
        panel.figure = charts.events_figure(events, fr.x_range)
    return panel


def cpu_panel(store: Store, fr: Frame) -> Panel:
    panel = Panel("p-cpu", "CPU", "timeline")
    mp = [
        ("usr_pct", "user"),
        ("sys_pct", "system"),
        ("iowait_pct", "iowait"),
        ("irq_pct", "irq"),
        ("soft_pct", "softirq"),
        ("steal_pct", "steal"),
        ("idle_pct", "idle"),
    ]
    vm = [("us_pct", "user"), ("sy_pct", "system"), ("wa_pct", "iowait"), ("st_pct", "steal")]
    vm.append(("id_pct", "idle"))
    if store.usable("mpstat_cpu", "ts", "cpu", "idle_pct"):
        parts = [p for p in mp if p[0] in store.columns("mpstat_cpu")]
        try:
            df = store.frame("mpstat_cpu", [c for c, _ in parts], where="cpu = -1", order="ts")
        except duckdb.Error as exc:  # an unexpected cpu column type: fall back to vmstat
            df = pl.DataFrame()
            panel.notes.append(f"mpstat unusable ({type(exc).__name__})")
        if df.height:
            panel.figure = charts.cpu_figure(df, parts, fr.x_range)
            panel.notes.append("source: mpstat (all CPUs)")
            return panel
    if store.usable("vmstat", "ts", "id_pct"):
        parts = [p for p in vm if p[0] in store.columns("vmstat")]
        df = store.frame("vmstat", [c for c, _ in parts], order="ts")
        panel.figure = charts.cpu_figure(df, parts, fr.x_range)
        panel.notes.append("source: vmstat")
        return panel
    panel.absent = "No CPU data: neither mpstat nor vmstat has timed rows."
    return panel


def _lines(
    store: Store,
    table: str,
    series: list[tuple[str, str]],
    pid: str,
    title: str,
    fr: Frame,
    *,
    y_title: str = "",
    scale: float = 1.0,
) -> Panel:
    panel = Panel(pid, title, "timeline")
    present = [s for s in series if s[0] in store.columns(table)]
    if not store.usable(table, "ts") or not present:
        panel.absent = f"No data: the {table} table is absent, empty or has no timed rows."
        return panel
    df = store.frame(table, [c for c, _ in present], order="ts")
    panel.figure = charts.lines_figure(df, present, title, fr.x_range, y_title=y_title, scale=scale)
    return panel


def runq_panel(store: Store, fr: Frame) -> Panel:
    series = [("r", "runnable (r)"), ("b", "blocked (b)")]
    return _lines(store, "vmstat", series, "p-runq", "Run queue", fr, y_title="tasks")


def memory_panel(store: Store, fr: Frame) -> Panel:
    series = [
        ("free_kb", "free"),
        ("buff_kb", "buffers"),
        ("cache_kb", "cache"),
        ("swpd_kb", "swap used"),
    ]
    return _lines(store, "vmstat", series, "p-mem", "Memory", fr, y_title="GiB", scale=1 / 1048576)


def psi_panel(store: Store, fr: Frame) -> Panel:
    panel = Panel("p-psi", "Pressure stall (PSI)", "timeline")
    if not store.usable("psi", "ts", "resource", "kind"):
        panel.absent = "No pressure-stall data: the psi table is absent, empty or untimed."
        return panel
    have = store.columns("psi")
    value = [c for c in ("stall_pct", "avg10_pct") if c in have]
    if not value:
        panel.absent = "psi table has neither stall_pct nor avg10_pct."
        return panel
    source = "system"
    if "source" in have:
        sources = [r[0] for r in store.con.sql("SELECT DISTINCT source FROM psi").fetchall()]
        source = "system" if "system" in sources else min(str(s) for s in sources)
        where = f"ts IS NOT NULL AND source = '{source.replace(chr(39), chr(39) * 2)}'"
    else:
        where = "ts IS NOT NULL"
    v = f"coalesce({', '.join(quote(c) for c in value)})"
    q = (
        "SELECT epoch_ms(ts) AS x, coalesce(resource, '?') || ' ' || coalesce(kind, '?') "
        f"AS series, {v} AS pct FROM psi WHERE {where} ORDER BY series, ts"
    )
    df = store.con.sql(q).pl()
    panel.figure = charts.grouped_lines_figure(
        df,
        "series",
        "pct",
        "Pressure stall (PSI)",
        fr.x_range,
        y_title="% stalled",
    )
    panel.notes.append(f"source: {source}; value: {' or '.join(value)}")
    return panel


def percpu_panel(store: Store, fr: Frame) -> Panel:
    panel = Panel("p-percpu", "Per-CPU busy", "panels")
    if not store.usable("mpstat_cpu", "ts", "cpu", "idle_pct"):
        panel.absent = "No per-CPU data: the mpstat_cpu table is absent, empty or untimed."
        return panel
    lo, hi = store.con.sql(
        "SELECT min(epoch_ms(ts)), max(epoch_ms(ts)) FROM mpstat_cpu WHERE cpu >= 0 AND ts IS NOT NULL"
    ).fetchall()[0]
    if lo is None:
        panel.absent = "mpstat has only the all-CPU row: no per-CPU data."
        return panel
    width = max(1000, (int(hi) - int(lo)) // charts.HEATMAP_COLUMNS + 1)
    df = store.con.sql(
        f"SELECT (epoch_ms(ts) // {width}) * {width} AS x, CAST(cpu AS VARCHAR) AS cpu, "
        "max(100 - idle_pct) AS busy FROM mpstat_cpu WHERE cpu >= 0 AND ts IS NOT NULL GROUP BY ALL"
    ).pl()
    panel.figure = charts.heatmap_figure(
        df, "cpu", "busy", "Per-CPU busy % (max per bucket)", fr.x_range
    )
    return panel


def _top_groups(store: Store, table: str, group: str, by: str, where: str, n: int) -> list[str]:
    rows = store.con.sql(
        f"SELECT CAST({quote(group)} AS VARCHAR) AS g FROM {quote(table)} WHERE {where} "
        f"GROUP BY ALL ORDER BY max({quote(by)}) DESC NULLS LAST, g LIMIT {n}"
    ).fetchall()
    return [str(r[0]) for r in rows if r[0] is not None]


def _grouped(
    store: Store,
    table: str,
    group: str,
    expr: str,
    needed: list[str],
    pid: str,
    title: str,
    fr: Frame,
    *,
    y_title: str,
    label: str = "",
) -> Panel:
    panel = Panel(pid, title, "panels")
    if not store.usable(table, "ts", group, *needed):
        panel.absent = (
            f"No data: the {table} table is absent, empty, untimed or lacks {', '.join(needed)}."
        )
        return panel
    # Whole devices only: partitions and -g group totals would count the same I/O twice.
    where = "ts IS NOT NULL"
    for flag in store.present(table, ["is_partition", "is_group"]):
        where += f" AND NOT coalesce({flag}, false)"
    top = _top_groups(store, table, group, needed[0], where, MAX_DEVICES)
    if not top:
        panel.absent = f"No data: no {group} in {table} has a time and a value."
        return panel
    total = store.scalar(f"SELECT count(DISTINCT {quote(group)}) FROM {quote(table)} WHERE {where}")
    keys = ", ".join("'" + k.replace("'", "''") + "'" for k in top)
    df = store.con.sql(
        f"SELECT epoch_ms(ts) AS x, '{label}' || CAST({quote(group)} AS VARCHAR) AS g, "
        f"{expr} AS v FROM {quote(table)} WHERE {where} "
        f"AND CAST({quote(group)} AS VARCHAR) IN ({keys}) ORDER BY g, ts"
    ).pl()
    panel.figure = charts.grouped_lines_figure(df, "g", "v", title, fr.x_range, y_title=y_title)
    if total and total > len(top):
        panel.notes.append(f"top {len(top)} of {total} by peak {needed[0]}")
    return panel


def guarded(pid: str, title: str, section: str, build: Callable[[], Panel]) -> Panel:
    """Run one panel builder; a store the report did not expect costs that panel, not the page."""
    try:
        return build()
    except (duckdb.Error, pl.exceptions.PolarsError, ValueError, TypeError, KeyError) as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return Panel(pid, title, section, absent=f"Could not draw this panel ({reason}).")


def timeline_panels(store: Store, events: pl.DataFrame, fr: Frame) -> list[Panel]:
    """Issue 2's time-aligned panels (events, CPU, run queue, memory, PSI)."""
    specs: list[tuple[str, str, Callable[[], Panel]]] = [
        ("p-events", "Kernel events", lambda: events_panel(store, events, fr)),
        ("p-cpu", "CPU", lambda: cpu_panel(store, fr)),
        ("p-runq", "Run queue", lambda: runq_panel(store, fr)),
        ("p-mem", "Memory", lambda: memory_panel(store, fr)),
        ("p-psi", "Pressure stall (PSI)", lambda: psi_panel(store, fr)),
    ]
    return [guarded(pid, title, "timeline", build) for pid, title, build in specs]


# (id, title, table, group column, value SQL, needed columns, y title, group label prefix)
GROUPED = [
    ("p-disk-util", "Disk utilisation", "iostat_device", "device", "util_pct",
     ["util_pct"], "% util", ""),
    ("p-disk-tput", "Disk throughput", "iostat_device", "device",
     "(coalesce(rkb_s, 0) + coalesce(wkb_s, 0)) / 1024", ["wkb_s", "rkb_s"], "MB/s", ""),
    ("p-gpu-sm", "GPU SM utilisation", "gpu_dmon", "gpu", "sm_pct", ["sm_pct"], "% SM", "GPU "),
    ("p-gpu-pwr", "GPU power", "gpu_dmon", "gpu", "pwr_w", ["pwr_w"], "W", "GPU "),
]  # fmt: skip


def detail_panels(store: Store, fr: Frame) -> list[Panel]:
    """Per-CPU, disk and GPU panels (only drawn when their tables exist)."""
    out = [guarded("p-percpu", "Per-CPU busy", "panels", lambda: percpu_panel(store, fr))]
    for pid, title, table, group, expr, needed, y_title, label in GROUPED:

        def build(a=(table, group, expr, needed, pid, title), y=y_title, lb=label) -> Panel:
            return _grouped(store, *a, fr, y_title=y, label=lb)

        out.append(guarded(pid, title, "panels", build))
    return out
