"""Chart building blocks: downsampling that keeps spikes, gaps, event lines, time formatting."""

from __future__ import annotations

import polars as pl

from reports import charts
from reports.timefmt import TimeFormatter, duration, parse_zone


def series(n: int, spike_at: int, spike: float = 99.0) -> pl.DataFrame:
    values = [1.0] * n
    values[spike_at] = spike
    return pl.DataFrame({"x": [1_714_564_800_000 + i * 1000 for i in range(n)], "v": values})


def test_minmax_downsample_keeps_a_single_sample_spike_within_the_point_budget() -> None:
    out = charts.minmax_downsample(series(86_400, 43_211), "v", max_points=2000)
    assert out.height <= 2000
    assert out["v"].max() == 99.0
    assert out["x"].is_sorted()
    assert 1_714_564_800_000 + 43_211 * 1000 in out["x"].to_list()


def test_minmax_downsample_leaves_short_series_alone_and_drops_nulls() -> None:
    frame = pl.DataFrame({"x": [3, 1, 2], "v": [1.0, None, 2.0]})
    assert charts.minmax_downsample(frame, "v").to_dict(as_series=False) == {
        "x": [2, 3],
        "v": [2.0, 1.0],
    }


def test_rows_downsample_keeps_whole_rows_aligned() -> None:
    frame = series(10_000, 5_000).with_columns(w=100 - pl.col("v"))
    out = charts.rows_downsample(frame, "v", max_points=200)
    assert out.height <= 200
    assert (out["v"] + out["w"]).to_list() == [100.0] * out.height
    assert out["v"].max() == 99.0


def test_gap_breaks_mark_a_stretch_without_samples() -> None:
    xs = [0, 1000, 2000, 3000, 60_000, 61_000, 62_000]
    assert charts.gap_breaks(pl.DataFrame({"x": xs})) == [3001]
    assert charts.gap_breaks(pl.DataFrame({"x": [0, 1000, 2000]})) == []


def test_line_trace_breaks_the_line_at_gaps_and_sends_numbers() -> None:
    frame = pl.DataFrame({"x": [0, 1000, 2000, 60_000, 61_000], "v": [1, 2, 3, 4, 5]})
    trace = charts.line_trace(frame, "v", "v", breaks=charts.gap_breaks(frame))
    assert trace["x"] == [0, 1000, 2000, 2001, 60_000, 61_000]
    assert trace["y"] == [1.0, 2.0, 3.0, None, 4.0, 5.0]
    assert trace["type"] == "scatter"


def test_event_lines_prefer_important_kinds_and_respect_the_cap() -> None:
    ev = pl.DataFrame(
        {"x": range(203), "kind": ["io_error"] * 200 + ["oom_kill", "xid", "hung_task"]}
    )
    drawn, left = charts.event_lines(ev, cap=150)
    assert drawn == ["oom_kill", "xid", "hung_task"] and left == ["io_error"]
    assert len(charts.event_shapes(ev, drawn)) == 3


def test_data_strings_are_escaped_before_they_reach_plotly() -> None:
    frame = pl.DataFrame({"x": [0, 1], "g": ['<a href="javascript:x">d</a>'] * 2, "v": [1, 2]})
    fig = charts.grouped_lines_figure(frame, "g", "v", "t", (0, 1))
    assert fig["data"][0]["name"] == "&lt;a href=&quot;javascript:x&quot;&gt;d&lt;/a&gt;"


def test_heatmap_has_one_row_per_cpu_in_numeric_order() -> None:
    frame = pl.DataFrame(
        {"x": [0, 0, 0, 1000], "cpu": ["10", "2", "1", "2"], "busy": [5.4, 50.6, 1.0, 99.9]}
    )
    trace = charts.heatmap_figure(frame, "cpu", "busy", "t", None)["data"][0]
    assert trace["type"] == "heatmap" and trace["y"] == ["1", "2", "10"]
    assert trace["z"] == [[1, None], [51, 100], [5, None]]


def test_times_are_shown_in_utc_and_host_local_time() -> None:
    tf = TimeFormatter("America/New_York")
    assert tf.utc(1_714_564_800_000) == "2024-05-01 12:00:00 UTC"
    assert tf.local(1_714_564_800_000) == "2024-05-01 08:00:00 EDT"
    assert tf.window(0, 90_000) == "1970-01-01 00:00:00 → 00:01:30 UTC (1 min 30 s)"
    assert parse_zone("UTC") is None and parse_zone("garbage/zone") is None
    assert TimeFormatter(None).local(0) is None
    assert duration(0) == "0 s" and duration(86_400_000) == "1 d"
