"""Per-entity panels: disks, network interfaces, cgroups, GPUs, and bpftrace latency
histograms as heatmaps over time.

Each panel stacks rows on the shared time axis (:func:`reports.panels.entity_rows`), one line
per entity, the busiest entities first (at most 8 disks/interfaces/cgroups, 16 GPUs; the
caption says when some were left out). Units: MB/s (kB/s / 1024), ms, %, GiB, W, °C, MHz.

More than :data:`HEATMAP_ABOVE` disks or GPUs would be spaghetti as lines: each metric is
then a heatmap (device × time, the worst sample of each column: the lowest SM utilisation
and SM clock, the highest of everything else) and, below it, the median of the devices with
the outliers as lines (:func:`reports.panels.outliers`: a device whose mean is far from the
median of the devices' means).
"""

from __future__ import annotations

import polars as pl

from analyzer.sql import ident, shown
from reports import charts
from reports.downsample import bucket_ms
from reports.panels import Frame, Metric, Panel, entity_rows, filters
from reports.queries import Store

WHOLE_DISK = (
    "NOT (CAST({e} AS VARCHAR) LIKE 'dm-%' OR CAST({e} AS VARCHAR) LIKE 'loop%' "
    "OR CAST({e} AS VARCHAR) LIKE 'ram%' OR CAST({e} AS VARCHAR) LIKE 'zram%')"
)
MAX_HISTOGRAMS = 4
HEATMAP_ABOVE = 4  # devices; up to this many stay one line each


def _sum(store: Store, table: str, columns: list[str]) -> tuple[str, tuple[str, ...]]:
    """``coalesce(a, 0) + coalesce(b, 0)`` over the columns ``table`` has."""
    have = [c for c in columns if c in store.columns(table)]
    if not have:
        return "NULL", tuple(columns[:1])
    return " + ".join(f"coalesce({ident(c)}, 0)" for c in have), tuple(have[:1])


def _first(store: Store, table: str, columns: list[str]) -> str:
    """The first of ``columns`` that ``table`` has (else the first name: the row is skipped)."""
    return next((c for c in columns if c in store.columns(table)), columns[0])


def _greatest(store: Store, table: str, columns: list[str]) -> tuple[str, tuple[str, ...]]:
    have = [c for c in columns if c in store.columns(table)]
    if not have:
        return "NULL", tuple(columns[:1])
    return (
        f"greatest({', '.join(ident(c) for c in have)})" if len(have) > 1 else ident(have[0])
    ), tuple(have[:1])


def disk_panel(store: Store, fr: Frame) -> Panel:
    """Throughput, await and utilisation per whole disk (iostat -x, else sar -d)."""
    panel = Panel("p-disk", "Disks", "Disk and network")
    table, ent = (
        ("iostat_device", "device")
        if store.usable("iostat_device", "ts", "device")
        else ("sar_disk", "dev")
    )
    tput, _ = _sum(store, table, ["rkb_s", "wkb_s", "kb_read_s", "kb_wrtn_s"])
    write = _first(store, table, ["wkb_s", "kb_wrtn_s"])
    read = _first(store, table, ["rkb_s", "kb_read_s"])
    wait, wneed = _greatest(store, table, ["r_await_ms", "w_await_ms", "await_ms"])
    metrics = [
        Metric("Write (MB/s)", table, ent, f"{ident(write)} / 1024", (write,)),
        Metric("Read (MB/s)", table, ent, f"{ident(read)} / 1024", (read,)),
        Metric("Await, worst of read/write (ms)", table, ent, wait, wneed),
        Metric("Utilisation (%)", table, ent, "util_pct", ("util_pct",)),
    ]
    where = WHOLE_DISK.format(e=ident(ent))
    for flag in store.present(table, ["is_partition", "is_group"]):
        where += f" AND NOT coalesce({ident(flag)}, false)"
    has_util = "util_pct" in store.columns(table)
    rank = {table: "max(util_pct)" if has_util else f"max({tput})"}
    rows = entity_rows(
        store, panel, metrics, rank=rank, where={table: where}, x_range=fr.x_range,
        heatmap_above=HEATMAP_ABOVE,
    )  # fmt: skip
    return _finish(panel, rows, fr, "No disk data: iostat -x and sar -d are absent or untimed.")


