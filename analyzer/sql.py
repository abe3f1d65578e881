"""The one way SQL meets data: quoted identifiers, bound values, sealed connections.

A bundle is data, never code (docs/security.md). Three rules, each with its helper here:

- **Values are parameters.** Anything derived from a bundle (file names, cgroup, device
  and process names, parsed text, timestamps) reaches DuckDB as a bound parameter:
  ``con.sql("... WHERE source_file = ?", params=[name])``. Never pasted into the text.
- **Identifiers through** `ident`. Table and column names (ours, or a user's table
  name) are double-quoted with inner quotes doubled; nothing else builds an identifier.
- **The analysis cannot touch the file system.** `seal` turns off DuckDB's external
  access (no ``read_text``/``COPY``/``ATTACH``/``INSTALL``, no replacement scans of
  files) and locks the configuration, so that even a missed injection cannot read or
  write a file or load an extension. `connect_sealed` opens a user's database that way.

`tests/test_sql_safety.py` fails on SQL built by f-string, ``%``, ``+`` or ``.format``
from anything but constants, `ident` calls and reviewed fragments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb


def ident(name: str) -> str:
    """``name`` as a DuckDB identifier: ``a"b`` -> ``"a""b"``.

    >>> ident('cpu_busy_pct'), ident('x"; DROP TABLE t; --')
    ('"cpu_busy_pct"', '"x""; DROP TABLE t; --"')
    """
    if "\x00" in name:
        raise ValueError("NUL byte in an SQL identifier")
    return '"' + name.replace('"', '""') + '"'


_NAMED = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def shown(sql: str, params: Mapping[str, Any]) -> str:
    """``sql`` with its ``$name`` parameters written out as literals, for a person to read
    and paste into ``hindsight query`` (the report's "SQL" notes). Never executed by us.

    >>> shown("SELECT * FROM t WHERE dev = $d AND n IN $ns", {"d": "nvme0'n1", "ns": [1, 2]})
    "SELECT * FROM t WHERE dev = 'nvme0''n1' AND n IN [1, 2]"
    """
    return _NAMED.sub(
        lambda m: _literal(params[m.group(1)]) if m.group(1) in params else m.group(0), sql
    )


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return "'" + value.isoformat() + "'::TIMESTAMPTZ"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"


def seal(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """No file-system access from SQL on ``con``'s database from now on, and no way to
    turn it back on (the configuration is locked). Returns ``con``.

    The database's own file, its WAL and spill files stay usable: DuckDB keeps writing
    them; only SQL-initiated file access (readers, COPY, ATTACH, extensions) is refused.
    """
    con.sql("SET enable_external_access = false")
    con.sql("SET lock_configuration = true")
    return con


def is_sealed(con: duckdb.DuckDBPyConnection) -> bool:
    """True when ``con`` refuses file access and its configuration is locked."""
    rows = con.sql(
        "SELECT name, value FROM duckdb_settings() "
        "WHERE name IN ('enable_external_access', 'lock_configuration')"
    ).fetchall()
    values = {str(k): str(v).lower() for k, v in rows}
    return (
        values.get("enable_external_access") == "false"
        and values.get("lock_configuration") == "true"
    )


def connect_sealed(
    path: Path | None, *, read_only: bool = True, allow_file_access: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open ``path`` (None: an in-memory database) with UTC times and no progress bar,
    sealed unless ``allow_file_access`` (the user's explicit ``--allow-file-access``).

    A sealed connection still reads the database file itself; views in it that read
    other files fail with DuckDB's permission error.
    """
    config = {} if allow_file_access else {"enable_external_access": "false"}
    target = ":memory:" if path is None else str(path)
    con = duckdb.connect(target, read_only=read_only and path is not None, config=config)
    con.sql("SET TimeZone = 'UTC'")
    con.sql("SET enable_progress_bar = false")  # it would mix into a query's output
    if not allow_file_access:
        con.sql("SET lock_configuration = true")
    return con
