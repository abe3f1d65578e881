"""Stragglers and outliers across the hosts of one job, in SQL over the fleet dataset.

CPU throttling is compared as throttled *time* (ms/s), not as the share of CFS periods:
a host without a CPU quota has no periods (share NULL) but a measured 0 ms/s, and a
throttled host must stand out against exactly those peers.

Hosts are aligned by their UTC seconds (the ``signals`` grid of each host). For each key
metric and each second that at least `MIN_HOSTS` hosts report, the peers' median and
median absolute deviation (MAD) are computed over all reporting hosts. A host-second
*diverges* when it is worse than the median (lower GPU utilisation; higher throttling,
disk latency, network errors or pressure) by at least the metric's ``min_abs`` and by at
least ``K`` × max(1.4826 × MAD, ``mad_floor``). Divergent seconds closer than
`MERGE_GAP_S` join one window; windows shorter than `MIN_WINDOW_S` are dropped as noise.

A host's score is the sum over metrics of the share (%) of its compared seconds that lie
in divergence windows; hosts are ranked by score (ties: by name). Nothing is filled in: a
second a host did not report is not compared, and a metric reported by fewer than
`MIN_HOSTS` hosts is listed as not evaluated.

The SQL is standard where practical (``percentile_cont ... WITHIN GROUP``, window
functions, ``INTERVAL``), so the same query runs on Spark SQL; Trino spells the median
``approx_percentile(v, 0.5)`` (docs/scale.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from analyzer.sql import ident

MIN_HOSTS = 3
K = 3.0
MERGE_GAP_S = 5
MIN_WINDOW_S = 10
LONG = "_fleet_long"  # temp table: the long form, built once per analysis


@dataclass(frozen=True)
class Metric:
    """A compared signal: ``expr`` over ``signals``; ``direction`` -1 = lower is worse."""

    name: str
    label: str
    expr: str
    unit: str
    direction: int
    min_abs: float
    mad_floor: float
    needs: tuple[str, ...]


METRICS: tuple[Metric, ...] = (
    Metric("gpu_util", "GPU utilisation", "gpu_util_mean_pct", "%", -1, 15.0, 5.0, ("gpu_util_mean_pct",)),
    # a clock-capped node's GPUs may look busy (100 % util) and still run slow
    Metric("gpu_clock", "GPU SM clock (slowest GPU)", "gpu_sm_clock_min_mhz", "MHz", -1, 150.0, 30.0, ("gpu_sm_clock_min_mhz",)),
    Metric("gpu_power_cap", "GPU power-cap throttling", "gpu_pviol_max_pct", "%", 1, 10.0, 5.0, ("gpu_pviol_max_pct",)),
    Metric("throttled", "CPU throttling", "throttled_ms_per_s", "ms/s", 1, 50.0, 20.0, ("throttled_ms_per_s",)),
    Metric("disk_w_await", "disk write latency", "disk_w_await_max_ms", "ms", 1, 20.0, 5.0, ("disk_w_await_max_ms",)),
    Metric(
        "net_errors", "network errors + drops",
        "coalesce(net_err_per_s, 0) + coalesce(net_drop_per_s, 0)", "1/s", 1, 1.0, 1.0,
        ("net_err_per_s", "net_drop_per_s"),
    ),
    Metric("psi_cpu", "CPU pressure", "psi_cpu_some_pct", "%", 1, 10.0, 5.0, ("psi_cpu_some_pct",)),
    Metric("psi_io", "I/O pressure", "psi_io_some_pct", "%", 1, 10.0, 5.0, ("psi_io_some_pct",)),
    Metric("psi_mem", "memory pressure", "psi_mem_some_pct", "%", 1, 10.0, 5.0, ("psi_mem_some_pct",)),
)  # fmt: skip
BY_NAME = {m.name: m for m in METRICS}


def _long_sql(metrics: tuple[Metric, ...]) -> str:
    """One row per (metric, host, second) with a value."""
    parts = []
    for m in metrics:
        cond = " OR ".join(f"{c} IS NOT NULL" for c in m.needs)
        parts.append(
            f"SELECT '{m.name}' AS metric, host, ts, CAST({m.expr} AS DOUBLE) AS v "
            f"FROM signals WHERE ts IS NOT NULL AND ({cond})"
        )
    return " UNION ALL ".join(parts)


def _names(metrics: tuple[Metric, ...]) -> str:
    return ", ".join(f"'{m.name}'" for m in metrics)


def _params_sql(metrics: tuple[Metric, ...]) -> str:
    rows = ", ".join(f"('{m.name}', {m.direction}, {m.min_abs}, {m.mad_floor})" for m in metrics)
    return f"SELECT * FROM (VALUES {rows}) AS p(metric, direction, min_abs, mad_floor)"


def scored_sql(metrics: tuple[Metric, ...] = METRICS, long: str | None = None) -> str:
    """Every host-second with its peers' median/MAD and whether it diverges.

    ``long`` names a table already holding `_long_sql` rows (else it is computed inline)."""
    source = f"SELECT * FROM {long}" if long else _long_sql(metrics)
    return f"""
    WITH m AS ({source}),
    p AS ({_params_sql(metrics)}),
    peer AS (
        SELECT metric, ts, count(*) AS n_hosts,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med
        FROM m GROUP BY metric, ts HAVING count(*) >= {MIN_HOSTS}),
    spread AS (
        SELECT m.metric, m.ts, percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(m.v - peer.med)) AS mad
        FROM m JOIN peer ON m.metric = peer.metric AND m.ts = peer.ts
        GROUP BY m.metric, m.ts)
    SELECT m.metric, m.host, m.ts, m.v, peer.med, spread.mad, peer.n_hosts,
           (m.v - peer.med) * p.direction AS excess,
           CASE WHEN (m.v - peer.med) * p.direction >= p.min_abs
                 AND (m.v - peer.med) * p.direction >= {K} * greatest(1.4826 * spread.mad, p.mad_floor)
                THEN 1 ELSE 0 END AS divergent
    FROM m
    JOIN peer ON m.metric = peer.metric AND m.ts = peer.ts
    JOIN spread ON m.metric = spread.metric AND m.ts = spread.ts
    JOIN p ON m.metric = p.metric"""


def windows_sql(metrics: tuple[Metric, ...] = METRICS, long: str | None = None) -> str:
    """Divergence windows per host and metric: islands of divergent seconds (gaps up to
    `MERGE_GAP_S` bridged) spanning at least `MIN_WINDOW_S` seconds."""
    return f"""
    WITH s AS ({scored_sql(metrics, long)}),
    d AS (SELECT metric, host, ts, v, med FROM s WHERE divergent = 1),
    g AS (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY metric, host ORDER BY ts)
                             <= INTERVAL '{MERGE_GAP_S}' SECOND THEN 0 ELSE 1 END AS brk
          FROM d),
    i AS (SELECT *, sum(brk) OVER (PARTITION BY metric, host ORDER BY ts
                                   ROWS UNBOUNDED PRECEDING) AS island FROM g)
    SELECT metric, host, island, min(ts) AS start_ts, max(ts) AS last_ts,
           count(*) AS divergent_s, avg(v) AS host_mean, avg(med) AS peer_median
    FROM i GROUP BY metric, host, island
    HAVING max(ts) - min(ts) >= INTERVAL '{MIN_WINDOW_S - 1}' SECOND"""


@dataclass
class Outlier:
    host: str
    metric: str
    label: str
    unit: str
    start: datetime
    end: datetime  # exclusive: last divergent second + 1 s
    divergent_s: int
    host_mean: float
    peer_median: float

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()


def detect(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Outlier windows, per-host scores and per-metric coverage from the ``signals`` view.

    Returns ``{"outliers": [Outlier], "scores": {host: {metric: pct}}, "metrics":
    [{metric, label, unit, hosts, seconds, status, reason}], "compared": {host: {metric: s}}}``.
    """
    cols = {r[0] for r in con.sql(f"DESCRIBE {ident('signals')}").fetchall()}
    usable = tuple(m for m in METRICS if all(c in cols for c in m.needs))
    if usable:
        con.sql(f"CREATE OR REPLACE TEMP TABLE {LONG} AS {_long_sql(usable)}")
    coverage = _coverage(con, usable)
    metric_rows = []
    for m in METRICS:
        hosts, secs = coverage.get(m.name, (0, 0))
        if m not in usable:
            status, reason = "not evaluated", "the signals table has no such column"
        elif secs == 0:
            status = "not evaluated"
            reason = (
                f"fewer than {MIN_HOSTS} hosts report it at the same time ({hosts} host(s) have it)"
            )
        else:
            status, reason = "evaluated", None
        metric_rows.append(
            {"metric": m.name, "label": m.label, "unit": m.unit, "hosts": hosts,
             "seconds": secs, "status": status, "reason": reason}
        )  # fmt: skip
    evaluated = tuple(m for m in usable if coverage.get(m.name, (0, 0))[1] > 0)
    if not evaluated:
        return {"outliers": [], "scores": {}, "metrics": metric_rows, "compared": {}}
    compared = _compared(con, evaluated)
    rows = con.sql(
        f"SELECT * FROM ({windows_sql(evaluated, LONG)}) AS w "
        f"WHERE divergent_s >= 1 ORDER BY host, metric, start_ts"
    ).fetchall()
    outliers = []
    for metric, host, _island, start, last, n, host_mean, peer_median in rows:
        end = last + _second()
        if (end - start).total_seconds() < MIN_WINDOW_S:
            continue
        m = BY_NAME[metric]
        outliers.append(
            Outlier(
                host,
                metric,
                m.label,
                m.unit,
                start,
                end,
                int(n),
                float(host_mean),
                float(peer_median),
            )
        )
    scores: dict[str, dict[str, float]] = {}
    for o in outliers:
        total = compared.get(o.host, {}).get(o.metric) or 1
        per = scores.setdefault(o.host, {})
        per[o.metric] = per.get(o.metric, 0.0) + 100.0 * o.divergent_s / total
    return {"outliers": outliers, "scores": scores, "metrics": metric_rows, "compared": compared}


