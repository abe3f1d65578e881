"""The report in a real headless browser: charts draw, zoom is linked, nothing is fetched.

Skipped unless the Python package ``playwright`` is installed and a system Chromium exists
(Debian: ``apt-get install chromium``; playwright's own browser download does not work
offline, so it drives ``/usr/bin/chromium`` through ``executable_path``).
"""

from __future__ import annotations

import shutil

import pytest
from report_stores import FULL, build

from reports.html import render_html

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no system chromium")
    report = render_html(build(*FULL), tmp_path_factory.mktemp("browser") / "report.html")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        tab.errors = []  # type: ignore[attr-defined]
        tab.remote = []  # type: ignore[attr-defined]
        tab.on("pageerror", lambda e: tab.errors.append(str(e)))
        tab.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
        tab.on(
            "request",
            lambda r: tab.remote.append(r.url) if not r.url.startswith("file:") else None,
        )
        tab.goto(report.as_uri())
        tab.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 10")
        yield tab
        browser.close()


def ranges(tab) -> set[tuple[str, str]]:  # type: ignore[no-untyped-def]
    js = "[...document.querySelectorAll('.js-plotly-plot')].map(d => d.layout.xaxis.range.map(String))"
    return {tuple(r) for r in tab.evaluate(js)}


def test_page_draws_without_errors_or_network(page) -> None:  # type: ignore[no-untyped-def]
    assert page.errors == []
    assert page.remote == []


def test_zooming_one_panel_zooms_all(page) -> None:  # type: ignore[no-untyped-def]
    page.evaluate(
        "Plotly.relayout(document.getElementById('p-mem'),"
        " {'xaxis.range': [1714565000000, 1714565100000]})"
    )
    page.wait_for_timeout(300)
    assert ranges(page) == {("1714565000000", "1714565100000")}


def test_finding_button_zooms_every_panel_to_its_window(page) -> None:  # type: ignore[no-untyped-def]
    page.click("button.zoom >> nth=0")
    page.wait_for_timeout(300)
    assert ranges(page) == {("1714565040000", "1714565130000")}
