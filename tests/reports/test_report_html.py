"""The HTML report: self-contained, escaped, every section present, tolerant of missing tables."""

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
    FULL,
    HOSTILE,
    HOSTILE_FILE,
    ISSUE2,
    LEGACY_FINDINGS,
    PSI,
    build,
)

from reports.html import code_spans, render_html, script_json, static_text

PLOTLY_BANNER = "plotly.js (cartesian - minified) v"
SECTIONS = ["summary", "timeline", "panels", "findings", "audit", "coverage", "appendix"]


class Tags(HTMLParser):
    """Collects start tags with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def render(con: duckdb.DuckDBPyConnection, tmp_path: Path, **kw: str) -> str:
    out = render_html(con, tmp_path / "sub" / "report.html", **kw)
    assert out == tmp_path / "sub" / "report.html"
    return out.read_text(encoding="utf-8")


def payload(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="hs-figures">(.*?)</script>', page, re.S)
    assert m, "figure data block missing"
    data = json.loads(m.group(1))
    for group in ("figures", "evidence"):
        for fig in data[group].values():  # what report.js does before plotting
            for trace in fig["data"]:
                if "xd" in trace:
                    trace["x"] = list(accumulate(trace.pop("xd")))
    return data


def section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start : page.index("</section>", start)]


@pytest.fixture(scope="module")
def issue2_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return render(build(*ISSUE2), tmp_path_factory.mktemp("issue2"))


@pytest.fixture(scope="module")
def full_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return render(build(*FULL), tmp_path_factory.mktemp("full"))


def test_header_shows_host_kernel_gpus_window_in_utc_and_local_time(full_page: str) -> None:
    header = full_page[: full_page.index("</header>")]
    for fact in ("gpu7.example", "6.8.0-45-generic", "gpu7-incident", "Capture version"):
        assert fact in header
    assert "2024-05-01 12:00:00 → 12:10:00 UTC (10 min)" in header
    assert "2024-05-01 14:00:00 CEST" in header  # host local time, Europe/Berlin
    assert "2 GPUs (model not captured)" in header
    assert 'id="verdict"' in header


def test_every_section_is_present_in_order(full_page: str) -> None:
    positions = [full_page.index(f'<section id="{s}">') for s in SECTIONS]
    assert positions == sorted(positions)


def test_verdict_names_the_top_incident_and_its_cost(full_page: str) -> None:
    verdict = re.search(r'<p class="verdict[^>]*>(.*?)</p>', full_page, re.S).group(1)
    assert (
        "CRITICAL: Memory pressure → oom kill — 80 GPU-seconds lost, 1 processes killed" in verdict
    )
    assert "(+1 more incident)" in verdict


def test_summary_ranks_incidents_with_impact_and_evidence_links(full_page: str) -> None:
    summary = section(full_page, "summary")
    assert summary.index("Memory pressure → oom kill") < summary.index("Disk saturated")
    assert '<a class="evidence-link" href="#incident-1">' in summary
    assert "<strong>80</strong> GPU-seconds lost" in summary
    assert "<strong>1</strong> processes killed" in summary
    assert "<strong>12</strong> GPU-seconds lost" in summary  # 'not json' impact: chain value kept
    assert "<strong>cannot conclude</strong> on cpu_throttle" in summary


def test_summary_puts_the_first_remediation_of_each_incidents_cause_on_the_first_screen(
    full_page: str,
) -> None:
    """Issue #23: what to change was ~6,000 px down, in the cards only."""
    summary = section(full_page, "summary")
    first = summary[: summary.index("Disk saturated")]
    # the chain's cause is MEMORY_PRESSURE: its first line, not the OOM kill's
    assert '<p class="first-fix"><strong>First step:</strong> Lower vm.swappiness:' in first
    assert "<code>sysctl -w vm.swappiness=10</code>" in first
    assert 'href="#incident-1">(all remediations)</a>' in first
    assert summary.count('class="first-fix"') == 1  # the disk finding has no remediation


