"""The symptom series: the application's own latency, step time and throughput on the
signals' 1-second grid (tables ``symptoms`` and ``symptom_series``; schemas in
`analyzer.symptoms.schema`).

Sources, each optional:

- ``app_metric_quantile`` (one row per scrape interval, endpoint, family and labels):
  the request-latency families `LATENCY_FAMILIES` (vLLM, SGLang, Triton, TGI) of an
  endpoint that exposes any of them, else every family of that endpoint with a time
  unit. Stats ``p99`` (primary: windows are found on it) and ``p50`` (context) from
  ``p99_ms``/``p50_ms``; a family without percentiles (Triton's duration counters)
  gives ``mean`` from ``mean_ms`` (primary). Requests per second (``rate_per_s``) of the
  request-level families `REQUEST_FAMILIES` (throughput, primary).
- ``app_metric_rate``: tokens per second of `TOKEN_METRICS` (throughput, primary).
- ``app_log_line``: ``step_time_ms`` (step time) and ``tokens_per_s`` (throughput) per
  log file (primary).
- ``app_series`` (``--app-series``): per file and series; the kind and unit from the
  series name (`kind_of`). Per-request records (median spacing < 1 s) become ``p99``
  (primary) and ``p50`` per second over the records that cover the second: a step time
  stamped ``t`` covers its own duration, the ``round(value / 1000)`` seconds up to
  ``t``'s (steps run one after another; the stamp is the step's end), any other record
  (a request: they overlap) the second of its stamp, as a Prometheus histogram counts
  an observation when the request completes. Other series are taken as they are
  (``value``).

Time attribution is the signals' (`analyzer.signals`): a sample stamped ``t`` that covers
``d`` seconds (``dt_s`` of a scrape interval, the time since the log file's previous
line, a series' median spacing; at least 1, at most 600) fills the ``round(d)`` grid
seconds up to and including ``t``'s second; samples meeting in one second are averaged.
Seconds outside the signals' grid are dropped.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import duckdb
import polars as pl

from analyzer.parsers.base import TS
from analyzer.sql import ident
from analyzer.symptoms.mechanisms import LATENCY, STEP, THROUGHPUT, VALUE

LATENCY_FAMILIES = (
    "vllm:e2e_request_latency_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:time_per_output_token_seconds",
    "vllm:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds",
    "sglang:time_to_first_token_seconds",
    "sglang:time_per_output_token_seconds",
    "sglang:inter_token_latency_seconds",
    "nv_inference_request_duration_us",
    "tgi_request_duration",
    "tgi_request_mean_time_per_token_duration",
)
REQUEST_FAMILIES = (
    "vllm:e2e_request_latency_seconds",
    "sglang:e2e_request_latency_seconds",
    "nv_inference_request_duration_us",
    "tgi_request_duration",
)
TOKEN_METRICS = (
    "vllm:generation_tokens_total",
    "sglang:generation_tokens_total",
    "tgi_request_generated_tokens_sum",
)
MAX_STEP_S = 600  # as signals.MAX_STEP_S: a sample describes at most this many seconds
KEYS = ("source_table", "source", "family", "labels", "stat")
MAX_GRID = timedelta(days=8)  # as signals.MAX_GRID, for a bundle without host signals


def build(
    con: duckdb.DuckDBPyConnection, lo: datetime | None, hi: datetime | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(catalogue, series) for the grid ``lo``..``hi``: one row per symptom (the
    descriptive columns of ``symptoms``) and one per symptom and second with a value.
    ``lo``/``hi`` None (no host signals): the samples' own span, at most `MAX_GRID`
    up to the last."""
    parts = [f(con) for f in (_quantiles, _tokens, _log_lines, _user_series)]
    found = [p for p in parts if p is not None and p.height]
    if not found:
        return pl.DataFrame(), pl.DataFrame()
    samples = pl.concat(found, how="diagonal_relaxed")
    keys = samples.select(*KEYS).unique(maintain_order=True).sort(KEYS, nulls_last=True)
    keys = keys.with_row_index("symptom_id", offset=1).with_columns(
        pl.col("symptom_id").cast(pl.Int32)
    )
    samples = samples.join(keys, on=list(KEYS), how="left", nulls_equal=True)
    sec = pl.col("ts").dt.truncate("1s")
    n = pl.col("dur_s").fill_null(1).round(0).clip(1, MAX_STEP_S).cast(pl.Int64)
    spread = (
        samples.filter(pl.col("ts").is_not_null() & pl.col("value").is_finite())
        .with_columns(ts=pl.datetime_ranges(sec - pl.duration(seconds=n - 1), sec, "1s"))
        .explode("ts")
    )
    if lo is None or hi is None:
        hi = spread["ts"].max()
        lo = max(spread["ts"].min(), hi - MAX_GRID)  # type: ignore[operator]
    grid = (
        spread.filter(pl.col("ts").is_between(pl.lit(lo, TS), pl.lit(hi, TS)))
        .group_by("symptom_id", "ts")
        .agg(pl.col("value").mean())
        .sort("symptom_id", "ts")
        .select(pl.col("ts").cast(TS), "symptom_id", "value")
    )
    meta = samples.group_by("symptom_id").agg(
        pl.col("name", "kind", "unit", "worse", "is_primary").first(),
        step_s=pl.col("dur_s").median(),
    )
    counts = grid.group_by("symptom_id").agg(seconds=pl.len())
    catalogue = (
        keys.join(meta, on="symptom_id")
        .join(counts, on="symptom_id", how="left")
        .with_columns(pl.col("seconds").fill_null(0))
        .sort("symptom_id")
    )
    return catalogue, grid


def exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Table ``name`` exists in ``con``."""
    n = con.sql(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", params=[name]
    ).fetchall()[0][0]
    return bool(n)


def _quantiles(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Latency stats and request rates from ``app_metric_quantile``."""
    if not exists(con, "app_metric_quantile"):
        return None
    q = con.sql(
        f"SELECT ts, endpoint, family, labels, dt_s, p99_ms, p50_ms, mean_ms, rate_per_s "
        f"FROM {ident('app_metric_quantile')} WHERE ts IS NOT NULL AND unit IS NOT NULL"
    ).pl()
    if q.is_empty():
        return None
    known = pl.col("family").is_in(LATENCY_FAMILIES)
    q = q.filter(known | ~known.any().over("endpoint"))
    q = q.with_columns(
        has99=pl.col("p99_ms").is_not_null().any().over("endpoint", "family", "labels")
    )
    stats = [
        ("p99", "p99_ms", LATENCY, "ms", "up", pl.col("has99")),
        ("p50", "p50_ms", LATENCY, "ms", "up", pl.col("has99")),
        ("mean", "mean_ms", LATENCY, "ms", "up", ~pl.col("has99")),
        ("rate", "rate_per_s", THROUGHPUT, "1/s", "down", pl.col("family").is_in(REQUEST_FAMILIES)),
    ]
    out = []
    for stat, col, kind, unit, worse, keep in stats:
        what = "requests/s of " if stat == "rate" else f"{stat} of "
        out.append(
            q.filter(keep).select(
                "ts",
                "family",
                "labels",
                source_table=pl.lit("app_metric_quantile"),
                source=pl.col("endpoint"),
                dur_s=pl.col("dt_s"),
                value=pl.col(col),
                stat=pl.lit(stat),
                kind=pl.lit(kind),
                unit=pl.lit(unit),
                worse=pl.lit(worse),
                is_primary=pl.lit(stat != "p50"),
                name=pl.lit(what) + _labelled(pl.col("family"), pl.col("labels")),
            )
        )
    return pl.concat(out)


