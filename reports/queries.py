"""Read-only helpers over the DuckDB store for the report renderers.

The report never parses raw files: everything it shows comes through these functions. Tables
may be absent (a collector was missing or failed) and columns may differ between analyzer
versions, so every query first asks the catalog what exists and selects only that.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from analyzer.sql import ident


class Store:
    """A thin, cached view of which tables and columns a store has."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        rows = con.sql(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_schema = current_schema() "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        self._columns: dict[str, list[str]] = {}
        self._types: dict[tuple[str, str], str] = {}
        for table, column, dtype in rows:
            self._columns.setdefault(str(table), []).append(str(column))
            self._types[(str(table), str(column))] = str(dtype).upper()
        self._counts: dict[str, int] = {}

    @property
    def tables(self) -> list[str]:
        return sorted(self._columns)

    def has(self, table: str) -> bool:
        """True when ``table`` exists (rows or not)."""
        return table in self._columns

    def columns(self, table: str) -> list[str]:
        return list(self._columns.get(table, []))

    def rows(self, table: str) -> int:
        """Row count of ``table``; 0 when it does not exist."""
        if not self.has(table):
            return 0
        if table not in self._counts:
            (n,) = self.con.sql(f"SELECT count(*) FROM {ident(table)}").fetchall()[0]
            self._counts[table] = int(n)
        return self._counts[table]

    def timed_rows(self, table: str) -> int:
        """Rows of ``table`` with a non-NULL ``ts`` (a parser may not place every sample)."""
        if "ts" not in self.columns(table):
            return 0
        key = table + "\0ts"
        if key not in self._counts:
            q = f"SELECT count(ts) FROM {ident(table)}"
            self._counts[key] = int(self.con.sql(q).fetchall()[0][0])
        return self._counts[key]

    def usable(self, table: str, *needed: str) -> bool:
        """True when ``table`` exists, has rows and has every column in ``needed``.

        When ``ts`` is needed, rows must have a time: untimed rows cannot be charted.
        """
        have = set(self.columns(table))
        if not all(c in have for c in needed):
            return False
        return (self.timed_rows(table) if "ts" in needed else self.rows(table)) > 0

    def present(self, table: str, wanted: list[str]) -> list[str]:
        """The subset of ``wanted`` that ``table`` has, in the order given."""
        have = set(self.columns(table))
        return [c for c in wanted if c in have]

    def expr(self, table: str, column: str) -> str:
        """Select expression for a column: timestamps become epoch milliseconds (UTC)."""
        if self._types.get((table, column), "").startswith("TIMESTAMP"):
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

    def scalar(self, q: str, params: list[Any] | dict[str, Any] | None = None) -> Any:
        """The first value of ``q``'s first row (None when there is no row)."""
        rows = self.con.sql(q, params=params).fetchall()
        return rows[0][0] if rows else None

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
