"""GPU clock throttling: SM clocks drop while the GPU works and power or temperature is at its limit.

Per GPU (gpu_dmon): clock below 85 % of its own busy-time median while SM utilisation is
≥ 10 %, together with a power violation (pviol ≥ 5 %), a thermal violation flag, power at
≥ 97 % of the enforced limit or temperature within 3 °C of the slowdown threshold
(gpu_info). Windows of different GPUs are merged into one finding listing the GPUs.
"""

from __future__ import annotations

import polars as pl

from analyzer import intervals
from analyzer.detectors._base import Context, r, span
from analyzer.findings import Evidence, Finding, NotEvaluated

NAME = "gpu_throttle"
INPUTS = (
    "gpu_dmon with pclk_mhz (nvidia-smi dmon -s pucv)",
    "optional: pviol_pct, tviol, gpu_info limits",
)
THRESHOLDS = {
    "clock_frac": 0.85,
    "busy_sm_pct": 10.0,
    "pviol_pct": 5.0,
    "power_frac": 0.97,
    "temp_margin_c": 3.0,
    "min_s": 5,
    "merge_gap_s": 5,
    "major_drop_frac": 0.7,  # clocks below 70 % of normal ...
    "major_min_s": 60,  # ... for a minute is `major`
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("gpu_dmon"):
        return NotEvaluated(NAME, "needs nvidia-smi dmon")
    df = ctx.query(
        """SELECT gpu, date_trunc('second', ts) AS ts, avg(sm_pct) AS sm, min(pclk_mhz) AS clk, max(pviol_pct) AS pv,
                  max(tviol::INT) AS tv, avg(pwr_w) AS pw, max(gtemp_c) AS tc
           FROM gpu_dmon WHERE ts IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"""
    )
    if df.height == 0 or df["clk"].null_count() == df.height:
        return NotEvaluated(NAME, "gpu_dmon has no SM clock column (dmon without -s c)")
    limits = _limits(ctx)
    per_gpu: dict[int, list] = {}
    for (gpu,), sub in df.group_by("gpu", maintain_order=True):
        busy = sub.filter(pl.col("sm") >= 50)["clk"]
        normal = float(busy.median() or sub["clk"].median() or 0.0)
        lim = limits.get(int(gpu), {})
        at_limit = (pl.col("pv").fill_null(0) >= T["pviol_pct"]) | (pl.col("tv").fill_null(0) > 0)
        if lim.get("power"):
            at_limit = at_limit | (pl.col("pw") >= T["power_frac"] * lim["power"])
        if lim.get("slowdown"):
            at_limit = at_limit | (pl.col("tc") >= lim["slowdown"] - T["temp_margin_c"])
        hot = sub.select(
            (
                (pl.col("clk") < T["clock_frac"] * normal)
                & (pl.col("sm") >= T["busy_sm_pct"])
                & at_limit
            ).cast(pl.Float64)
        ).to_series()
        wins = intervals.as_windows(
            intervals.runs(
                sub["ts"], hot, enter=1.0, min_duration_s=T["min_s"], merge_gap_s=T["merge_gap_s"]
            )
        )
        per_gpu[int(gpu)] = [
            (w, sub.filter((pl.col("ts") >= w[0]) & (pl.col("ts") < w[1])), normal) for w in wins
        ]
    all_w = [w for xs in per_gpu.values() for w, _, _ in xs]
    if not all_w:
        return []
    merged = intervals.as_windows(
        intervals.merge(
            pl.DataFrame({"start": [a for a, _ in all_w], "end": [b for _, b in all_w]})
        )
    )
    out = []
    for m in merged:
        parts = [
            (g, inside, normal)
            for g, xs in per_gpu.items()
            for w, inside, normal in xs
            if intervals.overlap_s(w, m) > 0
        ]
        gpus = sorted({g for g, _, _ in parts})
        ev, drops, reasons = [], [], set()
        for g, inside, normal in parts:
            clk = float(inside["clk"].mean() or 0.0)
            drops.append(clk / normal if normal else 1.0)
            ev.append(
                Evidence(
                    f"gpu{g} pclk_mhz", r(clk, 0), r(normal, 0), "MHz", "mean vs busy-time median"
                )
            )
            if (inside["pv"].max() or 0) >= T["pviol_pct"]:
                reasons.add("power cap")
                ev.append(Evidence(f"gpu{g} pviol_pct", r(inside["pv"].mean()), None, "%", "mean"))
            if (inside["tv"].max() or 0) > 0 or (
                limits.get(g, {}).get("slowdown")
                and (inside["tc"].max() or 0) >= limits[g]["slowdown"] - T["temp_margin_c"]
            ):
                reasons.add("thermal")
                ev.append(
                    Evidence(
                        f"gpu{g} gtemp_c",
                        r(inside["tc"].max()),
                        limits.get(g, {}).get("slowdown"),
                        "C",
                        "peak vs slowdown temperature",
                    )
                )
            if not reasons:
                reasons.add("power limit")
        dur = (m[1] - m[0]).total_seconds()
        worst_frac = min(drops)
        why = " and ".join(sorted(reasons))
        out.append(
            Finding(
                key="GPU_THROTTLE",
                kind=NAME,
                title=f"GPU clocks throttled ({why}) on GPU {', '.join(map(str, gpus))}",
                severity="major"
                if worst_frac <= T["major_drop_frac"] and dur >= T["major_min_s"]
                else "minor",
                start=m[0],
                end=m[1],
                summary=f"GPU {', '.join(map(str, gpus))} ran at {worst_frac * 100:.0f}% of normal SM clock at {span(m)} ({why}).",
                impact={"gpus": len(gpus), "clock_pct_of_normal": r(worst_frac * 100)},
                evidence=ev,
                remediation=[
                    "Read the reason: `nvidia-smi -q -d PERFORMANCE` (Clocks Event Reasons: SW Power Cap, HW Slowdown, HW Thermal Slowdown).",
                    "Power cap: restore the default limit `nvidia-smi -pl <default W>`; check node power capping in the BMC and PSU redundancy.",
                    "Thermal: check fans, inlet temperature and airflow (`nvidia-smi -q -d TEMPERATURE`); HW Thermal Slowdown is a cooling fault.",
                ],
            )
        )
    return out


def _limits(ctx: Context) -> dict[int, dict[str, float]]:
    if not ctx.rows("gpu_info"):
        return {}
    df = ctx.query(
        "SELECT gpu, max(coalesce(enforced_power_limit_w, power_limit_w)) AS power, max(temp_slowdown_c) AS slowdown FROM gpu_info WHERE gpu IS NOT NULL GROUP BY gpu"
    )
    return {
        int(x["gpu"]): {k: x[k] for k in ("power", "slowdown") if x[k]}
        for x in df.iter_rows(named=True)
    }
