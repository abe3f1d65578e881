"""Open a report in real headless Chromium and record what happened (tests, benchmark, screenshot).

Drives the system Chromium (Debian's ``chromium`` package) through playwright's Python
package — playwright's own browser download does not work offline — with the flags the CI
uses. ``open_report(path)`` yields the playwright page and a :class:`PageLoad`: console
errors, uncaught exceptions, dialogs (``alert``/``confirm``/``prompt``: an executed payload),
every request other than the report file itself, and when each chart fired its first
``plotly_afterplot`` (``window.hindsight.plots``, ms since navigation start), plus the
renderer main thread's busy time (DevTools ``Performance.getMetrics`` TaskDuration, thread
ticks): on a loaded machine wall time varies several-fold, busy time much less.

playwright is imported lazily: it is a test/dev dependency, not needed to render reports.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RENDERED = (
    "window.hindsight !== undefined && window.hindsight.expected >= 0 && "
    "Object.keys(window.hindsight.plots).length >= window.hindsight.expected"
)


def chromium_path() -> str | None:
    """The system Chromium, or None."""
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageLoad:
    """What the page did while loading."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    expected: int = 0
    plots: dict[str, float] = field(default_factory=dict)
    rendered: bool = False
    main_thread_ms: float | None = None  # renderer main-thread busy time (CDP TaskDuration)

    @property
    def render_ms(self) -> float | None:
        """Time from navigation start until the last chart fired ``plotly_afterplot``."""
        return max(self.plots.values()) if self.rendered and self.plots else None


class Chromium:
    """One headless Chromium for several pages (playwright allows one sync session per thread).

    >>> # with Chromium() as browser:
    >>> #     with browser.open(Path("report.html")) as (page, load): ...
    """

    def __init__(self) -> None:
        self._pw: Any = None
        self._browser: Any = None

    def __enter__(self) -> Chromium:
        from playwright.sync_api import sync_playwright

        exe = chromium_path()
        if exe is None:
            raise RuntimeError("no system chromium (Debian: apt-get install chromium)")
        self._pw = sync_playwright().start()
        try:
            self._browser = self._pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        except Exception:
            self._pw.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._browser.close()
        finally:
            self._pw.stop()

    @contextmanager
    def open(
        self, path: Path, *, width: int = 1400, height: int = 900, timeout_ms: int = 60_000
    ) -> Iterator[tuple[Any, PageLoad]]:
        """Load ``path`` in a new page and wait until every chart has rendered."""
        from playwright.sync_api import Error

        url = Path(path).resolve().as_uri()
        load = PageLoad()
        context = self._browser.new_context(viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            page.on("pageerror", lambda e: load.errors.append(f"pageerror: {e}"))
            page.on(
                "console",
                lambda m: load.errors.append(f"console: {m.text}") if m.type == "error" else None,
            )
            page.on("request", lambda r: load.requests.append(r.url) if r.url != url else None)

            def on_dialog(dialog: Any) -> None:
                load.dialogs.append(f"{dialog.type}: {dialog.message}")
                dialog.dismiss()

            page.on("dialog", on_dialog)
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
            page.goto(url, wait_until="load", timeout=timeout_ms)
            try:
                page.wait_for_function(RENDERED, timeout=timeout_ms)
                load.rendered = True
            except Error as exc:
                load.errors.append(f"not rendered: {str(exc).splitlines()[0]}")
            state = page.evaluate(
                "window.hindsight ? {e: window.hindsight.expected, p: window.hindsight.plots} : null"
            )
            if state:
                load.expected, load.plots = int(state["e"]), dict(state["p"])
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            if "TaskDuration" in metrics:
                load.main_thread_ms = metrics["TaskDuration"] * 1000
            yield page, load
        finally:
            context.close()


@contextmanager
def open_report(path: Path, **kw: Any) -> Iterator[tuple[Any, PageLoad]]:
    """Launch Chromium, load ``path`` (see :meth:`Chromium.open`), close it afterwards."""
    with Chromium() as browser, browser.open(path, **kw) as opened:
        yield opened
