"""Time-aligned chart panels: SQL over the store in, :mod:`reports.charts` figures out.

Each panel builder returns a :class:`Panel`: a figure, or, when its data is absent, one line
saying what is missing. Every figure gets the same x range so that the panels line up and
zoom together; the finding/event shapes common to all panels travel once in the page payload
and the page script adds them to every chart. Each panel keeps the SQL it ran (``sql``) so
the appendix can show how to reproduce every number.

This module holds the shared machinery (:class:`Src` alternatives for one series, per-entity
metric queries); the builders live in :mod:`reports.panels_host` (CPU, memory, pressure,
events) and :mod:`reports.panels_devices` (disks, network, cgroups, GPUs, bpftrace
histograms); :mod:`reports.panel_registry` lists them in page order.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from html import escape
from typing import Any

import duckdb
import polars as pl

from analyzer.sql import ident, shown
from reports import charts
from reports.downsample import MAX_POINTS, bucket_gap, bucket_ms, gap_breaks, minmax_sql
from reports.queries import Store

ROW_POINTS = 2400  # points per chart row, shared by its traces
MIN_POINTS = 300


@dataclass
class Panel:
    """One chart slot of the report."""

    id: str
    title: str
    group: str  # sub-heading in the Panels section
    figure: dict[str, Any] | None = None
    absent: str = ""
    notes: list[str] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)
    flat: list[str] = field(default_factory=list)  # rows whose every value was 0: not drawn


@dataclass
class Frame:
    """What every panel shares: the x range (epoch ms)."""

    x_range: tuple[int, int] | None


@dataclass(frozen=True)
class Src:
    """One way to read a series: ``value`` (SQL over ``table``) per timed row.

    ``group`` means ``value`` is an aggregate over the rows of one ``ts`` (long tables such
    as meminfo). Rows averaged since boot and per-NUMA-node rows are left out.
    """

    table: str
    value: str
    needs: tuple[str, ...]
    where: str = ""
    group: bool = False

    def sql(self, store: Store) -> str:
        cond = "ts IS NOT NULL" + filters(store, self.table)
        if self.where:
            cond += f" AND ({self.where})"
        inner = f"SELECT epoch_ms(ts) AS x, {self.value} AS v FROM {ident(self.table)} WHERE {cond}"
        if self.group:
            inner += " GROUP BY ts"
        return f"SELECT x, v FROM ({inner}) WHERE v IS NOT NULL ORDER BY x"


def filters(store: Store, table: str) -> str:
    """Conditions every chart query of ``table`` needs (since-boot rows, per-node rows)."""
    cols = set(store.columns(table))
    out = ""
    if "since_boot" in cols:
        out += " AND NOT coalesce(since_boot, false)"
    if "node" in cols and table in ("meminfo", "proc_vmstat"):
        out += " AND node IS NULL"
    return out


def first_series(
    store: Store,
    alternatives: list[Src],
    *,
    x_range: tuple[int, int] | None = None,
    points: int = MAX_POINTS,
) -> tuple[Src, pl.DataFrame] | None:
    """The first alternative whose table has the columns and at least one value.

    The frame (x, v) is already reduced to ``points`` in DuckDB (min/max per bucket).
    """
    for src in alternatives:
        if not store.usable(src.table, "ts", *src.needs):
            continue
        q = minmax_sql(
            f"SELECT x, CAST(v AS DOUBLE) AS v0 FROM ({src.sql(store)})",
            ["v0"],
            points=points,
            x_range=x_range,
        )
        try:
            frame = store.con.sql(q).pl()
        except duckdb.Error:
            continue
        if frame.height:
            return src, frame.select("x", "v")
    return None


def source_name(store: Store, src: Src) -> str:
    """The table behind a series; for ``signals`` columns, the table that fed the signal."""
    if src.table == "signals" and store.usable("signal_sources", "signal", "source_table"):
        name = store.scalar(
            "SELECT any_value(source_table) FROM signal_sources WHERE signal = ?", [src.value]
        )
        if name:
            return str(name)
    return src.table


def host_row(
    store: Store, panel: Panel, label: str, specs: list[tuple[str, list[Src], float]], fr: Frame
) -> charts.Row | None:
    """One row of host-wide series; each spec is (name, alternatives, scale)."""
    traces = []
    points = per_trace(len(specs))
    sources: dict[str, list[str]] = {}
    for name, alternatives, scale in specs:
        found = first_series(store, alternatives, x_range=fr.x_range, points=points)
        if found is None:
            continue
        src, frame = found
        panel.sql.append(src.sql(store))
        sources.setdefault(source_name(store, src), []).append(name)
        gap = bucket_gap(fr.x_range, frame, points)
        traces.append(
            charts.line_trace(
                frame,
                "v",
                name,
                breaks=gap_breaks(frame, min_gap=gap),
                scale=scale,
                max_points=points,
            )
        )
    for table, names in sources.items():
        panel.notes.append(f"{', '.join(names)}: {table}")
    if traces and all(_all_zero(t) for t in traces):
        panel.flat.append(label)  # a chart of a flat zero line says nothing: one word instead
        return None
    return charts.Row(label, traces) if traces else None


def _all_zero(trace: dict[str, Any]) -> bool:
    """Every plotted value of the trace is 0 (gaps aside)."""
    values = [v for v in (trace.get("y") or []) if v is not None]
    return bool(values) and all(v == 0 for v in values)


def per_trace(n: int) -> int:
    """Points per trace when ``n`` traces share a row (:data:`ROW_POINTS` in all)."""
    return max(MIN_POINTS, min(MAX_POINTS, ROW_POINTS // max(n, 1)))


@dataclass(frozen=True)
class Metric:
    """One per-entity row: ``value`` SQL over ``table`` (all rows keyed by ``entity``)."""

    label: str
    table: str
    entity: str
    value: str
    needs: tuple[str, ...]
    scale: float = 1.0
    low_is_bad: bool = False  # heatmap columns show the lowest sample (a stall), not the highest


def entity_rows(
    store: Store,
    panel: Panel,
    metrics: list[Metric],
    *,
    rank: dict[str, str],
    where: dict[str, str] | None = None,
    prefix: str = "",
    limit: int = 8,
    x_range: tuple[int, int] | None = None,
    heatmap_above: int = 0,
) -> list[charts.Row]:
    """Rows of per-entity lines (devices, interfaces, GPUs…), top ``limit`` per table.

    ``rank[table]`` orders the entities (SQL aggregate, highest first; ``"natural"`` keeps
    numeric order); each entity keeps one colour across rows.

    With more than ``heatmap_above`` entities (0: never), each metric becomes two rows
    instead of one line per entity: a heatmap (entity × time; each column's highest sample,
    or lowest for a ``low_is_bad`` metric) and a row with the median of the entities per
    column plus the :func:`outliers` as lines (their real min/max samples).
    """
    usable = [m for m in metrics if store.usable(m.table, "ts", m.entity, *m.needs)]
    by_table: dict[str, list[Metric]] = {}
    for m in usable:
        by_table.setdefault(m.table, []).append(m)
    frames: dict[str, pl.DataFrame] = {}
    points: dict[str, int] = {}
    colors: dict[str, str] = {}
    heat: dict[str, tuple[pl.DataFrame, dict[str, list[float | None]], list[str]]] = {}
    for table, ms in by_table.items():
        entity = ident(ms[0].entity)
        cond = "ts IS NOT NULL" + filters(store, table) + f" AND {entity} IS NOT NULL"
        if where and where.get(table):
            cond += f" AND ({where[table]})"
        order = rank.get(table, "natural")
        top_q = (
            f"SELECT {entity} AS e FROM {ident(table)} WHERE {cond} GROUP BY ALL "
            + ("ORDER BY e" if order == "natural" else f"ORDER BY {order} DESC NULLS LAST, e")
            + f" LIMIT {int(limit)}"
        )
        top = [r[0] for r in store.con.sql(top_q).fetchall()]
        total = store.scalar(f"SELECT count(DISTINCT {entity}) FROM {ident(table)} WHERE {cond}")
        if not top:
            continue
        if total and total > len(top):
            panel.notes.append(f"{table}: top {len(top)} of {total} by {order}")
        values = ", ".join(f"CAST({m.value} AS DOUBLE) AS v{i}" for i, m in enumerate(ms))
        q = (
            f"SELECT epoch_ms(ts) AS x, {_label(prefix, entity)} AS g, {values} "
            f"FROM {ident(table)} WHERE {cond} AND list_contains($keys, {entity})"
        )
        keys = {"keys": top}
        panel.sql.append(shown(q + " ORDER BY g, x", keys))
        points[table] = per_trace(len(top))
        if heatmap_above and len(top) > heatmap_above:
            heat[table] = _heat(store, panel, q, ms, keys, x_range)
            points[table] = per_trace(MAX_OUTLIERS + 1)
        reduced = minmax_sql(
            q,
            [f"v{i}" for i in range(len(ms))],
            points=points[table],
            x_range=x_range,
            grouped=True,
        )
        frames[table] = store.con.sql(reduced, params=keys).pl()
        for k in top:
            colors.setdefault(prefix + str(k), charts.PALETTE[len(colors) % len(charts.PALETTE)])
        if table in heat:
            heat[table][2].extend(prefix + str(k) for k in top)
    rows = []
    legend: set[str] = set()
    for table, ms in by_table.items():
        if table not in frames:
            continue
        for i, m in enumerate(ms):
            part = frames[table].filter(pl.col("m") == i).select("x", "g", "v")
            if not part.height:
                continue
            gap = bucket_gap(x_range, part, points[table])
            if table in heat:
                rows += _heat_rows(m, i, heat[table], part, colors, gap, legend)
                continue
            traces = charts.entity_traces(
                part,
                "g",
                "v",
                colors,
                first_row=False,
                scale=m.scale,
                max_points=MAX_POINTS,
                min_gap=gap,
            )
            for t in traces:  # one legend entry per entity, in its first row
                t["showlegend"] = t["legendgroup"] not in legend
                legend.add(t["legendgroup"])
            rows.append(charts.Row(m.label, traces))
    return rows


MAX_OUTLIERS = 2
DEVICE_COLUMNS = 450  # heatmap columns of a device metric (several per panel: half per-CPU's)
OUTLIER_MADS = 3.0
OUTLIER_SHARE = 0.05


def outliers(means: dict[str, float | None], k: int = MAX_OUTLIERS) -> list[str]:
    """The entities drawn as lines beside a heatmap: at most ``k``, farthest first.

    An entity is an outlier when its mean is farther from the median of all the entities'
    means than both 3 × the median absolute deviation of those means and 5 % of the median's
    size (and not at all equal to it): eight GPUs within noise of each other draw none.

    >>> outliers({"GPU 0": 95, "GPU 1": 94, "GPU 2": 96, "GPU 3": 95, "GPU 4": 40, "GPU 5": 95})
    ['GPU 4']
    >>> outliers({"a": 50.0, "b": 50.5, "c": 49.6, "d": 50.2, "e": 49.9})
    []
    >>> outliers({"a": 0, "b": 0, "c": 0, "d": 0, "e": 30, "f": 20, "g": 1})
    ['e', 'f']
    """
    vals = {e: float(v) for e, v in means.items() if v is not None and math.isfinite(v)}
    if len(vals) < 3:
        return []
    med = statistics.median(vals.values())
    dist = {e: abs(v - med) for e, v in vals.items()}
    mad = statistics.median(dist.values())
    limit = max(OUTLIER_MADS * mad, OUTLIER_SHARE * abs(med))
    far = [e for e, d in dist.items() if d > limit and d > 0]
    return sorted(far, key=lambda e: -dist[e])[:k]


def _heat(
    store: Store,
    panel: Panel,
    q: str,
    ms: list[Metric],
    keys: dict[str, Any],
    x_range: tuple[int, int] | None,
) -> tuple[pl.DataFrame, dict[str, list[float | None]], list[str]]:
    """Heatmap cells (x bucket, g, one column per metric) and each entity's mean per metric."""
    if x_range is not None:
        lo, hi = x_range
    else:
        lo, hi = store.con.sql(f"SELECT min(x), max(x) FROM ({q})", params=keys).fetchall()[0]
    width = bucket_ms(int(lo or 0), int(hi or 0), DEVICE_COLUMNS)
    cells = ", ".join(f"{'min' if m.low_is_bad else 'max'}(v{i}) AS v{i}" for i, m in enumerate(ms))
    hq = f"SELECT (x // $hs_width) * $hs_width AS x, g, {cells} FROM ({q}) GROUP BY ALL ORDER BY x, g"
    hkeys = {**keys, "hs_width": width}
    panel.sql.append(shown(hq, hkeys))
    means_q = ", ".join(f"avg(v{i})" for i in range(len(ms)))
    means: dict[str, list[float | None]] = {
        str(r[0]): list(r[1:])
        for r in store.con.sql(f"SELECT g, {means_q} FROM ({q}) GROUP BY g", params=keys).fetchall()
    }
    if width > 1000:
        panel.notes.append(f"one heatmap column = {width / 1000:.0f} s")
    return store.con.sql(hq, params=hkeys).pl(), means, []


