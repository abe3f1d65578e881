"""The application's own metrics: Prometheus / OpenMetrics pages scraped by the capture
(``--app-metrics URL``, ``series/app_metrics_<n>.out``), or one page saved by hand
(``curl http://host:8000/metrics > metrics.txt``).

Input format (docs/bundle-format.md "Application series"): every scrape between a
``# hindsight-scrape begin <epoch_s> <url>`` and a ``# hindsight-scrape end <epoch_s>
rc=… bytes=… truncated=… dur_ms=…[ error=…]`` line; the page as the endpoint sent it.
Each page is parsed with `prometheus_client`'s parsers (OpenMetrics when it ends with
``# EOF``, else the Prometheus text format 0.0.4; `_app_prom`), so any exposition works:
vLLM (``vllm:e2e_request_latency_seconds``, ``vllm:time_to_first_token_seconds``,
``vllm:time_per_output_token_seconds`` / ``vllm:inter_token_latency_seconds``,
``vllm:num_requests_running``/``waiting``, ``vllm:gpu_cache_usage_perc`` /
``vllm:kv_cache_usage_perc``), SGLang (``sglang:…``), Hugging Face TGI (``tgi_…``),
NVIDIA Triton (``nv_inference_…``), and any generic counter, gauge, histogram, summary.

Tables (types and units in ``TABLES``):

- ``app_scrape``: one row per scrape attempt — its time, duration, exit status, size,
  whether the page was cut at the size cap, the format read, the samples kept, and a
  status (``ok``, ``truncated``, ``failed``: the endpoint did not answer, ``unparsable``,
  ``cut``: no end marker) with the reason.
- ``app_metric_sample``: every sample of every page (long format). ``labels`` is one
  sorted string ``a="1",b="x\\"y"`` (exposition escapes), without ``le`` (histogram
  buckets: column ``le``, ``+Inf`` = inf) and ``quantile`` (summaries: column
  ``quantile``).
- ``app_metric_rate``: per-second rates of cumulative series (counters, ``_count`` and
  ``_sum`` of histograms and summaries, untyped ``*_total``) between consecutive scrapes:
  ``delta`` = value − previous value, or the value itself after a reset (the value went
  down: the counter restarted from zero); ``rate_per_s`` = delta / ``dt_s``.
- ``app_metric_quantile``: per scrape interval and labels, ``count`` (observations),
  ``mean`` (Δsum / Δcount) and ``p50``/``p90``/``p99`` of each histogram, computed from
  the bucket deltas exactly as Prometheus' ``histogram_quantile`` does (buckets sorted by
  ``le``, counts made monotonic, the rank q × count located in the first bucket whose
  cumulative count reaches it, linear interpolation between that bucket's lower bound —
  the previous ``le``, 0 for the first bucket — and its ``le``; a rank in the ``+Inf``
  bucket gives the highest finite bound; no ``+Inf`` bucket or no observation: NULL).
  Summaries give their own quantiles (the values exposed at the later scrape, over the
  client's window, not the interval) and Δsum / Δcount. Triton's cumulative microsecond
  counters (``nv_inference_request_duration_us``, ``…_queue_…``, ``…_compute_input_…``,
  ``…_compute_infer_…``, ``…_compute_output_…`` per ``nv_inference_request_success``;
  cache hit/miss durations per hit/miss count) give ``type`` ``counter_pair`` with
  ``mean`` = Δduration / Δcount. ``unit`` comes from the family name (``_seconds``,
  ``_ms``/``_milliseconds``, ``_us``/``_microseconds``, ``_ns``; TGI's ``tgi_*_duration``
  are seconds); the ``*_ms`` columns convert latencies to milliseconds (NULL when the
  unit is not a time).

A bad scrape costs only itself: its sample lines are counted skipped with the reason
and the parser's message is in ``app_scrape.reason``. Timestamps written after a sample
value are ignored (every sample takes its scrape's time). Cost: the parsers are pure
Python, about 20 µs per sample (a 185-sample vLLM page in ~4 ms).

Sample input (one scrape)::

    # hindsight-scrape begin 1796175710.633863016 http://127.0.0.1:8000/metrics
    # HELP vllm:e2e_request_latency_seconds Histogram of end to end request latency in seconds.
    # TYPE vllm:e2e_request_latency_seconds histogram
    vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="facebook/opt-125m"} 1.0
    vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="facebook/opt-125m"} 1.0
    vllm:e2e_request_latency_seconds_count{model_name="facebook/opt-125m"} 1.0
    vllm:e2e_request_latency_seconds_sum{model_name="facebook/opt-125m"} 0.5034303665161133
    # hindsight-scrape end 1796175710.704318778 rc=0 bytes=3291 truncated=0 dur_ms=70.5
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analyzer.errors import ParseError
from analyzer.parsers import _app_derive, _app_prom
from analyzer.parsers import _app_scrapes as sc
from analyzer.parsers.base import TS, Coverage, ParseContext, ParseResult, table

_LAT = "latency percentile in milliseconds (NULL when the unit is not a time)"
TABLES = {
    "app_scrape": table(
        "one row per scrape of an --app-metrics endpoint",
        ("ts", TS, "", "scrape start (UTC); NULL for a page saved without the capture"),
        ("endpoint", pl.String(), "", "URL scraped (user:password masked)"),
        ("dur_ms", pl.Float64(), "ms", "time the scrape took"),
        ("rc", pl.Int32(), "", "exit status of curl/wget (0 = page received)"),
        ("bytes", pl.Int64(), "B", "bytes of the page kept"),
        ("truncated", pl.Boolean(), "", "the page was cut at the size cap (HINDSIGHT_APP_MAX_KB)"),
        ("format", pl.String(), "", "'openmetrics' or 'prometheus' (text 0.0.4)"),
        ("samples", pl.Int64(), "", "samples kept from the page"),
        ("status", pl.String(), "", "ok, truncated, failed, unparsable or cut (no end marker)"),
        ("reason", pl.String(), "", "why the status is not ok (curl/wget or parser message)"),
    ),
    "app_metric_sample": table(
        "one row per sample per scrape",
        ("ts", TS, "", "scrape start (UTC)"),
        ("endpoint", pl.String(), "", "URL scraped"),
        (
            "family",
            pl.String(),
            "",
            "metric family (# TYPE name), e.g. vllm:e2e_request_latency_seconds",
        ),
        ("metric", pl.String(), "", "sample name as exposed (…_bucket, …_count, …_sum, …_total)"),
        (
            "type",
            pl.String(),
            "",
            "counter, gauge, histogram, summary, info, stateset, unknown/untyped…",
        ),
        (
            "labels",
            pl.String(),
            "",
            'sorted k="v" list (exposition escapes), without le / quantile',
        ),
        ("le", pl.Float64(), "", "histogram bucket upper bound (inf for +Inf); NULL otherwise"),
        ("quantile", pl.Float64(), "", "summary quantile; NULL otherwise"),
        ("value", pl.Float64(), "", "sample value, in the metric's own unit"),
        ("exemplar_labels", pl.String(), "", "exemplar labels (OpenMetrics pages)"),
        ("exemplar_value", pl.Float64(), "", "exemplar value"),
    ),
    "app_metric_rate": table(
        "one row per cumulative series per interval between two scrapes",
        ("ts", TS, "", "the later scrape's start (UTC)"),
        ("endpoint", pl.String(), "", "URL scraped"),
        ("family", pl.String(), "", "metric family"),
        ("metric", pl.String(), "", "sample name (…_total, …_count, …_sum)"),
        ("type", pl.String(), "", "type of the family"),
        ("labels", pl.String(), "", "as in app_metric_sample"),
        ("dt_s", pl.Float64(), "s", "time between the two scrapes"),
        ("delta", pl.Float64(), "", "increase in the interval (the value itself after a reset)"),
        ("rate_per_s", pl.Float64(), "1/s", "delta / dt_s, in the metric's unit per second"),
        ("reset", pl.Boolean(), "", "the value went down: the counter restarted from zero"),
    ),
    "app_metric_quantile": table(
        "one row per histogram, summary or Triton duration counter, labels and interval",
        ("ts", TS, "", "the later scrape's start (UTC)"),
        ("endpoint", pl.String(), "", "URL scraped"),
        ("family", pl.String(), "", "histogram / summary / duration counter family"),
        ("labels", pl.String(), "", "as in app_metric_sample"),
        ("type", pl.String(), "", "histogram, summary or counter_pair (Triton)"),
        ("dt_s", pl.Float64(), "s", "interval length"),
        ("count", pl.Float64(), "", "observations (requests) in the interval"),
        ("rate_per_s", pl.Float64(), "1/s", "count / dt_s"),
        ("mean", pl.Float64(), "", "Δsum / Δcount, in the family's unit"),
        (
            "p50",
            pl.Float64(),
            "",
            "median in the family's unit (histogram: interval; summary: as exposed)",
        ),
        ("p90", pl.Float64(), "", "90th percentile, same"),
        ("p99", pl.Float64(), "", "99th percentile, same"),
        ("unit", pl.String(), "", "s, ms, us or ns from the family name; NULL when not a time"),
        ("mean_ms", pl.Float64(), "ms", "mean " + _LAT.removeprefix("latency percentile ")),
        ("p50_ms", pl.Float64(), "ms", "p50 " + _LAT),
        ("p90_ms", pl.Float64(), "ms", "p90 " + _LAT),
        ("p99_ms", pl.Float64(), "ms", "p99 " + _LAT),
        ("reset", pl.Boolean(), "", "a counter of the interval was reset"),
    ),
}

BATCH_SAMPLES = 200_000  # samples per batch handed to the store
_SAMPLE_LINE = re.compile(
    r"^[A-Za-z_:][A-Za-z0-9_:]*(?:\{.*\})?\s+(?:[-+0-9.eE]+|NaN|[+-]?Inf)", re.M
)
_META_LINE = re.compile(r"^# (?:HELP|TYPE) [A-Za-z_:][A-Za-z0-9_:]* ", re.M)


def sniff(head: str, name: str) -> float:
    """Certain for the capture's scrape blocks; high for a bare exposition page."""
    if sc.BEGIN in head:
        return 0.99
    meta, samples = len(_META_LINE.findall(head)), len(_SAMPLE_LINE.findall(head))
    return 0.85 if meta >= 2 and samples >= 1 else 0.0