def _labelled(family: pl.Expr, labels: pl.Expr) -> pl.Expr:
    return (
        pl.when(labels.is_null() | (labels == ""))
        .then(family)
        .otherwise(pl.concat_str([family, pl.lit("{"), labels, pl.lit("}")]))
    )


def _tokens(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Generated tokens per second from ``app_metric_rate``."""
    if not exists(con, "app_metric_rate"):
        return None
    df = con.sql(
        f"SELECT ts, endpoint, metric, labels, dt_s, rate_per_s FROM {ident('app_metric_rate')} "
        "WHERE ts IS NOT NULL AND list_contains($metrics, metric)",
        params={"metrics": list(TOKEN_METRICS)},
    ).pl()
    return df.select(
        "ts",
        "labels",
        source_table=pl.lit("app_metric_rate"),
        source=pl.col("endpoint"),
        family=pl.col("metric"),
        dur_s=pl.col("dt_s"),
        value=pl.col("rate_per_s"),
        stat=pl.lit("rate"),
        kind=pl.lit(THROUGHPUT),
        unit=pl.lit("1/s"),
        worse=pl.lit("down"),
        is_primary=pl.lit(True),
        name=pl.lit("tokens/s of ") + _labelled(pl.col("metric"), pl.col("labels")),
    )


def _log_lines(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Step time and tokens per second from ``app_log_line``, per log file."""
    if not exists(con, "app_log_line"):
        return None
    df = con.sql(
        f"SELECT ts, file, step_time_ms, tokens_per_s FROM {ident('app_log_line')} "
        "WHERE ts IS NOT NULL ORDER BY file, ts"
    ).pl()
    since = (pl.col("ts").diff().dt.total_microseconds() / 1e6).over("file")
    df = df.with_columns(dur_s=pl.coalesce(since, pl.col("step_time_ms") / 1000.0))
    out = []
    for col, family, kind, unit, worse in (
        ("step_time_ms", "step_time_ms", STEP, "ms", "up"),
        ("tokens_per_s", "tokens_per_s", THROUGHPUT, "1/s", "down"),
    ):
        what = "step time of " if kind == STEP else "tokens/s of "
        out.append(
            df.filter(pl.col(col).is_not_null()).select(
                "ts",
                "dur_s",
                source_table=pl.lit("app_log_line"),
                source=pl.col("file"),
                family=pl.lit(family),
                labels=pl.lit(None, pl.String),
                value=pl.col(col),
                stat=pl.lit("value"),
                kind=pl.lit(kind),
                unit=pl.lit(unit),
                worse=pl.lit(worse),
                is_primary=pl.lit(True),
                name=pl.lit(what) + pl.col("file").fill_null("the log"),
            )
        )
    return pl.concat(out)


# (pattern on the lower-case series name, kind, unit, factor to that unit)
_NAMED = (
    (r"per_s|per_sec|_rps$|^rps$|qps|throughput|tokens_s$|/s$", THROUGHPUT, "1/s", 1.0),
    (r"(^|_)(ms|msec|millis|milliseconds)$", LATENCY, "ms", 1.0),
    (r"(^|_)(s|sec|secs|seconds)$", LATENCY, "ms", 1000.0),
    (r"(^|_)(us|usec|micros|microseconds)$", LATENCY, "ms", 1e-3),
    (r"(^|_)(ns|nanos|nanoseconds)$", LATENCY, "ms", 1e-6),
    (r"latency|duration|elapsed|ttft|itl|tpot|response_time", LATENCY, "ms", 1.0),
)


def kind_of(name: str) -> tuple[str, str, float, bool]:
    """(kind, unit, factor, assumed) of an --app-series series named ``name``: a time
    suffix (``_ms``, ``_s``/``_seconds``, ``_us``, ``_ns``) makes it a latency in ms (a
    name with ``step``/``iter`` a step time); ``per_s``/``rps``/``qps``/``throughput`` a
    throughput; ``latency``/``duration``/``elapsed``/``ttft``/``itl`` without a unit a
    latency assumed to be in ms (``assumed`` True); anything else a plain ``value``.

    >>> kind_of("step_time_s"), kind_of("http_req_duration"), kind_of("queue_depth")
    (('step_time', 'ms', 1000.0, False), ('latency', 'ms', 1.0, True), ('value', '', 1.0, False))
    """
    low = name.lower()
    for i, (pattern, kind, unit, factor) in enumerate(_NAMED):
        if re.search(pattern, low):
            if kind == LATENCY and re.search(r"step|iter", low):
                kind = STEP
            return kind, unit, factor, i == len(_NAMED) - 1
    return VALUE, "", 1.0, False


def _user_series(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """``app_series`` per file and series: per-request records as p99 / p50 per second."""
    if not exists(con, "app_series"):
        return None
    df = con.sql(
        f"SELECT ts, file, series, value FROM {ident('app_series')} ORDER BY file, series, ts"
    ).pl()
    if df.is_empty():
        return None
    names = df.select(pl.col("series").unique()).to_series().to_list()
    kinds = pl.DataFrame(
        [(n, *kind_of(n)) for n in names],
        schema=["series", "kind", "unit", "factor", "assumed"],
        orient="row",
    )
    gap = (pl.col("ts").diff().dt.total_microseconds() / 1e6).over("file", "series")
    df = df.with_columns(gap=gap).with_columns(
        per_request=pl.col("gap").median().over("file", "series") < 1.0,
        step=pl.col("gap").median().over("file", "series"),
    )
    df = df.join(kinds, on="series").with_columns(value=pl.col("value") * pl.col("factor"))
    worse = pl.when(pl.col("kind") == THROUGHPUT).then(pl.lit("down")).otherwise(pl.lit("up"))
    assumed = pl.when(pl.col("assumed")).then(pl.lit("; unit assumed ms")).otherwise(pl.lit(""))
    file_name = pl.concat_str([pl.col("file").str.replace(r"^.*/", ""), assumed])
    common = dict(
        source_table=pl.lit("app_series"),
        source=pl.col("file"),
        family=pl.col("series"),
        labels=pl.lit(None, pl.String),
        kind=pl.col("kind"),
        unit=pl.col("unit"),
        worse=worse,
    )
    single = df.filter(~pl.col("per_request")).select(
        "ts",
        "value",
        dur_s=pl.col("step"),
        stat=pl.lit("value"),
        is_primary=pl.lit(True),
        name=pl.concat_str([pl.col("series"), pl.lit(" ("), file_name, pl.lit(")")]),
        **common,
    )
    end = pl.col("ts").dt.truncate("1s")
    # steps run one after another: a step covers its own time; requests overlap and are
    # counted in the second they complete in (as a Prometheus histogram observes them)
    took = pl.when(pl.col("kind") == STEP).then(pl.col("value") / 1000.0).otherwise(1.0)
    took = took.round(0).clip(1, MAX_STEP_S).cast(pl.Int64)
    per = (
        df.filter(pl.col("per_request"))
        .with_columns(sec=pl.datetime_ranges(end - pl.duration(seconds=took - 1), end, "1s"))
        .explode("sec")
    )
    keys = ["file", "series", "kind", "unit", "assumed", "sec"]
    agg = per.group_by(keys).agg(
        p99=pl.col("value").quantile(0.99, "linear"), p50=pl.col("value").median()
    )
    out = [single]
    for stat in ("p99", "p50"):
        out.append(
            agg.select(
                ts=pl.col("sec"),
                value=pl.col(stat),
                dur_s=pl.lit(1.0),
                stat=pl.lit(stat),
                is_primary=pl.lit(stat == "p99"),
                name=pl.concat_str(
                    [pl.lit(f"{stat} of "), pl.col("series"), pl.lit(" ("), file_name, pl.lit(")")]
                ),
                **common,
            )
        )
    return pl.concat(out, how="diagonal_relaxed")
