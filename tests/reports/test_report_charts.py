"""Chart building blocks: downsampling that keeps spikes, gaps, event lines, time formatting."""

from __future__ import annotations

import duckdb
import polars as pl

from reports import charts, charts_events
from reports.charts_findings import evidence_figure, swimlanes_figure
from reports.downsample import gap_breaks, minmax_downsample, minmax_sql, rows_downsample
from reports.timefmt import TimeFormatter, duration, parse_zone


def series(n: int, spike_at: int, spike: float = 99.0) -> pl.DataFrame:
    values = [1.0] * n
    values[spike_at] = spike
    return pl.DataFrame({"x": [1_714_564_800_000 + i * 1000 for i in range(n)], "v": values})


def test_minmax_downsample_keeps_a_single_sample_spike_within_the_point_budget() -> None:
    out = minmax_downsample(series(86_400, 43_211), "v", max_points=2000)
    assert out.height <= 2000
    assert out["v"].max() == 99.0
    assert out["x"].is_sorted()
    assert 1_714_564_800_000 + 43_211 * 1000 in out["x"].to_list()


def test_minmax_downsample_leaves_short_series_alone_and_drops_nulls() -> None:
    frame = pl.DataFrame({"x": [3, 1, 2], "v": [1.0, None, 2.0]})
    assert minmax_downsample(frame, "v").to_dict(as_series=False) == {
        "x": [2, 3],
        "v": [2.0, 1.0],
    }


def test_rows_downsample_keeps_whole_rows_aligned() -> None:
    frame = series(10_000, 5_000).with_columns(w=100 - pl.col("v"))
    out = rows_downsample(frame, "v", max_points=200)
    assert out.height <= 200
    assert (out["v"] + out["w"]).to_list() == [100.0] * out.height
    assert out["v"].max() == 99.0


def test_gap_breaks_mark_a_stretch_without_samples() -> None:
    xs = [0, 1000, 2000, 3000, 60_000, 61_000, 62_000]
    assert gap_breaks(pl.DataFrame({"x": xs})) == [3001]
    assert gap_breaks(pl.DataFrame({"x": [0, 1000, 2000]})) == []


def test_line_trace_breaks_the_line_at_gaps_and_sends_numbers() -> None:
    frame = pl.DataFrame({"x": [0, 1000, 2000, 60_000, 61_000], "v": [1, 2, 3, 4, 5]})
    trace = charts.line_trace(frame, "v", "v", breaks=gap_breaks(frame))
    assert trace["x"] == [0, 1000, 2000, 2001, 60_000, 61_000]
    assert trace["y"] == [1.0, 2.0, 3.0, None, 4.0, 5.0]
    assert trace["type"] == "scatter"


def test_event_lines_prefer_important_kinds_and_respect_the_cap() -> None:
    ev = pl.DataFrame(
        {"x": range(203), "kind": ["io_error"] * 200 + ["oom_kill", "xid", "hung_task"]}
    )
    drawn, left = charts_events.event_lines(ev, cap=150)
    assert drawn == ["oom_kill", "xid", "hung_task"] and left == ["io_error"]
    assert len(charts_events.event_shapes(ev, drawn)) == 3


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


def test_sql_downsampling_keeps_spikes_per_series_and_real_sample_times() -> None:
    con = duckdb.connect()
    src = (
        "SELECT 1714564800000 + i * 1000 AS x, 'gpu' || (i % 2) AS g, "
        "CASE WHEN i = 43211 THEN 99.0 ELSE 1.0 END AS v0, (i % 97)::DOUBLE AS v1 FROM range(86400) t(i)"
    )
    out = con.sql(minmax_sql(src, ["v0", "v1"], points=1000, grouped=True)).pl()
    per_series = out.group_by("m", "g").len()
    assert per_series["len"].max() <= 1000
    spike = out.filter((pl.col("m") == 0) & (pl.col("v") == 99.0))
    assert spike.rows() == [(0, "gpu1", 1714564800000 + 43211 * 1000, 99.0)]
    assert ((out["x"] - 1714564800000) % 1000 == 0).all()  # every point is a real sample
    assert out.filter(pl.col("m") == 1)["v"].max() == 96.0