def test_finding_cards_show_evidence_raw_lines_chain_and_remediation(full_page: str) -> None:
    findings = section(full_page, "findings")
    card = findings[findings.index('id="finding-2"') :]
    assert (
        "Causal chain:" in findings and 'href="#finding-1"><code>MEMORY_PRESSURE</code>' in findings
    )
    assert "<td><code>psi_mem_some_pct</code></td>" in card and "26.7×" in card
    assert "dmesg.out:1  2024-05-01 12:05:00 UTC  Out of memory: Killed process 4242" in card
    assert "<code>echo 64G &gt; /sys/fs/cgroup/job/memory.max</code>" in card
    assert "Collectors missed samples at 12:04:50." in card
    assert "No evidence chart" in findings  # IO_SATURATION has no evidence rows


def test_evidence_chart_is_zoomed_to_the_window_with_the_baseline_dashed(full_page: str) -> None:
    evidence = payload(full_page)["evidence"]
    assert set(evidence) == {"ev-1", "ev-2"}
    fig = evidence["ev-1"]
    assert fig["layout"]["xaxis"]["range"] == [1714564980000 - 52500, 1714565085000 + 52500]
    dashed = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    # dirty_kb stays in kB: its name spells the unit (a label never contradicts its value)
    assert {(s["yref"], s["y0"]) for s in dashed} == {("y", 1.5), ("y2", 8388608.0)}
    assert [a["text"] for a in fig["layout"]["annotations"] if "baseline" in a["text"]] == [
        "baseline 1.5",
        "baseline 8.39M",
    ]


def test_swimlanes_put_each_finding_on_its_lane_with_its_window(full_page: str) -> None:
    lanes = payload(full_page)["figures"]["p-swimlanes"]
    bars = {t["name"]: t for t in lanes["data"]}
    assert set(bars) == {"critical", "major", "minor"}
    assert bars["critical"]["customdata"][0][:3] == [1714565070000, 1714565100000, 2]
    assert lanes["layout"]["yaxis"]["categoryarray"] == [
        "MEMORY_PRESSURE",
        "OOM_KILL",
        "IO_SATURATION",
    ]


def test_plotly_js_is_inlined_exactly_once(full_page: str) -> None:
    assert full_page.count(PLOTLY_BANNER) == 1
    assert full_page.count('id="plotly-js"') == 1
    assert len(static_text("static/plotly/plotly-cartesian.min.js")) > 1_000_000


def test_page_loads_nothing_from_the_network(full_page: str) -> None:
    parser = Tags()
    parser.feed(full_page)
    for tag, attrs in parser.tags:
        for name in ("src", "href"):
            value = (attrs.get(name) or "").strip().lower()
            if tag in {"script", "link", "img", "iframe", "source"}:
                assert not value.startswith(("http:", "https:", "//")), (tag, attrs)
            if tag == "a":
                assert value.startswith("#") or not value, attrs
        if tag == "link":
            assert "stylesheet" not in (attrs.get("rel") or ""), attrs
        if tag == "script":
            assert "src" not in attrs, attrs
    assert not re.search(r"@import|url\(\s*['\"]?https?:", full_page)


def test_hostile_strings_are_escaped_everywhere(full_page: str) -> None:
    assert HOSTILE not in full_page
    assert "<script>alert(1)" not in full_page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in full_page
    assert HOSTILE_FILE not in full_page
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;.log" in full_page
    assert full_page.lower().count("<script") == 3 and full_page.lower().count("</script") == 3
    text = payload(full_page)["figures"]["p-events"]["data"][0]["text"][0]
    assert "&lt;script&gt;alert(1)" in text  # plotly renders HTML in hover labels


def test_code_spans_escape_everything_but_their_own_tags() -> None:
    assert str(code_spans("a `<b>` <i>")) == "a <code>&lt;b&gt;</code> &lt;i&gt;"
    assert str(code_spans("`unclosed <x>")) == "`unclosed &lt;x&gt;"


