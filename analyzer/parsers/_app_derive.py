"""Per-interval series of `analyzer.parsers.app_metrics` (its docstring states the method
and the tables): counter rates, histogram and summary quantiles, Triton's duration / count
counter pairs, from frames of `app_metric_sample` rows, batch by batch.

Cumulative series: ``counter`` samples (``_created`` excluded), ``_bucket``/``_count``/
``_sum`` of histograms, ``_count``/``_sum`` of summaries, untyped ``*_total``. Between two
scrapes of a series, ``delta = value - previous``, or ``value`` when it went down (a
counter reset starts from zero, as Prometheus' ``rate()`` assumes).
"""

from __future__ import annotations

import math

import polars as pl

KEY = ["endpoint", "metric", "labels", "le"]
GROUP = ["ts", "endpoint", "family", "labels"]
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
#: Triton's cumulative microsecond counters and the request count each is divided by
#: (docs/user_guide/metrics.md of triton-inference-server: the ``_sum``/``_count`` of the
#: equivalent summaries). Exact when the response cache is off (the compute times do not
#: count cached requests).
DURATION_PAIRS = {
    "nv_inference_request_duration_us": "nv_inference_request_success",
    "nv_inference_queue_duration_us": "nv_inference_request_success",
    "nv_inference_compute_input_duration_us": "nv_inference_request_success",
    "nv_inference_compute_infer_duration_us": "nv_inference_request_success",
    "nv_inference_compute_output_duration_us": "nv_inference_request_success",
    "nv_cache_hit_duration_per_model": "nv_cache_num_hits_per_model",
    "nv_cache_miss_duration_per_model": "nv_cache_num_misses_per_model",
}
#: unit of a family from its name (Prometheus naming), and the factor to milliseconds
_UNITS = (
    (r"_seconds$", "s", 1e3),
    (r"(?:_milliseconds|_ms)$", "ms", 1.0),
    (r"(?:_microseconds|_us)$|^nv_cache_(?:hit|miss)_duration_per_model$", "us", 1e-3),
    (r"(?:_nanoseconds|_ns)$", "ns", 1e-6),
    (r"^tgi_.*_duration$", "s", 1e3),  # TGI's durations carry no unit suffix: seconds
)


def _cumulative(samples: pl.DataFrame) -> pl.DataFrame:
    t, m, f = pl.col("type"), pl.col("metric"), pl.col("family")
    counter = t.eq("counter") & ~m.str.ends_with("_created")
    hist = t.eq("histogram") & (m.eq(f + "_bucket") | m.eq(f + "_count") | m.eq(f + "_sum"))
    summary = t.eq("summary") & (m.eq(f + "_count") | m.eq(f + "_sum"))
    untyped = t.is_in(["unknown", "untyped"]) & m.str.ends_with("_total")
    keep = (counter | hist | summary | untyped) & pl.col("ts").is_not_null()
    return samples.filter(keep).select(
        "ts", "endpoint", "family", "metric", "type", *KEY[2:], "value"
    )


class Deltas:
    """Interval deltas of cumulative series, carried across batches."""

    def __init__(self) -> None:
        self.carry: pl.DataFrame | None = None

    def __call__(self, samples: pl.DataFrame) -> pl.DataFrame:
        """Rows of ``samples``' cumulative series that have a previous sample: the
        sample columns plus ``prev_ts``, ``dt_s``, ``delta``, ``reset``."""
        cur = _cumulative(samples).with_columns(_carry=pl.lit(False))
        rows = cur if self.carry is None else pl.concat([self.carry, cur], how="vertical_relaxed")
        rows = rows.sort([*KEY, "ts"], maintain_order=True)
        rows = rows.with_columns(
            prev_value=pl.col("value").shift(1).over(KEY),
            prev_ts=pl.col("ts").shift(1).over(KEY),
        )
        self.carry = (
            rows.group_by(KEY, maintain_order=True)
            .last()
            .select(cur.columns)
            .with_columns(_carry=pl.lit(True))
        )
        v, pv = pl.col("value"), pl.col("prev_value")
        keep = ~pl.col("_carry") & pv.is_not_null() & (pl.col("ts") > pl.col("prev_ts"))
        return rows.filter(keep).select(
            pl.exclude("_carry", "prev_value"),
            dt_s=(pl.col("ts") - pl.col("prev_ts")).dt.total_microseconds() / 1e6,
            delta=pl.when(v < pv).then(v).otherwise(v - pv),
            reset=v < pv,
        )


def rates(d: pl.DataFrame) -> pl.DataFrame:
    """`app_metric_rate` rows: every cumulative series but histogram buckets."""
    r = d.filter(pl.col("le").is_null()).with_columns(rate_per_s=pl.col("delta") / pl.col("dt_s"))
    return r.sort("ts", "endpoint", "metric", "labels", maintain_order=True)


