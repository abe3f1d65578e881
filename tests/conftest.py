"""Fixtures every test folder may use: one real headless Chromium for the whole session.

One, because playwright's sync API cannot start inside a running one: a test that opened
its own browser after a session fixture had started would fail.
"""

from __future__ import annotations

import pytest

from reports.browser import Chromium, chromium_path


def need_browser() -> None:
    """Skip unless playwright and the system Chromium are installed (CI installs both)."""
    pytest.importorskip("playwright.sync_api")
    if chromium_path() is None:
        pytest.skip("no system chromium (apt-get install chromium)")


@pytest.fixture(scope="session")
def chromium():  # type: ignore[no-untyped-def]
    """One real headless Chromium for the whole session (skips when it is not installed)."""
    need_browser()
    with Chromium() as browser:
        yield browser
