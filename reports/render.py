"""The render step: which renderer writes each document of ``analyze``, ``diff`` and ``fleet``.

The analysis modules return data and never import ``reports``; the CLI (the composition
root) hands them these renderers:

- `HOST` → `analyzer.pipeline.run`: the HTML report (`reports.html`) and the Markdown
  ticket summary (`reports.markdown`);
- `DIFF` → `analyzer.diff.run_diff`: the before/after page (`reports.diff_html`) and its
  Markdown (`reports.diff_text`);
- `FLEET` → `analyzer.fleet.run_fleet`: the overview (`reports.fleet_html`) and each
  host's report (`reports.html.render_html`, run in the worker processes).

Example::

    from analyzer.pipeline import Options, run
    from reports.render import HOST

    run(Path("bundle.tgz"), Options(report=Path("bundle.report.html")), HOST)
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from analyzer.diff import DiffRenderers, DiffResult
from analyzer.fleet import FleetRenderers, FleetResult
from analyzer.pipeline import Options, Renderers
from reports import diff_html, diff_text, fleet_html, html, markdown

# Each renderer is looked up in its module when called, so that a test can replace one.


def host_report(con: duckdb.DuckDBPyConnection, options: Options) -> str:
    """The HTML report of the analysed store behind ``con`` (``analyze -o``)."""
    return html.render_string(con, role=options.role)


def host_markdown(con: duckdb.DuckDBPyConnection, options: Options) -> str:
    """The Markdown ticket summary (``analyze --md``), naming the HTML report if written."""
    name = options.report.name if options.report is not None else None
    return markdown.render_markdown(con, role=options.role, report_name=name)


def diff_page(result: DiffResult) -> str:
    """The before/after page (``hindsight diff -o``)."""
    return diff_html.diff_html_text(result)


def diff_markdown(result: DiffResult) -> str:
    """The diff as Markdown (``hindsight diff --md``)."""
    return diff_text.markdown(result)


def fleet_page(result: FleetResult, out_path: Path) -> str:
    """The fleet overview (``hindsight fleet -o``), host links relative to ``out_path``."""
    return fleet_html.fleet_html_text(result, out_path)


def fleet_host_report(con: duckdb.DuckDBPyConnection, out_path: Path) -> Path:
    """Write one host's report (``hindsight fleet --host-reports``; runs in a worker)."""
    return html.render_html(con, out_path)


HOST = Renderers(report=host_report, markdown=host_markdown)
DIFF = DiffRenderers(html=diff_page, markdown=diff_markdown)
FLEET = FleetRenderers(page=fleet_page, host_report=fleet_host_report)
