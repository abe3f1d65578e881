"""The report in real headless Chromium: every panel draws, nothing is fetched, no errors,
and clicking a finding zooms every panel to its window.

Runs the system Chromium through playwright (``reports.browser``); skipped only when
playwright or Chromium is missing (CI installs both).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Analysed
from report_stores import FULL, build

from reports.browser import Chromium, PageLoad
from reports.html import render_html

pytestmark = pytest.mark.slow
PlaywrightError = pytest.importorskip("playwright.sync_api").Error

LINKED = "[...document.querySelectorAll('.chart.linked')]"
RANGES = f"{LINKED}.map(d => d.layout.xaxis.range.map(Number))"
EVIDENCE = (
    "[...document.querySelectorAll('.chart.evidence')].map(d => d.layout.xaxis.range.map(Number))"
)


@pytest.fixture(scope="module")
def sample_page(chromium: Chromium, sample: Analysed) -> Iterator[tuple[Any, PageLoad]]:
    with chromium.open(sample.report) as opened:
        yield opened


@pytest.fixture(scope="module")
def full_page(
    chromium: Chromium, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, PageLoad]]:
    report = render_html(build(*FULL), tmp_path_factory.mktemp("browser") / "report.html")
    with chromium.open(report) as opened:
        yield opened


def assert_every_chart_drew(page: Any, load: PageLoad) -> None:
    assert load.rendered, load.errors
    ids = page.evaluate("[...document.querySelectorAll('.chart')].map(d => d.id)")
    assert ids and set(ids) == set(load.plots), "a chart div did not fire plotly_afterplot"
    assert len(ids) == load.expected
    drawn = page.evaluate(
        "[...document.querySelectorAll('.chart')].filter(d => d.classList.contains('js-plotly-plot')"
        " && d.querySelector('svg.main-svg .cartesianlayer')).length"
    )
    assert drawn == len(ids)


def test_sample_report_draws_every_panel_without_errors_or_network(sample_page) -> None:  # type: ignore[no-untyped-def]
    page, load = sample_page
    assert load.errors == [] and load.requests == [] and load.dialogs == []
    assert_every_chart_drew(page, load)
    panels = set(page.evaluate(f"{LINKED}.map(d => d.id)"))
    assert {
        "p-swimlanes",
        "p-cpu",
        "p-percpu",
        "p-runq",
        "p-mem",
        "p-psi",
        "p-disk",
        "p-gpu",
    } <= panels
    # Panels without data say so in one line instead of drawing an empty chart.
    assert page.locator("#p-bpf-box .absent").inner_text().startswith("Latency histograms")


def test_every_panel_of_a_complete_store_draws(full_page) -> None:  # type: ignore[no-untyped-def]
    page, load = full_page
    assert load.errors == [] and load.requests == [] and load.dialogs == []
    assert_every_chart_drew(page, load)
    assert page.locator(".absent").count() == 0  # every panel has data
    # the finding without evidence signals: a one-line hint, not an empty chart box (#23)
    assert page.locator(".no-chart").count() == 1 and page.locator(".card-chart").count() >= 1
    assert page.locator(".card:has(.no-chart) .card-chart").count() == 0


def test_clicking_a_finding_on_the_timeline_zooms_every_panel(sample_page) -> None:  # type: ignore[no-untyped-def]
    page, _ = sample_page
    before = page.evaluate(EVIDENCE)
    bar = page.locator("#p-swimlanes .bars .point path").first
    bar.scroll_into_view_if_needed()
    for _ in range(5):  # a real click: hover the bar until plotly shows its label, then click
        box = bar.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.move(x + 1, y)
        try:
            page.wait_for_selector("#p-swimlanes .hoverlayer .hovertext", timeout=3000)
        except PlaywrightError:
            continue
        page.mouse.click(x + 1, y)
        try:
            page.wait_for_function("window.hindsight.lastClicked !== undefined", timeout=3000)
            break
        except PlaywrightError:
            continue
    fid = page.evaluate("window.hindsight.lastClicked")
    x0, x1 = page.evaluate(
        "(fid => { for (const t of document.getElementById('p-swimlanes').data)"
        " for (const c of t.customdata) if (c[2] === fid) return [c[0], c[1]]; })",
        fid,
    )
    pad = max((x1 - x0) * 0.15, 30_000)
    expected = [x0 - pad, x1 + pad]
    page.wait_for_function(f"{RANGES}.every(r => r[0] === {expected[0]} && r[1] === {expected[1]})")
    assert before and page.evaluate(EVIDENCE) == before  # evidence charts keep their windows


def test_zoom_button_of_a_finding_card_zooms_every_panel(sample_page) -> None:  # type: ignore[no-untyped-def]
    page, _ = sample_page
    button = page.locator("#findings .card button.zoom").first
    x0 = float(button.get_attribute("data-x0"))
    x1 = float(button.get_attribute("data-x1"))
    pad = max((x1 - x0) * 0.15, 30_000)
    button.click()
    page.wait_for_function(f"{RANGES}.every(r => r[0] === {x0 - pad} && r[1] === {x1 + pad})")


def test_zooming_one_panel_zooms_all_and_reset_restores(full_page) -> None:  # type: ignore[no-untyped-def]
    page, _ = full_page
    page.evaluate(
        "Plotly.relayout(document.getElementById('p-mem'), {'xaxis.range': [1714565000000, 1714565100000]})"
    )
    page.wait_for_function(f"{RANGES}.every(r => r[0] === 1714565000000 && r[1] === 1714565100000)")
    page.click("#reset-zoom")
    page.wait_for_function(f"{RANGES}.every(r => r[0] === 1714564800000 && r[1] === 1714565400000)")


def test_report_file_is_self_contained(
    chromium: Chromium, sample: Analysed, tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere.html"  # nothing next to the file is needed
    moved.write_bytes(sample.report.read_bytes())
    with chromium.open(moved) as (_page, load):
        assert load.rendered and load.requests == [] and load.errors == []
