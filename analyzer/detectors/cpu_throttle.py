"""CPU quota throttling: a cgroup's CFS bandwidth periods end throttled (nr_throttled rising).

Per cgroup, from ``cgroup_cpu``: the share of periods throttled (Δnr_throttled /
Δnr_periods) and the throttled time per second. The cgroup's quota comes from
``cgroup_limits`` (cpu.quota_us / cpu.period_us) when captured.

Two levels: windows where ≥ 10 % of periods end throttled, and *mild* windows where the
quota binds in a few percent of them (≥ 1 %), reported at ``info`` with the cgroup, the
share of periods and the CPU withheld. Severity follows the work withheld: the throttled
time over the window's length × the quota's CPUs (`_withheld_pct`), not the share of
periods (a job needing 60 % of a CPU under a 55 % quota ends most periods throttled yet
loses only a few percent of its time).
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors import gpu_starvation
from analyzer.detectors._base import Context, gpu_loss_severity, r, span, worst
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import overlap_s

NAME = "cpu_throttle"
INPUTS = (
    "cgroup_cpu (cpu.stat nr_periods, nr_throttled, throttled_usec)",
    "optional: cgroup_limits (cpu.max), gpu_util_mean_pct",
)
THRESHOLDS = {
    "enter_pct": 10.0,  # ≥ 10 % of periods throttled starts a window ...
    "leave_pct": 5.0,  # ... which lasts while above 5 %
    "min_s": 5,
    "merge_gap_s": 5,
    "mild_enter_pct": 1.0,  # a quota binding in a few percent of periods: info
    "mild_leave_pct": 0.5,
    "mild_min_s": 10,
    "major_withheld_pct": 10.0,  # throttled time ≥ 10 % of the quota's time for `major` ...
    "major_min_s": 30,  # ... sustained this long
    "minor_withheld_pct": 2.0,  # below this, and under enter_pct of periods: info
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("cgroup_cpu"):
        return NotEvaluated(
            NAME, "needs cgroup cpu.stat samples (series/cgroup.out with --cgroup or --pid)"
        )
    df = ctx.query(
        "SELECT cgroup, second_of(ts) AS ts, avg(throttled_pct) AS pct, avg(throttled_ms_per_s) AS ms, avg(usage_pct) AS usage "
        "FROM cgroup_cpu WHERE ts IS NOT NULL AND nr_periods IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
    )
    if df.height == 0 or df["pct"].null_count() == df.height:
        return NotEvaluated(
            NAME,
            "no cgroup in cgroup_cpu has CFS bandwidth counters (nr_periods): no CPU quota set, or cpu.stat not sampled over time",
        )
    quotas = _quotas(ctx)
    base, _ = ctx.gpu_dips()
    dips = gpu_starvation.dips_of(ctx, "cpu_throttle", "cpu_contention", "cpu_loader")
    capacity = ctx.gpu_capacity_s()
    out = []
    for cg, sub in df.group_by("cgroup", maintain_order=True):
        cg = cg[0]
        wins = _windows(sub, T["enter_pct"], T["leave_pct"], T["min_s"])
        mild = [
            w
            for w in _windows(sub, T["mild_enter_pct"], T["mild_leave_pct"], T["mild_min_s"])
            if not any(overlap_s(w, v) > 0 for v in wins)
        ]
        for w in sorted(wins + mild):
            inside = sub.filter((pl.col("ts") >= w[0]) & (pl.col("ts") < w[1]))
            outside = sub.filter((pl.col("ts") < w[0]) | (pl.col("ts") >= w[1]))
            mean_pct = float(inside["pct"].mean() or 0.0)
            throttled_s = float(inside["ms"].fill_null(0).sum()) / 1000.0
            usage = inside["usage"].mean()
            q = quotas.get(cg)
            dur = (w[1] - w[0]).total_seconds()
            near = [d for d in dips if overlap_s(w, d) > 0]
            lost = sum(ctx.gpu_seconds_lost(d, base) or 0.0 for d in near) if near else None
            withheld = _withheld_pct(throttled_s, dur, q)
            sev = _severity(mean_pct, withheld, dur)
            sev = worst(sev, gpu_loss_severity(lost, capacity) if near else None)
            qtxt = f"quota {q:.2f} CPUs" if q else "quota unknown (cgroup_limits not captured)"
            ev = [
                Evidence(
                    "throttled_pct",
                    r(mean_pct),
                    r(outside["pct"].median()),
                    "%",
                    "mean share of periods throttled",
                ),
                Evidence("throttled_pct", r(inside["pct"].max()), None, "%", "peak"),
                Evidence(
                    "throttled_ms_per_s",
                    r(inside["ms"].mean()),
                    r(outside["ms"].median()),
                    "ms/s",
                    "mean",
                ),
            ]
            if usage is not None:
                ev.append(
                    Evidence(
                        "usage_pct",
                        r(usage),
                        r(q * 100) if q else None,
                        "% of one CPU",
                        "mean CPU use vs the quota",
                    )
                )
            if q:
                ev.append(
                    Evidence(
                        "cpu.quota", r(q, 2), None, "CPUs", f"cgroup {cg}: cpu.max quota / period"
                    )
                )
            impact = {
                "seconds_throttled": r(throttled_s, 1),
                "throttled_share_pct": r(mean_pct),
                "withheld_pct": r(withheld),
            }
            if lost is not None:
                impact["gpu_seconds_lost"] = r(lost, 1)
            out.append(
                Finding(
                    key="CPU_THROTTLE",
                    kind=NAME,
                    title=f"{'Mild ' if w in mild else ''}CPU quota throttling in {cg or '/'} ({mean_pct:.0f}% of periods)",
                    severity=sev,
                    start=w[0],
                    end=w[1],
                    summary=f"Cgroup {cg or '/'} was throttled in {mean_pct:.0f}% of its CFS periods at {span(w)} ({throttled_s:.1f} s of run time withheld, {withheld:.0f}% of the time; {qtxt}"
                    + (f", using {usage / 100:.2f} CPUs" if usage is not None else "")
                    + ").",
                    impact=impact,
                    evidence=ev,
                    remediation=[
                        f"Raise or remove the CPU limit of {cg or 'the cgroup'}: `systemctl set-property <unit> CPUQuota=<N×100>%`, or write `max 100000` to /sys/fs/cgroup{('/' + cg.strip('/')) if cg and cg.strip('/') else '/<cgroup>'}/cpu.max; on Kubernetes raise resources.limits.cpu (or drop the limit and keep requests).",
                        "Allow short bursts above the quota: cpu.max.burst (cgroup v2, kernel ≥ 5.14) or cpu.cfs_burst_us (v1).",
                        "Fit the work to the quota: DataLoader num_workers, OMP_NUM_THREADS / torch.set_num_threads at most the quota's CPUs (threads above it only add throttling).",
                    ],
                )
            )
    return out


def _windows(sub: pl.DataFrame, enter: float, leave: float, min_s: float) -> list[tuple]:
    """Runs of one cgroup's share of periods throttled (``pct``) above ``enter``."""
    frame = intervals.runs(
        sub["ts"], sub["pct"], enter=enter, leave=leave, min_duration_s=min_s,
        merge_gap_s=T["merge_gap_s"],
    )  # fmt: skip
    return intervals.as_windows(frame)


