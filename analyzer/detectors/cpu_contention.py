"""CPU contention: more runnable tasks than CPUs, tasks waiting to run (PSI, run queue, per CPU).

Every second gets one score per component, scaled so that the capture's own baseline is 0
and the component's threshold is 1; the second's score is the largest. Components: the run
queue (vmstat r as a centred 5 s median), CPU PSI some, CPU busy (counted only at or above
its threshold), the %wait that pidstat's tasks on one saturated CPU add up to (tasks pinned
to one CPU), and — only when none of these exist — the runqlat p99 (10 s histograms would
blur the edges). Baselines are the capture's own (median and MAD outside the runs where a
component reached its floor): a noisy shared host has no idle baseline, so each threshold is
an absolute floor raised to "clearly above this capture's usual level". A window starts at 1, ends at 0.66 of
the way from the baseline to the threshold, and is cut where its intensity changes. When the
usual level is itself contention (or the windows cover most of the capture) one `info`
finding says so for the whole capture. docs/detectors.md has the rules and why.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import timedelta

import polars as pl

from analyzer import intervals
from analyzer.detectors import gpu_starvation
from analyzer.detectors._base import (
    Context,
    gpu_loss_severity,
    r,
    robust_level,
    span,
    unit_of,
    worst,
)
from analyzer.detectors._who import busy_processes, by_command, with_identity
from analyzer.findings import Evidence, Finding, NotEvaluated
from analyzer.intervals import Window, overlap_s

NAME = "cpu_contention"
INPUTS = (
    "runq + cpus (vmstat / sar -q), or psi_cpu_some_pct, or runqlat_p99_us",
    "optional: mpstat per CPU + pidstat %wait (pinned tasks), cs_per_s",
)
THRESHOLDS = {
    "runq_per_cpu": 1.5,  # floor: runq >= max(1.5 x CPUs, CPUs + 3) ...
    "runq_plus": 3,  # ... (vmstat r counts vmstat itself: CPUs + 3 is 2 tasks waiting)
    "runq_over_baseline_per_cpu": 1.0,  # and >= the usual runq + max(1 task per CPU, k sigma)
    "runq_smooth_s": 5,  # vmstat r is one instant: centred 5 s median (single spikes are noise)
    "k_sigma": 4.0,  # run queue and PSI: >= baseline + 4 sigma (sigma = 1.4826 x MAD)
    "psi_cpu_some_pct": 50.0,  # floor ...
    "psi_min_margin_pct": 10.0,  # ... and >= baseline + 10 points
    "busy_pct": 90.0,  # or every CPU busy ...
    "busy_over_baseline": 25.0,  # ... well above the capture's usual level
    "runqlat_abs_us": 5000.0,
    "runqlat_rel": 5.0,
    "cpu_wait_pct": 100.0,  # per CPU: sum of pidstat %wait of the tasks on one saturated CPU
    "cpu_hot_pct": 90.0,  # a CPU this busy is saturated
    "pinned_gap_pct": 20.0,  # the hottest CPU this much busier than the coolest: tasks stuck
    "base_pad_s": 2,  # the baseline leaves out the runs at a floor (>= blip_s), widened by this
    "base_min_share": 0.2,  # fewer seconds left than this share: the whole capture serves
    "leave": 0.66,  # of the way from the baseline to the threshold
    "min_s": 10,
    "merge_gap_s": 5,
    "blip_s": 3,  # runs shorter than this are not merged into a neighbour (a lone PSI spike)
    "split_ratio": 1.4,  # a window is cut where the mean score on one side is 1.4 x the other
    "split_cap": 3.0,  # ... scores capped here first (3 x as far above the baseline as the
    # threshold): beyond that the CPUs are saturated either way, a deeper queue is no new phase
    "split_min_s": 5,
    "throughout_share": 0.8,  # windows covering this share of the capture: the usual state
    "minor_min_s": 30,
    "major_runq_per_cpu": 2.0,
    "major_psi_pct": 80.0,
    "major_min_s": 60,
}
T = THRESHOLDS
_CACHE = "cpu_contention.model"


@dataclass(frozen=True)
class Part:
    """One score component: per-second values, absolute floor, baseline and threshold."""

    name: str
    x: pl.Series
    floor: float
    base: float
    sigma: float
    thr: float
    gated: bool = False  # counts only at or above its threshold (CPU busy)

    def score(self) -> pl.Series:
        """0 at the baseline, 1 at the threshold (0 below the threshold when gated)."""
        s = ((self.x - self.base) / (self.thr - self.base)).clip(lower_bound=0.0)
        if self.gated:
            s = pl.select(pl.when(self.x >= self.thr).then(s).otherwise(0.0)).to_series()
        return s.alias(self.name)


@dataclass(frozen=True)
class Model:
    """What the detector learnt from the capture (cached: sampling_gap asks for it too)."""

    parts: list[Part]
    score: pl.Series
    windows: list[Window]
    throughout: bool  # the usual state of the host is contention

    def part(self, name: str) -> Part | None:
        return next((p for p in self.parts if p.name == name), None)


def detect(ctx: Context) -> list[Finding] | NotEvaluated:
    m = model(ctx)
    if m is None:
        return NotEvaluated(
            NAME,
            "needs the run queue and CPU count (vmstat / sar -q), CPU PSI, or a runqlat histogram",
        )
    out = [_throughout(ctx, m)] if m.throughout else []
    gbase, _ = ctx.gpu_dips()
    dips = gpu_starvation.dips_of(ctx, "cpu_contention", "cpu_loader")
    return out + [_finding(ctx, m, w, gbase, dips) for w in m.windows]


def windows(ctx: Context) -> list[Window]:
    """The stretches the host was contended: the windows, or the whole capture when
    contention was its usual state (for the effects other detectors see, e.g. collectors
    starved into sampling gaps)."""
    m = model(ctx)
    if m is None:
        return []
    return [_capture(ctx), *m.windows] if m.throughout else list(m.windows)


# -- the model: components, baselines, windows ------------------------------------------
def model(ctx: Context) -> Model | None:
    """Components, baselines, score and windows of this capture (cached)."""
    if _CACHE not in ctx.cache:
        ctx.cache[_CACHE] = _build(ctx)
    return ctx.cache[_CACHE]


def _build(ctx: Context) -> Model | None:
    specs = _specs(ctx)
    if not specs:
        return None
    levels, parts = _baselines(ctx, specs), []
    for name, x, floor, gated in specs:
        base, sigma = levels[name]
        thr = _threshold(name, floor, base, sigma, ctx.cpus or 0)
        parts.append(Part(name, x, floor, base, sigma, thr, gated))
    score = pl.DataFrame([p.score() for p in parts]).select(pl.max_horizontal(pl.all()))
    score = score.to_series().alias("score")
    runs = [w for w in ctx.runs(score, 1.0, T["leave"]) if _dur(w) >= T["blip_s"]]
    runs = intervals.as_windows(intervals.merge(_frame(runs), T["merge_gap_s"]))
    smooth = score.clip(upper_bound=T["split_cap"]).rolling_median(
        T["runq_smooth_s"], min_samples=1, center=True
    )
    wins = [p for w in runs for p in _split(ctx, smooth, w) if _dur(p) >= T["min_s"]]
    covered = sum(_dur(w) for w in wins) >= T["throughout_share"] * _dur(_capture(ctx))
    usual = any(p.base >= p.floor for p in parts)
    return Model(parts, score, [] if covered else wins, usual or covered)


def _specs(ctx: Context) -> list[tuple[str, pl.Series, float, bool]]:
    """(name, per-second values, absolute floor, gated) of every component with data."""
    sig, cpus, out = ctx.signals, ctx.cpus, []
    if ctx.has("runq") and cpus:
        runq = sig["runq"].rolling_median(T["runq_smooth_s"], min_samples=3, center=True)
        out.append(("runq", runq, max(T["runq_per_cpu"] * cpus, cpus + T["runq_plus"]), False))
    if ctx.has("psi_cpu_some_pct"):
        out.append(("psi_cpu_some_pct", sig["psi_cpu_some_pct"], T["psi_cpu_some_pct"], False))
    if ctx.has("cpu_busy_pct"):
        out.append(("cpu_busy_pct", sig["cpu_busy_pct"], T["busy_pct"], True))
    wait = _cpu_wait(ctx)
    if wait is not None:
        out.append(("cpu_wait_pct", wait, T["cpu_wait_pct"], False))
    if not out and ctx.has("runqlat_p99_us"):  # 10 s histograms: only when nothing finer
        out.append(("runqlat_p99_us", sig["runqlat_p99_us"], T["runqlat_abs_us"], False))
    return out


def _cpu_wait(ctx: Context) -> pl.Series | None:
    """Per second, the largest sum of pidstat %wait over the tasks on one saturated CPU
    (mpstat per CPU): tasks pinned to a CPU queue there however idle the others are. None
    without both tables or when no task ever waited."""
    if not (ctx.rows("pidstat") and ctx.rows("mpstat_cpu")):
        return None
    top = ctx.query("SELECT max(wait_pct) AS w FROM pidstat WHERE since_boot IS NOT TRUE")
    if (top["w"][0] or 0) < 1:  # no task ever waited: spare the per-CPU scan
        return None
    df = ctx.query(
        """WITH b AS (SELECT second_of(ts) AS sec, cpu, avg(100 - idle_pct - coalesce(iowait_pct, 0)) AS busy
                      FROM mpstat_cpu WHERE cpu >= 0 AND since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1, 2),
                w AS (SELECT second_of(ts) AS sec, cpu, sum(wait_pct) AS wait FROM pidstat
                      WHERE tid IS NULL AND since_boot IS NOT TRUE AND ts IS NOT NULL AND cpu IS NOT NULL GROUP BY 1, 2)
           SELECT sec AS ts, max(wait) AS wait FROM w JOIN b USING (sec, cpu) WHERE busy >= $hot GROUP BY 1""",
        {"hot": T["cpu_hot_pct"]},
    )
    if df.height == 0 or (df["wait"].max() or 0) < 1:  # type: ignore[operator]
        return None
    ts = ctx.signals.select("ts")
    df = df.with_columns(pl.col("ts").cast(ts.schema["ts"]))
    return ts.join(df, on="ts", how="left")["wait"].fill_null(0.0).cast(pl.Float64)


def _baselines(
    ctx: Context, specs: list[tuple[str, pl.Series, float, bool]]
) -> dict[str, tuple[float, float]]:
    """(median, sigma) of every component over the seconds outside the runs (>= blip_s,
    widened by base_pad_s) where any component reached its floor. A component at its floor
    nearly all along (fewer than base_min_share of the seconds left) is taken over the
    whole capture — that is its usual level — and leaves the others' seconds alone."""
    n = ctx.signals.height
    at_floor = {
        name: ctx.mask(ctx.runs(x, floor, min_s=T["blip_s"]), T["base_pad_s"])
        for name, x, floor, _ in specs
    }
    usual = {k for k, m in at_floor.items() if (n - m.sum()) < T["base_min_share"] * n}
    busy = pl.repeat(False, n, eager=True)
    for k, m in at_floor.items():
        busy = busy if k in usual else busy | m
    out = {}
    for name, x, _, _ in specs:
        keep = pl.repeat(True, n, eager=True) if name in usual else ~busy
        if keep.sum() < T["base_min_share"] * n:
            keep = ~at_floor[name]
        out[name] = robust_level(x.filter(keep)) or robust_level(x) or (0.0, 0.0)
    return out


