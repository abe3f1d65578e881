"""GPU dips split where their cause changes: one score per host-side cause, every second.

Every second of the capture gets a score per cause (value / threshold: ≥ 1 means the
cause's threshold is crossed in that second; NULL inputs score 0, never evidence):

| cause | score |
|---|---|
| ``xid`` | 2 from 2 s before to 30 s after an Xid line |
| ``io`` | max(iowait / 10 %, I/O PSI some / 20 %, 1.5 inside a write burst, 1 within 2 s of one) |
| ``cpu_throttle`` | cgroup throttled_pct / 20 % |
| ``cpu_contention`` | max(runq (centred 5 s median) / (1.5 × CPUs), CPU PSI some / 50 %, busy / max(90 %, baseline busy + 25)) |
| ``cpu_loader`` | 1.1 × %CPU / 90 of the busiest process that is ≥ 90 % and ≥ 20 points above its own median, while the host is < 50 % busy and there is no contention |
| ``memory`` | max(memory PSI some / 10 %, direct reclaim / 1000 pages/s) |
| ``power_thermal`` | max(pviol / 10 %, 1.5 × tviol, 1.2 when the SM clock is < 85 % of its baseline), only while utilisation stays ≥ 25 % of its baseline |

The last gate matters: a power or thermal cap lowers clocks while the SMs stay busy, so it
cannot by itself drive utilisation to near zero; and the second where utilisation falls
still carries the busy second's pviol (dmon samples straddle it).

Within a dip (`Context.gpu_dips`) a second is labelled with its best cause (score ≥ 1;
ties in the order above) or left unlabelled. A run of one label lasting ≥ ``split_min_s``
is *strong*. A dip with strong runs of two or more causes is split: every second takes the
label of the nearest strong second, and each run of one label is a *segment*. Otherwise
the dip is one segment whose cause labels the most of its interior seconds (all but the
first and the last: transition seconds mix two states), or ``unexplained``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import polars as pl

from analyzer.detectors._base import GPU_DIP, Context, epoch_us
from analyzer.intervals import Window

CAUSES = ("xid", "io", "cpu_throttle", "cpu_contention", "cpu_loader", "memory", "power_thermal")
THRESHOLDS = {
    **{f"dip_{k}": v for k, v in GPU_DIP.items()},
    "iowait_pct": 10.0,
    "psi_io_some_pct": 20.0,
    "write_burst_score": 1.5,  # inside a write burst ...
    "near_burst_score": 1.0,  # ... or within burst_pad_s of one (any other cause wins there)
    "burst_pad_s": 2,
    "throttled_pct": 20.0,
    "runq_per_cpu": 1.5,
    "runq_smooth_s": 5,  # centred median: vmstat r is one instant
    "psi_cpu_some_pct": 50.0,
    "busy_pct": 90.0,  # all CPUs busy ...
    "busy_over_baseline": 25.0,  # ... and well above the capture's usual level
    "loader_proc_cpu_pct": 90.0,  # one process pegging (at least) one core ...
    "loader_rise_pct": 20.0,  # ... 20 points above its own median ...
    "loader_max_busy_frac": 0.5,  # ... while fewer than half the cores are busy
    "psi_mem_some_pct": 10.0,
    "pgscan_direct_per_s": 1000.0,
    "pviol_pct": 10.0,
    "tviol_score": 1.5,
    "clock_drop_frac": 0.85,
    "clock_drop_score": 1.2,
    "power_min_util_frac": 0.25,  # a cap explains a dip only while the GPUs stay this busy
    "xid_score": 2.0,
    "xid_lookback_s": 30,
    "xid_pad_s": 2,
    "split_min_s": 4,
}
T = THRESHOLDS


@dataclass(frozen=True)
class Segment:
    """A stretch of one GPU dip with one cause. ``scores``: mean score per cause over its
    interior seconds; ``share``: fraction of those seconds each cause labelled."""

    window: Window
    dip: Window
    cause: str
    scores: dict[str, float]
    share: dict[str, float]

    @property
    def interior(self) -> Window:
        """The window without its first and last second (when it is ≥ 3 s long)."""
        a, b = self.window
        one = timedelta(seconds=1)
        return (a + one, b - one) if b - a >= 3 * one else (a, b)


def cause_scores(ctx: Context, bursts: list[Window]) -> pl.DataFrame:
    """``ts`` plus one Float64 score column per cause (no NULLs), for every second (cached)."""
    if "dip_cause_scores" in ctx.cache:
        return ctx.cache["dip_cause_scores"]
    base, dips = ctx.gpu_dips()
    z = pl.lit(0.0)

    def c(name: str) -> pl.Expr:
        return pl.col(name).cast(pl.Float64).fill_null(0.0)

    busy_base = ctx.baseline("cpu_busy_pct", exclude=dips) or 0.0
    clk_base = ctx.baseline("gpu_sm_clock_min_mhz", exclude=dips)
    cpus = ctx.cpus or 0
    frame = ctx.signals.with_columns(
        _burst=ctx.mask(bursts),
        _near_burst=ctx.mask(bursts, T["burst_pad_s"]),
        _xid=ctx.mask(_xid_windows(ctx), T["xid_pad_s"]),
        _top=_top_process(ctx),
    )
    runq = c("runq").rolling_median(T["runq_smooth_s"], min_samples=3, center=True)
    contention = pl.max_horizontal(
        runq.fill_null(0.0) / (T["runq_per_cpu"] * cpus) if cpus else z,
        c("psi_cpu_some_pct") / T["psi_cpu_some_pct"],
        c("cpu_busy_pct") / max(T["busy_pct"], busy_base + T["busy_over_baseline"]),
    )
    clock_drop = (
        pl.when(pl.col("gpu_sm_clock_min_mhz") < T["clock_drop_frac"] * clk_base)
        .then(T["clock_drop_score"])
        .otherwise(0.0)
        if clk_base
        else z
    )
    busy_gpu = pl.col("gpu_util_mean_pct") >= T["power_min_util_frac"] * (base or 0.0)
    out = frame.select(
        "ts",
        xid=pl.when(pl.col("_xid")).then(T["xid_score"]).otherwise(0.0),
        io=pl.max_horizontal(
            c("iowait_pct") / T["iowait_pct"],
            c("psi_io_some_pct") / T["psi_io_some_pct"],
            pl.when(pl.col("_burst"))
            .then(T["write_burst_score"])
            .when(pl.col("_near_burst"))
            .then(T["near_burst_score"])
            .otherwise(0.0),
        ),
        cpu_throttle=c("throttled_pct") / T["throttled_pct"],
        cpu_contention=contention,
        cpu_loader=pl.when(
            (pl.col("_top") >= T["loader_proc_cpu_pct"])
            & (pl.col("cpu_busy_pct") < 100 * T["loader_max_busy_frac"])
            & (contention < 1)
        )
        .then(1.1 * pl.col("_top") / T["loader_proc_cpu_pct"])
        .otherwise(0.0),
        memory=pl.max_horizontal(
            c("psi_mem_some_pct") / T["psi_mem_some_pct"],
            c("pgscan_direct_per_s") / T["pgscan_direct_per_s"],
        ),
        power_thermal=pl.when(busy_gpu.fill_null(False))
        .then(
            pl.max_horizontal(
                c("gpu_pviol_max_pct") / T["pviol_pct"],
                T["tviol_score"] * c("gpu_tviol_any"),
                clock_drop,
            )
        )
        .otherwise(0.0),
    )
    ctx.cache["dip_cause_scores"] = out
    return out


def segments(ctx: Context, bursts: list[Window]) -> list[Segment]:
    """The GPU dips cut into segments of one cause each (cached); see the module docstring."""
    if "dip_segments" in ctx.cache:
        return ctx.cache["dip_segments"]
    _, dips = ctx.gpu_dips()
    if not dips:
        ctx.cache["dip_segments"] = []
        return []
    sc = cause_scores(ctx, bursts)
    ts_us, _ = ctx.ts_us()
    starts = pl.Series([epoch_us(a) for a, _ in dips], dtype=pl.Int64)
    ends = pl.Series([epoch_us(b) for _, b in dips], dtype=pl.Int64)
    idx = starts.search_sorted(ts_us, side="right").cast(pl.Int64) - 1
    inside = (idx >= 0) & (ts_us < ends.gather(idx.clip(lower_bound=0)))
    best = pl.max_horizontal(CAUSES)
    arg = pl.concat_list(CAUSES).list.arg_max()
    f = (
        sc.with_columns(dip=idx, _in=inside)
        .filter(pl.col("_in"))
        .with_columns(
            label=pl.when(best >= 1.0).then(
                arg.replace_strict(dict(enumerate(CAUSES)), return_dtype=pl.String)
            ),
            pos=pl.int_range(pl.len()).over("dip"),
            n=pl.len().over("dip"),
        )
    )
    lab = pl.col("label").fill_null("")
    f = f.with_columns(
        run=((lab != lab.shift(1)) | (pl.col("dip") != pl.col("dip").shift(1)))
        .fill_null(True)
        .cum_sum()
    )
    f = f.with_columns(
        strong=pl.when(
            pl.col("label").is_not_null() & (pl.len().over("run") >= T["split_min_s"])
        ).then(pl.col("label"))
    ).with_columns(kinds=pl.col("strong").drop_nulls().n_unique().over("dip"))
    f = f.with_columns(cause=pl.when(pl.col("kinds") >= 2).then(_nearest()).otherwise(_vote(f)))
    f = f.with_columns(
        seg=(
            (pl.col("cause") != pl.col("cause").shift(1))
            | (pl.col("dip") != pl.col("dip").shift(1))
        )
        .fill_null(True)
        .cum_sum()
    )
    f = f.with_columns(
        spos=pl.int_range(pl.len()).over("seg"), slen=pl.len().over("seg")
    ).with_columns(
        interior=(pl.col("slen") < 3)
        | ((pl.col("spos") > 0) & (pl.col("spos") < pl.col("slen") - 1))
    )
    inner = f.filter(pl.col("interior"))
    agg = inner.group_by("seg").agg(
        *[pl.col(k).mean().alias(f"s_{k}") for k in CAUSES],
        *[(pl.col("label") == k).fill_null(False).mean().alias(f"p_{k}") for k in CAUSES],
    )
    segs = (
        f.group_by("seg", maintain_order=True)
        .agg(
            start=pl.col("ts").min(),
            last=pl.col("ts").max(),
            dip=pl.col("dip").first(),
            cause=pl.col("cause").first(),
        )
        .join(agg, on="seg", how="left")
        .sort("seg")
    )
    out = []
    for row in segs.iter_rows(named=True):
        d = dips[row["dip"]]
        a = max(row["start"], d[0])
        b = min(row["last"] + timedelta(seconds=1), d[1])
        out.append(
            Segment(
                (a, b),
                d,
                row["cause"],
                {k: float(row[f"s_{k}"] or 0.0) for k in CAUSES},
                {k: float(row[f"p_{k}"] or 0.0) for k in CAUSES},
            )
        )
    ctx.cache["dip_segments"] = out
    return out


def _nearest() -> pl.Expr:
    """Each second's label: the nearest strong second's (earlier one on a tie)."""
    s, pos = pl.col("strong"), pl.col("pos")
    at = pl.when(s.is_not_null()).then(pos)
    lab_f, pos_f = s.forward_fill().over("dip"), at.forward_fill().over("dip")
    lab_b, pos_b = s.backward_fill().over("dip"), at.backward_fill().over("dip")
    take_f = lab_b.is_null() | (lab_f.is_not_null() & ((pos - pos_f) <= (pos_b - pos)))
    return pl.when(take_f).then(lab_f).otherwise(lab_b)


def _vote(f: pl.DataFrame) -> pl.Expr:
    """Per dip: the label of the most interior seconds (higher mean score on a tie)."""
    interior = (pl.col("n") < 3) | ((pl.col("pos") > 0) & (pl.col("pos") < pl.col("n") - 1))
    best = pl.max_horizontal(CAUSES)
    votes = (
        f.filter(interior & pl.col("label").is_not_null())
        .with_columns(_best=best)
        .group_by("dip", "label")
        .agg(n=pl.len(), m=pl.col("_best").mean())
        .sort(["dip", "n", "m"], descending=[False, True, True])
        .group_by("dip", maintain_order=True)
        .first()
    )
    mapping = dict(zip(votes["dip"].to_list(), votes["label"].to_list(), strict=True))
    return pl.col("dip").replace_strict(mapping, default="unexplained", return_dtype=pl.String)


def _xid_windows(ctx: Context) -> list[Window]:
    if not ctx.rows("dmesg"):
        return []
    df = ctx.query(
        "SELECT DISTINCT ts FROM dmesg WHERE kind IN ('xid', 'gpu_fallen_off_bus') AND ts IS NOT NULL ORDER BY ts"
    )
    look = timedelta(seconds=T["xid_lookback_s"])
    return [(t, t + look) for t in df["ts"].to_list()]


def _top_process(ctx: Context) -> pl.Series:
    """Per signals second, %CPU of the busiest process running ≥ 20 points above its own
    median (pidstat; a trainer that always pegs a core is not a loader that started to);
    NULL where there is none."""
    n = ctx.signals.height
    if not ctx.rows("pidstat") or n == 0:
        return pl.Series("_top", [None] * n, dtype=pl.Float64)
    df = ctx.query(
        f"""WITH p AS (SELECT second_of(ts) AS sec, pid, avg(cpu_pct) AS cpu FROM pidstat
                       WHERE tid IS NULL AND since_boot IS NOT TRUE AND ts IS NOT NULL GROUP BY 1, 2),
                m AS (SELECT pid, median(cpu) AS med FROM p GROUP BY pid)
            SELECT sec, (max(cpu) FILTER (WHERE cpu >= med + {T["loader_rise_pct"]}))::DOUBLE AS top
            FROM p JOIN m USING (pid) GROUP BY sec ORDER BY sec"""
    )
    if df.height == 0:
        return pl.Series("_top", [None] * n, dtype=pl.Float64)
    step = df["sec"].diff().dt.total_seconds().median() if df.height > 1 else 1.0
    # a sample stamped t covers (t - step, t]: second s takes the first sample at or after s
    grid = ctx.signals.select(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    joined = grid.join_asof(
        df.with_columns(pl.col("sec").cast(pl.Datetime("us", "UTC"))).sort("sec"),
        left_on="ts",
        right_on="sec",
        strategy="forward",
        tolerance=timedelta(seconds=max(float(step or 1.0) - 1, 0)),
    )
    return joined["top"].alias("_top")