def net_panel(store: Store, fr: Frame) -> Panel:
    """Throughput, drops and errors per interface (sar -n DEV,EDEV), loopback left out."""
    panel = Panel("p-net", "Network", "Disk and network")
    drops, dneed = _sum(store, "sar_net_edev", ["rxdrop_s", "txdrop_s"])
    errs, eneed = _sum(
        store,
        "sar_net_edev",
        ["rxerr_s", "txerr_s", "rxfram_s", "rxfifo_s", "txfifo_s", "txcarr_s"],
    )
    metrics = [
        Metric("Throughput, rx + tx (MB/s)", "sar_net_dev", "iface",
               "(coalesce(rxkb_s, 0) + coalesce(txkb_s, 0)) / 1024", ("rxkb_s", "txkb_s")),
        Metric("Dropped packets (/s)", "sar_net_edev", "iface", drops, dneed),
        Metric("Errors (/s)", "sar_net_edev", "iface", errs, eneed),
    ]  # fmt: skip
    not_lo = "iface <> 'lo'"
    rank = {
        "sar_net_dev": "max(coalesce(rxkb_s, 0) + coalesce(txkb_s, 0))",
        "sar_net_edev": f"max({drops} + {errs})",
    }
    rows = entity_rows(
        store,
        panel,
        metrics,
        rank=rank,
        where={"sar_net_dev": not_lo, "sar_net_edev": not_lo},
        x_range=fr.x_range,
    )
    return _finish(panel, rows, fr, "No network data: sar -n DEV/EDEV was not captured.")


def cgroup_panel(store: Store, fr: Frame) -> Panel:
    """CPU throttling and memory per cgroup (cgroup v1 and v2 alike, normalised by the parser)."""
    panel = Panel("p-cgroup", "cgroups", "cgroups")
    metrics = [
        Metric("CPU throttled (% of periods)", "cgroup_cpu", "cgroup", "throttled_pct", ("throttled_pct",)),
        Metric("Throttled time (ms/s)", "cgroup_cpu", "cgroup", "throttled_ms_per_s", ("throttled_ms_per_s",)),
        Metric("Memory used (GiB)", "cgroup_memory", "cgroup", "current_bytes / 1073741824", ("current_bytes",)),
    ]  # fmt: skip
    rank = {
        "cgroup_cpu": "max(coalesce(throttled_pct, 0))",
        "cgroup_memory": "max(current_bytes)",
    }
    rows = entity_rows(store, panel, metrics, rank=rank, x_range=fr.x_range)
    return _finish(
        panel, rows, fr, "No cgroup statistics: cgroup_cpu and cgroup_memory are absent or untimed."
    )


def gpu_panel(store: Store, fr: Frame) -> Panel:
    """Per-GPU utilisation, memory, power, temperature and SM clock (nvidia-smi dmon)."""
    panel = Panel("p-gpu", "GPUs", "GPU")
    t = "gpu_dmon"
    metrics = [
        Metric("SM utilisation (%)", t, "gpu", "sm_pct", ("sm_pct",), low_is_bad=True),
        Metric("Memory used (GiB)", t, "gpu", "fb_mib / 1024", ("fb_mib",)),
        Metric("Memory-controller busy (%)", t, "gpu", "mem_pct", ("mem_pct",)),
        Metric("Power (W)", t, "gpu", "pwr_w", ("pwr_w",)),
        Metric("Temperature (°C)", t, "gpu", "gtemp_c", ("gtemp_c",)),
        Metric("SM clock (MHz)", t, "gpu", "pclk_mhz", ("pclk_mhz",), low_is_bad=True),
    ]
    if "fb_mib" in store.columns(t):  # memory used says more than controller activity
        metrics = [m for m in metrics if m.value != "mem_pct"]
    rows = entity_rows(
        store, panel, metrics, rank={t: "natural"}, prefix="GPU ", limit=16, x_range=fr.x_range,
        heatmap_above=HEATMAP_ABOVE,
    )  # fmt: skip
    return _finish(panel, rows, fr, "No GPU data: nvidia-smi dmon was not captured (or no GPU).")


