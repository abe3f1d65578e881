"""Latency histograms before/after (for `hindsight diff`): bpftrace/bcc ``runqlat`` and
``biolat`` buckets (``bpf_hist``) summed over the aligned span of each capture.

Units are normalised to µs (``usecs``; ``nsecs`` × 0.001, ``msecs`` × 1000, ``secs`` ×
10⁶). A histogram stamped ``ts`` is counted when ``ts`` lies in [first second, first
second + aligned span). Percentiles p50/p95/p99 are the upper bound of the bucket where the
cumulative count reaches the quantile (an open last bucket counts as twice its lower
bound); ``max`` is the upper bound of the highest non-empty bucket. A side without
histograms is ``None``, never zeros.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
HISTOGRAMS = (
    ("runqlat", "run-queue latency", "%runqlat%"),
    ("biolat", "block I/O latency", "%biolat%"),
)


def hist_summary(
    con: duckdb.DuckDBPyConnection, pattern: str, lo: datetime | None, hi_s: int
) -> dict[str, Any] | None:
    """Buckets (µs) summed over [lo, lo + hi_s) of the histogram files matching ``pattern``."""
    has = con.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'bpf_hist'"
    ).fetchall()[0][0]
    if not has or lo is None:
        return None
    rows = con.sql(
        """SELECT bucket_low * f AS low_us, bucket_high * f AS high_us, sum(count) AS n FROM (
              SELECT bucket_low, bucket_high, count,
                     CASE unit WHEN 'nsecs' THEN 0.001 WHEN 'msecs' THEN 1000 WHEN 'secs' THEN 1e6 ELSE 1 END AS f
              FROM bpf_hist WHERE source_file ILIKE $pattern AND bucket_low IS NOT NULL AND ts IS NOT NULL
                AND ts >= $lo::TIMESTAMPTZ AND ts < $lo::TIMESTAMPTZ + to_seconds($hi_s))
            GROUP BY 1, 2 ORDER BY 1""",
        params={"pattern": pattern, "lo": lo, "hi_s": int(hi_s)},
    ).fetchall()
    total = sum(int(r[2]) for r in rows)
    if total == 0:
        return None
    buckets = [{"low_us": r[0], "high_us": r[1], "count": int(r[2])} for r in rows]
    out: dict[str, Any] = {"total": total, "buckets": buckets}
    for name, q in QUANTILES:
        out[name] = _bucket_quantile(buckets, total, q)
    out["max"] = next(
        (b["high_us"] or b["low_us"] * 2 for b in reversed(buckets) if b["count"]), None
    )
    return out


def _bucket_quantile(buckets: list[dict[str, Any]], total: int, q: float) -> float | None:
    cum = 0
    for b in buckets:
        cum += b["count"]
        if cum >= q * total:
            return b["high_us"] if b["high_us"] is not None else b["low_us"] * 2
    return None


def compare_histograms(
    cb: duckdb.DuckDBPyConnection,
    ca: duckdb.DuckDBPyConnection,
    t0_before: datetime | None,
    t0_after: datetime | None,
    aligned_s: int,
) -> list[dict[str, Any]]:
    """Each histogram kind captured on at least one side, both sides summarised."""
    out = []
    for name, label, pattern in HISTOGRAMS:
        hb = hist_summary(cb, pattern, t0_before, aligned_s)
        ha = hist_summary(ca, pattern, t0_after, aligned_s)
        if hb is not None or ha is not None:
            out.append({"name": name, "label": label, "unit": "µs", "before": hb, "after": ha})
    return out
