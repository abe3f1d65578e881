"""The diff and fleet pages in a real headless browser: charts draw, nothing is fetched.

Skipped unless playwright and a system Chromium exist (as tests/reports/test_report_browser.py).
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from multi_bundles import START, HostSpec, const, write_bundle

from analyzer.diff import run_diff
from analyzer.fleet import FleetOptions, run_fleet
from reports.render import DIFF, FLEET

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no system chromium")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def load(browser, path: Path, plots: int) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    tab = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    remote: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("request", lambda r: remote.append(r.url) if not r.url.startswith("file:") else None)
    tab.goto(path.as_uri())
    tab.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {plots}")
    tab.close()
    return errors, remote


def test_diff_page_draws_without_errors_or_network(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before = write_bundle(
        tmp_path / "b", HostSpec(seconds=40, throttled_pct=const(40.0), gpu_util=const(60.0))
    )
    after = write_bundle(tmp_path / "a", HostSpec(seconds=40, start=START + timedelta(hours=2)))
    run_diff(before, after, html=tmp_path / "diff.html", renderers=DIFF)
    assert load(browser, tmp_path / "diff.html", 2) == ([], [])


def test_fleet_page_draws_without_errors_or_network(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for i in range(4):
        spec = HostSpec(hostname=f"h{i}", seconds=40, gpu_util=const(30.0 if i == 2 else 90.0))
        write_bundle(tmp_path / "c", spec)
    run_fleet([tmp_path / "c"], FleetOptions(output=tmp_path / "fleet.html", jobs=1), FLEET)
    assert load(browser, tmp_path / "fleet.html", 2) == ([], [])
