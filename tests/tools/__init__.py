"""Developer tools that are not shipped: ``python -m tests.tools.bench`` (the report's size
and render time) and ``python -m tests.tools.screenshot`` (docs/img/report.png)."""
