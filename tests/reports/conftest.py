"""Shared fixtures: the real H200 sample analysed once per test session (report, Markdown, db);
the real Chromium (``chromium``) is tests/conftest.py's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from analyzer.pipeline import Options, run
from reports.render import HOST

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"


@dataclass
class Analysed:
    report: Path
    markdown: Path
    db: Path


def analyse(bundle: Path, out: Path) -> Analysed:
    """Run the real pipeline on ``bundle`` writing the report, the Markdown and the database."""
    done = Analysed(out / "report.html", out / "report.md", out / "store.duckdb")
    options = Options(report=done.report, db=done.db)
    options.markdown = done.markdown
    run(bundle, options, HOST)
    return done


@pytest.fixture(scope="session")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    return analyse(SAMPLE, tmp_path_factory.mktemp("h200"))