def _withheld_pct(throttled_s: float, dur_s: float, quota: float | None) -> float:
    """Throttled time as a share of the time the quota's CPUs had: the kernel adds the
    throttled time of every CPU the cgroup runs on, so a 4-CPU quota can count 4 s of
    throttling per second."""
    return 100.0 * throttled_s / dur_s / max(quota or 1.0, 1.0) if dur_s else 0.0


def _severity(share_pct: float, withheld_pct: float, dur_s: float) -> str:
    """From the work withheld (throttled time / wall time), module docstring."""
    if withheld_pct >= T["major_withheld_pct"] and dur_s >= T["major_min_s"]:
        return "major"
    if withheld_pct >= T["minor_withheld_pct"] or share_pct >= T["enter_pct"]:
        return "minor"
    return "info"


def _quotas(ctx: Context) -> dict[str, float]:
    """cgroup -> quota in CPUs (quota_us / period_us), from ``cgroup_limits`` rows or, when
    the limits came as a snapshot (``snap/cgroup_limits.*.out`` lands in ``host_config``
    with its raw ``<path> <value>`` line), from ``cpu.max`` (v2) / ``cpu.cfs_quota_us`` and
    ``cpu.cfs_period_us`` (v1) there. A quota of ``max`` / ``-1`` is no quota."""
    quotas: dict[str, float] = {}
    if ctx.rows("host_config"):
        df = ctx.query(
            f"""WITH l AS (SELECT regexp_extract(raw, '{_LIMIT_RE}', ['path', 'file', 'a', 'b']) AS m, ts FROM host_config
                           WHERE source = 'cgroup_limits' AND raw IS NOT NULL),
                 v AS (SELECT coalesce(nullif(m.path, ''), '/') AS cgroup, m.file AS file, TRY_CAST(m.a AS DOUBLE) AS a,
                              TRY_CAST(m.b AS DOUBLE) AS b, ts FROM l WHERE m.file <> '')
            SELECT cgroup,
                   arg_max(a, ts) FILTER (file = 'cpu.max') AS q2,
                   arg_max(b, ts) FILTER (file = 'cpu.max') AS p2,
                   arg_max(a, ts) FILTER (file = 'cpu.cfs_quota_us') AS q1,
                   arg_max(a, ts) FILTER (file = 'cpu.cfs_period_us') AS p1
            FROM v GROUP BY cgroup"""
        )
        for row in df.iter_rows(named=True):
            q, per = (row["q2"], row["p2"]) if row["p2"] else (row["q1"], row["p1"])
            if q and per and q > 0:
                quotas[row["cgroup"]] = q / per
    if ctx.rows("cgroup_limits"):
        df = ctx.query(
            "SELECT cgroup, max(value) FILTER (key = 'cpu.quota_us') AS q, max(value) FILTER (key = 'cpu.period_us') AS p "
            "FROM cgroup_limits WHERE NOT coalesce(unlimited, false) GROUP BY cgroup"
        )
        quotas |= {
            row["cgroup"]: row["q"] / row["p"]
            for row in df.iter_rows(named=True)
            if row["q"] and row["p"]
        }
    return quotas


# "<path>/cpu.max <quota|max> <period>" or "<path>/cpu.cfs_(quota|period)_us <n>"; the
# cgroup is the path below /sys/fs/cgroup without a v1 controller mount (as in cgroup_cpu).
_LIMIT_RE = (
    r"^/sys/fs/cgroup(?:/(?:cpu|cpuacct)(?:,[a-z_]+)*)?(?P<path>/\S*)?/"
    r"(?P<file>cpu\.max|cpu\.cfs_quota_us|cpu\.cfs_period_us)\s+(?P<a>\S+)(?:\s+(?P<b>\d+))?\s*$"
)
