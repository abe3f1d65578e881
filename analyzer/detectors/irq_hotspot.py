"""IRQ hotspot: one CPU saturated by hardware interrupts and softirqs while others are not.

Typical cause: all NIC (or NVMe) queues' interrupts land on one core (irqbalance off, a
single queue, RPS off); network receive then drops packets and whatever runs on that core
(a data loader worker, NCCL proxy thread) starves.

A CPU is hot when its %irq + %soft is at least `enter_pct` (25 %) and `imbalance` times
the mean of the *other* CPUs plus `imbalance_pts` (with 2 CPUs a ratio to the mean of all
could never pass 2), and above its own usual level (its median over the capture plus
`over_own_pts`); it stays hot down to its median plus `leave_pts` (handlers winding down
at the end of a flood still take the CPU). Severity from the share of the CPU taken: `major` ≥ 95 % for ≥ 30 s,
`minor` ≥ 80 % or ≥ 25 % sustained for `minor_min_s`, else `info`.
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors._base import Context, r, span
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "irq_hotspot"
INPUTS = (
    "mpstat_cpu per CPU (mpstat -P ALL: %irq, %soft)",
    "optional: mpstat_irq (-I SCPU) for the softirq kind, net drops",
)
THRESHOLDS = {
    "enter_pct": 25.0,  # %irq + %soft of one CPU ≥ 25 (a quarter of the core) ...
    "leave_pts": 10.0,  # ... leaves 10 points above its own median (or 0.4 x the entry)
    "leave_ratio": 0.4,
    "imbalance": 3.0,  # ... and ≥ 3 x the other CPUs' mean + 10 points
    "imbalance_pts": 10.0,
    "over_own_pts": 15.0,  # ... and ≥ 15 points above its own median (usual NIC load)
    "min_s": 5,
    "merge_gap_s": 5,
    "minor_pct": 80.0,
    "minor_min_s": 20,
    "major_pct": 95.0,
    "major_min_s": 30,
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("mpstat_cpu"):
        return NotEvaluated(NAME, "needs per-CPU %irq/%soft: mpstat -P ALL")
    rows = "mpstat_cpu WHERE cpu >= 0 AND since_boot IS NOT TRUE AND ts IS NOT NULL AND (irq_pct IS NOT NULL OR soft_pct IS NOT NULL)"
    level = "coalesce(irq_pct, 0) + coalesce(soft_pct, 0)"
    n_rows, n_hot = ctx.con.sql(
        f"SELECT count(*), count(DISTINCT cpu) FILTER ({level} >= {T['enter_pct']}) FROM {rows}"
    ).fetchall()[0]
    if not n_rows:
        return NotEvaluated(NAME, "mpstat has no per-CPU rows with %irq/%soft")
    if not n_hot:  # no sample of any CPU reaches the entry level: nothing can be hot
        return []
    # Only CPUs with a sample at the entry level can be hot: the per-second mean over all
    # CPUs is computed in SQL so that the other CPUs' rows never leave DuckDB.
    # m: the mean of the *other* CPUs in that second
    df = ctx.query(
        f"""WITH per AS MATERIALIZED (SELECT cpu, second_of(ts) AS ts, avg({level}) AS v FROM {rows} GROUP BY 1, 2),
            s AS (SELECT ts, sum(v) AS s, count(*) AS n FROM per GROUP BY ts),
            hot AS (SELECT DISTINCT cpu FROM {rows} AND {level} >= {T["enter_pct"]})
           SELECT per.cpu, per.ts, per.v, (s.s - per.v) / greatest(s.n - 1, 1) AS m,
                  median(per.v) OVER (PARTITION BY per.cpu) AS own
           FROM per JOIN hot USING (cpu) JOIN s USING (ts) ORDER BY 1, 2"""
    )
    out = []
    for (cpu,), sub in df.group_by("cpu", maintain_order=True):
        own = float(sub["own"][0] or 0.0)
        enter = max(T["enter_pct"], own + T["over_own_pts"])
        leave = max(own + T["leave_pts"], T["leave_ratio"] * enter)
        apart = pl.col("v") >= T["imbalance"] * pl.col("m") + T["imbalance_pts"]
        v = sub.select(pl.when(apart).then(pl.col("v")).otherwise(0.0)).to_series()
        wins = intervals.as_windows(
            intervals.runs(
                sub["ts"],
                v,
                enter=enter,
                leave=leave,
                min_duration_s=T["min_s"],
                merge_gap_s=T["merge_gap_s"],
            )
        )
        for w in wins:
            inside = sub.filter((pl.col("ts") >= w[0]) & (pl.col("ts") < w[1]))
            mean, others = float(inside["v"].mean() or 0.0), float(inside["m"].mean() or 0.0)
            dur = (w[1] - w[0]).total_seconds()
            ev = [
                Evidence(
                    f"cpu{cpu} irq+soft_pct",
                    r(mean),
                    r(others),
                    "%",
                    "mean on this CPU vs the mean of the other CPUs",
                ),
                Evidence(f"cpu{cpu} irq+soft_pct", r(inside["v"].max()), None, "%", "peak"),
            ]
            ev += _softirqs(ctx, int(cpu), w)
            drops = ctx.stat("net_drop_per_s", w, "mean")
            if drops is not None:
                ev.append(
                    Evidence(
                        "net_drop_per_s",
                        r(drops),
                        r(ctx.baseline("net_drop_per_s", exclude=[w])),
                        "1/s",
                        "mean",
                    )
                )
            out.append(
                Finding(
                    key="IRQ_HOTSPOT",
                    kind=NAME,
                    title=f"CPU {cpu} {'saturated' if mean >= T['minor_pct'] else 'loaded'} by interrupts ({mean:.0f}% irq+softirq)",
                    severity=_severity(mean, dur),
                    start=w[0],
                    end=w[1],
                    summary=f"CPU {cpu} spent {mean:.0f}% of its time in interrupt and softirq handlers at {span(w)}, against {others:.0f}% on the other CPUs: what else runs there gets the rest.",
                    impact={"cpu": int(cpu), "irq_pct": r(mean)},
                    evidence=ev,
                    remediation=[
                        "Spread the interrupts: run irqbalance, or set `/proc/irq/<n>/smp_affinity_list` per queue (see snap/interrupts for which IRQs hit this CPU).",
                        "Use more NIC queues and steer receive work: `ethtool -L <iface> combined <N>`, RPS `echo <cpumask> > /sys/class/net/<iface>/queues/rx-<q>/rps_cpus`, RFS `sysctl -w net.core.rps_sock_flow_entries=32768`.",
                        "Keep latency-critical threads (trainer, loader workers) off the interrupt CPUs (taskset / cpuset).",
                    ],
                )
            )
    return out


def _severity(mean_pct: float, dur_s: float) -> str:
    """From the share of the CPU the handlers took, and for how long."""
    if mean_pct >= T["major_pct"] and dur_s >= T["major_min_s"]:
        return "major"
    if mean_pct >= T["minor_pct"] or dur_s >= T["minor_min_s"]:
        return "minor"
    return "info"


def _softirqs(ctx: Context, cpu: int, w: tuple) -> list[Evidence]:
    if not ctx.rows("mpstat_irq"):
        return []
    df = ctx.query(
        "SELECT irq, avg(per_s) AS rate FROM mpstat_irq WHERE kind = 'soft' AND cpu = $cpu AND ts >= $lo AND ts < $hi "
        "GROUP BY irq ORDER BY rate DESC LIMIT 2",
        {"cpu": int(cpu), "lo": w[0], "hi": w[1]},
    )
    return [
        Evidence(
            f"cpu{cpu} softirq {row['irq']}", r(row["rate"]), None, "1/s", "top softirq on this CPU"
        )
        for row in df.iter_rows(named=True)
    ]
