"""Symptom series on the 1-second grid: which families are picked, which stat is analysed,
and how each sample is attributed to seconds (analyzer/symptoms/series.py)."""

from __future__ import annotations

import polars as pl
from symptom_data import VLLM, quantiles, t

from analyzer.store import Store
from analyzer.symptoms import series

UTC_US = pl.Datetime("us", "UTC")


def _build(store: Store, n: int = 60) -> tuple[pl.DataFrame, pl.DataFrame]:
    return series.build(store.con, t(0), t(n - 1))


def test_vllm_p99_is_analysed_p50_is_context_and_a_5_s_interval_fills_5_seconds() -> None:
    store = Store(None)
    q = quantiles(60, lambda i: 2400.0 if i >= 30 else 180.0, dt_s=5.0)
    other = q.with_columns(family=pl.lit("http_server_duration_seconds"))  # same endpoint
    store.write("app_metric_quantile", pl.concat([q, other]), "series/app_metrics_1.out")
    cat, values = _build(store)
    got = {(r["family"], r["stat"]): r for r in cat.to_dicts()}
    assert set(got) == {(VLLM, "p99"), (VLLM, "p50"), (VLLM, "rate")}  # the generic one: no
    assert got[(VLLM, "p99")]["is_primary"] and not got[(VLLM, "p50")]["is_primary"]
    assert got[(VLLM, "rate")]["kind"] == "throughput" and got[(VLLM, "rate")]["worse"] == "down"
    assert got[(VLLM, "p99")]["name"] == f'p99 of {VLLM}{{model_name="m"}}'
    p99 = values.filter(pl.col("symptom_id") == got[(VLLM, "p99")]["symptom_id"])
    # the row stamped 30 s (interval 25–30 s, p99 2400) fills seconds 26..30
    by_sec = dict(zip(p99["ts"].to_list(), p99["value"].to_list(), strict=True))
    assert [by_sec[t(s)] for s in (25, 26, 30, 31)] == [180.0, 2400.0, 2400.0, 2400.0]
    assert t(0) not in by_sec and by_sec[t(1)] == 180.0  # first interval: seconds 1..5


def test_an_endpoint_without_a_known_family_uses_every_family_with_a_time_unit() -> None:
    store = Store(None)
    q = quantiles(60, lambda i: 50.0, family="http_server_duration_seconds")
    triton = quantiles(60, lambda i: 9.0, family="nv_inference_request_duration_us").with_columns(
        endpoint=pl.lit("http://127.0.0.1:8002/metrics"),
        p99_ms=pl.lit(None, pl.Float64),
        p50_ms=pl.lit(None, pl.Float64),
        type=pl.lit("counter_pair"),
    )
    store.write("app_metric_quantile", pl.concat([q, triton]), "series/app_metrics_1.out")
    cat, _ = _build(store)
    got = sorted((r["family"], r["stat"], r["is_primary"]) for r in cat.to_dicts())
    assert got == [
        ("http_server_duration_seconds", "p50", False),
        ("http_server_duration_seconds", "p99", True),
        ("nv_inference_request_duration_us", "mean", True),  # Triton: no percentiles
        ("nv_inference_request_duration_us", "rate", True),
    ]


def test_a_log_line_covers_the_time_since_the_previous_line_of_its_file() -> None:
    store = Store(None)
    log = pl.DataFrame(
        {"ts": [t(10), t(12), t(20)], "file": ["/var/log/train.log"] * 3,
         "step_time_ms": [500.0, 2000.0, 8000.0], "tokens_per_s": [None, None, 1000.0]}
    ).with_columns(pl.col("ts").cast(UTC_US))  # fmt: skip
    store.write("app_log_line", log, "series/app_log_1.out")
    cat, values = _build(store)
    step = cat.filter(pl.col("stat") == "value", pl.col("kind") == "step_time")
    sid = step["symptom_id"][0]
    got = values.filter(pl.col("symptom_id") == sid)
    by_sec = dict(zip(got["ts"].to_list(), got["value"].to_list(), strict=True))
    assert by_sec == {t(10): 500.0, t(11): 2000.0, t(12): 2000.0} | {
        t(s): 8000.0 for s in range(13, 21)
    }
    tokens = cat.filter(pl.col("kind") == "throughput")
    assert tokens["name"].to_list() == ["tokens/s of /var/log/train.log"]


def test_requests_count_in_their_completion_second_and_steps_cover_their_duration() -> None:
    store = Store(None)
    # 10 requests per second of 100 ms, and one of 3 s completing at 20.4 s
    ts = [t(s + k / 10) for s in range(0, 30) for k in range(10)] + [t(20.4)]
    lat = [100.0] * 300 + [3000.0]
    # steps of 500 ms, one of 3 s ending at 20.4 s
    steps = [t(s / 2) for s in range(0, 60)] + [t(20.4)]
    frame = pl.DataFrame(
        {"ts": ts + steps, "file": "lt.csv",
         "series": ["latency_ms"] * 301 + ["step_time_ms"] * 61,
         "value": lat + [500.0] * 60 + [3000.0], "record_no": list(range(1, 363))}
    ).with_columns(pl.col("ts").cast(UTC_US))  # fmt: skip
    store.write("app_series", frame, None)
    cat, values = _build(store)

    def p99(family: str) -> dict:
        sid = cat.filter(pl.col("stat") == "p99", pl.col("family") == family)["symptom_id"][0]
        got = values.filter(pl.col("symptom_id") == sid)
        return dict(zip(got["ts"].to_list(), got["value"].to_list(), strict=True))

    lat_p99, step_p99 = p99("latency_ms"), p99("step_time_ms")
    # the 3 s request: 11 records complete in second 20, p99 interpolated between them
    assert [round(lat_p99[t(s)]) for s in (18, 19, 20, 21)] == [100, 100, 2710, 100]
    # the 3 s step ran in seconds 18, 19, 20 (with two 500 ms steps each: p99 of 3 values)
    assert [round(step_p99[t(s)]) for s in (17, 18, 19, 20, 21)] == [500, 2950, 2950, 2950, 500]
    kinds = dict(zip(cat["family"], cat["kind"], strict=True))
    assert kinds == {"latency_ms": "latency", "step_time_ms": "step_time"}


def test_series_names_decide_kind_and_unit() -> None:
    assert series.kind_of("latency_s") == ("latency", "ms", 1000.0, False)
    assert series.kind_of("ttft_us") == ("latency", "ms", 1e-3, False)
    assert series.kind_of("iteration_time_ms") == ("step_time", "ms", 1.0, False)
    assert series.kind_of("tokens_per_s") == ("throughput", "1/s", 1.0, False)
    assert series.kind_of("elapsed") == ("latency", "ms", 1.0, True)
    assert series.kind_of("gpu_mem") == ("value", "", 1.0, False)
