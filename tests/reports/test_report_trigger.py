"""A flight-recorder bundle names its trigger: the report draws it as a vertical line,
centres the charts on it and names it in the summary (escaped like every string)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from analyzer.pipeline import Options, run
from reports.render import HOST

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_trigger_is_a_red_line_at_its_time_and_named_in_the_summary(tmp_path: Path) -> None:
    d = tmp_path / "cut"
    d.mkdir()
    shutil.copy(FIX / "vmstat/jc__centos-7.7__vmstat-at-5-10.out", d / "vmstat.out")
    manifest = {
        "format": "hindsight-bundle",
        "format_version": 1,
        "start_utc": "2021-09-16T20:31:00Z",
        "end_utc": "2021-09-16T20:33:00Z",
        "trigger": {"name": "psi:memory:some:avg10>20 <b>x</b>", "utc": "2021-09-16T20:31:40Z"},
    }
    (d / "manifest.json").write_text(json.dumps(manifest))
    report = tmp_path / "r.html"
    run(d, Options(report=report), HOST)
    html = report.read_text(encoding="utf-8")
    assert "Cut by the flight recorder" in html
    assert "psi:memory:some:avg10&gt;20 &lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html
    at_ms = 1631824300000  # 2021-09-16T20:31:40Z
    data = html[html.index('"shapes"') :]
    assert f'"x0":{at_ms}' in data.replace(" ", "")
