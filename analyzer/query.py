"""`hindsight query` (SQL over analysed tables) and `hindsight export` (every table as Parquet).

Sources `open_source` accepts, told apart by content, not by name:

- a DuckDB database written by ``analyze --db`` (its file header says ``DUCK``): opened
  read-only;
- a directory written by ``hindsight export`` (holds ``_hindsight_export.json``): each
  ``<table>.parquet`` becomes a view of the same name;
- a fleet dataset written by ``hindsight fleet`` (holds ``_hindsight_fleet.json``): each
  table is a view over ``<table>/host=<host>/*.parquet`` with ``host`` as a VARCHAR column;
- anything else is a bundle: it is analysed into a temporary DuckDB file first (removed
  afterwards).

Output formats of `write_result`: ``table`` (aligned text for a terminal; control
characters shown as ``\\xNN`` so a hostile string cannot drive the terminal), ``csv``
(RFC 4180 with a header; times ISO 8601 UTC), ``json`` (an array of objects), ``parquet``
(needs a file). NULL is empty in CSV, ``null`` in JSON, ``NULL`` in the table.

`export` writes one ``<table>.parquet`` (zstd) per table, an empty table included, plus
``_hindsight_export.json``: ``{"format": "hindsight-export", "analyzer_version",
"tables": {name: rows}}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import duckdb
import polars as pl

from analyzer import __version__
from analyzer.errors import HindsightError
from analyzer.names import fs_text
from analyzer.outputs import Outputs, print_to, replacing, write_text
from analyzer.sql import connect_sealed, ident

FORMATS = ("table", "csv", "json", "parquet")
EXPORT_MARKER = "_hindsight_export.json"
FLEET_MARKER = "_hindsight_fleet.json"
SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class QueryError(HindsightError):
    """The SQL failed, or the source cannot be read as analysed tables."""


def is_duckdb_file(path: Path) -> bool:
    """True when ``path`` is a DuckDB database file (magic ``DUCK`` at byte 8)."""
    try:
        with path.open("rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[8:12] == b"DUCK"


@contextlib.contextmanager
def open_source(
    source: Path,
    *,
    progress: Any = None,
    debug: bool = False,
    allow_file_access: bool = False,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose tables are the analysed tables of ``source`` (see module doc).

    The connection cannot touch the file system (`analyzer.sql.connect_sealed`) unless
    ``allow_file_access``: a stranger's database whose views read local files fails with
    a clear error instead of reading them, and the user's SQL cannot read or write files.
    """
    source = Path(source)
    if not source.exists():
        raise QueryError(f"{source}: no such file or directory")
    if source.is_file() and is_duckdb_file(source):
        try:
            con = connect_sealed(source, allow_file_access=allow_file_access)
        except duckdb.Error as e:
            raise QueryError(f"{source}: cannot open the DuckDB database: {e}") from e
        with contextlib.closing(con):
            yield con
        return
    marker = next((m for m in (FLEET_MARKER, EXPORT_MARKER) if (source / m).is_file()), None)
    if source.is_dir() and marker is not None:
        con = connect_sealed(None, allow_file_access=allow_file_access)
        with contextlib.closing(con):
            if marker == FLEET_MARKER:
                attach_fleet_views(con, source)
            else:
                _attach_export_views(con, source)
            yield con
        return
    from analyzer.pipeline import Options, run

    work = Path(tempfile.mkdtemp(prefix="hindsight-query-"))
    try:
        db = work / "analysis.duckdb"
        with stdout_to_stderr():
            started = time.monotonic()
            run(source, Options(db=db, progress=progress, debug=debug))
        took = time.monotonic() - started
        print(
            f"hindsight: note: {fs_text(source.name)} analysed on the fly ({took:.1f} s); to query "
            "it again without that: analyze BUNDLE --db FILE.duckdb, then query FILE.duckdb",
            file=sys.stderr,
        )
        con = connect_sealed(db, allow_file_access=allow_file_access)
        with contextlib.closing(con):
            yield con
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send file descriptor 1 to stderr meanwhile: DuckDB prints its progress bar on the
    process's stdout (C level), which must carry only our results (CSV, JSON...)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no such descriptors (embedded use): nothing to protect
        yield
        return
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _attach_export_views(con: duckdb.DuckDBPyConnection, folder: Path) -> None:
    """Each ``<table>.parquet`` of an export as a table of ``con`` (read by pyarrow, by
    exact path: the connection itself reads no file)."""
    import pyarrow.dataset as ds

    for path in sorted(folder.iterdir()):
        name = path.name.removesuffix(".parquet")
        if path.suffix == ".parquet" and SAFE_NAME.match(name) and _plain_file(path):
            con.register(name, ds.dataset([str(path)], format="parquet"))


