"""Host-wide panels: kernel events, CPU (stacked, per-CPU heatmap, run queue, CPU PSI),
memory (used/cache/dirty/writeback, swap, reclaim) and memory/I/O pressure.

Each series names its alternatives in preference order (:class:`reports.panels.Src`): the
``signals`` table (the analyzer's 1 s grid) first where it has the column, then the raw
tables (vmstat, meminfo, sar…), so a store without signals still draws. Units in the row
labels: GiB (kB / 1048576), MB/s (kB/s / 1024), % and pages/s as the kernel counts them.
"""

from __future__ import annotations

import html

import duckdb
import polars as pl

from reports import charts, charts_events
from reports.downsample import bucket_ms
from reports.panels import Frame, Panel, Src, filters, host_row
from reports.queries import Store

GIB = 1 / 1048576  # kB -> GiB
MIB_S = 1 / 1024  # kB/s -> MB/s


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
    panel = Panel("p-events", "Kernel events", "Kernel events")
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
        panel.figure = charts_events.events_figure(events, fr.x_range)
        panel.sql.append("SELECT ts, kind, message FROM dmesg WHERE kind IS NOT NULL ORDER BY ts")
    return panel


MPSTAT_PARTS = [
    ("usr_pct", "user"), ("sys_pct", "system"), ("iowait_pct", "iowait"), ("irq_pct", "irq"),
    ("soft_pct", "softirq"), ("steal_pct", "steal"), ("idle_pct", "idle"),
]  # fmt: skip
SAR_PARTS = [
    ("user_pct", "user"), ("system_pct", "system"), ("iowait_pct", "iowait"),
    ("irq_pct", "irq"), ("soft_pct", "softirq"), ("steal_pct", "steal"), ("idle_pct", "idle"),
]  # fmt: skip
VM_PARTS = [("us_pct", "user"), ("sy_pct", "system"), ("wa_pct", "iowait"), ("st_pct", "steal"),
            ("id_pct", "idle")]  # fmt: skip


def cpu_panel(store: Store, fr: Frame) -> Panel:
    """Stacked CPU time of all CPUs: mpstat 'all', else sar -u, else vmstat."""
    panel = Panel("p-cpu", "CPU", "CPU")
    for table, parts, where, label in (
        ("mpstat_cpu", MPSTAT_PARTS, "cpu = -1", "mpstat (all CPUs)"),
        ("sar_cpu", SAR_PARTS, "cpu = -1", "sar -u (all CPUs)"),
        ("vmstat", VM_PARTS, "", "vmstat"),
    ):
        if not store.usable(table, "ts", "idle_pct" if table != "vmstat" else "id_pct"):
            continue
        present = [p for p in parts if p[0] in store.columns(table)]
        cond = "true" + filters(store, table) + (f" AND {where}" if where else "")
        try:
            df = store.frame(table, [c for c, _ in present], where=cond, order="ts")
        except duckdb.Error as exc:  # an unexpected column type: try the next source
            panel.notes.append(f"{table} unusable ({type(exc).__name__})")
            continue
        if df.height:
            panel.figure = charts.cpu_figure(df, present, fr.x_range)
            panel.notes.append(f"source: {label}")
            cols = ", ".join(c for c, _ in present)
            panel.sql.append(f"SELECT ts, {cols} FROM {table} WHERE {cond} ORDER BY ts")
            return panel
    panel.absent = "No CPU data: neither mpstat, sar nor vmstat has timed rows."
    return panel