def _threshold(name: str, floor: float, base: float, sigma: float, cpus: int) -> float:
    """The component's threshold: its floor, raised to clearly above the usual level."""
    if name == "runq":  # small integers: sigma may be 0, a CPU's worth of tasks is the scale
        return max(floor, base + max(T["runq_over_baseline_per_cpu"] * cpus, T["k_sigma"] * sigma))
    if name == "psi_cpu_some_pct":
        return max(floor, base + max(T["k_sigma"] * sigma, T["psi_min_margin_pct"]))
    if name == "cpu_busy_pct":
        return max(floor, base + T["busy_over_baseline"])
    if name == "runqlat_p99_us":
        return max(floor, T["runqlat_rel"] * base)
    return max(floor, base + floor)  # cpu_wait_pct


def _split(ctx: Context, score: pl.Series, w: Window) -> list[Window]:
    """``w`` cut where the score's level changes: binary segmentation (each cut the one that
    best separates the means of its two sides, both >= split_min_s; up to 8 pieces), then
    neighbouring pieces whose means differ by less than split_ratio joined again."""
    sub = ctx.signals.select("ts").with_columns(s=score.fill_null(0.0)).filter(ctx.mask([w]))
    v, ts = sub["s"], sub["ts"].to_list()
    bounds = _join_similar(v, [0, *_cuts(v, int(T["split_min_s"]), 3), sub.height])
    cuts = [ts[b - 1] + timedelta(seconds=1) for b in bounds[1:-1]]
    return list(itertools.pairwise([w[0], *cuts, w[1]]))


