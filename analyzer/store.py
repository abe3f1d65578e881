"""Stage 4, *store*: one DuckDB database per analysis (in memory or the ``--db`` file).

One table per source entity, named and typed as the parsers declare in their ``TABLES``
(see docs/tables.md), plus the store's own ``bundle`` and ``collectors`` tables declared
here. Every source table also gets a ``source_file`` column (the bundle-relative path of
the input file each row came from) so every number traces back to its file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from analyzer import sqlmacros
from analyzer.cleanup import register_cleanup, unregister_cleanup
from analyzer.findings import CHAINS, DETECTOR_STATUS, FINDING_EVIDENCE, FINDING_LOG_LINES, FINDINGS
from analyzer.parsers import PARSERS
from analyzer.parsers.base import TS, Table, table
from analyzer.signals import SIGNAL_SOURCES, SIGNALS
from analyzer.sql import ident
from analyzer.symptoms.schema import TABLES as SYMPTOM_TABLES

#: DuckDB's buffer budget for a ``--db`` file (the in-memory default is 80 % of RAM);
#: beyond it DuckDB spills to ``PATH.spill`` beside the database (docs/limits.md).
FILE_DB_MEMORY_LIMIT = "512MB"

#: A streamed file's rows are written once this many are waiting (or BULK_BYTES of them):
#: DuckDB appends rows in groups of 122 880, and an INSERT of fewer rows costs 2-4x the
#: CPU per row of one that fills several groups (docs/performance.md).
BULK_ROWS = 1_000_000
BULK_BYTES = 64 << 20

#: The stamps a row may carry (UTC, [from, to)): a broken RTC gives 1970, nothing real is
#: from 2100 on; a row outside is dropped and counted in its file's coverage.
TS_RANGE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))

SOURCE_FILE_DOC = "bundle-relative path of the input file the row came from (added by the store)"

BUNDLE = table(
    "One row describing the analysed bundle and the capture it holds.",
    ("name", pl.String, "", "bundle name (archive or directory name without extension)"),
    ("source_path", pl.String, "", "path of the bundle as given to analyze"),
    ("host", pl.String, "", "host name from the manifest, else from tool banners"),
    ("kernel", pl.String, "", "kernel release"),
    ("os", pl.String, "", "operating system (os-release PRETTY_NAME)"),
    ("arch", pl.String, "", "machine architecture"),
    ("cpus", pl.Int32, "count", "logical CPUs"),
    ("start_utc", TS, "UTC", "capture start (manifest, else first timestamp seen)"),
    ("end_utc", TS, "UTC", "capture end (manifest, else last timestamp seen)"),
    ("interval_s", pl.Float64, "s", "sampling interval of the time-series collectors"),
    ("timezone", pl.String, "", "the host's time zone (IANA name) when known"),
    ("capture_version", pl.String, "", "version of the capture script"),
    ("format_version", pl.Int32, "", "bundle format version from the manifest"),
    ("manifest_present", pl.Boolean, "", "whether a valid manifest.json was found"),
    ("interrupted", pl.Boolean, "", "the capture was interrupted (SIGINT/SIGTERM)"),
    ("history_start_utc", TS, "UTC", "earliest row from the host's sysstat files (history/)"),
    ("trigger", pl.String, "", "flight recorder: what cut this bundle (trigger, SIGUSR1, --dump)"),
    ("trigger_utc", TS, "UTC", "flight recorder: when the trigger fired (the incident's time)"),
    ("refused_members", pl.Int32, "count", "archive members refused by the safe reader"),
    ("notes", pl.String, "", "manifest and bundle notes, one per line"),
    ("analyzer_version", pl.String, "", "Hindsight version that made this database"),
    ("analyzed_at", TS, "UTC", "when the analysis ran"),
)

COLLECTORS = table(
    "One row per file in the bundle (and per refused archive member): what it was and how much of it was used.",
    ("file", pl.String, "", "bundle-relative path"),
    ("collector", pl.String, "", "collector name from the manifest, else the file stem"),
    ("tool", pl.String, "", "tool identified from the content (NULL when unrecognised)"),
    (
        "status",
        pl.String,
        "",
        "parsed | partial | empty | unrecognised | failed | refused | parser pending | missing | skipped | timeout | metadata",
    ),
    ("bytes", pl.Int64, "bytes", "file size"),
    ("lines_total", pl.Int64, "lines", "lines in the file"),
    ("lines_parsed", pl.Int64, "lines", "lines that became rows"),
    (
        "lines_structure",
        pl.Int64,
        "lines",
        "banners, headers, blank lines and other non-data output of the tool",
    ),
    ("lines_skipped", pl.Int64, "lines", "lines not used, each counted under a reason"),
    ("parsed_pct", pl.Float64, "%", "lines_parsed / (lines_parsed + lines_skipped) × 100"),
    ("skip_reasons", pl.String, "", "JSON object: reason -> line count (skipped and structure)"),
    ("notes", pl.String, "", "parser notes (derived timestamps, assumed units...), one per line"),
    ("stderr_tail", pl.String, "", "last lines of the collector's .err file, when not empty"),
    ("exit_code", pl.Int32, "", "collector exit status (manifest or .status file)"),
    (
        "manifest_status",
        pl.String,
        "",
        "status the capture recorded (ok, missing, failed, skipped, timeout)",
    ),
    ("reason", pl.String, "", "why the file was not (fully) used, or the capture's reason"),
    ("tables", pl.String, "", "comma-separated tables the file contributed rows to"),
)

STORE_TABLES: dict[str, Table] = {
    "bundle": BUNDLE,
    "collectors": COLLECTORS,
    "signals": SIGNALS,
    "signal_sources": SIGNAL_SOURCES,
    "findings": FINDINGS,
    "finding_evidence": FINDING_EVIDENCE,
    "finding_log_lines": FINDING_LOG_LINES,
    "chains": CHAINS,
    "detector_status": DETECTOR_STATUS,
    **SYMPTOM_TABLES,  # app_series and the symptom stage's (analyzer/symptoms/schema.py)
}


def declared_tables() -> dict[str, Table]:
    """Every table the analyzer can create, by name (store's own and all parsers')."""
    tables: dict[str, Table] = dict(STORE_TABLES)
    for module in PARSERS.values():
        for name, t in module.TABLES.items():
            tables.setdefault(name, t)
    return tables


#: ``--db`` files are written in DuckDB 1.0's storage format (header version 64)
STORAGE_COMPATIBILITY = "v1.0.0"


class Store:
    """A DuckDB database holding one analysis."""

    def __init__(self, path: Path | None = None) -> None:
        """A new database in the file ``path`` (which must not exist: `analyze --db`
        builds at a temporary name, `analyzer.outputs`), or in memory. DuckDB spills to
        ``PATH.spill`` (in memory: a directory in the temporary directory), created only
        when needed and removed by `close`."""
        if path is not None and os.path.lexists(path):
            raise FileExistsError(f"{path}: the store only creates new databases")
        self.path = path
        name = f"hindsight-spill-{os.getpid()}-{secrets.token_hex(4)}"
        spill = Path(f"{path}.spill") if path else Path(tempfile.gettempdir(), name)
        self.spill = register_cleanup(spill)
        config = {"temp_directory": str(self.spill)}
        if path is not None:  # a file database can spill and evict: keep RSS bounded
            config["memory_limit"] = FILE_DB_MEMORY_LIMIT
            # the oldest storage format current clients read (DuckDB >= 1.0: version 64),
            # not this library's newest, which DuckDB 1.x CLIs refuse (docs/tables.md)
            config["storage_compatibility_version"] = STORAGE_COMPATIBILITY
        self.con = duckdb.connect(str(path) if path else ":memory:", config=config)
        self.con.sql("SET TimeZone = 'UTC'")
        # The progress bar writes to the process's stdout and would corrupt --json -.
        self.con.sql("SET enable_progress_bar = false")
        sqlmacros.install(self.con)
        self._tables = declared_tables()
        self._created: set[str] = set()
        self._lock = threading.Lock()
        self._local = threading.local()  # one DuckDB cursor per parse thread
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._pending: dict[tuple[str, str], list[Any]] = {}  # (table, file) -> Arrow parts
        self._pending_lock = threading.Lock()
        self._dropped: dict[tuple[str, str], int] = {}  # (table, file) -> rows out of TS_RANGE

    def write(self, name: str, frame: pl.DataFrame | pl.LazyFrame, source_file: str | None) -> int:
        """Append ``frame`` to table ``name`` after conforming it to the declared schema.

        Returns the number of rows written. The rows are visible to queries at once.
        """
        arrow = self._arrow(name, frame, source_file)
        with self._lock:  # the main connection; parse threads use their own cursors
            return self._insert(self.con, name, arrow, source_file)

    def append(self, name: str, frame: pl.DataFrame | pl.LazyFrame, source_file: str) -> int:
        """Like `write` for the rows of a file being parsed: they wait, per table and file,
        until enough have come for one bulk insert or `flush(source_file)` is called.

        Safe to call from several threads at once for different files (each thread
        inserts through its own DuckDB cursor). Returns the number of rows taken.
        """
        arrow = self._arrow(name, frame, source_file)
        with self._pending_lock:
            parts = self._pending.setdefault((name, source_file), [])
        parts.append(arrow)
        if (
            sum(p.num_rows for p in parts) >= BULK_ROWS
            or sum(p.nbytes for p in parts) >= BULK_BYTES
        ):
            self._flush_table(name, source_file)
        return arrow.num_rows

    def flush(self, source_file: str) -> None:
        """Insert every row of ``source_file`` still waiting (call when its parse ends)."""
        with self._pending_lock:
            keys = [key for key in self._pending if key[1] == source_file]
        for name, src in keys:
            self._flush_table(name, src)

    def _flush_table(self, name: str, source_file: str) -> None:
        with self._pending_lock:
            parts = self._pending.pop((name, source_file), [])
        if parts:
            table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
            del parts
            self._insert(self._cursor(), name, table, source_file)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            with self._lock:
                cursor = self.con.cursor()
                self._cursors.append(cursor)
            self._local.cursor = cursor
        return cursor

    def _arrow(self, name: str, frame: pl.DataFrame | pl.LazyFrame, source: str | None) -> Any:
        declared = self._tables.get(name)
        if declared is None:
            raise KeyError(f"table {name!r} is not declared by any parser")
        df = declared.conform(frame).collect(engine="streaming")
        if source is not None and "ts" in df.columns:
            df = self._plausible(name, df, source)
        # String views pass to DuckDB as they are (the default converts every string).
        return df.to_arrow(compat_level=pl.CompatLevel.newest())

    def _plausible(self, name: str, df: pl.DataFrame, source: str) -> pl.DataFrame:
        """``df`` without rows stamped outside `TS_RANGE` (counted per file: `dropped`)."""
        lo, hi = TS_RANGE
        bad = (pl.col("ts") < lo) | (pl.col("ts") >= hi)
        n = int(df.select(bad.sum()).item() or 0)
        if not n:
            return df
        with self._pending_lock:
            key = (name, source)
            self._dropped[key] = self._dropped.get(key, 0) + n
        return df.filter(~bad.fill_null(False))

    def dropped(self, source_file: str) -> dict[str, int]:
        """Rows of ``source_file`` left out per table because their ``ts`` lies outside
        `TS_RANGE` (a broken clock or a garbled stamp: no later stage can place them)."""
        with self._pending_lock:
            return {t: n for (t, f), n in self._dropped.items() if f == source_file}

    def _insert(
        self, con: duckdb.DuckDBPyConnection, name: str, arrow: Any, source_file: str | None
    ) -> int:
        con.register("_incoming", arrow)
        try:
            own = name in STORE_TABLES  # the store's own tables have no source_file
            extra = "" if own else ", ?::VARCHAR AS source_file"
            params = None if own else [source_file]
            if name in self._created:
                con.sql(f"INSERT INTO {ident(name)} SELECT *{extra} FROM _incoming", params=params)
            else:  # one parse at a time writes a table (parse_stage: per-table order)
                con.sql(
                    f"CREATE TABLE {ident(name)} AS SELECT *{extra} FROM _incoming", params=params
                )
                self._created.add(name)
        finally:
            con.unregister("_incoming")
        return arrow.num_rows

    def discard(self, name: str, source_file: str) -> int:
        """Delete the rows of table ``name`` that came from ``source_file`` (written or
        still waiting); returns how many."""
        with self._pending_lock:
            waiting = sum(p.num_rows for p in self._pending.pop((name, source_file), []))
        if name not in self._created or name in STORE_TABLES:
            return waiting
        rows = (
            self._cursor()
            .sql(
                f"DELETE FROM {ident(name)} WHERE source_file = ? RETURNING 1", params=[source_file]
            )
            .fetchall()
        )
        return waiting + len(rows)

    def tables(self) -> list[str]:
        return sorted(self._created)

    def close(self) -> None:
        """Close the database (a file one checkpointed: no ``.wal`` is left) and remove
        its spill directory."""
        for cursor in self._cursors:
            cursor.close()
        if self.path is not None:
            with contextlib.suppress(duckdb.Error):  # `Outputs.commit` refuses a left WAL
                self.con.sql("CHECKPOINT")
        self.con.close()
        shutil.rmtree(self.spill, ignore_errors=True)
        unregister_cleanup(self.spill)
