"""Read-only helpers over the DuckDB store for the report renderers.

The report never parses raw files: everything it shows comes through these functions. Tables
may be absent (a collector was missing or failed) and columns may differ between analyzer
versions, so every query first asks the catalog what exists and selects only that
(`Store` is the analyzer's `analyzer.catalog.Catalog` plus the report's reads).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from analyzer.catalog import Catalog
from analyzer.sql import ident


class Store(Catalog):
    """The catalog plus the report's reads: times as epoch milliseconds, rows as dicts."""

    def expr(self, table: str, column: str) -> str:
        """Select expression for a column: timestamps become epoch milliseconds (UTC)."""
        if self.column_type(table, column).startswith("TIMESTAMP"):
            return f"epoch_ms({ident(column)}) AS {ident(column)}"
        return ident(column)

    def frame(
        self,
        table: str,
        wanted: list[str],
        *,
        where: str = "",
        order: str = "",
        limit: int | None = None,
        x: bool = True,
        params: dict[str, Any] | None = None,
    ) -> pl.DataFrame:
        """Select the existing ``wanted`` columns of ``table`` as a polars frame.

        With ``x`` (and a ``ts`` column) an ``x`` column of epoch milliseconds is added and
        rows without a time are left out: charts take numbers, never datetimes.
        ``where``/``order`` are SQL fragments written in this package, never data: values
        go in ``params`` (``$name`` in the fragment).
        """
        cols = [self.expr(table, c) for c in self.present(table, wanted)]
        if x and "ts" in self.columns(table):
            cols.insert(0, 'epoch_ms("ts") AS x')
            where = f"({where}) AND ts IS NOT NULL" if where else "ts IS NOT NULL"
        if not cols:
            return pl.DataFrame()
        q = f"SELECT {', '.join(cols)} FROM {ident(table)}"
        if where:
            q += f" WHERE {where}"
        if order:
            q += f" ORDER BY {order}"
        if limit is not None:
            q += f" LIMIT {int(limit)}"
        return self.con.sql(q, params=params).pl()

    def bundle(self) -> dict[str, Any]:
        """The single ``bundle`` row as a dict (empty when the table is absent or empty).

        Timestamps come back as epoch milliseconds (UTC).
        """
        if not self.usable("bundle"):
            return {}
        cols = ", ".join(self.expr("bundle", c) for c in self.columns("bundle"))
        rel = self.con.sql(f"SELECT {cols} FROM bundle LIMIT 1")
        row = rel.fetchall()[0]
        return dict(zip(rel.columns, row, strict=True))

    def records(
        self,
        table: str,
        wanted: list[str],
        *,
        where: str = "",
        order: str = "",
        limit: int | None = None,
        params: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Rows of ``table`` (existing ``wanted`` columns) as dicts; missing ones are None.

        Timestamps come back as epoch milliseconds (UTC). ``where``/``order``/``params`` as
        in `frame`.
        """
        cols = self.present(table, wanted)
        if not cols or not self.rows(table):
            return []
        q = f"SELECT {', '.join(self.expr(table, c) for c in cols)} FROM {ident(table)}"
        if where:
            q += f" WHERE {where}"
        if order:
            q += f" ORDER BY {order}"
        if limit is not None:
            q += f" LIMIT {int(limit)}"
        rel = self.con.sql(q, params=params)
        out = []
        for row in rel.fetchall():
            rec: dict[str, Any] = dict.fromkeys(wanted)
            rec.update(zip(rel.columns, row, strict=True))
            out.append(rec)
        return out


#: characters of one raw line (a log message) the page shows; the tables keep all of it
MAX_TEXT_CHARS = 2000


def clip(text: str | None, table: str) -> str:
    """At most `MAX_TEXT_CHARS` of ``text``, saying how much was left out and where it is."""
    text = text or ""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return f"{text[:MAX_TEXT_CHARS]}… [{len(text) - MAX_TEXT_CHARS:,} more characters in {table}]"


def skip_reasons(raw: str | None) -> list[tuple[str, int | str]]:
    """Decode ``collectors.skip_reasons`` (JSON reason -> count); tolerate junk."""
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return [(str(raw), "")]
    if isinstance(value, dict):
        return sorted(((str(k), v) for k, v in value.items()), key=lambda kv: str(kv[0]))
    return [(str(value), "")]
