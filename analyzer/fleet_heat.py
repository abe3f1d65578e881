"""The fleet overview's heat strips: per metric, the hosts' values over time, bucketed.

``heat_strips(con, hosts, outliers, metrics, span)`` reads the fleet dataset's ``signals``
view and returns, per metric, a host × time-bucket matrix (≤ `MAX_BUCKETS` columns; the
worst value of each bucket: the minimum where lower is worse, else the maximum, so a dip or
spike survives) plus an ``outliers`` strip counting the metrics diverging in each bucket.
Buckets without samples stay empty (null). Only metrics that diverge somewhere (and GPU
utilisation, always) get a strip; the others are listed as ``quiet``. The page that draws
them is `reports.fleet_html`.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import duckdb

from analyzer.fleet_detect import BY_NAME

MAX_BUCKETS = 600


def heat_strips(
    con: duckdb.DuckDBPyConnection,
    hosts: list[str],
    outliers: list[Any],
    metrics: list[dict[str, Any]],
    span: tuple[datetime, datetime] | None,
) -> dict[str, Any]:
    """Host × bucket matrices for the overview (see module docstring)."""
    if span is None or not hosts:
        return {}
    t0 = span[0].timestamp()
    total_s = max(1.0, span[1].timestamp() - t0 + 1)
    step = max(1, math.ceil(total_s / MAX_BUCKETS))
    n = max(1, math.ceil(total_s / step))
    row = {h: i for i, h in enumerate(hosts)}
    x = [int((t0 + k * step) * 1000) for k in range(n)]
    strips: list[dict[str, Any]] = []
    diverged = {o.metric for o in outliers}
    have = {m["metric"] for m in metrics if m["hosts"] > 0}
    quiet = []
    for name in (m["metric"] for m in metrics):
        if name not in have:
            continue
        if name != "gpu_util" and name not in diverged:
            quiet.append(BY_NAME[name].label)
            continue
        m = BY_NAME[name]
        agg = "min" if m.direction < 0 else "max"
        cond = " OR ".join(f"{c} IS NOT NULL" for c in m.needs)
        rows = con.sql(
            "SELECT host, CAST(floor((epoch(ts) - $t0) / $step) AS BIGINT) AS k, "
            f"{agg}(CAST({m.expr} AS DOUBLE)) FROM signals WHERE ts IS NOT NULL AND ({cond}) "
            "GROUP BY 1, 2",
            params={"t0": t0, "step": step},
        ).fetchall()
        z: list[list[float | None]] = [[None] * n for _ in hosts]
        for host, k, v in rows:
            if host in row and 0 <= k < n and v is not None and math.isfinite(v):
                z[row[host]][k] = round(v, 1)
        strips.append(
            {"metric": name, "label": m.label, "unit": m.unit, "direction": m.direction, "z": z}
        )
    if outliers:
        z = [[0] * n for _ in hosts]
        for o in outliers:
            if o.host not in row:
                continue
            k0 = max(0, int((o.start.timestamp() - t0) // step))
            k1 = min(n - 1, int((o.end.timestamp() - 1 - t0) // step))
            for k in range(k0, k1 + 1):
                z[row[o.host]][k] += 1  # type: ignore[operator]
        strips.insert(
            0,
            {
                "metric": "outliers",
                "label": "metrics diverging from peers",
                "unit": "count",
                "direction": 1,
                "z": z,
            },
        )
    return {"x": x, "step_s": step, "hosts": hosts, "strips": strips, "quiet": quiet}