def _second() -> Any:
    from datetime import timedelta

    return timedelta(seconds=1)


def _coverage(
    con: duckdb.DuckDBPyConnection, metrics: tuple[Metric, ...]
) -> dict[str, tuple[int, int]]:
    """metric -> (hosts reporting it, seconds at which >= MIN_HOSTS hosts report it)."""
    if not metrics:
        return {}
    rows = con.sql(
        f"""WITH m AS (SELECT * FROM {LONG}),
        per AS (SELECT metric, ts, count(*) AS n FROM m GROUP BY metric, ts)
        SELECT h.metric, h.hosts, coalesce(s.secs, 0) FROM
          (SELECT metric, count(DISTINCT host) AS hosts FROM m GROUP BY metric) AS h
          LEFT JOIN (SELECT metric, count(*) AS secs FROM per WHERE n >= {MIN_HOSTS} GROUP BY metric) AS s
          ON h.metric = s.metric"""
    ).fetchall()
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def _compared(
    con: duckdb.DuckDBPyConnection, metrics: tuple[Metric, ...]
) -> dict[str, dict[str, int]]:
    """host -> metric -> seconds the host was compared with at least MIN_HOSTS - 1 peers."""
    rows = con.sql(
        f"""WITH m AS (SELECT * FROM {LONG} WHERE metric IN ({_names(metrics)})),
        per AS (SELECT metric, ts FROM m GROUP BY metric, ts HAVING count(*) >= {MIN_HOSTS})
        SELECT m.host, m.metric, count(*) FROM m JOIN per ON m.metric = per.metric AND m.ts = per.ts
        GROUP BY m.host, m.metric"""
    ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for host, metric, n in rows:
        out.setdefault(str(host), {})[str(metric)] = int(n)
    return out


def rank_hosts(hosts: list[str], scores: dict[str, dict[str, float]]) -> list[str]:
    """Hosts by total score, highest first; ties by name.

    >>> rank_hosts(["a", "b", "c"], {"c": {"gpu_util": 50.0}, "a": {"psi_io": 5.0}})
    ['c', 'a', 'b']
    """
    return sorted(hosts, key=lambda h: (-sum(scores.get(h, {}).values()), h))
