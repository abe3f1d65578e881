"""What an analysed store holds: its tables, their columns and types, their row counts.

Readers of a store (the configuration audit, the report's queries) never assume a table
or column exists: a collector may have been missing or failed, and columns differ between
analyzer versions. `Catalog` asks DuckDB's catalog once and answers from that.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analyzer.sql import ident


class Catalog:
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
        """The store's table names, sorted."""
        return sorted(self._columns)

    def has(self, table: str) -> bool:
        """True when ``table`` exists (rows or not)."""
        return table in self._columns

    def columns(self, table: str) -> list[str]:
        """The columns of ``table`` in table order (empty when it does not exist)."""
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

    def scalar(self, q: str, params: list[Any] | dict[str, Any] | None = None) -> Any:
        """The first value of ``q``'s first row (None when there is no row)."""
        rows = self.con.sql(q, params=params).fetchall()
        return rows[0][0] if rows else None

    def column_type(self, table: str, column: str) -> str:
        """The upper-case DuckDB type of ``table.column`` ('' when there is no such column)."""
        return self._types.get((table, column), "")
