"""A day of a 128-CPU, 8-GPU, 16-disk host stays under 5 MB, plotly.js included.

The chart payload depends on the point budget (min/max per bucket, ≈2 400 points per chart
row, 900 heatmap columns), not on the sample count, so the store is sampled every 10 s here
(1.1 M mpstat rows) to keep the test fast; ``python -m tests.tools.bench`` measures the 1 s
version and the render time in Chromium (docs/performance.md). Random values are the worst
case for size.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from reports.html import render_html
from tests.tools.bench import scale_store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    con = scale_store(duckdb.connect(), hours=24, step=10)
    return render_html(con, tmp_path_factory.mktemp("scale") / "day.html")


def test_day_long_128_cpu_8_gpu_report_is_under_5_mb(page: Path) -> None:
    assert page.stat().st_size < 5_000_000, page.stat().st_size


def test_day_long_report_bounds_points_not_samples(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="hs-figures">(.*?)</script>', text, re.S).group(1))
    points = {
        fid: sum(len(t.get("xd") or t.get("x") or []) for t in fig["data"])
        for fid, fig in data["figures"].items()
    }
    assert points["p-gpu"] <= 5 * 2400 + 5 * 8 * 2  # 5 rows, 8 GPUs share each row's budget
    assert len(data["figures"]["p-percpu"]["data"][0]["z"]) == 128  # one heatmap row per CPU
    assert "nvme: top 8 of 16" not in text and "iostat_device: top 8 of 16 by max(util_pct)" in text
    assert len(data["evidence"]) <= 12
    assert text.count("occurrence") > 0 and "All 48 occurrences" in text