def _quantile(q: float) -> pl.Expr:
    """Prometheus' ``histogram_quantile`` over one interval's bucket deltas (rows of one
    histogram sorted by ``le``, ``cum`` made monotonic), as an aggregation."""
    le, cum, ple, pcum = pl.col("le"), pl.col("cum"), pl.col("prev_le"), pl.col("prev_cum")
    total = cum.filter(le == math.inf).max()
    rank = total * q
    cand = (le != math.inf) & (cum >= rank)
    le_b, cum_b = le.filter(cand).first(), cum.filter(cand).first()
    ple_b, pcum_b = ple.filter(cand).first(), pcum.filter(cand).first()
    start = ple_b.fill_null(0.0)
    return (
        pl.when(total.is_null() | (total <= 0) | (pl.len() < 2))
        .then(None)
        .when(le_b.is_null())  # the rank falls into the +Inf bucket
        .then(le.filter(le != math.inf).max())
        .when(ple_b.is_null() & (le_b <= 0))
        .then(le_b)
        .otherwise(start + (le_b - start) * (rank - pcum_b) / (cum_b - pcum_b))
    )


def _histograms(d: pl.DataFrame) -> pl.DataFrame:
    b = d.filter(pl.col("le").is_not_null() & pl.col("type").eq("histogram"))
    b = (
        b.group_by([*GROUP, "le"])  # equal bounds written twice ("1" and "1.0") add up
        .agg(pl.col("delta").sum(), pl.col("dt_s").first(), pl.col("reset").any())
        .sort([*GROUP, "le"])
        .with_columns(cum=pl.col("delta").cum_max().over(GROUP))
        .with_columns(
            prev_le=pl.col("le").shift(1).over(GROUP),
            prev_cum=pl.col("cum").shift(1).over(GROUP).fill_null(0.0),
        )
    )
    q = b.group_by(GROUP).agg(
        pl.col("dt_s").first(),
        pl.col("reset").any(),
        pl.col("cum").filter(pl.col("le") == math.inf).max().alias("inf_count"),
        *[_quantile(v).alias(k) for k, v in QUANTILES.items()],
    )
    return q.join(_count_sum(d, "histogram"), on=GROUP, how="left").with_columns(
        type=pl.lit("histogram"),
        count=pl.coalesce("count", "inf_count"),
        reset=pl.col("reset") | pl.col("reset_cs").fill_null(False),
    )


def _count_sum(d: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Δ``_count`` and Δ``_sum`` of each histogram or summary per interval."""
    f, m = pl.col("family"), pl.col("metric")
    cs = d.filter(pl.col("type").eq(kind) & pl.col("le").is_null())
    return cs.group_by(GROUP).agg(
        pl.col("delta").filter(m == f + "_count").first().alias("count"),
        pl.col("delta").filter(m == f + "_sum").first().alias("sum"),
        pl.col("dt_s").first().alias("dt_cs"),
        pl.col("reset").any().alias("reset_cs"),
    )


def _summaries(d: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    cs = _count_sum(d, "summary")
    qs = samples.filter(pl.col("type").eq("summary") & pl.col("quantile").is_not_null())
    qs = qs.group_by(GROUP).agg(
        *[
            pl.col("value").filter(pl.col("quantile") == v).first().alias(k)
            for k, v in QUANTILES.items()
        ]
    )
    return cs.join(qs, on=GROUP, how="left").with_columns(
        type=pl.lit("summary"), dt_s=pl.col("dt_cs"), reset=pl.col("reset_cs")
    )


def _pairs(d: pl.DataFrame) -> pl.DataFrame:
    g = ["ts", "endpoint", "labels"]
    dur = d.filter(pl.col("family").is_in(list(DURATION_PAIRS)) & pl.col("le").is_null())
    dur = dur.with_columns(count_family=pl.col("family").replace_strict(DURATION_PAIRS))
    cnt = d.filter(pl.col("family").is_in(list(set(DURATION_PAIRS.values()))))
    cnt = cnt.select(*g, count_family="family", count="delta", reset_c="reset")
    return dur.join(cnt, on=[*g, "count_family"], how="inner").select(
        *GROUP,
        "dt_s",
        "count",
        sum="delta",
        type=pl.lit("counter_pair"),
        reset=pl.col("reset") | pl.col("reset_c"),
    )


def quantiles(d: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    """`app_metric_quantile` rows: histograms, summaries and Triton counter pairs."""
    parts = [p for p in (_histograms(d), _summaries(d, samples), _pairs(d)) if p.height]
    if not parts:
        return pl.DataFrame()
    out = pl.concat(parts, how="diagonal_relaxed")
    missing = [c for c in (*QUANTILES, "sum") if c not in out.columns]
    out = out.with_columns(pl.lit(None, pl.Float64).alias(c) for c in missing)
    hits = [(pl.col("family").str.contains(pattern), name, f) for pattern, name, f in _UNITS]
    unit = pl.coalesce(pl.when(hit).then(pl.lit(name)) for hit, name, _ in hits)
    factor = pl.coalesce(pl.when(hit).then(pl.lit(f)) for hit, _, f in hits)
    count = pl.col("count")
    out = out.with_columns(
        rate_per_s=count / pl.col("dt_s"),
        mean=pl.when(count > 0).then(pl.col("sum") / count),
        unit=unit,
        _f=factor,
    )
    out = out.with_columns(
        *[(pl.col(c) * pl.col("_f")).alias(f"{c}_ms") for c in ("mean", *QUANTILES)]
    )
    return out.sort("ts", "endpoint", "family", "labels", maintain_order=True)