def _cuts(v: pl.Series, m: int, depth: int) -> list[int]:
    """Interior cut indices of ``v`` (recursive binary segmentation, ``depth`` levels)."""
    n = v.len()
    if depth == 0 or n < 2 * m:
        return []
    k = int(
        pl.DataFrame({"s": v})
        .with_columns(k=pl.int_range(1, n + 1), cs=pl.col("s").cum_sum())
        .with_columns(
            stat=(pl.col("cs") / pl.col("k") - (pl.col("cs").last() - pl.col("cs")) / (n - pl.col("k"))).abs()
            * (pl.col("k") * (n - pl.col("k"))).sqrt()
        )
        .filter(pl.col("k").is_between(m, n - m))
        .sort("stat", descending=True, maintain_order=True)["k"][0]
    )  # fmt: skip
    return _cuts(v[:k], m, depth - 1) + [k] + [k + c for c in _cuts(v[k:], m, depth - 1)]


def _join_similar(v: pl.Series, bounds: list[int]) -> list[int]:
    """``bounds`` without the cuts between pieces whose means differ by < split_ratio
    (the most similar neighbours joined first)."""
    while len(bounds) > 2:
        means = [max(float(v[a:b].mean() or 0.0), 1e-9) for a, b in itertools.pairwise(bounds)]  # type: ignore[arg-type]
        ratios = [max(x, y) / min(x, y) for x, y in itertools.pairwise(means)]
        i = ratios.index(min(ratios))
        if ratios[i] >= T["split_ratio"]:
            break
        del bounds[i + 1]
    return bounds


