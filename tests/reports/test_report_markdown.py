"""``analyze --md``: a Markdown summary for a ticket body, escaped, bounded, same facts as the HTML."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLE
from report_stores import BUNDLE, COLLECTORS, FULL, HOSTILE, build
from typer.testing import CliRunner

from analyzer.cli import app
from reports.markdown import MAX_CHARS, md, render_markdown


@pytest.fixture(scope="module")
def text() -> str:
    return render_markdown(build(*FULL), report_name="gpu7.report.html")


def test_markdown_leads_with_the_verdict(text: str) -> None:
    first = text.splitlines()[0]
    assert first.startswith("## Hindsight: gpu7.example — CRITICAL: Memory pressure → oom kill")
    assert "80 GPU-seconds lost" in first


def test_markdown_ranks_incidents_with_windows_and_impact(text: str) -> None:
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| # | severity | incident | window (UTC) | impact |"
    assert rows[1].startswith(
        "| 1 | **CRITICAL** | Memory pressure → oom kill | 2024-05-01 12:03:00 → 12:05:00 UTC (2 min) |"
    )
    assert "80 GPU-seconds lost; 1 processes killed" in rows[1]
    assert rows[2].startswith("| 2 | **MINOR** | Disk saturated |")
    assert "Findings: `MEMORY_PRESSURE`, `OOM_KILL`." in text


def test_markdown_keeps_remediation_commands_as_code(text: str) -> None:
    assert "- **MEMORY\\_PRESSURE**: Lower vm.swappiness: `sysctl -w vm.swappiness=10`" in text
    assert "`echo 64G > /sys/fs/cgroup/job/memory.max`" in text


def test_markdown_lists_configuration_deviations_and_coverage(text: str) -> None:
    assert "### Configuration deviations (training host)" in text
    assert "- vm.swappiness: 60 (recommended ≤ 10); fix: `sysctl -w vm.swappiness=10`" in text
    assert "**Coverage:** 1 of 3 input files parsed fully" in text
    assert "cannot conclude on cpu\\_throttle (needs cgroup\\_cpu with CFS counters)" in text
    assert text.rstrip().endswith("_Full report: gpu7.report.html (Hindsight 0.1.0)._")


def test_markdown_escapes_bundle_strings() -> None:
    con = build(BUNDLE, COLLECTORS)
    con.execute(f"UPDATE bundle SET host = '{HOSTILE} [x](javascript:alert(1)) *b*'")
    first = render_markdown(con).splitlines()[0]
    assert "<script" not in first and "&lt;/script&gt;&lt;script&gt;" in first
    assert "\\[x\\](javascript:alert(1))" in first and "\\*b\\*" in first
    assert md("a\nb | c") == "a b \\| c"


def test_markdown_without_detectors_does_not_claim_an_all_clear() -> None:
    text = render_markdown(build(BUNDLE, COLLECTORS))
    assert "No findings (detectors not run)." in text
    assert "Detectors were not run: nothing can be concluded about incidents." in text


def test_markdown_is_bounded_for_a_ticket_body() -> None:
    con = build(*FULL)
    con.execute(
        "INSERT INTO findings SELECT 100 + i, 'OOM_KILL', 'oom_kill', repeat('long title ', 30),"
        " 'major', start_ts, end_ts, 1, repeat('words ', 200), '{}', NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL, 100 + i FROM findings, range(200) t(i) WHERE finding_id = 2"
    )
    text = render_markdown(con)
    assert len(text) <= MAX_CHARS
    assert "more incidents in the full report" in text or "(truncated; see the full report)" in text


def test_analyze_writes_markdown_and_audits_the_requested_role(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(
        app,
        [
            "analyze",
            str(SAMPLE),
            "-q",
            "-o",
            str(out),
            "--md",
            str(tmp_path / "t.md"),
            "--role",
            "inference",
        ],
    )
    assert result.exit_code == 0, result.output
    md_text = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert "`CHECKPOINT_STALL` ×3" in md_text
    assert "Audited as an <strong>inference</strong> host (set with --role)" in out.read_text(
        encoding="utf-8"
    )
    assert CliRunner().invoke(app, ["analyze", str(SAMPLE), "--role", "bogus"]).exit_code == 2
