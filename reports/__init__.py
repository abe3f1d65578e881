"""Hindsight reports: turn a loaded DuckDB store (plus findings) into an incident report.

Reads only from the store, never from raw bundle files.

- :func:`reports.html.render_html` — one self-contained, offline HTML file (issue 2/6).

Modules: ``queries`` (what the store has, defensive selects), ``panels`` (SQL → frames per
chart), ``charts`` (pure frame → plotly figure dict), ``timefmt`` (UTC / host-local times),
``html`` (context + jinja2 templates in ``templates/``, vendored plotly.js in ``static/``).
"""
