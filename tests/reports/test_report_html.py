"""The HTML report: self-contained, escaped, and tolerant of missing tables."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from itertools import accumulate
from pathlib import Path

import duckdb
import pytest
from report_stores import (
    BUNDLE,
    COLLECTORS,
    DMESG,
    FINDINGS,
    FULL,
    HOSTILE,
    HOSTILE_FILE,
    ISSUE2,
    PSI,
    build,
)

from reports.html import render_html, script_json, static_text

PLOTLY_BANNER = "plotly.js (cartesian - minified) v"


class Tags(HTMLParser):
    """Collects start tags with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def render(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> str:
    out = render_html(con, tmp_path / "sub" / "report.html")
    assert out == tmp_path / "sub" / "report.html"
    assert out.is_file()
    return out.read_text(encoding="utf-8")


def figures(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="hs-figures">(.*?)</script>', page, re.S)
    assert m, "figure data block missing"
    payload = json.loads(m.group(1))
    for fig in payload["figures"].values():  # what report.js does before plotting
        for trace in fig["data"]:
            if "xd" in trace:
                trace["x"] = list(accumulate(trace.pop("xd")))
    return payload


@pytest.fixture(scope="module")
def issue2_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return render(build(*ISSUE2), tmp_path_factory.mktemp("issue2"))


def test_report_file_is_written_with_header_facts(issue2_page: str) -> None:
    assert "gpu7.example" in issue2_page
    assert "6.8.0-45-generic" in issue2_page
    assert "gpu7-incident" in issue2_page
    assert "2024-05-01 12:00:00 → 12:10:00 UTC (10 min)" in issue2_page
    assert "2024-05-01 14:00:00 CEST" in issue2_page  # host local time, Europe/Berlin


def test_plotly_js_is_inlined_exactly_once(issue2_page: str) -> None:
    assert issue2_page.count(PLOTLY_BANNER) == 1
    assert issue2_page.count('id="plotly-js"') == 1
    assert len(static_text("static/plotly/plotly-cartesian.min.js")) > 1_000_000


def test_page_loads_nothing_from_the_network(issue2_page: str) -> None:
    parser = Tags()
    parser.feed(issue2_page)
    for tag, attrs in parser.tags:
        for name in ("src", "href"):
            value = (attrs.get(name) or "").strip().lower()
            if tag in {"script", "link", "img", "iframe", "source"}:
                assert not value.startswith(("http:", "https:", "//")), (tag, attrs)
        if tag == "link":
            assert "stylesheet" not in (attrs.get("rel") or ""), attrs
        if tag == "script":
            assert "src" not in attrs, attrs
    assert not re.search(r"@import|url\(\s*['\"]?https?:", issue2_page)


def test_hostile_dmesg_message_is_escaped_everywhere(issue2_page: str) -> None:
    assert HOSTILE not in issue2_page
    assert "<script>alert(1)" not in issue2_page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in issue2_page
    # Inside the JSON block it is escaped for the script context too, and still decodes.
    text = figures(issue2_page)["figures"]["p-events"]["data"][0]["text"][0]
    assert "&lt;script&gt;alert(1)" in text


def test_hostile_collector_file_name_is_escaped(issue2_page: str) -> None:
    assert HOSTILE_FILE not in issue2_page
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;.log" in issue2_page
    assert "sh: 1: &lt;script&gt;x&lt;/script&gt;: not found" in issue2_page
    assert "&lt;b&gt;bold&lt;/b&gt;" in issue2_page


def test_only_three_script_elements_and_none_closed_early(issue2_page: str) -> None:
    assert issue2_page.lower().count("<script") == 3
    assert issue2_page.lower().count("</script") == 3


def test_issue2_panels_are_drawn_on_one_x_range(issue2_page: str) -> None:
    data = figures(issue2_page)
    assert data["range"] == [1714564800000, 1714565400000]
    assert set(data["figures"]) == {"p-events", "p-cpu", "p-runq", "p-mem", "p-psi"}
    for fig in data["figures"].values():
        assert fig["layout"]["xaxis"]["range"] == data["range"]
        for trace in fig["data"]:
            assert trace["type"] in {"scatter", "heatmap"}
            assert all(isinstance(x, int) for x in trace["x"])
    cpu = data["figures"]["p-cpu"]["data"]
    assert [t["name"] for t in cpu] == ["user", "system", "iowait", "steal", "idle"]
    assert max(cpu[2]["y"]) == 15.0  # the one-sample iowait spike survives


def test_classified_events_are_listed_and_marked(issue2_page: str) -> None:
    assert "oom_kill" in issue2_page and "GPU has fallen off the bus" in issue2_page
    assert "eth0: link up" not in issue2_page  # unclassified lines are not events
    assert "<th>local (Europe/Berlin)</th>" in issue2_page
    assert "2024-05-01 14:05:00 CEST" in issue2_page
    shapes = figures(issue2_page)["shapes"]  # shared: report.js adds them to every chart
    assert sorted(s["x0"] for s in shapes if s["type"] == "line") == [
        1714565100000,
        1714565160000,
    ]


def test_missing_tables_say_so_in_one_line(issue2_page: str) -> None:
    assert "No findings (detectors not run)." in issue2_page
    assert "No per-CPU data: the mpstat_cpu table is absent, empty or untimed." in issue2_page
    assert "No data: the gpu_dmon table is absent, empty, untimed or lacks sm_pct." in issue2_page


def test_coverage_lists_every_collector_with_problems_first(issue2_page: str) -> None:
    section = issue2_page[issue2_page.index('<section id="coverage">') :]
    assert section.index("unrecognised") < section.index("dmesg.out") < section.index("vmstat.out")
    assert "unparsable line: 2" in section
    assert "83.3" in section


def test_store_with_only_bundle_and_collectors_renders(tmp_path: Path) -> None:
    page = render(build(BUNDLE, COLLECTORS), tmp_path)
    assert "No CPU data" in page
    assert "No kernel log" in page
    assert "No pressure-stall data" in page
    assert figures(page)["figures"] == {}
    assert page.count(PLOTLY_BANNER) == 1


def test_store_without_any_table_renders(tmp_path: Path) -> None:
    page = render(duckdb.connect(), tmp_path)
    assert "unknown host" in page
    assert "No collector records" in page


def test_findings_shade_charts_and_lead_the_verdict(tmp_path: Path) -> None:
    page = render(build(*ISSUE2, FINDINGS), tmp_path)
    assert "CRITICAL: Process killed by the OOM killer (+1 more finding)" in page
    assert 'data-x0="1714565070000"' in page
    assert "python &lt;pid 4242&gt; was killed" in page
    rects = [s for s in figures(page)["shapes"] if s["type"] == "rect"]
    assert sorted(s["fillcolor"] for s in rects) == ["#bcbd22", "#d62728"]


def test_empty_findings_table_means_detectors_found_nothing(tmp_path: Path) -> None:
    con = build(*ISSUE2, FINDINGS)
    con.execute("DELETE FROM findings")
    assert "No findings: detectors found nothing." in render(con, tmp_path)


def test_later_tables_draw_their_panels(tmp_path: Path) -> None:
    data = figures(render(build(*FULL), tmp_path))["figures"]
    assert {"p-percpu", "p-disk-util", "p-disk-tput", "p-gpu-sm", "p-gpu-pwr"} <= set(data)
    heat = data["p-percpu"]["data"][0]
    assert heat["type"] == "heatmap" and heat["y"] == ["0", "1", "2", "3"]
    assert data["p-cpu"]["data"][0]["name"] == "user"  # mpstat 'all' preferred over vmstat
    assert [t["name"] for t in data["p-gpu-sm"]["data"]] == ["GPU 0", "GPU 1"]


def test_missing_columns_are_tolerated(tmp_path: Path) -> None:
    con = build(BUNDLE, COLLECTORS, DMESG)
    con.execute("ALTER TABLE dmesg DROP COLUMN comm; ALTER TABLE collectors DROP COLUMN notes")
    con.execute("CREATE TABLE vmstat AS SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' AS ts, 1 AS r")
    page = render(con, tmp_path)
    assert "No CPU data" in page
    assert "p-runq" in figures(page)["figures"]


def test_script_json_cannot_close_a_script_element() -> None:
    text = str(script_json({"a": "</script><!--<script>\u2028\u2029&", "n": float("nan")}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == {"a": "</script><!--<script>\u2028\u2029&", "n": None}


def test_a_panel_the_store_cannot_feed_fails_alone(tmp_path: Path) -> None:
    con = build(*ISSUE2)
    con.execute(
        "CREATE TABLE mpstat_cpu AS SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' AS ts, "
        "'all' AS cpu, 50.0 AS idle_pct"
    )
    con.execute("INSERT INTO vmstat (ts, r, id_pct) VALUES (NULL, 99, 1)")
    page = render(con, tmp_path)
    assert "Per-CPU busy:</strong> Could not draw this panel (BinderException" in page
    assert "mpstat unusable (ConversionException); source: vmstat" in page
    data = figures(page)["figures"]
    assert "p-runq" in data and "p-percpu" not in data
    assert data["p-cpu"]["data"][-1]["name"] == "idle"  # fell back to vmstat
    assert 99.0 not in data["p-runq"]["data"][0]["y"]  # rows without a time are left out


def test_disk_panels_leave_out_partitions(tmp_path: Path) -> None:
    con = build(*FULL)
    con.execute(
        "ALTER TABLE iostat_device ADD COLUMN is_partition BOOLEAN;"
        "UPDATE iostat_device SET is_partition = (device = 'sda')"
    )
    data = figures(render(con, tmp_path))["figures"]
    assert [t["name"] for t in data["p-disk-util"]["data"]] == ["nvme0n1"]


def test_rows_without_time_are_not_charted_and_say_so(tmp_path: Path) -> None:
    con = build(BUNDLE, COLLECTORS, DMESG, PSI)
    con.execute("UPDATE dmesg SET ts = NULL; UPDATE psi SET ts = NULL")
    page = render(con, tmp_path)
    assert "2 classified events have no wall-clock time" in page
    assert "No pressure-stall data: the psi table is absent, empty or untimed." in page
    assert figures(page)["figures"] == {}
    assert "GPU has fallen off the bus" in page  # still listed in the events table
