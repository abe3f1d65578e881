"""When each candidate was active, and how its activity lines up with a symptom's
windows: the measurements `analyzer.symptoms.explain` judges (docs/symptoms.md).

- `baselines` / `is_active`: a signal is *active* where it departs from its own
  baseline — median ``b`` and σ (1.4826 × MAD) over the seconds *outside* the symptom's
  windows widened by ``max_lag_s`` before and ``pad_s`` after — by at least
  ``d = max(k_sigma × σ, floor)`` in its direction (`mechanisms.direction`); a signal
  read off a log2 histogram's bucket bounds (`mechanisms.LOG2_BUCKETS`) moves in steps
  of 2×, so ``d`` is also at least ``(min_ratio − 1) × b``: two buckets up, one being its
  resolution. A finding key is active inside its findings' windows (`inside`).
- `best_lag`: for each lag ``L`` in 0..``max_lag_s``, the share of the window's seconds
  ``t`` where the candidate was active at ``t − L`` (its *cooccurrence*) and its median
  over those ``t − L`` (its *level*); the best lag has the highest share (ties: smallest).
- `starts_first`: active in the ``max_lag_s`` seconds before the window starts, or no
  later than one symptom sample plus ``pad_start_s`` after it (a scrape interval's value
  fills all its seconds; a host sample stamped ``t`` describes the second before ``t``,
  as correlate.py's ``PAD_S``).
- `specificity`: the candidate's *stretches* (runs of active seconds, merged across
  ``stretch_gap_s``) over the whole capture, and how many overlap a window of the
  symptom within ``max_lag_s`` after them.
- `finding_strength`: per window and finding key, the finding overlapping it most and the
  worst severity among them (info 0.25, minor 0.5, major 0.75, critical 1).

All vectorised over the seconds (joins and group-bys); Python loops only over lags and
candidate columns.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from analyzer import intervals
from analyzer.findings import Finding
from analyzer.parsers.base import TS
from analyzer.symptoms.mechanisms import direction, floor, min_ratio

THRESHOLDS = {
    "max_lag_s": 5,  # a cause may lead its effect by 0–5 s
    "pad_s": 2,  # seconds after a window left out of the candidates' baselines
    "k_sigma": 4.0,  # active: ≥ 4 σ from its baseline (and ≥ the column's floor)
    "stretch_gap_s": 2,
    "pad_start_s": 1,  # a host sample stamped t covers (t − 1, t]: up to 1 s late (PAD_S)
    "min_outside": 10,  # seconds outside the windows needed for a baseline (else all)
}
T = THRESHOLDS
SEVERITY_STRENGTH = {"info": 0.25, "minor": 0.5, "major": 0.75, "critical": 1.0}
_1S = pl.duration(seconds=1)


def inside(ts: pl.Series, spans: pl.DataFrame, before_s: float, after_s: float) -> pl.Series:
    """Per second of ``ts``: inside a span [start − before, end + after) of ``spans``
    (columns start/end or start_ts/end_ts)."""
    if spans.is_empty():
        return pl.Series([False] * ts.len())
    s, e = ("start_ts", "end_ts") if "start_ts" in spans.columns else ("start", "end")
    secs = spans.select(
        ts=pl.datetime_ranges(
            pl.col(s).dt.truncate("1s") - pl.duration(seconds=before_s),
            pl.col(e) + pl.duration(seconds=after_s) - pl.duration(microseconds=1),
            "1s",
        )
    ).explode("ts")
    secs = secs.select(pl.col("ts").cast(TS)).unique().with_columns(hit=pl.lit(True))
    return pl.DataFrame({"ts": ts}).join(secs, on="ts", how="left")["hit"].fill_null(False)


def baselines(
    sig: pl.DataFrame, cols: list[str], near: pl.Series
) -> dict[str, tuple[float, float]]:
    """Per column: (median, threshold distance ``max(k_sigma × σ, floor)``) over the
    seconds outside ``near`` (over all seconds when fewer than ``min_outside`` remain)."""

    def level(frame: pl.DataFrame) -> dict[str, Any]:
        med = [pl.col(c).median().alias(f"m:{c}") for c in cols]
        mad = [(pl.col(c) - pl.col(c).median()).abs().median().alias(f"d:{c}") for c in cols]
        n = [pl.col(c).count().alias(f"n:{c}") for c in cols]
        return frame.select(med + mad + n).row(0, named=True)

    if not cols:
        return {}
    out, every = level(sig.filter(~near)), level(sig)
    res = {}
    for c in cols:  # per column, not per row
        got = out if out[f"n:{c}"] >= T["min_outside"] else every
        med = float(got[f"m:{c}"])
        step = (min_ratio(c) - 1) * abs(med)  # 0 but for log2-bucket signals
        res[c] = (med, max(T["k_sigma"] * 1.4826 * float(got[f"d:{c}"]), floor(c), step))
    return res


def is_active(col: str, level: tuple[float, float]) -> pl.Expr:
    med, dist = level
    x = pl.col(col)
    how = direction(col)
    if how == "up":
        return x >= med + dist
    if how == "down":
        return x <= med - dist
    return (x - med).abs() >= dist


def window_seconds(windows: pl.DataFrame) -> pl.DataFrame:
    return (
        windows.select("window_id", ts=pl.datetime_ranges("start_ts", pl.col("end_ts") - _1S, "1s"))
        .explode("ts")
        .with_columns(pl.col("ts").cast(TS))
    )


def best_lag(
    active: pl.DataFrame, values: pl.DataFrame, windows: pl.DataFrame, names: list[str]
) -> pl.DataFrame:
    """(window_id, candidate, lag_s, cooccurrence, level) at the best lag."""
    ws = window_seconds(windows)
    xs = values.rename({c: f"x:{c}" for c in values.columns if c != "ts"})
    xcols = [c for c in xs.columns if c != "ts"]
    parts = []
    for lag in range(T["max_lag_s"] + 1):
        j = (
            ws.with_columns(src=pl.col("ts") - pl.duration(seconds=lag))
            .join(active.rename({"ts": "src"}), on="src", how="left")
            .join(xs.rename({"ts": "src"}), on="src", how="left")
        )
        agg = j.group_by("window_id").agg(
            [pl.col(c).fill_null(False).mean().alias(c) for c in names]
            + [pl.col(c).median().alias(c) for c in xcols]
        )
        co = agg.unpivot(
            index="window_id", on=names, variable_name="candidate", value_name="cooccurrence"
        )
        lv = agg.unpivot(index="window_id", on=xcols, variable_name="candidate", value_name="level")
        lv = lv.with_columns(pl.col("candidate").str.strip_prefix("x:"))
        parts.append(
            co.join(lv, on=["window_id", "candidate"], how="left").with_columns(
                lag_s=pl.lit(lag, pl.Int32)
            )
        )
    return (
        pl.concat(parts)
        .sort(
            ["window_id", "candidate", "cooccurrence", "lag_s"],
            descending=[False, False, True, False],
        )
        .group_by("window_id", "candidate", maintain_order=True)
        .first()
    )


def starts_first(
    active: pl.DataFrame, windows: pl.DataFrame, names: list[str], sym: dict[str, Any]
) -> pl.DataFrame:
    """(window_id, candidate, starts_first): active in [start − max_lag_s, start + step
    + pad_start_s), ``step`` the symptom's sample spacing."""
    step = max(1, round(float(sym.get("step_s") or 1.0)))
    lead = windows.select(
        "window_id",
        ts=pl.datetime_ranges(
            pl.col("start_ts") - pl.duration(seconds=T["max_lag_s"]),
            pl.col("start_ts") + pl.duration(seconds=step - 1 + T["pad_start_s"]),
            "1s",
        ),
    ).explode("ts")
    agg = (
        lead.with_columns(pl.col("ts").cast(TS))
        .join(active, on="ts", how="left")
        .group_by("window_id")
        .agg([pl.col(c).fill_null(False).any().alias(c) for c in names])
    )
    return agg.unpivot(
        index="window_id", on=names, variable_name="candidate", value_name="starts_first"
    )