def test_every_panel_is_drawn_on_one_x_range_with_numbers_only(full_page: str) -> None:
    data = payload(full_page)
    assert data["range"] == [1714564800000, 1714565400000]
    expected = {"p-swimlanes", "p-events", "p-cpu", "p-percpu", "p-runq", "p-mem", "p-psi",
                "p-disk", "p-net", "p-cgroup", "p-gpu", "p-bpf"}  # fmt: skip
    assert set(data["figures"]) == expected
    for fig in data["figures"].values():
        assert fig["layout"]["xaxis"]["range"] == data["range"]
        assert fig["layout"]["margin"]["l"] == 70 and fig["layout"]["margin"]["r"] == 170
        for trace in fig["data"]:
            assert trace["type"] in {"scatter", "heatmap", "bar"}  # never scattergl
            assert all(x is None or isinstance(x, int) for x in trace.get("x", []))


def test_panels_show_what_the_issue_asks_for(full_page: str) -> None:
    figs = payload(full_page)["figures"]
    names = lambda pid: {t["name"] for t in figs[pid]["data"]}  # noqa: E731
    assert [t["name"] for t in figs["p-cpu"]["data"]][:3] == ["user", "system", "iowait"]
    assert {"runnable", "blocked (D)"} <= names("p-runq")
    assert {"dirty", "used", "swap in"} <= names("p-mem") or {"dirty"} <= names("p-mem")
    assert names("p-net") == {"eth0"}  # loopback left out
    assert names("p-gpu") == {"GPU 0", "GPU 1"}
    assert figs["p-percpu"]["data"][0]["y"] == ["0", "1", "2", "3"]
    assert figs["p-bpf"]["data"][0]["type"] == "heatmap"
    rows = [a["text"] for a in figs["p-disk"]["layout"]["annotations"]]
    assert rows == [
        "Write (MB/s)",
        "Read (MB/s)",
        "Await, worst of read/write (ms)",
        "Utilisation (%)",
    ]


def test_a_one_sample_spike_survives_downsampling(issue2_page: str) -> None:
    cpu = payload(issue2_page)["figures"]["p-cpu"]["data"]
    assert [t["name"] for t in cpu] == ["user", "system", "iowait", "steal", "idle"]
    assert max(cpu[2]["y"]) == 15.0


def test_classified_events_are_listed_and_marked(issue2_page: str) -> None:
    assert "oom_kill" in issue2_page and "GPU has fallen off the bus" in issue2_page
    assert "eth0: link up" not in issue2_page  # unclassified lines are not events
    assert "<th>local (Europe/Berlin)</th>" in issue2_page
    shapes = payload(issue2_page)["shapes"]  # shared: report.js adds them to every chart
    assert sorted(s["x0"] for s in shapes if s["type"] == "line") == [1714565100000, 1714565160000]


def test_missing_data_says_so_in_one_line_and_never_claims_all_clear(issue2_page: str) -> None:
    assert "No findings (detectors not run)." in issue2_page
    assert "Detectors: not run — nothing can be concluded" in issue2_page
    assert "No per-CPU data: the mpstat_cpu table is absent, empty or untimed." in issue2_page
    assert "No GPU data: nvidia-smi dmon was not captured (or no GPU)." in issue2_page
    assert "No network data" in issue2_page and "No cgroup statistics" in issue2_page
    assert "No latency histograms" in issue2_page
    assert "No host snapshot in the bundle" in issue2_page


def test_coverage_lists_collectors_problems_first_and_detectors_that_cannot_conclude(
    full_page: str,
) -> None:
    cov = section(full_page, "coverage")
    assert cov.index("unrecognised") < cov.index("dmesg.out") < cov.index("vmstat.out")
    assert "unparsable line: 2" in cov and "83.3" in cov
    assert "610 lines parsed, 3 skipped" in cov
    row = cov[cov.index("<code>cpu_throttle</code>") :]
    assert "cannot conclude" in row[:400] and "needs cgroup_cpu with CFS counters" in row[:400]