def test_sql_downsampling_keeps_short_series_whole() -> None:
    q = minmax_sql(
        "SELECT i * 1000 AS x, i::DOUBLE AS v0 FROM range(10) t(i)",
        ["v0"],
        points=100,
        x_range=(0, 9000),
    )
    assert duckdb.sql(q).pl()["v"].to_list() == [float(i) for i in range(10)]


def test_chart_values_keep_four_significant_digits() -> None:
    assert charts._values(pl.Series([1953.125, 0.012345, None, float("nan")])) == [
        1953.0,
        0.01235,
        None,
        None,
    ]


def test_kernel_events_are_one_path_per_kind_however_many_events() -> None:
    ev = pl.DataFrame(
        {"x": list(range(0, 3000, 1)), "kind": ["io_error"] * 3000, "text": ["t"] * 3000}
    )
    fig = charts_events.events_figure(ev, None)
    assert len(fig["data"]) == 1 and fig["data"][0]["mode"] == "lines"
    assert fig["data"][0]["x"][:3] == [0, 0, None]


def test_swimlanes_order_lanes_by_rank_and_keep_tiny_windows_visible() -> None:
    findings = [
        {
            "x0": 0,
            "x1": 10,
            "key": "OOM_KILL",
            "severity": "critical",
            "finding_id": 1,
            "hover": "<b>x</b>",
        },
        {
            "x0": 5,
            "x1": 90_000,
            "key": "CHECKPOINT_STALL",
            "severity": "major",
            "finding_id": 2,
            "hover": "",
        },
        {
            "x0": None,
            "x1": None,
            "key": "UNTIMED",
            "severity": "minor",
            "finding_id": 3,
            "hover": "",
        },
    ]
    fig = swimlanes_figure(findings, (0, 100_000))
    assert fig["layout"]["yaxis"]["categoryarray"] == ["OOM_KILL", "CHECKPOINT_STALL"]
    crit = fig["data"][0]
    # at least 1 s (or 0.7 % of the range) wide, centred on the 10 ms window
    assert crit["type"] == "bar" and crit["x"] == [1000] and crit["base"] == [-495]
    assert crit["customdata"][0][3] == "&lt;b&gt;x&lt;/b&gt;"


def test_evidence_figure_shades_the_window_and_dashes_each_baseline() -> None:
    frame = pl.DataFrame({"x": [0, 1000, 2000], "v": [1.0, 50.0, 2.0]})
    series = [
        {"label": "gpu_util_mean_pct", "unit": "%", "frame": frame, "baseline": 97.0},
        {"label": "no baseline", "unit": "", "frame": frame, "baseline": None},
    ]
    fig = evidence_figure(series, (900, 1100), (0, 2000))
    kinds = [(s["type"], s.get("yref")) for s in fig["layout"]["shapes"]]
    assert kinds == [("rect", "paper"), ("line", "y")]
    assert fig["layout"]["xaxis"]["range"] == [0, 2000]
    assert [t["yaxis"] for t in fig["data"]] == ["y", "y2"]


def test_minor_and_info_windows_are_a_strip_not_a_tint_of_the_whole_panel() -> None:
    """Issue #23: a long minor finding tinted every chart; only critical/major shade it."""
    rows = pl.DataFrame(
        {"x0": [0, 0, 0], "x1": [60_000] * 3, "severity": ["major", "minor", "info"]}
    )
    major, minor, info = charts_events.finding_shapes(rows)
    assert (major["y0"], major["y1"], major["layer"]) == (0, 1, "below")
    for strip in (minor, info):
        assert strip["y0"] >= 0.9 and strip["y1"] == 1 and strip["layer"] == "above"
