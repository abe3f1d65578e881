"""Issue #23, "the report at 3 a.m.": many GPUs and disks as heatmaps with the outliers as
lines, kernel-event labels that are not clipped, timeline bars clickable at any capture length.

The store is :func:`tests.tools.bench.scale_store` (2 hours, 8 GPUs, 16 disks, random values)
with GPU 5 made idle and hot, a 5 s finding in the middle and two kernel events with long
kind names at the very first and the very last millisecond of the capture. Synthetic data:
a regression check of the drawing, not of any detector's accuracy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import polars as pl
import pytest
from report_stores import FULL, GPU, build

from reports import charts_events
from reports.browser import Chromium, PageLoad
from reports.charts_findings import MIN_BAR_SHARE, swimlanes_figure
from reports.html import build_context, render_html
from reports.panels import outliers
from reports.queries import Store
from tests.tools.bench import T0, scale_store

START = 1714521600000  # 2024-05-01 00:00:00 UTC, the store's first millisecond
END = START + 2 * 3600 * 1000
SHORT = (START + 3600_000, START + 3605_000)  # the 5 s finding


def two_hours() -> duckdb.DuckDBPyConnection:
    con = scale_store(duckdb.connect(), hours=2, step=10)
    con.execute(f"""
    UPDATE gpu_dmon SET sm_pct = sm_pct / 10, gtemp_c = gtemp_c + 40 WHERE gpu = 5;
    INSERT INTO findings SELECT * REPLACE (999 AS finding_id, 'GPU_XID' AS key,
        'xid' AS kind, 'GPU reported Xid 79' AS title, {T0} + to_seconds(3600) AS start_ts,
        {T0} + to_seconds(3605) AS end_ts, 5.0 AS duration_s, NULL AS chain_id, 999 AS rank)
        FROM findings WHERE kind = 'oom_kill' LIMIT 1;
    INSERT INTO dmesg (ts, kind, message, line_no) VALUES
        ({T0}, 'gpu_fallen_off_bus', 'NVRM: GPU 0000:3b:00.0 has fallen off the bus', 100001),
        ({T0} + to_seconds(7200), 'oom_invoked', 'python invoked oom-killer', 100002);
    """)
    return con


def figures(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    import json

    ctx = build_context(Store(con))
    return json.loads(str(ctx["figures_json"]))["figures"]


# -- many devices ------------------------------------------------------------------------


def test_eight_gpus_are_heatmaps_with_the_outlier_as_a_line() -> None:
    fig = figures(two_hours())["p-gpu"]
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    lines = [t for t in fig["data"] if t["type"] == "scatter"]
    assert len(heat) == 5  # SM, memory, power, temperature, SM clock
    assert all(t["y"] == [f"GPU {g}" for g in range(7, -1, -1)] for t in heat)  # GPU 0 on top
    # only the idle, hot GPU 5 is drawn as a line (in the SM and temperature rows), beside
    # the median of the eight in every row
    assert {t["name"] for t in lines} == {"GPU 5", "median of 8"}
    assert sum(t["name"] == "GPU 5" for t in lines) == 2
    assert sum(t["name"] == "median of 8" for t in lines) == 5
    labels = [a["text"] for a in fig["layout"]["annotations"]]
    assert "SM utilisation (%): median and outliers (GPU 5)" in labels
    assert "Power (W): median, no outlier" in labels
    # every heatmap's colour bar stands beside its own row
    for t in heat:
        axis = fig["layout"]["yaxis" + t["yaxis"][1:]]
        lo, hi = axis["domain"]
        assert abs(t["colorbar"]["y"] - (lo + hi) / 2) < 1e-3 and t["colorbar"]["len"] <= hi - lo


def test_eight_of_sixteen_disks_are_heatmaps_and_two_gpus_stay_lines() -> None:
    fig = figures(two_hours())["p-disk"]
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert len(heat) == 4 and all(len(t["y"]) == 8 for t in heat)
    two = figures(build(*FULL))
    assert {t["type"] for t in two["p-gpu"]["data"]} == {"scatter"}
    assert {t["name"] for t in two["p-gpu"]["data"]} == {"GPU 0", "GPU 1"}


def test_four_gpus_stay_lines_five_become_a_heatmap() -> None:
    for n, kinds in ((4, {"scatter"}), (5, {"heatmap", "scatter"})):
        store = build(*FULL[:-3], GPU.replace("range(2) v(g)", f"range({n}) v(g)"), *FULL[-2:])
        assert {t["type"] for t in figures(store)["p-gpu"]["data"]} == kinds


def test_the_outlier_rule() -> None:
    busy = {f"GPU {g}": 95.0 + g % 2 for g in range(8)}
    assert outliers(busy) == []
    assert outliers(busy | {"GPU 3": 20.0}) == ["GPU 3"]
    assert outliers(busy | {"GPU 3": 20.0, "GPU 6": 60.0, "GPU 7": 80.0}) == ["GPU 3", "GPU 6"]
    assert outliers({"a": 1.0, "b": 50.0}) == []  # two devices: no median to stand out from


# -- kernel-event labels ----------------------------------------------------------------


def test_event_kinds_label_their_rows_in_the_right_margin() -> None:
    ev = pl.DataFrame({"x": [0, 10], "kind": ["gpu_fallen_off_bus", "k" * 40], "text": ["a", "b"]})
    fig = charts_events.events_figure(ev, (0, 10))
    axis = fig["layout"]["yaxis"]
    assert axis["side"] == "right" and fig["layout"]["showlegend"] is False
    assert axis["ticktext"] == ["gpu_fallen_off_bus", "k" * 23 + "…"]


# -- timeline bars ----------------------------------------------------------------------


def test_a_5_s_finding_of_a_2_hour_capture_gets_a_bar_you_can_click() -> None:
    f = {"x0": SHORT[0], "x1": SHORT[1], "key": "GPU_XID", "severity": "critical",
         "finding_id": 7, "hover": "Xid"}  # fmt: skip
    bar = swimlanes_figure([f], (START, END))["data"][0]
    (base,), (width,) = bar["base"], bar["x"]
    assert width >= MIN_BAR_SHARE * (END - START) > 5000
    assert base < SHORT[0] and base + width > SHORT[1]  # centred on the real window
    assert bar["customdata"][0][:3] == [SHORT[0], SHORT[1], 7]  # hover and zoom: real window


# -- in the real browser -----------------------------------------------------------------

LABELS = (
    "(sel => [...document.querySelectorAll('.chart.linked')].flatMap(d => {"
    " const svg = d.querySelector('svg.main-svg').getBoundingClientRect();"
    " return [...d.querySelectorAll(sel)].filter(e => e.textContent.trim()).map(e => {"
    " const b = e.getBoundingClientRect();"
    " return {id: d.id, text: e.textContent, l: b.left - svg.left, r: svg.right - b.right,"
    " t: b.top - svg.top, b: svg.bottom - b.bottom}; }); }))"
)


@pytest.fixture(scope="module")
def page_2h(
    chromium: Chromium, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, PageLoad]]:
    report = render_html(two_hours(), tmp_path_factory.mktemp("at3am") / "report.html")
    with chromium.open(report, width=1400, height=900) as opened:
        yield opened


@pytest.mark.slow
def test_no_label_of_any_panel_is_clipped(page_2h) -> None:  # type: ignore[no-untyped-def]
    page, load = page_2h
    assert load.rendered and load.errors == []
    found = page.evaluate(
        LABELS, ".ytick text, .xtick text, .annotation-text, .legendtext, .cbtitle text"
    )
    kinds = {f["text"] for f in found if f["id"] == "p-events"}
    assert {"gpu_fallen_off_bus", "oom_invoked", "xid", "io_error"} <= kinds
    clipped = [f for f in found if min(f["l"], f["r"], f["t"], f["b"]) < 0]
    assert clipped == []
    # the events strip's kinds sit right of its plot area, beside the first and last event
    events = page.locator("#p-events")
    plot = events.locator(".nsewdrag").first.bounding_box()
    for text in events.locator(".ytick text").all():
        box = text.bounding_box()
        assert box["x"] >= plot["x"] + plot["width"] and box["x"] + box["width"] <= 1400


@pytest.mark.slow
def test_gpu_heatmaps_draw_in_the_browser(page_2h) -> None:  # type: ignore[no-untyped-def]
    page, _ = page_2h
    assert page.locator("#p-gpu .heatmaplayer image, #p-gpu .hm image").count() == 5


@pytest.mark.slow
def test_clicking_the_5_s_bar_of_a_2_hour_timeline_zooms_to_its_real_window(page_2h) -> None:  # type: ignore[no-untyped-def]
    page, _ = page_2h
    PlaywrightError = pytest.importorskip("playwright.sync_api").Error
    index = page.evaluate(
        "(() => { const d = document.getElementById('p-swimlanes');"
        " for (const [i, t] of d.data.entries()) for (const [j, c] of t.customdata.entries())"
        " if (c[2] === 999) return [i, j]; })()"
    )
    assert index is not None
    i, j = index
    bar = page.locator("#p-swimlanes .barlayer .trace").nth(i).locator(".point path").nth(j)
    bar.scroll_into_view_if_needed()
    drawn = "p => p.getBBox().width"  # the bar itself; bounding_box() adds its outline
    assert bar.evaluate(drawn) >= 6, bar.evaluate(drawn)
    for _ in range(5):  # a real click: hover the bar until plotly shows its label, then click
        box = bar.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x - 1, y)
        page.mouse.move(x, y)
        try:
            page.wait_for_selector("#p-swimlanes .hoverlayer .hovertext", timeout=3000)
        except PlaywrightError:  # no hover label yet: hover again
            continue
        page.mouse.click(x, y)
        try:
            page.wait_for_function("window.hindsight.lastClicked === 999", timeout=3000)
            break
        except PlaywrightError:
            continue
    assert page.evaluate("window.hindsight.lastClicked") == 999
    pad = 30_000  # max(15 % of 5 s, 30 s)
    lo, hi = SHORT[0] - pad, SHORT[1] + pad
    page.wait_for_function(
        "[...document.querySelectorAll('.chart.linked')].every(d => "
        f"d.layout.xaxis.range.map(Number).join() === '{lo},{hi}')"
    )
    # zoomed in, the bar is its real 5 s again: 5/65 of the plot width
    page.wait_for_function(
        f"(() => {{ const d = document.getElementById('p-swimlanes'); const t = d.data[{i}];"
        f" return t.x[{j}] === 5000 && t.base[{j}] === {SHORT[0]}; }})()"
    )
    plot = page.locator("#p-swimlanes .nsewdrag").first.bounding_box()
    width = bar.evaluate(drawn)
    assert abs(width - plot["width"] * 5 / 65) < 1, (width, plot["width"])


def test_module_store_spans_two_hours() -> None:
    con = two_hours()
    lo, hi = con.sql("SELECT min(epoch_ms(ts)), max(epoch_ms(ts)) FROM dmesg").fetchall()[0]
    assert (lo, hi) == (START, END)