def percpu_panel(store: Store, fr: Frame) -> Panel:
    """One heatmap row per CPU: max busy % (100 − %idle) per time bucket."""
    panel = Panel(
        "p-percpu", "Per-CPU busy % (100 − %idle, the busiest sample of each column)", "CPU"
    )
    table = next(
        (t for t in ("mpstat_cpu", "sar_cpu") if store.usable(t, "ts", "cpu", "idle_pct")), None
    )
    if table is None:
        panel.absent = "No per-CPU data: the mpstat_cpu table is absent, empty or untimed."
        return panel
    cond = "cpu >= 0 AND ts IS NOT NULL" + filters(store, table)
    if fr.x_range is not None:
        lo, hi = fr.x_range
    else:
        lo, hi = store.con.sql(
            f"SELECT min(epoch_ms(ts)), max(epoch_ms(ts)) FROM {table} WHERE {cond}"
        ).fetchall()[0]
    if lo is None:
        panel.absent = f"{table} has only the all-CPU row: no per-CPU data."
        return panel
    width = bucket_ms(lo, hi, charts.HEATMAP_COLUMNS)
    q = (
        f"SELECT (epoch_ms(ts) // {int(width)}) * {int(width)} AS x, cpu, "
        f"max(100 - idle_pct) AS busy FROM {table} WHERE {cond} GROUP BY ALL"
    )
    panel.sql.append(q)
    df = store.con.sql(q).pl()
    if not df.height:
        panel.absent = f"{table} has only the all-CPU row: no per-CPU data."
        return panel
    df = df.with_columns(pl.col("cpu").cast(pl.String))
    panel.figure = charts.heatmap_figure(df, "cpu", "busy", panel.title, fr.x_range)
    if width > 1000:
        panel.notes.append(f"one column = {width / 1000:.0f} s")
    return panel


def sig(column: str) -> Src:
    """A column of the analyzer's 1 s ``signals`` table."""
    return Src("signals", column, (column,))


def col(table: str, column: str, where: str = "") -> Src:
    return Src(table, column, (column,), where)


def meminfo(expr: str, keys: list[str]) -> Src:
    """An expression over meminfo keys of one sample, e.g. ``k('SwapTotal') - k('SwapFree')``."""
    for k in keys:
        expr = expr.replace(f"k('{k}')", f"max(value_kb) FILTER (WHERE key = '{k}')")
    in_list = ", ".join(f"'{k}'" for k in keys)
    return Src("meminfo", expr, ("key", "value_kb"), f"key IN ({in_list})", group=True)


def psi_src(store: Store, resource: str, kind: str) -> list[Src]:
    """The raw psi / sar_psi tables for one resource and kind (system-wide)."""
    out = []
    have = store.columns("psi")
    value = [c for c in ("stall_pct", "avg10_pct") if c in have]
    if value:
        where = f"resource = '{resource}' AND kind = '{kind}'"
        if "source" in have:
            where += " AND source = 'system'"
        expr = f"coalesce({', '.join(value)})"
        out.append(Src("psi", expr, ("resource", "kind", *value), where))
    sar = [c for c in ("avg_pct", "avg10_pct") if c in store.columns("sar_psi")]
    if sar:
        where = f"resource = '{resource}' AND kind = '{kind}'"
        out.append(Src("sar_psi", f"coalesce({', '.join(sar)})", ("resource", "kind", *sar), where))
    return out


def runq_panel(store: Store, fr: Frame) -> Panel:
    panel = Panel("p-runq", "Run queue and CPU pressure", "CPU")
    rows = [
        host_row(
            store,
            panel,
            "Run queue (tasks)",
            [
                ("runnable", [sig("runq"), col("vmstat", "r"), col("sar_queue", "runq_sz")], 1),
                (
                    "blocked (D)",
                    [sig("blocked"), col("vmstat", "b"), col("sar_queue", "blocked")],
                    1,
                ),
            ],
            fr,
        ),
        host_row(
            store,
            panel,
            "CPU pressure (% of time stalled)",
            [
                ("cpu some", [sig("psi_cpu_some_pct"), *psi_src(store, "cpu", "some")], 1),
                ("cpu full", psi_src(store, "cpu", "full"), 1),
            ],
            fr,
        ),
    ]
    return _finish(panel, rows, fr, "No run-queue or CPU-pressure data (vmstat, sar -q, PSI).")


