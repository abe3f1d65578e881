"""Sampling gaps: a time-series collector missed samples.

A collector that should print every ``step`` seconds (its median spacing) but goes quiet
for longer than max(3 × step, step + 2 s) either could not run (the host was too loaded to
schedule it, or blocked on memory/I/O) or stalled (nvidia-smi on a sick GPU). That is a
symptom in itself, and every other finding in that window is marked with a caveat: its
numbers there are incomplete. A collector that stops early counts: its silence is measured
to the last sample of any collector, or to the capture end minus 30 s when every collector
went quiet (the end snapshots that follow the series are not a gap) — unless it exited 0
after printing all its samples (``vmstat 1 N`` ends on its own while the samplers go on).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from analyzer import intervals
from analyzer.detectors._base import Context, span
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "sampling_gap"
INPUTS = (
    "any time-series table (vmstat, iostat, mpstat, pidstat, psi, meminfo, proc_vmstat, cgroup, gpu_dmon, sar, bpftrace)",
)
THRESHOLDS = {
    "gap_steps": 3.0,
    "gap_extra_s": 2.0,
    "min_samples": 5,
    "minor_collectors": 2,
    "major_collectors": 3,
    "major_gap_s": 30,
    "end_grace_s": 30,  # end snapshots after the series may take this long
}
T = THRESHOLDS
TABLES = {  # table -> has a since_boot column
    "vmstat": True, "iostat_device": True, "iostat_cpu": True, "mpstat_cpu": True, "pidstat": True, "psi": False,
    "meminfo": False, "proc_vmstat": False, "cgroup_cpu": False, "cgroup_memory": False, "gpu_dmon": False,
    "sar_cpu": False, "sar_queue": False, "sar_task": False, "sar_paging": False, "sar_net_dev": False, "bpf_hist": False,
}  # fmt: skip


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    present = [t for t in TABLES if ctx.rows(t)]
    if not present:
        return NotEvaluated(NAME, "no time-series table in the bundle")
    parts = [
        f"SELECT DISTINCT source_file AS f, second_of(ts) AS sec FROM {t} WHERE ts IS NOT NULL"
        + (" AND since_boot IS NOT TRUE" if TABLES[t] else "")
        for t in present
    ]
    end = ctx.signals["ts"].max() if ctx.signals.height else None
    grace = end - timedelta(seconds=T["end_grace_s"]) if end is not None else None
    # a collector that stopped early: measured to the last sample of any collector (the
    # end snapshots after the series are not a gap), or to the capture end minus a grace
    end_sql = "greatest((SELECT max(sec) FROM s) + INTERVAL 1 SECOND, $grace::TIMESTAMPTZ)"
    # a collector that printed its full count and exited 0 (vmstat 1 N) has no tail gap
    done = (
        "SELECT file FROM collectors WHERE exit_code = 0"
        if ctx.rows("collectors")
        else "SELECT NULL::VARCHAR AS file WHERE false"
    )
    gaps = ctx.query(
        f"""WITH s AS (SELECT DISTINCT f, sec FROM ({" UNION ALL ".join(parts)})),
            d AS (SELECT f, sec, coalesce(lead(sec) OVER (PARTITION BY f ORDER BY sec),
                                          CASE WHEN f IN ({done}) THEN sec END) AS nxt FROM s),
            st AS (SELECT f, median(epoch(nxt) - epoch(sec)) AS step, count(*) AS n FROM d WHERE nxt > sec GROUP BY f)
        SELECT d.f, d.sec, coalesce(d.nxt, {end_sql}) AS nxt, st.step FROM d JOIN st USING (f)
        WHERE st.n >= {int(T["min_samples"])} AND epoch(coalesce(d.nxt, {end_sql})) - epoch(d.sec) > greatest({T["gap_steps"]} * st.step, st.step + {T["gap_extra_s"]})
        ORDER BY d.sec""",
        {"grace": grace},
    )
    if gaps.height == 0:
        return []
    # the missed stretch: from one step after the last sample to the next sample
    gaps = gaps.with_columns(
        start=pl.col("sec") + pl.duration(seconds=pl.col("step")), end=pl.col("nxt")
    )
    merged = intervals.as_windows(intervals.merge(gaps.select("start", "end")))
    out = []
    for w in merged:
        files = gaps.filter((pl.col("start") < w[1]) & (pl.col("end") > w[0]))
        names = sorted(set(files["f"].to_list()))
        n, dur = len(names), (w[1] - w[0]).total_seconds()
        sev = (
            "major"
            if n >= T["major_collectors"] and dur >= T["major_gap_s"]
            else "minor"
            if n >= T["minor_collectors"] or dur >= T["major_gap_s"]
            else "info"
        )
        out.append(
            Finding(
                key="SAMPLING_GAP",
                kind=NAME,
                title=f"{n} collector(s) missed samples for {dur:.0f} s",
                severity=sev,
                start=w[0],
                end=w[1],
                summary=f"No samples from {', '.join(names)} at {span(w)}"
                + (
                    ": several collectors stopped at once, so the host itself was stalled."
                    if n >= 2
                    else "."
                ),
                impact={"collectors": n, "missing_s": dur},
                evidence=[
                    Evidence(
                        "missing_s",
                        dur,
                        float(row["step"]),
                        "s",
                        f"{row['f']}: gap vs its normal step",
                    )
                    for row in files.unique("f").iter_rows(named=True)
                ],
                remediation=[
                    "Look at the other findings in this window: CPU contention, memory pressure or I/O stalls that also starved the collectors.",
                    "A single stalled collector (nvidia-smi, bpftrace) points at that tool or its device: check its .err file in the bundle.",
                ],
            )
        )
    return out
