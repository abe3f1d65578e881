"""Symptom windows: where a symptom departs from its own baseline, split where its
intensity changes (analyzer/symptoms/windows.py; docs/symptoms.md "Windows")."""

from __future__ import annotations

import polars as pl
from symptom_data import T0, t

from analyzer.symptoms import windows


def _find(values: list[float | None], worse: str = "up", step_s: float = 1.0, primary: bool = True):
    n = len(values)
    grid = pl.Series("ts", [t(i) for i in range(n)]).cast(pl.Datetime("us", "UTC"))
    series = pl.DataFrame(
        {"ts": grid, "symptom_id": [1] * n, "value": pl.Series(values, dtype=pl.Float64)}
    ).filter(pl.col("value").is_not_null())
    series = series.with_columns(pl.col("symptom_id").cast(pl.Int32))
    catalogue = pl.DataFrame(
        [{"symptom_id": 1, "worse": worse, "unit": "ms" if worse == "up" else "1/s",
          "step_s": step_s, "is_primary": primary}]
    ).with_columns(pl.col("symptom_id").cast(pl.Int32))  # fmt: skip
    return windows.find(catalogue, series, grid)


def _jitter(i: int, base: float) -> float:
    return base + float(i * 7 % 5 - 2)  # ±2 around base, deterministic


def _spans(found: pl.DataFrame) -> list[tuple[int, int]]:
    return [
        (int((a - T0).total_seconds()), int((b - T0).total_seconds()))
        for a, b in found.select("start_ts", "end_ts").rows()
    ]


def test_a_latency_rise_gives_one_window_with_its_exact_seconds_and_level() -> None:
    values = [2400.0 if 100 <= i < 130 else _jitter(i, 180) for i in range(300)]
    cat, found = _find(values)
    assert _spans(found) == [(100, 130)]
    w = found.row(0, named=True)
    assert w["level"] == 2400.0 and w["peak"] == 2400.0 and w["seconds"] == 30
    assert w["baseline"] == 180.0 and w["band"] == 3  # 2400 / 180 = 13.3×: 8–16×
    row = cat.row(0, named=True)
    assert row["status"] == "analysed" and row["windows"] == 1
    assert row["enter"] == 270.0  # d = max(4 σ = 4 × 1.48, 0.5 × 180)


def test_the_window_is_cut_where_the_intensity_changes_by_a_band() -> None:
    values = [
        2400.0 if 100 <= i < 115 else 800.0 if 115 <= i < 130 else _jitter(i, 180)
        for i in range(300)
    ]
    _, found = _find(values)
    assert _spans(found) == [(100, 115), (115, 130)]
    assert found["band"].to_list() == [3, 2]


def test_noise_at_a_band_edge_does_not_cut_the_window() -> None:
    # 8 × the baseline ± 5 %: the band flips between 2 and 3 every few seconds
    values = [
        (1380.0 if (i // 4) % 2 else 1500.0) if 100 <= i < 124 else _jitter(i, 180)
        for i in range(300)
    ]
    _, found = _find(values)
    assert _spans(found) == [(100, 124)]


def test_a_two_second_spike_is_not_a_window_but_three_seconds_are() -> None:
    values = [2400.0 if 100 <= i < 102 or 200 <= i < 203 else _jitter(i, 180) for i in range(300)]
    _, found = _find(values)
    assert _spans(found) == [(200, 203)]


def test_a_throughput_drop_is_a_window_and_a_rise_is_not() -> None:
    values = [
        5.0 if 100 <= i < 120 else 60.0 if 200 <= i < 220 else _jitter(i, 40) for i in range(300)
    ]
    _, found = _find(values, worse="down")
    assert _spans(found) == [(100, 120)]


def test_too_few_values_and_context_stats_are_not_analysed_with_a_reason() -> None:
    cat, found = _find([180.0] * 10 + [None] * 50)
    assert found.is_empty()
    assert cat["reason"][0] == "needs ≥ 20 s of values on the capture's grid, has 10"
    cat, _ = _find([180.0] * 60, primary=False)
    assert cat["status"][0] == "not analysed" and cat["reason"][0].startswith("context")
