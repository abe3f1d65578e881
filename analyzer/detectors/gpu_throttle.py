"""GPU clock throttling: SM clocks drop while the GPU works and power or temperature is at its limit.

Per GPU (gpu_dmon): clock below 85 % of its own busy-time median while SM utilisation is
≥ 10 %, together with a power violation (pviol ≥ 5 %), a thermal violation flag, power at
≥ 97 % of the enforced limit or temperature within 3 °C of the slowdown threshold
(gpu_info). Windows of different GPUs are merged into one finding listing the GPUs.

A GPU that sits at its limit for most of its busy time has no "normal" clock to drop
below: the relative rule cannot see it. So a *sustained cap* is reported on its own: at
least half of the busy seconds (SM ≥ 50 %, ≥ 60 s of them) at a limit; `minor` when the
median clock then is below 85 % of the GPU's maximum SM clock (gpu_info, else the highest
clock seen), `info` otherwise — many GPUs run at their power limit under full load.
"""

from __future__ import annotations

from datetime import timedelta

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
    "cap_busy_sm_pct": 50.0,  # sustained cap: of the seconds a GPU is busy ...
    "cap_share": 0.5,  # ... at least half are at a limit ...
    "cap_min_busy_s": 60,  # ... over at least a minute of busy time
    "cap_minor_clock_frac": 0.85,  # `minor` when the capped clock is < 85 % of the maximum
}
T = THRESHOLDS


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    if not ctx.rows("gpu_dmon"):
        return NotEvaluated(NAME, "needs nvidia-smi dmon")
    df = ctx.query(
        """SELECT gpu, second_of(ts) AS ts, avg(sm_pct) AS sm, min(pclk_mhz) AS clk, max(pviol_pct) AS pv,
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
        at_limit = _at_limit(lim)
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
    sustained = _sustained(df, limits)
    if not all_w:
        return sustained
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
    return out + sustained


def _at_limit(lim: dict) -> pl.Expr:
    """Per second: pviol ≥ 5 %, a thermal violation, power ≥ 97 % of the limit or
    temperature within 3 °C of slowdown."""
    hit = (pl.col("pv").fill_null(0) >= T["pviol_pct"]) | (pl.col("tv").fill_null(0) > 0)
    if lim.get("power"):
        hit = hit | (pl.col("pw") >= T["power_frac"] * lim["power"])
    if lim.get("slowdown"):
        hit = hit | (pl.col("tc") >= lim["slowdown"] - T["temp_margin_c"])
    return hit


def _sustained(df: pl.DataFrame, limits: dict[int, dict]) -> list[Finding]:
    """One finding when GPUs sat at a limit for most of their busy time (see module doc)."""
    capped, ev, fracs, reasons = [], [], [], set()
    for (gpu,), sub in df.group_by("gpu", maintain_order=True):
        lim = limits.get(int(gpu), {})
        busy = sub.filter(pl.col("sm") >= T["cap_busy_sm_pct"])
        hit = busy.filter(_at_limit(lim))
        if busy.height < T["cap_min_busy_s"] or hit.height < T["cap_share"] * busy.height:
            continue
        top = float(lim.get("max_clock") or sub["clk"].max() or 0.0)
        clk = float(hit["clk"].median() or 0.0)
        fracs.append(clk / top if top else 1.0)
        capped.append((int(gpu), hit["ts"].min(), hit["ts"].max()))
        ev += _cap_evidence(int(gpu), hit, 100.0 * hit.height / busy.height, clk, top, lim)
        power = lim.get("power") and (hit["pw"].median() or 0.0) >= T["power_frac"] * lim["power"]
        if power or (hit["pv"].mean() or 0.0) >= T["pviol_pct"]:
            reasons.add("power cap")
        if (hit["tv"].max() or 0) > 0:
            reasons.add("thermal limit")
    if not capped:
        return []
    gpus = ", ".join(str(g) for g, _, _ in capped)
    w = (min(a for _, a, _ in capped), max(b for _, _, b in capped) + timedelta(seconds=1))
    frac = min(fracs)
    why = " and ".join(sorted(reasons)) or "limit"
    return [
        Finding(
            key="GPU_THROTTLE",
            kind=NAME,
            title=f"GPU {gpus} at its {why} for most of its busy time",
            severity="minor" if frac < T["cap_minor_clock_frac"] else "info",
            start=w[0],
            end=w[1],
            summary=f"GPU {gpus} ran at its {why} for most of the seconds it was busy at {span(w)}, its SM clock at {frac * 100:.0f}% of the maximum: the job runs, slower than the hardware allows.",
            impact={"gpus": len(capped), "clock_pct_of_max": r(frac * 100), "sustained": True},
            evidence=ev,
            remediation=[
                "Often normal at full load (the GPU is power-limited by design); read the reason with `nvidia-smi -q -d PERFORMANCE` (SW Power Cap vs HW Slowdown).",
                "If the limit is below the default: restore it (`nvidia-smi -pl <default W>`); check BMC/node power capping and PSU redundancy.",
                "A thermal limit points at cooling: fans, inlet temperature, airflow (`nvidia-smi -q -d TEMPERATURE`).",
            ],
        )
    ]


def _cap_evidence(
    gpu: int, hit: pl.DataFrame, share: float, clk: float, top: float, lim: dict
) -> list[Evidence]:
    ev = [
        Evidence(f"gpu{gpu} capped_busy_pct", r(share), None, "%", "of busy seconds at a limit"),
        Evidence(f"gpu{gpu} pclk_mhz", r(clk, 0), r(top, 0), "MHz", "median while capped vs max"),
    ]
    pw, pv = hit["pw"].median(), hit["pv"].mean()
    if pw is not None:
        ev.append(
            Evidence(f"gpu{gpu} pwr_w", r(float(pw)), lim.get("power"), "W", "median vs limit")
        )
    if pv is not None:
        ev.append(Evidence(f"gpu{gpu} pviol_pct", r(float(pv)), None, "%", "mean while capped"))
    if lim.get("reasons"):
        ev.append(
            Evidence(
                f"gpu{gpu} clock_event_reasons", None, None, "", f"nvidia-smi -q: {lim['reasons']}"
            )
        )
    return ev


def _limits(ctx: Context) -> dict[int, dict]:
    if not ctx.rows("gpu_info"):
        return {}
    df = ctx.query(
        "SELECT gpu, max(coalesce(enforced_power_limit_w, power_limit_w)) AS power, max(temp_slowdown_c) AS slowdown, "
        "max(max_sm_clock_mhz) AS max_clock, string_agg(DISTINCT throttle_reasons_active, ', ') AS reasons "
        "FROM gpu_info WHERE gpu IS NOT NULL GROUP BY gpu"
    )
    return {
        int(x["gpu"]): {k: x[k] for k in ("power", "slowdown", "max_clock", "reasons") if x[k]}
        for x in df.iter_rows(named=True)
    }