def _heat_rows(
    m: Metric,
    i: int,
    heat: tuple[pl.DataFrame, dict[str, list[float | None]], list[str]],
    part: pl.DataFrame,
    colors: dict[str, str],
    gap: int,
    legend: set[str],
) -> list[charts.Row]:
    """A metric of many entities: its heatmap row and its median-and-outliers row."""
    cells, means, order = heat
    col = f"v{i}"
    frame = cells.select("x", "g", (pl.col(col) * m.scale).alias("v")).drop_nulls("v")
    if not frame.height:
        return []
    unit = _unit(m.label)
    hover = "%{y}: %{z}" + (f" {escape(unit)}" if unit else "")
    trace = charts.heatmap_trace(
        frame, "g", "v", colorbar=unit, zmax=100.0 if unit == "%" else None,
        order=order[::-1], hover=hover,  # plotly draws the first category at the bottom
    )  # fmt: skip
    if unit != "%":
        trace.pop("zmin", None)  # temperatures, clocks: the colours span the values seen
    worst = "lowest" if m.low_is_bad else "highest"
    n = len(trace["y"])
    rows = [charts.Row(f"{m.label}, per device ({worst} sample per column)", [trace],
                       height=max(charts.ROW_HEIGHT, 12 * n))]  # fmt: skip
    median = frame.group_by("x").agg(pl.col("v").median()).sort("x")
    name = f"median of {n}"
    lines = [
        charts.line_trace(
            median, "v", name, breaks=gap_breaks(median, min_gap=gap), legendgroup=name,
            showlegend=name not in legend, line={"width": 1.5, "color": "#888", "dash": "dot"},
        )
    ]  # fmt: skip
    legend.add(name)
    odd = outliers({g: v[i] for g, v in means.items()})
    if odd:
        lines += charts.entity_traces(
            part.filter(pl.col("g").is_in(odd)), "g", "v", colors, first_row=False,
            scale=m.scale, max_points=MAX_POINTS, min_gap=gap,
        )  # fmt: skip
        for t in lines[1:]:
            t["showlegend"] = t["legendgroup"] not in legend
            legend.add(t["legendgroup"])
    label = f"{m.label}: median" + (f" and outliers ({', '.join(odd)})" if odd else ", no outlier")
    rows.append(charts.Row(label, lines))
    return rows


def _unit(label: str) -> str:
    """``'Power (W)'`` → ``'W'`` (the last parenthesised part of a row label)."""
    found = re.search(r"\(([^()]*)\)\s*$", label)
    return found.group(1) if found else ""


def _label(prefix: str, entity: str) -> str:
    return f"'{prefix}' || CAST({entity} AS VARCHAR)" if prefix else f"CAST({entity} AS VARCHAR)"
