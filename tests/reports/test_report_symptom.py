"""The report's Symptom section and the Markdown lead, on a real capture.

Host data: the real-incident library's ``cpu-throttle`` bundle (three quota-throttling
incidents at logged times). The symptom: a latency series written here with
``--app-series`` (high inside the incidents, low outside) — a made-up application, so
this checks that the section shows what the tables hold, not the ranking's accuracy
(that is tests/real/test_symptom_library.py on real service captures).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from analyzer.pipeline import Options, run
from analyzer.symptoms.words import fmt
from reports.render import HOST
from tests.reports.conftest import Analysed
from tests.symptoms.symptom_data import THROTTLE_BUNDLE, latency_csv


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    out = tmp_path_factory.mktemp("symptom")
    done = Analysed(out / "report.html", out / "report.md", out / "store.duckdb")
    options = Options(report=done.report, db=done.db)
    options.markdown = done.markdown
    options.app_series = [latency_csv(out / "latency.csv")]
    run(THROTTLE_BUNDLE, options, HOST)
    return done


def _rows(db: Path, sql: str) -> list[dict]:
    with duckdb.connect(str(db), read_only=True) as con:
        cur = con.sql(sql)
        return [dict(zip(cur.columns, r, strict=True)) for r in cur.fetchall()]


def _payload(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="hs-figures">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def test_the_symptom_section_comes_first_and_shows_the_tables_numbers(analysed: Analysed) -> None:
    html = analysed.report.read_text()
    assert html.index('<section id="symptom">') < html.index('<section id="summary">')
    assert '<a href="#symptom">Symptom</a>' in html
    (sym,) = _rows(analysed.db, "SELECT * FROM symptoms WHERE is_primary")
    windows = _rows(analysed.db, "SELECT * FROM symptom_windows ORDER BY window_id")
    assert len(windows) == 3  # one per injected throttling incident
    section = html[html.index('<section id="symptom">') : html.index('<section id="summary">')]
    assert f"baseline of {fmt(sym['baseline'], 'ms')} in 3 windows" in section
    for w in windows:
        assert f'<td class="num">{fmt(w["level"], "ms")}</td>' in section
        assert f'<td class="num">{fmt(w["peak"], "ms")}</td>' in section


def test_every_cause_is_a_card_with_its_sentence_and_a_chart_of_symptom_and_candidate(
    analysed: Analysed,
) -> None:
    html = analysed.report.read_text()
    causes = _rows(
        analysed.db,
        "SELECT candidate, max(score) AS best FROM symptom_explanations WHERE role = 'cause' "
        "GROUP BY candidate",
    )
    assert causes
    cards = re.findall(r'<div class="card explanation" id="(symptom-\d+-cause-\d+)">', html)
    assert len(cards) == len(causes)
    payload = _payload(html)
    charts = [k for k in payload["evidence"] if k.startswith("ev-symptom-")]
    assert len(charts) == len(causes)
    for k in charts:
        fig = payload["evidence"][k]
        assert len(fig["data"]) == 2  # the symptom above, the candidate below
        assert sum(1 for s in fig["layout"]["shapes"] if s["type"] == "rect") == 3
    (sym_fig,) = [v for k, v in payload["figures"].items() if k.startswith("p-symptom-")]
    assert sym_fig["layout"]["xaxis"]["range"] == payload["range"]  # the common time axis
    weak = _rows(
        analysed.db,
        "SELECT DISTINCT candidate FROM symptom_explanations WHERE candidate NOT IN "
        "(SELECT candidate FROM symptom_explanations WHERE role <> 'weak')",
    )
    section = html[html.index('<section id="symptom">') : html.index('<section id="summary">')]
    for r in weak:  # never shown as an explanation
        assert f"<strong>{r['candidate']}</strong>" not in section


def test_without_an_application_series_there_is_no_symptom_section(sample: Analysed) -> None:
    html = sample.report.read_text()
    assert '<section id="symptom">' not in html and 'href="#symptom"' not in html
    assert "### Symptom" not in sample.markdown.read_text()


def test_the_markdown_ticket_leads_with_the_symptom(analysed: Analysed) -> None:
    text = analysed.markdown.read_text()
    assert text.index("### Symptom") < text.index("### Incidents")
    lead = text[text.index("### Symptom") : text.index("### Incidents")]
    assert lead.count("\n- ") == 3  # one line per window
    assert "1. **" in lead and "Mechanism:" in lead


def test_the_section_renders_in_a_real_browser(analysed: Analysed, chromium) -> None:
    with chromium.open(analysed.report, width=1400, height=900) as (page, load):
        assert load.rendered and not load.errors, load.errors
        plotted = set(load.plots)
        assert any(k.startswith("p-symptom-") for k in plotted)
        assert sum(k.startswith("ev-symptom-") for k in plotted) >= 1
        box = page.locator("#symptom").bounding_box()
        assert box is not None and box["height"] > 600
        assert page.locator("#symptom table.symptom-windows tbody tr").count() == 3


def test_a_real_service_capture_shows_its_injected_cause_first_in_the_browser(
    tmp_path: Path, chromium
) -> None:
    """samples/real/svc-quota: the test service's own histogram, quota throttling injected
    three times; the section names throttling as the first cause, in the real browser."""
    bundle = THROTTLE_BUNDLE.with_name("svc-quota.tgz")
    done = Analysed(tmp_path / "r.html", tmp_path / "r.md", tmp_path / "s.duckdb")
    options = Options(report=done.report, db=done.db)
    run(bundle, options, HOST)
    with chromium.open(done.report, width=1400, height=900) as (page, load):
        assert load.rendered and not load.errors, load.errors
        first = page.locator("#symptom .card.explanation").first
        assert "Throttled time per second" in first.locator("strong").inner_text()
        rows = page.locator("#symptom table.symptom-windows tbody tr")
        long = [r for r in rows.all() if int(r.locator("td").nth(2).inner_text()) >= 30]
        assert len(long) == 3  # the three injected quota windows
        assert all("Throttled time" in r.locator("td").nth(6).inner_text() for r in long)
