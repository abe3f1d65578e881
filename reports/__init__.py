"""Hindsight reports: turn a loaded DuckDB store (plus findings) into an incident report.

Reads only from the store, never from raw bundle files (section by section: docs/report.md).

- :func:`reports.html.render_html` — one self-contained, offline HTML file.
- :func:`reports.markdown.render_markdown` — the ticket-body summary (``analyze --md``).

Modules: ``render`` (the render step: which renderer writes each document; the CLI hands
it to the analysis, which never imports this package); ``queries`` (what the store has,
defensive selects); ``incidents`` (findings, chains, impact, verdict); ``findings_view``
(finding cards); ``panels`` / ``panels_host`` / ``panels_devices`` (SQL → figures per
time-aligned panel) and ``panel_registry`` (their page order); ``downsample`` (min/max per
bucket, in polars and in DuckDB); ``charts`` / ``charts_findings`` (pure frame → plotly
figure dicts); ``coverage`` (collectors, reproduce-SQL, manifest); ``timefmt`` (UTC /
host-local times); ``html`` (context + jinja2 templates in ``templates/``, vendored
plotly.js in ``static/``); ``diff_html`` / ``diff_text`` (the ``diff`` page and Markdown);
``fleet_html`` (the ``fleet`` overview); ``browser`` (headless Chromium harness). The host
configuration audit the report shows is judged in `analyzer.audit`; the size/render-time
benchmark and the screenshot tool are ``tests.tools.bench`` / ``tests.tools.screenshot``.
"""