def bpf_panel(store: Store, fr: Frame) -> Panel:
    """Each bpftrace/bcc histogram as a heatmap: buckets × time, share of events per interval."""
    panel = Panel("p-bpf", "Latency histograms (bpftrace)", "Kernel tracing")
    if not store.usable("bpf_hist", "ts", "bucket_low", "count"):
        panel.absent = "No latency histograms: bpftrace was not run (needs root) or printed none."
        return panel
    hist = "coalesce(source_file, '')" if "source_file" in store.columns("bpf_hist") else "''"
    hist += " || ' ' || coalesce(map, '')" if "map" in store.columns("bpf_hist") else ""
    cond = "ts IS NOT NULL AND bucket_low IS NOT NULL" + filters(store, "bpf_hist")
    hists = store.con.sql(
        f"SELECT {hist} AS h, sum(count) AS n FROM bpf_hist WHERE {cond} GROUP BY ALL "
        f"ORDER BY n DESC, h LIMIT {MAX_HISTOGRAMS + 1}"
    ).fetchall()
    lo, hi = store.con.sql(
        f"SELECT min(epoch_ms(ts)), max(epoch_ms(ts)) FROM bpf_hist WHERE {cond}"
    ).fetchall()[0]
    width = bucket_ms(lo, hi, charts.HEATMAP_COLUMNS // 2)
    unit = "any_value(unit)" if "unit" in store.columns("bpf_hist") else "NULL"
    rows = []
    for name, _n in hists[:MAX_HISTOGRAMS]:
        q = (
            f"WITH b AS (SELECT (epoch_ms(ts) // {int(width)}) * {int(width)} AS x, bucket_low AS lo, "
            f"sum(count) AS c, {unit} AS unit FROM bpf_hist WHERE {cond} AND {hist} = $hist "
            "GROUP BY ALL) SELECT x, lo, c, unit, 100.0 * c / sum(c) OVER (PARTITION BY x) AS pct "
            "FROM b ORDER BY x, lo"
        )
        panel.sql.append(shown(q, {"hist": name}))
        df = store.con.sql(q, params={"hist": name}).pl()
        if not df.height:
            continue
        u = next((v for v in df["unit"].to_list() if v), "") or ""
        order = [_bucket_label(v, u) for v in sorted(set(df["lo"].to_list()))]
        df = df.with_columns(b=pl.Series([_bucket_label(v, u) for v in df["lo"]], dtype=pl.String))
        trace = charts.heatmap_trace(
            df.select("x", "b", "pct"), "b", "pct", colorbar="% of events", order=order,
            hover="%{y}: %{z}% of events",
            absent_is_zero=True,
        )  # fmt: skip
        trace["showscale"] = not rows
        rows.append(charts.Row(f"{name} ({u or 'value'})", [trace]))
    if hists and len(hists) > MAX_HISTOGRAMS:
        panel.notes.append(f"the {MAX_HISTOGRAMS} histograms with most events are shown")
    if width > 1000:
        panel.notes.append(f"one column = {width / 1000:.0f} s of histogram intervals")
    return _finish(panel, rows, fr, "bpftrace ran but no histogram interval has a time.")


def _bucket_label(low: int | None, unit: str) -> str:
    """``65536`` → ``'≥64K'`` (bucket lower bounds, powers of 1024 as bpftrace prints them)."""
    if low is None:
        return "<0"
    v = int(low)
    for div, suffix in ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if v >= div and v % div == 0:
            return f"≥{v // div}{suffix}"
    return f"≥{v}"


def _finish(panel: Panel, rows: list[charts.Row], fr: Frame, absent: str) -> Panel:
    if not rows:
        panel.absent = absent
        panel.notes.clear()
        return panel
    panel.figure = charts.rows_figure(rows, panel.title, fr.x_range)
    return panel