def attach_fleet_views(con: duckdb.DuckDBPyConnection, dataset: Path) -> list[str]:
    """One table per table folder of a fleet dataset, ``host`` (VARCHAR) from the
    partition folder ``host=<name>``; columns united by name across hosts."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    names = []
    for folder in sorted(p for p in dataset.iterdir() if p.is_dir() and not p.is_symlink()):
        parts = [
            f
            for host in sorted(folder.iterdir())
            if host.name.startswith("host=") and host.is_dir() and not host.is_symlink()
            for f in sorted(host.iterdir())
            if f.suffix == ".parquet" and _plain_file(f)
        ]
        if not SAFE_NAME.match(folder.name) or not parts:
            continue
        schema = pa.unify_schemas([pq.read_schema(f) for f in parts], promote_options="permissive")
        if "host" in schema.names:
            schema = schema.remove(schema.get_field_index("host"))
        schema = schema.append(pa.field("host", pa.string()))
        hive = ds.partitioning(pa.schema([("host", pa.string())]), flavor="hive")
        data = ds.dataset(
            [str(f) for f in parts],
            schema=schema,
            format="parquet",
            partitioning=hive,
            partition_base_dir=str(folder),
        )
        con.register(folder.name, data)
        names.append(folder.name)
    return names


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Tables and views of the connection's main schema, sorted."""
    rows = con.sql(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY table_name"
    ).fetchall()
    return list(dict.fromkeys(str(r[0]) for r in rows))


#: ``query --tables``: every table and view with its columns and their types, in order
TABLES_SQL = """SELECT table_name AS "table", column_name AS "column", data_type AS "type"
FROM duckdb_columns() WHERE NOT internal AND schema_name = 'main'
ORDER BY table_name, column_index"""


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """The result of ``sql`` (the last statement's) as a frame; empty when it returns none."""
    try:
        rel = con.sql(sql)
        if rel is None:
            return pl.DataFrame()
        try:
            return pl.from_arrow(rel.to_arrow_table())  # type: ignore[return-value]
        except (pl.exceptions.PolarsError, ValueError, TypeError):
            # types polars cannot import (INTERVAL, UNION, BIT...): those columns as text
            exprs = [
                ident(c) if _plain_type(str(t)) else f"CAST({ident(c)} AS VARCHAR) AS {ident(c)}"
                for c, t in zip(rel.columns, rel.types, strict=True)
            ]
            return pl.from_arrow(rel.project(", ".join(exprs)).to_arrow_table())  # type: ignore[return-value]
    except duckdb.Error as e:
        hint = ""
        if isinstance(e, duckdb.PermissionException):
            hint = (
                " (reading or writing files from SQL needs --allow-file-access; docs/security.md)"
            )
        raise QueryError(f"SQL error: {str(e).splitlines()[0][:500]}{hint}") from e


_PLAIN = re.compile(
    r"^(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|DOUBLE|"
    r"VARCHAR|DATE|TIMESTAMP( WITH TIME ZONE)?|DECIMAL\(\d+,\d+\))$"
)


def _plain_type(sql_type: str) -> bool:
    return bool(_PLAIN.match(sql_type.upper()))


def write_result(frame: pl.DataFrame, fmt: str, out: IO[str] | Path | None) -> None:
    """Write ``frame`` in ``fmt`` to ``out`` (a path, a text stream, or stdout when None)."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if isinstance(out, Path) and str(out) == "-":
        out = None
    if fmt == "parquet":
        if not isinstance(out, Path):
            raise QueryError("--format parquet needs an output file (-o FILE.parquet)")
        with replacing(out, "query result") as tmp:  # whole or not at all (outputs.py)
            frame.write_parquet(tmp, compression="zstd")
        return
    if fmt == "table":
        text = format_table(frame)
    elif fmt == "csv":
        text = _flat(frame).write_csv(datetime_format="%Y-%m-%dT%H:%M:%S%.fZ")
    else:
        text = _json_text(frame)
    if isinstance(out, Path):
        write_text(out, text, "query result")
    else:
        print_to(out or sys.stdout, text)


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs) as JSON text: CSV has no nested values."""
    nested = [c for c, t in frame.schema.items() if t.is_nested()]
    if not nested:
        return _utc(frame)
    return _utc(frame).with_columns(
        pl.col(c).map_elements(_dumps, return_dtype=pl.String) for c in nested
    )


def _dumps(value: Any) -> str:
    return json.dumps(value.to_list() if isinstance(value, pl.Series) else value, default=str)


def _utc(frame: pl.DataFrame) -> pl.DataFrame:
    zoned = [c for c, t in frame.schema.items() if isinstance(t, pl.Datetime) and t.time_zone]
    if not zoned:
        return frame
    return frame.with_columns(pl.col(c).dt.convert_time_zone("UTC") for c in zoned)


