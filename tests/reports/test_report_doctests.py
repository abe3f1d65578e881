"""The docstring examples of the reports package (and the audit it shows) run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "analyzer.audit", "analyzer.audit.facts", "reports.charts", "reports.charts_events",
    "reports.charts_findings", "reports.downsample", "reports.findings_view", "reports.html", "reports.incidents", "reports.markdown",
    "reports.panels", "reports.panels_devices", "reports.timefmt", "reports.diff_text",
]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