def test_appendix_shows_how_to_reproduce_numbers_and_the_manifest(full_page: str) -> None:
    app = section(full_page, "appendix")
    assert "hindsight query gpu7.tgz &#39;SELECT rank, severity, title" in app
    assert "FROM finding_evidence WHERE finding_id = 1" in app
    assert "FROM &#34;iostat_device&#34;" in app  # the query behind a chart
    assert "<th>capture_version</th><td>0.1</td>" in app


def test_store_with_only_bundle_and_collectors_renders(tmp_path: Path) -> None:
    page = render(build(BUNDLE, COLLECTORS), tmp_path)
    assert "No CPU data" in page and "No kernel log" in page and "No pressure-stall data" in page
    assert payload(page)["figures"] == {}
    assert page.count(PLOTLY_BANNER) == 1


def test_store_without_any_table_renders(tmp_path: Path) -> None:
    page = render(duckdb.connect(), tmp_path)
    assert "unknown host" in page and "No collector records" in page


def test_legacy_findings_table_without_ids_or_chains_still_renders(tmp_path: Path) -> None:
    page = render(build(*ISSUE2, LEGACY_FINDINGS), tmp_path)
    assert "CRITICAL: Process killed by the OOM killer (+1 more incident)" in page
    assert 'data-x0="1714565070000"' in page
    assert "python &lt;pid 4242&gt; was killed" in page and "1 process killed" in page
    rects = [s for s in payload(page)["shapes"] if s["type"] == "rect"]
    assert sorted(s["fillcolor"] for s in rects) == ["#bcbd22", "#d62728"]


def test_empty_findings_with_detectors_run_is_not_an_all_clear_when_some_could_not_run(
    tmp_path: Path,
) -> None:
    con = build(*FULL)
    con.execute("DELETE FROM findings; DELETE FROM chains")
    page = render(con, tmp_path)
    assert "No incident found by the 3 detectors that ran; 1 could not be evaluated" in page
    con.execute("DELETE FROM detector_status WHERE status <> 'evaluated'")
    assert "No incident found: all 3 detectors ran and found nothing." in render(con, tmp_path)


def test_missing_columns_are_tolerated(tmp_path: Path) -> None:
    con = build(BUNDLE, COLLECTORS, DMESG)
    con.execute("ALTER TABLE dmesg DROP COLUMN comm; ALTER TABLE collectors DROP COLUMN notes")
    con.execute("CREATE TABLE vmstat AS SELECT TIMESTAMPTZ '2024-05-01 12:00:00+00' AS ts, 1 AS r")
    page = render(con, tmp_path)
    assert "No CPU data" in page
    assert "p-runq" in payload(page)["figures"]


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
    assert "mpstat_cpu unusable (ConversionException); source: vmstat" in page
    data = payload(page)["figures"]
    assert "p-runq" in data and "p-percpu" not in data
    assert data["p-cpu"]["data"][-1]["name"] == "idle"  # fell back to vmstat
    assert 99.0 not in data["p-runq"]["data"][0]["y"]  # rows without a time are left out


def test_disk_panels_leave_out_partitions(tmp_path: Path) -> None:
    con = build(*FULL)
    con.execute(
        "ALTER TABLE iostat_device ADD COLUMN is_partition BOOLEAN;"
        "UPDATE iostat_device SET is_partition = (device = 'sda')"
    )
    data = payload(render(con, tmp_path))["figures"]
    assert {t["name"] for t in data["p-disk"]["data"]} == {"nvme0n1"}


def test_rows_without_time_are_not_charted_and_say_so(tmp_path: Path) -> None:
    con = build(BUNDLE, COLLECTORS, DMESG, PSI)
    con.execute("UPDATE dmesg SET ts = NULL; UPDATE psi SET ts = NULL")
    page = render(con, tmp_path)
    assert "2 classified events have no wall-clock time" in page
    assert "No pressure-stall data: the psi table is absent, empty or untimed." in page
    assert payload(page)["figures"] == {}
    assert "GPU has fallen off the bus" in page  # still listed in the events table