def _capture(ctx: Context) -> Window:
    ts = ctx.signals["ts"]
    return ts.min(), ts.max() + timedelta(seconds=1)  # type: ignore[operator,return-value]


def _frame(ws: list[Window]) -> pl.DataFrame:
    if not ws:
        return intervals.empty_windows()
    return pl.DataFrame({"start": [w[0] for w in ws], "end": [w[1] for w in ws]}).cast(
        {"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")}
    )


def _dur(w: Window) -> float:
    return (w[1] - w[0]).total_seconds()


# -- findings -------------------------------------------------------------------------------
def _finding(ctx: Context, m: Model, w: Window, gbase: float | None, dips: list) -> Finding:
    st = _stats(ctx, m, w)
    cpus = _per_cpu(ctx, w)
    hot = cpus[0]["cpu"] if cpus and cpus[0]["busy"] >= T["cpu_hot_pct"] else None
    procs = _procs(ctx, w, hot)
    pinned = _pinned(m, st, cpus, procs)
    near = [d for d in dips if overlap_s(w, d) > 0]
    lost = sum(ctx.gpu_seconds_lost(d, gbase) or 0.0 for d in near) if near else None
    sev = worst(
        _severity(ctx, m, w, st, pinned),
        gpu_loss_severity(lost, ctx.gpu_capacity_s()) if near else None,
    )
    impact = _impact(st, pinned)
    if who := by_command(procs):
        impact["who"] = [g | {"share": r(g["share"]), "unit": "% of one CPU"} for g in who]
    if lost is not None:
        impact["gpu_seconds_lost"] = r(lost, 1)
    return Finding(
        key="CPU_CONTENTION",
        kind=NAME,
        title=f"CPU contention ({_dur(w):.0f} s)",
        severity=sev,
        start=w[0],
        end=w[1],
        summary=_summary(ctx, m, w, st, cpus, procs, pinned),
        impact=impact,
        evidence=_evidence(ctx, m, w, st) + _cpu_evidence(cpus) + _proc_evidence(procs[:5]),
        remediation=REMEDIATION,
    )