def specificity(active: pl.DataFrame, windows: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """(candidate, stretches, stretches_with_symptom, specificity) over the capture."""
    found = []
    for c in names:  # one vectorised run search per candidate column
        runs = intervals.runs(
            active["ts"], active[c].cast(pl.Float64), enter=1.0, merge_gap_s=T["stretch_gap_s"]
        )
        found.append(runs.with_columns(candidate=pl.lit(c)))
    stretches = pl.concat(found).with_row_index("sid")
    lag = pl.duration(seconds=T["max_lag_s"])
    hit = (
        stretches.join(windows.select("start_ts", "end_ts"), how="cross")
        .filter((pl.col("start") < pl.col("end_ts")) & (pl.col("end") + lag > pl.col("start_ts")))
        .group_by("candidate")
        .agg(stretches_with_symptom=pl.col("sid").n_unique())
    )
    total = stretches.group_by("candidate").agg(stretches=pl.len())
    return (
        pl.DataFrame({"candidate": names})
        .join(total, on="candidate", how="left")
        .join(hit, on="candidate", how="left")
        .with_columns(pl.col("stretches", "stretches_with_symptom").fill_null(0).cast(pl.Int32))
        .with_columns(
            specificity=pl.when(pl.col("stretches") > 0).then(
                pl.col("stretches_with_symptom") / pl.col("stretches")
            )
        )
    )


def findings_frame(findings: list[Finding]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "finding_id": list(range(1, len(findings) + 1)),
            "key": [f.key for f in findings],
            "kind": [f.kind for f in findings],
            "start": [f.start for f in findings],
            "end": [f.end for f in findings],
            "severity": [f.severity for f in findings],
        },
        schema_overrides={"start": TS, "end": TS, "finding_id": pl.Int32},
    )


def finding_strength(fr: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """(window_id, candidate, finding_id, fstrength): the key's finding overlapping the
    window (widened by max_lag before) most, and the worst severity among them."""
    if fr.is_empty():
        return pl.DataFrame(
            schema={
                "window_id": pl.Int32,
                "candidate": pl.String,
                "finding_id": pl.Int32,
                "fstrength": pl.Float64,
            }
        )
    lo = pl.col("start_ts") - pl.duration(seconds=T["max_lag_s"])
    over = pl.min_horizontal("end", "end_ts") - pl.max_horizontal("start", lo)
    return (
        windows.select("window_id", "start_ts", "end_ts")
        .join(fr, how="cross")
        .with_columns(over_us=over.dt.total_microseconds())
        .filter(pl.col("over_us") > 0)
        .with_columns(s=pl.col("severity").replace_strict(SEVERITY_STRENGTH, default=0.0))
        .group_by("window_id", pl.col("key").alias("candidate"))
        .agg(
            pl.col("finding_id").sort_by("over_us", descending=True).first(),
            fstrength=pl.col("s").max(),
        )
    )
