"""Hindsight reports: turn a loaded DuckDB store (plus findings) into an incident report.

Reads only from the store, never from raw bundle files (section by section: docs/report.md).

- :func:`reports.html.render_html` — one self-contained, offline HTML file.
- :func:`reports.markdown.render_markdown` — the ticket-body summary (``analyze --md``).

Modules: ``queries`` (what the store has, defensive selects); ``incidents`` (findings,
chains, impact, verdict); ``findings_view`` (finding cards); ``panels`` / ``panels_host`` /
``panels_devices`` (SQL → figures per time-aligned panel); ``downsample`` (min/max per
bucket, in polars and in DuckDB); ``charts`` / ``charts_findings`` (pure frame → plotly
figure dicts); ``audit`` / ``audit_facts`` / ``audit_rules`` (host configuration audit);
``coverage`` (collectors, reproduce-SQL, manifest); ``timefmt`` (UTC / host-local times);
``html`` (context + jinja2 templates in ``templates/``, vendored plotly.js in ``static/``);
``browser`` (headless Chromium harness), ``bench`` (size/render-time measurement),
``screenshot`` (docs/img/report.png).
"""