def _stats(ctx: Context, m: Model, w: Window) -> dict[str, float | None]:
    """The window's numbers, each as the evidence states it (median run queue, means)."""
    rows = ctx.rows_in(w)
    pw = m.part("cpu_wait_pct")
    if pw is not None:
        rows = rows.with_columns(cpu_wait_pct=pw.x.filter(ctx.mask([w])))

    def of(col: str, how: str) -> float | None:
        if col not in rows.columns or rows[col].null_count() == rows.height:
            return None
        return float(getattr(rows[col].drop_nulls(), how)())

    return {
        "runq": of("runq", "median"),
        "runq_max": of("runq", "max"),
        "psi": of("psi_cpu_some_pct", "mean"),
        "busy": of("cpu_busy_pct", "mean"),
        "runqlat": of("runqlat_p99_us", "max"),
        "cs": of("cs_per_s", "mean"),
        "wait": of("cpu_wait_pct", "mean"),
    }


def _severity(
    ctx: Context, m: Model, w: Window, st: dict[str, float | None], pinned: int | None
) -> str:
    """info unless the CPUs were saturated (mean busy >= busy_pct, or the CPU tasks were
    pinned to) and tasks queued (the median run queue, or the pinned tasks' %wait, at its
    threshold; PSI only when there is no run queue, or when tasks waited >= 80 % of the
    time) for >= minor_min_s; major when the queue or PSI reach the major level for 60 s."""
    runq, psi, wait, busy = st["runq"], st["psi"], st["wait"] or 0.0, st["busy"]
    pr, pp, pw = m.part("runq"), m.part("psi_cpu_some_pct"), m.part("cpu_wait_pct")
    psi_major = max(T["major_psi_pct"], pp.thr) if pp else None
    queue = (
        (pr is not None and runq is not None and runq >= pr.thr)
        or (pw is not None and wait >= pw.thr)
        or (pp is not None and psi is not None and psi >= (psi_major if pr else pp.thr))  # type: ignore[operator]
    )
    saturated = busy is None or busy >= T["busy_pct"] or pinned is not None
    if not (queue and saturated) or _dur(w) < T["minor_min_s"]:
        return "info"
    big = (
        pr is not None
        and runq is not None
        and runq >= max(T["major_runq_per_cpu"] * (ctx.cpus or 0), pr.thr)
    ) or (psi_major is not None and psi is not None and psi >= psi_major)
    return "major" if big and _dur(w) >= T["major_min_s"] else "minor"


def _per_cpu(ctx: Context, w: Window) -> list[dict]:
    """Per CPU over ``w`` (mpstat): median %idle, mean busy, saturated seconds; hottest first."""
    if not ctx.rows("mpstat_cpu"):
        return []
    return ctx.query(
        "SELECT cpu, median(idle_pct) AS idle, avg(100 - idle_pct - coalesce(iowait_pct, 0)) AS busy, "
        "count(*) AS n, count(*) FILTER (WHERE 100 - idle_pct - coalesce(iowait_pct, 0) >= $hot) AS sat "
        "FROM mpstat_cpu WHERE cpu >= 0 AND since_boot IS NOT TRUE AND second_of(ts) >= $lo "
        "AND second_of(ts) < $hi GROUP BY cpu ORDER BY busy DESC, cpu",
        {"lo": w[0], "hi": w[1], "hot": T["cpu_hot_pct"]},
    ).to_dicts()


def _pinned(
    m: Model, st: dict[str, float | None], cpus: list[dict], procs: list[dict]
) -> int | None:
    """The CPU tasks were stuck on: the hottest, saturated, while another CPU had room
    (>= pinned_gap_pct less busy), or while tasks that never left it waited (pidstat
    %wait; tasks that waited but moved between CPUs were queued host-wide, not pinned)."""
    if len(cpus) < 2 or cpus[0]["busy"] < T["cpu_hot_pct"]:
        return None
    hot = int(cpus[0]["cpu"])
    pw = m.part("cpu_wait_pct")
    stuck = any(p["ncpu"] == 1 and p["on_cpu"] == hot and (p["wait"] or 0) >= 1 for p in procs)
    waited = pw is not None and (st["wait"] or 0.0) >= pw.thr and stuck
    if waited or cpus[0]["busy"] - cpus[-1]["busy"] >= T["pinned_gap_pct"]:
        return hot
    return None


