"""One Prometheus / OpenMetrics page -> sample rows, with `prometheus_client`'s parsers.

Private helper of `analyzer.parsers.app_metrics`. A page that ends with ``# EOF`` is
OpenMetrics (``prometheus_client.openmetrics.parser``: exemplars, ``_created``,
``# UNIT``); when that strict parser refuses it, and for every other page, the
Prometheus text format parser (``prometheus_client.parser``) reads it. A page that
neither accepts yields no rows and the first parser's error: a bad scrape costs only
itself.

Two things are put back as the page has them: the text parser renames the samples of a
``# TYPE x counter`` family ``x_total`` (undone unless the declared name ends in
``_total``), and it has no exemplars (the OpenMetrics parser keeps them). Labels become
one canonical string (`label_string`); ``le`` of histogram buckets and ``quantile`` of
summary samples go to columns of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

_TYPE_COUNTER = re.compile(r"^#\s+TYPE\s+(\S+)\s+counter\s*$")
_BUCKETED = {"histogram", "gaugehistogram"}
COLUMNS = (
    "family",
    "metric",
    "type",
    "labels",
    "le",
    "quantile",
    "value",
    "exemplar_labels",
    "exemplar_value",
)


@dataclass
class Page:
    """The samples of one page as columns (`COLUMNS`), the format read, the line
    counts (``comments`` and ``blank`` are structure, ``sample_lines`` data) and the
    parser's error when it refused the page."""

    format: str = "prometheus"
    rows: dict[str, list] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    comments: int = 0
    blank: int = 0
    sample_lines: int = 0
    error: str | None = None

    @property
    def n_samples(self) -> int:
        return len(self.rows["value"])


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def label_string(labels: dict[str, str], drop: str | None = None) -> str:
    """``{b: 'x"y', a: '1'}`` -> ``a="1",b="x\\"y"``: sorted by name, values escaped as
    in the exposition format (``\\\\``, ``\\"``, ``\\n``); ``drop`` leaves one name out."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()) if k != drop)


def _bound(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def parse_page(lines: list[str]) -> Page:
    """Parse the page ``lines`` (see the module docstring)."""
    page = Page()
    declared_plain: set[str] = set()  # '# TYPE x counter' with x not ending in _total
    eof = False
    for line in lines:
        s = line.strip()
        if not s:
            page.blank += 1
        elif s.startswith("#"):
            page.comments += 1
            eof = eof or s == "# EOF"
            m = _TYPE_COUNTER.match(s)
            if m and not m.group(1).endswith("_total"):
                declared_plain.add(m.group(1))
        else:
            page.sample_lines += 1
    text = "\n".join(lines) + "\n"
    families, error = None, None
    if eof:
        families, error = _families(openmetrics_families, text)
        page.format = "openmetrics"
    if families is None:
        families, err2 = _families(text_families, text)
        error = error or err2
        page.format = "prometheus" if families is not None else page.format
    if families is None:
        page.error = error
        return page
    _rows(page, families, declared_plain if page.format == "prometheus" else set())
    return page


def _families(parser, text: str) -> tuple[list | None, str | None]:
    try:
        return list(parser(text)), None
    except Exception as e:  # the parsers raise ValueError, KeyError, IndexError...
        return None, f"{type(e).__name__}: {str(e)[:200]}" if str(e) else type(e).__name__


def _rows(page: Page, families: list, declared_plain: set[str]) -> None:
    r = page.rows
    for fam in families:
        kind = fam.type
        for s in fam.samples:
            name = s.name
            if kind == "counter" and fam.name in declared_plain and name == fam.name + "_total":
                name = fam.name  # the text parser's OpenMetrics renaming, undone
            drop = None
            le = q = None
            if kind in _BUCKETED and name.endswith("_bucket"):
                le, drop = _bound(s.labels.get("le")), "le"
            elif kind == "summary" and "quantile" in s.labels:
                q, drop = _bound(s.labels.get("quantile")), "quantile"
            ex = getattr(s, "exemplar", None)
            r["family"].append(fam.name)
            r["metric"].append(name)
            r["type"].append(kind)
            r["labels"].append(label_string(s.labels, drop))
            r["le"].append(le)
            r["quantile"].append(q)
            r["value"].append(float(s.value))
            r["exemplar_labels"].append(label_string(ex.labels) if ex else None)
            r["exemplar_value"].append(float(ex.value) if ex else None)