def parse(path: Path, ctx: ParseContext) -> ParseResult:
    """Parse an app-metrics file scrape by scrape (see the module docstring)."""
    cov = Coverage()
    out = _Out(ctx)
    deltas = _app_derive.Deltas()
    batch: list[pl.DataFrame] = []
    n = 0
    for block in sc.iter_scrapes(path):
        cov.total += block.n_lines
        out.markers = out.markers or block.kind in ("scrape", "cut")
        frame = _block(block, cov, out)
        if frame is not None and frame.height:
            batch.append(frame)
            n += frame.height
        if n >= BATCH_SAMPLES:
            out.samples(pl.concat(batch), deltas)
            batch, n = [], 0
    if batch:
        out.samples(pl.concat(batch), deltas)
    if not out.markers and cov.parsed == 0 and cov.n_skipped:
        raise ParseError(f"{path.name}: neither scrape blocks nor an exposition page")
    cov.notes[:] = list(dict.fromkeys(out.notes))
    return ParseResult(tables=out.result(), coverage=cov)


def _block(block: sc.Block, cov: Coverage, out: _Out) -> pl.DataFrame | None:
    """Account for one block's lines; its samples as a frame (None when it has none)."""
    markers = 0 if block.kind == "bare" else (2 if block.kind == "scrape" else 1)
    if block.kind == "stray":
        cov.add_skipped("line outside a scrape block", block.n_lines)
        return None
    if block.kind == "cut":
        cov.add_structure("scrape marker", markers)
        cov.add_skipped("scrape cut short (no end marker)", block.n_lines - markers)
        out.scrape(block, "cut", "no end marker: the capture stopped while writing it", None)
        return None
    cov.add_structure("scrape marker", markers)
    body = block.n_lines - markers
    if block.oversized:
        cov.add_skipped(f"page larger than {sc.MAX_BLOCK_BYTES >> 20} MiB", body)
        out.scrape(block, "unparsable", "page too large to parse", None)
        return None
    if block.rc not in (None, 0):
        cov.add_skipped("output of a failed scrape", body)
        out.scrape(block, "failed", block.error or f"exit code {block.rc}", None)
        return None
    page = _app_prom.parse_page(block.lines)
    cov.add_structure("comment (# HELP, # TYPE, # EOF...)", page.comments)
    cov.add_structure("blank", page.blank)
    if page.error is not None:
        cov.add_skipped("page not accepted by prometheus_client's parsers", page.sample_lines)
        out.notes.append(f"a scrape was not parseable: {page.error}")
        out.scrape(block, "unparsable", page.error, page)
        return None
    parsed = min(page.n_samples, page.sample_lines)
    cov.parsed += parsed
    cov.add_skipped("sample line the parser returned no sample for", page.sample_lines - parsed)
    if block.kind == "bare":
        out.notes.append("a page saved without the capture: no time, ts NULL, no rates")
    if block.truncated:
        out.notes.append(
            "pages cut at the size cap (HINDSIGHT_APP_MAX_KB): their last families are missing"
        )
    out.scrape(block, "truncated" if block.truncated else "ok", None, page)
    ts = block.start_us
    frame = pl.DataFrame(page.rows, schema=_SAMPLE_SCHEMA)
    return frame.with_columns(
        ts=pl.lit(ts, pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
        endpoint=pl.lit(block.endpoint, pl.String),
    )


_SAMPLE_SCHEMA = {
    "family": pl.String,
    "metric": pl.String,
    "type": pl.String,
    "labels": pl.String,
    "le": pl.Float64,
    "quantile": pl.Float64,
    "value": pl.Float64,
    "exemplar_labels": pl.String,
    "exemplar_value": pl.Float64,
}


class _Out:
    """The four tables, handed to ``ctx.sink`` batch by batch (or kept without one)."""

    def __init__(self, ctx: ParseContext) -> None:
        self.sink = ctx.sink
        self.sent: set[str] = set()
        self.kept: dict[str, list[pl.DataFrame]] = {name: [] for name in TABLES}
        self.scrapes: list[dict] = []
        self.n_scrapes = 0
        self.markers = False
        self.notes: list[str] = []

    def put(self, name: str, frame: pl.DataFrame) -> None:
        df = TABLES[name].conform(frame).collect()
        if self.sink is not None:
            self.sink(name, df)
            self.sent.add(name)
        else:
            self.kept[name].append(df)

    def scrape(self, b: sc.Block, status: str, reason: str | None, page) -> None:
        self.n_scrapes += 1
        self.scrapes.append(
            {
                "ts": b.start_us,
                "endpoint": b.endpoint,
                "dur_ms": b.dur_ms,
                "rc": b.rc,
                "bytes": b.bytes,
                "truncated": b.truncated,
                "format": page.format if page is not None else None,
                "samples": page.n_samples if page is not None and page.error is None else 0,
                "status": status,
                "reason": reason,
            }
        )

    def _flush_scrapes(self) -> None:
        if not self.scrapes:
            return
        df = pl.DataFrame(self.scrapes, infer_schema_length=None).with_columns(
            pl.col("ts").cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
        )
        self.put("app_scrape", df)
        self.scrapes = []

    def samples(self, frame: pl.DataFrame, deltas: _app_derive.Deltas) -> None:
        self._flush_scrapes()
        self.put("app_metric_sample", frame)
        d = deltas(frame)
        self.put("app_metric_rate", _app_derive.rates(d))
        q = _app_derive.quantiles(d, frame)
        if q.height:
            self.put("app_metric_quantile", q)

    def result(self) -> dict[str, pl.DataFrame]:
        self._flush_scrapes()
        if self.sink is not None:  # every table exists, even without rows
            for name in TABLES.keys() - self.sent:
                self.put(name, pl.DataFrame())
            return {}
        return {
            name: pl.concat(frames) if frames else TABLES[name].conform(pl.DataFrame()).collect()
            for name, frames in self.kept.items()
        }