def _procs(ctx: Context, w: Window, cpu: int | None, n: int = 12) -> list[dict]:
    """pidstat's busiest or most waiting processes in ``w`` (`_who.busy_processes`: means
    over the window's reports) with the CPU they ran on, and those that stayed on ``cpu``
    (the pinned or hottest one), busy or not."""
    keep = [
        p
        for p in busy_processes(ctx, w)
        if (p["pcpu"] or 0) >= 1
        or (p["wait"] or 0) >= 1
        or (cpu is not None and p["ncpu"] == 1 and p["min_cpu"] == cpu)
    ]
    return with_identity(ctx, keep[:n], w)


def _who(procs: list[dict]) -> str:
    """'stress-ng-cpu ×4 (104%), python (93%)': the busiest commands, their processes'
    shares (% of one CPU) added up."""
    parts = []
    for g in by_command(procs):
        many = f" ×{g['processes']}" if g["processes"] > 1 else ""
        where = f" in {g['where']}" if g.get("where") else ""
        parts.append(f"{g['command']}{many}{where} ({g['share']:.0f}%)")
    return ", ".join(parts)


def _summary(
    ctx: Context,
    m: Model,
    w: Window,
    st: dict,
    cpus: list[dict],
    procs: list[dict],
    pin: int | None,
) -> str:
    text = f"CPU contention at {span(w)}"
    usual = {c: ctx.baseline(c, exclude=m.windows) for c in ("runq", "psi_cpu_some_pct")}
    if st["runq"] is not None and ctx.cpus:
        text += f": a median of {st['runq']:.0f} runnable tasks on {ctx.cpus} CPUs"
        text += f" (usual {usual['runq']:.0f})" if usual["runq"] is not None else ""
    if st["busy"] is not None and st["busy"] >= T["busy_pct"]:
        text += f", the CPUs {st['busy']:.0f}% busy"
    if st["psi"] is not None:
        text += f", tasks waited for a CPU {st['psi']:.0f}% of the time"
        text += (
            f" (usual {usual['psi_cpu_some_pct']:.0f}%)"
            if usual["psi_cpu_some_pct"] is not None
            else ""
        )
    if pin is not None:
        stuck = [p for p in procs if p["ncpu"] == 1 and p["on_cpu"] == pin]
        text += (
            f"; tasks queued on CPU {pin} ({cpus[0]['busy']:.0f}% busy) while CPU "
            f"{cpus[-1]['cpu']} was {cpus[-1]['busy']:.0f}% busy: they could not move "
            "(CPU affinity or cpuset)"
        )
        if stuck:
            text += ", pinned there: " + ", ".join(f"{p['cmd']} (pid {p['pid']})" for p in stuck)
    elif cpus:
        text += f"; hottest CPU {cpus[0]['cpu']} ({cpus[0]['busy']:.0f}% busy)"
    who = _who(procs)
    return text + (f"; busiest: {who}" if who else "") + "."


def _impact(st: dict, pinned: int | None) -> dict:
    """Mean CPU PSI (``cpu_wait_pct``) and, when tasks were stuck on one CPU, that ``cpu``."""
    impact: dict = {} if st["psi"] is None else {"cpu_wait_pct": r(st["psi"])}
    if pinned is not None:
        impact["cpu"] = pinned
    return impact