def _json_text(frame: pl.DataFrame) -> str:
    buf = io.StringIO()
    if frame.width == 0:
        return "[]\n"
    stamps = [c for c, t in frame.schema.items() if isinstance(t, pl.Datetime)]
    _utc(frame).with_columns(
        pl.col(c).dt.to_string("%Y-%m-%dT%H:%M:%S%.fZ") for c in stamps
    ).write_json(buf)
    return buf.getvalue() + "\n"


def format_table(frame: pl.DataFrame) -> str:
    """Every row as aligned text columns (no truncation); a row count at the end.

    >>> print(format_table(pl.DataFrame({"a": [1, None], "b": ["x\\x1b[2J", "yy"]})), end="")
    a    | b
    -----+---------
    1    | x\\x1b[2J
    NULL | yy
    (2 rows)
    """
    if frame.width == 0:
        return "(no result)\n"
    cols = [_cell_strings(frame.get_column(c)) for c in frame.columns]
    heads = [_clean(c) for c in frame.columns]
    widths = [max([len(h), *map(len, col)]) for h, col in zip(heads, cols, strict=True)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    lines.append("-+-".join("-" * w for w in widths))
    for i in range(frame.height):
        cells = [col[i].ljust(w) for col, w in zip(cols, widths, strict=True)]
        lines.append(" | ".join(cells).rstrip())
    n = frame.height
    lines.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(lines) + "\n"


def _cell_strings(series: pl.Series) -> list[str]:
    if isinstance(series.dtype, pl.Datetime) and series.dtype.time_zone:
        series = series.dt.convert_time_zone("UTC")
    if series.dtype.is_nested():
        values = [None if v is None else _dumps(v) for v in series.to_list()]
        strings = pl.Series(values, dtype=pl.String)
    else:
        strings = series.cast(pl.String, strict=False)
    return [
        "NULL" if v is None else _clean(v)
        for v in strings.to_list()  # type: ignore[union-attr]
    ]


def _clean(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def export(
    source: Path,
    out_dir: Path,
    *,
    progress: Any = None,
    debug: bool = False,
    allow_file_access: bool = False,
) -> dict[str, int]:
    """Write every table of ``source`` as ``out_dir/<table>.parquet``; return rows per table.

    ``out_dir`` must be absent, empty, or an earlier export, which is replaced as a whole
    once the new one is complete (a failed export leaves it as it was).
    ``allow_file_access`` as in `open_source`.
    """
    opened = {"progress": progress, "debug": debug, "allow_file_access": allow_file_access}
    with Outputs([source]) as out:  # built beside out_dir, swapped in when complete
        tmp = out.add_dir(Path(out_dir), "export", EXPORT_MARKER)
        with open_source(source, **opened) as con:
            counts = export_tables(con, tmp)
        doc = {"format": "hindsight-export", "analyzer_version": __version__, "tables": counts}
        (tmp / EXPORT_MARKER).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        out.commit()
    return counts


def export_tables(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    *,
    file_name: str | None = None,
    rename: dict[str, str] | None = None,
) -> dict[str, int]:
    """Write each table to ``out_dir/<table>.parquet`` (or ``out_dir/<table>/<file_name>``).

    The rows stream from DuckDB to pyarrow's Parquet writer (zstd) batch by batch, into a
    temporary name renamed into place once complete: the connection itself writes no file.
    ``rename`` maps column names to the names written (in every table that has them).
    Tables whose name is not a plain identifier are not written (a hand-made database
    could hold ``../x``); they are listed with -1 rows.
    """
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    for name in tables(con):
        if not SAFE_NAME.match(name):
            counts[name] = -1
            continue
        if file_name is None:
            target = out_dir / f"{name}.parquet"
        else:
            (out_dir / name).mkdir(parents=True, exist_ok=True)
            target = out_dir / name / file_name
        cols = [r[0] for r in con.sql(f"DESCRIBE {ident(name)}").fetchall()]
        select = ", ".join(
            f"{ident(c)} AS {ident(rename[c])}" if rename and c in rename else ident(c)
            for c in cols
        )
        reader = con.sql(f"SELECT {select} FROM {ident(name)}").to_arrow_reader()
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        rows = 0
        try:
            with pq.ParquetWriter(tmp, reader.schema, compression="zstd") as writer:
                for batch in reader:
                    writer.write_batch(batch)
                    rows += batch.num_rows
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        counts[name] = rows
    return counts


def prepare_output_dir(path: Path, marker: str) -> None:
    """Create ``path``; an existing one must be empty or hold ``marker`` (then it is cleared)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise HindsightError(f"{path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not (path / marker).is_file():
            raise HindsightError(
                f"{path}: directory is not empty and was not written by hindsight; choose another"
            )
        for child in path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    path.mkdir(parents=True, exist_ok=True)