def memory_panel(store: Store, fr: Frame) -> Panel:
    panel = Panel("p-mem", "Memory, swap and reclaim", "Memory")
    used = meminfo(
        "k('MemTotal') - k('MemFree') - coalesce(k('Buffers'), 0) - coalesce(k('Cached'), 0)"
        " - coalesce(k('SReclaimable'), 0)",
        ["MemTotal", "MemFree", "Buffers", "Cached", "SReclaimable"],
    )
    mem = [
        ("used", [used, col("sar_memory", "kbmemused")], GIB),
        ("page cache", [meminfo("k('Cached')", ["Cached"]), col("vmstat", "cache_kb"),
                        col("sar_memory", "kbcached")], GIB),
        ("available", [sig("mem_available_kb"), meminfo("k('MemAvailable')", ["MemAvailable"]),
                       col("sar_memory", "kbavail")], GIB),
        ("swap used", [meminfo("k('SwapTotal') - k('SwapFree')", ["SwapTotal", "SwapFree"]),
                       col("vmstat", "swpd_kb"), col("sar_swap_space", "kbswpused")], GIB),
    ]  # fmt: skip
    dirty = [
        (
            "dirty",
            [sig("dirty_kb"), meminfo("k('Dirty')", ["Dirty"]), col("sar_memory", "kbdirty")],
            GIB,
        ),
        ("writeback", [sig("writeback_kb"), meminfo("k('Writeback')", ["Writeback"])], GIB),
    ]
    swap = [
        ("swap in", [sig("swap_in_kb_s"), col("vmstat", "si_kb_s")], MIB_S),
        ("swap out", [sig("swap_out_kb_s"), col("vmstat", "so_kb_s")], MIB_S),
    ]
    reclaim = [
        ("scanned", [sig("pgscan_per_s"), Src("sar_paging", "coalesce(pgscank_s, 0) + coalesce(pgscand_s, 0)", ("pgscank_s", "pgscand_s"))], 1),
        ("scanned directly", [sig("pgscan_direct_per_s"), col("sar_paging", "pgscand_s")], 1),
        ("reclaimed", [sig("pgsteal_per_s"), col("sar_paging", "pgsteal_s")], 1),
        ("major faults", [sig("pgmajfault_per_s"), col("sar_paging", "majflt_s")], 1),
    ]  # fmt: skip
    rows = [
        host_row(store, panel, "Memory (GiB)", mem, fr),
        host_row(store, panel, "Dirty pages and writeback (GiB)", dirty, fr),
        host_row(store, panel, "Swap I/O (MB/s)", swap, fr),
        host_row(store, panel, "Reclaim (pages/s, faults/s)", reclaim, fr),
    ]
    return _finish(panel, rows, fr, "No memory data: meminfo, vmstat and sar -r are all absent.")


def psi_panel(store: Store, fr: Frame) -> Panel:
    panel = Panel("p-psi", "Memory and I/O pressure", "Memory")
    rows = [
        host_row(
            store,
            panel,
            "Memory pressure (% of time stalled)",
            [
                ("memory some", [sig("psi_mem_some_pct"), *psi_src(store, "memory", "some")], 1),
                ("memory full", [sig("psi_mem_full_pct"), *psi_src(store, "memory", "full")], 1),
            ],
            fr,
        ),
        host_row(
            store,
            panel,
            "I/O pressure (% of time stalled)",
            [
                ("io some", [sig("psi_io_some_pct"), *psi_src(store, "io", "some")], 1),
                ("io full", [sig("psi_io_full_pct"), *psi_src(store, "io", "full")], 1),
            ],
            fr,
        ),
    ]
    return _finish(
        panel, rows, fr, "No pressure-stall data: the psi table is absent, empty or untimed."
    )


def _finish(panel: Panel, rows: list[charts.Row | None], fr: Frame, absent: str) -> Panel:
    present = [r for r in rows if r is not None]
    flat = f"flat at 0 over the capture: {', '.join(panel.flat)}" if panel.flat else ""
    if not present:
        panel.absent = flat.capitalize() if flat else absent
        panel.notes.clear()
        return panel
    if flat:
        panel.notes.append(flat)
    panel.figure = charts.rows_figure(present, panel.title, fr.x_range)
    return panel