def _evidence(
    ctx: Context, m: Model, w: Window, st: dict, over: str = "the window"
) -> list[Evidence]:
    """The components over ``w``, each against its baseline, saying how it is taken."""
    base = {p.name: p for p in m.parts}
    ev = []
    for col, key, how in (
        ("runq", "runq", f"median of vmstat r over {over}"),
        ("psi_cpu_some_pct", "psi", f"mean of the per-second CPU PSI some over {over}"),
        ("cpu_busy_pct", "busy", f"mean busy (100 - %idle - %iowait) over {over}"),
        ("runqlat_p99_us", "runqlat", "max of the 10 s runqlat p99"),
        ("cs_per_s", "cs", "mean"),
    ):
        if st[key] is None:
            continue
        p = base.get(col)
        note = how + (f"; threshold {p.thr:.3g}" if p else "")
        b = None if over != "the window" else ctx.baseline(col, exclude=m.windows)
        note += "; baseline: median outside the windows" if b is not None else ""
        ev.append(Evidence(col, r(st[key]), r(b), unit_of(col), note))
    if st["runq_max"] is not None:
        ev.append(Evidence("runq_max", r(st["runq_max"]), None, "tasks", "max of vmstat r"))
    if ctx.cpus:
        ev.append(Evidence("cpus", float(ctx.cpus), None, "count", "logical CPUs"))
    pw = base.get("cpu_wait_pct")
    if pw is not None and st["wait"]:
        ev.append(Evidence("cpu_wait_pct", r(st["wait"]), r(pw.base), "%",
                           "mean per second of the largest sum of pidstat %wait on one saturated CPU"))  # fmt: skip
    return ev


def _cpu_evidence(cpus: list[dict], most: int = 4) -> list[Evidence]:
    """Per-CPU %idle (hottest first; a big host: the hottest three and the coolest)."""
    shown = cpus if len(cpus) <= most else [*cpus[: most - 1], cpus[-1]]
    return [
        Evidence(
            f"cpu{c['cpu']}_idle_pct",
            r(c["idle"]),
            None,
            "%",
            f"median mpstat %idle of CPU {c['cpu']}; mean busy {c['busy']:.1f}%, "
            f"saturated (>= {T['cpu_hot_pct']:.0f}% busy) {c['sat']} of {c['n']} s",
        )
        for c in shown
    ]


def _proc_evidence(procs: list[dict]) -> list[Evidence]:
    return [
        Evidence(
            "process_cpu_pct",
            r(p["pcpu"] or 0.0),
            None,
            "%",
            f"pid {p['pid']} {p['cmd']}: mean %CPU over the window's pidstat reports (mean %wait {p['wait'] or 0:.0f}%), "
            + (f"only on CPU {p['on_cpu']}" if p["ncpu"] == 1 else f"mostly on CPU {p['on_cpu']}"),
        )
        for p in procs
    ]


def _throughout(ctx: Context, m: Model) -> Finding:
    """The host's usual state is contention: one info finding over the whole capture."""
    w = _capture(ctx)
    usual = [p for p in m.parts if p.base >= p.floor]
    said = "; ".join(
        f"{_WORDS.get(p.name, p.name)} {p.base:.3g} (threshold {p.floor:.3g})" for p in usual
    )
    st = _stats(ctx, m, w)
    return Finding(
        key="CPU_CONTENTION",
        kind=NAME,
        title="CPU contention throughout the capture",
        severity="info",
        start=w[0],
        end=w[1],
        summary=(
            "The host was contended for the whole capture"
            + (f" (medians: {said})" if said else " (contention windows covered most of it)")
            + ": that is its usual state here, so only what stands out above it is reported"
            " as a window."
        ),
        impact={"throughout": True} | _impact(st, None),
        evidence=_evidence(ctx, m, w, st, over="the capture"),
        remediation=REMEDIATION,
    )


_WORDS = {
    "runq": "run queue",
    "psi_cpu_some_pct": "CPU PSI some %",
    "cpu_busy_pct": "CPU busy %",
    "cpu_wait_pct": "pinned tasks' %wait",
    "runqlat_p99_us": "runqlat p99 us",
}
REMEDIATION = [
    "Find the CPU consumers: `pidstat -u -w 1`, `top -H` (threads), `ps -eLo pid,tid,psr,pcpu,comm --sort=-pcpu | head`.",
    "Pin the trainer and its loader workers to dedicated cores (taskset / numactl --cpunodebind / cpuset.cpus) and keep other services off them.",
    "Cap thread pools to the cores available: OMP_NUM_THREADS, torch.set_num_threads, DataLoader num_workers ≤ cores per GPU.",
    "Lower the weight of background work: `systemctl set-property background.slice CPUWeight=20` (or nice/chrt -b).",
]
