"""What explains a symptom window: every signals column and every finding key, scored
against every window of one symptom (table ``symptom_explanations``; the method, by
hand, is docs/symptoms.md "What explains it").

The measurements per candidate and window (`analyzer.symptoms.cooccur`): its active
seconds, best lag 0–5 s and cooccurrence, its level and the stretches of the capture it
was active in. From them, here:

- **excess** = the candidate's level (its median over the window, shifted by the best
  lag) minus its baseline ``b``, in units of its threshold distance ``d`` (1 = at the
  threshold; down: ``b −`` level; either: the absolute value);
  ``strength = excess / (1 + excess)``; a finding's strength is its severity.
- **specificity** = stretches followed by a window of this symptom / stretches.
- **score** = cooccurrence × specificity × strength.

Role: **cause** when cooccurrence ≥ ``min_cooccurrence``, excess ≥ ``min_excess``
(signals), specificity ≥ ``min_specificity``, it starts first **and** a mechanism links
the pair (`mechanisms.group_of`); **concurrent** when it overlaps as much (cooccurrence
and excess) but one of the others fails — never a cause (docs/detectors.md: causes need
mechanisms); **weak** otherwise (no sentence: not shown). Rank within a window: causes,
then concurrent, then weak; each by score (then by name).

**Throttling also shows as CPU pressure.** A task of a throttled cgroup stays runnable
while it waits for the next CFS period, so PSI counts that wait as CPU pressure
(``psi_cpu_some_pct``; bpftrace's run-queue latency and the CPU_CONTENTION finding, which
read the same waits, likewise), while the run queue (vmstat ``r``, the kernel's
``nr_running``) drops the throttled tasks. So in a window that throttling explains (a
``cpu_quota`` cause), those contention candidates (`BY_THROTTLING`) are concurrent, not
causes, unless the run queue itself overlaps the window as a cause would (cooccurrence
and excess): only then were tasks waiting for a CPU that was busy.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from analyzer.findings import Finding
from analyzer.parsers.base import TS
from analyzer.symptoms import cooccur as co
from analyzer.symptoms import words
from analyzer.symptoms.mechanisms import UNIT_OF, candidates, direction, group_of
from analyzer.symptoms.series import exists

THRESHOLDS = {
    "min_cooccurrence": 0.6,  # a cause: active in ≥ 60 % of the window's seconds …
    "min_excess": 1.0,  # … at least at its threshold …
    "min_specificity": 0.5,  # … and at least half its stretches came with the symptom
}
T = THRESHOLDS
#: contention candidates that throttling raises too (module docstring); findings of the
#: cpu_contention group count as well
BY_THROTTLING = ("psi_cpu_some_pct", "runqlat_p99_us")
ROLE_ORDER = {"cause": 0, "concurrent": 1, "weak": 2}


def explain(
    con: duckdb.DuckDBPyConnection,
    sig: pl.DataFrame,
    sym: dict[str, Any],
    windows: pl.DataFrame,
    findings: list[Finding],
) -> pl.DataFrame:
    """Rows of ``symptom_explanations`` for the ``windows`` of symptom ``sym`` (a row of
    ``symptoms``); ``findings`` in rank order (finding_id = position + 1)."""
    sig = sig.with_columns(pl.col("ts").cast(TS))
    cols = [c for c in candidates() if c in sig.columns and sig[c].null_count() < sig.height]
    near = co.inside(sig["ts"], windows, co.T["max_lag_s"], co.T["pad_s"])
    base = co.baselines(sig, cols, near)
    active = sig.select("ts", *[co.is_active(c, base[c]).fill_null(False).alias(c) for c in cols])
    fr = co.findings_frame(findings)
    keys = fr["key"].unique(maintain_order=True).to_list() if fr.height else []
    for k in keys:
        spans = fr.filter(pl.col("key") == k).select(start="start", end="end")
        active = active.with_columns(co.inside(sig["ts"], spans, 0, 0).alias(k))
    names = cols + keys
    if not names:  # no host signal has data and nothing was found: nothing can explain it
        return pl.DataFrame()
    best = co.best_lag(active, sig.select("ts", *cols), windows, names)
    rows = (
        best.join(co.starts_first(active, windows, names, sym), on=["window_id", "candidate"])
        .join(co.specificity(active, windows, names), on="candidate")
        .join(co.finding_strength(fr, windows), on=["window_id", "candidate"], how="left")
    )
    kinds = dict(zip(fr["key"], fr["kind"], strict=True)) if fr.height else {}
    meta = pl.DataFrame(
        {
            "candidate": names,
            "candidate_type": ["signal"] * len(cols) + ["finding"] * len(keys),
            "baseline": [base[c][0] for c in cols] + [None] * len(keys),
            "dist": [base[c][1] for c in cols] + [None] * len(keys),
            "dir": [direction(c) for c in cols] + ["up"] * len(keys),
            "unit": [UNIT_OF.get(c, "") for c in cols] + [""] * len(keys),
            "mechanism_group": [group_of(c, "signal", sym["kind"]) for c in cols]
            + [group_of(kinds[k], "finding", sym["kind"]) for k in keys],
        },
        schema_overrides={"baseline": pl.Float64, "dist": pl.Float64, "mechanism_group": pl.String},
    )
    rows = _judge(rows.join(meta, on="candidate"))
    rows = rows.join(_entities(con, rows, windows), on=["window_id", "candidate"], how="left")
    return _sentences(rows, sym, windows).with_columns(
        symptom_id=pl.lit(sym["symptom_id"], pl.Int32)
    )


def _judge(rows: pl.DataFrame) -> pl.DataFrame:
    """excess, strength, score, role and why_not (vectorised; see the module docstring)."""
    c = pl.col
    raw = c("level") - c("baseline")
    signed = (
        pl.when(c("dir") == "down")
        .then(-raw)
        .when(c("dir") == "either")
        .then(raw.abs())
        .otherwise(raw)
    )
    is_sig = c("candidate_type") == "signal"
    rows = rows.with_columns(
        excess=pl.when(is_sig).then(signed / c("dist")),
        threshold=pl.when(c("dir") == "down")
        .then(c("baseline") - c("dist"))
        .otherwise(c("baseline") + c("dist")),
    )
    pos = c("excess").clip(lower_bound=0)
    strength = pl.when(is_sig).then(pos / (1 + pos)).otherwise(c("fstrength")).fill_null(0.0)
    rows = rows.with_columns(strength=strength).with_columns(
        score=c("cooccurrence") * c("specificity").fill_null(0) * c("strength"),
        overlaps=(c("cooccurrence") >= T["min_cooccurrence"])
        & (~is_sig | (c("excess").fill_null(0) >= T["min_excess"])),
    )
    specific = c("specificity").fill_null(0) >= T["min_specificity"]
    cause = c("overlaps") & c("mechanism_group").is_not_null() & c("starts_first") & specific
    rows = rows.with_columns(
        role=pl.when(cause)
        .then(pl.lit("cause"))
        .when(c("overlaps"))
        .then(pl.lit("concurrent"))
        .otherwise(pl.lit("weak"))
    )
    # throttling's own CPU pressure (module docstring): per window, is a cpu_quota
    # candidate a cause, and does the run queue overlap as a cause would?
    throttled = ((c("role") == "cause") & (c("mechanism_group") == "cpu_quota")).any()
    runq = ((c("candidate") == "runq") & c("overlaps")).any()
    ambiguous = c("candidate").is_in(BY_THROTTLING) | (
        (c("candidate_type") == "finding") & (c("mechanism_group") == "cpu_contention")
    )
    rows = rows.with_columns(
        _throttling=ambiguous
        & (c("role") == "cause")
        & throttled.over("window_id")
        & ~runq.over("window_id")
    ).with_columns(role=pl.when(c("_throttling")).then(pl.lit("concurrent")).otherwise(c("role")))
    pct = (c("cooccurrence") * 100).round(0).cast(pl.Int64).cast(pl.String)
    weak = (
        pl.when(c("cooccurrence") < T["min_cooccurrence"])
        .then(
            pl.concat_str(
                [
                    pl.lit("active in only "),
                    pct,
                    pl.lit(
                        f" % of the window's seconds (a cause: ≥ {T['min_cooccurrence'] * 100:.0f} %)"
                    ),
                ]
            )
        )
        .otherwise(
            pl.concat_str(
                [
                    pl.lit("its change is "),
                    c("excess").round(2).cast(pl.String),
                    pl.lit(f" × its threshold distance (a cause: ≥ {T['min_excess']:g})"),
                ]
            )
        )
    )
    reasons = pl.concat_list(
        pl.when(c("mechanism_group").is_null()).then(pl.lit("no known mechanism links it to this symptom")),
        pl.when(~c("starts_first")).then(pl.lit(f"it was not active in the {co.T['max_lag_s']} s before the window started: it follows the symptom")),
        pl.when(~specific).then(
            pl.concat_str([pl.lit("only "), c("stretches_with_symptom").cast(pl.String), pl.lit(" of its "), c("stretches").cast(pl.String), pl.lit(" stretches came with the symptom")])
        ),
        pl.when(c("_throttling")).then(pl.lit("the cgroup's throttling explains it: throttled threads count as waiting for a CPU, and the run queue did not grow")),
    ).list.drop_nulls().list.join("; ")  # fmt: skip
    why = (
        pl.when(c("role") == "cause")
        .then(None)
        .when(c("role") == "weak")
        .then(weak)
        .otherwise(reasons)
    )
    order = c("role").replace_strict(ROLE_ORDER, return_dtype=pl.Int32)
    return (
        rows.with_columns(why_not=why, _o=order)
        .sort(
            ["window_id", "_o", "score", "candidate"],
            descending=[False, False, True, False],
            nulls_last=True,
        )
        .with_columns(rank=(pl.int_range(pl.len()).over("window_id") + 1).cast(pl.Int32))
        .drop("_o", "overlaps", "fstrength", "dist", "_throttling")
    )


def _entities(
    con: duckdb.DuckDBPyConnection, rows: pl.DataFrame, windows: pl.DataFrame
) -> pl.DataFrame:
    """(window_id, candidate, entity): the most-throttled cgroup in the lagged window."""
    empty = pl.DataFrame(
        schema={"window_id": pl.Int32, "candidate": pl.String, "entity": pl.String}
    )
    want = rows.filter(
        pl.col("candidate").is_in(["throttled_pct", "throttled_ms_per_s"])
        & (pl.col("role") != "weak")
    )
    if want.is_empty() or not exists(con, "cgroup_cpu"):
        return empty
    spans = want.join(windows.select("window_id", "start_ts", "end_ts"), on="window_id").select(
        "window_id", "candidate",
        lo=pl.col("start_ts") - pl.duration(seconds=1) * pl.col("lag_s"),
        hi=pl.col("end_ts") - pl.duration(seconds=1) * pl.col("lag_s"),
    )  # fmt: skip
    con.register("_symptom_spans", spans.to_arrow())
    try:
        found = con.sql(
            "SELECT window_id, candidate, arg_max(cgroup, p) AS entity FROM ("
            " SELECT s.window_id, s.candidate, c.cgroup, avg(c.throttled_pct) AS p"
            " FROM _symptom_spans s JOIN cgroup_cpu c ON c.ts >= s.lo AND c.ts < s.hi"
            " WHERE c.throttled_pct IS NOT NULL GROUP BY ALL) GROUP BY ALL"
        ).pl()
    finally:
        con.unregister("_symptom_spans")
    return found.with_columns(pl.col("window_id").cast(pl.Int32)) if found.height else empty


def _sentences(rows: pl.DataFrame, sym: dict[str, Any], windows: pl.DataFrame) -> pl.DataFrame:
    """The sentence of every cause and concurrent row (`words.sentence`); weak rows get none."""
    shown = rows.filter(pl.col("role") != "weak")
    lags = (
        shown.filter(pl.col("role") == "cause")
        .group_by("candidate")
        .agg(lo=pl.col("lag_s").min(), hi=pl.col("lag_s").max(), n=pl.len())
    )
    span = {lg["candidate"]: (lg["lo"], lg["hi"], lg["n"]) for lg in lags.iter_rows(named=True)}
    win = {w["window_id"]: w for w in windows.iter_rows(named=True)}
    texts = [
        words.sentence(r, sym, win[r["window_id"]], r["dir"], span.get(r["candidate"], (0, 0, 0)))
        for r in shown.iter_rows(named=True)  # the shown rows only: a few per window
    ]
    said = shown.select("window_id", "candidate").with_columns(
        sentence=pl.Series(texts, dtype=pl.String)
    )
    return rows.join(said, on=["window_id", "candidate"], how="left").drop("dir")
